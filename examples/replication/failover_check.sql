-- examples/replication/failover_check.sql: run on a standby you are about
-- to promote (or on the promoted server before it takes writes), in each
-- database with snowflake IDs:
--   psql -v ON_ERROR_STOP=1 -d app -f failover_check.sql
-- It fails, naming the tables, while the largest ID of any column with
-- DEFAULT snowflake_next() is not below the smallest ID this server's clock
-- can issue now; then the promoted server could issue IDs below existing ones.
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
            USING HINT = 'Do not issue IDs here yet: fix the clock (NTP) or wait until it passes those times, then run this check again.';
    END IF;
    RAISE NOTICE 'ok: every snowflake ID here is below the IDs this server issues from now (%)', clock_timestamp();
END
$$;
