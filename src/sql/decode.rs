//! Reading IDs back: `snowflake_decode`, `snowflake_timestamp`,
//! `snowflake_node`, `snowflake_sequence`, and `snowflake_from_timestamp`
//! (the smallest ID of a time, for range scans); `snowflake_id_span` (how
//! many ID values an interval covers, for ID-based partitions). They only
//! need the configuration, so they work on a standby and while issuing is
//! blocked.
//!
//! Each comes twice. The one-argument forms read this server's layout and
//! epoch, so they are STABLE: a setting could differ on another server or
//! after a restart. The forms that take the layout as arguments (`epoch`,
//! `node_bits`, `sequence_bits`) depend on nothing else, so they are
//! IMMUTABLE: generated columns, expression and partial indexes, check
//! constraints and plan-time partition pruning accept them.
//!
//! The IMMUTABLE forms take the epoch as `timestamptz` or as `text`. A
//! `timestamptz` literal without a zone is read in the session's
//! `TimeZone` when the statement runs, so `'2025-01-01'` in a session in
//! New York is five hours off the setting's epoch, and a generated column
//! made there stores every time five hours off, with no error. The `text`
//! form reads the epoch as `snowflake_id.epoch` is read: UTC unless a zone
//! is given. PostgreSQL resolves an untyped literal to the `text` form (a
//! string argument prefers the string category), so the natural spelling,
//! `snowflake_timestamp(id, '2025-01-01', 10, 12)`, is the safe one; a
//! value of type `timestamptz` (a column, a cast) takes the other form.

use crate::core::config::Config;
use crate::core::epoch::{parse_epoch, UNIX_TO_POSTGRES_MS};
use crate::core::layout::{IdLayout, IdParts};
use crate::pg::backend::ready;
use crate::pg::clock::timestamp_of;
use crate::pg::errors::{raise, Error};
use pgrx::prelude::*;

/// The configuration, for functions that only decode.
fn config() -> &'static Config {
    ready().0
}

/// The configuration given as arguments to an IMMUTABLE form: checked like
/// the settings, except that the epoch may lie anywhere (a check against the
/// clock would make the function depend on the time it runs).
fn given(epoch: TimestampWithTimeZone, node_bits: i32, sequence_bits: i32) -> Config {
    let layout = given_layout(node_bits, sequence_bits);
    if !epoch.is_finite() {
        raise(Error::InfiniteEpoch);
    }
    Config {
        layout,
        node_id: None,
        epoch_unix_ms: unix_ms_of(epoch),
    }
}

/// [`given`] with the epoch as text, parsed as `snowflake_id.epoch` is:
/// UTC unless the text names a zone, whatever the session's `TimeZone`.
fn given_text(epoch: &str, node_bits: i32, sequence_bits: i32) -> Config {
    let layout = given_layout(node_bits, sequence_bits);
    let epoch_unix_ms = parse_epoch(epoch).unwrap_or_else(|e| raise(Error::EpochArgument(e)));
    Config {
        layout,
        node_id: None,
        epoch_unix_ms,
    }
}

fn given_layout(node_bits: i32, sequence_bits: i32) -> IdLayout {
    IdLayout::new(node_bits.into(), sequence_bits.into())
        .unwrap_or_else(|e| raise(Error::LayoutArgument(e)))
}

/// Milliseconds since 1970 of a finite timestamp (rounded down).
fn unix_ms_of(ts: TimestampWithTimeZone) -> i64 {
    ts.into_inner().div_euclid(1000) + UNIX_TO_POSTGRES_MS
}

fn decode(config: &Config, id: i64) -> IdParts {
    config.layout.decode(id).unwrap_or_else(|e| raise(e))
}

/// (pgrx reads the result type of an SQL function from its signature, so
/// the functions spell it out.)
type Decoded = TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(node_id, i32),
        name!(sequence, i32),
    ),
>;

fn decoded(config: &Config, id: i64) -> Decoded {
    let parts = decode(config, id);
    TableIterator::once((
        timestamp_of(config, parts.time_ms),
        parts.node as i32,
        parts.sequence as i32,
    ))
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
    decoded(config(), id)
}

/// `snowflake_decode` with the layout given (IMMUTABLE).
#[pg_extern(immutable, parallel_safe, name = "snowflake_decode")]
fn snowflake_decode_given(
    id: i64,
    epoch: TimestampWithTimeZone,
    node_bits: i32,
    sequence_bits: i32,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(node_id, i32),
        name!(sequence, i32),
    ),
> {
    decoded(&given(epoch, node_bits, sequence_bits), id)
}

/// `snowflake_decode` with the layout given, the epoch as text read in UTC
/// unless it names a zone (IMMUTABLE).
#[pg_extern(immutable, parallel_safe, name = "snowflake_decode")]
fn snowflake_decode_epoch_text(
    id: i64,
    epoch: &str,
    node_bits: i32,
    sequence_bits: i32,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(node_id, i32),
        name!(sequence, i32),
    ),
> {
    decoded(&given_text(epoch, node_bits, sequence_bits), id)
}

/// The time an ID was issued (millisecond precision).
#[pg_extern(stable, parallel_safe)]
fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    let config = config();
    timestamp_of(config, decode(config, id).time_ms)
}

/// `snowflake_timestamp` with the layout given (IMMUTABLE).
#[pg_extern(immutable, parallel_safe, name = "snowflake_timestamp")]
fn snowflake_timestamp_given(
    id: i64,
    epoch: TimestampWithTimeZone,
    node_bits: i32,
    sequence_bits: i32,
) -> TimestampWithTimeZone {
    let config = given(epoch, node_bits, sequence_bits);
    timestamp_of(&config, decode(&config, id).time_ms)
}

/// `snowflake_timestamp` with the layout given, the epoch as text
/// (IMMUTABLE).
#[pg_extern(immutable, parallel_safe, name = "snowflake_timestamp")]
fn snowflake_timestamp_epoch_text(
    id: i64,
    epoch: &str,
    node_bits: i32,
    sequence_bits: i32,
) -> TimestampWithTimeZone {
    let config = given_text(epoch, node_bits, sequence_bits);
    timestamp_of(&config, decode(&config, id).time_ms)
}

/// The node id of the server that issued an ID.
#[pg_extern(stable, parallel_safe)]
fn snowflake_node(id: i64) -> i32 {
    decode(config(), id).node as i32
}

/// `snowflake_node` with the layout given (IMMUTABLE; the epoch is checked
/// but does not change the result).
#[pg_extern(immutable, parallel_safe, name = "snowflake_node")]
fn snowflake_node_given(
    id: i64,
    epoch: TimestampWithTimeZone,
    node_bits: i32,
    sequence_bits: i32,
) -> i32 {
    decode(&given(epoch, node_bits, sequence_bits), id).node as i32
}

/// `snowflake_node` with the layout given, the epoch as text (IMMUTABLE).
#[pg_extern(immutable, parallel_safe, name = "snowflake_node")]
fn snowflake_node_epoch_text(id: i64, epoch: &str, node_bits: i32, sequence_bits: i32) -> i32 {
    decode(&given_text(epoch, node_bits, sequence_bits), id).node as i32
}

/// The sequence of an ID within its millisecond.
#[pg_extern(stable, parallel_safe)]
fn snowflake_sequence(id: i64) -> i32 {
    decode(config(), id).sequence as i32
}

/// `snowflake_sequence` with the layout given (IMMUTABLE; the epoch is
/// checked but does not change the result).
#[pg_extern(immutable, parallel_safe, name = "snowflake_sequence")]
fn snowflake_sequence_given(
    id: i64,
    epoch: TimestampWithTimeZone,
    node_bits: i32,
    sequence_bits: i32,
) -> i32 {
    decode(&given(epoch, node_bits, sequence_bits), id).sequence as i32
}

/// `snowflake_sequence` with the layout given, the epoch as text
/// (IMMUTABLE).
#[pg_extern(immutable, parallel_safe, name = "snowflake_sequence")]
fn snowflake_sequence_epoch_text(id: i64, epoch: &str, node_bits: i32, sequence_bits: i32) -> i32 {
    decode(&given_text(epoch, node_bits, sequence_bits), id).sequence as i32
}

/// The smallest ID any node can issue at `ts`: `id >= snowflake_from_timestamp(t)`
/// selects the IDs issued at or after `t` with an index range scan.
#[pg_extern(stable, parallel_safe)]
fn snowflake_from_timestamp(ts: TimestampWithTimeZone) -> i64 {
    from_timestamp(config(), ts)
}

/// `snowflake_from_timestamp` with the layout given (IMMUTABLE: with
/// constant arguments the planner folds it, and prunes ID-range partitions
/// at plan time).
#[pg_extern(immutable, parallel_safe, name = "snowflake_from_timestamp")]
fn snowflake_from_timestamp_given(
    ts: TimestampWithTimeZone,
    epoch: TimestampWithTimeZone,
    node_bits: i32,
    sequence_bits: i32,
) -> i64 {
    from_timestamp(&given(epoch, node_bits, sequence_bits), ts)
}

/// `snowflake_from_timestamp` with the layout given, the epoch as text
/// (IMMUTABLE). `ts` stays a `timestamptz`: it is the reader's time, read
/// in the session's `TimeZone` like any other.
#[pg_extern(immutable, parallel_safe, name = "snowflake_from_timestamp")]
fn snowflake_from_timestamp_epoch_text(
    ts: TimestampWithTimeZone,
    epoch: &str,
    node_bits: i32,
    sequence_bits: i32,
) -> i64 {
    from_timestamp(&given_text(epoch, node_bits, sequence_bits), ts)
}

/// How many ID values `span` covers with this server's layout: the
/// interval of an ID-range partition holding that much time (pg_partman's
/// ID-based partitioning), `snowflake_from_timestamp(t + span) -
/// snowflake_from_timestamp(t)` for any `t`. Days count as 24 hours.
#[pg_extern(stable, parallel_safe)]
fn snowflake_id_span(span: Interval) -> i64 {
    id_span(&config().layout, span)
}

/// `snowflake_id_span` with the widths given (IMMUTABLE; the epoch does
/// not matter).
#[pg_extern(immutable, parallel_safe, name = "snowflake_id_span")]
fn snowflake_id_span_given(span: Interval, node_bits: i32, sequence_bits: i32) -> i64 {
    id_span(&given_layout(node_bits, sequence_bits), span)
}

fn id_span(layout: &IdLayout, span: Interval) -> i64 {
    if span.months() != 0 {
        raise(Error::SpanWithMonths {
            span: span.to_string(),
        });
    }
    let micros = i128::from(span.days()) * 86_400_000_000 + i128::from(span.micros());
    if micros <= 0 || micros % 1000 != 0 {
        raise(Error::SpanNotPositiveMs {
            span: span.to_string(),
        });
    }
    u64::try_from(micros / 1000)
        .ok()
        .and_then(|ms| layout.ids_in_span(ms))
        .unwrap_or_else(|| {
            raise(Error::SpanTooLong {
                span: span.to_string(),
                time_bits: layout.time_bits(),
            })
        })
}

fn from_timestamp(config: &Config, ts: TimestampWithTimeZone) -> i64 {
    if !ts.is_finite() {
        raise(Error::InfiniteTimestamp);
    }
    let time_ms = unix_ms_of(ts) - config.epoch_unix_ms;
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

    #[pg_test]
    fn given_layout_forms_agree_with_the_server_layout_and_are_immutable() {
        Spi::run("CREATE TEMP TABLE ids AS SELECT snowflake_next_batch(5000) AS id").unwrap();
        Spi::run("CREATE TEMP TABLE l AS SELECT epoch, node_bits, sequence_bits FROM snowflake_node_info()").unwrap();
        assert!(one::<bool>(
            "SELECT bool_and(snowflake_timestamp(id, epoch, node_bits, sequence_bits) = snowflake_timestamp(id)
                         AND snowflake_node(id, epoch, node_bits, sequence_bits) = snowflake_node(id)
                         AND snowflake_sequence(id, epoch, node_bits, sequence_bits) = snowflake_sequence(id)
                         AND (SELECT row(d.*) FROM snowflake_decode(id, epoch, node_bits, sequence_bits) d)
                             = (SELECT row(d.*) FROM snowflake_decode(id) d)
                         AND snowflake_from_timestamp(snowflake_timestamp(id), epoch, node_bits, sequence_bits)
                             = snowflake_from_timestamp(snowflake_timestamp(id)))
             FROM ids, l"
        ));
        // Another layout reads the same bits differently.
        assert_eq!(
            one::<i32>(
                "SELECT snowflake_node((1000::bigint << 22) | (5 << 12) | 7, '2025-01-01', 8, 14)"
            ),
            1
        );
        assert_eq!(
            one::<i32>("SELECT snowflake_sequence((1000::bigint << 22) | (5 << 12) | 7, '2025-01-01', 8, 14)"),
            ((5 << 12) | 7) & 0x3fff
        );
        assert!(one::<bool>(
            "SELECT snowflake_timestamp(1000::bigint << 22, '2020-06-01 00:00:00+00', 10, 12) = '2020-06-01 00:00:01+00'"
        ));
        // Every form that takes the layout is IMMUTABLE; the others STABLE.
        assert_eq!(
            one::<String>(
                "SELECT string_agg(DISTINCT provolatile::text || pronargs, ',' ORDER BY provolatile::text || pronargs)
                 FROM pg_proc WHERE proname IN ('snowflake_decode', 'snowflake_timestamp', 'snowflake_node',
                                                'snowflake_sequence', 'snowflake_from_timestamp')"
            ),
            "i4,s1"
        );
        assert_eq!(
            one::<String>(
                "SELECT string_agg(provolatile::text || pronargs, ',' ORDER BY pronargs)
                 FROM pg_proc WHERE proname = 'snowflake_id_span'"
            ),
            "s1,i3"
        );
    }

    #[pg_test(
        error = "snowflake_id: node_bits = 20 and sequence_bits = 12 leave 31 bits for the time, fewer than 35: node_bits + sequence_bits must be at most 28"
    )]
    fn given_layout_is_checked() {
        Spi::run("SELECT snowflake_timestamp(1, '2025-01-01', 20, 12)").unwrap();
    }

    #[pg_test(error = "snowflake_id: an infinite epoch cannot place IDs in time")]
    fn given_epoch_must_be_finite() {
        Spi::run("SELECT snowflake_decode(1, '-infinity'::timestamptz, 10, 12)").unwrap();
    }

    #[pg_test]
    fn an_epoch_literal_is_read_in_utc_whatever_the_session_time_zone() {
        // The trap the text form closes: a zone-less timestamptz literal is
        // read in the session's TimeZone, a text one as the setting is.
        Spi::run("SET TimeZone = 'America/New_York'").unwrap();
        Spi::run("CREATE TEMP TABLE one_id AS SELECT snowflake_next() AS id").unwrap();
        assert!(one::<bool>(
            "SELECT snowflake_timestamp(id, '2025-01-01', 10, 12) = snowflake_timestamp(id)
                AND snowflake_timestamp(id, '2025-01-01 00:00:00+00', 10, 12) = snowflake_timestamp(id)
                AND snowflake_timestamp(id, '2025-01-01T05:30+05:30', 10, 12) = snowflake_timestamp(id)
                AND (SELECT ts FROM snowflake_decode(id, '2025-01-01', 10, 12)) = snowflake_timestamp(id)
                AND snowflake_node(id, '2025-01-01', 10, 12) = 42
                AND snowflake_sequence(id, '2025-01-01', 10, 12) = snowflake_sequence(id)
                AND snowflake_from_timestamp(snowflake_timestamp(id), '2025-01-01', 10, 12)
                    = snowflake_from_timestamp(snowflake_timestamp(id))
                AND snowflake_timestamp(id, '2025-01-01'::timestamptz, 10, 12)
                    = snowflake_timestamp(id) + interval '5 hours'
             FROM one_id"
        ));
    }

    #[pg_test(
        error = "snowflake_id: the epoch '-infinity' is not a valid timestamp: expected a four-digit year"
    )]
    fn an_epoch_text_must_be_written_like_the_setting() {
        Spi::run("SELECT snowflake_decode(1, '-infinity', 10, 12)").unwrap();
    }

    #[pg_test]
    fn id_span_is_the_width_of_that_much_time() {
        assert_eq!(
            one::<i64>("SELECT snowflake_id_span('1 day')"),
            86_400_000i64 << 22
        );
        assert_eq!(
            one::<i64>("SELECT snowflake_id_span('1 day', 10, 12)"),
            86_400_000i64 << 22
        );
        assert_eq!(
            one::<i64>("SELECT snowflake_id_span('1 second', 0, 1)"),
            2000
        );
        assert!(one::<bool>(
            "SELECT snowflake_from_timestamp(t + interval '3 days 4 hours') - snowflake_from_timestamp(t)
                    = snowflake_id_span('3 days 4 hours')
             FROM (VALUES (timestamptz '2026-03-29 00:00:00+00')) v(t)"
        ));
    }

    #[pg_test(
        error = "snowflake_id: the interval 1 mon has months, which have no fixed length in IDs"
    )]
    fn id_span_refuses_months() {
        Spi::run("SELECT snowflake_id_span('1 month')").unwrap();
    }

    #[pg_test(
        error = "snowflake_id: the interval 00:00:00.0005 is not a positive whole number of milliseconds"
    )]
    fn id_span_refuses_fractions_of_a_millisecond() {
        Spi::run("SELECT snowflake_id_span('0.5 milliseconds')").unwrap();
    }

    #[pg_test(
        error = "snowflake_id: the interval -1 days is not a positive whole number of milliseconds"
    )]
    fn id_span_refuses_negative_spans() {
        Spi::run("SELECT snowflake_id_span('-1 day')").unwrap();
    }

    #[pg_test(error = "snowflake_id: the interval 30000 days is longer than the 41-bit time field")]
    fn id_span_refuses_spans_past_the_time_field() {
        Spi::run("SELECT snowflake_id_span('30000 days')").unwrap();
    }
}
