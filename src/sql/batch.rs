//! Batches: `snowflake_next_batch(n)` and `snowflake_next_batch_array(n)`
//! reserve `n` consecutive IDs with one compare-and-swap.
//!
//! A batch is exactly what `n` calls of `snowflake_next()` in a row would
//! have returned if nothing else had issued IDs in between: consecutive
//! `(time, sequence)` pairs, all greater than every ID issued before, and it
//! obeys the same drift rules (it borrows milliseconds, waits for the clock
//! like the equivalent single calls, fails the same way when the clock is far
//! behind). Two bounds apply to `n`, both checked before anything is issued:
//! [`MAX_BATCH`](crate::core::generator::MAX_BATCH) (100,000,000) and what fits in `max_clock_drift + 1`
//! milliseconds ([`max_batch`]; 20,484,096 with the defaults).

use crate::core::generator::{max_batch, IssuedRange};
use crate::core::layout::IdLayout;
use crate::pg::backend::{issue, issuing_node, ready};
use crate::pg::errors::{raise, Error};
use crate::pg::settings;
use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;

/// Validates `n`: the number of IDs to issue, or the error.
fn checked_count(n: i32) -> u64 {
    let (config, _) = ready();
    let layout = config.layout;
    let policy = settings::drift_policy();
    let max = max_batch(&layout, policy);
    if n < 1 {
        raise(Error::BatchSizeNotPositive { n, max });
    }
    let count = n as u64;
    if count > max {
        raise(Error::BatchSizeTooLarge {
            n,
            max,
            max_drift_ms: policy.max_drift_ms,
            ids_per_ms: layout.ids_per_ms(),
        });
    }
    count
}

/// Issues a batch of `count` IDs (validated by [`checked_count`]). Returns
/// the layout and node to turn its pairs into IDs.
fn reserve(count: u64) -> (IdLayout, u64, IssuedRange) {
    let (config, shared) = ready();
    let node = issuing_node(config, shared);
    (
        config.layout,
        node,
        issue(config, shared, settings::drift_policy(), count),
    )
}

fn ids(count: u64) -> impl Iterator<Item = i64> {
    let (layout, node, range) = reserve(count);
    (range.first_pair..=range.last_pair()).map(move |pair| layout.id_of_pair(pair, node))
}

/// `n` consecutive IDs of this server, in increasing order, reserved with
/// one compare-and-swap: the same IDs as `n` calls of `snowflake_next()` in
/// a row when nothing else issues IDs meanwhile.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_next_batch(n: i32) -> SetOfIterator<'static, i64> {
    SetOfIterator::new(ids(checked_count(n)))
}

/// Like `snowflake_next_batch(n)`, as one `bigint[]` (PostgreSQL cannot
/// overload a function on its result type, hence the name).
///
/// The array is built in place in PostgreSQL's memory (up to 800 MB for
/// the largest batch): an allocation that fails is PostgreSQL's ordinary
/// "out of memory" error (`53200`), which ends the statement, where a
/// failed Rust allocation would abort the backend and restart the cluster.
/// The IDs are issued only once the memory is there.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_next_batch_array(n: i32) -> IdArray {
    // One dimension, no NULL bitmap: the header, the dimension and the
    // lower bound, then the elements (ARR_OVERHEAD_NONULLS(1), MAXALIGNed).
    const HEADER: usize = (std::mem::size_of::<pg_sys::ArrayType>() + 2 * 4 + 7) & !7;
    let count = checked_count(n) as usize;
    let size = HEADER + count * 8;
    // SAFETY: palloc_extended with flags 0 returns `size` bytes, MAXALIGNed,
    // in the current memory context (this call's), or raises an ERROR, never
    // null; `size` stays below MaxAllocSize since checked_count caps a batch
    // at MAX_BATCH (100,000,000 IDs, 800 MB). Every write stays inside it:
    // the ArrayType struct and the two dimension words right after it lie
    // within HEADER (ARR_OVERHEAD_NONULLS(1), a multiple of 8, so the i64
    // elements are aligned), followed by at most `count` elements
    // (`take(count)`). The header is complete before the pointer is returned;
    // if issuing raises an ERROR, the memory context frees the array.
    unsafe {
        // Up to 1 GB - 1 without MCXT_ALLOC_HUGE: the largest batch
        // (100,000,000 IDs) takes 800 MB, and a varlena cannot be larger.
        let array = pg_sys::palloc_extended(size, 0).cast::<pg_sys::ArrayType>();
        // The batch, validated above, is issued after the allocation, so that
        // no ID is consumed by a statement that fails for lack of memory.
        let mut written = 0;
        let data = array.cast::<u8>().add(HEADER).cast::<i64>();
        for id in ids(count as u64).take(count) {
            data.add(written).write(id);
            written += 1;
        }
        pgrx::set_varsize_4b(array.cast(), (HEADER + written * 8) as i32);
        (*array).ndim = 1;
        (*array).dataoffset = 0;
        (*array).elemtype = pg_sys::INT8OID;
        let dims = array
            .cast::<u8>()
            .add(std::mem::size_of::<pg_sys::ArrayType>())
            .cast::<i32>();
        dims.write(written as i32);
        dims.add(1).write(1);
        IdArray(array)
    }
}

/// A `bigint[]` built in PostgreSQL's memory, returned as it is (pgrx's own
/// array results are built from a Rust `Vec` first).
pub struct IdArray(*mut pg_sys::ArrayType);

// SAFETY: the SQL type is `bigint[]`, as for `Vec<i64>`, and the datum is a
// palloc'd one-dimensional int8 array without NULLs.
unsafe impl SqlTranslatable for IdArray {
    const TYPE_IDENT: &'static str = <Vec<i64> as SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: TypeOrigin = <Vec<i64> as SqlTranslatable>::TYPE_ORIGIN;
    const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
        <Vec<i64> as SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<ReturnsRef, ReturnsError> = <Vec<i64> as SqlTranslatable>::RETURN_SQL;
}

// SAFETY: returns the array's pointer as the function's datum: a palloc'd
// `bigint[]` varlena in the call's memory context, what SqlTranslatable
// above declares, never null.
unsafe impl BoxRet for IdArray {
    unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
        // SAFETY: self.0 is the array built by snowflake_next_batch_array:
        // a complete, non-null varlena in this call's memory context, a valid
        // datum of the declared result type `bigint[]`.
        unsafe { fcinfo.return_raw_datum(pg_sys::Datum::from(self.0)) }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // The test server preloads the extension with node id 42 and the default
    // 41/10/12 layout and 5 s drift limit (see `crate::pg_test`).
    use crate::test_support::one;
    use pgrx::prelude::*;

    /// The `(time, sequence)` pair of an ID in SQL: consecutive pairs differ by 1.
    const PAIR: &str = "((x >> 22) << 12 | (x & 4095))";

    #[pg_test]
    fn batch_is_consecutive_distinct_and_after_earlier_ids() {
        let before: i64 = one("SELECT snowflake_next()");
        Spi::run("CREATE TEMP TABLE b AS SELECT row_number() OVER () AS i, x FROM snowflake_next_batch(100000) x").unwrap();
        let after: i64 = one("SELECT snowflake_next()");
        assert_eq!(one::<i64>("SELECT count(DISTINCT x) FROM b"), 100_000);
        assert_eq!(
            one::<i64>("SELECT min(x) FROM b"),
            one::<i64>("SELECT x FROM b WHERE i = 1")
        );
        assert!(one::<i64>("SELECT min(x) FROM b") > before);
        assert!(one::<i64>("SELECT max(x) FROM b") < after);
        // 100,000 IDs span at least 24 milliseconds: the batch crosses
        // millisecond boundaries and stays consecutive across them.
        let gaps: i64 = one(&format!(
            "SELECT count(*) FROM (SELECT {PAIR} - lag({PAIR}) OVER (ORDER BY i) AS step FROM b) s WHERE step <> 1"
        ));
        assert_eq!(gaps, 0);
        assert!(one::<i64>("SELECT count(DISTINCT x >> 22) FROM b") >= 24);
        assert_eq!(
            one::<i64>("SELECT count(*) FROM b WHERE snowflake_node(x) <> 42"),
            0
        );
    }

    #[pg_test]
    fn array_is_consecutive_and_after_earlier_ids() {
        let before: i64 = one("SELECT snowflake_next()");
        Spi::run("CREATE TEMP TABLE a AS SELECT snowflake_next_batch_array(10000) AS ids").unwrap();
        let after: i64 = one("SELECT snowflake_next()");
        assert_eq!(one::<i32>("SELECT cardinality(ids) FROM a"), 10_000);
        assert!(one::<i64>("SELECT ids[1] FROM a") > before);
        assert!(one::<i64>("SELECT ids[10000] FROM a") < after);
        let gaps: i64 = one(&format!(
            "SELECT count(*) FROM (SELECT {PAIR} - lag({PAIR}) OVER (ORDER BY i) AS step
               FROM a, unnest(ids) WITH ORDINALITY AS u(x, i)) s WHERE step <> 1"
        ));
        assert_eq!(gaps, 0);
    }

    #[pg_test]
    fn a_batch_of_one_and_null() {
        assert_eq!(
            one::<i64>("SELECT count(*) FROM snowflake_next_batch(1)"),
            1
        );
        assert_eq!(
            one::<i64>("SELECT count(*) FROM snowflake_next_batch(NULL)"),
            0
        );
        assert!(one::<bool>(
            "SELECT snowflake_next_batch_array(NULL) IS NULL"
        ));
    }

    #[pg_test]
    fn batches_are_counted_in_the_stats() {
        let before: i64 = one("SELECT ids_issued FROM snowflake_stats()");
        Spi::run("SELECT count(*) FROM snowflake_next_batch(5000)").unwrap();
        Spi::run("SELECT snowflake_next_batch_array(3000)").unwrap();
        // Other tests issue IDs concurrently: at least these were counted
        // (the exact count is checked by the pg_regress suite).
        assert!(one::<i64>("SELECT ids_issued FROM snowflake_stats()") >= before + 8000);
    }

    /// Runs `sql`, which must fail; returns "SQLSTATE: message | hint".
    fn error_of(sql: &str) -> String {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
             DECLARE c text; m text; h text;
             BEGIN EXECUTE sql; RETURN 'ok';
             EXCEPTION WHEN OTHERS THEN
               GET STACKED DIAGNOSTICS c = RETURNED_SQLSTATE, m = MESSAGE_TEXT, h = PG_EXCEPTION_HINT;
               RETURN c || ': ' || m || ' | ' || h;
             END $$",
        )
        .unwrap();
        one(&format!("SELECT pg_temp.err($q${sql}$q$)"))
    }

    #[pg_test]
    fn bad_sizes_are_refused_with_22023_and_a_hint() {
        for sql in [
            "SELECT count(*) FROM snowflake_next_batch(0)",
            "SELECT snowflake_next_batch_array(-5)",
        ] {
            let e = error_of(sql);
            assert!(
                e.starts_with("22023: snowflake_id: the batch size must be positive"),
                "{e}"
            );
            assert!(e.contains("| Ask for 1 to 20484096 IDs at a time."), "{e}");
        }
        let e = error_of("SELECT count(*) FROM snowflake_next_batch(20484097)");
        assert!(e.starts_with("22023: snowflake_id: a batch of 20484097 IDs is too large: snowflake_id.max_clock_drift (5000 ms) allows at most 20484096"), "{e}");
        assert!(e.contains("raise snowflake_id.max_clock_drift"), "{e}");
        let e = error_of("SELECT snowflake_next_batch_array(100000001)");
        assert!(
            e.starts_with("22023: snowflake_id: a batch of 100000001 IDs is too large"),
            "{e}"
        );
    }

    #[pg_test]
    fn batch_functions_have_the_documented_volatility_and_parallel_safety() {
        assert_eq!(
            one::<String>("SELECT string_agg(proname || ':' || provolatile::text || proparallel::text || proisstrict::int || proretset::int, ',' ORDER BY proname) FROM pg_proc WHERE proname LIKE 'snowflake_next_batch%'"),
            "snowflake_next_batch:vs11,snowflake_next_batch_array:vs10"
        );
    }
}
