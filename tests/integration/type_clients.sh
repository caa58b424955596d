#!/usr/bin/env bash
# The snowflake type as applications meet it, on a real server:
#   1. Node.js (examples/node/json_ids.js, the pg package): to_json,
#      row_to_json and jsonb_agg of rows keyed by the type, parsed by
#      JSON.parse, give back every ID exactly; the same rows keyed by bigint
#      do not; the type is read as a string, written as a string or a
#      BigInt, generated keys come back with RETURNING;
#   2. Python (examples/python/snowflake_type.py, psycopg 3): read as str by
#      default and as int with bigint's loaders registered, in text and
#      binary mode; written as int; generated keys;
#   3. Java (examples/java/SnowflakeIds.java, Debian's PostgreSQL JDBC
#      driver): generated keys, getLong/getString, Types.OTHER and a
#      PGobject from getObject, setLong and setObject(Long);
#   4. a bigint key of 1,000,000 rows, with a second index and a bigint
#      foreign key to it, converted with ALTER COLUMN ... TYPE snowflake:
#      the table and every index keep their files (no rewrite, no rebuild),
#      timed; the same check sees the rewrite of an integer column
#      converted to bigint (so it can fail).
# pg_dump/pg_restore of the type: tests/integration/dump_restore.sh.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/type_clients.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
root=$(pwd)
JDBC_JAR=${SF_JDBC_JAR:-/usr/share/java/postgresql.jar}
[ -f "$JDBC_JAR" ] || fail "no PostgreSQL JDBC driver at $JDBC_JAR (Debian's libpostgresql-jdbc-java: scripts/setup.sh installs it)"
command -v java >/dev/null || fail "no java (Debian's default-jdk-headless: scripts/setup.sh installs it)"
client_deps_ensure

NODE_ID=12
port=$(free_port)
cluster_init n1 "$port" "snowflake_id.node_id = $NODE_ID"
cluster_start n1 || fail "cluster did not start"
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres

# --- 1. Node.js
out="$SF_WORK/node.out"
run_example Node.js "$out" bash -c "cd '$root/examples/node' && node json_ids.js"
for f in to_json row_to_json jsonb_agg; do
  grep -qE "^$f +snowflake: 1000 of 1000 IDs exact; bigint: [1-9][0-9]* of 1000 IDs changed by JSON.parse$" "$out" ||
    fail "Node.js: $f did not keep every typed ID and change bigint ones"
done
grep -q '^node json example: ok$' "$out" || fail "the Node.js example did not finish"
[ "$(sql_value n1 "SELECT count(*) FROM api_orders WHERE snowflake_node(id) = $NODE_ID")" = 1002 ] ||
  fail "api_orders does not hold the 1002 rows the Node.js example wrote"
pass "Node.js (pg $NODE_PG_VERSION): JSON.parse gives every ID of the type exactly, not of bigint; read, written, generated keys"

# --- 2. Python
out="$SF_WORK/python.out"
run_example Python "$out" "$PY_CLIENT" "$root/examples/python/snowflake_type.py"
grep -qE '^default: generated key [0-9]{18,19} \(str\)$' "$out" || fail "psycopg did not read the type as str by default"
grep -qE '^with the loaders: generated key [0-9]{18,19} \(int\)$' "$out" || fail "psycopg did not read the type as int with the loaders"
grep -q '^python snowflake type example: ok$' "$out" || fail "the Python example did not finish"
pass "Python (psycopg $PSYCOPG_VERSION): str by default, int with bigint's loaders; written as int; generated keys"

# --- 3. Java
out="$SF_WORK/java.out"
run_example Java "$out" java -cp "$JDBC_JAR" "$root/examples/java/SnowflakeIds.java" \
  "jdbc:postgresql://127.0.0.1:$port/postgres?user=postgres"
grep -qE '^generated key [0-9]{18,19} \(getObject: org.postgresql.util.PGobject\)$' "$out" ||
  fail "JDBC did not return the generated key as the docs say"
grep -q '^java example: ok$' "$out" || fail "the Java example did not finish"
jdbc_version=$(dpkg-query -W -f='${Version}' libpostgresql-jdbc-java 2>/dev/null || true)
pass "Java (PostgreSQL JDBC ${jdbc_version:-?}): generated keys, getLong, setLong, setObject(Long)"

# --- 4. converting a bigint key in place
psql_on n1 -q <<'SQL'
CREATE TABLE big_orders (id bigint PRIMARY KEY, customer int NOT NULL);
CREATE INDEX big_orders_customer ON big_orders (customer, id);
CREATE TABLE big_lines (order_id bigint NOT NULL REFERENCES big_orders (id));
INSERT INTO big_orders SELECT (g::bigint << 22) + 252172774628397056, g % 1000 FROM generate_series(1, 1000000) g;
INSERT INTO big_lines SELECT id FROM big_orders WHERE customer = 7;
ANALYZE big_orders, big_lines;
SQL
# files: the data file of every relation of the two tables, one per line.
files() {
  psql_on n1 -At -c "
    SELECT c.relname || ' ' || pg_relation_filenode(c.oid)
    FROM pg_class c
    WHERE c.relname IN ('big_orders', 'big_lines')
       OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN ('big_orders'::regclass, 'big_lines'::regclass))
    ORDER BY 1"
}
before=$(files)
[ "$(wc -l <<<"$before")" = 4 ] || fail "expected 4 relations (2 tables, 2 indexes): $before"
size=$(sql_value n1 "SELECT pg_size_pretty(pg_total_relation_size('big_orders'))")
start=$(now_ms)
psql_on n1 -q -c "ALTER TABLE big_orders ALTER COLUMN id TYPE snowflake" \
              -c "ALTER TABLE big_lines ALTER COLUMN order_id TYPE snowflake"
took=$(( $(now_ms) - start ))
after=$(files)
[ "$after" = "$before" ] || fail "converting to snowflake rewrote a table or rebuilt an index:
before: $before
after:  $after"
[ "$(sql_value n1 "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'big_orders'::regclass AND attname = 'id'")" = snowflake ] ||
  fail "big_orders.id is not of type snowflake"
[ "$(sql_value n1 "SELECT count(*) FROM big_lines l JOIN big_orders o ON o.id = l.order_id")" = 1000 ] ||
  fail "the foreign key's rows do not join after the conversion"
plan=$(psql_on n1 -At -c "EXPLAIN (COSTS OFF) SELECT customer FROM big_orders WHERE id = 252172774632591360")
grep -q "Index Scan using big_orders_pkey" <<<"$plan" || fail "a lookup by ID does not use the kept index: $plan"
pass "ALTER COLUMN ... TYPE snowflake of a 1,000,000-row key ($size with its indexes) and its foreign key: ${took} ms, no file rewritten"
# The check sees a rewrite: integer to bigint is not binary-coercible.
psql_on n1 -q -c "ALTER TABLE big_orders ALTER COLUMN customer TYPE bigint"
[ "$(files)" != "$before" ] || fail "the file check did not see the rewrite of a conversion of integer to bigint"
pass "the same check sees the rewrite of a conversion of integer to bigint"

pass "type_clients"
