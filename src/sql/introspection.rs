//! `snowflake_stats()`: the generator's configuration and counters since
//! the server started, as one row.

use crate::pg::backend::{flush_issued, ready};
use crate::pg::clock::{self, timestamp_of};
use crate::pg::settings;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// The generator's configuration and counters since the server started.
// pgrx needs the row type spelled out here (no alias for `name!` tuples).
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
fn snowflake_stats() -> TableIterator<
    'static,
    (
        name!(node_id, Option<i32>),
        name!(epoch, TimestampWithTimeZone),
        name!(time_bits, i32),
        name!(node_bits, i32),
        name!(sequence_bits, i32),
        name!(ids_issued, i64),
        name!(last_id, Option<i64>),
        name!(drift_ms, Option<i64>),
        name!(max_drift_ms, i64),
        name!(max_clock_drift_ms, i64),
        name!(backward_steps, i64),
        name!(largest_backward_step_ms, i64),
        name!(borrowed_ms, i64),
        name!(waits, i64),
        name!(wait_time_ms, f64),
        name!(drift_errors, i64),
        name!(lease_until, Option<TimestampWithTimeZone>),
        name!(lease_writes, i64),
    ),
> {
    let (config, shared) = ready();
    let layout = &config.layout;
    let g = &shared.generator;
    let c = &g.counters;
    flush_issued(c);
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as i64;
    let issued = load(&c.ids_issued);
    let pair = g.pair.load(Ordering::Acquire);
    // Before the first ID the pair only holds the restart floor.
    let last_id = (issued > 0)
        .then(|| crate::pg::registry::node_id(config).map(|n| layout.id_of_pair(pair, n)))
        .flatten();
    let drift = (issued > 0).then(|| layout.pair_time(pair) as i64 - clock::now_ms(config));
    let lease = g.lease_until_ms.load(Ordering::Acquire);
    TableIterator::once((
        crate::pg::registry::node_id(config).map(|n| n as i32),
        timestamp_of(config, 0),
        layout.time_bits() as i32,
        layout.node_bits() as i32,
        layout.sequence_bits() as i32,
        issued,
        last_id,
        drift,
        c.max_drift_ms.load(Ordering::Relaxed),
        settings::max_clock_drift_ms() as i64,
        load(&c.backward_steps),
        load(&c.largest_backward_step_ms),
        load(&c.borrowed_ms),
        load(&c.waits),
        c.wait_us.load(Ordering::Relaxed) as f64 / 1000.0,
        load(&c.drift_errors),
        (lease > 0).then(|| timestamp_of(config, lease)),
        load(&c.lease_writes),
    ))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // Runs inside a server started by `cargo pgrx test` with the library
    // preloaded and `snowflake_id.node_id = 42` (see `crate::pg_test`).
    use crate::test_support::one;
    use pgrx::prelude::*;

    #[pg_test]
    fn stats_report_layout_and_counts() {
        let before: i64 = one("SELECT ids_issued FROM snowflake_stats()");
        Spi::run("SELECT snowflake_next() FROM generate_series(1, 10)").unwrap();
        assert!(one::<bool>(&format!(
            "SELECT node_id = 42 AND epoch = '2025-01-01 00:00:00+00' AND time_bits = 41 AND node_bits = 10
                AND sequence_bits = 12 AND ids_issued >= {before} + 10 AND snowflake_node(last_id) = 42
                AND max_clock_drift_ms = 5000 AND lease_until >= snowflake_timestamp(last_id)
                AND lease_writes >= 1 AND drift_errors = 0
             FROM snowflake_stats()"
        )));
        let last: i64 = one("SELECT last_id FROM snowflake_stats()");
        assert!(one::<i64>("SELECT snowflake_next()") > last);
    }
}
