-- examples/replication/two_writers_b.sql: run on the second writer (B) once
-- pg_createsubscriber has made it a subscriber of A (subscription from_a)
-- and it runs with its own snowflake_id.node_id. B takes writes from here on
-- and publishes them; origin = none keeps each row from going back to the
-- server it came from.
SELECT snowflake_accept_configuration();  -- B was held as a copy of A (55000) until now
ALTER SUBSCRIPTION from_a SET (origin = none);
CREATE PUBLICATION writers_b FOR ALL TABLES;
