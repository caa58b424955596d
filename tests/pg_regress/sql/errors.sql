-- Bad input gets a clear error with a SQLSTATE and a hint. try() shows all
-- three without the source location, which would change with every edit.
SET TimeZone = 'UTC';
CREATE FUNCTION pg_temp.try(sql text) RETURNS TABLE (code text, message text, hint text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN QUERY SELECT 'ok'::text, NULL::text, NULL::text;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN NEXT;
END $$;
\x on
SELECT * FROM pg_temp.try($$SELECT snowflake_decode(-1)$$);
SELECT * FROM pg_temp.try($$SELECT snowflake_node(-9223372036854775808)$$);
SELECT * FROM pg_temp.try($$SELECT snowflake_timestamp(-2)$$);
SELECT * FROM pg_temp.try($$SELECT snowflake_sequence(-3)$$);
SELECT * FROM pg_temp.try($$SELECT snowflake_from_timestamp('2024-12-31 23:59:59.999+00')$$);
SELECT * FROM pg_temp.try($$SELECT snowflake_from_timestamp('2094-09-07 15:47:35.552+00')$$);
SELECT * FROM pg_temp.try($$SELECT snowflake_from_timestamp('infinity')$$);
SELECT * FROM pg_temp.try($$SELECT snowflake_from_timestamp('-infinity')$$);
SELECT * FROM pg_temp.try($$SET snowflake_id.node_id = 6$$);
\x off
-- the last millisecond of the time field is fine
SELECT snowflake_from_timestamp('2094-09-07 15:47:35.551+00');
-- NULL in, NULL out (strict functions)
SELECT snowflake_from_timestamp(NULL) IS NULL AS ts_null, snowflake_node(NULL) IS NULL AS node_null,
       (SELECT count(*) FROM snowflake_decode(NULL)) AS decoded_rows;
-- accepting a configuration is for superusers, and there is nothing to accept
SELECT snowflake_accept_configuration();
CREATE ROLE snowflake_regress_user;
SET ROLE snowflake_regress_user;
SELECT * FROM pg_temp.try($$SELECT snowflake_accept_configuration()$$);
SELECT snowflake_next() > 0 AS plain_users_can_issue;
RESET ROLE;
DROP ROLE snowflake_regress_user;
