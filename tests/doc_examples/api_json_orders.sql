-- docs/api.md, "JSON that keeps every digit": a table keyed by the type
-- gives its IDs to JSON as strings, exactly.
SELECT 'one_order', count(*) = 1 FROM orders;
SELECT 'id_is_of_the_type', bool_and(pg_typeof(id) = 'snowflake'::regtype) FROM orders;
SELECT 'json_id_is_a_string', bool_and(jsonb_typeof(to_jsonb(o) -> 'id') = 'string') FROM orders o;
SELECT 'json_id_is_exact', bool_and(row_to_json(o)::jsonb ->> 'id' = o.id::text) FROM orders o;
SELECT 'id_is_this_servers', bool_and(snowflake_node(id) = (SELECT node_id FROM snowflake_node_info())) FROM orders;
