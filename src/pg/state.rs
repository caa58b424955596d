//! The generator's place in shared memory ([`Shared`]), why it may be held
//! ([`Blocked`]), and the readers of its state.
//!
//! The struct is created by the shared-memory startup hook
//! ([`crate::pg::shmem`]), which also decides at start whether this server
//! may resume after its lease ([`crate::pg::startup`]). The lease is
//! extended in [`crate::pg::lease`], replayed from the WAL in
//! [`crate::pg::replay`], and accepted anew in [`crate::pg::accept`]: each
//! an `impl Shared` of its own room, over the fields declared here.
//!
//! Locking: the generator itself ([`SharedState`]) is lock-free, and the
//! hot path reads only atomics (the pair, the lease bound, `blocked`). The
//! extension's LWLock (`lock`) serialises lease writes, redo of lease
//! records and the acceptance of a new configuration, and guards the few
//! fields that redo changes while backends read them ([`Guarded`]). No wait
//! for a standby happens while it is held: LWLock waits cannot be
//! cancelled.

use crate::core::config::Config;
use crate::core::generator::SharedState;
use crate::core::lease::{LeaseRecord, UNSET_NODE_ID};
use crate::pg::errors::Held;
use crate::pg::lwlock::Lock;
use crate::pg::message::message_text;
use crate::pg::settings;
use pgrx::pg_sys;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

pub(super) const MESSAGE_LEN: usize = 1024;

/// Why generation is refused until an operator acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Blocked {
    No = 0,
    /// The lease was written under another epoch, layout or node id.
    ConfigurationChanged = 1,
    /// The lease file is corrupt.
    LeaseCorrupt = 2,
    /// The lease file cannot be read.
    LeaseUnreadable = 3,
    /// A lease record in the WAL could not be replayed or kept: IDs the
    /// old primary issued may be unknown here.
    ReplayFailed = 4,
    /// The data directory is a copy of another server's (the message says
    /// how it was recognised).
    Copied = 5,
    /// `pg_upgrade` made this cluster and the lease file was not copied.
    LeaseMissingAfterUpgrade = 6,
}

impl Blocked {
    /// The hold's label and meaning, `None` when nothing is held.
    pub fn held(self) -> Option<Held> {
        Some(match self {
            Blocked::No => return None,
            Blocked::ConfigurationChanged => Held::ConfigurationChanged,
            Blocked::LeaseCorrupt => Held::LeaseCorrupt,
            Blocked::LeaseUnreadable => Held::LeaseUnreadable,
            Blocked::ReplayFailed => Held::ReplayFailed,
            Blocked::Copied => Held::Copied,
            Blocked::LeaseMissingAfterUpgrade => Held::LeaseMissingAfterUpgrade,
        })
    }
}

impl TryFrom<u32> for Blocked {
    type Error = u32;

    fn try_from(value: u32) -> Result<Blocked, u32> {
        Ok(match value {
            0 => Blocked::No,
            1 => Blocked::ConfigurationChanged,
            2 => Blocked::LeaseCorrupt,
            3 => Blocked::LeaseUnreadable,
            4 => Blocked::ReplayFailed,
            5 => Blocked::Copied,
            6 => Blocked::LeaseMissingAfterUpgrade,
            other => return Err(other),
        })
    }
}

/// The fields redo changes while backends may read them; only touched
/// under the LWLock (or in the postmaster before anyone else can see them).
#[repr(C)]
pub(super) struct Guarded {
    /// The lease written under another configuration that covers the most:
    /// found at start in the lease file, or replayed from the WAL (for the
    /// error message and for acceptance).
    pub(super) recorded: Option<LeaseRecord>,
    /// What the local lease file holds, as far as this server knows.
    pub(super) persisted: Option<LeaseRecord>,
    /// Why generation is blocked, as text (NUL-padded), for the blocks that
    /// carry a message.
    pub(super) message: [u8; MESSAGE_LEN],
    /// The lease a corrupt lease file seems to hold (ms since 1970), for
    /// the error's hint.
    pub(super) seeming_lease_unix_ms: Option<i64>,
}

/// Everything the extension keeps in shared memory.
#[repr(C)]
pub struct Shared {
    pub generator: SharedState,
    pub(super) lock: Lock,
    pub(super) blocked: AtomicU32,
    pub(super) guarded: UnsafeCell<Guarded>,
    /// `lease_sync`: the largest lease (ms since the epoch) a backend asked
    /// the lease worker for.
    pub(super) lease_requested: AtomicU64,
    /// Counts the lease worker's failed lease writes, so that waiting
    /// backends give up with an error instead of waiting for ever.
    pub(super) worker_failures: AtomicU64,
    /// Lease writes that failed, by a backend or the lease worker
    /// (`snowflake_stats().lease_failures`).
    pub(super) lease_failures: AtomicU64,
    /// When the lease was last written (wall clock, ms since 1970; 0: not
    /// since the server started).
    pub(super) lease_written_unix_ms: AtomicI64,
    /// The lease worker's latch while it runs, for backends to wake it.
    pub(super) worker_latch: AtomicPtr<pg_sys::Latch>,
    /// Broadcast whenever the lease worker raised the lease. In an
    /// `UnsafeCell`: PostgreSQL's C code writes it (its spinlock and wait
    /// list) through a pointer made from `&Shared`, which only interior
    /// mutability allows; no Rust code reads or writes it directly.
    pub(super) lease_raised: UnsafeCell<pg_sys::ConditionVariable>,
    /// This server started in archive recovery (`standby.signal` or
    /// `recovery.signal`) without a registry: once recovery ends it takes
    /// over its predecessor's node id, and the first process to see it
    /// out of recovery applies the successor's floor
    /// ([`Shared::take_over`](crate::pg::accept)).
    pub(super) successor_pending: AtomicBool,
    /// The successor's file ([`SUCCESSOR_FILE_NAME`]) is there, to be
    /// removed by the first lease written at or above the floor.
    ///
    /// [`SUCCESSOR_FILE_NAME`]: crate::core::instance::SUCCESSOR_FILE_NAME
    pub(super) successor_marker: AtomicBool,
    /// The successor's floor last applied (ms since the epoch; 0: none since
    /// the server started) and how far ahead of the clock it put the IDs,
    /// for `snowflake_stats()`.
    pub(super) successor_floor_ms: AtomicU64,
    pub(super) successor_ahead_ms: AtomicU64,
}

// Process-local, like all of a PostgreSQL process's globals: a server
// process is single-threaded. SHARED is set by the startup hook in the
// postmaster (again after a crash restart re-creates shared memory) and
// inherited by every child on fork (under EXEC_BACKEND each child runs the
// hook itself). Every process only reads it after that.
static mut SHARED: *mut Shared = std::ptr::null_mut();

impl Shared {
    /// The state of a server that has not read its lease yet: nothing
    /// issued, nothing held, no lease.
    pub(super) fn new(lock: Lock) -> Shared {
        Shared {
            generator: SharedState::default(),
            lock,
            blocked: AtomicU32::new(Blocked::No as u32),
            guarded: UnsafeCell::new(Guarded {
                recorded: None,
                persisted: None,
                message: [0; MESSAGE_LEN],
                seeming_lease_unix_ms: None,
            }),
            lease_requested: AtomicU64::new(0),
            worker_failures: AtomicU64::new(0),
            lease_failures: AtomicU64::new(0),
            lease_written_unix_ms: AtomicI64::new(0),
            worker_latch: AtomicPtr::new(std::ptr::null_mut()),
            lease_raised: UnsafeCell::new(pg_sys::ConditionVariable::default()),
            successor_pending: AtomicBool::new(false),
            successor_marker: AtomicBool::new(false),
            successor_floor_ms: AtomicU64::new(0),
            successor_ahead_ms: AtomicU64::new(0),
        }
    }

    /// The successor's floor applied since the server started (ms since
    /// the epoch) and how far ahead of the clock it put the IDs (ms).
    pub fn successor_floor(&self) -> Option<(u64, u64)> {
        let floor = self.successor_floor_ms.load(Ordering::Acquire);
        (floor > 0).then(|| (floor, self.successor_ahead_ms.load(Ordering::Acquire)))
    }

    /// Whether issuing is not held ([`Blocked::No`]): one load, for the hot
    /// path.
    #[inline(always)]
    pub fn issuing_allowed(&self) -> bool {
        self.blocked.load(Ordering::Acquire) == Blocked::No as u32
    }

    pub fn blocked(&self) -> Blocked {
        // Only `Blocked as u32` is ever stored; should anything else be read,
        // the server stays held (the safe side), for a reason that asks the
        // operator to look.
        Blocked::try_from(self.blocked.load(Ordering::Acquire)).unwrap_or(Blocked::ReplayFailed)
    }

    /// The guarded fields, for a caller that holds the lock.
    ///
    /// # Safety
    /// The caller holds `self.lock` (exclusively to write), and keeps the
    /// reference no longer than the lock.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn guarded(&self) -> &mut Guarded {
        // SAFETY: the caller holds `self.lock` exclusively (this function's
        // contract), so no other process writes or reads the fields, and no other
        // reference in this process is used, while the returned one lives;
        // UnsafeCell allows the mutation behind `&self`.
        unsafe { &mut *self.guarded.get() }
    }

    /// The guarded fields, read-only, for a caller that holds the lock in
    /// any mode.
    ///
    /// # Safety
    /// The caller holds `self.lock`, and keeps the reference no longer.
    pub(super) unsafe fn guarded_ref(&self) -> &Guarded {
        // SAFETY: the caller holds `self.lock` in some mode (this function's
        // contract), so no process writes the fields while the reference lives.
        unsafe { &*self.guarded.get() }
    }

    /// The lease written under another configuration, if one blocks.
    pub fn recorded(&self) -> Option<LeaseRecord> {
        let _guard = self.lock.shared();
        // SAFETY: `_guard` holds self.lock (shared) until the function returns;
        // the field is copied out before that.
        unsafe { self.guarded_ref() }.recorded
    }

    /// The lease a corrupt lease file seems to hold (ms since 1970).
    pub fn seeming_lease_unix_ms(&self) -> Option<i64> {
        let _guard = self.lock.shared();
        // SAFETY: `_guard` holds self.lock (shared) until the function returns;
        // the field is copied out before that.
        unsafe { self.guarded_ref() }.seeming_lease_unix_ms
    }

    /// `lease_sync`: whether a backend asked the lease worker for more
    /// lease than there is (it waits, or gave up waiting, for the
    /// synchronous standbys or for the worker itself).
    pub fn lease_waiting(&self) -> bool {
        settings::lease_sync()
            && self.lease_requested.load(Ordering::Acquire)
                > self.generator.lease_until_ms.load(Ordering::Acquire)
    }

    /// Failed lease writes since the server started.
    pub fn lease_failures(&self) -> u64 {
        self.lease_failures.load(Ordering::Relaxed)
    }

    /// When the lease was last written (ms since 1970), if it was since
    /// the server started.
    pub fn lease_written_unix_ms(&self) -> Option<i64> {
        Some(self.lease_written_unix_ms.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }

    /// Why generation is blocked, for the blocks that carry a message.
    pub fn message(&self) -> String {
        let _guard = self.lock.shared();
        // SAFETY: `_guard` holds self.lock (shared) until the function returns;
        // message_text copies the buffer out before that.
        message_text(&unsafe { self.guarded_ref() }.message)
    }
}

/// Makes `shared` the state every process of this server reads.
///
/// # Safety
/// Called only by the shared-memory startup hook (single-threaded, before
/// any child is forked), with the struct it created or found in shared
/// memory, fully initialised.
pub(super) unsafe fn publish(shared: *mut Shared) {
    // SAFETY: per this function's contract, no other process or thread reads
    // SHARED while it is written.
    unsafe { SHARED = shared };
}

/// The shared state, or `None` when the library was not preloaded.
pub fn shared() -> Option<&'static Shared> {
    // SAFETY: SHARED is written only by the startup hook, before any child is
    // forked, and only read afterwards (single-threaded process); it is null or
    // points to the Shared struct created there, which lives in shared memory
    // as long as the process, so a 'static shared reference is valid.
    unsafe { SHARED.as_ref() }
}

/// The lease record for `config` with lease `lease_until_ms` (ms since the
/// epoch). An unset node id is recorded as [`UNSET_NODE_ID`].
pub fn current_record(config: &Config, lease_until_ms: u64) -> LeaseRecord {
    LeaseRecord {
        lease_until_unix_ms: config.epoch_unix_ms + lease_until_ms as i64,
        epoch_unix_ms: config.epoch_unix_ms,
        node_bits: config.layout.node_bits(),
        sequence_bits: config.layout.sequence_bits(),
        node_id: config.node_id.unwrap_or(UNSET_NODE_ID),
        drift_limit_ms: None,
        timeline: None,
    }
}

/// `pg_control`'s database system identifier (valid in the postmaster once
/// shared memory exists, and in every process after).
pub(super) fn system_identifier() -> u64 {
    // SAFETY: GetSystemIdentifier takes no argument and reads pg_control's copy
    // in shared memory, set up before the shared memory startup hook runs and
    // kept for the server's life. Relies on: no caller before shared memory
    // exists (callers: the postmaster's startup hook, then backends).
    unsafe { pg_sys::GetSystemIdentifier() }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    fn holdoff() -> u32 {
        // SAFETY: this backend's own global, read as PostgreSQL's macros do.
        unsafe { std::ptr::read_volatile(&raw const pg_sys::InterruptHoldoffCount) }
    }

    /// An ERROR raised in C while a guard of [`crate::pg::lwlock`] holds the
    /// generator's lock: the lock is released
    /// and the interrupt holdoff count is where it was (before the guard
    /// restored the holdoff, it wrapped around to 4294967295 here).
    #[pg_test]
    fn an_error_under_a_lock_releases_it_and_keeps_interrupts_balanced() {
        let shared = super::shared().expect("the library is preloaded in tests");
        let lock = shared.lock;
        let before = holdoff();
        PgTryBuilder::new(|| {
            let _guard = lock.exclusive();
            // palloc refuses the size with elog(ERROR), in C.
            // SAFETY: a plain allocation request; it raises an ERROR instead.
            unsafe { pg_sys::palloc(usize::MAX / 2) };
        })
        .catch_others(|_| ())
        .execute();
        assert_eq!(holdoff(), before);
        assert!(!lock.held_by_me(), "the lock is still held after the ERROR");
    }
}
