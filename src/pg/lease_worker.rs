//! The background worker that extends the lease ahead of need, so that a
//! backend almost never waits for the disk, and, with
//! `snowflake_id.lease_sync = on`, the one process that extends it at all:
//! it waits for the synchronous standbys to flush each lease record before
//! raising the lease, while backends that need more sleep on a condition
//! variable ([`crate::pg::shmem::Shared::extend_lease`]).
//!
//! It computes the new lease from the generator's own state, never from its
//! own clock: a background worker may see another clock than the backends
//! (under libfaketime on PostgreSQL 15, processes the postmaster forks from
//! its signal handlers see the real time), and a lease pushed far ahead by a
//! wrong clock would put the generator in the drift-error zone after a
//! restart. It only writes while IDs are being issued or a backend asked:
//! an idle generator's lease is left alone and the first backend after the
//! pause extends it.
//!
//! Signals are PostgreSQL's own: SIGTERM is `die`, so that a wait for a
//! synchronous standby (`SyncRepWaitForLSN`) ends at shutdown, and SIGHUP
//! reloads the configuration (`lease_sync` may change).

use crate::core::generator::LEASE_WINDOW_MS;
use crate::pg::registry::{self, worker::ClaimWorker};
use crate::pg::settings;
use crate::pg::shmem::{self, Blocked};
use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::c_int;
use std::time::Duration;

/// How often the worker looks at the generator.
const NAPTIME: Duration = Duration::from_millis(LEASE_WINDOW_MS / 4);

// PostgreSQL's signal handlers, as plain C functions (pgrx's `pg_sys`
// wraps every function in an error guard, which a signal handler must not
// be).
#[cfg(not(feature = "pg19"))]
unsafe extern "C-unwind" {
    fn die(signal: c_int);
    fn SignalHandlerForConfigReload(signal: c_int);
}
// PostgreSQL 19 hands every handler the signal's origin too.
#[cfg(feature = "pg19")]
unsafe extern "C-unwind" {
    fn die(signal: c_int, info: *const pg_sys::pg_signal_info);
    fn SignalHandlerForConfigReload(signal: c_int, info: *const pg_sys::pg_signal_info);
}

pub fn register() {
    BackgroundWorkerBuilder::new("snowflake_id lease")
        .set_type("snowflake_id lease")
        .set_function("snowflake_id_lease_worker_main")
        .set_library("snowflake_id")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(5)))
        .load();
}

fn shutdown_requested() -> bool {
    // SAFETY: ProcDiePending is a sig_atomic_t global that the SIGTERM handler
    // (`die`) sets in this same single-threaded process; a volatile read is
    // how PostgreSQL reads it.
    unsafe { std::ptr::read_volatile(&raw const pg_sys::ProcDiePending) != 0 }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_lease_worker_main(_arg: pg_sys::Datum) {
    // SAFETY: the background worker's start, in its own single-threaded
    // process with signals still blocked: `die` and
    // SignalHandlerForConfigReload are PostgreSQL's handlers, declared above
    // with their C signatures (per version), installed before signals are
    // unblocked as bgworker.c asks. SetConfigOption gets 'static C strings
    // and changes only this process's synchronous_commit.
    unsafe {
        #[cfg(not(any(feature = "pg18", feature = "pg19")))]
        {
            pg_sys::pqsignal(pg_sys::SIGTERM as c_int, Some(die));
            pg_sys::pqsignal(pg_sys::SIGHUP as c_int, Some(SignalHandlerForConfigReload));
        }
        #[cfg(any(feature = "pg18", feature = "pg19"))]
        {
            pg_sys::pqsignal_be(pg_sys::SIGTERM as c_int, Some(die));
            pg_sys::pqsignal_be(pg_sys::SIGHUP as c_int, Some(SignalHandlerForConfigReload));
        }
        pg_sys::BackgroundWorkerUnblockSignals();
        // The lease records wait for the remote flush, whatever the
        // server's default synchronous_commit (`local` or `off` would make
        // the wait return at once).
        pg_sys::SetConfigOption(
            c"synchronous_commit".as_ptr(),
            c"on".as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
        );
    }
    let (Some(config), Some(shared)) = (settings::config(), shmem::shared()) else {
        return;
    };
    // SAFETY: MyLatch is a process-local global; in a background worker with
    // shared memory access it is the latch of its PGPROC, in shared memory,
    // so backends may set it (and it stays valid after this worker exits).
    shared.set_worker_latch(unsafe { pg_sys::MyLatch });
    let layout = config.layout;
    let mut last_seen = shared.generator.last_time_ms(&layout);
    let mut failing = false;
    // The node id's claim, renewal and release, in registry mode.
    let mut claim = registry::enabled().then(ClaimWorker::new);
    while !shutdown_requested() {
        // SAFETY: ConfigReloadPending is a sig_atomic_t global that the SIGHUP
        // handler sets in this same single-threaded process; volatile accesses
        // are how PostgreSQL reads and clears it, and ProcessConfigFile is how a
        // background worker applies a reload, between two rounds of work.
        unsafe {
            if std::ptr::read_volatile(&raw const pg_sys::ConfigReloadPending) != 0 {
                std::ptr::write_volatile(&raw mut pg_sys::ConfigReloadPending, 0);
                pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
            }
        }
        if let Some(claim) = claim.as_mut() {
            claim.tick(config, shared);
        }
        if shared.blocked() == Blocked::No && registry::node_id(config).is_some() {
            let time = shared.generator.last_time_ms(&layout);
            let active = time != last_seen;
            last_seen = time;
            match shared.extend_lease_ahead(config, active) {
                Ok(_) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    warning!("snowflake_id lease worker: {e}");
                }
                Err(_) => {}
            }
        }
        if shutdown_requested() {
            break;
        }
        // SAFETY: MyLatch is this process's own latch; WL_EXIT_ON_PM_DEATH ends
        // the worker rather than wait past the postmaster.
        unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                NAPTIME.as_millis() as _,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
    }
    shared.set_worker_latch(std::ptr::null_mut());
    if let Some(claim) = claim.as_mut() {
        claim.release(config, shared);
    }
}
