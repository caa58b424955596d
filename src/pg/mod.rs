//! Everything that touches PostgreSQL's machinery and nothing that defines
//! SQL: the SQL functions in [`crate::sql`] are thin adapters over these
//! modules and [`crate::core`].
//!
//! A ladder, not a web: each room imports only rooms listed after it (the
//! `house` test in `src/house.rs` reads the imports and fails on a cycle;
//! `CONTRIBUTING.md` draws the floors). Top down:
//! - [`backend`]: the backend's view of the generator: may it issue, the
//!   generator's environment, issuing;
//! - [`lease_worker`]: the background worker that extends the lease;
//! - [`registry::renewal`]: the registry worker's renewals, and the
//!   resumption of a claim the registry's fence ended;
//! - [`registry::signing`]: what proves a call the claim's (the secrets a
//!   claim names and reveals, the signed calls' proofs);
//! - [`registry::connect`]: a connection to the registry: verified, and
//!   to the registry this server claimed from;
//! - [`registry::worker`]: the registry's background worker, which
//!   claims and releases the node id, over
//!   [`registry::answer`] (what it asks, which answers it accepts) and
//!   [`registry::identity`] (a claim's secret, the host, this data
//!   directory's last claim);
//! - [`registry::status`]: the claim as `snowflake_stats()` and the holds
//!   show it;
//! - [`shmem`]: the shared-memory hooks: every room's space and locks
//!   requested, each room's struct created at start;
//! - [`accept`]: accepting a configuration change (or a copy, or an
//!   upgrade whose lease was left behind);
//! - [`rmgr`]: the custom WAL resource manager (C callbacks), over
//!   [`replay`]: redo of the lease records;
//! - [`lease`]: the lease: extended ahead of need, durable (file and WAL)
//!   before it is raised, within the registry's grant;
//! - [`horizon::xact`]: the read horizon's transaction callback, over
//!   [`horizon`]: its slots and prepared-transaction table in shared
//!   memory;
//! - [`startup`]: the verdict at start: resume after the lease, or hold a
//!   copy or an upgrade;
//! - [`state`]: the generator's place in shared memory, why it is held,
//!   and its readers;
//! - [`registry`]: the claimed node id, its grant (the lease's fence), and
//!   [`registry::libpq`], the registry worker's connection, over
//!   [`registry::libpq_api`], the libpq functions loaded at run time;
//! - [`bgworker`]: what the background workers share as processes
//!   (signals, their loop's checks, restart after a SIGTERM of their own);
//! - [`wal`]: the lease records written to the WAL, and the wait for
//!   synchronous standbys;
//! - [`public_keys`]: the key ring of public IDs, read from its file and
//!   kept per backend;
//! - [`settings`]: the `snowflake_id.*` settings and the validated
//!   configuration (held once);
//! - [`clock`]: the wall clock, and ID times as timestamps;
//! - [`errors`]: the one table from every error to its SQLSTATE, message
//!   and hint, and `ereport`; the labels of every hold;
//! - [`issued`], [`message`], [`lwlock`]: the per-backend count of issued
//!   IDs, the text buffers in shared memory, and the one LWLock guard.

pub mod accept;
pub mod backend;
pub mod bgworker;
pub mod clock;
pub mod errors;
pub mod horizon;
pub mod issued;
pub mod lease;
pub mod lease_worker;
pub mod lwlock;
pub mod message;
pub mod public_keys;
pub mod registry;
pub mod replay;
pub mod rmgr;
pub mod settings;
pub mod shmem;
pub mod startup;
pub mod state;
pub mod wal;
