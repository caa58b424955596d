//! The generator's place in shared memory, modelled on
//! `contrib/pg_stat_statements`: space and one LWLock are requested while
//! the server starts, and the struct is created (or found, after a crash
//! restart re-creates shared memory) in the startup hook, under
//! `AddinShmemInitLock`.
//!
//! At creation the lease file is read, so the generator resumes after every
//! ID issued before the restart. A lease written under another
//! configuration, or one that cannot be read, blocks generation until the
//! operator acts ([`Blocked`]); it is never silently ignored.
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
use crate::core::lease::{read_lease, write_lease, LeaseFileError, LeaseRecord, UNSET_NODE_ID};
use crate::core::lease_wal::plan_replay;
use crate::pg::{settings, wal};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

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
    /// The lease worker's latch while it runs, for backends to wake it.
    worker_latch: AtomicPtr<pg_sys::Latch>,
    /// Broadcast whenever the lease worker raised the lease.
    lease_raised: pg_sys::ConditionVariable,
}

static mut SHARED: *mut Shared = std::ptr::null_mut();
static mut PREV_SHMEM_REQUEST_HOOK: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP_HOOK: pg_sys::shmem_startup_hook_type = None;

/// Registers the hooks that reserve and create the shared state. Called from
/// `_PG_init` while preloading, after the settings were validated.
pub fn request() {
    unsafe {
        // PostgreSQL 15 and later reserve shared memory in this hook only.
        PREV_SHMEM_REQUEST_HOOK = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

unsafe fn reserve() {
    unsafe {
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<Shared>());
        pg_sys::RequestNamedLWLockTranche(TRANCHE_NAME.as_ptr(), 1);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST_HOOK {
            prev();
        }
        reserve();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
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
                }),
                lease_requested: AtomicU64::new(0),
                worker_failures: AtomicU64::new(0),
                worker_latch: AtomicPtr::new(std::ptr::null_mut()),
                lease_raised: pg_sys::ConditionVariable::default(),
            });
            pg_sys::ConditionVariableInit(&raw mut (*shared).lease_raised);
            resume_from_lease(&mut *shared, config);
        }
        SHARED = shared;
        pg_sys::LWLockRelease(init_lock);
    }
}

/// Start-up: read the lease and place the generator after it.
fn resume_from_lease(shared: &mut Shared, config: &Config) {
    let layout = config.layout;
    match read_lease(&data_dir()) {
        Ok(None) => shared.generator.resume_after_lease(&layout, None),
        Ok(Some(record)) => {
            shared.guarded.get_mut().persisted = Some(record);
            if record.differences(&current_record(config, 0)).is_empty() {
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
                    record.differences(&current_record(config, 0)).join("; ")
                );
            }
        }
        Err(e) => {
            shared.generator.resume_after_lease(&layout, None);
            let kind = match e {
                LeaseFileError::Corrupt { .. } => Blocked::LeaseCorrupt,
                _ => Blocked::LeaseUnreadable,
            };
            let text = e.to_string();
            set_message(&mut shared.guarded.get_mut().message, &text);
            shared.blocked.store(kind as u32, Ordering::SeqCst);
            warning!("snowflake_id: {text}; snowflake_next() is refused until the file is repaired or removed");
        }
    }
}

/// The shared state, or `None` when the library was not preloaded.
pub fn shared() -> Option<&'static Shared> {
    unsafe { SHARED.as_ref() }
}

/// The data directory, where the lease lives.
pub fn data_dir() -> PathBuf {
    unsafe {
        if pg_sys::DataDir.is_null() {
            PathBuf::from(".")
        } else {
            PathBuf::from(
                CStr::from_ptr(pg_sys::DataDir)
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    }
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

fn set_message(buffer: &mut [u8; MESSAGE_LEN], text: &str) {
    let mut n = text.len().min(MESSAGE_LEN - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    buffer.fill(0);
    buffer[..n].copy_from_slice(&text.as_bytes()[..n]);
}

fn message_text(buffer: &[u8; MESSAGE_LEN]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(MESSAGE_LEN);
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// Holds the extension's LWLock; released on drop (and by PostgreSQL's
/// error cleanup if an ERROR escapes).
struct LockGuard(*mut pg_sys::LWLock);

impl LockGuard {
    fn exclusive(lock: *mut pg_sys::LWLock) -> Self {
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
        LockGuard(lock)
    }

    fn shared(lock: *mut pg_sys::LWLock) -> Self {
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_SHARED) };
        LockGuard(lock)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        unsafe {
            if pg_sys::LWLockHeldByMe(self.0) {
                pg_sys::LWLockRelease(self.0);
            }
        }
    }
}

impl Shared {
    pub fn blocked(&self) -> Blocked {
        match self.blocked.load(Ordering::Acquire) {
            0 => Blocked::No,
            1 => Blocked::ConfigChanged,
            2 => Blocked::LeaseCorrupt,
            3 => Blocked::LeaseUnreadable,
            _ => Blocked::ReplayFailed,
        }
    }

    /// The guarded fields, for a caller that holds the lock.
    ///
    /// # Safety
    /// The caller holds `self.lock` (exclusively to write), and keeps the
    /// reference no longer than the lock.
    #[allow(clippy::mut_from_ref)]
    unsafe fn guarded(&self) -> &mut Guarded {
        unsafe { &mut *self.guarded.get() }
    }

    /// The guarded fields, read-only, for a caller that holds the lock in
    /// any mode.
    ///
    /// # Safety
    /// The caller holds `self.lock`, and keeps the reference no longer.
    unsafe fn guarded_ref(&self) -> &Guarded {
        unsafe { &*self.guarded.get() }
    }

    /// The lease written under another configuration, if one blocks.
    pub fn recorded(&self) -> Option<LeaseRecord> {
        let _guard = LockGuard::shared(self.lock);
        unsafe { self.guarded_ref() }.recorded
    }

    /// Why generation is blocked, for the blocks that carry a message.
    pub fn message(&self) -> String {
        let _guard = LockGuard::shared(self.lock);
        message_text(&unsafe { self.guarded_ref() }.message)
    }

    /// Extends the lease so that IDs up to `until_ms` are covered: the
    /// backend's way, called by the generator when a range needs more.
    /// Without `lease_sync` the backend writes the lease itself, under the
    /// lock (a caller that waited finds the work done); with it, it asks the
    /// lease worker and waits.
    pub fn extend_lease(&self, config: &Config, until_ms: u64) -> Result<(), GenerateError> {
        if settings::lease_sync() {
            return self.wait_for_worker_lease(until_ms);
        }
        let _guard = LockGuard::exclusive(self.lock);
        if self.generator.lease_until_ms.load(Ordering::Acquire) >= until_ms {
            return Ok(());
        }
        let (target, _) = self.record_lease_locked(
            config,
            lease_target(&self.generator, &config.layout, until_ms),
        )?;
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
            needed().map(|needed| {
                let written = self.record_lease_locked(
                    config,
                    lease_target(&self.generator, &config.layout, needed),
                );
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
    /// sleeps until it is there. Interruptible: a cancel or
    /// `statement_timeout` ends the wait with PostgreSQL's error.
    fn wait_for_worker_lease(&self, until_ms: u64) -> Result<(), GenerateError> {
        self.lease_requested.fetch_max(until_ms, Ordering::AcqRel);
        let failures = self.worker_failures.load(Ordering::Acquire);
        let cv = (&raw const self.lease_raised).cast_mut();
        unsafe { pg_sys::ConditionVariablePrepareToSleep(cv) };
        // Seconds in a row without a lease worker to ask.
        let mut without_worker = 0;
        let result = loop {
            if self.generator.lease_until_ms.load(Ordering::Acquire) >= until_ms {
                break Ok(());
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
                unsafe { pg_sys::SetLatch(latch) };
            }
            // Wakes up every second to wake the worker again, should it
            // have restarted meanwhile.
            unsafe {
                pg_sys::ConditionVariableTimedSleep(cv, 1000, pg_sys::PG_WAIT_EXTENSION);
            }
        };
        unsafe { pg_sys::ConditionVariableCancelSleep() };
        result
    }

    fn wake_waiters(&self) {
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
        if let Some(persisted) = unsafe { self.guarded() }.persisted {
            if persisted.differences(&record).is_empty() {
                record.lease_until_unix_ms = record
                    .lease_until_unix_ms
                    .max(persisted.lease_until_unix_ms);
            }
        }
        write_lease(&data_dir(), &record).map_err(|e| GenerateError::Lease(e.to_string()))?;
        unsafe { self.guarded() }.persisted = Some(record);
        let end = wal::log_lease(&record);
        self.generator
            .counters
            .lease_writes
            .fetch_add(1, Ordering::Relaxed);
        Ok((record.lease_until_ms(), end))
    }

    fn raise_lease(&self, target_ms: u64) {
        self.generator
            .lease_until_ms
            .fetch_max(target_ms, Ordering::AcqRel);
    }

    /// Redo of a lease record (the startup process): see
    /// [`crate::pg::wal`] and [`plan_replay`]. Reports problems as
    /// WARNINGs, never as an ERROR.
    pub fn replay_lease(&self, config: &Config, record: &LeaseRecord) {
        let _guard = LockGuard::exclusive(self.lock);
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
            match write_lease(&data_dir(), record) {
                Ok(()) => guarded.persisted = Some(*record),
                Err(e) => {
                    drop(_guard);
                    self.replay_failed(&format!("a replayed lease could not be kept: {e}"));
                }
            }
        }
    }

    /// Redo met a lease record it cannot use or keep: a WARNING, and no ID
    /// is issued after promotion until an operator acts.
    pub fn replay_failed(&self, text: &str) {
        let _guard = LockGuard::exclusive(self.lock);
        set_message(&mut unsafe { self.guarded() }.message, text);
        self.blocked
            .store(Blocked::ReplayFailed as u32, Ordering::Release);
        warning!("snowflake_id: {text}; snowflake_next() will be refused after promotion until the server is restarted with its clock past every ID the old primary issued");
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
        if unsafe { pg_sys::RecoveryInProgress() } {
            return Err(Refusal::InRecovery);
        }
        match self.blocked() {
            Blocked::No => {
                return Ok("nothing to accept: the configuration matches the lease".into())
            }
            Blocked::LeaseCorrupt | Blocked::LeaseUnreadable | Blocked::ReplayFailed => {
                return Err(Refusal::LeaseUnusable(message_text(
                    &unsafe { self.guarded() }.message,
                )))
            }
            Blocked::ConfigChanged => {}
        }
        let Some(old) = unsafe { self.guarded() }.recorded else {
            return Err(Refusal::LeaseUnusable(
                "the recorded lease is missing".into(),
            ));
        };
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
        let layout = &config.layout;
        self.generator.pair.fetch_max(
            layout.pair(plan.first_time_ms, 0).saturating_sub(1),
            Ordering::AcqRel,
        );
        self.generator.lease_until_ms.store(0, Ordering::SeqCst);
        let (target, _) = self
            .record_lease_locked(
                config,
                lease_target(&self.generator, layout, plan.first_time_ms),
            )
            .map_err(|e| Refusal::Write(e.to_string()))?;
        // With lease_sync the first ID waits for the worker's synchronous
        // lease instead.
        if !settings::lease_sync() {
            self.raise_lease(target);
        }
        self.blocked.store(Blocked::No as u32, Ordering::Release);
        Ok(format!(
            "accepted: {}; new IDs are greater than {}, the largest ID the old configuration can have issued",
            old.differences(&current_record(config, 0)).join("; "),
            plan.old_max_id
        ))
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
