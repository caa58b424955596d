//! `snowflake_stats()`: the generator's configuration and counters since
//! the server started, as one row.

use crate::core::config::Config;
use crate::pg::backend::{self, ready};
use crate::pg::clock::{self, timestamp_of};
use crate::pg::issued;
use crate::pg::registry;
use crate::pg::settings;
use crate::pg::state::Shared;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// The columns of every `snowflake_stats()` version, each read once and
/// in one place: a 0.2.0 catalog (which the library serves until `ALTER
/// EXTENSION UPDATE`) gets these rows alone, a 0.3.0 catalog these and
/// [`Added`], as `pg_stat_statements` serves each of its API versions from
/// one function.
struct Stats {
    node_id: Option<i32>,
    epoch: TimestampWithTimeZone,
    time_bits: i32,
    node_bits: i32,
    sequence_bits: i32,
    ids_issued: i64,
    last_id: Option<i64>,
    drift_ms: Option<i64>,
    max_drift_ms: i64,
    max_clock_drift_ms: i64,
    backward_steps: i64,
    largest_backward_step_ms: i64,
    borrowed_ms: i64,
    waits: i64,
    wait_time_ms: f64,
    drift_errors: i64,
    lease_until: Option<TimestampWithTimeZone>,
    lease_writes: i64,
}

/// The columns 0.3.0 added: the lease's health, what holds issuing, the
/// registry's claim, and the floor of a successor.
struct Added {
    lease_written_at: Option<TimestampWithTimeZone>,
    lease_waiting: bool,
    lease_failures: i64,
    issuing_held: Option<String>,
    held_message: Option<String>,
    registry_state: Option<String>,
    grant_until: Option<TimestampWithTimeZone>,
    registry_message: Option<String>,
    registry_worker_restarts: Option<i64>,
    registry_resumes: Option<i64>,
    registry_connection: Option<String>,
    successor_floor: Option<TimestampWithTimeZone>,
    successor_ahead_ms: Option<i64>,
}

/// The row of a 0.2.0 catalog.
type RowV0_2 = (
    Option<i32>,
    TimestampWithTimeZone,
    i32,
    i32,
    i32,
    i64,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    f64,
    i64,
    Option<TimestampWithTimeZone>,
    i64,
);

/// The row of a 0.3.0 catalog.
type RowV0_3 = (
    Option<i32>,
    TimestampWithTimeZone,
    i32,
    i32,
    i32,
    i64,
    Option<i64>,
    Option<i64>,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    f64,
    i64,
    Option<TimestampWithTimeZone>,
    i64,
    Option<TimestampWithTimeZone>,
    bool,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<TimestampWithTimeZone>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<TimestampWithTimeZone>,
    Option<i64>,
);

impl Stats {
    fn read(config: &Config, shared: &Shared) -> Stats {
        let layout = &config.layout;
        let g = &shared.generator;
        let c = &g.counters;
        issued::flush(c);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as i64;
        let ids_issued = load(&c.ids_issued);
        let pair = g.pair.load(Ordering::Acquire);
        let node = registry::node_id(config);
        let lease = g.lease_until_ms.load(Ordering::Acquire);
        Stats {
            node_id: node.map(|n| n as i32),
            epoch: timestamp_of(config, 0),
            time_bits: layout.time_bits() as i32,
            node_bits: layout.node_bits() as i32,
            sequence_bits: layout.sequence_bits() as i32,
            ids_issued,
            // Before the first ID the pair only holds the restart floor.
            last_id: (ids_issued > 0)
                .then(|| node.map(|n| layout.id_of_pair(pair, n)))
                .flatten(),
            drift_ms: (ids_issued > 0)
                .then(|| layout.pair_time(pair) as i64 - clock::now_ms(config)),
            max_drift_ms: c.max_drift_ms.load(Ordering::Relaxed),
            max_clock_drift_ms: settings::max_clock_drift_ms() as i64,
            backward_steps: load(&c.backward_steps),
            largest_backward_step_ms: load(&c.largest_backward_step_ms),
            borrowed_ms: load(&c.borrowed_ms),
            waits: load(&c.waits),
            wait_time_ms: c.wait_us.load(Ordering::Relaxed) as f64 / 1000.0,
            drift_errors: load(&c.drift_errors),
            lease_until: (lease > 0).then(|| timestamp_of(config, lease)),
            lease_writes: load(&c.lease_writes),
        }
    }

    fn row_v0_2(self) -> RowV0_2 {
        (
            self.node_id,
            self.epoch,
            self.time_bits,
            self.node_bits,
            self.sequence_bits,
            self.ids_issued,
            self.last_id,
            self.drift_ms,
            self.max_drift_ms,
            self.max_clock_drift_ms,
            self.backward_steps,
            self.largest_backward_step_ms,
            self.borrowed_ms,
            self.waits,
            self.wait_time_ms,
            self.drift_errors,
            self.lease_until,
            self.lease_writes,
        )
    }

    fn row_v0_3(self, added: Added) -> RowV0_3 {
        let (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r) = self.row_v0_2();
        (
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
            i,
            j,
            k,
            l,
            m,
            n,
            o,
            p,
            q,
            r,
            added.lease_written_at,
            added.lease_waiting,
            added.lease_failures,
            added.issuing_held,
            added.held_message,
            added.registry_state,
            added.grant_until,
            added.registry_message,
            added.registry_worker_restarts,
            added.registry_resumes,
            added.registry_connection,
            added.successor_floor,
            added.successor_ahead_ms,
        )
    }
}

impl Added {
    fn read(config: &Config, shared: &Shared) -> Added {
        let (issuing_held, held_message) = backend::hold(config, shared)
            .map_or((None, None), |(held, message)| {
                (Some(held.label().to_string()), Some(message))
            });
        let status = registry::status::claim_status();
        let (registry_state, grant_until, registry_message) =
            status.as_ref().map_or((None, None, None), |c| {
                (
                    Some(c.state.to_string()),
                    c.until_ms.map(|ms| timestamp_of(config, ms)),
                    c.message.clone(),
                )
            });
        Added {
            // (A wall-clock time before the epoch cannot be a lease write of
            // this configuration's IDs; shown as NULL rather than an error.)
            lease_written_at: shared
                .lease_written_unix_ms()
                .and_then(|t| u64::try_from(t - config.epoch_unix_ms).ok())
                .map(|ms| timestamp_of(config, ms)),
            lease_waiting: shared.lease_waiting(),
            lease_failures: shared.lease_failures() as i64,
            issuing_held,
            held_message,
            registry_state,
            grant_until,
            registry_message,
            registry_worker_restarts: status.as_ref().map(|c| c.worker_exits as i64),
            registry_resumes: status.as_ref().map(|c| c.resumes as i64),
            registry_connection: status
                .as_ref()
                .and_then(|c| c.connection)
                .map(|t| t.label().to_string()),
            successor_floor: shared
                .successor_floor()
                .map(|(floor, _)| timestamp_of(config, floor)),
            successor_ahead_ms: shared.successor_floor().map(|(_, ahead)| ahead as i64),
        }
    }
}

/// The generator's configuration and counters since the server started,
/// its lease, what holds issuing, and the registry's claim.
// pgrx needs the row type spelled out here (no alias for `name!` tuples).
// The Rust name gives the C symbol: a new one, because the catalog of
// 0.2.0 declares fewer columns and calls `snowflake_stats_wrapper` below
// until ALTER EXTENSION UPDATE.
#[allow(clippy::type_complexity)]
#[pg_extern(name = "snowflake_stats", volatile, parallel_safe)]
fn snowflake_stats_0_3() -> TableIterator<
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
        name!(lease_written_at, Option<TimestampWithTimeZone>),
        name!(lease_waiting, bool),
        name!(lease_failures, i64),
        name!(issuing_held, Option<String>),
        name!(held_message, Option<String>),
        name!(registry_state, Option<String>),
        name!(grant_until, Option<TimestampWithTimeZone>),
        name!(registry_message, Option<String>),
        name!(registry_worker_restarts, Option<i64>),
        name!(registry_resumes, Option<i64>),
        name!(registry_connection, Option<String>),
        name!(successor_floor, Option<TimestampWithTimeZone>),
        name!(successor_ahead_ms, Option<i64>),
    ),
> {
    let (config, shared) = ready();
    TableIterator::once(Stats::read(config, shared).row_v0_3(Added::read(config, shared)))
}

/// `snowflake_stats()` of a 0.2.0 catalog, which the library must serve
/// until ALTER EXTENSION UPDATE (sql/README.md); not in the current SQL.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe, sql = false)]
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
    TableIterator::once(Stats::read(config, shared).row_v0_2())
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
                AND lease_written_at BETWEEN now() - interval '1 hour' AND clock_timestamp()
                AND NOT lease_waiting AND lease_failures = 0 AND issuing_held IS NULL AND held_message IS NULL
                AND registry_state IS NULL AND grant_until IS NULL AND registry_message IS NULL
                AND registry_worker_restarts IS NULL AND registry_resumes IS NULL
                AND registry_connection IS NULL
                AND successor_floor IS NULL AND successor_ahead_ms IS NULL
             FROM snowflake_stats()"
        )));
        let last: i64 = one("SELECT last_id FROM snowflake_stats()");
        assert!(one::<i64>("SELECT snowflake_next()") > last);
    }

    /// A 0.2.0 catalog calls the old C symbol until ALTER EXTENSION UPDATE:
    /// it must still return the 0.2.0 row (18 columns), not the new one.
    #[pg_test]
    fn stats_of_the_0_2_0_catalog_keep_their_row() {
        Spi::run(
            "CREATE FUNCTION pg_temp.stats_0_2() RETURNS TABLE (
                node_id int, epoch timestamptz, time_bits int, node_bits int, sequence_bits int,
                ids_issued bigint, last_id bigint, drift_ms bigint, max_drift_ms bigint,
                max_clock_drift_ms bigint, backward_steps bigint, largest_backward_step_ms bigint,
                borrowed_ms bigint, waits bigint, wait_time_ms double precision,
                drift_errors bigint, lease_until timestamptz, lease_writes bigint)
             STRICT VOLATILE LANGUAGE c AS '$libdir/snowflake_id', 'snowflake_stats_wrapper'",
        )
        .unwrap();
        assert!(one::<bool>(
            "SELECT node_id = 42 AND lease_writes = (SELECT lease_writes FROM snowflake_stats())
             FROM pg_temp.stats_0_2()"
        ));
    }
}
