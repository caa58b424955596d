-- The regression cluster preloads snowflake_id with snowflake_id.node_id = 5.
CREATE EXTENSION snowflake_id;
-- regress_try(sql): runs sql and returns its SQLSTATE, message and hint
-- without the source location (which changes with every edit); a number in
-- parentheses in the message, which can depend on the clock, shows as (N).
CREATE FUNCTION regress_try(sql text) RETURNS TABLE (code text, message text, hint text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN QUERY SELECT 'ok'::text, NULL::text, NULL::text;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    message := regexp_replace(message, '\(\d+\)', '(N)');
    RETURN NEXT;
END $$;
