-- What a user sees: the column default, decoding, range scans, partitions.
SET TimeZone = 'UTC';

CREATE TABLE orders (
    id bigint PRIMARY KEY DEFAULT snowflake_next(),
    item text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO orders (item) SELECT 'item ' || g FROM generate_series(1, 10000) g;

-- unique, positive, in insertion order, stamped with this node
SELECT count(*) AS n, count(DISTINCT id) AS distinct_ids, bool_and(id > 0) AS positive,
       bool_and(snowflake_node(id) = 5) AS node_5
FROM orders;
SELECT count(*) AS out_of_order
FROM (SELECT id, lag(id) OVER (ORDER BY substr(item, 6)::int) AS prev FROM orders) s
WHERE id <= prev;

-- decoding: the time is the insert time to the millisecond
SELECT bool_and(abs(extract(epoch FROM d.ts - o.created_at)) < 1) AS time_matches,
       bool_and(d.node_id = 5) AS node_matches,
       bool_and(d.sequence BETWEEN 0 AND 4095) AS sequence_in_range,
       bool_and(d.ts = snowflake_timestamp(o.id) AND d.sequence = snowflake_sequence(o.id)) AS parts_agree
FROM orders o, snowflake_decode(o.id) d;

-- known IDs decode to known parts: (time 1000 ms, node 5, sequence 7)
SELECT * FROM snowflake_decode((1000::bigint << 22) | (5 << 12) | 7);
SELECT * FROM snowflake_decode(0);
SELECT snowflake_timestamp(9223372036854775807), snowflake_node(9223372036854775807),
       snowflake_sequence(9223372036854775807);

-- snowflake_from_timestamp: the smallest ID of a millisecond
SELECT snowflake_from_timestamp('2025-01-01 00:00:00+00') AS at_epoch,
       snowflake_from_timestamp('2025-01-01 00:00:01+00') AS one_second_later,
       snowflake_from_timestamp('2025-01-01 00:00:01.0009+00') AS same_millisecond;
SELECT count(*) = 10000 AS all_recent
FROM orders WHERE id >= snowflake_from_timestamp(now() - interval '1 hour');

-- ... and the range scan uses the primary key
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT id FROM orders WHERE id >= snowflake_from_timestamp('2026-01-01 00:00:00+00');
RESET enable_seqscan;

-- partitions by time with ID bounds
CREATE TABLE events (
    id bigint NOT NULL DEFAULT snowflake_next(),
    payload text
) PARTITION BY RANGE (id);
CREATE TABLE events_before_2030 PARTITION OF events
    FOR VALUES FROM (MINVALUE) TO (snowflake_from_timestamp('2030-01-01 00:00:00+00'));
CREATE TABLE events_from_2030 PARTITION OF events
    FOR VALUES FROM (snowflake_from_timestamp('2030-01-01 00:00:00+00')) TO (MAXVALUE);
INSERT INTO events (payload) VALUES ('now');
SELECT tableoid::regclass AS partition, snowflake_node(id) FROM events;
SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'events_from_2030';

-- the functions as catalogued
SELECT proname, provolatile, proparallel, proisstrict
FROM pg_proc WHERE proname LIKE 'snowflake%' ORDER BY proname;
