-- snowflake_convert_column: a serial column with a foreign key.
CREATE TABLE conv_orders (id serial PRIMARY KEY, item text);
CREATE TABLE conv_lines (order_id int REFERENCES conv_orders, qty int);
INSERT INTO conv_orders (item) VALUES ('a'), ('b');
INSERT INTO conv_lines VALUES (1, 10), (2, 20);
-- dry run (the default): the DDL, nothing changed
SELECT * FROM snowflake_convert_column('conv_orders', 'id');
\d conv_orders
-- the real run
SELECT * FROM snowflake_convert_column('conv_orders', 'id', dry_run => false);
\d conv_orders
\d conv_lines
INSERT INTO conv_orders (item) VALUES ('c');
SELECT item, id < 1000 AS old_id, snowflake_node(id) AS node FROM conv_orders ORDER BY id;
-- again: nothing to do
SELECT * FROM snowflake_convert_column('conv_orders', 'id', false);
-- an identity column
CREATE TABLE conv_ident (id int GENERATED ALWAYS AS IDENTITY, v text);
SELECT * FROM snowflake_convert_column('conv_ident', 'id', false);
\d conv_ident
-- refusals: SQLSTATE, message (numbers in parentheses shown as N), hint
CREATE TABLE conv_text (id text);
CREATE TABLE conv_big (id bigint);
INSERT INTO conv_big VALUES (9000000000000000000);
CREATE VIEW conv_view AS SELECT 1 AS id;
CREATE TABLE conv_other (id int DEFAULT 0);
\x on
SELECT * FROM regress_try($$SELECT snowflake_convert_column('conv_text', 'id')$$);
SELECT * FROM regress_try($$SELECT snowflake_convert_column('conv_big', 'id')$$);
SELECT * FROM regress_try($$SELECT snowflake_convert_column('conv_view', 'id')$$);
SELECT * FROM regress_try($$SELECT snowflake_convert_column('conv_other', 'id')$$);
SELECT * FROM regress_try($$SELECT snowflake_convert_column('conv_other', 'nope')$$);
\x off
-- The conversion reads the column's largest value after locking the table,
-- under a snapshot taken after the lock: a REPEATABLE READ transaction keeps
-- an older one, which could miss rows committed before the lock, so the
-- conversion is refused there (25000); the dry run works.
CREATE TABLE conv_rr (id serial PRIMARY KEY);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) > 0 AS dry_run_works FROM snowflake_convert_column('conv_rr', 'id');
SELECT * FROM snowflake_convert_column('conv_rr', 'id', dry_run => false);
ROLLBACK;
DROP TABLE conv_rr;
DROP VIEW conv_view;
DROP TABLE conv_other;
DROP TABLE conv_lines, conv_orders, conv_ident, conv_text, conv_big;
DROP SEQUENCE conv_orders_id_seq;
