-- README.md, "Notes for applications": the generated made_at is the ID's
-- time as this server's epoch setting places it (the STABLE
-- snowflake_timestamp(id) reads the setting, not the session's zone), and
-- the expression index holds the node id.
INSERT INTO events (payload) SELECT 'e' || g FROM generate_series(1, 100) g;
SELECT 'made_at_is_the_ids_time', bool_and(made_at = snowflake_timestamp(id)) FROM events;
SELECT 'made_at_is_now', bool_and(made_at BETWEEN now() - interval '1 minute' AND clock_timestamp()) FROM events;
SELECT 'node_index_holds_the_node', bool_and(snowflake_node(id, '2025-01-01 00:00:00+00', 10, 12) = snowflake_node(id)) FROM events;
SET enable_seqscan = off;
SELECT 'node_index_is_used', count(*) = 100 FROM events WHERE snowflake_node(id, '2025-01-01 00:00:00+00', 10, 12) = 9;
