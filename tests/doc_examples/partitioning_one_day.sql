-- docs/partitioning.md, "Maintenance and queries": the IMMUTABLE bounds
-- with a literal epoch are the bounds this server's epoch gives (the
-- STABLE forms read the setting), in any session zone, and count the rows
-- of that UTC day: 3 of 5 (one the millisecond before, one at the next
-- day's start).
CREATE TABLE events (id bigint PRIMARY KEY, payload text NOT NULL);
INSERT INTO events
SELECT snowflake_from_timestamp(t::timestamptz), t
FROM (VALUES ('2026-11-19 23:59:59.999+00'), ('2026-11-20 00:00:00+00'), ('2026-11-20 12:00:00+00'),
             ('2026-11-20 23:59:59.999+00'), ('2026-11-21 00:00:00+00')) v(t);
-- the example runs here
SELECT 'bounds_are_the_servers_epochs',
       snowflake_from_timestamp('2026-11-20 00:00+00', '2025-01-01', 10, 12) = snowflake_from_timestamp('2026-11-20 00:00+00')
   AND snowflake_from_timestamp('2026-11-21 00:00+00', '2025-01-01', 10, 12) = snowflake_from_timestamp('2026-11-21 00:00+00');
SELECT 'counts_the_utc_day', count(*) = 3 FROM events
WHERE id >= snowflake_from_timestamp('2026-11-20 00:00+00', '2025-01-01', 10, 12)
  AND id <  snowflake_from_timestamp('2026-11-21 00:00+00', '2025-01-01', 10, 12);
