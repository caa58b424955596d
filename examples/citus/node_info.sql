-- examples/citus/node_info.sql: run on the coordinator after coordinator.sql.
-- Defines the view shard_node_info, one row per Citus node (the coordinator
-- and every active worker, named host:port), read with
-- run_command_on_all_nodes; examples/sharding/check_nodes.sql then defines
-- the node-id check on top of it. A coordinator never registered with
-- citus_set_coordinator_host is still asked (Citus reports it as node 0). A
-- node that cannot answer shows as "host:port (failed: <error>)" with no
-- node id, and is reported. Workers disabled with citus_disable_node are
-- not asked: check them by hand before enabling them again.
CREATE VIEW shard_node_info AS
SELECT coalesce(n.nodename || ':' || n.nodeport, 'coordinator (not in pg_dist_node)')
         || CASE WHEN r.success THEN '' ELSE format(' (failed: %s)', r.result) END AS shard,
       i.node_id, i.epoch, i.time_bits, i.node_bits, i.sequence_bits, i.in_recovery, i.system_identifier
FROM run_command_on_all_nodes($$SELECT row_to_json(i)::text FROM snowflake_node_info() i$$) r
LEFT JOIN pg_dist_node n ON n.nodeid = r.nodeid
LEFT JOIN LATERAL json_populate_record(NULL::snowflake_node_info,
                                       CASE WHEN r.success THEN r.result::json END) i ON true;
