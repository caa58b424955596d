-- examples/sharding/check_nodes.sql: run after a file that defines the view
-- shard_node_info, one row per server: on the router after
-- plproxy_router.sql or postgres_fdw_router.sql, on a Citus coordinator
-- after examples/citus/node_info.sql, on a logical-replication writer after
-- examples/replication/two_writers_node_info.sql. Defines
-- snowflake_node_check: one row per problem, naming the servers ("shards");
-- no rows when all is well.
--   SELECT * FROM snowflake_node_check;
CREATE VIEW snowflake_node_check AS
WITH s AS (SELECT * FROM shard_node_info),
layouts AS (SELECT count(DISTINCT (epoch, time_bits, node_bits, sequence_bits)) AS n FROM s WHERE epoch IS NOT NULL)
-- Two servers with the same node id issue colliding IDs, unless they are a
-- primary and its standbys (one system identifier, one server not in recovery).
SELECT 'duplicate_node_id' AS problem, node_id, array_agg(shard ORDER BY shard) AS shards,
       format('%s shards have node id %s and are not one primary and its standbys: their IDs collide (a standby''s once it is promoted); give each a distinct snowflake_id.node_id',
              count(*), node_id) AS detail
FROM s WHERE node_id IS NOT NULL GROUP BY node_id
HAVING count(*) FILTER (WHERE NOT in_recovery) > 1 OR count(DISTINCT system_identifier) > 1
UNION ALL
-- IDs of different layouts or epochs can collide even with distinct node ids.
SELECT 'layout_mismatch', NULL, array_agg(shard ORDER BY shard),
       format('epoch %s, %s time / %s node / %s sequence bits on these shards; the shards use %s different layouts',
              epoch, time_bits, node_bits, sequence_bits, (SELECT n FROM layouts))
FROM s WHERE epoch IS NOT NULL AND (SELECT n FROM layouts) > 1 GROUP BY epoch, time_bits, node_bits, sequence_bits
UNION ALL
SELECT 'node_id_unset', NULL, array_agg(shard ORDER BY shard),
       'snowflake_next() fails on these shards until snowflake_id.node_id is set'
FROM s WHERE node_id IS NULL AND epoch IS NOT NULL HAVING count(*) > 0
UNION ALL
-- (A shard that did not answer has no layout: Citus's node_info.sql keeps it.)
SELECT 'no_answer', NULL, array_agg(shard ORDER BY shard),
       'these shards did not answer: the check cannot vouch for them; bring them back and check again'
FROM s WHERE epoch IS NULL HAVING count(*) > 0
UNION ALL
SELECT 'in_recovery', NULL, array_agg(shard ORDER BY shard),
       'these shards are standbys: snowflake_next() refuses on them; point the router at their primaries (Citus: citus_update_node)'
FROM s WHERE in_recovery HAVING count(*) > 0;
