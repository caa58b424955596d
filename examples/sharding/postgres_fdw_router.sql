-- examples/sharding/postgres_fdw_router.sql: run on the router, with each
-- shard's host, port and database, and the user the router connects as, as
-- psql variables:
--   psql -v host1=10.0.0.1 -v port1=5432 -v db1=app -v host2=... (up to db3)
--        -v shard_user=app -v shard_password=secret -f postgres_fdw_router.sql
CREATE EXTENSION IF NOT EXISTS postgres_fdw;

CREATE SERVER shard1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host :'host1', port :'port1', dbname :'db1');
CREATE SERVER shard2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host :'host2', port :'port2', dbname :'db2');
CREATE SERVER shard3 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host :'host3', port :'port3', dbname :'db3');
CREATE USER MAPPING FOR PUBLIC SERVER shard1 OPTIONS (user :'shard_user', password :'shard_password');
CREATE USER MAPPING FOR PUBLIC SERVER shard2 OPTIONS (user :'shard_user', password :'shard_password');
CREATE USER MAPPING FOR PUBLIC SERVER shard3 OPTIONS (user :'shard_user', password :'shard_password');

-- Rows go to the shard chosen by a hash of the business key. The id column
-- is GENERATED on the router: postgres_fdw then sends DEFAULT for it and the
-- shard's snowflake_next() fills it in (a plain column would be sent as an
-- explicit NULL). RETURNING id and SELECT read the shard's ID.
CREATE TABLE orders (
    id         bigint GENERATED ALWAYS AS (NULL::bigint) STORED,
    customer   text NOT NULL,
    item       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
) PARTITION BY HASH (customer);
CREATE FOREIGN TABLE orders_1 PARTITION OF orders FOR VALUES WITH (MODULUS 3, REMAINDER 0)
    SERVER shard1 OPTIONS (schema_name 'public', table_name 'orders');
CREATE FOREIGN TABLE orders_2 PARTITION OF orders FOR VALUES WITH (MODULUS 3, REMAINDER 1)
    SERVER shard2 OPTIONS (schema_name 'public', table_name 'orders');
CREATE FOREIGN TABLE orders_3 PARTITION OF orders FOR VALUES WITH (MODULUS 3, REMAINDER 2)
    SERVER shard3 OPTIONS (schema_name 'public', table_name 'orders');

-- What the node-id check needs: every shard's snowflake_node_info view, as a
-- foreign table that inherits from one local (empty) parent, named by its
-- foreign server. A new shard needs one more CREATE FOREIGN TABLE line.
CREATE TABLE shard_nodes (node_id int, epoch timestamptz, time_bits int, node_bits int,
                          sequence_bits int, in_recovery boolean, system_identifier bigint);
CREATE FOREIGN TABLE shard_nodes_1 () INHERITS (shard_nodes)
    SERVER shard1 OPTIONS (schema_name 'public', table_name 'snowflake_node_info');
CREATE FOREIGN TABLE shard_nodes_2 () INHERITS (shard_nodes)
    SERVER shard2 OPTIONS (schema_name 'public', table_name 'snowflake_node_info');
CREATE FOREIGN TABLE shard_nodes_3 () INHERITS (shard_nodes)
    SERVER shard3 OPTIONS (schema_name 'public', table_name 'snowflake_node_info');
CREATE VIEW shard_node_info AS
SELECT srv.srvname::text AS shard, n.node_id, n.epoch, n.time_bits, n.node_bits,
       n.sequence_bits, n.in_recovery, n.system_identifier
FROM shard_nodes n
JOIN pg_foreign_table ft ON ft.ftrelid = n.tableoid
JOIN pg_foreign_server srv ON srv.oid = ft.ftserver;
