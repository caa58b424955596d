-- examples/replication/two_writers_node_info.sql: run on either writer, with
-- the other's address as psql variables (the user needs no privilege beyond
-- connecting: snowflake_node_info is readable by everyone):
--   psql -v peer_host=10.0.0.2 -v peer_port=5432 -v peer_db=app \
--        -v peer_user=app -v peer_password=secret -f two_writers_node_info.sql
-- Defines shard_node_info (this server and its peer, through postgres_fdw);
-- examples/sharding/check_nodes.sql then defines the node-id check on it.
-- Foreign tables and views are not published: nothing here replicates.
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER snowflake_peer FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'peer_host', port :'peer_port', dbname :'peer_db');
CREATE USER MAPPING FOR PUBLIC SERVER snowflake_peer
    OPTIONS (user :'peer_user', password :'peer_password');
CREATE FOREIGN TABLE snowflake_peer_node_info (
    node_id int, epoch timestamptz, time_bits int, node_bits int, sequence_bits int,
    in_recovery boolean, system_identifier bigint)
    SERVER snowflake_peer OPTIONS (schema_name 'public', table_name 'snowflake_node_info');
CREATE VIEW shard_node_info AS
SELECT 'this server' AS shard, * FROM snowflake_node_info()
UNION ALL
SELECT format('peer %s:%s', :'peer_host', :'peer_port'), * FROM snowflake_peer_node_info;
