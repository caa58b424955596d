//! `snowflake_horizon()`: the commit-safe read horizon for consumers that
//! page through new rows by ID ([`crate::core::horizon`] says what it
//! promises and why it holds).

use crate::pg::backend::ready;
use crate::pg::horizon;
use pgrx::prelude::*;

/// An ID below which every ID this server issued inside a transaction
/// belongs to a transaction that has ended (committed or rolled back): the
/// smallest ID a transaction still in progress (a prepared one included)
/// may have issued, or, when none is, the smallest ID the generator can
/// issue next. Take it in a statement of its own, then read
/// `WHERE id > :last_seen AND id < :horizon` in a later statement (READ
/// COMMITTED), so that the read's snapshot comes after it.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_horizon() -> i64 {
    let (config, shared) = ready();
    horizon::horizon(config, &shared.generator)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // Runs inside a server started by `cargo pgrx test` with the library
    // preloaded and `snowflake_id.node_id = 42`; each test is one
    // transaction, still in progress while it runs.
    use crate::test_support::one;
    use pgrx::prelude::*;

    #[pg_test]
    fn horizon_stays_at_or_below_the_first_id_of_this_transaction() {
        let first: i64 = one("SELECT snowflake_next()");
        let h1: i64 = one("SELECT snowflake_horizon()");
        assert!(
            h1 <= first,
            "horizon {h1} above this transaction's first ID {first}"
        );
        Spi::run("SELECT snowflake_next_batch(1000)").unwrap();
        let h2: i64 = one("SELECT snowflake_horizon()");
        assert!(h2 <= first && h2 >= h1 - (1 << 22) * 1000);
        // It decodes to this node and a time at most a moment ago.
        assert!(one::<bool>(&format!(
            "SELECT snowflake_node({h2}) = 42 AND snowflake_timestamp({h2}) <= clock_timestamp()"
        )));
    }

    #[pg_test]
    fn horizon_is_volatile_and_parallel_safe() {
        assert_eq!(
            one::<String>(
                "SELECT provolatile::text || proparallel::text FROM pg_proc WHERE proname = 'snowflake_horizon'"
            ),
            "vs"
        );
    }
}
