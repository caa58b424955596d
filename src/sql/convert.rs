//! `snowflake_convert_column(tbl regclass, col name, dry_run boolean DEFAULT true)`:
//! converts a column fed by `serial`/`bigserial`, an identity or a
//! `nextval()` default to `DEFAULT snowflake_next()`, widening it and every
//! column that references it to `bigint`.
//!
//! This module reads the catalog through SPI and runs the DDL; what to run is
//! decided by the pure planner in [`crate::core::convert`]. Everything runs
//! in the caller's transaction (one statement when called alone), so an
//! error anywhere undoes all of it. Unless `dry_run`, the table is locked in
//! ACCESS EXCLUSIVE mode before anything is read (and the referencing tables
//! before theirs), so no insert can slip between the checks and the DDL:
//! concurrent inserts wait, then use the new default.

use crate::core::convert::{self, ColumnRef, Facts, RelationKind};
use crate::pg::backend::first_id_above;
use crate::pg::errors::{raise, Error};
use pgrx::callconv::{Arg, ArgAbi};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;
use pgrx::spi::SpiClient;
use std::ffi::CStr;

/// A `regclass` argument: just the OID. (pgrx's `PgRelation` would keep the
/// relation open, and ALTER TABLE refuses a table this session has open.)
#[derive(Debug, Clone, Copy)]
pub struct RegClass(pg_sys::Oid);

impl FromDatum for RegClass {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        typoid: pg_sys::Oid,
    ) -> Option<Self> {
        // SAFETY: per FromDatum's contract, `datum` and `is_null` are an argument
        // of type `regclass`, an Oid passed by value, which is how Oid's own
        // impl reads it.
        unsafe { pg_sys::Oid::from_polymorphic_datum(datum, is_null, typoid) }.map(RegClass)
    }
}

// SAFETY: unboxes the argument through FromDatum above, as pgrx's own
// by-value types do; the argument's SQL type is `regclass` (see
// SqlTranslatable below), an Oid.
unsafe impl<'fcx> ArgAbi<'fcx> for RegClass {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        // SAFETY: per this trait method's contract, `arg` is this function's
        // argument of the type SqlTranslatable declares, `regclass`.
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(null_argument)
    }
}

// SAFETY: the SQL type is `regclass`, whose datum is an Oid, which is
// what FromDatum above reads.
unsafe impl SqlTranslatable for RegClass {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(RegClass);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        Ok(SqlMappingRef::literal("regclass"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        Ok(ReturnsRef::One(SqlMappingRef::literal("regclass")));
}

/// A `name` argument (a fixed-size, NUL-terminated identifier).
#[derive(Debug, Clone)]
pub struct SqlName(String);

impl FromDatum for SqlName {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        let ptr = datum.cast_mut_ptr::<pg_sys::NameData>();
        if is_null || ptr.is_null() {
            return None;
        }
        // SAFETY: a non-null `name` datum points to a NameData, whose bytes
        // are NUL-terminated (NAMEDATALEN includes the terminator).
        let s = unsafe { CStr::from_ptr((*ptr).data.as_ptr()) };
        Some(SqlName(s.to_string_lossy().into_owned()))
    }
}

// SAFETY: unboxes the argument through FromDatum above; the argument's SQL
// type is `name` (see SqlTranslatable below), passed by reference to a
// NameData.
unsafe impl<'fcx> ArgAbi<'fcx> for SqlName {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        // SAFETY: per this trait method's contract, `arg` is this function's
        // argument of the type SqlTranslatable declares, `name`.
        unsafe { arg.unbox_arg_using_from_datum() }.unwrap_or_else(null_argument)
    }
}

// SAFETY: the SQL type is `name`, whose datum points to a NameData, which
// is what FromDatum above reads.
unsafe impl SqlTranslatable for SqlName {
    const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!(SqlName);
    const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = Ok(SqlMappingRef::literal("name"));
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
        Ok(ReturnsRef::One(SqlMappingRef::literal("name")));
}

/// The function is STRICT, so PostgreSQL never passes a NULL; just in case.
fn null_argument<T>() -> T {
    raise(Error::ConvertNullArgument)
}

fn spi_failed(e: pgrx::spi::SpiError) -> ! {
    raise(e)
}

/// How `pg_class` describes a relation, as the planner wants it.
const RELATION_KIND_SQL: &str = "CASE
    WHEN c.relispartition THEN 'partition'
    WHEN c.relkind = 'p' THEN 'partitioned'
    WHEN c.relkind = 'r' AND EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid) THEN 'inheritance'
    WHEN c.relkind = 'r' THEN 'table'
    ELSE c.relkind::text END";

fn relation_kind(s: &str) -> RelationKind {
    match s {
        "partition" => RelationKind::Partition,
        "partitioned" => RelationKind::Partitioned,
        "inheritance" => RelationKind::Inheritance,
        "table" => RelationKind::Table,
        other => RelationKind::Other(other.to_string()),
    }
}

/// Whether column `a` of relation `c` is in `c`'s partition key.
const IN_PARTITION_KEY_SQL: &str =
    "EXISTS (SELECT 1 FROM pg_partitioned_table pt WHERE pt.partrelid = c.oid AND a.attnum = ANY (pt.partattrs::int2[]))";

/// One column: `(oid, attnum)` plus what [`ColumnRef`] holds.
struct CatalogColumn {
    rel: pg_sys::Oid,
    attnum: i16,
    col: ColumnRef,
}

fn target_column(client: &SpiClient<'_>, rel: pg_sys::Oid, column: &str) -> (CatalogColumn, Facts) {
    let sql = format!(
        "SELECT format('%I.%I', n.nspname, c.relname), quote_ident(a.attname), format_type(a.atttypid, a.atttypmod),
                {RELATION_KIND_SQL}, a.attnum, nullif(a.attidentity, '')::text, a.attgenerated <> '',
                pg_get_expr(d.adbin, d.adrelid),
                (SELECT format('%I.%I', sn.nspname, s.relname)
                   FROM pg_depend dep
                   JOIN pg_class s ON s.oid = dep.objid AND s.relkind = 'S'
                   JOIN pg_namespace sn ON sn.oid = s.relnamespace
                  WHERE dep.classid = 'pg_class'::regclass AND dep.refclassid = 'pg_class'::regclass
                    AND dep.refobjid = c.oid AND dep.refobjsubid = a.attnum AND dep.deptype = 'a'
                  ORDER BY s.oid LIMIT 1),
                (SELECT format('%I', en.nspname) FROM pg_extension e JOIN pg_namespace en ON en.oid = e.extnamespace
                  WHERE e.extname = 'snowflake_id'),
                {IN_PARTITION_KEY_SQL}
           FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
           LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
          WHERE c.oid = $1"
    );
    let table = client
        .select(&sql, Some(1), &[rel.into(), column.into()])
        .unwrap_or_else(|e| spi_failed(e));
    let Some(row) = table.into_iter().next() else {
        raise(Error::RelationGone { oid: rel.to_u32() })
    };
    let get_s = |i: usize| row.get::<String>(i).unwrap_or_else(|e| spi_failed(e));
    let table_name = get_s(1).unwrap_or_default();
    let Some(attnum) = row.get::<i16>(5).unwrap_or_else(|e| spi_failed(e)) else {
        raise(Error::NoSuchColumn {
            column: column.to_string(),
            table: table_name,
        })
    };
    let Some(ext_schema) = get_s(10) else {
        raise(Error::ExtensionNotInstalled)
    };
    let col = ColumnRef {
        table: table_name,
        column: get_s(2).unwrap_or_default(),
        type_name: get_s(3).unwrap_or_default(),
        kind: relation_kind(&get_s(4).unwrap_or_default()),
        in_partition_key: row
            .get::<bool>(11)
            .unwrap_or_else(|e| spi_failed(e))
            .unwrap_or(false),
    };
    let facts = Facts {
        target: col.clone(),
        identity: get_s(6).and_then(|s| s.chars().next()),
        generated: row
            .get::<bool>(7)
            .unwrap_or_else(|e| spi_failed(e))
            .unwrap_or(false),
        default_expr: get_s(8),
        owned_sequence: get_s(9),
        snowflake_next: format!("{ext_schema}.snowflake_next()"),
        max_value: None,
        first_new_id: 0,
        referencing: vec![],
    };
    (CatalogColumn { rel, attnum, col }, facts)
}

/// The columns whose foreign keys reference `(rel, attnum)` directly. A
/// foreign key declared on a partitioned table is listed once, for the
/// partitioned table (its clones on the partitions have a `conparentid`).
fn referencing_columns(
    client: &SpiClient<'_>,
    rel: pg_sys::Oid,
    attnum: i16,
) -> Vec<CatalogColumn> {
    let sql = format!(
        "SELECT DISTINCT c.oid, k.attnum, format('%I.%I', n.nspname, c.relname), format('%I', a.attname),
                format_type(a.atttypid, a.atttypmod), {RELATION_KIND_SQL}, {IN_PARTITION_KEY_SQL}
           FROM pg_constraint con
           CROSS JOIN LATERAL unnest(con.conkey, con.confkey) AS k(attnum, refnum)
           JOIN pg_class c ON c.oid = con.conrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
          WHERE con.contype = 'f' AND con.confrelid = $1 AND k.refnum = $2 AND con.conparentid = 0
          ORDER BY c.oid, k.attnum"
    );
    let table = client
        .select(&sql, None, &[rel.into(), attnum.into()])
        .unwrap_or_else(|e| spi_failed(e));
    table
        .into_iter()
        .filter_map(|row| {
            let get_s = |i: usize| {
                row.get::<String>(i)
                    .unwrap_or_else(|e| spi_failed(e))
                    .unwrap_or_default()
            };
            Some(CatalogColumn {
                rel: row.get::<pg_sys::Oid>(1).ok()??,
                attnum: row.get::<i16>(2).ok()??,
                col: ColumnRef {
                    table: get_s(3),
                    column: get_s(4),
                    type_name: get_s(5),
                    kind: relation_kind(&get_s(6)),
                    in_partition_key: row.get::<bool>(7).ok()??,
                },
            })
        })
        .collect()
}

fn lock(table: &str) {
    Spi::run(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
        .unwrap_or_else(|e| spi_failed(e));
}

/// Converts `tbl.col` to `DEFAULT snowflake_next()` (see the README). Returns
/// the statements, in order; with `dry_run` (the default) only returns them.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_convert_column(
    tbl: RegClass,
    col: SqlName,
    dry_run: default!(bool, true),
) -> SetOfIterator<'static, String> {
    let rel = tbl.0;
    // The column's largest value is read after the lock, under a snapshot
    // taken after it: at READ COMMITTED each statement takes a new one; a
    // REPEATABLE READ or SERIALIZABLE transaction keeps the one it took
    // first, which may miss rows committed before the lock.
    // SAFETY: XactIsoLevel is this backend's plain int global (single-threaded
    // process), set for the current transaction.
    if !dry_run && unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        raise(Error::ConvertNeedsReadCommitted);
    }
    // The table first: once it is locked, no foreign key to it can be added
    // or dropped, and no row can be written, until the transaction ends.
    if !dry_run {
        let name = Spi::get_one_with_args::<String>(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1 AND c.relkind IN ('r', 'p')",
            &[rel.into()],
        )
        .unwrap_or_else(|e| spi_failed(e));
        if let Some(name) = name {
            lock(&name);
        }
    }
    let (target, mut facts) = Spi::connect(|client| target_column(client, rel, &col.0));

    // Foreign keys referencing the column, then those referencing these
    // (a chain of unique foreign key columns), locking each table before
    // reading what references it.
    let mut seen: Vec<(pg_sys::Oid, i16)> = vec![(target.rel, target.attnum)];
    let mut queue = vec![(target.rel, target.attnum)];
    let mut locked: Vec<pg_sys::Oid> = vec![target.rel];
    while let Some((r, a)) = queue.pop() {
        let found = Spi::connect(|client| referencing_columns(client, r, a));
        for c in found {
            if seen.contains(&(c.rel, c.attnum)) {
                continue;
            }
            if !dry_run && !locked.contains(&c.rel) {
                lock(&c.col.table);
                locked.push(c.rel);
            }
            seen.push((c.rel, c.attnum));
            queue.push((c.rel, c.attnum));
            facts.referencing.push(c.col);
        }
    }

    if convert::IntType::from_type_name(&facts.target.type_name).is_some() {
        facts.max_value = Spi::get_one::<i64>(&format!(
            "SELECT max({})::bigint FROM {}",
            facts.target.column, facts.target.table
        ))
        .unwrap_or_else(|e| spi_failed(e));
        facts.first_new_id = first_id_above(facts.max_value, !dry_run);
    }

    let plan = convert::plan(&facts).unwrap_or_else(|e| raise(e));
    if plan.statements.is_empty() {
        pgrx::notice!(
            "snowflake_id: {}.{} already has DEFAULT snowflake_next() and nothing to widen: nothing to do",
            facts.target.table,
            facts.target.column
        );
    }
    if !dry_run {
        for statement in &plan.statements {
            Spi::run(statement).unwrap_or_else(|e| spi_failed(e));
        }
    }
    SetOfIterator::new(plan.statements)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // Runs inside the `cargo pgrx test` server (node id 42), each test in a
    // transaction that is rolled back.
    use crate::test_support::{error_of, one, run};
    use pgrx::prelude::*;

    /// The statements `snowflake_convert_column` returns, one string.
    fn convert(table: &str, column: &str, dry_run: bool) -> String {
        one::<String>(&format!(
            "SELECT coalesce(string_agg(s, E'\\n'), '') FROM snowflake_convert_column('{table}', '{column}', {dry_run}) s"
        ))
    }

    fn type_of(table: &str, column: &str) -> String {
        one(&format!(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attname = '{column}'"
        ))
    }

    fn default_of(table: &str, column: &str) -> String {
        one(&format!(
            "SELECT coalesce(pg_get_expr(d.adbin, d.adrelid), '') FROM pg_attribute a
               LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
              WHERE a.attrelid = '{table}'::regclass AND a.attname = '{column}'"
        ))
    }

    #[pg_test]
    fn serial_column_with_foreign_keys() {
        run("CREATE TABLE orders (id serial PRIMARY KEY, parent_id int REFERENCES orders, item text)");
        run("CREATE TABLE items (id bigserial PRIMARY KEY, order_id int NOT NULL REFERENCES orders, note text)");
        run("INSERT INTO orders (item) SELECT 'o' || g FROM generate_series(1, 100) g");
        run("UPDATE orders SET parent_id = id - 1 WHERE id > 1");
        run("INSERT INTO items (order_id) SELECT id FROM orders");
        let before: String = one(
            "SELECT string_agg(id || ':' || coalesce(parent_id, 0), ',' ORDER BY id) FROM orders",
        );

        // A dry run changes nothing.
        let ddl = convert("orders", "id", true);
        assert_eq!(
            ddl,
            "LOCK TABLE public.orders, public.items IN ACCESS EXCLUSIVE MODE\n\
             ALTER TABLE public.orders ALTER COLUMN id TYPE bigint, ALTER COLUMN parent_id TYPE bigint\n\
             ALTER TABLE public.items ALTER COLUMN order_id TYPE bigint\n\
             ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()\n\
             ALTER SEQUENCE public.orders_id_seq OWNED BY NONE"
        );
        assert_eq!(type_of("orders", "id"), "integer");
        assert_eq!(
            default_of("orders", "id"),
            "nextval('orders_id_seq'::regclass)"
        );

        // The real run runs the same statements.
        assert_eq!(convert("orders", "id", false), ddl);
        assert_eq!(type_of("orders", "id"), "bigint");
        assert_eq!(type_of("orders", "parent_id"), "bigint");
        assert_eq!(type_of("items", "order_id"), "bigint");
        assert_eq!(default_of("orders", "id"), "snowflake_next()");
        // Existing values are kept; the sequence is kept but no longer owned.
        assert_eq!(
            one::<String>("SELECT string_agg(id || ':' || coalesce(parent_id, 0), ',' ORDER BY id) FROM orders"),
            before
        );
        assert_eq!(
            one::<i64>("SELECT count(*) FROM items i JOIN orders o ON o.id = i.order_id"),
            100
        );
        assert!(one::<bool>("SELECT pg_get_serial_sequence('orders', 'id') IS NULL AND to_regclass('orders_id_seq') IS NOT NULL"));
        // New rows get snowflake IDs, above every old one, and FKs still work.
        run("INSERT INTO orders (item) VALUES ('new')");
        assert!(one::<bool>(
            "SELECT snowflake_node(id) = 42 AND id > 100 FROM orders WHERE item = 'new'"
        ));
        run("INSERT INTO items (order_id) SELECT id FROM orders WHERE item = 'new'");
        let (state, _, _) = error_of("INSERT INTO items (order_id) VALUES (9223372036854775807)");
        assert_eq!(state, "23503", "the foreign key is still enforced");

        // Running it again finds nothing to do.
        assert_eq!(convert("orders", "id", false), "");
    }

    #[pg_test]
    fn bigserial_column() {
        run("CREATE TABLE bs (id bigserial PRIMARY KEY, v int)");
        run("INSERT INTO bs (v) VALUES (1), (2)");
        assert_eq!(
            convert("bs", "id", false),
            "LOCK TABLE public.bs IN ACCESS EXCLUSIVE MODE\n\
             ALTER TABLE public.bs ALTER COLUMN id SET DEFAULT public.snowflake_next()\n\
             ALTER SEQUENCE public.bs_id_seq OWNED BY NONE"
        );
        assert_eq!(
            one::<String>("SELECT string_agg(id::text, ',' ORDER BY id) FROM bs"),
            "1,2"
        );
        run("INSERT INTO bs (v) VALUES (3)");
        assert!(one::<bool>("SELECT id > 2 FROM bs WHERE v = 3"));
    }

    #[pg_test]
    fn identity_columns() {
        for kind in ["ALWAYS", "BY DEFAULT"] {
            run("DROP TABLE IF EXISTS idt");
            run(&format!(
                "CREATE TABLE idt (id int GENERATED {kind} AS IDENTITY PRIMARY KEY, v int)"
            ));
            run("INSERT INTO idt (v) VALUES (1), (2)");
            assert_eq!(
                convert("idt", "id", false),
                "LOCK TABLE public.idt IN ACCESS EXCLUSIVE MODE\n\
                 ALTER TABLE public.idt ALTER COLUMN id DROP IDENTITY\n\
                 ALTER TABLE public.idt ALTER COLUMN id TYPE bigint\n\
                 ALTER TABLE public.idt ALTER COLUMN id SET DEFAULT public.snowflake_next()",
                "{kind}"
            );
            assert!(one::<bool>("SELECT attidentity = '' FROM pg_attribute WHERE attrelid = 'idt'::regclass AND attname = 'id'"));
            assert!(
                one::<bool>("SELECT to_regclass('idt_id_seq') IS NULL"),
                "the identity's sequence is gone"
            );
            assert_eq!(
                one::<String>("SELECT string_agg(id::text, ',' ORDER BY id) FROM idt"),
                "1,2"
            );
            // Explicit values are now accepted, and the default issues IDs.
            run("INSERT INTO idt (id, v) VALUES (3, 3)");
            run("INSERT INTO idt (v) VALUES (4)");
            assert!(one::<bool>(
                "SELECT snowflake_node(id) = 42 FROM idt WHERE v = 4"
            ));
        }
    }

    #[pg_test]
    fn nextval_defaults_without_ownership_or_dependency() {
        // A shared sequence, not owned by the column; nextval('s'::text)
        // records no dependency on it; the pre-8.1 form neither.
        run("CREATE SEQUENCE shared_seq");
        for (i, default) in [
            "nextval('shared_seq'::regclass)",
            "nextval('shared_seq'::text)",
            "nextval(('shared_seq'::text)::regclass)",
        ]
        .iter()
        .enumerate()
        {
            let table = format!("nv{i}");
            run(&format!(
                "CREATE TABLE {table} (id bigint PRIMARY KEY DEFAULT {default}, v int)"
            ));
            run(&format!("INSERT INTO {table} (v) VALUES (1)"));
            assert_eq!(
                convert(&table, "id", false),
                format!(
                    "LOCK TABLE public.{table} IN ACCESS EXCLUSIVE MODE\n\
                     ALTER TABLE public.{table} ALTER COLUMN id SET DEFAULT public.snowflake_next()"
                ),
                "{default}"
            );
            assert_eq!(default_of(&table, "id"), "snowflake_next()");
        }
        // The shared sequence is untouched.
        assert_eq!(one::<i64>("SELECT nextval('shared_seq')"), 4);
    }

    #[pg_test]
    fn column_without_default_and_quoted_names() {
        run("CREATE SCHEMA \"My Schema\"");
        run("CREATE TABLE \"My Schema\".\"Odd Table\" (\"Id\" integer PRIMARY KEY)");
        run("INSERT INTO \"My Schema\".\"Odd Table\" VALUES (7)");
        assert_eq!(
            convert("\"My Schema\".\"Odd Table\"", "Id", false),
            "LOCK TABLE \"My Schema\".\"Odd Table\" IN ACCESS EXCLUSIVE MODE\n\
             ALTER TABLE \"My Schema\".\"Odd Table\" ALTER COLUMN \"Id\" TYPE bigint\n\
             ALTER TABLE \"My Schema\".\"Odd Table\" ALTER COLUMN \"Id\" SET DEFAULT public.snowflake_next()"
        );
        run("INSERT INTO \"My Schema\".\"Odd Table\" DEFAULT VALUES");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM \"My Schema\".\"Odd Table\""),
            2
        );
    }

    #[pg_test]
    fn foreign_key_chains_and_partitioned_tables() {
        // ch_a.id <- ch_b.a_id (part of a unique key) <- ch_c.b_a_id, where
        // ch_b is partitioned and ch_c's foreign key has two columns.
        run("CREATE TABLE ch_a (id serial PRIMARY KEY)");
        run("CREATE TABLE ch_b (a_id int REFERENCES ch_a, region int, PRIMARY KEY (a_id, region)) PARTITION BY LIST (region)");
        run("CREATE TABLE ch_b1 PARTITION OF ch_b FOR VALUES IN (1)");
        run("CREATE TABLE ch_c (b_a_id int, region int, FOREIGN KEY (b_a_id, region) REFERENCES ch_b)");
        run("INSERT INTO ch_a SELECT g FROM generate_series(1, 10) g");
        run("INSERT INTO ch_b SELECT id, 1 FROM ch_a");
        run("INSERT INTO ch_c SELECT a_id, region FROM ch_b");
        assert_eq!(
            convert("ch_a", "id", false),
            "LOCK TABLE public.ch_a, public.ch_b, public.ch_c IN ACCESS EXCLUSIVE MODE\n\
             ALTER TABLE public.ch_a ALTER COLUMN id TYPE bigint\n\
             ALTER TABLE public.ch_b ALTER COLUMN a_id TYPE bigint\n\
             ALTER TABLE public.ch_c ALTER COLUMN b_a_id TYPE bigint\n\
             ALTER TABLE public.ch_a ALTER COLUMN id SET DEFAULT public.snowflake_next()\n\
             ALTER SEQUENCE public.ch_a_id_seq OWNED BY NONE"
        );
        assert_eq!(type_of("ch_b1", "a_id"), "bigint");
        assert_eq!(type_of("ch_c", "b_a_id"), "bigint");
        assert_eq!(type_of("ch_c", "region"), "integer");
        run("INSERT INTO ch_a DEFAULT VALUES");
        run("INSERT INTO ch_b SELECT max(id), 1 FROM ch_a");
        run("INSERT INTO ch_c SELECT max(a_id), 1 FROM ch_b");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM ch_c WHERE snowflake_node(b_a_id) = 42"),
            1
        );

        // A partitioned parent fed by a bigserial (partitioned by the ID):
        // the default reaches every partition.
        run("CREATE TABLE ch_p (id bigserial, v int) PARTITION BY HASH (id)");
        run("CREATE TABLE ch_p0 PARTITION OF ch_p FOR VALUES WITH (MODULUS 2, REMAINDER 0)");
        run("CREATE TABLE ch_p1 PARTITION OF ch_p FOR VALUES WITH (MODULUS 2, REMAINDER 1)");
        run("INSERT INTO ch_p (v) SELECT g FROM generate_series(1, 10) g");
        convert("ch_p", "id", false);
        assert_eq!(default_of("ch_p0", "id"), "snowflake_next()");
        assert_eq!(default_of("ch_p1", "id"), "snowflake_next()");
        run("INSERT INTO ch_p (v) VALUES (11)");
        assert!(one::<bool>(
            "SELECT snowflake_node(id) = 42 FROM ch_p WHERE v = 11"
        ));
        assert_eq!(one::<i64>("SELECT count(*) FROM ch_p"), 11);
    }

    #[pg_test]
    fn refusals_have_sqlstates() {
        run("CREATE TABLE r_txt (id text PRIMARY KEY DEFAULT 'x')");
        run("CREATE TABLE r_big (id bigint PRIMARY KEY)");
        run("INSERT INTO r_big VALUES (9223372036854775807)");
        run("CREATE VIEW r_v AS SELECT 1 AS id");
        run("CREATE TABLE r_other (id int DEFAULT 0)");
        run("CREATE TABLE r_p (id serial) PARTITION BY RANGE (id)");
        run("CREATE TABLE r_p1 PARTITION OF r_p FOR VALUES FROM (0) TO (10)");
        run("CREATE TABLE r_pi (id int GENERATED ALWAYS AS IDENTITY) PARTITION BY RANGE (id)");
        run("CREATE TABLE r_inh_parent (id serial)");
        run("CREATE TABLE r_inh_child () INHERITS (r_inh_parent)");
        for (sql, state, fragment) in [
            (
                "PERFORM snowflake_convert_column('r_txt', 'id')",
                "42804",
                "is of type text",
            ),
            (
                "PERFORM snowflake_convert_column('r_big', 'id', false)",
                "55000",
                "already holds values up to 9223372036854775807",
            ),
            (
                "PERFORM snowflake_convert_column('r_v', 'id')",
                "42809",
                "is not a table",
            ),
            (
                "PERFORM snowflake_convert_column('r_other', 'id')",
                "0A000",
                "has the default 0",
            ),
            (
                "PERFORM snowflake_convert_column('r_p1', 'id', false)",
                "42809",
                "is a partition",
            ),
            (
                "PERFORM snowflake_convert_column('r_p', 'id', false)",
                "0A000",
                "part of the partition key",
            ),
            (
                "PERFORM snowflake_convert_column('r_pi', 'id', false)",
                "0A000",
                "identity column of a partitioned table",
            ),
            (
                "PERFORM snowflake_convert_column('r_inh_parent', 'id', false)",
                "0A000",
                "inheritance",
            ),
            (
                "PERFORM snowflake_convert_column('r_big', 'nope')",
                "42703",
                "column \"nope\" of relation public.r_big does not exist",
            ),
            (
                "PERFORM snowflake_convert_column('no_such_table', 'id')",
                "42P01",
                "no_such_table",
            ),
        ] {
            let (s, m, _) = error_of(sql);
            assert_eq!(s, state, "{sql}: {m}");
            assert!(m.contains(fragment), "{sql}: {m}");
        }
        // Refused conversions change nothing.
        assert_eq!(type_of("r_p1", "id"), "integer");
        assert_eq!(
            default_of("r_inh_parent", "id"),
            "nextval('r_inh_parent_id_seq'::regclass)"
        );
    }

    #[pg_test]
    fn an_error_in_the_ddl_undoes_everything() {
        // A view on the column makes ALTER TYPE fail after DROP IDENTITY ran.
        run("CREATE TABLE undo_t (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY)");
        run("CREATE VIEW undo_v AS SELECT id FROM undo_t");
        let (s, m, _) = error_of("PERFORM snowflake_convert_column('undo_t', 'id', false)");
        assert_eq!(s, "0A000", "{m}");
        assert!(m.contains("view"), "{m}");
        assert!(one::<bool>("SELECT attidentity = 'a' FROM pg_attribute WHERE attrelid = 'undo_t'::regclass AND attname = 'id'"));
        assert_eq!(type_of("undo_t", "id"), "integer");
    }

    #[pg_test]
    fn signature_and_default_dry_run() {
        assert_eq!(
            one::<String>("SELECT pg_get_function_arguments('snowflake_convert_column'::regproc)"),
            "tbl regclass, col name, dry_run boolean DEFAULT true"
        );
        run("CREATE TABLE sig_t (id serial)");
        assert_eq!(
            one::<i64>("SELECT count(*) FROM snowflake_convert_column('sig_t', 'id')"),
            4
        );
        assert_eq!(
            default_of("sig_t", "id"),
            "nextval('sig_t_id_seq'::regclass)"
        );
    }
}
