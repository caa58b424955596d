-- The prefix snowflake_id. is reserved: an unknown name under it is an
-- error in a session (a mistyped name in postgresql.conf stops the server:
-- tests/integration/startup_refusal.sh).
SET snowflake_id.sequencebits = 14;
SHOW snowflake_id.sequencebits;
-- The known ones are there, and read-only in a session where they must be.
SELECT name, context FROM pg_settings WHERE name LIKE 'snowflake_id.%' ORDER BY name;
-- The successor's allowance for two clocks' difference: 1 s, at most 1 h.
SELECT setting, unit, min_val, max_val FROM pg_settings WHERE name = 'snowflake_id.max_clock_offset';
-- snowflake_next_batch_array returns bigint[], built in PostgreSQL's memory.
SELECT pg_typeof(snowflake_next_batch_array(3)) AS type,
       cardinality(snowflake_next_batch_array(3)) AS n,
       array_lower(snowflake_next_batch_array(3), 1) AS lower_bound,
       array_ndims(snowflake_next_batch_array(3)) AS ndims;
SELECT (SELECT bool_and(x > 0) AND count(DISTINCT x) = 1000 FROM unnest(a) AS x) AS distinct_positive,
       a = (SELECT array_agg(x ORDER BY x) FROM unnest(a) AS x) AS increasing
FROM snowflake_next_batch_array(1000) AS a;
