//! The SQL surface: one module per group of functions, each a thin adapter
//! between SQL types and [`crate::pg`] / [`crate::core`]. No module here
//! calls another; what two of them share lives in `pg/` or `core/`.
//!
//! - [`issue`]: the next ID, `snowflake_next()`;
//! - [`batch`]: many IDs at once, `snowflake_next_batch(n)` and
//!   `snowflake_next_batch_array(n)`;
//! - [`decode`]: reading IDs back, `snowflake_decode`, `snowflake_timestamp`,
//!   `snowflake_node`, `snowflake_sequence`, `snowflake_from_timestamp`;
//! - [`horizon`]: the commit-safe read horizon, `snowflake_horizon()`;
//! - [`text_forms`]: IDs as text, `snowflake_encode` and `snowflake_parse`;
//! - [`introspection`]: the generator's counters, `snowflake_stats()`;
//! - [`configuration`]: accepting a deliberate change of the settings,
//!   `snowflake_accept_configuration()`;
//! - [`convert`]: moving an existing column to snowflake IDs,
//!   `snowflake_convert_column(...)`;
//! - [`cluster`]: what checks of sharded and replicated deployments read,
//!   `snowflake_node_info()` and its view;
//! - [`snowflake_type`]: the `snowflake` type, a `bigint` whose JSON is a
//!   string (SQL only: PostgreSQL's own `int8` functions do its work);
//! - [`public_id`]: public IDs, `snowflake_public`, `snowflake_private`,
//!   their text forms and `snowflake_public_keys()`.
//!
//! The SQL that pgrx generates from these is frozen in
//! `sql/snowflake_id--<version>.sql` (see `sql/README.md`); a change of the
//! surface is a change of that file.

use pgrx::prelude::*;

pub mod batch;
pub mod cluster;
pub mod configuration;
pub mod convert;
pub mod decode;
pub mod horizon;
pub mod introspection;
pub mod issue;
pub mod public_id;
pub mod snowflake_type;
pub mod text_forms;

extension_sql!(
    r#"
-- Fail CREATE EXTENSION at once when the library is not preloaded, instead
-- of at the first call.
SELECT snowflake_stats();
REVOKE ALL ON FUNCTION snowflake_accept_configuration() FROM PUBLIC;
"#,
    name = "preload_check",
    finalize
);
