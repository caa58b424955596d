//! The backend's view of the generator: whether this server may issue IDs
//! now, the [`Environment`] the core's generator runs in (the wall clock,
//! an interruptible sleep, the lease writer, the issued-ID counter and the
//! clock-step warning), and issuing itself.
//!
//! Every SQL function that issues or reads the generator starts with
//! [`ready`]; those that issue then call [`issuing_node`] and [`issue`].

use crate::core::config::Config;
use crate::core::generator::{
    self, Counters, DriftPolicy, Environment, GenerateError, IssuedRange, SharedState,
};
use crate::pg::clock;
use crate::pg::errors::{self, raise, Error};
use crate::pg::settings;
use crate::pg::shmem::{self, Blocked, Shared};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// The configuration and shared state, or the "not preloaded" error.
pub fn ready() -> (&'static Config, &'static Shared) {
    match (settings::config(), shmem::shared()) {
        (Some(config), Some(shared)) => (config, shared),
        _ => raise(Error::NotPreloaded),
    }
}

/// Checks that this server may issue IDs now and returns its node id.
pub fn issuing_node(config: &Config, shared: &Shared) -> u64 {
    let Some(node) = config.node_id else {
        raise(Error::NodeIdUnset {
            max_node: config.layout.max_node(),
        });
    };
    match shared.blocked() {
        Blocked::No => {}
        Blocked::ConfigChanged => {
            let changes = shared
                .recorded()
                .map(|old| {
                    old.differences(&shmem::current_record(config, 0))
                        .join("; ")
                })
                .unwrap_or_default();
            raise(Error::ConfigurationChanged { changes });
        }
        Blocked::LeaseCorrupt => raise(Error::LeaseCorrupt(shared.message())),
        Blocked::LeaseUnreadable => raise(Error::LeaseUnreadable(shared.message())),
        Blocked::ReplayFailed => raise(Error::ReplayFailed(shared.message())),
    }
    if in_recovery() {
        raise(Error::InRecovery);
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
pub fn issue(config: &Config, shared: &Shared, policy: DriftPolicy, count: u64) -> IssuedRange {
    let mut env = ServerEnv::new(config, shared);
    generator::issue(&shared.generator, &config.layout, policy, count, &mut env)
        .unwrap_or_else(|e| raise(e))
}

/// A lower bound on every ID `snowflake_next()` issues from now on: after
/// the generator's last pair (which a batch may have pushed ahead of the
/// clock), and not before the current millisecond.
pub fn first_id_from_now() -> i64 {
    let (config, shared) = ready();
    let layout = &config.layout;
    let last = shared.generator.pair.load(Ordering::Acquire);
    let now_ms = clock::now_ms(config);
    let next = generator::next_pair(layout, last, now_ms).min(layout.max_pair());
    layout.id_of_pair(next, config.node_id.unwrap_or(0))
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

/// The generator's [`Environment`] in a backend, for one call of [`issue`].
struct ServerEnv<'a> {
    config: &'a Config,
    shared: &'a Shared,
    /// The last reading handed to the generator (ms since the epoch).
    last_now_ms: i64,
}

impl<'a> ServerEnv<'a> {
    fn new(config: &'a Config, shared: &'a Shared) -> Self {
        ServerEnv {
            config,
            shared,
            last_now_ms: 0,
        }
    }

    fn now_ms(&self) -> i64 {
        clock::now_ms(self.config)
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
            let remaining_us = target_us - clock::unix_now_us();
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
        errors::warn(Error::ClockSteppedBack {
            step_ms,
            max_drift_ms: settings::max_clock_drift_ms(),
        });
    }
}
