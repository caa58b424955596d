-- examples/sharding/plproxy_router.sql: run on the router, with the shards'
-- connect strings as psql variables:
--   psql -v shard1='host=10.0.0.1 port=5432 dbname=app' -v shard2='...' -v shard3='...' -f plproxy_router.sql
CREATE EXTENSION IF NOT EXISTS plproxy;

-- One partition per shard. modular_mapping: the partition of a hash is
-- abs(hash % 3); without it PL/Proxy needs a power of 2 partitions.
CREATE SERVER orders_cluster FOREIGN DATA WRAPPER plproxy
    OPTIONS (modular_mapping '1', p0 :'shard1', p1 :'shard2', p2 :'shard3');
-- Required, even when the connect strings carry the user.
CREATE USER MAPPING FOR PUBLIC SERVER orders_cluster;
GRANT USAGE ON FOREIGN SERVER orders_cluster TO PUBLIC;

-- Routed by a hash of the business key; returns the ID the shard issued.
CREATE FUNCTION insert_order(customer text, item text) RETURNS bigint
LANGUAGE plproxy AS $$
    CLUSTER 'orders_cluster';
    RUN ON hashtext(customer);
$$;

CREATE FUNCTION orders_of(customer text)
RETURNS TABLE (id bigint, customer text, item text, created_at timestamptz)
LANGUAGE plproxy AS $$
    CLUSTER 'orders_cluster';
    RUN ON hashtext(customer);
$$;

CREATE FUNCTION all_order_ids() RETURNS TABLE (node_id int, id bigint)
LANGUAGE plproxy AS $$
    CLUSTER 'orders_cluster';
    RUN ON ALL;
$$;

-- What the node-id check needs, from every shard; each shard names itself
-- by the address the router reached it at.
CREATE FUNCTION shard_node_info()
RETURNS TABLE (shard text, node_id int, epoch timestamptz, time_bits int, node_bits int,
               sequence_bits int, in_recovery boolean, system_identifier bigint)
LANGUAGE plproxy AS $$
    CLUSTER 'orders_cluster';
    RUN ON ALL;
    SELECT pg_catalog.format('%s:%s/%s', pg_catalog.host(pg_catalog.inet_server_addr()),
                             pg_catalog.inet_server_port(), pg_catalog.current_database()) AS shard,
           i.node_id, i.epoch, i.time_bits, i.node_bits, i.sequence_bits, i.in_recovery,
           i.system_identifier
    FROM public.snowflake_node_info() i;
$$;
CREATE VIEW shard_node_info AS SELECT * FROM shard_node_info();
