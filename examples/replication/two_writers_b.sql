-- examples/replication/two_writers_b.sql: run on the second writer (B) once
-- pg_createsubscriber has made it a subscriber of A (subscription from_a)
-- and it runs with its own snowflake_id.node_id. It publishes what B writes;
-- origin = none keeps each row from going back to the server it came from.
-- Send writes to B only once A has subscribed (two_writers_a.sql, with
-- copy_data = false): a row written on B before would never reach A.
SELECT snowflake_accept_configuration();  -- B was held as a copy of A (55000) until now
ALTER SUBSCRIPTION from_a SET (origin = none);
CREATE PUBLICATION writers_b FOR ALL TABLES;
