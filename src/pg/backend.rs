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
use crate::pg::errors::{self, raise, Error, Held};
use crate::pg::horizon;
use crate::pg::issued;
use crate::pg::registry;
use crate::pg::settings;
use crate::pg::state::{self, current_record, Blocked, Shared};
use pgrx::pg_sys;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The configuration and shared state, or the "not preloaded" error.
#[inline]
pub fn ready() -> (&'static Config, &'static Shared) {
    match (settings::config(), state::shared()) {
        (Some(config), Some(shared)) => (config, shared),
        _ => raise(Error::NotPreloaded),
    }
}

/// Checks that this server may issue IDs now and returns its node id.
///
/// Inlined into every issuing function: the common case (not held, out of
/// recovery, a node id) is a few loads and comparisons, and anything else
/// goes to [`issuing_node_checked`], which says what is wrong.
#[inline(always)]
pub fn issuing_node(config: &Config, shared: &Shared) -> u64 {
    let node = if registry::enabled() {
        registry::claimed_node()
    } else {
        config.node_id
    };
    match node {
        Some(node) if shared.issuing_allowed() && RECOVERY_ENDED.load(Ordering::Relaxed) => node,
        _ => issuing_node_checked(config, shared),
    }
}

/// [`issuing_node`]'s whole check, with the error for each reason. A new
/// reason to hold issuing must also fail [`issuing_node`]'s fast path:
/// express it through `Shared::blocked` (or add its flag there).
#[cold]
#[inline(never)]
fn issuing_node_checked(config: &Config, shared: &Shared) -> u64 {
    // With a registry the node id is the claimed one, asked for last: a
    // held server claims none, and its block is what it must report.
    let node = if registry::enabled() {
        None
    } else {
        match config.node_id {
            Some(node) => Some(node),
            None => raise(Error::NodeIdUnset {
                max_node: config.layout.max_node(),
            }),
        }
    };
    if let Some((_, error)) = blocked_error(config, shared) {
        raise(error);
    }
    if in_recovery() {
        raise(Error::InRecovery);
    }
    match node {
        Some(node) => node,
        None => registry::issuing_node(),
    }
}

/// The hold of [`Shared::blocked`], if one is set, with its error (one
/// reading of the hold for both).
fn blocked_error(config: &Config, shared: &Shared) -> Option<(Held, Error)> {
    let blocked = shared.blocked();
    let held = blocked.held()?;
    Some((
        held,
        match blocked {
            Blocked::No => return None,
            Blocked::ConfigurationChanged => Error::ConfigurationChanged {
                changes: shared
                    .recorded()
                    .map(|old| old.differences(&current_record(config, 0)).join("; "))
                    .unwrap_or_default(),
            },
            Blocked::LeaseCorrupt => Error::LeaseCorrupt {
                message: shared.message(),
                seeming_lease: shared
                    .seeming_lease_unix_ms()
                    .map(crate::core::epoch::utc_text),
            },
            Blocked::LeaseUnreadable => Error::LeaseUnreadable(shared.message()),
            Blocked::ReplayFailed => Error::ReplayFailed(shared.message()),
            Blocked::Copied => Error::Copied(shared.message()),
            Blocked::LeaseMissingAfterUpgrade => Error::LeaseMissingAfterUpgrade(shared.message()),
        },
    ))
}

/// Why this server refuses to issue until an operator acts, for
/// `snowflake_stats()`: a short reason and the message (and detail) of the
/// error `snowflake_next()` raises for it. `None` when nothing holds
/// issuing (a standby's recovery is not a hold:
/// `snowflake_node_info().in_recovery` shows it).
pub fn hold(config: &Config, shared: &Shared) -> Option<(Held, String)> {
    if let Some((held, error)) = blocked_error(config, shared) {
        return Some((held, error.text()));
    }
    if registry::enabled() {
        // A standby claims its node id at promotion: until then, no claim
        // is what it should have.
        return if in_recovery() {
            None
        } else {
            registry::status::hold(config)
        };
    }
    config.node_id.is_none().then(|| {
        (
            Held::NodeIdUnset,
            Error::NodeIdUnset {
                max_node: config.layout.max_node(),
            }
            .text(),
        )
    })
}

/// Set once this backend saw recovery over: promotion is one way, and a
/// restart makes new backends.
static RECOVERY_ENDED: AtomicBool = AtomicBool::new(false);

/// Whether the server is in recovery. A backend that saw recovery end never
/// sees it again, so PostgreSQL is asked only until then: the call through
/// pgrx's error guard cost a twentieth of `snowflake_next()`.
fn in_recovery() -> bool {
    if RECOVERY_ENDED.load(Ordering::Relaxed) {
        return false;
    }
    // SAFETY: RecoveryInProgress takes no argument and reads shared memory this
    // backend is attached to.
    let in_recovery = unsafe { pg_sys::RecoveryInProgress() };
    if !in_recovery {
        // Before any ID of this backend: a server that ended archive
        // recovery starts above its predecessor's IDs (the first backend
        // out of recovery applies the floor, the others find it applied).
        if let (Some(config), Some(shared)) = (settings::config(), state::shared()) {
            shared.take_over(config);
        }
        RECOVERY_ENDED.store(true, Ordering::Relaxed);
    }
    in_recovery
}

/// Issues `count` IDs under `policy` or raises the matching error.
/// Inlined, so that `snowflake_next()`'s constant count of 1 folds through
/// the generator's batch arithmetic.
#[inline(always)]
pub fn issue(config: &Config, shared: &Shared, policy: DriftPolicy, count: u64) -> IssuedRange {
    // The read horizon's bound first (once per transaction): see
    // core::horizon for why it must precede the compare-and-swap.
    horizon::before_issue(config, &shared.generator);
    let mut env = ServerEnv::new(config, shared);
    match generator::issue(&shared.generator, &config.layout, policy, count, &mut env) {
        Ok(range) => range,
        Err(e) => issue_failed(config, shared, e),
    }
}

/// The error for a generator that could not issue.
#[cold]
#[inline(never)]
fn issue_failed(config: &Config, shared: &Shared, e: GenerateError) -> ! {
    match e {
        GenerateError::ClockBehind { .. } => {
            let last = shared.generator.last_time_ms(&config.layout);
            raise(Error::ClockBehind {
                error: e,
                last_issued: clock::timestamp_of(config, last).to_string(),
            })
        }
        GenerateError::Grant(e) => raise(registry::grant_ended(e, config)),
        e => raise(e),
    }
}

/// A lower bound on every ID `snowflake_next()` issues from now on, once
/// the generator is above `value` (a column's largest value): after the
/// generator's last pair, and not before the current millisecond.
///
/// The clock alone is no bound: after it steps back, IDs continue from the
/// last issued one, which may lie below a value that the clock had passed.
/// So when `value`'s millisecond lies no further ahead of the clock than
/// the drift limit, the generator is raised past that whole millisecond
/// and the lease extended over it (`apply`; without it, as a dry run, only
/// computed), so that no later ID, whatever the clock does and across a
/// restart, is at or below `value`. A value further ahead is left alone:
/// the caller refuses it.
pub fn first_id_above(value: Option<i64>, apply: bool) -> i64 {
    let (config, shared) = ready();
    // Raising writes a lease: only on a server that may issue IDs now (a
    // blocked one must keep the lease it is blocked on).
    if apply {
        issuing_node(config, shared);
    }
    let layout = &config.layout;
    let now_ms = clock::now_ms(config);
    let mut last = shared.generator.pair.load(Ordering::Acquire);
    if let Some(value) = value.filter(|v| *v >= 0) {
        let ms = (value as u64) >> layout.time_shift();
        if ms as i64 <= now_ms + settings::max_clock_drift_ms() as i64 && ms <= layout.max_time_ms()
        {
            let floor = layout.pair(ms, layout.max_sequence());
            if apply && floor > last {
                if shared.generator.lease_until_ms.load(Ordering::Acquire) < ms {
                    shared
                        .extend_lease(config, ms, ms)
                        .unwrap_or_else(|e| match e {
                            GenerateError::Grant(e) => raise(registry::grant_ended(e, config)),
                            e => raise(e),
                        });
                }
                shared.generator.pair.fetch_max(floor, Ordering::AcqRel);
            }
            last = last.max(floor);
        }
    }
    let next = generator::next_pair(layout, last, now_ms).min(layout.max_pair());
    layout.id_of_pair(next, registry::node_id(config).unwrap_or(0))
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
    /// a throttled burst below the layout's rate. Never longer than `ms`
    /// and that millisecond, measured on the monotonic clock: if the wall
    /// clock steps back during the sleep, its target moves away by the
    /// step, and the generator must re-check the drift (and fail at once)
    /// instead of sleeping for the length of the step. Long waits sleep on
    /// the process latch, so that a cancel, `statement_timeout` or server
    /// shutdown ends them at once; interrupts are checked after every sleep.
    fn sleep_ms(&mut self, ms: u64) -> u64 {
        let start = Instant::now();
        let target_us =
            (self.config.epoch_unix_ms + self.last_now_ms).saturating_add(ms as i64) * 1000;
        let longest_us = (ms as i64).saturating_add(1).saturating_mul(1000);
        loop {
            let elapsed_us = start.elapsed().as_micros() as i64;
            let remaining_us = (target_us - clock::unix_now_us()).min(longest_us - elapsed_us);
            if remaining_us <= 0 {
                break;
            }
            // SAFETY: called in a backend issuing IDs: MyLatch is its own latch,
            // WL_EXIT_ON_PM_DEATH ends the process rather than wait past the
            // postmaster, and pg_usleep only sleeps; interrupts are checked right
            // after, through pgrx's guard.
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

    fn extend_lease(
        &mut self,
        _state: &SharedState,
        from_ms: u64,
        until_ms: u64,
    ) -> Result<(), GenerateError> {
        self.shared.extend_lease(self.config, from_ms, until_ms)
    }

    /// Counted locally, see [`issued::flush`].
    #[inline(always)]
    fn count_issued(&mut self, counters: &Counters, count: u64) {
        issued::count(counters, count);
    }

    fn clock_stepped_back(&mut self, step_ms: u64) {
        errors::warn(Error::ClockSteppedBack {
            step_ms,
            max_drift_ms: settings::max_clock_drift_ms(),
        });
    }
}
