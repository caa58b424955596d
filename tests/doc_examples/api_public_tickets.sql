-- docs/api.md, "Public IDs": the generated public form reads back to the
-- ID, carries key version 1, and is unique (the test cluster has the test
-- key file: tests/integration/doc_examples.sh).
-- the example runs here
INSERT INTO tickets (subject) SELECT 'ticket ' || g FROM generate_series(1, 20) g;
SELECT 'twenty_tickets', count(*) = 20 FROM tickets;
SELECT 'public_reads_back', bool_and(snowflake_private(public_id) = id) FROM tickets;
SELECT 'text_of_key_version_one', bool_and(public_id ~ '^1[0-9A-Za-z]{11}$') FROM tickets;
SELECT 'public_ids_unique', count(DISTINCT public_id) = 20 FROM tickets;
