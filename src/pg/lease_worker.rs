//! The background worker that extends the lease ahead of need, so that a
//! backend almost never waits for the disk.
//!
//! It computes the new lease from the generator's own state, never from its
//! own clock: a background worker may see another clock than the backends
//! (under libfaketime on PostgreSQL 15, processes the postmaster forks from
//! its signal handlers see the real time), and a lease pushed far ahead by a
//! wrong clock would put the generator in the drift-error zone after a
//! restart. It only writes while IDs are being issued: an idle generator's
//! lease is left alone and the first backend after the pause extends it.

use crate::core::generator::LEASE_WINDOW_MS;
use crate::pg::settings;
use crate::pg::shmem::{self, Blocked};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;
use std::time::Duration;

/// How often the worker looks at the generator.
const NAPTIME: Duration = Duration::from_millis(LEASE_WINDOW_MS / 4);

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

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_lease_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let (Some(config), Some(shared)) = (settings::config(), shmem::shared()) else {
        return;
    };
    let layout = config.layout;
    let mut last_seen = shared.generator.last_time_ms(&layout);
    let mut failing = false;
    while BackgroundWorker::wait_latch(Some(NAPTIME)) {
        if shared.blocked() != Blocked::No || config.node_id.is_none() {
            continue;
        }
        let time = shared.generator.last_time_ms(&layout);
        let active = time != last_seen;
        last_seen = time;
        if active {
            match shared.extend_lease_ahead(config) {
                Ok(_) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    warning!("snowflake_id lease worker: {e}");
                }
                Err(_) => {}
            }
        }
    }
}
