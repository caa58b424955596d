//! The generator's [`Environment`] inside PostgreSQL: the wall clock, an
//! interruptible sleep, the lease writer and the clock-step warning.

use crate::core::config::Config;
use crate::core::generator::{Counters, Environment, GenerateError, SharedState};
use crate::errors;
use crate::shmem::{self, Shared};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgSqlErrorCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// `CLOCK_REALTIME` as (seconds, nanoseconds) since 1970: `clock_gettime`
/// through the vDSO, no system call. Called directly rather than through
/// `SystemTime`, whose `Duration` arithmetic cost a tenth of a call of
/// `snowflake_next()` (measured with perf, see bench/README.md).
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

/// IDs this backend issued that are not yet added to the shared
/// `ids_issued` counter. Only this backend touches it (a plain load and
/// store, no locked instruction).
static PENDING_IDS: AtomicU64 = AtomicU64::new(0);
/// Whether this backend registered [`flush_at_transaction_end`].
static FLUSH_REGISTERED: AtomicBool = AtomicBool::new(false);
/// A long statement's IDs show up in the statistics at least this often.
const FLUSH_EVERY: u64 = 1 << 16;

/// Adds this backend's pending count to `counters.ids_issued`.
pub fn flush_issued(counters: &Counters) {
    let pending = PENDING_IDS.swap(0, Ordering::Relaxed);
    if pending > 0 {
        counters.ids_issued.fetch_add(pending, Ordering::Relaxed);
    }
}

/// At the end of every transaction (commit or abort, also of parallel
/// workers, and when a backend exits, which aborts its transaction), the
/// backend's IDs are added to the shared counter.
#[pg_guard]
unsafe extern "C-unwind" fn flush_at_transaction_end(
    _event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    if let Some(shared) = shmem::shared() {
        flush_issued(&shared.generator.counters);
    }
}

pub struct ServerEnv<'a> {
    pub config: &'a Config,
    pub shared: &'a Shared,
    /// The last reading handed to the generator (ms since the epoch).
    pub last_now_ms: i64,
}

impl<'a> ServerEnv<'a> {
    pub fn new(config: &'a Config, shared: &'a Shared) -> Self {
        ServerEnv {
            config,
            shared,
            last_now_ms: 0,
        }
    }

    pub fn now_ms(&self) -> i64 {
        unix_now_ms() - self.config.epoch_unix_ms
    }
}

/// Sub-millisecond sleeps are done with `pg_usleep`, which is not
/// interruptible, but never for longer than this.
const SHORT_SLEEP_US: i64 = 1_500;

impl Environment for ServerEnv<'_> {
    fn now_ms(&mut self) -> i64 {
        self.last_now_ms = ServerEnv::now_ms(self);
        self.last_now_ms
    }

    /// Sleeps until the wall clock reaches `ms` milliseconds after the last
    /// reading, to the microsecond: the reading was rounded down, so a
    /// plain `ms`-long sleep would overshoot by up to a millisecond and keep
    /// a throttled burst below the layout's rate. Long waits sleep on the
    /// process latch, so that a cancel, `statement_timeout` or server
    /// shutdown ends them at once; interrupts are checked after every sleep.
    fn sleep_ms(&mut self, ms: u64) -> u64 {
        let start = Instant::now();
        let target_us =
            (self.config.epoch_unix_ms + self.last_now_ms).saturating_add(ms as i64) * 1000;
        loop {
            let remaining_us = target_us - unix_now_us();
            if remaining_us <= 0 {
                break;
            }
            unsafe {
                if remaining_us > SHORT_SLEEP_US {
                    pg_sys::WaitLatch(
                        pg_sys::MyLatch,
                        (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH)
                            as i32,
                        ((remaining_us - SHORT_SLEEP_US / 2) / 1000).clamp(1, i32::MAX as i64) as _,
                        pg_sys::PG_WAIT_EXTENSION,
                    );
                    pg_sys::ResetLatch(pg_sys::MyLatch);
                } else {
                    pg_sys::pg_usleep(remaining_us as _);
                }
            }
            pg_sys::check_for_interrupts!();
        }
        start.elapsed().as_micros() as u64
    }

    fn extend_lease(&mut self, _state: &SharedState, until_ms: u64) -> Result<(), GenerateError> {
        self.shared.extend_lease(self.config, until_ms)
    }

    /// Counted locally and added to the shared counter at the end of the
    /// transaction, every [`FLUSH_EVERY`] IDs, and when `snowflake_stats()`
    /// runs in this backend.
    fn count_issued(&mut self, counters: &Counters, count: u64) {
        let pending = PENDING_IDS.load(Ordering::Relaxed) + count;
        PENDING_IDS.store(pending, Ordering::Relaxed);
        if !FLUSH_REGISTERED.load(Ordering::Relaxed) {
            FLUSH_REGISTERED.store(true, Ordering::Relaxed);
            unsafe {
                pg_sys::RegisterXactCallback(Some(flush_at_transaction_end), std::ptr::null_mut())
            };
        }
        if pending >= FLUSH_EVERY {
            flush_issued(counters);
        }
    }

    fn clock_stepped_back(&mut self, step_ms: u64) {
        errors::warn(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!("the system clock stepped back by {step_ms} ms; IDs continue from the last issued one"),
            format!(
                "IDs stay unique and ordered while the step is within snowflake_id.max_clock_drift ({} ms); check the time source (NTP) of this server.",
                crate::guc::max_clock_drift_ms()
            ),
        );
    }
}
