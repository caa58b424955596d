-- README.md, "Use": the order has an ID of this server, made now, which
-- the decoders read back in any session time zone.
SELECT 'one_order', count(*) = 1 FROM orders;
SELECT 'node_is_this_servers', bool_and(snowflake_node(id) = (SELECT node_id FROM snowflake_node_info())) FROM orders;
SELECT 'made_just_now', bool_and(snowflake_timestamp(id) BETWEEN now() - interval '1 minute' AND clock_timestamp()) FROM orders;
