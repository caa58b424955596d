//! What a sharded or replicated deployment needs to check its nodes: this
//! node's identity as a generator (node id, epoch, layout), whether it is in
//! recovery, and which cluster it is, as one row that a router or a
//! monitoring query can read remotely.
//!
//! The function `snowflake_node_info()` and the view of the same name (for
//! postgres_fdw, whose foreign tables need a relation on the remote side)
//! are all the extension ships; the checks that compare every shard run on a
//! router and live in `examples/sharding/` (PL/Proxy and postgres_fdw are
//! optional, so the extension does not depend on either).

use crate::pg::backend::ready;
use crate::pg::clock::timestamp_of;
use pgrx::prelude::*;

/// This node's node id, epoch, layout, whether it is in recovery (a standby
/// cannot issue IDs) and the cluster's system identifier (a standby has its
/// primary's).
// pgrx needs the row type spelled out here (no alias for `name!` tuples).
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
fn snowflake_node_info() -> TableIterator<
    'static,
    (
        name!(node_id, Option<i32>),
        name!(epoch, TimestampWithTimeZone),
        name!(time_bits, i32),
        name!(node_bits, i32),
        name!(sequence_bits, i32),
        name!(in_recovery, bool),
        name!(system_identifier, i64),
    ),
> {
    let (config, _) = ready();
    let layout = &config.layout;
    // SAFETY: plain reads of server state, valid in any backend: neither
    // function takes an argument, and both read shared memory this backend
    // is attached to (pg_control's copy, the recovery state).
    let (in_recovery, system_identifier) =
        unsafe { (pg_sys::RecoveryInProgress(), pg_sys::GetSystemIdentifier()) };
    TableIterator::once((
        crate::pg::registry::node_id(config).map(|n| n as i32),
        timestamp_of(config, 0),
        layout.time_bits() as i32,
        layout.node_bits() as i32,
        layout.sequence_bits() as i32,
        in_recovery,
        // Stored as the bits of a uint64, as pg_control_system() shows it.
        system_identifier as i64,
    ))
}

extension_sql!(
    r#"
-- A relation for postgres_fdw foreign tables and monitoring tools that read
-- tables; readable by everyone, like the function.
CREATE VIEW snowflake_node_info AS SELECT * FROM snowflake_node_info();
GRANT SELECT ON snowflake_node_info TO PUBLIC;
"#,
    name = "node_info_view",
    requires = [snowflake_node_info]
);

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    // The test server preloads the extension with node id 42.
    use crate::test_support::holds;
    use pgrx::prelude::*;

    #[pg_test]
    fn node_info_reports_node_layout_recovery_and_system_identifier() {
        assert!(holds(
            "SELECT node_id = 42 AND epoch = '2025-01-01 00:00:00+00' AND time_bits = 41
                AND node_bits = 10 AND sequence_bits = 12 AND NOT in_recovery
                AND system_identifier = (SELECT system_identifier FROM pg_control_system())
             FROM snowflake_node_info()"
        ));
    }

    #[pg_test]
    fn node_info_view_matches_the_function_and_is_public() {
        assert!(holds(
            "SELECT (SELECT row(v.*)::text FROM snowflake_node_info v) = (SELECT row(f.*)::text FROM snowflake_node_info() f)"
        ));
        assert!(holds(
            "SELECT has_table_privilege('public', 'snowflake_node_info', 'SELECT')"
        ));
    }

    #[pg_test]
    fn node_info_agrees_with_stats() {
        assert!(holds(
            "SELECT i.node_id = s.node_id AND i.epoch = s.epoch AND i.time_bits = s.time_bits
                AND i.node_bits = s.node_bits AND i.sequence_bits = s.sequence_bits
             FROM snowflake_node_info() i, snowflake_stats() s"
        ));
    }
}
