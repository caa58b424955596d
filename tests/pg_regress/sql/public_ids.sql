-- Public IDs: a keyed permutation of the IDs (FF1, AES-256). The server has
-- the test key file (versions 1 and 2, tests/integration/lib.sh) as
-- snowflake_id.public_id_keys = 'public_id.keys', in its data directory.

-- The functions, and who may run them.
SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS returns,
       provolatile AS volatility, proparallel AS parallel
FROM pg_proc p
WHERE proname IN ('snowflake_public', 'snowflake_private', 'snowflake_public_text', 'snowflake_public_keys')
ORDER BY 1::text;

-- The key file's versions, each with a check value instead of the key.
SELECT * FROM snowflake_public_keys();

-- Fixed keys give fixed public IDs.
SELECT snowflake_public(252172774628397056, 1) AS v1,
       snowflake_public(252172774628397056, 2) AS v2,
       snowflake_public_text(252172774628397056, 1) AS text_v1,
       snowflake_public_text(252172774628397056, 2) AS text_v2;
SELECT snowflake_private(snowflake_public(252172774628397056, 1), 1) AS back,
       snowflake_private(snowflake_public_text(252172774628397056, 2)) AS back_from_text;

-- The ends of the range.
SELECT id, snowflake_private(snowflake_public(id, 1), 1) = id AS round_trip,
       length(snowflake_public_text(id, 1)) AS text_length
FROM (VALUES (0::bigint), (1), (9223372036854775807)) v(id);

-- Round trips over issued IDs, both forms, and no two IDs share a public ID.
CREATE TEMP TABLE issued AS SELECT snowflake_next() AS id FROM generate_series(1, 5000);
SELECT count(*) AS ids,
       count(DISTINCT snowflake_public(id, 1)) AS distinct_public,
       count(*) FILTER (WHERE snowflake_private(snowflake_public(id, 1), 1) <> id) AS bad_round_trips,
       count(*) FILTER (WHERE snowflake_private(snowflake_public_text(id, 2)) <> id) AS bad_text_round_trips,
       count(*) FILTER (WHERE snowflake_public_text(id, 1) !~ '^1[0-9A-Za-z]{11}$') AS bad_texts
FROM issued;
-- Consecutive IDs give unrelated public IDs: the public IDs of 5,000
-- consecutive IDs are not in their order (Spearman's rank correlation near
-- 0, where the IDs' own is 1) and their node and time fields are not the
-- server's.
SELECT abs(corr(r_id, r_pub)) < 0.05 AS uncorrelated,
       corr(r_id, r_id) AS ids_with_themselves
FROM (SELECT rank() OVER (ORDER BY id) AS r_id,
             rank() OVER (ORDER BY snowflake_public(id, 1)) AS r_pub
      FROM issued) r;
SELECT count(*) FILTER (WHERE snowflake_node(snowflake_public(id, 1)) = 5) < 50 AS node_hidden,
       count(*) FILTER (WHERE abs(extract(epoch FROM snowflake_timestamp(snowflake_public(id, 1)) - now())) < 86400) < 50 AS time_hidden
FROM issued;

-- JSON: the public ID is a string (the snowflake type), the text form too.
SELECT jsonb_typeof(to_jsonb(snowflake_public(252172774628397056, 1))) AS public_in_json;

-- A generated column and an index on the public form (IMMUTABLE).
CREATE TABLE tickets (
    id        snowflake PRIMARY KEY DEFAULT snowflake_next(),
    public_id text GENERATED ALWAYS AS (snowflake_public_text(id, 1)) STORED UNIQUE,
    subject   text NOT NULL
);
INSERT INTO tickets (subject) SELECT 'ticket ' || g FROM generate_series(1, 100) g;
SELECT count(*) AS found_by_public_text
FROM tickets t
WHERE t.id = snowflake_private((SELECT public_id FROM tickets ORDER BY id OFFSET 41 LIMIT 1));
CREATE INDEX tickets_public_bigint ON tickets ((snowflake_public(id, 1)));
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT subject FROM tickets WHERE snowflake_public(id, 1) = 5;
RESET enable_seqscan;
DROP TABLE tickets;

-- Errors: SQLSTATE, message and hint (the data directory's path shown as
-- DATADIR).
\x on
SELECT code, regexp_replace(message, '"/[^"]*/', '"DATADIR/') AS message, hint
FROM (VALUES ($$SELECT snowflake_public(-1, 1)$$),
             ($$SELECT snowflake_private(-5, 1)$$),
             ($$SELECT snowflake_public(1, 0)$$),
             ($$SELECT snowflake_public(1, 62)$$),
             ($$SELECT snowflake_public(1, 3)$$),
             ($$SELECT snowflake_private('1ABC')$$),
             ($$SELECT snowflake_private('1ABCDEFGHIJ-')$$),
             ($$SELECT snowflake_private('0ABCDEFGHIJK')$$),
             ($$SELECT snowflake_private('1zzzzzzzzzzz')$$),
             ($$SELECT snowflake_private('3ABCDEFGHIJK')$$)) v(sql),
     regress_try(v.sql);
\x off
DROP TABLE issued;
