//! The node-id registry in the server: the claim's place in shared memory,
//! what backends check before they issue, and the lease's fence.
//!
//! With `snowflake_id.registry` set, the node id is not the setting's but
//! the one the registry worker claimed ([`worker`]), and the generator's lease
//! never passes the claim's grant (the rules and why they keep IDs unique:
//! [`crate::core::registry`]). The hot path reads one more word only in
//! this mode (the claimed node id, published once per server lifetime,
//! after the generator was raised above the claim's floor); the grant is
//! read only where the lease is extended, which is off the hot path.
//!
//! Until the first claim succeeds, and once a grant has run out without a
//! renewal, `snowflake_next()` fails with the registry's own words: a
//! server never falls back to a guessed node id.

pub mod answer;
pub mod connect;
pub mod identity;
pub mod libpq;
pub mod libpq_api;
pub mod renewal;
pub mod signing;
pub mod status;
pub mod worker;

use crate::core::config::Config;
use crate::core::registry::{lease_within_grant, range_within_grant, GrantError};
use crate::pg::errors::{raise, Error};
use crate::pg::lwlock::Lock;
use crate::pg::message::{message_text, set_message};
use crate::pg::settings;
use pgrx::pg_sys;
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SHMEM_NAME: &CStr = c"snowflake_id registry";
const MESSAGE_LEN: usize = 2048;
const PUBLIC_MESSAGE_LEN: usize = 256;
/// No node id claimed (yet).
const NONE: u64 = u64::MAX;
/// How long a backend waits for the registry worker's first claim after a
/// start before it reports what stands in the way.
const FIRST_CLAIM_WAIT: Duration = Duration::from_secs(5);

/// Where the claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Phase {
    /// No claim tried yet (the registry worker starts with the server).
    Starting = 0,
    /// A claim failed; the worker tries again.
    Failed = 1,
    /// Claimed; waiting for the clock to come near the floor.
    Waiting = 2,
    /// Claimed and issuing.
    Held = 3,
    /// The registry ended the claim (a fence, a takeover, a claim it does
    /// not know): issuing goes on within the grant, then stops until the
    /// node id is resumed or claimed again.
    Lost = 4,
    /// Released at shutdown.
    Released = 5,
}

impl TryFrom<u32> for Phase {
    type Error = u32;

    fn try_from(value: u32) -> Result<Phase, u32> {
        Ok(match value {
            0 => Phase::Starting,
            1 => Phase::Failed,
            2 => Phase::Waiting,
            3 => Phase::Held,
            4 => Phase::Lost,
            5 => Phase::Released,
            other => return Err(other),
        })
    }
}

impl Phase {
    /// The phase as `snowflake_stats().registry_state` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Failed => "failed",
            Phase::Waiting => "waiting",
            Phase::Held => "held",
            Phase::Lost => "lost",
            Phase::Released => "released",
        }
    }
}

/// The claim, in shared memory. Written by the registry worker only.
#[repr(C)]
pub struct ClaimState {
    /// The claimed node id once it may be used, else [`NONE`].
    node_id: AtomicU64,
    /// The grant's end (ms since the epoch); 0 before the first claim.
    until_ms: AtomicU64,
    floor_ms: AtomicI64,
    /// The node id claimed (also while waiting for its floor).
    claimed_node: AtomicU64,
    /// The registry's number of the claim and its signing key (16 bytes),
    /// so that a registry worker started again (after a SIGTERM of its own,
    /// or an ERROR) resumes the claim: the same node id, renewed and
    /// released with calls signed by the same key, never a node id paired
    /// with another claim's grant. 0: no claim yet.
    claim_id: AtomicI64,
    key: [AtomicU64; 2],
    /// The last call number signed (each signed call takes the next: the
    /// registry accepts a number once, and only above the last).
    calls: AtomicU64,
    /// The id of the registry the claim was made at (its UUID's bytes; 0:
    /// none yet): every connection after must reach the same registry.
    registry_id: [AtomicU64; 2],
    /// How many times the registry worker ended while the server ran.
    worker_exits: AtomicU32,
    /// How many times a claim a fence ended was resumed (issuing went on).
    resumes: AtomicU32,
    /// The last registry connection's trust
    /// ([`crate::core::conninfo::ConnectionTrust::code`]; 0: none
    /// opened yet).
    pub(super) connection: AtomicU32,
    phase: AtomicU32,
    /// Whether `message` says why the last call failed (the grant may
    /// still hold).
    failing: AtomicBool,
    /// Whether a lost claim is resumed or claimed again by itself: from
    /// its loss on, until a claim made again comes with a floor below the
    /// grant this server held (`uncovered_reclaim`: the operator fences).
    pub(super) reclaim: AtomicBool,
    lock: Lock,
    /// The last failure (or what the claim waits for), NUL-padded;
    /// guarded by `lock`.
    message: UnsafeCell<[u8; MESSAGE_LEN]>,
    /// The same for every user who may not see where the registry is
    /// ([`viewer_sees_registry`]): the failure and its SQLSTATE only.
    public_message: UnsafeCell<[u8; PUBLIC_MESSAGE_LEN]>,
}

// Process-local, like all of a PostgreSQL process's globals: a server
// process is single-threaded. Set by `attach` in the postmaster's shared
// memory startup hook (again after a crash restart), before any child is
// forked, and inherited by every child, which only reads it.
static mut STATE: *mut ClaimState = std::ptr::null_mut();

/// Whether the node id comes from the registry (fixed at start:
/// [`settings::registry_enabled`]).
#[inline]
pub fn enabled() -> bool {
    settings::registry_enabled()
}

pub fn request_size() -> usize {
    std::mem::size_of::<ClaimState>()
}

/// Creates or finds the claim's state (shmem startup hook, under
/// `AddinShmemInitLock`).
///
/// # Safety
/// Called from the shared-memory startup hook with `lock` from the
/// extension's tranche.
pub unsafe fn attach(lock: Lock) {
    // SAFETY: per this function's contract, called from the shared memory
    // startup hook under AddinShmemInitLock, single-threaded, before any other
    // process exists. ShmemInitStruct returns a block of size_of::<ClaimState>()
    // bytes (the size `request_size` reserved), aligned to PG_CACHE_LINE_SIZE,
    // or raises an ERROR; when not found it is fully written before STATE
    // publishes it, and STATE is written before any child is forked.
    unsafe {
        let mut found = false;
        let state = pg_sys::ShmemInitStruct(SHMEM_NAME.as_ptr(), request_size(), &mut found)
            .cast::<ClaimState>();
        if !found {
            state.write(ClaimState {
                node_id: AtomicU64::new(NONE),
                until_ms: AtomicU64::new(0),
                floor_ms: AtomicI64::new(-1),
                claimed_node: AtomicU64::new(NONE),
                claim_id: AtomicI64::new(0),
                key: [AtomicU64::new(0), AtomicU64::new(0)],
                calls: AtomicU64::new(0),
                registry_id: [AtomicU64::new(0), AtomicU64::new(0)],
                worker_exits: AtomicU32::new(0),
                resumes: AtomicU32::new(0),
                connection: AtomicU32::new(0),
                phase: AtomicU32::new(Phase::Starting as u32),
                failing: AtomicBool::new(false),
                reclaim: AtomicBool::new(false),
                lock,
                message: UnsafeCell::new([0; MESSAGE_LEN]),
                public_message: UnsafeCell::new([0; PUBLIC_MESSAGE_LEN]),
            });
        }
        STATE = state;
    }
}

fn state() -> Option<&'static ClaimState> {
    // SAFETY: STATE is written only by `attach` in the startup hook, before any
    // child is forked, and only read afterwards (single-threaded process); it
    // is null or points to the ClaimState in shared memory, which lives as long
    // as the process.
    unsafe { STATE.as_ref() }
}

impl ClaimState {
    pub fn phase(&self) -> Phase {
        // Only `Phase as u32` is ever stored; anything else reads as a
        // failed claim (no node id is published by it).
        Phase::try_from(self.phase.load(Ordering::Acquire)).unwrap_or(Phase::Failed)
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u32, Ordering::Release);
    }

    /// The last failure, or what the claim waits for, in the words the
    /// user running this statement may see ([`viewer_sees_registry`]).
    pub fn message(&self) -> String {
        let whole = viewer_sees_registry();
        let _guard = self.lock.shared();
        // SAFETY: `_guard` holds the lock that guards both buffers (shared: every
        // writer holds it exclusively) until the text is copied out.
        unsafe {
            if whole {
                message_text(&*self.message.get())
            } else {
                message_text(&*self.public_message.get())
            }
        }
    }

    /// A message every user may see whole (it names no host).
    fn set_message(&self, text: &str) {
        self.set_failure(text, text);
    }

    /// A message, and what of it every user may see.
    fn set_failure(&self, text: &str, public: &str) {
        let _guard = self.lock.exclusive();
        // SAFETY: `_guard` holds the lock that guards both buffers exclusively,
        // so these are the only references to them in any process while they
        // live.
        unsafe {
            set_message(&mut *self.message.get(), text);
            set_message(&mut *self.public_message.get(), public);
        }
    }

    pub fn until_ms(&self) -> u64 {
        self.until_ms.load(Ordering::Acquire)
    }

    /// Keeps the claim's number and signing key for a registry worker
    /// started again.
    fn keep_claim(&self, claim_id: i64, key: [u8; 16]) {
        let (low, high) = key.split_at(8);
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        self.key[0].store(word(low), Ordering::Release);
        self.key[1].store(word(high), Ordering::Release);
        self.claim_id.store(claim_id, Ordering::Release);
    }

    /// The claim a registry worker started again resumes: its signing key
    /// and grant (which holds its number), when one was made and is not
    /// released.
    fn kept_claim(&self) -> Option<([u8; 16], crate::core::registry::Grant)> {
        let claim_id = self.claim_id.load(Ordering::Acquire);
        let node_id = self.claimed_node.load(Ordering::Acquire);
        if claim_id <= 0
            || node_id == NONE
            || !matches!(self.phase(), Phase::Waiting | Phase::Held | Phase::Lost)
        {
            return None;
        }
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.key[0].load(Ordering::Acquire).to_le_bytes());
        key[8..].copy_from_slice(&self.key[1].load(Ordering::Acquire).to_le_bytes());
        let grant = crate::core::registry::Grant {
            node_id,
            claim_id,
            floor_ms: self.floor_ms.load(Ordering::Acquire),
            until_ms: self.until_ms(),
        };
        Some((key, grant))
    }

    /// The number of the next signed call (above every one before).
    fn next_call_number(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Keeps the id of the registry the claim was made at.
    fn keep_registry(&self, id: [u8; 16]) {
        let (low, high) = id.split_at(8);
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        self.registry_id[0].store(word(low), Ordering::Release);
        self.registry_id[1].store(word(high), Ordering::Release);
    }

    /// The id of the registry the claims of this server's run were made
    /// at, once one was.
    fn claimed_registry(&self) -> Option<[u8; 16]> {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&self.registry_id[0].load(Ordering::Acquire).to_le_bytes());
        id[8..].copy_from_slice(&self.registry_id[1].load(Ordering::Acquire).to_le_bytes());
        (id != [0; 16]).then_some(id)
    }
}

/// A worker message without the registry's SQLSTATE in front ("CODE text").
fn strip_sqlstate(message: &str) -> &str {
    message
        .split_once(' ')
        .filter(|(code, _)| code.len() == 5 && code.chars().all(|c| c.is_ascii_alphanumeric()))
        .map_or(message, |(_, rest)| rest)
}

/// The node id this server issues under now, for display and for bounds
/// (`snowflake_stats()`, the read horizon): the claimed one in registry
/// mode, else the setting.
pub fn node_id(config: &Config) -> Option<u64> {
    if !enabled() {
        return config.node_id;
    }
    claimed_node()
}

/// Registry mode: the claimed node id, if there is one now (one load, for
/// the hot path; [`issuing_node`] says why there is none).
#[inline(always)]
pub fn claimed_node() -> Option<u64> {
    state().and_then(|s| Some(s.node_id.load(Ordering::Acquire)).filter(|&n| n != NONE))
}

/// Registry mode: the node id to issue under, or the error that says why
/// there is none (waits a few seconds for the first claim after a start).
pub fn issuing_node() -> u64 {
    let Some(state) = state() else {
        raise(Error::NotPreloaded)
    };
    let node = state.node_id.load(Ordering::Acquire);
    if node != NONE {
        return node;
    }
    let started = Instant::now();
    loop {
        let node = state.node_id.load(Ordering::Acquire);
        if node != NONE {
            return node;
        }
        let phase = state.phase();
        let waiting_first = phase == Phase::Starting && started.elapsed() < FIRST_CLAIM_WAIT;
        if !waiting_first {
            raise(no_node_error(state, phase));
        }
        // SAFETY: called in a backend, whose MyLatch is its own latch;
        // WL_EXIT_ON_PM_DEATH ends the process rather than wait past the
        // postmaster, and an interrupt is handled by check_for_interrupts! below.
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                50,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        pgrx::check_for_interrupts!();
    }
}

/// Whether the user running this statement may see where the registry is
/// and what it said: a superuser, or a member of `pg_read_all_settings`
/// (who reads `snowflake_id.registry` anyway). Everyone else sees that the
/// registry failed and the SQLSTATE, not where it is nor whom it names.
fn viewer_sees_registry() -> bool {
    // SAFETY: called in a backend, during a statement (a SQL function, or an
    // error it raises), where there is a current user; superuser() and
    // has_privs_of_role() read the role caches, and raise an ERROR only on a
    // broken catalog.
    unsafe {
        pg_sys::superuser()
            || pg_sys::has_privs_of_role(
                pg_sys::GetUserId(),
                pg_sys::Oid::from(pg_sys::ROLE_PG_READ_ALL_SETTINGS),
            )
    }
}

/// The registry as the user running this statement may see it: its
/// connection string (no password), or only the setting's name.
fn shown_registry() -> String {
    if viewer_sees_registry() {
        settings::registry_display()
    } else {
        "snowflake_id.registry".to_string()
    }
}

fn no_node_error(state: &ClaimState, phase: Phase) -> Error {
    let registry = shown_registry();
    let message = state.message();
    match phase {
        Phase::Waiting => Error::RegistryWaitingForFloor { message },
        Phase::Starting => Error::RegistryUnavailable {
            registry,
            message:
                "the registry worker (\"snowflake_id registry\") has not claimed a node id yet"
                    .into(),
        },
        _ => match message.split_once(' ') {
            Some((code, rest))
                if code.len() == 5
                    && code.chars().all(|c| c.is_ascii_alphanumeric())
                    && code != "08001" =>
            {
                Error::RegistryRefused {
                    registry,
                    sqlstate: code.to_string(),
                    message: rest.to_string(),
                }
            }
            Some((_, rest)) => Error::RegistryUnavailable {
                registry,
                message: rest.to_string(),
            },
            None => Error::RegistryUnavailable { registry, message },
        },
    }
}

/// The fence, where the lease is extended (the caller holds the
/// generator's lock): the lease to write when IDs up to `needed_ms` must be
/// covered and the generator wants `target_ms`. Unchanged without a
/// registry.
pub fn lease_within(needed_ms: u64, target_ms: u64) -> Result<u64, GrantError> {
    if !enabled() {
        return Ok(target_ms);
    }
    let until = state().map_or(0, |s| s.until_ms());
    lease_within_grant(needed_ms, target_ms, until)
}

/// Where a range of IDs is covered: whether the IDs with times from
/// `from_ms` to `needed_ms` lie inside the grant in force (the caller checks
/// this before the lease covers them). The grant's end is read before its
/// floor: a claim stores the floor first, so a new end comes with its floor.
/// Unchanged without a registry.
pub fn range_within(from_ms: u64, needed_ms: u64) -> Result<(), GrantError> {
    if !enabled() {
        return Ok(());
    }
    let Some(state) = state() else {
        return range_within_grant(from_ms, needed_ms, -1, 0);
    };
    let until_ms = state.until_ms();
    let floor_ms = state.floor_ms.load(Ordering::Acquire);
    range_within_grant(from_ms, needed_ms, floor_ms, until_ms)
}

/// The largest lease the generator may use (`u64::MAX` without a registry).
pub fn lease_ceiling() -> u64 {
    if !enabled() {
        return u64::MAX;
    }
    state().map_or(0, |s| s.until_ms())
}

/// The error for a grant that ended: the registry's words if a call
/// failed, and when it ended.
pub fn grant_ended(e: GrantError, config: &Config) -> Error {
    let until_ms = match e {
        GrantError::Exhausted { until_ms, .. } => until_ms,
        GrantError::BelowFloor { floor_ms, .. } => {
            return Error::RegistryClaimedAgain {
                floor: crate::pg::clock::timestamp_of(config, floor_ms.max(0) as u64).to_string(),
            }
        }
    };
    let state = state();
    let lost = state.is_some_and(|s| s.phase() == Phase::Lost);
    let message = state.map(|s| s.message()).unwrap_or_default();
    Error::RegistryGrantEnded {
        registry: shown_registry(),
        until: crate::pg::clock::timestamp_of(config, until_ms).to_string(),
        lost,
        message: strip_sqlstate(&message).to_string(),
    }
}
