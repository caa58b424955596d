-- Bad input gets a clear error with a SQLSTATE and a hint (regress_try(),
-- defined in setup.sql, shows all three).
SET TimeZone = 'UTC';
\x on
SELECT * FROM regress_try($$SELECT snowflake_decode(-1)$$);
SELECT * FROM regress_try($$SELECT snowflake_node(-9223372036854775808)$$);
SELECT * FROM regress_try($$SELECT snowflake_timestamp(-2)$$);
SELECT * FROM regress_try($$SELECT snowflake_sequence(-3)$$);
SELECT * FROM regress_try($$SELECT snowflake_from_timestamp('2024-12-31 23:59:59.999+00')$$);
SELECT * FROM regress_try($$SELECT snowflake_from_timestamp('2094-09-07 15:47:35.552+00')$$);
SELECT * FROM regress_try($$SELECT snowflake_from_timestamp('infinity')$$);
SELECT * FROM regress_try($$SELECT snowflake_from_timestamp('-infinity')$$);
SELECT * FROM regress_try($$SET snowflake_id.node_id = 6$$);
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
SELECT * FROM regress_try($$SELECT snowflake_accept_configuration()$$);
SELECT snowflake_next() > 0 AS plain_users_can_issue;
RESET ROLE;
DROP ROLE snowflake_regress_user;
