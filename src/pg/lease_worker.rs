//! The background worker that extends the lease ahead of need, so that a
//! backend almost never waits for the disk, and, with
//! `snowflake_id.lease_sync = on`, the one process that extends it at all:
//! it waits for the synchronous standbys to flush each lease record before
//! raising the lease, while backends that need more sleep on a condition
//! variable ([`crate::pg::lease`]).
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
//! Signals are PostgreSQL's own ([`bgworker`]): SIGTERM is `die`, so that
//! a wait for a synchronous standby (`SyncRepWaitForLSN`) ends at shutdown,
//! and SIGHUP reloads the configuration (`lease_sync` may change). It talks
//! to no registry (the registry worker does), so a slow registry never
//! delays a lease extension.

use crate::core::generator::LEASE_WINDOW_MS;
use crate::pg::bgworker;
use crate::pg::registry;
use crate::pg::settings;
use crate::pg::state::{self, Blocked};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::time::Duration;

/// How often the worker looks at the generator.
const NAPTIME: Duration = Duration::from_millis(LEASE_WINDOW_MS / 4);

pub fn register() {
    bgworker::register("snowflake_id lease", "snowflake_id_lease_worker_main");
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_lease_worker_main(_arg: pg_sys::Datum) {
    bgworker::start();
    // SAFETY: SetConfigOption gets 'static C strings and changes only this
    // process's synchronous_commit, at its start.
    unsafe {
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
    let (Some(config), Some(shared)) = (settings::config(), state::shared()) else {
        return;
    };
    // SAFETY: MyLatch is a process-local global; in a background worker with
    // shared memory access it is the latch of its PGPROC, in shared memory,
    // so backends may set it (and it stays valid after this worker exits).
    shared.set_worker_latch(unsafe { pg_sys::MyLatch });
    let layout = config.layout;
    let mut last_seen = shared.generator.last_time_ms(&layout);
    let mut failing = false;
    while !bgworker::shutdown_requested() {
        bgworker::reload_if_asked();
        if shared.blocked() == Blocked::No && registry::node_id(config).is_some() {
            let time = shared.generator.last_time_ms(&layout);
            let active = time != last_seen;
            last_seen = time;
            match shared
                .extend_lease_ahead(config, active)
                .and_then(|_| shared.record_ended_allowance(config))
            {
                Ok(_) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    warning!("snowflake_id lease worker: {e}");
                }
                Err(_) => {}
            }
        }
        if bgworker::shutdown_requested() {
            break;
        }
        bgworker::nap(NAPTIME);
    }
    shared.set_worker_latch(std::ptr::null_mut());
    if !bgworker::server_stopping() {
        // A SIGTERM of this worker alone: the server goes on, so the worker
        // must come back (backends extend the lease themselves meanwhile,
        // or, with lease_sync = on, wait for it: see extend_lease).
        bgworker::exit_to_be_restarted("snowflake_id lease worker");
    }
}
