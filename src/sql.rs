//! The SQL functions: thin glue between SQL types and the core.

use crate::core::config::Config;
use crate::core::epoch::UNIX_TO_POSTGRES_MS;
use crate::core::generator::{self, DriftPolicy, GenerateError, IssuedRange};
use crate::core::layout::IdParts;
use crate::errors::{self, raise, raise_with_detail};
use crate::guc;
use crate::server_env::ServerEnv;
use crate::shmem::{self, Blocked, Refusal, Shared};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode as Code;
use std::sync::atomic::{AtomicBool, Ordering};

/// The configuration and shared state, or the "not preloaded" error.
pub(crate) fn ready() -> (&'static Config, &'static Shared) {
    match (guc::config(), shmem::shared()) {
        (Some(config), Some(shared)) => (config, shared),
        _ => errors::not_preloaded(),
    }
}

/// The configuration, for functions that only decode.
fn config() -> &'static Config {
    ready().0
}

/// Checks that this server may issue IDs now and returns its node id.
pub(crate) fn issuing_node(config: &Config, shared: &Shared) -> u64 {
    let Some(node) = config.node_id else {
        raise(
            Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "snowflake_id.node_id is not set",
            format!(
                "Add snowflake_id.node_id = <n> to postgresql.conf, with n between 0 and {} and different on every server, then restart the server.",
                config.layout.max_node()
            ),
        );
    };
    match shared.blocked() {
        Blocked::No => {}
        Blocked::ConfigChanged => {
            let changes = shared
                .recorded()
                .map(|old| old.differences(&shmem::current_record(config, 0)).join("; "))
                .unwrap_or_default();
            raise_with_detail(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the configuration changed since this server last issued IDs",
                changes,
                "IDs issued under the old and the new configuration could collide or sort wrongly. Restore the old settings, or, if the change is intended, run SELECT snowflake_accept_configuration(); as a superuser.",
            );
        }
        Blocked::LeaseCorrupt => raise(
            Code::ERRCODE_DATA_CORRUPTED,
            shared.message(),
            "Restore the file from a backup; or, after making sure the system clock is later than every ID this server issued, remove it and restart the server.",
        ),
        Blocked::LeaseUnreadable => raise(
            Code::ERRCODE_IO_ERROR,
            shared.message(),
            "Make the file readable by the server's operating system user, then restart the server.",
        ),
    }
    if in_recovery() {
        raise(
            Code::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            "cannot issue IDs on a server in recovery (a standby)",
            "Issue IDs on the primary. Decoding works on a standby; after promotion it issues IDs once its clock is past the old primary's last ID (README, \"Operations: sharding and replication\").",
        );
    }
    node
}

/// Whether the server is in recovery. A backend that saw recovery end never
/// sees it again (promotion is one way; a restart makes new backends), so
/// PostgreSQL is asked only until then: the call through pgrx's error guard
/// cost a twentieth of `snowflake_next()`.
fn in_recovery() -> bool {
    static RECOVERY_ENDED: AtomicBool = AtomicBool::new(false);
    if RECOVERY_ENDED.load(Ordering::Relaxed) {
        return false;
    }
    let in_recovery = unsafe { pg_sys::RecoveryInProgress() };
    if !in_recovery {
        RECOVERY_ENDED.store(true, Ordering::Relaxed);
    }
    in_recovery
}

/// Issues `count` IDs under `policy` or raises the matching error.
pub(crate) fn issue(
    config: &Config,
    shared: &Shared,
    policy: DriftPolicy,
    count: u64,
) -> IssuedRange {
    let mut env = ServerEnv::new(config, shared);
    match generator::issue(&shared.generator, &config.layout, policy, count, &mut env) {
        Ok(range) => range,
        Err(e @ GenerateError::ClockBehind { .. }) => raise_with_detail(
            Code::ERRCODE_SYSTEM_ERROR,
            e.to_string(),
            "The system clock stepped back, or the server restarted after a lease that lies ahead of the clock. Issuing now could not keep IDs unique and ordered without waiting for the clock to catch up.",
            "Correct the system clock, or wait until it passes the last issued ID, or raise snowflake_id.max_clock_drift (ALTER SYSTEM SET snowflake_id.max_clock_drift = '1h'; SELECT pg_reload_conf();).",
        ),
        Err(e @ (GenerateError::TimeExhausted { .. } | GenerateError::TooMany { .. })) => raise(
            Code::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            e.to_string(),
            "The ID layout has no time left: a new layout with a later snowflake_id.epoch or more time bits is needed.",
        ),
        Err(e @ GenerateError::BatchTooLarge { .. }) => raise(
            Code::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            e.to_string(),
            "Use smaller batches, or raise snowflake_id.max_clock_drift.",
        ),
        Err(GenerateError::Lease(msg)) => raise(
            Code::ERRCODE_IO_ERROR,
            msg,
            "The lease file in the data directory must be writable: check free space and permissions.",
        ),
    }
}

/// A lower bound on every ID `snowflake_next()` issues from now on: after
/// the generator's last pair (which a batch may have pushed ahead of the
/// clock), and not before the current millisecond.
pub(crate) fn first_id_from_now() -> i64 {
    let (config, shared) = ready();
    let layout = &config.layout;
    let last = shared.generator.pair.load(Ordering::Acquire);
    let now_ms = ServerEnv::new(config, shared).now_ms();
    let next = generator::next_pair(layout, last, now_ms).min(layout.max_pair());
    layout.id_of_pair(next, config.node_id.unwrap_or(0))
}

/// Issues the next ID of this server: unique, and greater than every ID this
/// server issued before.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_next() -> i64 {
    let (config, shared) = ready();
    let node = issuing_node(config, shared);
    let range = issue(config, shared, guc::drift_policy(), 1);
    config.layout.id_of_pair(range.first_pair, node)
}

fn decode(config: &Config, id: i64) -> IdParts {
    match config.layout.decode(id) {
        Ok(parts) => parts,
        Err(e) => raise(
            Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            e.to_string(),
            "Pass an ID produced by snowflake_next().",
        ),
    }
}

/// The timestamp of millisecond `time_ms` of the ID time field.
pub(crate) fn timestamp_of(config: &Config, time_ms: u64) -> TimestampWithTimeZone {
    let unix_ms = config.epoch_unix_ms.checked_add_unsigned(time_ms);
    unix_ms
        .and_then(|ms| (ms - UNIX_TO_POSTGRES_MS).checked_mul(1000))
        .and_then(|us| TimestampWithTimeZone::try_from(us).ok())
        .filter(|ts| ts.is_finite())
        .unwrap_or_else(|| {
            raise(
                Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!(
                    "{time_ms} ms after the epoch is beyond the range of timestamp with time zone"
                ),
                "Only IDs whose time PostgreSQL can represent can be converted to a timestamp.",
            )
        })
}

/// Splits an ID into its time (millisecond precision), node id and sequence.
#[pg_extern(stable, parallel_safe)]
fn snowflake_decode(
    id: i64,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(node_id, i32),
        name!(sequence, i32),
    ),
> {
    let config = config();
    let parts = decode(config, id);
    TableIterator::once((
        timestamp_of(config, parts.time_ms),
        parts.node as i32,
        parts.sequence as i32,
    ))
}

/// The time an ID was issued (millisecond precision).
#[pg_extern(stable, parallel_safe)]
fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    let config = config();
    timestamp_of(config, decode(config, id).time_ms)
}

/// The node id of the server that issued an ID.
#[pg_extern(stable, parallel_safe)]
fn snowflake_node(id: i64) -> i32 {
    decode(config(), id).node as i32
}

/// The sequence of an ID within its millisecond.
#[pg_extern(stable, parallel_safe)]
fn snowflake_sequence(id: i64) -> i32 {
    decode(config(), id).sequence as i32
}

/// The smallest ID any node can issue at `ts`: `id >= snowflake_from_timestamp(t)`
/// selects the IDs issued at or after `t` with an index range scan.
#[pg_extern(stable, parallel_safe)]
fn snowflake_from_timestamp(ts: TimestampWithTimeZone) -> i64 {
    let config = config();
    if !ts.is_finite() {
        raise(
            Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "an infinite timestamp has no snowflake ID",
            "Pass a finite timestamp between snowflake_id.epoch and the end of the time field.",
        );
    }
    let unix_ms = ts.into_inner().div_euclid(1000) + UNIX_TO_POSTGRES_MS;
    let time_ms = unix_ms - config.epoch_unix_ms;
    let hint = || {
        format!(
            "IDs can express times from snowflake_id.epoch ({}) to {}.",
            timestamp_of(config, 0),
            timestamp_of(config, config.layout.max_time_ms())
        )
    };
    if time_ms < 0 {
        raise(
            Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("{ts} is before the epoch"),
            hint(),
        );
    }
    match config.layout.smallest_id_at(time_ms as u64) {
        Ok(id) => id,
        Err(_) => raise(
            Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!(
                "{ts} is past the end of the {}-bit time field",
                config.layout.time_bits()
            ),
            hint(),
        ),
    }
}

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
    crate::server_env::flush_issued(c);
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as i64;
    let issued = load(&c.ids_issued);
    let pair = g.pair.load(Ordering::Acquire);
    // Before the first ID the pair only holds the restart floor.
    let last_id = (issued > 0)
        .then(|| config.node_id.map(|n| layout.id_of_pair(pair, n)))
        .flatten();
    let env = ServerEnv::new(config, shared);
    let drift = (issued > 0).then(|| layout.pair_time(pair) as i64 - env.now_ms());
    let lease = g.lease_until_ms.load(Ordering::Acquire);
    TableIterator::once((
        config.node_id.map(|n| n as i32),
        timestamp_of(config, 0),
        layout.time_bits() as i32,
        layout.node_bits() as i32,
        layout.sequence_bits() as i32,
        issued,
        last_id,
        drift,
        c.max_drift_ms.load(Ordering::Relaxed),
        guc::max_clock_drift_ms() as i64,
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

/// Accepts a change of epoch, widths or node id made on purpose: new IDs
/// are made greater than every ID the old configuration can have issued.
/// Superuser only.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_accept_configuration() -> String {
    let (config, shared) = ready();
    if !unsafe { pg_sys::superuser() } {
        raise(
            Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "only a superuser may accept a configuration change",
            "Ask a superuser to run SELECT snowflake_accept_configuration();",
        );
    }
    let env = ServerEnv::new(config, shared);
    match shared.accept_configuration(config, env.now_ms(), guc::max_clock_drift_ms()) {
        Ok(text) => text,
        Err(Refusal::LeaseUnusable(msg)) => raise(
            Code::ERRCODE_DATA_CORRUPTED,
            msg,
            "A lease that cannot be read cannot be accepted: restore it from a backup, or remove it after making sure the system clock is later than every ID this server issued, and restart.",
        ),
        Err(Refusal::Unorderable(msg)) => raise(
            Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            msg,
            "Keep the old layout: the new one cannot issue IDs greater than the existing ones.",
        ),
        Err(Refusal::TooFarAhead { first_time_ms, now_ms, old_max_id }) => {
            let ahead_ms = first_time_ms as i64 - now_ms;
            let hint = if ahead_ms < i32::MAX as i64 {
                format!("Keep the old epoch and time width (moving bits between snowflake_id.node_bits and snowflake_id.sequence_bits is fine), or raise snowflake_id.max_clock_drift above {ahead_ms} ms for the acceptance and the time it takes the clock to catch up.")
            } else {
                "Keep the old epoch and time width: moving bits between snowflake_id.node_bits and snowflake_id.sequence_bits is fine. This change cannot keep the IDs ordered.".to_string()
            };
            raise_with_detail(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "under the new configuration, IDs greater than {old_max_id} start at {}, {ahead_ms} ms ahead of the clock",
                    timestamp_of(config, first_time_ms)
                ),
                "Moving the epoch later, or giving the time field more bits, maps the present onto smaller IDs than those already issued.",
                hint,
            )
        }
        Err(Refusal::Write(msg)) => {
            raise(Code::ERRCODE_IO_ERROR, msg, "The data directory must be writable: check free space and permissions.")
        }
    }
}

extension_sql!(
    r#"
-- Fail CREATE EXTENSION at once when the library is not preloaded, instead
-- of at the first call.
SELECT snowflake_stats();
REVOKE ALL ON FUNCTION snowflake_accept_configuration() FROM PUBLIC;
"#,
    name = "preload_check",
    finalize
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
pub(crate) mod tests {
    // Runs inside a server started by `cargo pgrx test` with the library
    // preloaded and `snowflake_id.node_id = 42` (see `crate::pg_test`).
    use pgrx::prelude::*;

    /// The one value `sql` returns (also used by the other modules' tests).
    pub(crate) fn one<T: IntoDatum + FromDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql)
            .expect("query runs")
            .expect("not null")
    }

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
    fn decode_agrees_with_the_single_part_functions() {
        Spi::run(
            "CREATE TEMP TABLE one_id AS SELECT snowflake_next() AS id, clock_timestamp() AS at",
        )
        .unwrap();
        assert!(one::<bool>(
            "SELECT d.ts = snowflake_timestamp(id) AND d.node_id = snowflake_node(id) AND d.sequence = snowflake_sequence(id)
               AND d.node_id = 42 AND abs(extract(epoch FROM d.ts - at)) < 1
             FROM one_id, snowflake_decode(id) d"
        ));
    }

    #[pg_test]
    fn decode_of_known_ids() {
        // 0 is the epoch, node 0, sequence 0; i64::MAX has every field full.
        assert!(one::<bool>(
            "SELECT ts = '2025-01-01 00:00:00+00' AND node_id = 0 AND sequence = 0 FROM snowflake_decode(0)"
        ));
        assert!(one::<bool>(
            "SELECT node_id = 1023 AND sequence = 4095 FROM snowflake_decode(9223372036854775807)"
        ));
        // time 1000 ms, node 5, sequence 7
        let id = (1000i64 << 22) | (5 << 12) | 7;
        assert!(one::<bool>(&format!(
            "SELECT ts = '2025-01-01 00:00:01+00' AND node_id = 5 AND sequence = 7 FROM snowflake_decode({id})"
        )));
    }

    #[pg_test(error = "snowflake_id: -1 is not a snowflake ID: IDs are never negative")]
    fn decode_rejects_negative_ids() {
        Spi::run("SELECT snowflake_decode(-1)").unwrap();
    }

    #[pg_test(error = "snowflake_id: -5 is not a snowflake ID: IDs are never negative")]
    fn timestamp_rejects_negative_ids() {
        Spi::run("SELECT snowflake_timestamp(-5)").unwrap();
    }

    #[pg_test]
    fn from_timestamp_bounds_ids_of_that_millisecond() {
        Spi::run("CREATE TEMP TABLE one_id AS SELECT snowflake_next() AS id").unwrap();
        assert!(one::<bool>(
            "SELECT snowflake_from_timestamp(snowflake_timestamp(id)) <= id
                AND snowflake_from_timestamp(snowflake_timestamp(id) + interval '1 millisecond') > id
                AND snowflake_from_timestamp(snowflake_timestamp(id)) >> 22 = id >> 22
             FROM one_id"
        ));
        assert_eq!(
            one::<i64>("SELECT snowflake_from_timestamp('2025-01-01 00:00:00+00')"),
            0
        );
        assert_eq!(
            one::<i64>("SELECT snowflake_from_timestamp('2025-01-01 00:00:00.0019+00')"),
            1 << 22
        );
    }

    #[pg_test(error = "snowflake_id: 2024-12-31 23:59:59.999+00 is before the epoch")]
    fn from_timestamp_rejects_times_before_the_epoch() {
        Spi::run(
            "SET TimeZone = 'UTC'; SELECT snowflake_from_timestamp('2024-12-31 23:59:59.999+00')",
        )
        .unwrap();
    }

    #[pg_test(
        error = "snowflake_id: 2100-01-01 00:00:00+00 is past the end of the 41-bit time field"
    )]
    fn from_timestamp_rejects_times_past_the_time_field() {
        Spi::run("SET TimeZone = 'UTC'; SELECT snowflake_from_timestamp('2100-01-01 00:00:00+00')")
            .unwrap();
    }

    #[pg_test(error = "snowflake_id: an infinite timestamp has no snowflake ID")]
    fn from_timestamp_rejects_infinity() {
        Spi::run("SELECT snowflake_from_timestamp('infinity')").unwrap();
    }

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

    #[pg_test(
        error = "parameter \"snowflake_id.node_id\" cannot be changed without restarting the server"
    )]
    fn node_id_cannot_be_set_in_a_session() {
        Spi::run("SET snowflake_id.node_id = 7").unwrap();
    }

    #[pg_test(
        error = "parameter \"snowflake_id.node_bits\" cannot be changed without restarting the server"
    )]
    fn layout_cannot_be_set_in_a_session() {
        Spi::run("SET snowflake_id.node_bits = 8").unwrap();
    }

    #[pg_test]
    fn settings_are_visible() {
        assert_eq!(one::<String>("SHOW snowflake_id.node_id"), "42");
        assert_eq!(
            one::<String>("SHOW snowflake_id.epoch"),
            "2025-01-01 00:00:00+00"
        );
        assert_eq!(one::<String>("SHOW snowflake_id.max_clock_drift"), "5s");
    }

    #[pg_test]
    fn accepting_an_unchanged_configuration_changes_nothing() {
        let text: String = one("SELECT snowflake_accept_configuration()");
        assert!(text.starts_with("nothing to accept"), "{text}");
    }

    #[pg_test(error = "snowflake_id: only a superuser may accept a configuration change")]
    fn accepting_needs_a_superuser() {
        Spi::run("CREATE ROLE snowflake_plain_user; GRANT EXECUTE ON FUNCTION snowflake_accept_configuration() TO snowflake_plain_user; SET ROLE snowflake_plain_user").unwrap();
        Spi::run("SELECT snowflake_accept_configuration()").unwrap();
    }

    #[pg_test]
    fn accept_is_not_executable_by_public() {
        assert!(!one::<bool>(
            "SELECT has_function_privilege('public', 'snowflake_accept_configuration()', 'EXECUTE')"
        ));
    }

    #[pg_test]
    fn functions_have_the_documented_volatility_and_parallel_safety() {
        assert_eq!(one::<String>("SELECT provolatile::text || proparallel::text FROM pg_proc WHERE proname = 'snowflake_next'"), "vs");
        assert_eq!(one::<String>("SELECT provolatile::text || proparallel::text FROM pg_proc WHERE proname = 'snowflake_decode'"), "ss");
    }
}
