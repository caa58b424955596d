-- docs/usage.md, "Decoding": the generated column added with the epoch
-- literal holds each ID's time as this server's setting places it.
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text NOT NULL);
INSERT INTO orders (item) SELECT 'item ' || g FROM generate_series(1, 50) g;
-- the example runs here
INSERT INTO orders (item) SELECT 'later ' || g FROM generate_series(1, 50) g;
SELECT 'made_at_is_the_ids_time', bool_and(made_at = snowflake_timestamp(id)) AND count(*) = 100 FROM orders;
SELECT 'made_at_is_now', bool_and(made_at BETWEEN now() - interval '1 minute' AND clock_timestamp()) FROM orders;
