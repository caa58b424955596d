//! Planning `snowflake_convert_column`: from what the catalog says about a
//! column (its type, default, identity, owned sequence, the foreign keys that
//! reference it, its largest value), the DDL that makes it take its values
//! from `snowflake_next()`, or the reason it cannot be converted.
//!
//! The SQL layer (`crate::convert`) reads the catalog under the locks, calls
//! [`plan`], and runs the statements in order, in the caller's transaction.
//! Everything here is pure, so every case is unit-tested without a server.
//!
//! Statements, in order (each only when needed):
//! 1. `LOCK TABLE <table>, <referencing tables> IN ACCESS EXCLUSIVE MODE`;
//! 2. `ALTER TABLE <table> ALTER COLUMN <col> DROP IDENTITY` (identity
//!    columns: this also drops the identity's internal sequence);
//! 3. `ALTER TABLE <t> ALTER COLUMN <c> TYPE bigint, ...`: one statement per
//!    table for the column and every `smallint`/`integer` column that
//!    references it through a foreign key (directly or through a chain of
//!    foreign keys), so that each table is rewritten once;
//! 4. `ALTER TABLE <table> ALTER COLUMN <col> SET DEFAULT <schema>.snowflake_next()`;
//! 5. `ALTER SEQUENCE <seq> OWNED BY NONE` for a sequence the column owned
//!    (`serial`, `bigserial`, `OWNED BY`): the sequence is kept, unowned, so
//!    code that still calls `nextval()` on it keeps working.

use std::collections::BTreeMap;
use std::fmt;

/// The integer types a converted column can have before the conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    Smallint,
    Integer,
    Bigint,
}

impl IntType {
    /// The type named by `format_type()` (`smallint`, `integer`, `bigint`).
    pub fn from_type_name(name: &str) -> Option<IntType> {
        match name {
            "smallint" => Some(IntType::Smallint),
            "integer" => Some(IntType::Integer),
            "bigint" => Some(IntType::Bigint),
            _ => None,
        }
    }
}

/// What kind of relation the column is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelationKind {
    /// An ordinary table, not a partition, without inheritance.
    Table,
    /// A partitioned table (the parent): DDL on it recurses to the partitions.
    Partitioned,
    /// A partition: its parent must be converted instead.
    Partition,
    /// An ordinary table with an inheritance parent or children.
    Inheritance,
    /// Anything else (view, materialized view, foreign table, ...), with
    /// `pg_class.relkind`.
    Other(String),
}

/// A column, as the catalog describes it. Names are already quoted and
/// schema-qualified for use in DDL (`format('%I.%I', ...)`, `%I`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRef {
    pub table: String,
    pub column: String,
    /// `format_type()` of the column's type.
    pub type_name: String,
    pub kind: RelationKind,
    /// The column is part of its table's partition key (PostgreSQL cannot
    /// change its type).
    pub in_partition_key: bool,
}

impl ColumnRef {
    fn int_type(&self) -> Option<IntType> {
        IntType::from_type_name(&self.type_name)
    }
}

/// Everything [`plan`] needs to know about the column to convert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub target: ColumnRef,
    /// `pg_attribute.attidentity`: `Some('a')` (ALWAYS), `Some('d')` (BY DEFAULT).
    pub identity: Option<char>,
    /// A generated column (`GENERATED ALWAYS AS (...) STORED`).
    pub generated: bool,
    /// `pg_get_expr()` of the default, if any.
    pub default_expr: Option<String>,
    /// A sequence owned by the column (`serial`, `OWNED BY`), quoted and
    /// qualified; not an identity's internal sequence.
    pub owned_sequence: Option<String>,
    /// The schema-qualified call of `snowflake_next()` to use as default.
    pub snowflake_next: String,
    /// The largest value in the column (`None` when the table is empty).
    pub max_value: Option<i64>,
    /// The smallest ID any node can issue from now on
    /// (after the generator's last pair, and not before the current millisecond).
    pub first_new_id: i64,
    /// Columns that reference the target through foreign keys, directly or
    /// through a chain of foreign keys.
    pub referencing: Vec<ColumnRef>,
}

/// Where the column's values came from before the conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `GENERATED ALWAYS AS IDENTITY` (`always`) or `BY DEFAULT`.
    Identity { always: bool },
    /// A `nextval('...')` default. `owned` is the sequence the column owns,
    /// if any (`serial`/`bigserial` or `OWNED BY`; an explicit `nextval()`
    /// default has none).
    Sequence {
        sequence: String,
        owned: Option<String>,
    },
    /// No default: the application supplied the values.
    NoDefault,
    /// Already `DEFAULT snowflake_next()`.
    Snowflake,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Identity { always: true } => f.write_str("identity column (GENERATED ALWAYS)"),
            Source::Identity { always: false } => {
                f.write_str("identity column (GENERATED BY DEFAULT)")
            }
            Source::Sequence {
                sequence,
                owned: Some(_),
            } => write!(
                f,
                "serial column (sequence {sequence}, owned by the column)"
            ),
            Source::Sequence {
                sequence,
                owned: None,
            } => write!(
                f,
                "nextval() default (sequence {sequence}, not owned by the column)"
            ),
            Source::NoDefault => f.write_str("column without default"),
            Source::Snowflake => f.write_str("column already converted"),
        }
    }
}

/// The outcome of [`plan`]: what the column was and the statements to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub source: Source,
    /// Empty when there is nothing to do.
    pub statements: Vec<String>,
}

/// Why a column cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("{table} is not a table (relkind '{relkind}')")]
    NotATable { table: String, relkind: String },
    #[error("{table} is a partition")]
    Partition { table: String },
    #[error("{table} has inheritance parents or children")]
    Inheritance { table: String },
    #[error("{table}.{column} is an identity column of a partitioned table")]
    PartitionedIdentity { table: String, column: String },
    #[error("{table}.{column} is of type {type_name}, not an integer type")]
    NotInteger {
        table: String,
        column: String,
        type_name: String,
    },
    #[error("{table}.{column} is a generated column")]
    Generated { table: String, column: String },
    #[error("{table}.{column} has the default {default}, which is not a sequence")]
    UnsupportedDefault {
        table: String,
        column: String,
        default: String,
    },
    #[error("{table}.{column} already holds values up to {max}, at or above the IDs snowflake_next() issues from now on ({first_new_id})")]
    ValuesTooLarge {
        table: String,
        column: String,
        max: i64,
        first_new_id: i64,
    },
    #[error("{table}.{column} is part of the partition key of {table} and would have to be widened to bigint")]
    PartitionKey { table: String, column: String },
    #[error("{table}.{column} references the converted column but {table} is a partition whose own foreign key cannot be widened alone")]
    ReferencingPartition { table: String, column: String },
}

/// What kind of error, for the SQLSTATE the SQL layer reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `42809` wrong_object_type.
    WrongObject,
    /// `42804` datatype_mismatch.
    WrongType,
    /// `0A000` feature_not_supported.
    NotSupported,
    /// `55000` object_not_in_prerequisite_state.
    State,
}

impl ConvertError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ConvertError::NotATable { .. } | ConvertError::Partition { .. } => {
                ErrorKind::WrongObject
            }
            ConvertError::NotInteger { .. } => ErrorKind::WrongType,
            ConvertError::Inheritance { .. }
            | ConvertError::PartitionedIdentity { .. }
            | ConvertError::Generated { .. }
            | ConvertError::UnsupportedDefault { .. }
            | ConvertError::ReferencingPartition { .. }
            | ConvertError::PartitionKey { .. } => ErrorKind::NotSupported,
            ConvertError::ValuesTooLarge { .. } => ErrorKind::State,
        }
    }

    /// How to go on, for the error's HINT.
    pub fn hint(&self) -> String {
        match self {
            ConvertError::NotATable { .. } => "Convert the column of the table itself.".into(),
            ConvertError::Partition { .. } => {
                "Convert the column of the partitioned table (the root parent); the change recurses to every partition.".into()
            }
            ConvertError::Inheritance { .. } => {
                "Tables with inheritance are not converted automatically: run snowflake_convert_column with dry_run => true on a copy without inheritance and adapt the statements to each table.".into()
            }
            ConvertError::PartitionedIdentity { .. } => {
                "Drop the identity by hand (ALTER TABLE ... ALTER COLUMN ... DROP IDENTITY), then run snowflake_convert_column again.".into()
            }
            ConvertError::NotInteger { .. } => {
                "Only smallint, integer and bigint columns can hold snowflake IDs; convert the column to bigint first if its values are integers.".into()
            }
            ConvertError::Generated { .. } => {
                "A generated column is computed from other columns; it cannot take IDs.".into()
            }
            ConvertError::UnsupportedDefault { .. } => {
                "Columns fed by an identity, a serial or a nextval() default can be converted; for any other default, ALTER TABLE ... ALTER COLUMN ... DROP DEFAULT first if it may go.".into()
            }
            ConvertError::ValuesTooLarge { .. } => {
                "New IDs could collide with these values or sort before them. Find out where they came from; if they must stay, keep the column's current default.".into()
            }
            ConvertError::PartitionKey { .. } => {
                "PostgreSQL cannot change the type of a partition key column: create a new partitioned table with a bigint column, move the rows, then convert it.".into()
            }
            ConvertError::ReferencingPartition { .. } => {
                "Declare the foreign key on the partitioned table instead of on the partition, or widen the column by hand.".into()
            }
        }
    }
}

/// What a default expression is, as far as the conversion cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultKind {
    /// `nextval('name'::regclass)`, `nextval('name'::text)`,
    /// `nextval(('name'::text)::regclass)` or `nextval('name')`: the
    /// sequence's name as written.
    Nextval(String),
    /// `snowflake_next()`, qualified or not.
    Snowflake,
    Other,
}

/// Classifies a default as `pg_get_expr()` prints it.
pub fn classify_default(expr: &str) -> DefaultKind {
    let expr = expr.trim();
    let unqualified =
        expr.rsplit_once('.').map_or(
            expr,
            |(schema, call)| {
                if schema.contains('(') {
                    expr
                } else {
                    call
                }
            },
        );
    if unqualified == "snowflake_next()" {
        return DefaultKind::Snowflake;
    }
    if let Some(arg) = expr
        .strip_prefix("nextval(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        // Defaults written before PostgreSQL 8.1 (and restored since) read
        // nextval(('name'::text)::regclass).
        let arg = arg
            .strip_suffix("::regclass")
            .and_then(|a| a.strip_prefix('('))
            .and_then(|a| a.strip_suffix(')'))
            .unwrap_or(arg);
        if let Some(name) = single_quoted_literal(arg) {
            return DefaultKind::Nextval(name);
        }
    }
    DefaultKind::Other
}

/// `'text'` optionally followed by one `::type` cast with no spaces or
/// parentheses: the string literal's content, or `None`.
fn single_quoted_literal(arg: &str) -> Option<String> {
    let rest = arg.strip_prefix('\'')?;
    let mut out = String::new();
    let mut chars = rest.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            if chars.peek().map(|&(_, n)| n) == Some('\'') {
                out.push('\'');
                chars.next();
                continue;
            }
            let tail = &rest[i + 1..];
            let cast_ok = tail.is_empty()
                || tail.strip_prefix("::").is_some_and(|t| {
                    !t.is_empty()
                        && t.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ')
                });
            return cast_ok.then_some(out);
        }
        out.push(c);
    }
    None
}

fn check_relation(kind: &RelationKind, table: &str) -> Result<(), ConvertError> {
    match kind {
        RelationKind::Table | RelationKind::Partitioned => Ok(()),
        RelationKind::Partition => Err(ConvertError::Partition {
            table: table.to_string(),
        }),
        RelationKind::Inheritance => Err(ConvertError::Inheritance {
            table: table.to_string(),
        }),
        RelationKind::Other(relkind) => Err(ConvertError::NotATable {
            table: table.to_string(),
            relkind: relkind.clone(),
        }),
    }
}

/// Decides what to run, or why not.
pub fn plan(facts: &Facts) -> Result<Plan, ConvertError> {
    let t = &facts.target;
    check_relation(&t.kind, &t.table)?;
    let Some(int_type) = t.int_type() else {
        return Err(ConvertError::NotInteger {
            table: t.table.clone(),
            column: t.column.clone(),
            type_name: t.type_name.clone(),
        });
    };
    if facts.generated {
        return Err(ConvertError::Generated {
            table: t.table.clone(),
            column: t.column.clone(),
        });
    }
    let source = match (facts.identity, &facts.default_expr) {
        (Some(kind), _) => {
            if t.kind == RelationKind::Partitioned {
                return Err(ConvertError::PartitionedIdentity {
                    table: t.table.clone(),
                    column: t.column.clone(),
                });
            }
            Source::Identity {
                always: kind == 'a',
            }
        }
        (None, None) => Source::NoDefault,
        (None, Some(expr)) => match classify_default(expr) {
            DefaultKind::Snowflake => Source::Snowflake,
            DefaultKind::Nextval(sequence) => Source::Sequence {
                sequence,
                owned: facts.owned_sequence.clone(),
            },
            DefaultKind::Other => {
                return Err(ConvertError::UnsupportedDefault {
                    table: t.table.clone(),
                    column: t.column.clone(),
                    default: expr.clone(),
                })
            }
        },
    };
    // A column already fed by snowflake_next() holds its IDs: nothing to
    // compare (they may even lie ahead of the clock after a batch).
    if let (Some(max), false) = (facts.max_value, matches!(source, Source::Snowflake)) {
        if max >= facts.first_new_id {
            return Err(ConvertError::ValuesTooLarge {
                table: t.table.clone(),
                column: t.column.clone(),
                max,
                first_new_id: facts.first_new_id,
            });
        }
    }

    // Columns to widen, grouped by table (in first-seen order, the target's
    // table first) so that each table is rewritten once.
    let mut widen: BTreeMap<usize, (String, Vec<String>)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut add = |c: &ColumnRef| -> Result<(), ConvertError> {
        if c.in_partition_key {
            return Err(ConvertError::PartitionKey {
                table: c.table.clone(),
                column: c.column.clone(),
            });
        }
        let (table, column) = (c.table.as_str(), c.column.as_str());
        let idx = match order.iter().position(|x| x == table) {
            Some(i) => i,
            None => {
                order.push(table.to_string());
                order.len() - 1
            }
        };
        let entry = widen
            .entry(idx)
            .or_insert_with(|| (table.to_string(), Vec::new()));
        if !entry.1.iter().any(|c| c == column) {
            entry.1.push(column.to_string());
        }
        Ok(())
    };
    if int_type != IntType::Bigint {
        add(t)?;
    }
    // Referencing columns of other types are left alone: bigint already, or
    // a type that holds bigints (numeric).
    for r in &facts.referencing {
        if let Some(IntType::Smallint | IntType::Integer) = r.int_type() {
            if r.kind == RelationKind::Partition {
                return Err(ConvertError::ReferencingPartition {
                    table: r.table.clone(),
                    column: r.column.clone(),
                });
            }
            add(r)?;
        }
    }

    let mut statements = Vec::new();
    if let Source::Identity { .. } = source {
        statements.push(format!(
            "ALTER TABLE {} ALTER COLUMN {} DROP IDENTITY",
            t.table, t.column
        ));
    }
    for (table, columns) in widen.values() {
        let subcommands: Vec<String> = columns
            .iter()
            .map(|c| format!("ALTER COLUMN {c} TYPE bigint"))
            .collect();
        statements.push(format!("ALTER TABLE {table} {}", subcommands.join(", ")));
    }
    if source != Source::Snowflake {
        statements.push(format!(
            "ALTER TABLE {} ALTER COLUMN {} SET DEFAULT {}",
            t.table, t.column, facts.snowflake_next
        ));
    }
    if let Source::Sequence {
        owned: Some(seq), ..
    } = &source
    {
        statements.push(format!("ALTER SEQUENCE {seq} OWNED BY NONE"));
    }
    if !statements.is_empty() {
        let mut tables = vec![t.table.clone()];
        for table in order {
            if !tables.contains(&table) {
                tables.push(table);
            }
        }
        statements.insert(
            0,
            format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", tables.join(", ")),
        );
    }
    Ok(Plan { source, statements })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(table: &str, column: &str, type_name: &str) -> ColumnRef {
        ColumnRef {
            table: table.into(),
            column: column.into(),
            type_name: type_name.into(),
            kind: RelationKind::Table,
            in_partition_key: false,
        }
    }

    fn facts(type_name: &str, default: Option<&str>) -> Facts {
        Facts {
            target: col("public.orders", "id", type_name),
            identity: None,
            generated: false,
            default_expr: default.map(String::from),
            owned_sequence: None,
            snowflake_next: "public.snowflake_next()".into(),
            max_value: Some(1000),
            first_new_id: 300_000_000_000_000_000,
            referencing: vec![],
        }
    }

    const LOCK: &str = "LOCK TABLE public.orders IN ACCESS EXCLUSIVE MODE";
    const SET_DEFAULT: &str =
        "ALTER TABLE public.orders ALTER COLUMN id SET DEFAULT public.snowflake_next()";

    #[test]
    fn serial_integer_column() {
        let mut f = facts("integer", Some("nextval('orders_id_seq'::regclass)"));
        f.owned_sequence = Some("public.orders_id_seq".into());
        let p = plan(&f).unwrap();
        assert_eq!(
            p.source,
            Source::Sequence {
                sequence: "orders_id_seq".into(),
                owned: Some("public.orders_id_seq".into())
            }
        );
        assert_eq!(
            p.statements,
            vec![
                LOCK,
                "ALTER TABLE public.orders ALTER COLUMN id TYPE bigint",
                SET_DEFAULT,
                "ALTER SEQUENCE public.orders_id_seq OWNED BY NONE",
            ]
        );
    }

    #[test]
    fn bigserial_column_is_not_widened() {
        let mut f = facts("bigint", Some("nextval('orders_id_seq'::regclass)"));
        f.owned_sequence = Some("public.orders_id_seq".into());
        assert_eq!(
            plan(&f).unwrap().statements,
            vec![
                LOCK,
                SET_DEFAULT,
                "ALTER SEQUENCE public.orders_id_seq OWNED BY NONE"
            ]
        );
    }

    #[test]
    fn explicit_nextval_without_dependency_record() {
        // nextval('s'::text) records no dependency on the sequence, and the
        // sequence is not owned by the column.
        let f = facts("bigint", Some("nextval('shared_seq'::text)"));
        let p = plan(&f).unwrap();
        assert_eq!(
            p.source,
            Source::Sequence {
                sequence: "shared_seq".into(),
                owned: None
            }
        );
        assert_eq!(p.statements, vec![LOCK, SET_DEFAULT]);
    }

    #[test]
    fn identity_columns() {
        for (kind, always) in [('a', true), ('d', false)] {
            let mut f = facts("integer", None);
            f.identity = Some(kind);
            let p = plan(&f).unwrap();
            assert_eq!(p.source, Source::Identity { always });
            assert_eq!(
                p.statements,
                vec![
                    LOCK,
                    "ALTER TABLE public.orders ALTER COLUMN id DROP IDENTITY",
                    "ALTER TABLE public.orders ALTER COLUMN id TYPE bigint",
                    SET_DEFAULT,
                ]
            );
        }
    }

    #[test]
    fn column_without_default_gets_one() {
        let f = facts("bigint", None);
        let p = plan(&f).unwrap();
        assert_eq!(p.source, Source::NoDefault);
        assert_eq!(p.statements, vec![LOCK, SET_DEFAULT]);
    }

    #[test]
    fn already_converted_is_a_no_op() {
        for d in [
            "snowflake_next()",
            "public.snowflake_next()",
            "\"my schema\".snowflake_next()",
        ] {
            let f = facts("bigint", Some(d));
            let p = plan(&f).unwrap();
            assert_eq!(p.source, Source::Snowflake, "{d}");
            assert!(p.statements.is_empty());
        }
        // ... but integer columns and referencing columns are still widened.
        let mut f = facts("integer", Some("snowflake_next()"));
        f.referencing = vec![col("public.items", "order_id", "integer")];
        assert_eq!(
            plan(&f).unwrap().statements,
            vec![
                "LOCK TABLE public.orders, public.items IN ACCESS EXCLUSIVE MODE",
                "ALTER TABLE public.orders ALTER COLUMN id TYPE bigint",
                "ALTER TABLE public.items ALTER COLUMN order_id TYPE bigint",
            ]
        );
    }

    #[test]
    fn referencing_columns_are_widened_once_per_table() {
        let mut f = facts("integer", Some("nextval('orders_id_seq'::regclass)"));
        f.owned_sequence = Some("public.orders_id_seq".into());
        f.referencing = vec![
            col("public.items", "order_id", "integer"),
            col("public.orders", "parent_id", "integer"), // self reference
            col("public.items", "replaced_order_id", "smallint"),
            col("public.audit", "order_id", "bigint"), // already wide
            col("public.notes", "order_ref", "numeric"), // holds bigints
            col("public.items", "order_id", "integer"), // seen twice (two FKs)
        ];
        assert_eq!(
            plan(&f).unwrap().statements,
            vec![
                "LOCK TABLE public.orders, public.items IN ACCESS EXCLUSIVE MODE",
                "ALTER TABLE public.orders ALTER COLUMN id TYPE bigint, ALTER COLUMN parent_id TYPE bigint",
                "ALTER TABLE public.items ALTER COLUMN order_id TYPE bigint, ALTER COLUMN replaced_order_id TYPE bigint",
                SET_DEFAULT,
                "ALTER SEQUENCE public.orders_id_seq OWNED BY NONE",
            ]
        );
    }

    #[test]
    fn partitioned_parent_with_a_sequence_is_converted() {
        let mut f = facts("bigint", Some("nextval('orders_id_seq'::regclass)"));
        f.target.kind = RelationKind::Partitioned;
        f.target.in_partition_key = true;
        assert!(
            plan(&f).is_ok(),
            "a bigint partition key column needs no widening"
        );
    }

    #[test]
    fn refusals() {
        let cases: Vec<(Facts, ErrorKind, &str)> = vec![
            (
                {
                    let mut f = facts("integer", None);
                    f.target.kind = RelationKind::Partition;
                    f
                },
                ErrorKind::WrongObject,
                "public.orders is a partition",
            ),
            (
                {
                    let mut f = facts("integer", None);
                    f.target.kind = RelationKind::Other("v".into());
                    f
                },
                ErrorKind::WrongObject,
                "public.orders is not a table (relkind 'v')",
            ),
            (
                {
                    let mut f = facts("integer", None);
                    f.target.kind = RelationKind::Inheritance;
                    f
                },
                ErrorKind::NotSupported,
                "public.orders has inheritance parents or children",
            ),
            (
                {
                    let mut f = facts("integer", None);
                    f.target.kind = RelationKind::Partitioned;
                    f.identity = Some('a');
                    f
                },
                ErrorKind::NotSupported,
                "public.orders.id is an identity column of a partitioned table",
            ),
            (
                facts("text", None),
                ErrorKind::WrongType,
                "public.orders.id is of type text, not an integer type",
            ),
            (
                facts("numeric(20,0)", None),
                ErrorKind::WrongType,
                "public.orders.id is of type numeric(20,0), not an integer type",
            ),
            (
                {
                    let mut f = facts("bigint", None);
                    f.generated = true;
                    f
                },
                ErrorKind::NotSupported,
                "public.orders.id is a generated column",
            ),
            (
                facts("bigint", Some("(nextval('s'::regclass) * 10)")),
                ErrorKind::NotSupported,
                "public.orders.id has the default (nextval('s'::regclass) * 10), which is not a sequence",
            ),
            (
                facts("bigint", Some("0")),
                ErrorKind::NotSupported,
                "public.orders.id has the default 0, which is not a sequence",
            ),
            (
                {
                    let mut f = facts("bigint", Some("nextval('s'::regclass)"));
                    f.max_value = Some(f.first_new_id);
                    f
                },
                ErrorKind::State,
                "public.orders.id already holds values up to 300000000000000000, at or above the IDs snowflake_next() issues from now on (300000000000000000)",
            ),
            (
                {
                    let mut f = facts("bigint", None);
                    f.referencing = vec![ColumnRef {
                        kind: RelationKind::Partition,
                        ..col("public.items_2025", "order_id", "integer")
                    }];
                    f
                },
                ErrorKind::NotSupported,
                "public.items_2025.order_id references the converted column but public.items_2025 is a partition whose own foreign key cannot be widened alone",
            ),
            (
                {
                    let mut f = facts("integer", None);
                    f.target.kind = RelationKind::Partitioned;
                    f.target.in_partition_key = true;
                    f
                },
                ErrorKind::NotSupported,
                "public.orders.id is part of the partition key of public.orders and would have to be widened to bigint",
            ),
            (
                {
                    let mut f = facts("bigint", None);
                    f.referencing = vec![ColumnRef {
                        in_partition_key: true,
                        ..col("public.items", "order_id", "integer")
                    }];
                    f
                },
                ErrorKind::NotSupported,
                "public.items.order_id is part of the partition key of public.items and would have to be widened to bigint",
            ),
        ];
        for (f, kind, message) in cases {
            let e = plan(&f).unwrap_err();
            assert_eq!(e.to_string(), message);
            assert_eq!(e.kind(), kind, "{message}");
            assert!(!e.hint().is_empty());
        }
    }

    #[test]
    fn an_already_converted_column_is_not_compared_with_the_clock() {
        let mut f = facts("bigint", Some("snowflake_next()"));
        f.max_value = Some(f.first_new_id + 1_000_000);
        assert!(plan(&f).is_ok());
    }

    #[test]
    fn values_just_below_the_new_ids_are_kept() {
        let mut f = facts("bigint", None);
        f.max_value = Some(f.first_new_id - 1);
        assert!(plan(&f).is_ok());
        f.max_value = None; // empty table
        assert!(plan(&f).is_ok());
        f.max_value = Some(-5); // negative values never collide
        assert!(plan(&f).is_ok());
    }

    #[test]
    fn default_classification() {
        assert_eq!(
            classify_default("nextval('orders_id_seq'::regclass)"),
            DefaultKind::Nextval("orders_id_seq".into())
        );
        assert_eq!(
            classify_default("nextval('\"Odd\"\"Name\".''q''seq'::regclass)"),
            DefaultKind::Nextval("\"Odd\"\"Name\".'q'seq".into())
        );
        assert_eq!(
            classify_default("nextval('s'::text)"),
            DefaultKind::Nextval("s".into())
        );
        assert_eq!(
            classify_default("nextval('s'::character varying)"),
            DefaultKind::Nextval("s".into())
        );
        assert_eq!(
            classify_default("nextval('s')"),
            DefaultKind::Nextval("s".into())
        );
        assert_eq!(
            classify_default("nextval(('public.s'::text)::regclass)"),
            DefaultKind::Nextval("public.s".into())
        );
        assert_eq!(classify_default("snowflake_next()"), DefaultKind::Snowflake);
        assert_eq!(
            classify_default("ext.snowflake_next()"),
            DefaultKind::Snowflake
        );
        for other in [
            "nextval('a'::regclass) + nextval('b'::regclass)",
            "(nextval('s'::regclass) * 10)",
            "nextval('s'::regclass, 1)",
            "nextval('s' || 'x')",
            "42",
            "snowflake_next() + 1",
            "f(snowflake_next())",
            "",
        ] {
            assert_eq!(classify_default(other), DefaultKind::Other, "{other}");
        }
    }
}
