-- Batches: n consecutive IDs with one compare-and-swap.
-- The (time, sequence) pair of an ID: consecutive IDs have consecutive pairs.
CREATE FUNCTION pg_temp.pair(id bigint) RETURNS bigint LANGUAGE sql IMMUTABLE
    AS $$ SELECT (id >> 22) << 12 | (id & 4095) $$;

CREATE TABLE before AS SELECT snowflake_next() AS id;
CREATE TABLE batch AS SELECT i, x FROM snowflake_next_batch(50000) WITH ORDINALITY AS b(x, i);
CREATE TABLE after AS SELECT snowflake_next() AS id;

-- distinct, consecutive (also across milliseconds), after the ID before, before the ID after
SELECT count(*) AS n, count(DISTINCT x) AS distinct_ids,
       bool_and(snowflake_node(x) = 5) AS node_5,
       min(x) > (SELECT id FROM before) AS after_earlier_ids,
       max(x) < (SELECT id FROM after) AS before_later_ids,
       count(DISTINCT x >> 22) >= 13 AS spans_milliseconds
FROM batch;
SELECT count(*) AS not_consecutive
FROM (SELECT pg_temp.pair(x) - lag(pg_temp.pair(x)) OVER (ORDER BY i) AS step FROM batch) s
WHERE step <> 1;

-- the array variant
CREATE TABLE arr AS SELECT snowflake_next_batch_array(5000) AS ids;
SELECT cardinality(ids), ids[1] > (SELECT id FROM after) AS after_earlier_ids,
       ids[5000] < snowflake_next() AS before_later_ids
FROM arr;
SELECT count(*) AS not_consecutive
FROM (SELECT pg_temp.pair(x) - lag(pg_temp.pair(x)) OVER (ORDER BY i) AS step
      FROM arr, unnest(ids) WITH ORDINALITY AS u(x, i)) s
WHERE step <> 1;

-- one, NULL, and in the select list
SELECT count(*) FROM snowflake_next_batch(1);
SELECT count(*) FROM snowflake_next_batch(NULL);
SELECT snowflake_next_batch_array(NULL) IS NULL AS null_array;
SELECT count(*) FROM (SELECT snowflake_next_batch(3) FROM generate_series(1, 4)) s;

-- bad sizes: SQLSTATE 22023 with a hint; nothing is issued
CREATE TABLE issued AS SELECT ids_issued FROM snowflake_stats();
\x on
SELECT * FROM regress_try($$SELECT count(*) FROM snowflake_next_batch(0)$$);
SELECT * FROM regress_try($$SELECT snowflake_next_batch_array(-1)$$);
SELECT * FROM regress_try($$SELECT count(*) FROM snowflake_next_batch(20484097)$$);
SELECT * FROM regress_try($$SELECT snowflake_next_batch_array(100000001)$$);
\x off
SELECT s.ids_issued = i.ids_issued AS nothing_issued FROM snowflake_stats() s, issued i;
-- a batch counts n IDs
SELECT count(*) FROM snowflake_next_batch(777);
SELECT s.ids_issued - i.ids_issued AS counted FROM snowflake_stats() s, issued i;

-- the largest batch the default drift limit (5 s) allows: 5001 ms of 4096 IDs
SELECT count(*), count(*) = 5001 * 4096 AS at_the_limit FROM snowflake_next_batch(20484096);
SELECT snowflake_next() > 0 AS next_still_works;

-- with a drift limit of a minute, the absolute bound applies: 100,000,000
ALTER SYSTEM SET snowflake_id.max_clock_drift = '1min';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
\c
SHOW snowflake_id.max_clock_drift;
\x on
SELECT * FROM regress_try($$SELECT snowflake_next_batch_array(100000001)$$);
SELECT * FROM regress_try($$SELECT count(*) FROM snowflake_next_batch(0)$$);
\x off
ALTER SYSTEM RESET snowflake_id.max_clock_drift;
SELECT pg_reload_conf();

-- The batches above ran the IDs up to 5 s ahead of the clock: wait (at most
-- 10 s) until the clock has caught up, so that the tests after this one
-- (usage compares an ID's time with its insert time) start from the clock.
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    EXIT WHEN coalesce((SELECT drift_ms FROM snowflake_stats()), 0) <= 0;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
SELECT coalesce(drift_ms, 0) <= 0 AS caught_up FROM snowflake_stats();
