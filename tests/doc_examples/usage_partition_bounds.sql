-- docs/usage.md, "Time ranges": the partition of 2026 starts and ends at
-- the IDs of midnight UTC, whatever zone the DDL ran in.
-- the example runs here
SELECT 'bounds_are_utc_years',
       pg_get_expr(relpartbound, oid) = format('FOR VALUES FROM (''%s'') TO (''%s'')',
         (1::bigint << 22) * (extract(epoch FROM timestamptz '2026-01-01 00:00:00+00' - timestamptz '2025-01-01 00:00:00+00') * 1000)::bigint,
         (1::bigint << 22) * (extract(epoch FROM timestamptz '2027-01-01 00:00:00+00' - timestamptz '2025-01-01 00:00:00+00') * 1000)::bigint)
FROM pg_class WHERE relname = 'events_2026';
