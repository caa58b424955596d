//! The generator's place in shared memory, modelled on
//! `contrib/pg_stat_statements`: space and one LWLock are requested while
//! the server starts, and the struct is created (or found, after a crash
//! restart re-creates shared memory) in the startup hook, under
//! `AddinShmemInitLock`.
//!
//! At creation the lease file is read, so the generator resumes after every
//! ID issued before the restart. A lease written under another
//! configuration, or one that cannot be read, blocks generation until the
//! operator acts ([`Blocked`]); it is never silently ignored. So does a
//! data directory that is a copy of another server's, or an upgraded one
//! whose lease was left behind ([`crate::core::instance`]).
//!
//! A lease is written twice, both durable before the in-memory bound is
//! raised: to the lease file (crash restarts without WAL, `pg_upgrade`,
//! `pg_resetwal`) and to the WAL ([`crate::pg::wal`]: standbys, point-in-time
//! restores, crash recovery). With `snowflake_id.lease_sync = on` only the
//! lease worker extends the lease: it waits until the synchronous standbys
//! have flushed the record before raising the bound, while backends that
//! need more lease sleep on a condition variable, interruptibly.
//!
//! The LWLock serialises lease writes, redo of lease records and the
//! acceptance of a new configuration, and guards the few fields that redo
//! changes while backends read them. The hot path takes no lock. No wait for
//! a standby happens while it is held: LWLock waits cannot be cancelled.
//!
//! The configuration is not copied here: the startup hook runs in the
//! postmaster after `_PG_init` validated the settings, and reads them from
//! [`crate::pg::settings::config`].

use crate::core::config::Config;
use crate::core::generator::{lease_target, GenerateError, SharedState, LEASE_WINDOW_MS};
use crate::core::instance::{
    self, read_marker, records_identity, remove_marker, write_marker, StartFacts, Verdict,
    HELD_SYSTEM_IDENTIFIER, HOLD_FILE_NAME, IDENTITY_FILE_NAME, UPGRADED_FILE_NAME,
};
use crate::core::lease::LEASE_FILE_NAME;
use crate::core::lease::{read_lease, write_lease, LeaseFileError, LeaseRecord, UNSET_NODE_ID};
use crate::core::lease_wal::plan_replay;
use crate::pg::settings::data_dir;
use crate::pg::{horizon, registry, settings, wal};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, Ordering};

const SHMEM_NAME: &CStr = c"snowflake_id";
const TRANCHE_NAME: &CStr = c"snowflake_id";
const MESSAGE_LEN: usize = 1024;
/// `lease_sync`: how long a backend waits for an absent lease worker before
/// it gives up with an error (the worker restarts 5 s after a crash).
const WORKER_ABSENT_LIMIT_S: u32 = 15;

/// Why generation is refused until an operator acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Blocked {
    No = 0,
    /// The lease was written under another epoch, layout or node id.
    ConfigChanged = 1,
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
    /// The hold's name in `snowflake_stats().issuing_held` (and in the
    /// `reason` label of monitoring/queries.yaml).
    pub fn reason(self) -> &'static str {
        match self {
            Blocked::No => "none",
            Blocked::ConfigChanged => "configuration_changed",
            Blocked::LeaseCorrupt => "lease_corrupt",
            Blocked::LeaseUnreadable => "lease_unreadable",
            Blocked::ReplayFailed => "replay_failed",
            Blocked::Copied => "copied",
            Blocked::LeaseMissingAfterUpgrade => "lease_missing_after_upgrade",
        }
    }
}

/// The fields redo changes while backends may read them; only touched
/// under the LWLock (or in the postmaster before anyone else can see them).
#[repr(C)]
struct Guarded {
    /// The lease written under another configuration that covers the most:
    /// found at start in the lease file, or replayed from the WAL (for the
    /// error message and for acceptance).
    recorded: Option<LeaseRecord>,
    /// What the local lease file holds, as far as this server knows.
    persisted: Option<LeaseRecord>,
    /// Why generation is blocked, as text (NUL-padded), for the blocks that
    /// carry a message.
    message: [u8; MESSAGE_LEN],
    /// The lease a corrupt lease file seems to hold (ms since 1970), for
    /// the error's hint.
    seeming_lease_unix_ms: Option<i64>,
}

/// Everything the extension keeps in shared memory.
#[repr(C)]
pub struct Shared {
    pub generator: SharedState,
    lock: *mut pg_sys::LWLock,
    blocked: AtomicU32,
    guarded: UnsafeCell<Guarded>,
    /// `lease_sync`: the largest lease (ms since the epoch) a backend asked
    /// the lease worker for.
    lease_requested: AtomicU64,
    /// Counts the lease worker's failed lease writes, so that waiting
    /// backends give up with an error instead of waiting for ever.
    worker_failures: AtomicU64,
    /// Lease writes that failed, by a backend or the lease worker
    /// (`snowflake_stats().lease_failures`).
    lease_failures: AtomicU64,
    /// When the lease was last written (wall clock, ms since 1970; 0: not
    /// since the server started).
    lease_written_unix_ms: AtomicI64,
    /// The lease worker's latch while it runs, for backends to wake it.
    worker_latch: AtomicPtr<pg_sys::Latch>,
    /// Broadcast whenever the lease worker raised the lease.
    lease_raised: pg_sys::ConditionVariable,
}

// Process-local, like all of a PostgreSQL process's globals: a server
// process is single-threaded. The PREV_* hooks are saved by `request` in
// `_PG_init` while the postmaster preloads the library, before any child is
// forked; SHARED is set by the startup hook in the postmaster (again after a
// crash restart re-creates shared memory) and inherited by every child on
// fork (under EXEC_BACKEND each child runs the hook itself). Every process
// only reads them after that.
static mut SHARED: *mut Shared = std::ptr::null_mut();
static mut PREV_SHMEM_REQUEST_HOOK: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

/// Registers the hooks that reserve and create the shared state. Called from
/// `_PG_init` while preloading, after the settings were validated.
pub fn request() {
    // SAFETY: `_PG_init` calls this only while shared_preload_libraries is
    // processed (in the postmaster or a standalone backend; under
    // EXEC_BACKEND in each child at its start): single-threaded, before the
    // hooks can run, so nothing reads the hook variables while they are
    // swapped. The previous hooks are saved first and chained by ours.
    unsafe {
        // PostgreSQL 15 and later reserve shared memory in this hook only.
        PREV_SHMEM_REQUEST_HOOK = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

unsafe fn reserve() {
    // SAFETY: called only from the shmem_request hook, the one place where
    // PostgreSQL 15 and later accept RequestAddinShmemSpace and
    // RequestNamedLWLockTranche; the tranche name is a 'static C string.
    unsafe {
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<Shared>());
        pg_sys::RequestAddinShmemSpace(horizon::request_size());
        pg_sys::RequestAddinShmemSpace(registry::request_size());
        // The generator's lock, the read horizon's (prepared transactions)
        // and the registry claim's (its message).
        pg_sys::RequestNamedLWLockTranche(TRANCHE_NAME.as_ptr(), 3);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    // SAFETY: PostgreSQL calls this hook once per process that sizes shared
    // memory (the postmaster, a standalone backend), single-threaded;
    // PREV_SHMEM_REQUEST_HOOK was saved by `request` before the hook was
    // installed. `prev()` is a C function called without pgrx's FFI guard: an
    // ERROR from it longjmps through this frame, which owns nothing to drop.
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST_HOOK {
            prev();
        }
        reserve();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    // SAFETY: PostgreSQL runs this hook whenever it creates shared memory, in
    // the postmaster (or a standalone backend), single-threaded and with no
    // other process attached (an EXEC_BACKEND child only finds the struct);
    // AddinShmemInitLock is taken as pg_stat_statements does. Relies on:
    // AddinShmemInitLock being MainLWLockArray[21] (lwlocklist.h of
    // PostgreSQL 15 to 19; the C macro cannot be called from Rust).
    // ShmemInitStruct returns a block of size_of::<Shared>() aligned to
    // PG_CACHE_LINE_SIZE (128, enough for Shared's alignment) or raises an
    // ERROR, never null; when not found it is fully written before the first
    // reference to it is made. The named tranche holds the 3 LWLocks
    // requested in `reserve`, so `.add(1)` and `.add(2)` stay inside it.
    // `prev()`, called without pgrx's FFI guard, runs before anything here
    // needs dropping.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP_HOOK {
            prev();
        }
        let Some(config) = settings::config() else {
            return;
        };
        // AddinShmemInitLock, a C macro: &MainLWLockArray[21].lock
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let shared = pg_sys::ShmemInitStruct(
            SHMEM_NAME.as_ptr(),
            std::mem::size_of::<Shared>(),
            &mut found,
        )
        .cast::<Shared>();
        if !found {
            shared.write(Shared {
                generator: SharedState::default(),
                lock: &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE_NAME.as_ptr())).lock,
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
                lease_raised: pg_sys::ConditionVariable::default(),
            });
            pg_sys::ConditionVariableInit(&raw mut (*shared).lease_raised);
            resume_from_lease(&mut *shared, config);
        }
        horizon::attach(
            &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE_NAME.as_ptr()).add(1)).lock,
        );
        registry::attach(
            &raw mut (*pg_sys::GetNamedLWLockTranche(TRANCHE_NAME.as_ptr()).add(2)).lock,
        );
        SHARED = shared;
        pg_sys::LWLockRelease(init_lock);
    }
}

/// Start-up: read the lease, decide whether this server wrote it, and place
/// the generator after it.
fn resume_from_lease(shared: &mut Shared, config: &Config) {
    let layout = config.layout;
    let dir = data_dir();
    let stored = match read_lease(&dir) {
        Ok(stored) => stored,
        Err(e) => {
            shared.generator.resume_after_lease(&layout, None);
            let kind = match e {
                LeaseFileError::Corrupt {
                    seeming_lease_unix_ms,
                    ..
                } => {
                    shared.guarded.get_mut().seeming_lease_unix_ms = seeming_lease_unix_ms;
                    Blocked::LeaseCorrupt
                }
                _ => Blocked::LeaseUnreadable,
            };
            let text = e.to_string();
            set_message(&mut shared.guarded.get_mut().message, &text);
            shared.blocked.store(kind as u32, Ordering::SeqCst);
            warning!("snowflake_id: {text}; snowflake_next() is refused until the file is repaired (never delete it while the clock may be before the last issued ID)");
            // A copy is still remembered as one, for the start after the
            // repair (PostgreSQL renames backup_label meanwhile).
            let facts = StartFacts {
                upgraded: false,
                ..start_facts(&dir, None)
            };
            if let Verdict::Copy {
                reason,
                persist: true,
            } = instance::verdict(&facts)
            {
                if let Err(e) = write_marker(&dir, HOLD_FILE_NAME, &reason) {
                    warning!("snowflake_id: could not write \"{HOLD_FILE_NAME}\": {e}");
                }
            }
            return;
        }
    };
    let facts = start_facts(&dir, stored.map(|s| s.system_identifier));
    let verdict = instance::verdict(&facts);
    if facts.standby_signal && facts.upgraded {
        // Its primary's upgrade note (see instance::verdict): not this
        // server's. (A hold file stays: a standby of a copy is a copy.)
        if let Err(e) = remove_marker(&dir, UPGRADED_FILE_NAME) {
            warning!("snowflake_id: could not remove \"{UPGRADED_FILE_NAME}\" on a standby: {e}");
        }
    }
    if records_identity(&facts, &verdict) {
        record_identity(&dir);
    }
    let record = stored.map(|stored| stored.record);
    match record {
        // No lease: a new server (nothing was issued), unless pg_upgrade
        // left its note (held below until the lease is copied or accepted).
        None => shared.generator.resume_after_lease(&layout, None),
        Some(record) => {
            shared.guarded.get_mut().persisted = Some(record);
            let differences = record.differences(&current_record(config, 0));
            if differences.is_empty() {
                shared
                    .generator
                    .resume_after_lease(&layout, Some(record.lease_until_ms()));
            } else {
                // Nothing is issued until the change is accepted.
                shared.generator.resume_after_lease(&layout, None);
                shared.guarded.get_mut().recorded = Some(record);
                shared
                    .blocked
                    .store(Blocked::ConfigChanged as u32, Ordering::SeqCst);
                warning!(
                    "snowflake_id: the configuration changed since IDs were last issued ({}); snowflake_next() is refused until a superuser runs SELECT snowflake_accept_configuration()",
                    differences.join("; ")
                );
            }
        }
    }
    // (instance::verdict gives LeaseMissingAfterUpgrade only without a
    // lease, AdoptUpgraded only with one.)
    match verdict {
        Verdict::MarkUpgraded => mark_upgraded(&dir),
        Verdict::LeaseMissingAfterUpgrade => hold(
            shared,
            Blocked::LeaseMissingAfterUpgrade,
            &format!("this cluster was made by pg_upgrade and its lease file ({LEASE_FILE_NAME}) was not copied from the old data directory, so the IDs the old cluster issued and the settings it issued them under are unknown"),
        ),
        Verdict::AdoptUpgraded => {
            if let Some(record) = record {
                // The documented upgrade step: the old cluster's lease,
                // copied (and rewritten as this system's even when it
                // already was, or was a version 1 file: the note must go
                // either way).
                let adopted = write_lease(&dir, &record, system_identifier())
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        remove_marker(&dir, UPGRADED_FILE_NAME).map_err(|e| e.to_string())
                    });
                match adopted {
                    Ok(()) => log!("snowflake_id: the lease file copied from the cluster this one was upgraded from is adopted"),
                    Err(e) => warning!("snowflake_id: the lease file copied from the upgraded cluster could not be adopted: {e}"),
                }
            }
        }
        Verdict::Copy { reason, persist } => {
            hold_copy(shared, &dir, &reason, persist, record.as_ref())
        }
        Verdict::Own => {
            if record.is_none() {
                log!("snowflake_id: no lease file ({LEASE_FILE_NAME}) in the data directory: a new server, IDs start from the clock");
            }
        }
    }
}

/// The start-up facts of [`instance::verdict`], from the data directory and
/// `pg_control`.
fn start_facts(dir: &std::path::Path, lease: Option<Option<u64>>) -> StartFacts {
    StartFacts {
        system_identifier: system_identifier(),
        lease,
        backup_label: dir.join("backup_label").exists(),
        standby_signal: dir.join("standby.signal").exists(),
        recovery_signal: dir.join("recovery.signal").exists(),
        hold: read_marker(dir, HOLD_FILE_NAME).unwrap_or_else(|e| {
            Some(format!(
                "\"{HOLD_FILE_NAME}\" exists but cannot be read ({e})"
            ))
        }),
        upgraded: dir.join(UPGRADED_FILE_NAME).exists(),
        identity: match read_marker(dir, IDENTITY_FILE_NAME) {
            Ok(None) => None,
            Ok(Some(text)) => Some(text.trim().parse().ok()),
            Err(_) => Some(None),
        },
        binary_upgrade: settings::is_upgrade_target(),
    }
}

/// Records this system's identifier as the one that started in this data
/// directory ([`IDENTITY_FILE_NAME`]). A failure is a WARNING: the file is
/// one more sign of a copy, the server's own state does not need it.
fn record_identity(dir: &std::path::Path) {
    if let Err(e) = write_marker(dir, IDENTITY_FILE_NAME, &system_identifier().to_string()) {
        warning!("snowflake_id: could not write \"{IDENTITY_FILE_NAME}\": {e} (a copy of this data directory converted into a new system before an ID was issued will not be recognised)");
    }
}

/// `pg_control`'s database system identifier (valid in the postmaster once
/// shared memory exists, and in every process after).
fn system_identifier() -> u64 {
    // SAFETY: GetSystemIdentifier takes no argument and reads pg_control's copy
    // in shared memory, set up before the shared memory startup hook runs and
    // kept for the server's life. Relies on: no caller before shared memory
    // exists (callers: the postmaster's startup hook, then backends).
    unsafe { pg_sys::GetSystemIdentifier() }
}

/// `pg_upgrade` loads the library into the new cluster to check it (its
/// `LOAD`, in binary-upgrade mode) whether or not it is preloaded there:
/// the note that the lease is still to come is written then too.
pub fn note_binary_upgrade() {
    let dir = data_dir();
    let lease = match read_lease(&dir) {
        Ok(stored) => stored.map(|s| s.system_identifier),
        // A lease that cannot be read is reported at the first start.
        Err(_) => return,
    };
    if instance::verdict(&start_facts(&dir, lease)) == Verdict::MarkUpgraded {
        mark_upgraded(&dir);
    }
}

fn mark_upgraded(dir: &std::path::Path) {
    if let Err(e) = write_marker(
        dir,
        UPGRADED_FILE_NAME,
        "written while pg_upgrade ran: the lease file of the old cluster is to be copied here",
    ) {
        warning!("snowflake_id: could not write \"{UPGRADED_FILE_NAME}\": {e}");
    }
}

/// Start-up: a copy of another server waits for the operator; the hold is
/// kept in a file (`persist`) so that it outlives the traces it was
/// recognised by, and in the lease file (its system identifier becomes
/// [`HELD_SYSTEM_IDENTIFIER`]) so that it travels with the lease wherever
/// that is copied (`pg_upgrade`).
fn hold_copy(
    shared: &mut Shared,
    dir: &std::path::Path,
    reason: &str,
    persist: bool,
    lease: Option<&LeaseRecord>,
) {
    if persist {
        // Without the file a crash restart would forget the hold (the
        // traces are gone by then): the server does not start without it.
        if let Err(e) = write_marker(dir, HOLD_FILE_NAME, reason) {
            error!("snowflake_id: could not write \"{HOLD_FILE_NAME}\" in the data directory: {e} (this server may be a copy of another: {reason})");
        }
    }
    if let Some(lease) = lease {
        if let Err(e) = write_lease(dir, lease, HELD_SYSTEM_IDENTIFIER) {
            error!("snowflake_id: could not mark the lease file ({LEASE_FILE_NAME}) as held: {e} (this server may be a copy of another: {reason})");
        }
    }
    hold(shared, Blocked::Copied, reason);
}

/// Start-up: generation waits for the operator, for `why`.
fn hold(shared: &mut Shared, kind: Blocked, why: &str) {
    set_message(&mut shared.guarded.get_mut().message, why);
    shared.blocked.store(kind as u32, Ordering::SeqCst);
    warning!("snowflake_id: {why}; snowflake_next() is refused until a superuser runs SELECT snowflake_accept_configuration()");
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
    }
}

/// Writes `text` into a NUL-padded shared-memory buffer, cut at a
/// character boundary to fit (also the registry claim's message).
pub(crate) fn set_message(buffer: &mut [u8], text: &str) {
    let mut n = text.len().min(buffer.len().saturating_sub(1));
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    buffer.fill(0);
    buffer[..n].copy_from_slice(&text.as_bytes()[..n]);
}

/// The text in a NUL-padded buffer written by [`set_message`].
pub(crate) fn message_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// Holds the extension's LWLock; released on drop (and by PostgreSQL's
/// error cleanup if an ERROR escapes).
struct LockGuard(*mut pg_sys::LWLock);

impl LockGuard {
    fn exclusive(lock: *mut pg_sys::LWLock) -> Self {
        // SAFETY: relies on: `lock` being one of the extension's LWLocks from its
        // named tranche in shared memory (every caller passes `Shared::lock`),
        // valid as long as the process. Released by Drop (also when an ERROR,
        // turned into a panic by pgrx's FFI guard, unwinds), or by PostgreSQL's
        // LWLockReleaseAll in its error cleanup.
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
        LockGuard(lock)
    }

    fn shared(lock: *mut pg_sys::LWLock) -> Self {
        // SAFETY: as in `exclusive`: relies on `lock` being `Shared::lock`, which
        // lives in shared memory as long as the process; released by Drop.
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED) };
        LockGuard(lock)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // SAFETY: self.0 is the LWLock taken in the constructor, in shared memory;
        // it is released only if this process still holds it (PostgreSQL's error
        // cleanup may have released it first).
        unsafe {
            if pg_sys::LWLockHeldByMe(self.0) {
                pg_sys::LWLockRelease(self.0);
            }
        }
    }
}

impl Shared {
    /// Whether issuing is not held ([`Blocked::No`]): one load, for the hot
    /// path.
    #[inline(always)]
    pub fn issuing_allowed(&self) -> bool {
        self.blocked.load(Ordering::Acquire) == Blocked::No as u32
    }

    pub fn blocked(&self) -> Blocked {
        match self.blocked.load(Ordering::Acquire) {
            0 => Blocked::No,
            1 => Blocked::ConfigChanged,
            2 => Blocked::LeaseCorrupt,
            3 => Blocked::LeaseUnreadable,
            4 => Blocked::ReplayFailed,
            5 => Blocked::Copied,
            _ => Blocked::LeaseMissingAfterUpgrade,
        }
    }

    /// The guarded fields, for a caller that holds the lock.
    ///
    /// # Safety
    /// The caller holds `self.lock` (exclusively to write), and keeps the
    /// reference no longer than the lock.
    #[allow(clippy::mut_from_ref)]
    unsafe fn guarded(&self) -> &mut Guarded {
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
    unsafe fn guarded_ref(&self) -> &Guarded {
        // SAFETY: the caller holds `self.lock` in some mode (this function's
        // contract), so no process writes the fields while the reference lives.
        unsafe { &*self.guarded.get() }
    }

    /// The lease written under another configuration, if one blocks.
    pub fn recorded(&self) -> Option<LeaseRecord> {
        let _guard = LockGuard::shared(self.lock);
        // SAFETY: `_guard` holds self.lock (shared) until the function returns;
        // the field is copied out before that.
        unsafe { self.guarded_ref() }.recorded
    }

    /// The lease a corrupt lease file seems to hold (ms since 1970).
    pub fn seeming_lease_unix_ms(&self) -> Option<i64> {
        let _guard = LockGuard::shared(self.lock);
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
        let _guard = LockGuard::shared(self.lock);
        // SAFETY: `_guard` holds self.lock (shared) until the function returns;
        // message_text copies the buffer out before that.
        message_text(&unsafe { self.guarded_ref() }.message)
    }

    /// Extends the lease so that IDs up to `until_ms` are covered: the
    /// backend's way, called by the generator when a range needs more.
    /// Without `lease_sync` the backend writes the lease itself, under the
    /// lock (a caller that waited finds the work done); with it, it asks the
    /// lease worker and waits.
    pub fn extend_lease(&self, config: &Config, until_ms: u64) -> Result<(), GenerateError> {
        // (false: lease_sync was turned off during the wait; written as
        // without it.)
        // The registry's fence first: past the grant no lease helps.
        registry::lease_within(until_ms, until_ms)?;
        if settings::lease_sync() && self.wait_for_worker_lease(until_ms)? {
            return Ok(());
        }
        let _guard = LockGuard::exclusive(self.lock);
        if self.generator.lease_until_ms.load(Ordering::Acquire) >= until_ms {
            return Ok(());
        }
        let target = registry::lease_within(
            until_ms,
            lease_target(&self.generator, &config.layout, until_ms),
        )?;
        let (target, _) = self.record_lease_locked(config, target)?;
        self.raise_lease(target);
        Ok(())
    }

    /// The lease worker's extension. It writes when a backend asked for
    /// more than the lease covers, or when IDs are being issued (`active`)
    /// and less than half a window is left ahead of the generator's own
    /// time; then a full window ahead of what is needed. With `lease_sync`
    /// it raises the bound only once the synchronous standbys have flushed
    /// the record. Returns whether it raised the lease.
    pub fn extend_lease_ahead(&self, config: &Config, active: bool) -> Result<bool, GenerateError> {
        // What must be covered (ms since the epoch), or `None` when the
        // lease is enough.
        let needed = || {
            let lease = self.generator.lease_until_ms.load(Ordering::Acquire);
            let time = self.generator.last_time_ms(&config.layout);
            let requested = self.lease_requested.load(Ordering::Acquire);
            let running_out = active && lease.saturating_sub(time) < LEASE_WINDOW_MS / 2;
            (running_out || requested > lease).then_some(requested.max(time))
        };
        if needed().is_none() {
            return Ok(false);
        }
        let sync = settings::lease_sync();
        let written = {
            let _guard = LockGuard::exclusive(self.lock);
            // Within the registry's grant: past it there is nothing to write
            // (backends report the grant's end themselves).
            needed()
                .and_then(|needed| {
                    registry::lease_within(
                        needed,
                        lease_target(&self.generator, &config.layout, needed),
                    )
                    .ok()
                })
                .map(|target| {
                    let written = self.record_lease_locked(config, target);
                    if let (false, Ok((target, _))) = (sync, &written) {
                        self.raise_lease(*target);
                    }
                    written
                })
        };
        let (target, end) = match written {
            None => return Ok(false),
            Some(Err(e)) => {
                self.worker_failures.fetch_add(1, Ordering::AcqRel);
                self.wake_waiters();
                return Err(e);
            }
            Some(Ok(written)) => written,
        };
        if sync {
            // Outside the lock: this wait can last as long as a standby is
            // away, and ends at shutdown without confirmation.
            if !wal::wait_for_sync_standbys(end) {
                return Ok(false);
            }
            self.raise_lease(target);
        }
        self.wake_waiters();
        Ok(true)
    }

    /// `lease_sync`: asks the lease worker for a lease up to `until_ms` and
    /// sleeps until it is there (`true`), or until `lease_sync` is turned
    /// off (`false`). Interruptible: a cancel or `statement_timeout` ends
    /// the wait with PostgreSQL's error.
    fn wait_for_worker_lease(&self, until_ms: u64) -> Result<bool, GenerateError> {
        self.lease_requested.fetch_max(until_ms, Ordering::AcqRel);
        let failures = self.worker_failures.load(Ordering::Acquire);
        let cv = (&raw const self.lease_raised).cast_mut();
        // SAFETY: `cv` is this struct's condition variable in shared memory,
        // initialised by ConditionVariableInit when the struct was created; called
        // in a backend (it has a PGPROC). The sleep is cancelled below, or by
        // AbortTransaction's ConditionVariableCancelSleep when an ERROR (a cancel)
        // ends the wait. Relies on: no Rust code reading `lease_raised`, since C
        // writes through a pointer derived from `&self` to a field that is not
        // in an UnsafeCell.
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
        // Seconds in a row without a lease worker to ask.
        let mut without_worker = 0;
        let result = loop {
            if self.generator.lease_until_ms.load(Ordering::Acquire) >= until_ms {
                break Ok(true);
            }
            if self.worker_failures.load(Ordering::Acquire) != failures {
                break Err(GenerateError::Lease(
                    "the lease worker could not extend the lease (the server log says why)".into(),
                ));
            }
            let latch = self.worker_latch.load(Ordering::Acquire);
            if latch.is_null() {
                without_worker += 1;
                // It restarts 5 s after a crash; longer means it cannot run.
                if without_worker > WORKER_ABSENT_LIMIT_S {
                    break Err(GenerateError::Lease(format!(
                        "snowflake_id.lease_sync is on but the lease worker (\"snowflake_id lease\") has not been running for {WORKER_ABSENT_LIMIT_S} s; check max_worker_processes and the server log"
                    )));
                }
            } else {
                without_worker = 0;
                // SAFETY: a non-null `latch` is the lease worker's MyLatch, the latch of
                // its PGPROC in shared memory, which outlives the worker: should it have
                // exited meanwhile, the wake-up reaches at worst the PGPROC's next owner.
                unsafe { pg_sys::SetLatch(latch) };
            }
            // Wakes up every second to wake the worker again, should it
            // have restarted meanwhile (and at once on a reload's signal).
            // SAFETY: the sleep on `cv` was prepared above; called in a backend, where
            // pgrx's FFI guard turns an interrupt's ERROR into a Rust panic.
            unsafe {
                pg_sys::ConditionVariableTimedSleep(cv, 1000, pg_sys::PG_WAIT_EXTENSION);
            }
            // lease_sync turned off while a standby never confirms: the
            // worker is stuck in its wait, and a backend reads a reload
            // only between statements; this wait reads it now, so that the
            // operator's way out works without cancelling every session.
            // SAFETY: ConfigReloadPending is a sig_atomic_t global that the SIGHUP
            // handler sets in this same single-threaded process; volatile accesses are
            // how PostgreSQL itself reads and clears it, and ProcessConfigFile is how
            // it applies the reload (here inside a statement, not at PostgresMain's
            // idle point).
            unsafe {
                if std::ptr::read_volatile(&raw const pg_sys::ConfigReloadPending) != 0 {
                    std::ptr::write_volatile(&raw mut pg_sys::ConfigReloadPending, 0);
                    pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
                }
            }
            if !settings::lease_sync() {
                break Ok(false);
            }
        };
        // SAFETY: ends the sleep prepared above; no argument, no precondition.
        unsafe { pg_sys::ConditionVariableCancelSleep() };
        result
    }

    fn wake_waiters(&self) {
        // SAFETY: `lease_raised` is the condition variable initialised with the
        // struct in shared memory; ConditionVariableBroadcast takes its spinlock
        // itself, from any process attached to shared memory.
        unsafe { pg_sys::ConditionVariableBroadcast((&raw const self.lease_raised).cast_mut()) };
    }

    /// The lease worker announces itself (its latch), or its exit (null).
    pub fn set_worker_latch(&self, latch: *mut pg_sys::Latch) {
        self.worker_latch.store(latch, Ordering::Release);
    }

    /// Writes the lease up to `target_ms` (or the file's lease, if larger) to
    /// the lease file and to the WAL (flushed), without raising the
    /// in-memory bound. Returns the lease written (ms since the epoch) and
    /// the end of the WAL record. The caller holds the lock.
    fn record_lease_locked(
        &self,
        config: &Config,
        target_ms: u64,
    ) -> Result<(u64, pg_sys::XLogRecPtr), GenerateError> {
        let mut record = current_record(config, target_ms);
        // Never below what the file already holds under this configuration:
        // with lease_sync just switched, the worker may have written a
        // larger lease that is not raised in memory yet.
        // SAFETY: the caller holds self.lock exclusively (this function's
        // contract); the field is copied out at once.
        if let Some(persisted) = unsafe { self.guarded() }.persisted {
            if persisted.differences(&record).is_empty() {
                record.lease_until_unix_ms = record
                    .lease_until_unix_ms
                    .max(persisted.lease_until_unix_ms);
            }
        }
        write_lease(&data_dir(), &record, system_identifier()).map_err(|e| {
            self.lease_failures.fetch_add(1, Ordering::Relaxed);
            GenerateError::Lease(e.to_string())
        })?;
        // SAFETY: the caller holds self.lock exclusively; the reference lives for
        // this one assignment.
        unsafe { self.guarded() }.persisted = Some(record);
        let end = wal::log_lease(&record);
        self.generator
            .counters
            .lease_writes
            .fetch_add(1, Ordering::Relaxed);
        self.lease_written_unix_ms
            .store(crate::pg::clock::unix_now_ms(), Ordering::Relaxed);
        Ok((record.lease_until_ms(), end))
    }

    /// Raises the in-memory bound every issued ID stays within: never past
    /// the registry's grant (the fence), whatever the lease file holds.
    fn raise_lease(&self, target_ms: u64) {
        self.generator
            .lease_until_ms
            .fetch_max(target_ms.min(registry::lease_ceiling()), Ordering::AcqRel);
    }

    /// Runs `f` with the lease bound (ms since the epoch) under the lock
    /// that every lease extension takes: while it runs no backend raises
    /// the bound (the registry's release cuts the grant down to it).
    pub fn with_lease_lock<R>(&self, f: impl FnOnce(u64) -> R) -> R {
        let _guard = LockGuard::exclusive(self.lock);
        f(self.generator.lease_until_ms.load(Ordering::Acquire))
    }

    /// Redo of a lease record (the startup process): see
    /// [`crate::pg::wal`] and [`plan_replay`]. Reports problems as
    /// WARNINGs, never as an ERROR.
    pub fn replay_lease(&self, config: &Config, record: &LeaseRecord) {
        let _guard = LockGuard::exclusive(self.lock);
        // SAFETY: `_guard` holds self.lock exclusively. `guarded` is last used
        // before `_guard` is dropped in the Err arm below (replay_failed then
        // takes the lock and its own reference).
        let guarded = unsafe { self.guarded() };
        let plan = plan_replay(
            &current_record(config, 0),
            guarded.persisted.as_ref(),
            guarded.recorded.as_ref(),
            record,
        );
        let layout = &config.layout;
        if let Some(ms) = plan.raise_floor_ms {
            let floor = layout.pair(ms.min(layout.max_time_ms()), layout.max_sequence());
            self.generator.pair.fetch_max(floor, Ordering::AcqRel);
        }
        if plan.remember_foreign {
            guarded.recorded = Some(*record);
            // A stronger block (an unusable lease file) stays.
            let _ = self.blocked.compare_exchange(
                Blocked::No as u32,
                Blocked::ConfigChanged as u32,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        if plan.persist {
            // A held standby keeps its lease file marked as held.
            let identity = if self.blocked() == Blocked::Copied {
                HELD_SYSTEM_IDENTIFIER
            } else {
                system_identifier()
            };
            match write_lease(&data_dir(), record, identity) {
                Ok(()) => guarded.persisted = Some(*record),
                Err(e) => {
                    drop(_guard);
                    self.replay_failed(&format!("a replayed lease could not be kept: {e}"));
                }
            }
        }
    }

    /// Redo met a lease record it cannot use or keep: a WARNING, and no ID
    /// is issued after promotion until an operator acts. The block is kept
    /// in the hold file too: after a restart, redo starts at the last
    /// restart point, which may lie past the record, and the lease file
    /// still holds the older lease; held, the server waits for the
    /// operator's acceptance, which starts new IDs `max_clock_drift` ahead
    /// of the clock (above every ID the old primary can have issued).
    pub fn replay_failed(&self, text: &str) {
        let _guard = LockGuard::exclusive(self.lock);
        // SAFETY: `_guard` holds self.lock exclusively; the reference lives for
        // this call.
        set_message(&mut unsafe { self.guarded() }.message, text);
        self.blocked
            .store(Blocked::ReplayFailed as u32, Ordering::Release);
        let kept = write_marker(
            &data_dir(),
            HOLD_FILE_NAME,
            &format!("recovery could not keep the old primary's lease ({text}), so IDs it issued may be unknown to this server"),
        );
        match kept {
            Ok(()) => warning!("snowflake_id: {text}; snowflake_next() will be refused after promotion, also after a restart (\"{HOLD_FILE_NAME}\"), until a superuser runs SELECT snowflake_accept_configuration()"),
            Err(e) => warning!("snowflake_id: {text}; snowflake_next() will be refused after promotion; \"{HOLD_FILE_NAME}\" could not be written either ({e}), so after a restart only a clock past every ID the old primary issued (snowflake_id.max_clock_drift after its last lease) keeps IDs unique"),
        }
    }

    /// Accepts a configuration change: raises the generator above every ID
    /// the old configuration can have issued, writes a lease under the new
    /// configuration and lifts the block. Returns what was accepted, or why
    /// acceptance is not possible. Refused in recovery: redo may still
    /// replay leases of the old configuration, and no lease can be written.
    pub fn accept_configuration(
        &self,
        config: &Config,
        now_ms: i64,
        max_drift_ms: u64,
    ) -> Result<String, Refusal> {
        let _guard = LockGuard::exclusive(self.lock);
        // SAFETY: RecoveryInProgress takes no argument and reads shared memory this
        // process is attached to.
        if unsafe { pg_sys::RecoveryInProgress() } {
            return Err(Refusal::InRecovery);
        }
        let blocked = self.blocked();
        match blocked {
            Blocked::No => {
                return Ok("nothing to accept: the configuration matches the lease".into())
            }
            Blocked::LeaseCorrupt | Blocked::LeaseUnreadable | Blocked::ReplayFailed => {
                return Err(Refusal::LeaseUnusable(message_text(
                    // SAFETY: `_guard` holds self.lock exclusively; the message is copied
                    // out at once.
                    &unsafe { self.guarded() }.message,
                )));
            }
            Blocked::ConfigChanged | Blocked::Copied | Blocked::LeaseMissingAfterUpgrade => {}
        }
        let layout = &config.layout;
        let mut accepted = Vec::new();
        // The first millisecond new IDs may use, when the block asks for a
        // floor: above the old configuration's IDs, or above every ID a
        // missing lease can have covered.
        let mut floor_ms = None;
        let mut old_max_id = None;
        // SAFETY: `_guard` holds self.lock exclusively; the field is copied out
        // at once.
        match (blocked, unsafe { self.guarded() }.recorded) {
            (Blocked::ConfigChanged, None) => {
                return Err(Refusal::LeaseUnusable(
                    "the recorded lease is missing".into(),
                ))
            }
            (_, Some(old)) => {
                let plan = old
                    .floor_for(&config.layout)
                    .map_err(Refusal::Unorderable)?;
                if plan.first_time_ms as i64 > now_ms + max_drift_ms as i64 {
                    return Err(Refusal::TooFarAhead {
                        first_time_ms: plan.first_time_ms,
                        now_ms,
                        old_max_id: plan.old_max_id,
                    });
                }
                floor_ms = Some(plan.first_time_ms);
                old_max_id = Some(plan.old_max_id);
                accepted.push(old.differences(&current_record(config, 0)).join("; "));
                if (old.node_bits, old.sequence_bits)
                    != (layout.node_bits(), layout.sequence_bits())
                {
                    accepted.push("the layout changed: every server issuing IDs for the same tables must run this layout before any of them issues again, or their IDs collide across nodes (stop issuing on all, change all, accept on each)".into());
                }
            }
            (_, None) => {}
        }
        if matches!(blocked, Blocked::LeaseMissingAfterUpgrade | Blocked::Copied) {
            // The old cluster's IDs, or those the original issued after the
            // copy was taken, are unknown here; none is later than the clock
            // plus the drift limit.
            let ms = (now_ms.max(0) as u64 + max_drift_ms + 1).min(layout.max_time_ms());
            floor_ms = Some(floor_ms.map_or(ms, |f| f.max(ms)));
        }
        if blocked == Blocked::LeaseMissingAfterUpgrade {
            accepted.push("the upgraded cluster's lease file is missing; new IDs start snowflake_id.max_clock_drift ahead of the clock".into());
        }
        if blocked == Blocked::Copied {
            accepted.push(format!(
                "this server is a copy ({}); it issues IDs as the only server with its node id, starting snowflake_id.max_clock_drift ahead of the clock",
                // SAFETY: `_guard` holds self.lock exclusively; the message is copied
                // out at once.
                message_text(&unsafe { self.guarded() }.message)
            ));
        }
        if let Some(first_time_ms) = floor_ms {
            self.generator.pair.fetch_max(
                layout.pair(first_time_ms, 0).saturating_sub(1),
                Ordering::AcqRel,
            );
        }
        self.generator.lease_until_ms.store(0, Ordering::SeqCst);
        let needed = floor_ms.unwrap_or_else(|| self.generator.last_time_ms(layout));
        let (target, _) = self
            .record_lease_locked(config, lease_target(&self.generator, layout, needed))
            .map_err(|e| Refusal::Write(e.to_string()))?;
        // The lease is now this system's: the traces that held it go, and
        // this system is the one that started here.
        let dir = data_dir();
        write_marker(&dir, IDENTITY_FILE_NAME, &system_identifier().to_string()).map_err(|e| {
            Refusal::Write(format!("could not write \"{IDENTITY_FILE_NAME}\": {e}"))
        })?;
        for marker in [HOLD_FILE_NAME, UPGRADED_FILE_NAME] {
            remove_marker(&dir, marker)
                .map_err(|e| Refusal::Write(format!("could not remove \"{marker}\": {e}")))?;
        }
        // With lease_sync the first ID waits for the worker's synchronous
        // lease instead.
        if !settings::lease_sync() {
            self.raise_lease(target);
        }
        self.blocked.store(Blocked::No as u32, Ordering::Release);
        let mut text = format!("accepted: {}", accepted.join("; "));
        if let Some(max) = old_max_id {
            text.push_str(&format!(
                "; new IDs are greater than {max}, the largest ID the old configuration can have issued"
            ));
        }
        Ok(text)
    }
}

/// Why a configuration change cannot be accepted.
pub enum Refusal {
    InRecovery,
    LeaseUnusable(String),
    Unorderable(String),
    TooFarAhead {
        first_time_ms: u64,
        now_ms: i64,
        old_max_id: i64,
    },
    Write(String),
}
