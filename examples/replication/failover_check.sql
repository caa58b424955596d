-- examples/replication/failover_check.sql: a diagnostic, on a standby or a
-- promoted server, in each database with snowflake IDs:
--   psql -v ON_ERROR_STOP=1 -d app -f failover_check.sql
-- It looks at every bigint column of every table and materialized view
-- outside the system schemas (a full scan of each: run it when you can
-- afford that), at the values in it that carry this server's node id: IDs
-- from DEFAULT snowflake_next(), from snowflake_next_batch(), or made by
-- clients with this node id, and no later than a day (or max_clock_drift,
-- if longer) ahead of the clock: larger values are not IDs of this server
-- (hashes, nanosecond times) and are left out. It fails, naming the
-- columns, while the largest of them is not below the smallest ID this
-- server's clock can issue now. The promoted server still issues IDs above them (it resumes
-- after the leases it replayed from the WAL), but ahead of its clock, and
-- fails with the drift error when that is more than max_clock_drift.
-- It covers one database: run it in each (psql -l lists them).
DO $$
DECLARE
    col record;
    max_id bigint;
    node int := (SELECT node_id FROM snowflake_node_info());
    lowest_next bigint := snowflake_from_timestamp(clock_timestamp());
    not_ids bigint := snowflake_from_timestamp(clock_timestamp() + greatest(interval '1 day',
                          current_setting('snowflake_id.max_clock_drift')::interval));
    behind text[] := '{}';
BEGIN
    IF node IS NULL THEN
        RAISE EXCEPTION 'snowflake_id.node_id is not set on this server'
            USING HINT = 'Set it to the node id of the server this one replaces.';
    END IF;
    FOR col IN
        SELECT c.oid::regclass AS tab, a.attname
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'm') AND a.attnum > 0 AND NOT a.attisdropped
          AND a.atttypid = 'bigint'::regtype
          AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
        ORDER BY c.oid::regclass::text, a.attnum
    LOOP
        EXECUTE format('SELECT max(%1$I) FROM %2$s WHERE %1$I > 0 AND %1$I < $2 AND snowflake_node(%1$I) = $1',
                       col.attname, col.tab)
            INTO max_id USING node, not_ids;
        IF max_id >= lowest_next THEN
            behind := behind || format('%s.%s: largest ID %s issued at %s', col.tab, col.attname,
                                       max_id, snowflake_timestamp(max_id));
        END IF;
    END LOOP;
    IF behind <> '{}' THEN
        RAISE EXCEPTION 'this server''s clock (%) is not past the IDs already issued: %',
            clock_timestamp(), array_to_string(behind, '; ')
            USING HINT = 'New IDs will run ahead of this clock (snowflake_next() fails beyond max_clock_drift): fix the clock (NTP) or wait until it passes those times.';
    END IF;
    RAISE NOTICE 'ok: every ID of node % in this database''s bigint columns is below the IDs this server issues from now (%)',
        node, clock_timestamp();
END
$$;
