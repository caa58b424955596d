-- examples/replication/two_writers_a.sql: run on the first writer (A) after
-- two_writers_b.sql, with B's address as psql variables:
--   psql -v b_conninfo='host=10.0.0.2 port=5432 dbname=app user=repl' -f two_writers_a.sql
-- A already has everything B has (B started as A's copy): copy_data = false.
CREATE SUBSCRIPTION from_b CONNECTION :'b_conninfo' PUBLICATION writers_b
    WITH (origin = none, copy_data = false);
