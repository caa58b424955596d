//! What the extension's background workers share as processes: PostgreSQL's
//! signal handlers (SIGTERM is `die`, SIGHUP reloads the configuration),
//! the checks of their loop, the nap between rounds, and the rule for their
//! end: at a server shutdown a worker finishes its work and exits with
//! status 0; terminated alone while the server runs (an operator's `kill`,
//! a tool that stops stray processes) it exits with status 1, which makes
//! the postmaster start it again after its restart time. (Status 0 would
//! end it for good: PostgreSQL never restarts a worker that exits with 0.)
//!
//! The two workers: "snowflake_id lease" (`lease_worker`: extends the lease
//! ahead) and, with a registry, "snowflake_id registry"
//! (`registry::worker`: claims, renews and releases the node id), apart so
//! that a slow registry never delays a lease extension.

use crate::pg::settings;
use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use std::ffi::c_int;
use std::time::Duration;

/// How long the postmaster waits before it starts a worker again.
pub const RESTART_AFTER: Duration = Duration::from_secs(5);

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

/// The start of a worker's main function: PostgreSQL's handlers for
/// SIGTERM and SIGHUP, then signals unblocked.
pub fn start() {
    // SAFETY: the background worker's start, in its own single-threaded
    // process with signals still blocked: `die` and
    // SignalHandlerForConfigReload are PostgreSQL's handlers, declared above
    // with their C signatures (per version), installed before signals are
    // unblocked as bgworker.c asks.
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
    }
}

/// Whether this worker was sent SIGTERM (the loop's end).
pub fn shutdown_requested() -> bool {
    // SAFETY: ProcDiePending is a sig_atomic_t global that the SIGTERM handler
    // (`die`) sets in this same single-threaded process; a volatile read is
    // how PostgreSQL reads it.
    unsafe { std::ptr::read_volatile(&raw const pg_sys::ProcDiePending) != 0 }
}

/// Applies a configuration reload asked by SIGHUP, between two rounds.
pub fn reload_if_asked() {
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
}

/// Sleeps up to `nap`, or until the latch is set (a backend asks, a signal
/// arrives).
pub fn nap(nap: Duration) {
    // SAFETY: MyLatch is this process's own latch; WL_EXIT_ON_PM_DEATH ends
    // the worker rather than wait past the postmaster.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            nap.as_millis().clamp(1, 60_000) as _,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
}

/// Whether the server is shutting down: the postmaster marks its lock file
/// `stopping` (line 8 of postmaster.pid, LOCK_FILE_LINE_PM_STATUS) when a
/// smart or fast shutdown is asked, before it signals any child; while it
/// runs, the line says `ready` (`standby` on a standby). Anything else, or
/// an unreadable file, is taken as a shutdown: the worker then ends as it
/// did before it could tell.
pub fn server_stopping() -> bool {
    let status = std::fs::read_to_string(settings::data_dir().join("postmaster.pid"))
        .ok()
        .and_then(|pid_file| pid_file.lines().nth(7).map(|line| line.trim().to_string()));
    !matches!(status.as_deref(), Some("ready" | "standby"))
}

/// Registers a worker of this library, started once recovery is over,
/// with shared memory, started again [`RESTART_AFTER`] after it exits
/// with a non-zero status.
pub fn register(name: &str, function: &str) {
    BackgroundWorkerBuilder::new(name)
        .set_type(name)
        .set_function(function)
        .set_library("snowflake_id")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(RESTART_AFTER))
        .load();
}

/// Ends a worker terminated alone while the server runs, so that the
/// postmaster starts it again (exit status 1).
// (proc_exit is declared `-> !` in some versions' bindings, not in others.)
#[allow(unreachable_code)]
pub fn exit_to_be_restarted(worker: &str) -> ! {
    pgrx::warning!(
        "{worker}: terminated while the server runs; PostgreSQL starts it again within {} s",
        RESTART_AFTER.as_secs()
    );
    // SAFETY: proc_exit runs this process's exit callbacks and exits (it
    // never returns); the caller holds no lock and is between two rounds of
    // its work.
    unsafe { pg_sys::proc_exit(1) };
    unreachable!("proc_exit returned")
}
