-- examples/sharding/check_nodes.sql on made-up shards: every kind of problem
-- it reports, naming the shards. (The integration tests run it through real
-- PL/Proxy and postgres_fdw routers, a Citus coordinator and a pair of
-- logical-replication writers.)
SET TimeZone = 'UTC';
CREATE TABLE shard_node_info (shard text, node_id int, epoch timestamptz, time_bits int,
    node_bits int, sequence_bits int, in_recovery boolean, system_identifier bigint);
\i examples/sharding/check_nodes.sql
-- distinct node ids, one layout: nothing
INSERT INTO shard_node_info VALUES
    ('a', 1, '2025-01-01+00', 41, 10, 12, false, 11),
    ('b', 2, '2025-01-01+00', 41, 10, 12, false, 12),
    ('c', 3, '2025-01-01+00', 41, 10, 12, false, 13);
SELECT * FROM snowflake_node_check;
-- two shards with node id 2, a standby of a (same system identifier: not a
-- duplicate, but not a shard the router can write to),
-- one shard without a node id, one with another layout
INSERT INTO shard_node_info VALUES
    ('d', 2, '2025-01-01+00', 41, 10, 12, false, 14),
    ('e', 1, '2025-01-01+00', 41, 10, 12, true, 11),
    ('f', NULL, '2025-01-01+00', 41, 10, 12, false, 16),
    ('g', 7, '2026-01-01+00', 41, 10, 12, false, 17);
SELECT * FROM snowflake_node_check ORDER BY problem, node_id, shards;
-- a standby of another cluster with node id 3, and a clone of b promoted as
-- a second primary (same system identifier, both not in recovery)
DELETE FROM shard_node_info WHERE shard IN ('d', 'f', 'g');
INSERT INTO shard_node_info VALUES
    ('h', 3, '2025-01-01+00', 41, 10, 12, true, 99),
    ('i', 2, '2025-01-01+00', 41, 10, 12, false, 12);
SELECT problem, node_id, shards FROM snowflake_node_check ORDER BY problem, node_id, shards;
-- a shard that did not answer (Citus's node_info.sql keeps it, with the
-- error): no_answer, and neither node_id_unset nor a layout of its own
INSERT INTO shard_node_info VALUES
    ('j (failed: connection refused)', NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT problem, node_id, shards FROM snowflake_node_check ORDER BY problem, node_id, shards;
