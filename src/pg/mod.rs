//! Everything that touches PostgreSQL's machinery and nothing that defines
//! SQL: the SQL functions in [`crate::sql`] are thin adapters over these
//! modules and [`crate::core`].
//!
//! The modules, each depending only on those above it (no cycle):
//! - [`errors`]: the one table from every error to its SQLSTATE, message
//!   and hint, and `ereport`;
//! - [`clock`]: the wall clock, and ID times as timestamps;
//! - [`settings`]: the `snowflake_id.*` settings and the validated
//!   configuration (held once);
//! - [`bgworker`]: what the background workers share as processes
//!   (signals, their loop's checks, restart after a SIGTERM of their own);
//! - [`wal`]: the lease records written to the WAL, and the wait for
//!   synchronous standbys;
//! - [`registry`]: the node id claimed from a registry, its grant (the
//!   lease's fence) and the registry worker's claim, renewal and release,
//!   over the server's own libpq;
//! - [`horizon`]: the read horizon's slots and prepared-transaction table
//!   in shared memory, and its transaction callback;
//! - [`shmem`]: the generator's place in shared memory, the lease (file and
//!   WAL record), its redo, and accepting a configuration change;
//! - [`rmgr`]: the custom WAL resource manager: redo and descriptions of
//!   the lease records;
//! - [`backend`]: the backend's view of the generator: may it issue, the
//!   generator's environment, issuing;
//! - [`lease_worker`]: the background worker that extends the lease.
//!
//! (The registry's own background worker, which claims, renews and
//! releases the node id, is [`registry::worker`].)

pub mod backend;
pub mod bgworker;
pub mod clock;
pub mod errors;
pub mod horizon;
pub mod lease_worker;
pub mod registry;
pub mod rmgr;
pub mod settings;
pub mod shmem;
pub mod wal;
