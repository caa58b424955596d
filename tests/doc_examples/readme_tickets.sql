-- README.md, "Notes for applications": a table keyed by the type with a
-- public form of key version 1 (the test cluster has the test key file).
-- the example runs here
INSERT INTO tickets (subject) SELECT 'ticket ' || g FROM generate_series(1, 20) g;
SELECT 'id_is_a_json_string', bool_and(jsonb_typeof(to_jsonb(t) -> 'id') = 'string') FROM tickets t;
SELECT 'public_reads_back', bool_and(snowflake_private(public_id) = id) FROM tickets;
SELECT 'text_of_key_version_one', bool_and(public_id ~ '^1[0-9A-Za-z]{11}$') FROM tickets;
