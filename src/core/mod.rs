//! The pure core of snowflake_id: everything that decides what an ID is and
//! which ID comes next, with no PostgreSQL in it.
//!
//! The pgrx layer (`crate::pg`, `crate::sql`) reads the
//! settings, places [`generator::SharedState`] in shared memory and supplies
//! the wall clock, the sleep and the lease writer through
//! [`generator::Environment`]. Everything here is unit- and property-tested
//! with `cargo test` and a scripted clock, without a server.

pub mod call_proof;
pub mod config;
pub mod conninfo;
pub mod convert;
pub mod epoch;
pub mod generator;
pub mod horizon;
pub mod instance;
pub mod layout;
pub mod lease;
pub mod lease_wal;
pub mod node_marker;
pub mod public_id;
pub mod registry;
pub mod text_forms;
