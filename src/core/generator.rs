//! The logical clock and how many callers share it without waiting for
//! each other.
//!
//! One [`SharedState`] per PostgreSQL instance lives in shared memory. Its
//! `pair` word is the `(time, sequence)` pair last taken (see
//! [`crate::core::layout`]): time in the high bits, the sequence below, so
//! that adding one to the word is exactly "the next sequence, or the first
//! of the next millisecond when this one's is used up" (borrowing from the
//! future). Every ID is
//!
//! ```text
//! next = max(last + 1, now << sequence_bits)
//! ```
//!
//! # Taking, then settling
//!
//! A single call first **takes** its pair ([`take`]): one atomic add on the
//! word, which never fails and never retries, however many backends add at
//! once. Only when the clock has passed the word (the first ID of a
//! millisecond) does a compare-and-swap move the word up to the clock.
//! Whatever was taken belongs to that call alone, forever: the word only
//! grows, and nothing ever lowers it (a pair that is never issued is a gap,
//! not a duplicate). That is why IDs are unique and a caller's IDs
//! increase; and since the take is one atomic operation on one word, a call
//! that starts after another returned gets a larger ID (strictly increasing
//! in issue order).
//!
//! The call then **settles** the pair it holds ([`settle`]), in order:
//! 1. the time field must not overflow (year 2094 with the default layout);
//! 2. drift (the pair's time minus the wall clock) must stay within
//!    `max_clock_drift`. If the drift of the pair before it is more than
//!    [`MAX_WAIT_MS`] above the limit, the clock stepped back (or a restart
//!    resumed far ahead): fail at once. Otherwise the call sleeps, holding
//!    its pair, until the clock is within the limit. So no issued ID is
//!    ever further ahead of the clock than the limit, and a sustained burst
//!    is throttled to the layout's rate: callers take at most one pair each
//!    ahead of the limit, then wait;
//! 3. no ID may be issued beyond the durable lease; a pair beyond the lease
//!    as it stood *before* the take is checked by the environment, which
//!    extends the lease (disk write) and, on a server with a registry,
//!    checks the pair against the grant in force, floor included.
//!
//! # Checking before taking
//!
//! A call that fails wastes what it took, and a call that sleeps holds it.
//! Three kinds of call therefore check first and take with one
//! compare-and-swap ([`issue_checked`]), so that they take nothing unless
//! they issue it:
//! - **batches**: a range held asleep at the drift limit would put the word
//!   a whole batch beyond the limit, and every call after it would take
//!   that for a clock stepped back; and batches that each checked the word
//!   and then added separately could all pass the check together;
//! - **calls after a failure**: a clock set back by an hour, or a lease
//!   that cannot be written, fails every call, and failing calls that each
//!   took a pair would push the word ahead of the clock for as long as they
//!   go on (with few sequence bits, faster than the clock catches up). A
//!   failure sets `careful`; the first call that succeeds clears it;
//! - **calls whose clock has passed the lease**: the take would jump the
//!   word to the clock before anything says IDs may be issued there. A
//!   clock stepped forward by an hour on a server whose registry grant (or
//!   lease file) cannot follow would leave the word an hour ahead, and once
//!   the clock is corrected every call would fail for that hour, though no
//!   ID was issued there.
//!
//! # Why not one compare-and-swap for everything
//!
//! That was the design up to 0.3.0: read the word, check, swap. Under many
//! sessions at once most swaps fail (another backend swapped in between),
//! and each retry re-reads the word and the clock: on 16 cores, 16 sessions
//! issued less in all than one session alone (docs/performance.md). The
//! add does the same work in one instruction that always succeeds.
//!
//! Everything that touches the world (clock, sleep, lease file, logging) goes
//! through [`Environment`], so the whole machine is tested with a scripted
//! clock in `cargo test`.

use super::layout::IdLayout;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use thiserror::Error;

/// A call that would need to sleep longer than this, because the drift that
/// already existed before it is over the limit, fails instead: the clock
/// stepped back, and sessions must not hang for the length of the step.
pub const MAX_WAIT_MS: u64 = 200;

/// How far ahead of the generator's own time the lease is written.
///
/// Small next to the default `max_clock_drift` (5 s), so that after a quick
/// restart the generator, which resumes after the lease, is within the drift
/// limit; and no larger than [`MAX_WAIT_MS`], so that with a tiny drift limit
/// a restart costs a short sleep, not an error.
pub const LEASE_WINDOW_MS: u64 = 200;

/// Keeps a hot atomic on its own cache line, away from the counters, so that
/// counter updates do not slow down the compare-and-swap (false sharing).
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct CacheLine<T>(pub T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Counters for `snowflake_stats()`. Relaxed: they are statistics.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Counters {
    pub ids_issued: AtomicU64,
    /// Milliseconds borrowed from the future because a millisecond's
    /// sequence was used up.
    pub borrowed_ms: AtomicU64,
    pub waits: AtomicU64,
    pub wait_us: AtomicU64,
    pub drift_errors: AtomicU64,
    pub backward_steps: AtomicU64,
    pub largest_backward_step_ms: AtomicU64,
    /// The largest drift (issued time minus wall clock) any issued ID had.
    pub max_drift_ms: AtomicI64,
    pub lease_writes: AtomicU64,
}

/// The generator's state, shared by every backend.
#[repr(C)]
#[derive(Debug, Default)]
pub struct SharedState {
    /// The last `(time, sequence)` pair taken: issued, being settled, or
    /// wasted by a call that failed. No pair at or below it is taken again.
    pub pair: CacheLine<AtomicU64>,
    /// The latest wall clock reading any backend made (ms since the epoch),
    /// to notice backward steps once per step.
    pub wall_ms: CacheLine<AtomicI64>,
    /// No issued pair has a time beyond this (ms since the epoch); durable.
    pub lease_until_ms: CacheLine<AtomicU64>,
    /// Set by a call that failed: until a call succeeds, calls check before
    /// they take (see the module's comment). Read by every call, written
    /// only when a failure starts or ends.
    pub careful: CacheLine<AtomicBool>,
    pub counters: CacheLine<Counters>,
    /// How far ahead of the clock the pair may already be without that
    /// counting as a clock stepped back (ms; 0: only the drift limit): set
    /// where the generator starts ahead of the clock on purpose, by more
    /// than the drift limit may allow (a successor's floor, a restart
    /// after IDs that a larger limit let run further ahead). Read only off
    /// the fast path (a pair beyond the drift limit settles out of line),
    /// and ended by the first call that finds the pair before it back
    /// within the limit ([`drift_limit_for`]).
    pub ahead_allowance_ms: AtomicU64,
}

impl SharedState {
    /// State after a (re)start: resume strictly after `lease_until_ms`, the
    /// durable bound on every ID issued before. The lease itself is kept at
    /// that bound, so the first ID forces a fresh lease write.
    pub fn resume_after_lease(&self, layout: &IdLayout, lease_until_ms: Option<u64>) {
        let floor = match lease_until_ms {
            // The last pair of the lease's millisecond: the next is (lease + 1, 0).
            Some(t) => layout.pair(t, layout.max_sequence()),
            None => 0,
        };
        self.pair.store(floor, Ordering::SeqCst);
        self.lease_until_ms
            .store(lease_until_ms.unwrap_or(0), Ordering::SeqCst);
        self.wall_ms.store(i64::MIN, Ordering::SeqCst);
        self.careful.store(false, Ordering::SeqCst);
        self.ahead_allowance_ms.store(0, Ordering::SeqCst);
    }

    /// Lets the pair be up to `ms` ahead of the clock until the clock has
    /// caught up with it to within the drift limit (see
    /// [`SharedState::ahead_allowance_ms`]). Never lowers an allowance.
    pub fn allow_ahead(&self, ms: u64) {
        self.ahead_allowance_ms.fetch_max(ms, Ordering::AcqRel);
    }

    /// How far ahead of the clock IDs may run now, when the last pair is
    /// `drift_now_ms` ahead of it: the limit, or the allowance while one is
    /// in force (which this ends, as a call would, once the pair is back
    /// within the limit).
    pub fn drift_in_force_ms(&self, policy: DriftPolicy, drift_now_ms: i64) -> u64 {
        drift_limit_for(self, policy, drift_now_ms)
    }

    /// Time of the last pair taken.
    pub fn last_time_ms(&self, layout: &IdLayout) -> u64 {
        layout.pair_time(self.pair.load(Ordering::Acquire))
    }
}

/// The drift limit in force (`snowflake_id.max_clock_drift`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriftPolicy {
    pub max_drift_ms: u64,
}

/// A range of consecutive pairs, all issued to one caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IssuedRange {
    pub first_pair: u64,
    pub count: u64,
}

impl IssuedRange {
    pub fn last_pair(&self) -> u64 {
        self.first_pair + self.count - 1
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GenerateError {
    /// The clock is behind the last issued ID by more than the drift limit
    /// allows waiting for.
    #[error(
        "the clock is {behind_ms} ms behind the last issued ID, more than snowflake_id.max_clock_drift ({max_drift_ms} ms) allows"
    )]
    ClockBehind { behind_ms: u64, max_drift_ms: u64 },
    /// The time field is used up: the layout's life has ended.
    #[error("the {time_bits}-bit time field is exhausted: no more IDs can be issued after {max_time_ms} ms since the epoch")]
    TimeExhausted { time_bits: u32, max_time_ms: u64 },
    /// A batch that spans more milliseconds than the drift limit: it could
    /// never be issued within the limit, however long it waited.
    #[error(
        "a batch of {count} IDs spans {span_ms} ms, more than snowflake_id.max_clock_drift ({max_drift_ms} ms) allows"
    )]
    BatchTooLarge {
        count: u64,
        span_ms: u64,
        max_drift_ms: u64,
    },
    /// More IDs were asked for than the time field has left.
    #[error("{count} IDs do not fit in what is left of the time field")]
    TooMany { count: u64 },
    /// The lease could not be extended (the environment says why).
    #[error("{0}")]
    Lease(String),
    /// The lease would pass the node id's grant from the registry.
    #[error(transparent)]
    Grant(#[from] super::registry::GrantError),
}

/// The absolute upper bound on one batch, whatever the drift limit: a
/// batch's IDs are materialised in memory (100,000,000 `bigint`s are 800 MB),
/// and at the layout's 4,096,000 IDs/s a larger one would hold a backend for
/// half a minute.
pub const MAX_BATCH: u64 = 100_000_000;

/// The largest batch [`issue`] accepts under `policy`: at most [`MAX_BATCH`],
/// and no more than fit in `max_clock_drift + 1` milliseconds, because even
/// started at the first pair of a millisecond a larger batch would end more
/// than the drift limit ahead of the clock ([`GenerateError::BatchTooLarge`]).
pub fn max_batch(layout: &IdLayout, policy: DriftPolicy) -> u64 {
    policy
        .max_drift_ms
        .saturating_add(1)
        .saturating_mul(layout.ids_per_ms())
        .min(MAX_BATCH)
}

/// What the generator needs from the world.
pub trait Environment {
    /// The wall clock in milliseconds since the configured epoch (negative
    /// before it).
    fn now_ms(&mut self) -> i64;
    /// Sleeps about `ms` milliseconds, never much longer whatever the wall
    /// clock does meanwhile (the server's version is interruptible and
    /// bounded on the monotonic clock); returns the microseconds actually
    /// slept. The generator reads the clock again after it.
    fn sleep_ms(&mut self, ms: u64) -> u64;
    /// Covers a range of IDs whose times beyond the lease run from
    /// `from_ms` to `until_ms`: makes the lease durable up to at least
    /// `until_ms` and raises `state.lease_until_ms` (use [`lease_target`]
    /// for the new value), unless it already reaches that far. The server
    /// also checks the range against the registry's grant in force, its
    /// floor included (`from_ms` above it): a range taken before a claim
    /// made again may lie between the old grant and the new floor, where
    /// another holder of the node id may have issued.
    fn extend_lease(
        &mut self,
        state: &SharedState,
        from_ms: u64,
        until_ms: u64,
    ) -> Result<(), GenerateError>;
    /// The clock was seen stepping back by `step_ms` (called once per step,
    /// by the backend that noticed it first).
    fn clock_stepped_back(&mut self, step_ms: u64);
    /// Counts `count` newly issued IDs in `counters.ids_issued`. The server
    /// defers this per backend, to keep a second locked instruction (and a
    /// second contended cache line) off the hot path.
    fn count_issued(&mut self, counters: &Counters, count: u64) {
        counters.ids_issued.fetch_add(count, Ordering::Relaxed);
    }
}

/// The lease to write when IDs up to `needed_ms` must be covered: a window
/// beyond both what is needed and the generator's own time. It is computed
/// from the generator's state, never from the writer's clock alone (a
/// background worker may see another clock than the backends).
pub fn lease_target(state: &SharedState, layout: &IdLayout, needed_ms: u64) -> u64 {
    needed_ms
        .max(state.last_time_ms(layout))
        .saturating_add(LEASE_WINDOW_MS)
        .min(layout.max_time_ms())
}

/// The pair issued after `last` when the clock reads `now_ms`: one more than
/// the last (which borrows the next millisecond when its sequence is used
/// up), or the first of the current millisecond if that is later. A clock
/// past the time field gives a pair past [`IdLayout::max_pair`] instead of
/// overflowing the shift; callers check against it.
#[inline]
pub fn next_pair(layout: &IdLayout, last: u64, now_ms: i64) -> u64 {
    let now = (now_ms.max(0) as u64).min(layout.max_time_ms() + 1);
    (last + 1).max(layout.pair(now, 0))
}

/// Reads the clock and notes a backward step, once per step: the step is
/// recorded by whichever backend lowers `wall_ms` first; later readings of the
/// stepped clock are not below it any more.
#[inline(always)]
fn observe_clock(state: &SharedState, env: &mut impl Environment) -> i64 {
    // Load the last reading *before* reading the clock: the reading behind
    // it was taken earlier in real time, so a smaller value now means the
    // clock really went back, not that another backend was faster.
    let seen = state.wall_ms.load(Ordering::Acquire);
    let now = env.now_ms();
    if now > seen {
        state.wall_ms.fetch_max(now, Ordering::AcqRel);
    } else if now < seen
        && state
            .wall_ms
            .compare_exchange(seen, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        let step = (seen - now) as u64;
        let c = &state.counters;
        c.backward_steps.fetch_add(1, Ordering::Relaxed);
        c.largest_backward_step_ms
            .fetch_max(step, Ordering::Relaxed);
        env.clock_stepped_back(step);
    }
    now
}

/// Issues `count` consecutive IDs (as pairs). `count` must be at least 1.
/// Inlined: with a constant count of 1 (`snowflake_next()`), the batch
/// arithmetic folds away.
///
/// The fast path, for a single ID: [`take`] the pair (one atomic add), then
/// [`settle`] its checks while holding it. A batch, every call after a
/// failure, and a call whose clock has passed the lease use
/// [`issue_checked`]: every check first, then one compare-and-swap (see
/// the module's comment).
#[inline(always)]
pub fn issue(
    state: &SharedState,
    layout: &IdLayout,
    policy: DriftPolicy,
    count: u64,
    env: &mut impl Environment,
) -> Result<IssuedRange, GenerateError> {
    debug_assert!(count >= 1);
    // Even started at the first pair of a millisecond, a batch covers this
    // many milliseconds after its first; beyond the limit it can never fit.
    let min_span_ms = (count - 1) / layout.ids_per_ms();
    if min_span_ms > policy.max_drift_ms {
        return Err(GenerateError::BatchTooLarge {
            count,
            span_ms: min_span_ms,
            max_drift_ms: policy.max_drift_ms,
        });
    }
    if count > 1 || state.careful.load(Ordering::Relaxed) {
        return issue_checked(state, layout, policy, count, env);
    }
    let now = observe_clock(state, env);
    // The lease as it stands before the take. A pair within it is covered
    // by a grant this server held before the take (a claim made again
    // raises the pair above its floor before a lease under it can exist),
    // so it needs no look at the registry; beyond it, settling checks the
    // pair against the grant in force.
    let lease = state.lease_until_ms.load(Ordering::Acquire);
    if now > lease.min(layout.max_time_ms()) as i64 {
        // The clock has passed the lease (an idle spell, a clock stepped
        // forward, the layout's end): taking would jump the pair to the
        // clock before anything says IDs may be issued there, and a failure
        // then would leave the pair there, ahead of the clock once it is
        // corrected. The checked path moves the pair only when it issues.
        return issue_checked(state, layout, policy, count, env);
    }
    let first = take(state, layout, now);
    // The common case, every check passed at once: within the time field,
    // the drift limit and the lease. Anything else settles out of line.
    let time = layout.pair_time(first);
    if first <= layout.max_pair()
        && time as i64 - now <= policy.max_drift_ms as i64
        && time <= lease
    {
        env.count_issued(&state.counters, 1);
        note_issued(&state.counters, layout.pair_time(first - 1), time, now);
        return Ok(IssuedRange {
            first_pair: first,
            count: 1,
        });
    }
    let settled = settle(state, layout, policy, first, now, lease, env);
    if settled.is_err() {
        // Every further call would waste its pair the same way: check
        // before taking until one succeeds.
        state.careful.store(true, Ordering::Relaxed);
    }
    settled
}

/// Takes one pair that no other caller can ever take, not before the first
/// pair of millisecond `now_ms`, and returns it. Nothing is checked: the
/// pair is the caller's whether or not it is ever issued (a pair not issued
/// is a gap, never a duplicate).
///
/// One atomic add, which never fails: the next sequence, or the first of
/// the next millisecond when the sequence is used up (the carry into the
/// time field). Only when the clock has passed the pair (no ID in the
/// current millisecond yet) does the pair jump to the clock, by a
/// compare-and-swap; the call then wastes the pair it added, and its loop
/// adds again as soon as any caller has made the jump.
#[inline(always)]
fn take(state: &SharedState, layout: &IdLayout, now_ms: i64) -> u64 {
    // (The caller checked that the clock is within the time field.)
    let floor = layout.pair(now_ms.max(0) as u64, 0);
    let first = state.pair.fetch_add(1, Ordering::AcqRel) + 1;
    if first >= floor {
        return first;
    }
    loop {
        let last = state.pair.load(Ordering::Acquire);
        if last + 1 >= floor {
            // The pair only grows: what the add returns is at least `last`.
            return state.pair.fetch_add(1, Ordering::AcqRel) + 1;
        }
        if state
            .pair
            .compare_exchange_weak(last, floor, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return floor;
        }
    }
}

/// The checks on the pair that [`take`] gave, with the clock read at
/// `now_ms` and the lease at `lease_before_ms` before the take, when they
/// did not all pass at once: the time field, the drift limit (sleeping
/// while holding the pair, so it is issued only once the clock is within
/// the limit of it), the lease (extended, and the pair checked against the
/// registry's grant in force, before it is issued). On success the pair is
/// issued: counted and returned.
#[cold]
#[inline(never)]
fn settle(
    state: &SharedState,
    layout: &IdLayout,
    policy: DriftPolicy,
    first: u64,
    mut now_ms: i64,
    lease_before_ms: u64,
    env: &mut impl Environment,
) -> Result<IssuedRange, GenerateError> {
    let counters = &state.counters;
    if first > layout.max_pair() {
        return Err(GenerateError::TimeExhausted {
            time_bits: layout.time_bits(),
            max_time_ms: layout.max_time_ms(),
        });
    }
    // The pair before it: the last issued (or taken) before it.
    let before_time = layout.pair_time(first - 1) as i64;
    let time = layout.pair_time(first);
    // Beyond the lease read before the take, the pair may have been taken
    // under a grant that has ended since: the environment checks it (a
    // lease another call extended meanwhile is no proof).
    let mut covered = time <= lease_before_ms;
    loop {
        if waited_for_drift(state, policy, time, before_time, now_ms, env)? {
            now_ms = observe_clock(state, env);
            continue;
        }
        if !covered {
            env.extend_lease(state, time, time)?;
            covered = true;
            now_ms = observe_clock(state, env);
            continue;
        }
        env.count_issued(counters, 1);
        note_issued(counters, before_time as u64, time, now_ms);
        return Ok(IssuedRange {
            first_pair: first,
            count: 1,
        });
    }
}

/// The drift rule for a range ending at `end_time` when the pair before it
/// is at `before_time` and the clock reads `now_ms`: `Ok(false)` within the
/// limit; `Ok(true)` after sleeping toward it (read the clock and check
/// again); [`GenerateError::ClockBehind`] when the drift that existed before
/// the range is more than [`MAX_WAIT_MS`] over the limit (a clock stepped
/// back must not hang sessions for the length of the step).
#[inline(always)]
fn waited_for_drift(
    state: &SharedState,
    policy: DriftPolicy,
    end_time: u64,
    before_time: i64,
    now_ms: i64,
    env: &mut impl Environment,
) -> Result<bool, GenerateError> {
    let counters = &state.counters;
    let drift = end_time as i64 - now_ms;
    if drift <= policy.max_drift_ms as i64 {
        return Ok(false);
    }
    let existing = before_time - now_ms;
    let limit = drift_limit_for(state, policy, existing);
    let max_drift = limit as i64;
    if drift <= max_drift {
        return Ok(false);
    }
    if existing > max_drift + MAX_WAIT_MS as i64 {
        counters.drift_errors.fetch_add(1, Ordering::Relaxed);
        return Err(GenerateError::ClockBehind {
            behind_ms: existing as u64,
            max_drift_ms: limit,
        });
    }
    let slept = env.sleep_ms((drift - max_drift) as u64);
    counters.waits.fetch_add(1, Ordering::Relaxed);
    counters.wait_us.fetch_add(slept, Ordering::Relaxed);
    Ok(true)
}

/// The drift limit for a call whose pair before it is `existing_ms` ahead
/// of the clock: the setting, or the allowance
/// ([`SharedState::ahead_allowance_ms`]) while the pair is still further
/// ahead than the setting allows. The first call that finds the pair back
/// within the setting ends the allowance: from then on the setting alone
/// bounds how far IDs run ahead (and what a lease records as the limit in
/// force).
#[cold]
fn drift_limit_for(state: &SharedState, policy: DriftPolicy, existing_ms: i64) -> u64 {
    let allowance = state.ahead_allowance_ms.load(Ordering::Acquire);
    if allowance <= policy.max_drift_ms {
        return policy.max_drift_ms;
    }
    if existing_ms <= policy.max_drift_ms as i64 {
        let _ = state.ahead_allowance_ms.compare_exchange(
            allowance,
            0,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        return policy.max_drift_ms;
    }
    allowance
}

/// Counts what an issued range borrowed from the future (its milliseconds
/// beyond both the pair before it and the clock) and its drift.
#[inline(always)]
fn note_issued(counters: &Counters, before_time: u64, end_time: u64, now_ms: i64) {
    let frontier = before_time.max(now_ms.max(0) as u64);
    if end_time > frontier {
        counters
            .borrowed_ms
            .fetch_add(end_time - frontier, Ordering::Relaxed);
    }
    let drift = end_time as i64 - now_ms;
    if drift > counters.max_drift_ms.load(Ordering::Relaxed) {
        counters.max_drift_ms.fetch_max(drift, Ordering::Relaxed);
    }
}

/// Every check on the range *before* one compare-and-swap claims it, so a
/// call that fails or waits takes nothing: for a batch (a range held while
/// it slept would push the pair past the drift limit, and other calls would
/// take that for a clock stepped back), after a failure (the first call
/// that succeeds lets the others take again), and when the clock has passed
/// the lease.
#[cold]
#[inline(never)]
fn issue_checked(
    state: &SharedState,
    layout: &IdLayout,
    policy: DriftPolicy,
    count: u64,
    env: &mut impl Environment,
) -> Result<IssuedRange, GenerateError> {
    let counters = &state.counters;
    loop {
        let last = state.pair.load(Ordering::Acquire);
        let now = observe_clock(state, env);
        let first = next_pair(layout, last, now);
        let end = first
            .checked_add(count - 1)
            .filter(|&e| e <= layout.max_pair());
        let Some(end) = end else {
            // Nothing left, or the clock past the field's end: exhausted;
            // else the batch is larger than what is left.
            return Err(if last >= layout.max_pair() || first > layout.max_pair() {
                GenerateError::TimeExhausted {
                    time_bits: layout.time_bits(),
                    max_time_ms: layout.max_time_ms(),
                }
            } else {
                GenerateError::TooMany { count }
            });
        };
        let end_time = layout.pair_time(end);

        let before_time = layout.pair_time(last) as i64;
        if waited_for_drift(state, policy, end_time, before_time, now, env)? {
            continue;
        }

        // Read after `last`: a lease raised under a claim made again is
        // seen only with the pair raised above its floor, and then the swap
        // below fails if `last` is from before.
        let lease = state.lease_until_ms.load(Ordering::Acquire);
        if end_time > lease {
            let from_ms = layout.pair_time(first).max(lease + 1);
            match env.extend_lease(state, from_ms, end_time) {
                // A claim made again raised the pair above its floor since
                // `last` was read: this call holds nothing, so it starts
                // over from the raised pair instead of failing.
                Err(GenerateError::Grant(super::registry::GrantError::BelowFloor { .. }))
                    if state.pair.load(Ordering::Acquire) != last => {}
                result => result?,
            }
            continue;
        }

        if state
            .pair
            .compare_exchange_weak(last, end, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            if state.careful.load(Ordering::Relaxed) {
                state.careful.store(false, Ordering::Relaxed);
            }
            env.count_issued(counters, count);
            note_issued(counters, layout.pair_time(last), end_time, now);
            return Ok(IssuedRange {
                first_pair: first,
                count,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A scripted clock: the test sets the time before each call (`at`);
    /// sleeping advances it, as real sleeping would. The lease is written to
    /// a vector standing for the disk.
    #[derive(Default)]
    struct Script {
        current: i64,
        slept_ms: Vec<u64>,
        lease_writes: Vec<u64>,
        steps: Vec<u64>,
        layout: IdLayout,
        fail_lease: bool,
    }

    impl Script {
        fn new(start: i64) -> Self {
            Script {
                current: start,
                ..Default::default()
            }
        }
        fn at(&mut self, t: i64) -> &mut Self {
            self.current = t;
            self
        }
    }

    impl Environment for Script {
        fn now_ms(&mut self) -> i64 {
            self.current
        }
        fn sleep_ms(&mut self, ms: u64) -> u64 {
            assert!(self.slept_ms.len() < 1_000_000, "sleeping forever");
            self.slept_ms.push(ms);
            self.current += ms as i64;
            ms * 1000
        }
        fn extend_lease(
            &mut self,
            state: &SharedState,
            _from_ms: u64,
            until_ms: u64,
        ) -> Result<(), GenerateError> {
            if self.fail_lease {
                return Err(GenerateError::Lease("disk full".into()));
            }
            let target = lease_target(state, &self.layout, until_ms);
            self.lease_writes.push(target);
            state.lease_until_ms.fetch_max(target, Ordering::AcqRel);
            state.counters.lease_writes.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        fn clock_stepped_back(&mut self, step_ms: u64) {
            self.steps.push(step_ms);
        }
    }

    fn fresh() -> SharedState {
        let s = SharedState::default();
        s.resume_after_lease(&IdLayout::default(), None);
        s
    }

    const POLICY: DriftPolicy = DriftPolicy { max_drift_ms: 5000 };

    fn one(s: &SharedState, env: &mut Script) -> Result<u64, GenerateError> {
        issue(s, &IdLayout::default(), POLICY, 1, env).map(|r| r.first_pair)
    }

    #[test]
    fn follows_the_clock_and_counts_within_a_millisecond() {
        let l = IdLayout::default();
        let s = fresh();
        let mut env = Script::new(100);
        let got: Vec<u64> = [100, 100, 100, 101]
            .iter()
            .map(|&t| one(&s, env.at(t)).unwrap())
            .collect();
        assert_eq!(
            got,
            vec![
                l.pair(100, 0),
                l.pair(100, 1),
                l.pair(100, 2),
                l.pair(101, 0)
            ]
        );
        assert_eq!(s.counters.ids_issued.load(Ordering::Relaxed), 4);
        assert_eq!(s.counters.borrowed_ms.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn exhaustion_borrows_the_next_millisecond_without_waiting() {
        let l = IdLayout::default();
        let s = fresh();
        let mut env = Script::new(100);
        let mut last = 0;
        for _ in 0..3 * 4096 {
            last = one(&s, &mut env).unwrap();
        }
        assert_eq!(last, l.pair(102, 4095));
        assert!(env.slept_ms.is_empty());
        assert_eq!(s.counters.borrowed_ms.load(Ordering::Relaxed), 2);
        assert_eq!(s.counters.max_drift_ms.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn backward_step_within_the_limit_continues_from_the_last_pair() {
        let l = IdLayout::default();
        let s = fresh();
        let mut env = Script::new(10_000);
        let a = one(&s, env.at(10_000)).unwrap();
        let b = one(&s, env.at(9_500)).unwrap();
        let c = one(&s, env.at(9_501)).unwrap();
        assert_eq!(
            (a, b, c),
            (l.pair(10_000, 0), l.pair(10_000, 1), l.pair(10_000, 2))
        );
        assert_eq!(env.steps, vec![500], "one step, logged once");
        assert_eq!(s.counters.backward_steps.load(Ordering::Relaxed), 1);
        assert_eq!(
            s.counters.largest_backward_step_ms.load(Ordering::Relaxed),
            500
        );
        assert!(env.slept_ms.is_empty());
    }

    #[test]
    fn steps_around_the_limit() {
        // Existing drift d after a step: within the limit nothing happens;
        // up to MAX_WAIT_MS above it the call sleeps; beyond, it fails.
        for step in [
            4_999i64, 5_000, 5_001, 5_100, 5_200, 5_201, 5_300, 3_600_000,
        ] {
            let s = fresh();
            let mut env = Script::new(1_000_000);
            one(&s, &mut env).unwrap();
            let r = one(&s, env.at(1_000_000 - step));
            // The second call's pair is (1_000_000, 1): its drift is the step.
            if step <= 5_000 {
                assert!(r.is_ok() && env.slept_ms.is_empty(), "step {step}");
            } else if step <= 5_000 + MAX_WAIT_MS as i64 {
                assert!(r.is_ok(), "step {step}: {r:?}");
                assert_eq!(env.slept_ms, vec![(step - 5_000) as u64], "step {step}");
                assert_eq!(s.counters.waits.load(Ordering::Relaxed), 1);
            } else {
                assert_eq!(
                    r,
                    Err(GenerateError::ClockBehind {
                        behind_ms: step as u64,
                        max_drift_ms: 5_000
                    }),
                    "step {step}"
                );
                assert!(env.slept_ms.is_empty(), "step {step}: no hanging");
                assert_eq!(s.counters.drift_errors.load(Ordering::Relaxed), 1);
            }
        }
    }

    #[test]
    fn sustained_burst_sleeps_at_the_limit_and_never_exceeds_it() {
        let l = IdLayout::default();
        let s = fresh();
        let policy = DriftPolicy { max_drift_ms: 10 };
        let mut env = Script::new(1_000);
        let n = 100 * 4096;
        let mut prev = 0;
        for _ in 0..n {
            let p = issue(&s, &l, policy, 1, &mut env).unwrap().first_pair;
            assert!(p > prev);
            prev = p;
        }
        // 100 ms worth of IDs at a frozen clock: 10 borrowed for free, then
        // each further millisecond waits for the clock.
        assert!(s.counters.max_drift_ms.load(Ordering::Relaxed) <= 10);
        assert_eq!(env.slept_ms.iter().sum::<u64>(), 100 - 1 - 10);
        assert!(env.slept_ms.iter().all(|&ms| ms == 1));
    }

    #[test]
    fn batch_borrows_like_single_calls() {
        let l = IdLayout::default();
        let s = fresh();
        let mut env = Script::new(1_000);
        let r = issue(
            &s,
            &l,
            DriftPolicy { max_drift_ms: 5000 },
            10 * 4096,
            &mut env,
        )
        .unwrap();
        assert_eq!(r.first_pair, l.pair(1_000, 0));
        assert_eq!(r.last_pair(), l.pair(1_009, 4095));
        assert_eq!(s.counters.borrowed_ms.load(Ordering::Relaxed), 9);
        // With a 2 ms limit, the next batch (3 ms of IDs) first waits for the
        // clock to come within 2 ms of its end, like 3 * 4096 single calls.
        let r = issue(&s, &l, DriftPolicy { max_drift_ms: 2 }, 3 * 4096, &mut env).unwrap();
        assert_eq!(env.slept_ms, vec![10]);
        assert_eq!(r.first_pair, l.pair(1_010, 0));
        assert_eq!(r.last_pair(), l.pair(1_012, 4095));
        // A batch that cannot fit within the limit fails at once.
        let r = issue(
            &s,
            &l,
            DriftPolicy { max_drift_ms: 2 },
            3 * 4096 + 1,
            &mut env,
        );
        assert_eq!(
            r,
            Err(GenerateError::BatchTooLarge {
                count: 3 * 4096 + 1,
                span_ms: 3,
                max_drift_ms: 2
            })
        );
        assert!(issue(&s, &l, DriftPolicy { max_drift_ms: 2 }, 3 * 4096, &mut env).is_ok());
    }

    #[test]
    fn max_batch_is_the_largest_batch_issue_accepts() {
        for (seq_bits, limit) in [(12, 0), (12, 2), (12, 5_000), (1, 10), (28, 5_000)] {
            let l = IdLayout::new(0, seq_bits).unwrap();
            let policy = DriftPolicy {
                max_drift_ms: limit,
            };
            let max = max_batch(&l, policy);
            let s = SharedState::default();
            s.resume_after_lease(&l, None);
            let mut env = Script::new(1_000);
            env.layout = l;
            if max < MAX_BATCH {
                assert_eq!(max, (limit + 1) * l.ids_per_ms());
                assert!(matches!(
                    issue(&s, &l, policy, max + 1, &mut env),
                    Err(GenerateError::BatchTooLarge { .. })
                ));
            }
            assert!(max <= MAX_BATCH);
            // Small enough batches to check in memory: the bound itself is accepted.
            if max <= 1 << 24 {
                assert!(
                    issue(&s, &l, policy, max, &mut env).is_ok(),
                    "{seq_bits} {limit}"
                );
            }
        }
        assert_eq!(
            max_batch(
                &IdLayout::default(),
                DriftPolicy {
                    max_drift_ms: 5_000
                }
            ),
            5_001 * 4_096
        );
        assert_eq!(
            max_batch(
                &IdLayout::default(),
                DriftPolicy {
                    max_drift_ms: 60_000
                }
            ),
            MAX_BATCH
        );
    }

    #[test]
    fn lease_is_written_before_ids_pass_it() {
        let l = IdLayout::default();
        let s = fresh();
        let mut env = Script::new(1_000);
        one(&s, &mut env).unwrap();
        assert_eq!(env.lease_writes, vec![1_000 + LEASE_WINDOW_MS]);
        one(&s, env.at(1_000)).unwrap();
        one(&s, env.at(1_150)).unwrap();
        assert_eq!(env.lease_writes.len(), 1, "within the lease: no write");
        let p = one(&s, env.at(1_250)).unwrap();
        assert_eq!(env.lease_writes, vec![1_200, 1_450]);
        assert!(l.pair_time(p) <= s.lease_until_ms.load(Ordering::Relaxed));
    }

    #[test]
    fn a_failed_lease_write_issues_nothing() {
        let s = fresh();
        let mut env = Script::new(1_000);
        env.fail_lease = true;
        assert_eq!(
            one(&s, &mut env),
            Err(GenerateError::Lease("disk full".into()))
        );
        // The clock is past the lease (none yet): the call checked first and
        // took nothing; a pair taken within the lease and failing later
        // (here: settling past it) sets `careful`, and the calls after the
        // failure check first and take nothing while the disk stays full.
        let l = IdLayout::default();
        assert_eq!(s.pair.load(Ordering::Relaxed), 0);
        s.lease_until_ms.store(1_000, Ordering::Relaxed);
        s.pair.store(l.pair(1_000, 4095), Ordering::Relaxed);
        assert!(one(&s, &mut env).is_err());
        assert_eq!(s.pair.load(Ordering::Relaxed), l.pair(1_001, 0));
        assert!(s.careful.load(Ordering::Relaxed));
        for _ in 0..100 {
            assert!(one(&s, &mut env).is_err());
        }
        assert_eq!(s.pair.load(Ordering::Relaxed), l.pair(1_001, 0));
        assert_eq!(s.counters.ids_issued.load(Ordering::Relaxed), 0);
        // The first call that succeeds lets the others take again.
        env.fail_lease = false;
        assert_eq!(one(&s, &mut env), Ok(l.pair(1_001, 1)));
        assert!(!s.careful.load(Ordering::Relaxed));
        assert_eq!(one(&s, &mut env), Ok(l.pair(1_001, 2)));
    }

    #[test]
    fn restart_resumes_after_the_lease_even_with_the_clock_set_back() {
        let l = IdLayout::default();
        let s = fresh();
        let mut env = Script::new(50_000);
        let before = one(&s, &mut env).unwrap();
        let lease = s.lease_until_ms.load(Ordering::Relaxed);
        // Restart: shared memory is new, only the lease file survived.
        let s = SharedState::default();
        s.resume_after_lease(&l, Some(lease));
        // Clock set back by an hour, drift limit raised so generation may go on.
        let mut env = Script::new(50_000 - 3_600_000 + 1);
        let policy = DriftPolicy {
            max_drift_ms: 2 * 3_600_000,
        };
        let after = issue(&s, &l, policy, 1, &mut env).unwrap().first_pair;
        assert!(after > before);
        assert_eq!(after, l.pair(lease + 1, 0));
        // With the default limit the same restart is a clear error.
        let s = SharedState::default();
        s.resume_after_lease(&l, Some(lease));
        let mut env = Script::new(50_000 - 3_600_000);
        assert!(matches!(
            one(&s, &mut env),
            Err(GenerateError::ClockBehind { .. })
        ));
    }

    #[test]
    fn an_allowance_lets_a_successor_start_ahead_without_stalling() {
        // A successor's floor puts the pair 6 s ahead of the clock under a
        // 5 s limit: with the allowance every call issues at once (single
        // and batch), the pair moves no faster than the calls need, and the
        // allowance ends once the clock has caught up to within the limit.
        let l = IdLayout::default();
        let policy = DriftPolicy {
            max_drift_ms: 5_000,
        };
        let start = 100_000;
        // The pair and the lease 6 s ahead of the clock at `start`.
        let ahead = || {
            let s = SharedState::default();
            s.resume_after_lease(&l, None);
            s.pair
                .store(l.pair(start as u64 + 6_000, 0), Ordering::SeqCst);
            s.lease_until_ms
                .store(start as u64 + 6_000, Ordering::SeqCst);
            s
        };
        let s = ahead();
        s.allow_ahead(6_000);
        assert_eq!(s.drift_in_force_ms(policy, 6_000), 6_000);
        let mut env = Script::new(start);
        env.layout = l;
        // (Within the first second the pair is still more than 5 s ahead.)
        for t in 0..900 {
            env.at(start + t);
            let first = issue(&s, &l, policy, 1, &mut env).unwrap().first_pair;
            assert!(first > l.pair(start as u64 + 6_000, 0));
            issue(&s, &l, policy, 10, &mut env).unwrap();
        }
        assert!(
            env.slept_ms.is_empty(),
            "no call waited: {:?}",
            env.slept_ms
        );
        assert_eq!(s.counters.drift_errors.load(Ordering::Relaxed), 0);
        assert_eq!(s.drift_in_force_ms(policy, 5_101), 6_000);
        // The clock within the limit of the pair: the allowance ends (a
        // lease write or a call that settles sees it), and a burst past the
        // setting waits as usual.
        assert_eq!(s.drift_in_force_ms(policy, 4_500), 5_000);
        assert_eq!(s.ahead_allowance_ms.load(Ordering::Relaxed), 0);
        env.at(start + 1_500);
        issue(&s, &l, policy, 4_096 * 2_000, &mut env).unwrap();
        assert!(!env.slept_ms.is_empty(), "the burst waited for the clock");
        // Without an allowance the same start is a clock stepped back.
        let s = ahead();
        let mut env = Script::new(start);
        assert!(matches!(
            issue(&s, &l, policy, 1, &mut env),
            Err(GenerateError::ClockBehind { .. })
        ));
    }

    #[test]
    fn quick_restart_is_not_in_the_error_zone() {
        let l = IdLayout::default();
        let s = SharedState::default();
        s.resume_after_lease(&l, Some(10_000 + LEASE_WINDOW_MS));
        // Even a 10 ms drift limit only costs a short sleep.
        let mut env = Script::new(10_000);
        assert!(issue(&s, &l, DriftPolicy { max_drift_ms: 10 }, 1, &mut env).is_ok());
        assert!(env.slept_ms.iter().sum::<u64>() <= LEASE_WINDOW_MS);
    }

    #[test]
    fn time_field_exhaustion_is_an_error_not_a_wrap() {
        let l = IdLayout::new(0, 28).unwrap(); // 35 time bits
        let s = SharedState::default();
        s.resume_after_lease(&l, None);
        s.pair.store(l.max_pair(), Ordering::SeqCst);
        s.lease_until_ms.store(l.max_time_ms(), Ordering::SeqCst);
        let mut env = Script::new(l.max_time_ms() as i64);
        env.layout = l;
        let r = issue(&s, &l, DriftPolicy { max_drift_ms: 5000 }, 1, &mut env);
        assert!(
            matches!(r, Err(GenerateError::TimeExhausted { time_bits: 35, .. })),
            "{r:?}"
        );
        s.pair.store(l.max_pair() - 5, Ordering::SeqCst);
        s.careful.store(false, Ordering::SeqCst);
        let r = issue(&s, &l, DriftPolicy { max_drift_ms: 5000 }, 10, &mut env);
        assert_eq!(r, Err(GenerateError::TooMany { count: 10 }));
        // The batch that did not fit took nothing: the last five pairs are
        // still there for a batch that fits (before: wasted).
        let r = issue(&s, &l, DriftPolicy { max_drift_ms: 5000 }, 5, &mut env).unwrap();
        assert_eq!(r.last_pair(), l.max_pair());
        // The clock past the field's end, IDs issued last a while before
        // it: the field is exhausted (it was "1 IDs do not fit").
        s.pair
            .store(l.pair(l.max_time_ms() - 5000, 0), Ordering::SeqCst);
        let mut env = Script::new(l.max_time_ms() as i64 + 10);
        env.layout = l;
        let r = issue(&s, &l, DriftPolicy { max_drift_ms: 5000 }, 1, &mut env);
        assert!(
            matches!(r, Err(GenerateError::TimeExhausted { time_bits: 35, .. })),
            "{r:?}"
        );
    }

    /// Sleeps to a clock set in advance: a clock that steps while a call
    /// waits at the drift limit.
    struct JumpWhileAsleep {
        script: Script,
        to: i64,
    }

    impl Environment for JumpWhileAsleep {
        fn now_ms(&mut self) -> i64 {
            self.script.now_ms()
        }
        fn sleep_ms(&mut self, ms: u64) -> u64 {
            self.script.sleep_ms(ms);
            self.script.current = self.to;
            ms * 1000
        }
        fn extend_lease(
            &mut self,
            state: &SharedState,
            from_ms: u64,
            until_ms: u64,
        ) -> Result<(), GenerateError> {
            self.script.extend_lease(state, from_ms, until_ms)
        }
        fn clock_stepped_back(&mut self, step_ms: u64) {
            self.script.clock_stepped_back(step_ms);
        }
    }

    #[test]
    fn a_batch_whose_clock_passes_the_time_field_while_it_waits_moves_nothing() {
        // A batch 10 ms ahead of the clock waits for the 5 ms limit; the
        // clock meanwhile jumps past the end of the time field. The batch
        // fails, and once the clock is back, issuing goes on (before: the
        // batch took at the clock past the end, the pair went past the last
        // one, and every later call failed until a restart).
        let l = IdLayout::new(0, 28).unwrap(); // 35 time bits
        let end = l.max_time_ms() as i64;
        let s = SharedState::default();
        s.resume_after_lease(&l, None);
        s.pair.store(l.pair(end as u64 - 10, 0), Ordering::SeqCst);
        s.lease_until_ms.store(end as u64, Ordering::SeqCst);
        let mut env = JumpWhileAsleep {
            script: Script::new(end - 20),
            to: end + 10,
        };
        env.script.layout = l;
        let policy = DriftPolicy { max_drift_ms: 5 };
        assert!(issue(&s, &l, policy, 10, &mut env).is_err());
        assert!(s.pair.load(Ordering::SeqCst) <= l.max_pair());
        env.script.at(end - 5);
        let r = issue(&s, &l, policy, 10, &mut env.script).unwrap();
        assert!(l.pair_time(r.first_pair) as i64 <= end);
        assert!(issue(&s, &l, policy, 1, &mut env.script).is_ok());
    }

    #[test]
    fn next_pair_follows_the_clock_and_never_overflows() {
        let l = IdLayout::default();
        assert_eq!(next_pair(&l, l.pair(5, 7), 5), l.pair(5, 8));
        assert_eq!(next_pair(&l, l.pair(5, 4095), 5), l.pair(6, 0));
        assert_eq!(next_pair(&l, l.pair(5, 7), 9), l.pair(9, 0));
        assert_eq!(next_pair(&l, l.pair(5, 7), -3), l.pair(5, 8));
        // 35 time bits and 28 sequence bits: a clock far past the time
        // field would overflow the shift; it lands just past the last pair.
        let tight = IdLayout::new(0, 28).unwrap();
        assert_eq!(next_pair(&tight, 0, i64::MAX), tight.max_pair() + 1);
    }

    #[test]
    fn a_clock_past_the_time_field_does_not_end_the_generator() {
        // A reading beyond the layout's end fails without moving the pair:
        // when the clock comes back, issuing goes on where it was.
        let l = IdLayout::new(0, 28).unwrap(); // 35 time bits
        let s = SharedState::default();
        s.resume_after_lease(&l, None);
        let mut env = Script::new(1_000);
        env.layout = l;
        let policy = DriftPolicy { max_drift_ms: 5000 };
        let a = issue(&s, &l, policy, 1, &mut env).unwrap().first_pair;
        let far = l.max_time_ms() as i64 + 10;
        assert!(matches!(
            issue(&s, &l, policy, 1, env.at(far)),
            Err(GenerateError::TooMany { .. } | GenerateError::TimeExhausted { .. })
        ));
        assert!(s.pair.load(Ordering::Relaxed) <= l.max_pair());
        let b = issue(&s, &l, policy, 1, env.at(1_001)).unwrap().first_pair;
        assert!(b > a && l.pair_time(b) == 1_001);
    }

    #[test]
    fn clock_before_the_epoch_still_issues_in_order() {
        let s = fresh();
        let mut env = Script::new(5);
        let a = one(&s, &mut env).unwrap();
        let b = one(&s, env.at(-3)).unwrap();
        assert!(b > a);
    }

    /// The real clock, a lease in memory: what many backends share.
    struct Real {
        start: std::time::Instant,
        offset: i64,
    }

    impl Environment for Real {
        fn now_ms(&mut self) -> i64 {
            self.offset + self.start.elapsed().as_millis() as i64
        }
        fn sleep_ms(&mut self, ms: u64) -> u64 {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            ms * 1000
        }
        fn extend_lease(
            &mut self,
            state: &SharedState,
            _from_ms: u64,
            until_ms: u64,
        ) -> Result<(), GenerateError> {
            state.lease_until_ms.fetch_max(
                lease_target(state, &IdLayout::default(), until_ms),
                Ordering::AcqRel,
            );
            Ok(())
        }
        fn clock_stepped_back(&mut self, _: u64) {}
    }

    /// `threads` threads issue at once, single IDs and small batches mixed,
    /// from one state, and every promise is checked: no pair twice; each
    /// thread's pairs increase; a call that starts after another returned
    /// (in any thread) gets larger pairs (the order of issue); no issued
    /// pair is further ahead of the clock than the limit, nor past the lease.
    fn race(threads: u64, calls: u64, policy: DriftPolicy, big_batch: u64) {
        use std::sync::atomic::AtomicU64;
        use std::sync::{Arc, Barrier};
        let s = Arc::new(fresh());
        let returned = Arc::new(AtomicU64::new(0));
        let barrier = Arc::new(Barrier::new(threads as usize));
        let start = std::time::Instant::now();
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (s, returned, barrier) = (s.clone(), returned.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let l = IdLayout::default();
                    let mut env = Real {
                        start,
                        offset: 1_000_000,
                    };
                    let mut got = Vec::with_capacity(calls as usize * 2);
                    barrier.wait();
                    for i in 0..calls {
                        let n = match (i + t) % 200 {
                            // Now and then a batch as long as the drift limit.
                            0 if t < 2 => big_batch,
                            r if r % 4 == 0 => 1 + (i + t) % 3,
                            _ => 1,
                        };
                        let before = returned.load(Ordering::SeqCst);
                        let r = issue(&s, &l, policy, n, &mut env).unwrap();
                        let after_ms = env.now_ms();
                        assert!(r.first_pair > before, "issued after a larger one returned");
                        assert!(
                            l.pair_time(r.last_pair()) as i64 - after_ms
                                <= policy.max_drift_ms as i64,
                            "ahead of the clock by more than the limit"
                        );
                        assert!(
                            l.pair_time(r.last_pair()) <= s.lease_until_ms.load(Ordering::SeqCst)
                        );
                        returned.fetch_max(r.last_pair(), Ordering::SeqCst);
                        got.extend(r.first_pair..=r.last_pair());
                    }
                    got
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            let got = h.join().unwrap();
            assert!(got.windows(2).all(|w| w[0] < w[1]), "per thread increasing");
            all.extend(got);
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "no pair issued twice");
        assert_eq!(s.counters.ids_issued.load(Ordering::Relaxed), n as u64);
        assert!(!s.careful.load(Ordering::Relaxed), "no call failed");
    }

    #[test]
    fn sixteen_threads_never_share_an_id_and_keep_the_order_of_issue() {
        race(16, 20_000, POLICY, 4096);
    }

    #[test]
    fn sixteen_threads_throttled_at_the_drift_limit_keep_every_promise() {
        // 2 ms of drift: the threads outrun the layout's rate at once and
        // settle by sleeping while they hold their ranges.
        race(16, 4_000, DriftPolicy { max_drift_ms: 2 }, 4096);
    }

    #[test]
    fn long_batches_at_the_drift_limit_do_not_fail_other_calls() {
        // Batches of 251 ms of IDs under a 250 ms limit: the second must wait
        // about 250 ms for the clock. A batch that held its range while it
        // waited would put the pair 500 ms ahead, more than the limit and
        // MAX_WAIT_MS together, and every call meanwhile would fail as if
        // the clock had stepped back.
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let l = IdLayout::default();
        let policy = DriftPolicy { max_drift_ms: 250 };
        let s = Arc::new(fresh());
        let done = Arc::new(AtomicBool::new(false));
        let start = std::time::Instant::now();
        let singles: Vec<_> = (0..4)
            .map(|_| {
                let (s, done) = (s.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut env = Real {
                        start,
                        offset: 1_000_000,
                    };
                    let mut calls = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        issue(&s, &l, policy, 1, &mut env)?;
                        calls += 1;
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                    Ok::<u64, GenerateError>(calls)
                })
            })
            .collect();
        let mut env = Real {
            start,
            offset: 1_000_000,
        };
        for _ in 0..3 {
            issue(&s, &l, policy, 251 * 4096, &mut env).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        for h in singles {
            let calls = h.join().unwrap();
            assert!(matches!(calls, Ok(n) if n > 0), "{calls:?}");
        }
        assert!(
            s.counters.waits.load(Ordering::Relaxed) > 0,
            "the batches waited"
        );
    }

    #[test]
    fn failing_calls_do_not_push_the_pair_ahead() {
        // The clock an hour behind the last pair: every call fails. Without
        // checking before taking, each would waste a pair; with few sequence
        // bits the pair would run ahead faster than the clock catches up.
        let l = IdLayout::new(10, 1).unwrap();
        let s = SharedState::default();
        s.resume_after_lease(&l, Some(3_600_000));
        let mut env = Script::new(1_000);
        env.layout = l;
        let word = s.pair.load(Ordering::Relaxed);
        for _ in 0..10_000 {
            assert!(matches!(
                issue(&s, &l, POLICY, 1, &mut env),
                Err(GenerateError::ClockBehind { .. })
            ));
        }
        assert!(
            s.pair.load(Ordering::Relaxed) <= word + 1,
            "one pair wasted at most"
        );
    }

    /// The registry's view in a scripted run: a grant (IDs with a time in
    /// `(floor, until]`) that the lease may not pass, and a claim made
    /// again that the registry worker carries out while a call sleeps.
    struct Registry<'a> {
        script: Script,
        state: &'a SharedState,
        floor_ms: i64,
        until_ms: u64,
        /// At the next sleep: the worker's claim made again, with this floor
        /// and grant (it raises the pair above the floor first).
        claim_during_sleep: Option<(i64, u64)>,
        /// The same at the next reading of the clock instead.
        claim_at_clock_read: Option<(i64, u64)>,
    }

    impl Registry<'_> {
        fn claim_again(&mut self, floor_ms: i64, until_ms: u64) {
            let l = self.script.layout;
            self.state
                .pair
                .fetch_max(l.pair(floor_ms as u64 + 1, 0) - 1, Ordering::AcqRel);
            self.floor_ms = floor_ms;
            self.until_ms = until_ms;
        }
    }

    impl Environment for Registry<'_> {
        fn now_ms(&mut self) -> i64 {
            if let Some((floor_ms, until_ms)) = self.claim_at_clock_read.take() {
                self.claim_again(floor_ms, until_ms);
            }
            self.script.now_ms()
        }
        fn sleep_ms(&mut self, ms: u64) -> u64 {
            if let Some((floor_ms, until_ms)) = self.claim_during_sleep.take() {
                self.claim_again(floor_ms, until_ms);
            }
            self.script.sleep_ms(ms)
        }
        fn extend_lease(
            &mut self,
            state: &SharedState,
            from_ms: u64,
            until_ms: u64,
        ) -> Result<(), GenerateError> {
            super::super::registry::range_within_grant(
                from_ms,
                until_ms,
                self.floor_ms,
                self.until_ms,
            )?;
            let target = lease_target(state, &self.script.layout, until_ms).min(self.until_ms);
            state.lease_until_ms.fetch_max(target, Ordering::AcqRel);
            Ok(())
        }
        fn clock_stepped_back(&mut self, step_ms: u64) {
            self.script.clock_stepped_back(step_ms);
        }
    }

    #[test]
    fn a_claim_made_again_during_a_wait_issues_nothing_below_its_floor() {
        // The grant ended at 10_000 and the pair used it up; a call borrows
        // 10_001, 11 ms ahead of the clock, and sleeps toward the 5 ms
        // limit. Meanwhile the registry worker claims the node id again:
        // another server held it in between, so the new floor is 10_050.
        // The call's pair (time 10_001) lies in no grant of this server.
        let l = IdLayout::default();
        let s = SharedState::default();
        s.resume_after_lease(&l, Some(10_000));
        let mut env = Registry {
            script: Script::new(9_990),
            state: &s,
            floor_ms: -1,
            until_ms: 10_000,
            claim_during_sleep: Some((10_050, 20_000)),
            claim_at_clock_read: None,
        };
        let policy = DriftPolicy { max_drift_ms: 5 };
        let r = issue(&s, &l, policy, 1, &mut env);
        assert!(!env.script.slept_ms.is_empty(), "the call slept");
        if let Ok(range) = r {
            assert!(
                l.pair_time(range.first_pair) as i64 > env.floor_ms,
                "issued {} ms, at or below the floor {} of the grant in force",
                l.pair_time(range.first_pair),
                env.floor_ms
            );
        }
        // The next call issues above the floor.
        env.script.at(10_050);
        let next = issue(&s, &l, policy, 1, &mut env).unwrap();
        assert!(l.pair_time(next.first_pair) as i64 > 10_050);
    }

    #[test]
    fn a_checked_call_across_a_claim_made_again_starts_over_above_the_floor() {
        // A batch (always checked) reads the pair under the old grant; the
        // claim made again raises it above the new floor right after (here:
        // while the batch reads the clock), and the lease check then finds
        // the batch's range below the floor. The batch held nothing: it
        // starts over from the raised pair and issues above the floor
        // instead of failing.
        let l = IdLayout::default();
        let s = SharedState::default();
        s.resume_after_lease(&l, Some(10_000));
        let mut env = Registry {
            script: Script::new(10_001),
            state: &s,
            floor_ms: -1,
            until_ms: 10_000,
            claim_during_sleep: None,
            claim_at_clock_read: Some((10_003, 20_000)),
        };
        let r = issue(&s, &l, POLICY, 3, &mut env).unwrap();
        assert!(l.pair_time(r.first_pair) as i64 > 10_003);
    }

    #[test]
    fn a_forward_step_that_issues_nothing_leaves_nothing_behind() {
        // A grant up to 70_000: the clock steps an hour forward, where no
        // lease can be written (the grant does not reach), and back. The
        // calls made while it was ahead fail; the calls after the
        // correction issue at once, as if the step had never been.
        let l = IdLayout::default();
        let s = fresh();
        let mut env = Registry {
            script: Script::new(10_000),
            state: &s,
            floor_ms: -1,
            until_ms: 70_000,
            claim_during_sleep: None,
            claim_at_clock_read: None,
        };
        let a = issue(&s, &l, POLICY, 1, &mut env).unwrap();
        for n in [1, 1, 5] {
            env.script.at(10_000 + 3_600_000);
            let r = issue(&s, &l, POLICY, n, &mut env);
            assert!(matches!(r, Err(GenerateError::Grant(_))), "{r:?}");
        }
        assert!(
            s.last_time_ms(&l) <= 70_000,
            "the pair stayed within the grant"
        );
        for n in [1, 5, 1] {
            env.script.at(10_020);
            let r = issue(&s, &l, POLICY, n, &mut env);
            assert!(r.is_ok(), "after the correction: {r:?}");
            assert!(r.unwrap().first_pair > a.first_pair);
        }
        // The same without a registry, with a lease that cannot be written
        // during the step.
        let s = fresh();
        let mut env = Script::new(10_000);
        one(&s, &mut env).unwrap();
        env.fail_lease = true;
        assert!(one(&s, env.at(10_000 + 3_600_000)).is_err());
        env.fail_lease = false;
        assert!(one(&s, env.at(10_020)).is_ok());
    }

    #[test]
    fn concurrent_batches_at_the_drift_limit_do_not_fail_single_calls() {
        // Eight threads issue batches of 300 ms of IDs (two IDs a
        // millisecond) under a 400 ms limit, a fifth single IDs. Batches
        // that each checked the pair and then took separately would put the
        // pair several batches past the limit, and the single calls
        // would fail as if the clock had stepped back.
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let l = IdLayout::new(10, 1).unwrap();
        let policy = DriftPolicy { max_drift_ms: 400 };
        let s = Arc::new(fresh());
        let done = Arc::new(AtomicBool::new(false));
        let start = std::time::Instant::now();
        let batches: Vec<_> = (0..8)
            .map(|_| {
                let (s, done) = (s.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut env = Real {
                        start,
                        offset: 1_000_000,
                    };
                    while !done.load(Ordering::Relaxed) {
                        issue(&s, &l, policy, 600, &mut env).unwrap();
                    }
                })
            })
            .collect();
        let mut env = Real {
            start,
            offset: 1_000_000,
        };
        let (mut calls, mut failed) = (0u32, Vec::new());
        while start.elapsed() < std::time::Duration::from_millis(4_000) {
            calls += 1;
            if let Err(e) = issue(&s, &l, policy, 1, &mut env) {
                failed.push(e);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        done.store(true, Ordering::Relaxed);
        for h in batches {
            h.join().unwrap();
        }
        assert!(
            failed.is_empty(),
            "{} of {calls} single calls failed: {:?}",
            failed.len(),
            failed.first()
        );
        assert!(
            s.counters.waits.load(Ordering::Relaxed) > 0,
            "the batches waited"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// For any sequence of clock readings (forward, backward, frozen,
        /// jumps) and batch sizes, every issued pair is new and larger than
        /// all before, never passes the lease, and the drift of every issued
        /// pair stays within the limit.
        #[test]
        fn never_twice_never_backwards(
            start in 0i64..1_000_000,
            deltas in prop::collection::vec(-10_000i64..10_000, 1..200),
            counts in prop::collection::vec(1u64..9000, 1..200),
            limit in 0u64..6_000,
            node_bits in 0i64..=16,
            seq_bits in 1i64..=12,
        ) {
            let l = IdLayout::new(node_bits, seq_bits).unwrap();
            let s = SharedState::default();
            s.resume_after_lease(&l, None);
            let mut env = Script::new(start);
            env.layout = l;
            let policy = DriftPolicy { max_drift_ms: limit };
            let mut last: Option<u64> = None;
            for (i, d) in deltas.iter().enumerate() {
                let n = counts[i % counts.len()];
                let t = (env.current + d).max(0);
                match issue(&s, &l, policy, n, env.at(t)) {
                    Ok(r) => {
                        if let Some(prev) = last { prop_assert!(r.first_pair > prev); }
                        last = Some(r.last_pair());
                        prop_assert!(l.pair_time(r.last_pair()) <= s.lease_until_ms.load(Ordering::Relaxed));
                        prop_assert!(l.pair_time(r.last_pair()) as i64 - env.current <= limit as i64);
                    }
                    Err(GenerateError::ClockBehind { behind_ms, .. }) => {
                        prop_assert!(behind_ms > limit + MAX_WAIT_MS);
                    }
                    Err(GenerateError::BatchTooLarge { span_ms, .. }) => prop_assert!(span_ms > limit),
                    Err(e) => prop_assert!(false, "unexpected {e:?}"),
                }
            }
            // A failed call may have wasted what it took, never more than one
            // range: the word is at or past the last issued pair.
            prop_assert!(s.pair.load(Ordering::Relaxed) >= last.unwrap_or(0));
        }
    }
}
