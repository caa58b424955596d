-- examples/partman/events_by_day.sql: a table partitioned by its snowflake
-- ID, one partition per day of IDs, made ahead and dropped after 7 days by
-- pg_partman 5 (ID-based range partitioning), with no timestamp column.
-- Run in a database with snowflake_id; needs the pg_partman package.
CREATE SCHEMA IF NOT EXISTS partman;
CREATE EXTENSION IF NOT EXISTS pg_partman SCHEMA partman;

CREATE TABLE events (
    id      bigint NOT NULL DEFAULT snowflake_next(),
    payload text NOT NULL,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);

-- A day of IDs is snowflake_id_span('1 day') ID values; pg_partman starts
-- partitions at multiples of it, so each one holds one UTC day when the
-- epoch is at midnight UTC (the default, 2025-01-01, is). Today's partition
-- and 3 days ahead are made now.
SELECT partman.create_parent(
    p_parent_table    => 'public.events',
    p_control         => 'id',
    p_type            => 'range',
    p_interval        => snowflake_id_span('1 day')::text,
    p_premake         => 3,
    p_start_partition => snowflake_from_timestamp(now())::text);

-- Retention counts in IDs too: a partition whose IDs all lie more than 7
-- days of IDs below the largest ID is dropped by maintenance.
UPDATE partman.part_config
SET retention = snowflake_id_span('7 days')::text, retention_keep_table = false
WHERE parent_table = 'public.events';
