//! Every LWLock the extension takes, through one guard.
//!
//! A [`Lock`] is a pointer to an LWLock in shared memory, made once (in the
//! shared-memory startup hook, from the extension's named tranche or
//! PostgreSQL's own array) by the one `unsafe` constructor that states what
//! the pointer must be; after that, taking it is safe. The [`LockGuard`] it
//! returns releases the lock when dropped: on every return path, and when
//! an ERROR (turned into a Rust panic by pgrx's FFI guard) unwinds.
//!
//! That last case needs care. An ERROR raised in C sets
//! `InterruptHoldoffCount` to 0 (`errfinish`) before it jumps, though the
//! lock it interrupted still counts one holdoff; `LWLockRelease` then takes
//! one away, and pgrx re-throws without passing `errfinish` again. Left so,
//! the count would wrap around, and the backend ignore cancels and
//! terminations from then on (an assertion failure in a cassert build). So
//! the guard first restores the holdoff the lock stands for, as PostgreSQL's
//! own `LWLockReleaseAll` does before each release; a guard dropped on a
//! normal path finds the count at least 1 and changes nothing.
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
        self.acquire(pg_sys::LWLockMode::LW_EXCLUSIVE);
        LockGuard {
            lock: self.0,
            exclusive: true,
        }
    }

    /// Takes the lock in shared mode, until the guard is dropped.
    pub fn shared(&self) -> LockGuard {
        self.acquire(pg_sys::LWLockMode::LW_SHARED);
        LockGuard {
            lock: self.0,
            exclusive: false,
        }
    }

    /// Whether this process holds the lock (the tests' check that an ERROR
    /// released it; nothing else needs to ask).
    #[cfg(any(test, feature = "pg_test"))]
    pub fn held_by_me(&self) -> bool {
        // SAFETY: self.0 is a valid LWLock (the contract of `from_raw`);
        // LWLockHeldByMe only reads this process's list of held locks.
        unsafe { pg_sys::LWLockHeldByMe(self.0) }
    }

    fn acquire(&self, mode: pg_sys::LWLockMode::Type) {
        // SAFETY: self.0 is a valid LWLock in shared memory (the contract of
        // `from_raw`, the only way to make a Lock). LWLockAcquire may wait, and
        // raises an ERROR only when a process holds too many LWLocks at once
        // (200), which the extension's single locks never approach.
        unsafe { pg_sys::LWLockAcquire(self.0, mode) };
    }
}

/// A held LWLock; released when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LockGuard {
    lock: *mut pg_sys::LWLock,
    exclusive: bool,
}

impl LockGuard {
    /// Whether this guard holds `lock` exclusively: the proof a function
    /// that writes under the lock asks its caller for.
    pub fn holds_exclusively(&self, lock: &Lock) -> bool {
        self.exclusive && self.lock == lock.0
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // SAFETY: self.lock is the valid LWLock the guard was made for (by
        // `Lock::exclusive` or `Lock::shared`), released only while this process
        // still holds it.
        // InterruptHoldoffCount is this process's volatile global (single-
        // threaded), read and written with volatile accesses as PostgreSQL's
        // macros do: while a lock is held it is 0 only after errfinish reset it
        // (see the module's comment), and the hold restored here is the one
        // LWLockRelease takes away.
        unsafe {
            if pg_sys::LWLockHeldByMe(self.lock) {
                let holdoff = &raw mut pg_sys::InterruptHoldoffCount;
                if std::ptr::read_volatile(holdoff) == 0 {
                    std::ptr::write_volatile(holdoff, 1);
                }
                pg_sys::LWLockRelease(self.lock);
            }
        }
    }
}
