//! The shared-memory hooks, modelled on `contrib/pg_stat_statements`:
//! space for every room's state and one tranche of three LWLocks are
//! requested while the server starts ([`request`], in `_PG_init`), and each
//! room's struct is created (or found, after a crash restart re-creates
//! shared memory) in the startup hook, under `AddinShmemInitLock`: the
//! generator's ([`crate::pg::state`], which then reads its lease:
//! [`crate::pg::startup`]), the read horizon's and the registry claim's.
//!
//! The three locks, one per room: the generator's (lease writes, redo,
//! acceptance: [`crate::pg::state`]), the horizon's (prepared
//! transactions) and the registry claim's (its message).
//!
//! The configuration is not copied here: the startup hook runs in the
//! postmaster after `_PG_init` validated the settings, and reads them from
//! [`crate::pg::settings::config`].

use crate::pg::lwlock::Lock;
use crate::pg::state::{self, Shared};
use crate::pg::{horizon, registry, settings, startup};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;

const SHMEM_NAME: &CStr = c"snowflake_id";
const TRANCHE_NAME: &CStr = c"snowflake_id";

// Process-local, like all of a PostgreSQL process's globals: a server
// process is single-threaded. The PREV_* hooks are saved by `request` in
// `_PG_init` while the postmaster preloads the library, before any child is
// forked, and only read after that.
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
    // SAFETY: PostgreSQL calls this hook whenever it creates shared memory, in
    // the postmaster (or a standalone backend), single-threaded; `prev()` is a
    // C function called without pgrx's FFI guard, before anything here needs
    // dropping.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP_HOOK {
            prev();
        }
    }
    let Some(config) = settings::config() else {
        return;
    };
    // SAFETY: AddinShmemInitLock, a C macro for &MainLWLockArray[21].lock
    // (lwlocklist.h of PostgreSQL 15 to 19), an LWLock in shared memory that
    // exists once shared memory does, which is when this hook runs.
    let init_lock = unsafe { Lock::from_raw(&raw mut (*pg_sys::MainLWLockArray.add(21)).lock) };
    // Taken as pg_stat_statements does: it serialises finding or creating the
    // structs (under EXEC_BACKEND every child runs this hook and finds them).
    let _init_guard = init_lock.exclusive();
    // SAFETY: the named tranche holds the 3 LWLocks requested in `reserve`,
    // in shared memory for the server's life, so `add(1)` and `add(2)` stay
    // inside it; GetNamedLWLockTranche raises an ERROR for an unknown name.
    let [generator_lock, horizon_lock, registry_lock] = unsafe {
        let tranche = pg_sys::GetNamedLWLockTranche(TRANCHE_NAME.as_ptr());
        [0, 1, 2].map(|i| Lock::from_raw(&raw mut (*tranche.add(i)).lock))
    };
    let mut found = false;
    // SAFETY: ShmemInitStruct returns a block of size_of::<Shared>() aligned
    // to PG_CACHE_LINE_SIZE (128, enough for Shared's alignment) or raises an
    // ERROR, never null; the name is a 'static C string. AddinShmemInitLock
    // (held) makes this the only process that can find it uninitialised.
    let shared = unsafe {
        pg_sys::ShmemInitStruct(
            SHMEM_NAME.as_ptr(),
            std::mem::size_of::<Shared>(),
            &mut found,
        )
        .cast::<Shared>()
    };
    if !found {
        // SAFETY: `shared` is the new, suitably aligned block of Shared's size
        // (above), written whole before any reference to it is made; no other
        // process attaches before the postmaster forks, after this hook.
        // ConditionVariableInit is given the condition variable's final place.
        unsafe {
            shared.write(Shared::new(generator_lock));
            pg_sys::ConditionVariableInit((*shared).lease_raised.get());
            startup::resume_from_lease(&mut *shared, config);
        }
    }
    // SAFETY: called from this hook under AddinShmemInitLock, each with a lock
    // of the extension's tranche (their contract); `shared` is initialised.
    unsafe {
        horizon::attach(horizon_lock);
        registry::attach(registry_lock);
        state::publish(shared);
    }
}
