//! Time inside PostgreSQL: the wall clock the generator reads, and the
//! conversion of an ID's time field to a `timestamp with time zone`.
//!
//! The clock is read with `clock_gettime(CLOCK_REALTIME)` through the vDSO,
//! no system call. It is called directly rather than through `SystemTime`,
//! whose `Duration` arithmetic cost a tenth of a call of `snowflake_next()`
//! (measured with perf, see bench/README.md). This module reads no setting
//! and no shared state, so everything else can depend on it.

use crate::core::config::Config;
use crate::core::epoch::UNIX_TO_POSTGRES_MS;
use crate::pg::errors::{raise, Error};
use pgrx::prelude::*;

/// `CLOCK_REALTIME` as (seconds, nanoseconds) since 1970.
fn realtime() -> (i64, i64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid pointer; CLOCK_REALTIME cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    // tv_nsec is within 0 .. 1e9 also before 1970, so these round down.
    // (The casts are needed where time_t and c_long are 32 bits.)
    #[allow(clippy::unnecessary_cast)]
    (ts.tv_sec as i64, ts.tv_nsec as i64)
}

/// The wall clock in microseconds since 1970.
pub fn unix_now_us() -> i64 {
    let (s, ns) = realtime();
    s * 1_000_000 + ns / 1_000
}

/// The wall clock in milliseconds since 1970.
pub fn unix_now_ms() -> i64 {
    let (s, ns) = realtime();
    s * 1_000 + ns / 1_000_000
}

/// The wall clock in milliseconds since the epoch of `config`: the time
/// field of an ID issued now.
pub fn now_ms(config: &Config) -> i64 {
    unix_now_ms() - config.epoch_unix_ms
}

/// The timestamp of millisecond `time_ms` of the ID time field.
pub fn timestamp_of(config: &Config, time_ms: u64) -> TimestampWithTimeZone {
    let unix_ms = config.epoch_unix_ms.checked_add_unsigned(time_ms);
    unix_ms
        .and_then(|ms| (ms - UNIX_TO_POSTGRES_MS).checked_mul(1000))
        .and_then(|us| TimestampWithTimeZone::try_from(us).ok())
        .filter(|ts| ts.is_finite())
        .unwrap_or_else(|| raise(Error::TimeBeyondTimestamp { time_ms }))
}
