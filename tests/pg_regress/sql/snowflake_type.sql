-- The snowflake type: bigint inside (storage, I/O, comparison, indexes),
-- a JSON string outside. The server has node id 5 and the default layout.
SET TimeZone = 'UTC';

-- What the catalog holds: bigint's storage and PostgreSQL's own int8
-- functions, no operator or operator class of its own.
SELECT t.typlen, t.typbyval, t.typalign, t.typstorage, t.typcategory,
       t.typinput::regproc, (SELECT prosrc FROM pg_proc WHERE oid = t.typinput) AS input_is,
       (SELECT prosrc FROM pg_proc WHERE oid = t.typoutput) AS output_is,
       (SELECT prosrc FROM pg_proc WHERE oid = t.typreceive) AS receive_is,
       (SELECT prosrc FROM pg_proc WHERE oid = t.typsend) AS send_is
FROM pg_type t WHERE t.typname = 'snowflake';
SELECT count(*) AS own_operators FROM pg_operator
WHERE oprleft = 'snowflake'::regtype OR oprright = 'snowflake'::regtype;
SELECT castsource::regtype, casttarget::regtype, castcontext, castmethod,
       castfunc::regprocedure, (SELECT prosrc FROM pg_proc WHERE oid = castfunc) AS function_is
FROM pg_cast
WHERE castsource = 'snowflake'::regtype OR casttarget = 'snowflake'::regtype
ORDER BY 1::text, 2::text;

-- A table keyed by the type, filled by DEFAULT snowflake_next(), and the
-- same rows keyed by bigint.
CREATE TABLE typed_orders (
    id   snowflake PRIMARY KEY DEFAULT snowflake_next(),
    item text NOT NULL
);
INSERT INTO typed_orders (item) SELECT 'item ' || g FROM generate_series(1, 1000) g;
CREATE TABLE plain_orders AS SELECT id::bigint AS id, item FROM typed_orders;
ALTER TABLE plain_orders ADD PRIMARY KEY (id);
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids,
       bool_and(id > 9007199254740992) AS all_above_2_53, bool_and(snowflake_node(id) = 5) AS node_5
FROM typed_orders;
-- The index is bigint's: int8_ops.
SELECT c.relname, o.opcname, am.amname
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     JOIN pg_opclass o ON o.oid = i.indclass[0] JOIN pg_am am ON am.oid = o.opcmethod
WHERE i.indrelid = 'typed_orders'::regclass;

-- JSON: the type is a string, bigint a number, in every JSON function.
SELECT to_json(o.id)::text ~ '^"[0-9]+"$' AS to_json_string,
       jsonb_typeof(to_jsonb(o.id)) AS to_jsonb,
       row_to_json(o)::jsonb ->> 'id' = o.id::text AS row_to_json_exact,
       jsonb_typeof(jsonb_build_object('id', o.id) -> 'id') AS jsonb_build_object,
       json_typeof(json_build_object('id', o.id) -> 'id') AS json_build_object,
       jsonb_typeof(to_jsonb(p) -> 'id') AS bigint_is
FROM typed_orders o JOIN plain_orders p USING (item)
ORDER BY o.id LIMIT 1;
SELECT bool_and(e ->> 'id' = o.id::text) AS jsonb_agg_exact,
       bool_and(jsonb_typeof(e -> 'id') = 'string') AS jsonb_agg_strings,
       count(*) AS rows
FROM (SELECT jsonb_agg(o) AS a FROM typed_orders o) s
     CROSS JOIN LATERAL jsonb_array_elements(s.a) e
     JOIN typed_orders o ON o.id = (e ->> 'id')::snowflake;
SELECT json_agg(x)::text FROM (VALUES (252172774628397056::bigint::snowflake)) v(x);
SELECT json_agg(x)::text FROM (VALUES (252172774628397056::bigint)) v(x);
SELECT to_json(ARRAY[1::snowflake, 252172774628397056::bigint::snowflake]);
-- JSON back into the type: a string or a number.
SELECT id, pg_typeof(id) FROM json_populate_record(NULL::typed_orders, '{"id": "252172774628397056", "item": "a"}');
SELECT id FROM jsonb_to_record('{"id": 252172774628397056}') AS r(id snowflake);

-- Text and binary I/O are bigint's.
SELECT '252172774628397056'::snowflake, ' 42 '::snowflake, snowflake_send(42::snowflake) = int8send(42);
SELECT 'abc'::snowflake;
SELECT '9223372036854775808'::snowflake;

-- Casts: to bigint implicit, from bigint for assignment, from integer and
-- smallint implicit.
SELECT pg_typeof(id + 1) AS arithmetic, pg_typeof(id::bigint) AS cast_to_bigint,
       pg_typeof(COALESCE(id, 0)) AS coalesce_literal, pg_typeof(COALESCE(0, id)) AS coalesce_literal_first,
       pg_typeof(COALESCE(id, 0::bigint)) AS coalesce_bigint,
       pg_typeof(CASE WHEN id > 0 THEN id ELSE 0 END) AS case_literal
FROM typed_orders LIMIT 1;
SELECT pg_typeof(x) FROM ((SELECT id FROM typed_orders LIMIT 1) UNION ALL SELECT 0) u(x) LIMIT 1;
-- A bigint expression is not silently a snowflake: an explicit cast is.
SELECT pg_typeof(snowflake_next()), pg_typeof(snowflake_next()::snowflake);
CREATE FUNCTION takes_snowflake(snowflake) RETURNS text LANGUAGE sql AS 'SELECT $1::text';
SELECT code, message FROM regress_try($$SELECT takes_snowflake(42::bigint)$$);
SELECT takes_snowflake(42);
DROP FUNCTION takes_snowflake(snowflake);
-- Assignment: INSERT and UPDATE store a bigint, an integer, a text literal.
INSERT INTO typed_orders (id, item) VALUES (42::bigint, 'a bigint'), (43, 'an integer'), ('44', 'a literal');
UPDATE typed_orders SET id = id::bigint + 100 WHERE id = 44;
SELECT id, item FROM typed_orders WHERE id < 1000 ORDER BY id;
DELETE FROM typed_orders WHERE id < 1000;

-- The decoders take the type.
SELECT bool_and(snowflake_timestamp(o.id) = snowflake_timestamp(p.id)) AS timestamp,
       bool_and(snowflake_node(o.id) = 5) AS node,
       bool_and(snowflake_sequence(o.id) = snowflake_sequence(p.id)) AS sequence,
       bool_and((SELECT node_id FROM snowflake_decode(o.id)) = 5) AS decode,
       bool_and(snowflake_timestamp(o.id, '2025-01-01', 10, 12) = snowflake_timestamp(o.id)) AS immutable_form,
       bool_and(snowflake_parse(snowflake_encode(o.id)) = o.id) AS text_forms
FROM typed_orders o JOIN plain_orders p USING (id);

-- Ordering and equality are bigint's.
SELECT bool_and(a.id = b.id) AS same_order
FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM typed_orders) a
JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n FROM plain_orders) b USING (n);
SELECT (SELECT max(id) FROM typed_orders) = (SELECT max(id) FROM plain_orders) AS same_max,
       (SELECT count(DISTINCT id) FROM typed_orders) AS distinct_ids,
       (SELECT count(*) FROM typed_orders o JOIN plain_orders p ON o.id = p.id) AS joined;

-- Every usual predicate uses the index, with any integer type or an untyped
-- value on the other side.
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM typed_orders WHERE id = 252172774628397056;
EXPLAIN (COSTS OFF) SELECT * FROM typed_orders WHERE 252172774628397056 = id;
EXPLAIN (COSTS OFF) SELECT * FROM typed_orders WHERE id = 5;
EXPLAIN (COSTS OFF) SELECT * FROM typed_orders WHERE id = '252172774628397056';
EXPLAIN (COSTS OFF) SELECT * FROM typed_orders WHERE id IN (1, 2, 252172774628397056);
EXPLAIN (COSTS OFF) SELECT * FROM typed_orders WHERE id = ANY ('{1,2}'::bigint[]);
EXPLAIN (COSTS OFF) SELECT * FROM typed_orders WHERE id >= snowflake_from_timestamp('2025-06-01') ORDER BY id LIMIT 3;
PREPARE by_id AS SELECT item FROM typed_orders WHERE id = $1;
EXPLAIN (COSTS OFF) EXECUTE by_id('252172774628397056');
SELECT pg_typeof(id) FROM typed_orders WHERE id = (SELECT min(id) FROM typed_orders);
RESET enable_seqscan;
RESET enable_bitmapscan;
-- A hash index is bigint's too (int8_ops of hash), and hashing groups.
CREATE TABLE typed_hash AS SELECT id FROM typed_orders;
CREATE INDEX typed_hash_id ON typed_hash USING hash (id);
ANALYZE typed_hash;
SELECT o.opcname, am.amname FROM pg_index i JOIN pg_opclass o ON o.oid = i.indclass[0]
     JOIN pg_am am ON am.oid = o.opcmethod
WHERE i.indexrelid = 'typed_hash_id'::regclass;
EXPLAIN (COSTS OFF) SELECT * FROM typed_hash WHERE id = 252172774628397056;
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT id, count(*) FROM typed_hash GROUP BY id;
SELECT count(*) AS groups FROM (SELECT id, count(*) FROM typed_hash GROUP BY id) g;
RESET enable_sort;
DROP TABLE typed_hash;
-- Joins with a bigint foreign key merge or hash on bigint's operators.
CREATE TABLE order_lines (order_id bigint REFERENCES typed_orders (id), n int);
INSERT INTO order_lines SELECT id, 1 FROM typed_orders;
SELECT count(*) AS lines_joined FROM typed_orders o JOIN order_lines l ON l.order_id = o.id;
INSERT INTO order_lines VALUES (1, 1);
DROP TABLE order_lines;

-- Partitioning by ranges of the type prunes as for bigint.
CREATE TABLE typed_events (id snowflake NOT NULL DEFAULT snowflake_next()) PARTITION BY RANGE (id);
CREATE TABLE typed_events_old PARTITION OF typed_events
    FOR VALUES FROM (MINVALUE) TO (snowflake_from_timestamp('2025-06-01', '2025-01-01', 10, 12));
CREATE TABLE typed_events_new PARTITION OF typed_events
    FOR VALUES FROM (snowflake_from_timestamp('2025-06-01', '2025-01-01', 10, 12)) TO (MAXVALUE);
INSERT INTO typed_events DEFAULT VALUES;
EXPLAIN (COSTS OFF) SELECT * FROM typed_events WHERE id >= snowflake_from_timestamp('2025-07-01', '2025-01-01', 10, 12);
SELECT tableoid::regclass FROM typed_events;
DROP TABLE typed_events;

-- A bigint key converts in place: the table and its indexes keep their
-- files (no rewrite, no rebuild), a foreign key to it stays valid.
CREATE TABLE converted (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int);
CREATE INDEX converted_v_id ON converted (v, id);
CREATE TABLE converted_lines (converted_id bigint REFERENCES converted (id));
INSERT INTO converted (v) SELECT g % 10 FROM generate_series(1, 1000) g;
INSERT INTO converted_lines SELECT id FROM converted;
CREATE TEMP TABLE files_before AS
  SELECT relname, relfilenode FROM pg_class WHERE relname IN ('converted', 'converted_pkey', 'converted_v_id', 'converted_lines');
ALTER TABLE converted ALTER COLUMN id TYPE snowflake;
ALTER TABLE converted_lines ALTER COLUMN converted_id TYPE snowflake;
SELECT b.relname, b.relfilenode = c.relfilenode AS same_file
FROM files_before b JOIN pg_class c USING (relname) ORDER BY 1;
SELECT pg_get_expr(adbin, adrelid) AS default_kept FROM pg_attrdef WHERE adrelid = 'converted'::regclass;
SELECT count(*) AS lines, bool_and(jsonb_typeof(to_jsonb(l) -> 'converted_id') = 'string') AS strings
FROM converted_lines l JOIN converted c ON c.id = l.converted_id;
DROP TABLE converted_lines, converted;

DROP TABLE typed_orders, plain_orders;
