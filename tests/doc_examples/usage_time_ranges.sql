-- docs/usage.md, "Time ranges": rows made at known times (IDs from their
-- times), then the example's queries: the last hour finds the recent row,
-- the UTC day finds its three rows, in any session zone.
CREATE TABLE orders (id bigint PRIMARY KEY, item text NOT NULL);
INSERT INTO orders
SELECT snowflake_from_timestamp(t::timestamptz), t
FROM (VALUES ('2026-11-19 23:59:59.999+00'), ('2026-11-20 00:00:00+00'), ('2026-11-20 12:00:00+00'),
             ('2026-11-20 23:59:59.999+00'), ('2026-11-21 00:00:00+00')) v(t);
INSERT INTO orders VALUES (snowflake_next(), 'now');
-- the example runs here
SELECT 'last_hour', array_agg(item) = '{now}' FROM orders WHERE id >= snowflake_from_timestamp(now() - interval '1 hour');
SELECT 'the_utc_day', count(*) = 3 FROM orders
WHERE id >= snowflake_from_timestamp('2026-11-20 00:00:00+00')
  AND id <  snowflake_from_timestamp('2026-11-21 00:00:00+00');
