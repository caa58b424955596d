//! Every LWLock the extension takes, through one guard.
//!
//! A [`Lock`] is a pointer to an LWLock in shared memory, made once (in the
//! shared-memory startup hook, from the extension's named tranche or
//! PostgreSQL's own array) by the one `unsafe` constructor that states what
//! the pointer must be; after that, taking it is safe. The [`LockGuard`] it
//! returns releases the lock when dropped: on every return path, and when
//! an ERROR (turned into a Rust panic by pgrx's FFI guard) unwinds. Should
//! PostgreSQL's own error cleanup (`LWLockReleaseAll`) release it first,
//! the guard finds the lock no longer held and leaves it alone.
//!
//! LWLock waits cannot be cancelled: no caller waits for anything slow (a
//! standby, a registry, a sleep) while it holds one.

use pgrx::pg_sys;

/// An LWLock in shared memory that lives as long as the process.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct Lock(*mut pg_sys::LWLock);

impl Lock {
    /// # Safety
    /// `lock` points to an initialised LWLock in shared memory (an entry of
    /// a named tranche, or of `MainLWLockArray`) that stays valid as long as
    /// any process that holds this `Lock` runs.
    pub unsafe fn from_raw(lock: *mut pg_sys::LWLock) -> Lock {
        Lock(lock)
    }

    /// Takes the lock exclusively, until the guard is dropped.
    pub fn exclusive(&self) -> LockGuard {
        self.acquire(pg_sys::LWLockMode::LW_EXCLUSIVE)
    }

    /// Takes the lock in shared mode, until the guard is dropped.
    pub fn shared(&self) -> LockGuard {
        self.acquire(pg_sys::LWLockMode::LW_SHARED)
    }

    fn acquire(&self, mode: pg_sys::LWLockMode::Type) -> LockGuard {
        // SAFETY: self.0 is a valid LWLock in shared memory (the contract of
        // `from_raw`, the only way to make a Lock). LWLockAcquire may wait, and
        // raises an ERROR only when a process holds too many LWLocks at once
        // (200), which the extension's single locks never approach.
        unsafe { pg_sys::LWLockAcquire(self.0, mode) };
        LockGuard(self.0)
    }
}

/// A held LWLock; released when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard(*mut pg_sys::LWLock);

impl Drop for LockGuard {
    fn drop(&mut self) {
        // SAFETY: self.0 is the valid LWLock the guard was made for (by
        // `Lock::acquire`); it is released only while this process still holds
        // it, as PostgreSQL's error cleanup may have released it first.
        unsafe {
            if pg_sys::LWLockHeldByMe(self.0) {
                pg_sys::LWLockRelease(self.0);
            }
        }
    }
}
