-- The decoders that take the layout as arguments are IMMUTABLE: generated
-- columns, expression and partial indexes, check constraints and partition
-- bounds accept them, and they agree with the STABLE forms on this server's
-- layout (node id 5, epoch 2025-01-01, 10 node bits, 12 sequence bits).
SET TimeZone = 'UTC';
SELECT p.oid::regprocedure AS function, provolatile AS volatility
FROM pg_proc p
WHERE proname IN ('snowflake_decode', 'snowflake_timestamp', 'snowflake_node', 'snowflake_sequence',
                  'snowflake_from_timestamp', 'snowflake_id_span')
ORDER BY proname, pronargs;

-- The STABLE forms are refused where PostgreSQL needs IMMUTABLE.
CREATE TABLE refused (id bigint, ts timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id)) STORED);
CREATE TABLE events (
    id      bigint PRIMARY KEY DEFAULT snowflake_next(),
    kind    text NOT NULL,
    -- a generated column: the time the ID was issued
    made_at timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id, '2025-01-01', 10, 12)) STORED,
    -- a check constraint: only this node's IDs
    CHECK (snowflake_node(id, '2025-01-01', 10, 12) = 5)
);
-- An expression index on the time, and a partial index on the IDs of one node.
CREATE INDEX events_made_at ON events ((snowflake_timestamp(id, '2025-01-01', 10, 12)));
CREATE INDEX events_node_5 ON events (id) WHERE snowflake_node(id, '2025-01-01', 10, 12) = 5;
INSERT INTO events (kind) SELECT 'k' || g % 3 FROM generate_series(1, 2000) g;
INSERT INTO events (id, kind) VALUES ((1000::bigint << 22) | (6 << 12), 'node 6');
SELECT count(*) AS rows,
       bool_and(made_at = snowflake_timestamp(id)) AS generated_column_agrees,
       bool_and(abs(extract(epoch FROM made_at - now())) < 60) AS made_now
FROM events;
ANALYZE events;
SET enable_seqscan = off;
-- The planner uses the expression index for the time, and the partial one
-- for this node's IDs.
EXPLAIN (COSTS OFF)
SELECT count(*) FROM events WHERE snowflake_timestamp(id, '2025-01-01', 10, 12) >= '2026-01-01';
EXPLAIN (COSTS OFF)
SELECT id FROM events WHERE snowflake_node(id, '2025-01-01', 10, 12) = 5 AND id > 0;
RESET enable_seqscan;
SELECT count(*) = 2000 AS all_of_the_last_minute
FROM events WHERE snowflake_timestamp(id, '2025-01-01', 10, 12) > now() - interval '1 minute';

-- Constant arguments fold at plan time.
EXPLAIN (COSTS OFF, VERBOSE)
SELECT * FROM events WHERE id >= snowflake_from_timestamp('2026-01-01', '2025-01-01', 10, 12);

-- Known values, another epoch and other widths.
SELECT * FROM snowflake_decode((1000::bigint << 22) | (5 << 12) | 7, '2025-01-01', 10, 12);
SELECT * FROM snowflake_decode((1000::bigint << 22) | (5 << 12) | 7, '2020-06-01', 8, 14);
SELECT snowflake_from_timestamp('2025-01-02', '2025-01-01', 10, 12) = snowflake_id_span('1 day') AS day_one;
SELECT snowflake_id_span('1 day', 8, 14) = snowflake_id_span('1 day', 10, 12) AS same_shift,
       snowflake_id_span('1 hour', 0, 1) AS ids_per_hour_0_1;

-- The same errors as the STABLE forms, and the layout's own.
\set VERBOSITY default
SELECT snowflake_timestamp(-1, '2025-01-01', 10, 12);
SELECT snowflake_node(1, '2025-01-01', 28, 1);
SELECT snowflake_sequence(1, '2025-01-01', 10, 0);
SELECT snowflake_decode(1, 'infinity'::timestamptz, 10, 12);
-- An untyped epoch is text, written like snowflake_id.epoch.
SELECT snowflake_decode(1, 'infinity', 10, 12);
SELECT snowflake_timestamp(1, 'Jan 1 2025', 10, 12);
SELECT snowflake_from_timestamp('2024-12-31', '2025-01-01', 10, 12);
SELECT snowflake_id_span('1 month');
SELECT snowflake_id_span('0');
SELECT snowflake_id_span('1 day', -1, 12);
-- NULL in, NULL out (STRICT).
SELECT snowflake_timestamp(NULL, '2025-01-01', 10, 12) IS NULL AS strict;
-- An epoch literal means what snowflake_id.epoch means, whatever the
-- session's TimeZone; a timestamptz value is read in the session's zone.
SET TimeZone = 'Asia/Kolkata';
SELECT snowflake_timestamp(1000::bigint << 22, '2025-01-01', 10, 12) = '2025-01-01 00:00:01+00' AS literal_in_utc,
       snowflake_timestamp(1000::bigint << 22, '2025-01-01 05:30+05:30', 10, 12) = '2025-01-01 00:00:01+00' AS zone_given,
       snowflake_from_timestamp('2025-01-01 00:00:01+00', '2025-01-01', 10, 12) = 1000::bigint << 22 AS from_timestamp,
       snowflake_timestamp(1000::bigint << 22, '2025-01-01'::timestamptz, 10, 12) = '2024-12-31 18:30:01+00' AS cast_in_session_zone;
SET TimeZone = 'UTC';
DROP TABLE events;
