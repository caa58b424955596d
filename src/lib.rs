//! snowflake_id: time-ordered, globally unique 64-bit IDs from inside
//! PostgreSQL.
//!
//! # Design
//!
//! An ID is a positive `bigint`: milliseconds since a configured epoch, the
//! node id of the instance that issued it, and a sequence within the
//! millisecond (41/10/12 bits by default, see [`core::layout`]).
//!
//! One generator serves the whole instance: every backend, database and
//! table. Its state is a single 64-bit word in shared memory holding the last
//! issued `(time, sequence)` pair, advanced by one atomic add per call
//! (a compare-and-swap only when the clock moved on or the call must be
//! checked, [`core::generator`]): no lock, no WAL, no syscall but reading
//! the clock on the hot path. The pair never decreases, so the IDs of one node are unique
//! and strictly increasing in issue order, whatever the concurrency and
//! whatever the wall clock does. How far the IDs may run ahead of the wall
//! clock is bounded (`snowflake_id.max_clock_drift`); a small lease file in
//! the data directory bounds the time of every ID ever issued, so a restart
//! resumes after it even when the clock went back meanwhile.
//!
//! Shared memory can only be reserved while the server starts, so the
//! library must be in `shared_preload_libraries`. `_PG_init` then defines the
//! settings, validates them together (a bad node id or layout stops the
//! server with a message that names the setting), reserves shared memory and
//! registers the background worker that extends the lease ahead of need.
//! Loaded any other way, every function says that the library must be
//! preloaded, and so does `CREATE EXTENSION`.
//!
//! # Modules
//! Three layers, each using only those after it (CONTRIBUTING.md has the
//! picture and the recipes for adding to them):
//! - [`sql`]: the SQL functions, one module per surface, thin adapters;
//! - [`pg`]: PostgreSQL's machinery: settings, clock, shared memory, the
//!   backend's view of the generator, the lease worker, and the one table
//!   from errors to SQLSTATE and hint;
//! - [`core`]: the pure part (layout, epoch, settings, generator state
//!   machine, lease file, text forms, the column-conversion planner),
//!   tested without a server.
//!
//! This file only wires them together and holds `_PG_init`.

use pgrx::prelude::*;

pub mod core;
mod pg;
mod sql;

#[cfg(test)]
mod house;
#[cfg(any(test, feature = "pg_test"))]
mod test_support;

::pgrx::pg_module_magic!(name, version);

/// Called when the library is loaded: at server start when preloaded.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // Loaded into a backend on demand (not preloaded): shared memory can no
    // longer be reserved. Define nothing; every function reports it.
    // SAFETY: a plain bool global of this single-threaded process, set by
    // PostgreSQL around the loading of shared_preload_libraries.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        // pg_upgrade's check that the new cluster can load the library.
        // SAFETY: plain bool globals of this single-threaded process, set when
        // it started.
        if unsafe { pg_sys::IsBinaryUpgrade && pg_sys::IsUnderPostmaster } {
            pg::startup::note_binary_upgrade();
        }
        return;
    }
    pg::settings::define();
    pg::settings::validate_or_stop();
    pg::shmem::request();
    pg::horizon::xact::register();
    pg::rmgr::register();
    // pg_upgrade's own starts of the old and the new cluster (binary-upgrade
    // mode) issue no ID, and a lease or a claim written there would be taken
    // for the upgraded cluster's own at its first real start: no workers.
    // SAFETY: a plain bool global of this single-threaded process, set from
    // the command line before shared_preload_libraries is loaded.
    if !unsafe { pg_sys::IsBinaryUpgrade } {
        pg::lease_worker::register();
        if pg::registry::enabled() {
            pg::registry::worker::register();
        }
    }
}

#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    /// The test server preloads the extension with node id 42.
    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![
            "shared_preload_libraries = 'snowflake_id'",
            "snowflake_id.node_id = 42",
            "max_parallel_workers_per_gather = 0",
        ]
    }
}
