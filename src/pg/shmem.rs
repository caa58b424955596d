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
//! The LWLock serialises lease writes and the acceptance of a new
//! configuration. The hot path takes no lock.
//!
//! The configuration is not copied here: the startup hook runs in the
//! postmaster after `_PG_init` validated the settings, and reads them from
//! [`crate::pg::settings::config`].

use crate::core::config::Config;
use crate::core::generator::{lease_target, GenerateError, SharedState, LEASE_WINDOW_MS};
use crate::core::lease::{read_lease, write_lease, LeaseFileError, LeaseRecord, UNSET_NODE_ID};
use crate::pg::settings;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

const SHMEM_NAME: &CStr = c"snowflake_id";
const TRANCHE_NAME: &CStr = c"snowflake_id";
const MESSAGE_LEN: usize = 1024;

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
}

/// Everything the extension keeps in shared memory.
#[repr(C)]
pub struct Shared {
    pub generator: SharedState,
    lock: *mut pg_sys::LWLock,
    blocked: AtomicU32,
    /// The lease found at start, when it was written under another
    /// configuration (for the error message and for acceptance).
    recorded: Option<LeaseRecord>,
    /// Why the lease file cannot be used, as text (NUL-padded).
    message: [u8; MESSAGE_LEN],
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
                recorded: None,
                message: [0; MESSAGE_LEN],
            });
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
            if record.differences(&current_record(config, 0)).is_empty() {
                shared
                    .generator
                    .resume_after_lease(&layout, Some(record.lease_until_ms()));
            } else {
                // Nothing is issued until the change is accepted.
                shared.generator.resume_after_lease(&layout, None);
                shared.recorded = Some(record);
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
            let n = text.len().min(MESSAGE_LEN - 1);
            shared.message[..n].copy_from_slice(&text.as_bytes()[..n]);
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

/// Holds the extension's LWLock; released on drop (and by PostgreSQL's
/// error cleanup if an ERROR escapes).
struct LockGuard(*mut pg_sys::LWLock);

impl LockGuard {
    fn exclusive(lock: *mut pg_sys::LWLock) -> Self {
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
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
            _ => Blocked::LeaseUnreadable,
        }
    }

    pub fn recorded(&self) -> Option<LeaseRecord> {
        self.recorded
    }

    pub fn message(&self) -> String {
        let end = self
            .message
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(MESSAGE_LEN);
        String::from_utf8_lossy(&self.message[..end]).into_owned()
    }

    /// Extends the lease so that IDs up to `until_ms` are covered, writing
    /// the file durably before raising the in-memory bound. Serialised by the
    /// lock; a caller that waited finds the work done.
    pub fn extend_lease(&self, config: &Config, until_ms: u64) -> Result<(), GenerateError> {
        let _guard = LockGuard::exclusive(self.lock);
        if self.generator.lease_until_ms.load(Ordering::Acquire) >= until_ms {
            return Ok(());
        }
        self.write_lease_locked(
            config,
            lease_target(&self.generator, &config.layout, until_ms),
        )
    }

    /// The background worker's extension: when less than half a window is
    /// left ahead of the generator's own time, write a full window ahead of
    /// it. Returns whether it wrote.
    pub fn extend_lease_ahead(&self, config: &Config) -> Result<bool, GenerateError> {
        let _guard = LockGuard::exclusive(self.lock);
        let time = self.generator.last_time_ms(&config.layout);
        if self
            .generator
            .lease_until_ms
            .load(Ordering::Acquire)
            .saturating_sub(time)
            >= LEASE_WINDOW_MS / 2
        {
            return Ok(false);
        }
        self.write_lease_locked(config, lease_target(&self.generator, &config.layout, time))?;
        Ok(true)
    }

    fn write_lease_locked(&self, config: &Config, target_ms: u64) -> Result<(), GenerateError> {
        write_lease(&data_dir(), &current_record(config, target_ms))
            .map_err(|e| GenerateError::Lease(e.to_string()))?;
        self.generator
            .lease_until_ms
            .fetch_max(target_ms, Ordering::AcqRel);
        self.generator
            .counters
            .lease_writes
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Accepts a configuration change: raises the generator above every ID
    /// the old configuration can have issued, writes a lease under the new
    /// configuration and lifts the block. Returns what was accepted, or why
    /// acceptance is not possible.
    pub fn accept_configuration(
        &self,
        config: &Config,
        now_ms: i64,
        max_drift_ms: u64,
    ) -> Result<String, Refusal> {
        let _guard = LockGuard::exclusive(self.lock);
        match self.blocked() {
            Blocked::No => {
                return Ok("nothing to accept: the configuration matches the lease".into())
            }
            Blocked::LeaseCorrupt | Blocked::LeaseUnreadable => {
                return Err(Refusal::LeaseUnusable(self.message()))
            }
            Blocked::ConfigChanged => {}
        }
        let Some(old) = self.recorded else {
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
        let target = lease_target(&self.generator, layout, plan.first_time_ms);
        self.generator.lease_until_ms.store(0, Ordering::SeqCst);
        self.write_lease_locked(config, target)
            .map_err(|e| Refusal::Write(e.to_string()))?;
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
    LeaseUnusable(String),
    Unorderable(String),
    TooFarAhead {
        first_time_ms: u64,
        now_ms: i64,
        old_max_id: i64,
    },
    Write(String),
}
