-- examples/replication/failover_check.sql: a diagnostic, on a standby or a
-- promoted server, in each database with snowflake IDs:
--   psql -v ON_ERROR_STOP=1 -d app -f failover_check.sql
-- It fails, naming the tables, while the largest ID of any column with
-- DEFAULT snowflake_next() is not below the smallest ID this server's clock
-- can issue now. The promoted server still issues IDs above them (it resumes
-- after the leases it replayed from the WAL), but ahead of its clock, and
-- fails with the drift error when that is more than max_clock_drift.
DO $$
DECLARE
    col record;
    max_id bigint;
    lowest_next bigint := snowflake_from_timestamp(clock_timestamp());
    behind text[] := '{}';
BEGIN
    FOR col IN
        SELECT d.adrelid::regclass AS tab, a.attname
        FROM pg_attrdef d
        JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
        JOIN pg_class c ON c.oid = d.adrelid
        WHERE c.relkind = 'r' AND pg_get_expr(d.adbin, d.adrelid) LIKE '%snowflake_next()%'
    LOOP
        EXECUTE format('SELECT max(%I) FROM %s', col.attname, col.tab) INTO max_id;
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
    RAISE NOTICE 'ok: every snowflake ID here is below the IDs this server issues from now (%)', clock_timestamp();
END
$$;
