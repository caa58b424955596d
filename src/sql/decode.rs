//! Reading IDs back: `snowflake_decode`, `snowflake_timestamp`,
//! `snowflake_node`, `snowflake_sequence`, and `snowflake_from_timestamp`
//! (the smallest ID of a time, for range scans). They only need the
//! configuration, so they work on a standby and while issuing is blocked.

use crate::core::config::Config;
use crate::core::epoch::UNIX_TO_POSTGRES_MS;
use crate::core::layout::IdParts;
use crate::pg::backend::ready;
use crate::pg::clock::timestamp_of;
use crate::pg::errors::{raise, Error};
use pgrx::prelude::*;

/// The configuration, for functions that only decode.
fn config() -> &'static Config {
    ready().0
}

fn decode(config: &Config, id: i64) -> IdParts {
    config.layout.decode(id).unwrap_or_else(|e| raise(e))
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
        raise(Error::InfiniteTimestamp);
    }
    let unix_ms = ts.into_inner().div_euclid(1000) + UNIX_TO_POSTGRES_MS;
    let time_ms = unix_ms - config.epoch_unix_ms;
    // The range IDs can express, for the hint; computed only on error.
    let range = || {
        (
            timestamp_of(config, 0).to_string(),
            timestamp_of(config, config.layout.max_time_ms()).to_string(),
        )
    };
    if time_ms < 0 {
        let (epoch, end) = range();
        raise(Error::BeforeEpoch {
            ts: ts.to_string(),
            epoch,
            end,
        });
    }
    match config.layout.smallest_id_at(time_ms as u64) {
        Ok(id) => id,
        Err(_) => {
            let (epoch, end) = range();
            raise(Error::PastTimeField {
                ts: ts.to_string(),
                time_bits: config.layout.time_bits(),
                epoch,
                end,
            })
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // Runs inside a server started by `cargo pgrx test` with the library
    // preloaded and `snowflake_id.node_id = 42` (see `crate::pg_test`).
    use crate::test_support::one;
    use pgrx::prelude::*;

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
}
