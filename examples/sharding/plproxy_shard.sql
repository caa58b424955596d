-- examples/sharding/plproxy_shard.sql: run on every shard after shard.sql.
-- The functions PL/Proxy calls. Names are schema-qualified, so they work
-- whatever the search_path of the router's connection.
CREATE FUNCTION insert_order(customer text, item text) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO public.orders (customer, item) VALUES ($1, $2) RETURNING id
$$;

CREATE FUNCTION orders_of(customer text)
RETURNS TABLE (id bigint, customer text, item text, created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT o.id, o.customer, o.item, o.created_at FROM public.orders o WHERE o.customer = $1
$$;

-- Every ID of this shard, with the node id the shard issues them under.
CREATE FUNCTION all_order_ids() RETURNS TABLE (node_id int, id bigint)
LANGUAGE sql STABLE AS $$
    SELECT i.node_id, o.id FROM public.orders o, public.snowflake_node_info() i
$$;
