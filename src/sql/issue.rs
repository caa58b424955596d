//! `snowflake_next()`: the next ID of this server, one compare-and-swap on
//! the shared generator ([`crate::pg::backend::issue`]).

use crate::pg::backend::{issue, issuing_node, ready};
use crate::pg::settings;
use pgrx::prelude::*;

/// Issues the next ID of this server: unique, and greater than every ID this
/// server issued before.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_next() -> i64 {
    let (config, shared) = ready();
    let node = issuing_node(config, shared);
    let range = issue(config, shared, settings::drift_policy(), 1);
    config.layout.id_of_pair(range.first_pair, node)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // Runs inside a server started by `cargo pgrx test` with the library
    // preloaded and `snowflake_id.node_id = 42` (see `crate::pg_test`).
    use crate::test_support::one;
    use pgrx::prelude::*;

    #[pg_test]
    fn next_is_positive_increasing_and_carries_the_node() {
        let a: i64 = one("SELECT snowflake_next()");
        let b: i64 = one("SELECT snowflake_next()");
        assert!(a > 0 && b > a);
        assert_eq!(one::<i32>(&format!("SELECT snowflake_node({b})")), 42);
    }

    #[pg_test]
    fn many_ids_in_one_statement_are_distinct_and_increasing() {
        Spi::run("CREATE TEMP TABLE ids AS SELECT g, snowflake_next() AS id FROM generate_series(1, 50000) g").unwrap();
        assert_eq!(one::<i64>("SELECT count(DISTINCT id) FROM ids"), 50000);
        let out_of_order: i64 =
            one("SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY g) AS prev FROM ids) s WHERE id <= prev");
        assert_eq!(out_of_order, 0);
    }

    #[pg_test]
    fn works_as_a_column_default() {
        Spi::run("CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int)").unwrap();
        Spi::run("INSERT INTO t (v) SELECT g FROM generate_series(1, 20000) g").unwrap();
        assert_eq!(one::<i64>("SELECT count(DISTINCT id) FROM t"), 20000);
        assert_eq!(
            one::<i64>("SELECT count(*) FROM t WHERE snowflake_node(id) <> 42"),
            0
        );
    }

    #[pg_test]
    fn functions_have_the_documented_volatility_and_parallel_safety() {
        assert_eq!(one::<String>("SELECT provolatile::text || proparallel::text FROM pg_proc WHERE proname = 'snowflake_next'"), "vs");
        assert_eq!(one::<String>("SELECT provolatile::text || proparallel::text FROM pg_proc WHERE proname = 'snowflake_decode'"), "ss");
    }
}
