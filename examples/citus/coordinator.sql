-- examples/citus/coordinator.sql: run on the coordinator, once every node
-- (the coordinator and each worker) runs with
--   shared_preload_libraries = 'citus,snowflake_id'
--   snowflake_id.node_id = <its own>
-- and has run CREATE EXTENSION citus in this database. The nodes' addresses
-- are psql variables:
--   psql -v coordinator_host=10.0.0.1 -v coordinator_port=5432
--        -v worker1_host=10.0.0.2 -v worker1_port=5432
--        -v worker2_host=10.0.0.3 -v worker2_port=5432 -f coordinator.sql
-- Registering the coordinator lets the workers run queries (and issue IDs)
-- too, and names it host:port in the node-id check.
SELECT citus_set_coordinator_host(:'coordinator_host', :coordinator_port);
SELECT citus_add_node(:'worker1_host', :worker1_port);
SELECT citus_add_node(:'worker2_host', :worker2_port);

-- Citus creates the extension on every worker as well.
CREATE EXTENSION IF NOT EXISTS snowflake_id;

-- Distributed by the business key; the ID is part of the primary key
-- (Citus requires the distribution column in every unique constraint).
CREATE TABLE orders (
    id         bigint NOT NULL DEFAULT snowflake_next(),
    customer   text NOT NULL,
    item       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (customer, id)
);
SELECT create_distributed_table('orders', 'customer');
