#!/usr/bin/env bash
# Backup and restore: tables that use DEFAULT snowflake_next(), keyed by
# bigint and by the snowflake type (with a foreign key of the type), survive
#   - pg_dump -Fc | pg_restore into a fresh cluster (another node id), and
#   - pg_dumpall | psql into a second fresh cluster,
# both preloading the extension: the same rows with the same IDs, the
# default still snowflake_next(), a converted column and an index on
# snowflake_encode(id) restored too, and new IDs after the restore greater
# than every restored ID (the new cluster's generator starts from its clock,
# which is past the IDs the source issued).
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/dump_restore.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

PG_DUMP="$PG_BIN/pg_dump"
PG_RESTORE="$PG_BIN/pg_restore"
PG_DUMPALL="$PG_BIN/pg_dumpall"

cluster_init src "$(free_port)" "snowflake_id.node_id = 1"
cluster_start src || fail "source cluster did not start"
psql_on src -c "CREATE DATABASE app"
psql_on src -d app <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (
    id   bigint PRIMARY KEY DEFAULT snowflake_next(),
    item text NOT NULL
);
CREATE INDEX orders_public_id ON orders (snowflake_encode(id));
INSERT INTO orders (item) SELECT 'item ' || g FROM generate_series(1, 2000) g;
-- A converted serial column, with its unowned sequence and a foreign key.
CREATE TABLE legacy (id serial PRIMARY KEY, v int);
CREATE TABLE legacy_ref (legacy_id int REFERENCES legacy);
INSERT INTO legacy (v) SELECT g FROM generate_series(1, 100) g;
INSERT INTO legacy_ref SELECT id FROM legacy;
SELECT count(*) AS ddl_statements FROM snowflake_convert_column('legacy', 'id', false);
INSERT INTO legacy (v) SELECT g FROM generate_series(101, 200) g;
-- Keyed by the snowflake type, with a foreign key of the type.
CREATE TABLE typed_orders (
    id   snowflake PRIMARY KEY DEFAULT snowflake_next(),
    item text NOT NULL
);
CREATE TABLE typed_lines (order_id snowflake NOT NULL REFERENCES typed_orders, n int);
INSERT INTO typed_orders (item) SELECT 'typed ' || g FROM generate_series(1, 1000) g;
INSERT INTO typed_lines SELECT id, 1 FROM typed_orders;
SQL

# app_value NAME SQL: one value from database app.
app_value() { psql_on "$1" -d app -At -c "$2"; }

# fingerprint NAME: one line that changes if any row, ID, default or type differs.
fingerprint() {
  psql_on "$1" -d app -At -c "
    SELECT (SELECT md5(string_agg(id || ':' || item, ',' ORDER BY id)) FROM orders)
        || ' ' || (SELECT md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM legacy)
        || ' ' || (SELECT count(*) FROM legacy_ref r JOIN legacy l ON l.id = r.legacy_id)
        || ' ' || (SELECT md5(string_agg(id || ':' || item, ',' ORDER BY id)) FROM typed_orders)
        || ' ' || (SELECT count(*) FROM typed_lines l JOIN typed_orders o ON o.id = l.order_id)
        || ' json ' || (SELECT string_agg(DISTINCT jsonb_typeof(to_jsonb(o) -> 'id'), ',') FROM typed_orders o)
        || ' ' || (SELECT string_agg(a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                     || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-'), ', ' ORDER BY a.attrelid::regclass::text, a.attname)
                   FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                   WHERE a.attrelid IN ('orders'::regclass, 'legacy'::regclass, 'legacy_ref'::regclass,
                                         'typed_orders'::regclass, 'typed_lines'::regclass) AND a.attnum > 0)"
}
before=$(fingerprint src)
max_before=$(app_value src "SELECT max(id) FROM orders")
typed_max_before=$(app_value src "SELECT max(id) FROM typed_orders")
echo "source: $before"
grep -Eq "typed_orders.id snowflake [(]*snowflake_next[(][)]" <<<"$before" || fail "the fingerprint does not show the typed key: $before"
grep -q " json string" <<<"$before" || fail "the typed key is not a JSON string in the source: $before"

dump="$SF_WORK/app.dump"
all="$SF_WORK/all.sql"
"$PG_DUMP" -h 127.0.0.1 -p "$(cluster_port src)" -U postgres -Fc -f "$dump" app
"$PG_DUMPALL" -h 127.0.0.1 -p "$(cluster_port src)" -U postgres -f "$all"
pass "pg_dump -Fc and pg_dumpall done ($(stat -c %s "$dump") and $(stat -c %s "$all") bytes)"
grep -q "DEFAULT public.snowflake_next()" "$all" || fail "the dump has no DEFAULT public.snowflake_next()"
cluster_stop src

# check NAME NODE HOW: the restored database matches the source, and new IDs
# come from NODE and are above every restored ID.
check() {
  local name=$1 node=$2 how=$3 after
  after=$(fingerprint "$name")
  [ "$after" = "$before" ] || fail "$how: restored data differs:
  source:   $before
  restored: $after"
  pass "$how: same rows, IDs, column types and defaults"
  [ "$(app_value "$name" "SELECT indexdef FROM pg_indexes WHERE indexname = 'orders_public_id'")" != "" ] ||
    fail "$how: the index on snowflake_encode(id) is missing"
  [ "$(app_value "$name" "SELECT count(*) FROM orders WHERE snowflake_encode(id) = snowflake_encode($max_before)")" = 1 ] ||
    fail "$how: looking up the last ID by its text form failed"
  psql_on "$name" -d app -c "INSERT INTO orders (item) VALUES ('after restore')" \
                         -c "INSERT INTO legacy (v) VALUES (-1)" \
                         -c "INSERT INTO typed_orders (item) VALUES ('after restore')"
  [ "$(app_value "$name" "SELECT count(*) FROM orders WHERE item = 'after restore' AND id > $max_before AND snowflake_node(id) = $node")" = 1 ] ||
    fail "$how: the new order's ID is not above the restored ones or not from node $node"
  [ "$(app_value "$name" "SELECT count(*) FROM legacy WHERE v = -1 AND id > (SELECT max(id) FROM legacy WHERE v <> -1)")" = 1 ] ||
    fail "$how: the converted column's default did not issue a larger ID"
  [ "$(app_value "$name" "SELECT count(*) FROM typed_orders WHERE item = 'after restore' AND id > $typed_max_before AND snowflake_node(id) = $node")" = 1 ] ||
    fail "$how: the new typed order's ID is not above the restored ones or not from node $node"
  pass "$how: new IDs come from node $node and are above every restored ID"
}

cluster_init r1 "$(free_port)" "snowflake_id.node_id = 2"
cluster_start r1 || fail "restore cluster r1 did not start"
psql_on r1 -c "CREATE DATABASE app"
"$PG_RESTORE" -h 127.0.0.1 -p "$(cluster_port r1)" -U postgres -d app --exit-on-error "$dump" ||
  fail "pg_restore failed"
check r1 2 "pg_dump/pg_restore"

cluster_init r2 "$(free_port)" "snowflake_id.node_id = 3"
cluster_start r2 || fail "restore cluster r2 did not start"
# The only error allowed: the dump's CREATE ROLE postgres, which exists.
restore_log="$SF_WORK/dumpall_restore.log"
psql -X -q -h 127.0.0.1 -p "$(cluster_port r2)" -U postgres -d postgres -f "$all" >"$restore_log" 2>&1 || true
if grep "ERROR" "$restore_log" | grep -v 'role "postgres" already exists' >/dev/null; then
  cat "$restore_log"; fail "restoring the pg_dumpall output had errors"
fi
check r2 3 "pg_dumpall/psql"

pass "dump_restore"
