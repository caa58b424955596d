#!/usr/bin/env bash
# snowflake_convert_column on a table that is being written to: 4 pgbench
# clients insert a parent row (serial integer id) and a child row that
# references it, in one transaction, for 6 seconds; after 2 seconds the
# parent's id column is converted (dry_run => false). Afterwards:
#   - pgbench reports no failed or aborted transaction;
#   - every committed transaction's rows are there (parents = preloaded +
#     transactions, children = transactions), none lost, none doubled;
#   - the conversion happened mid-load: rows before it have sequence values,
#     rows after it have snowflake IDs of this node, all above the old ones;
#   - parent.id and child.parent_id are bigint, the default is
#     snowflake_next(), every child still joins its parent.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/convert_under_load.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

NODE_ID=3
CLIENTS=4
SECONDS_OF_LOAD=6
PRELOADED=1000

port=$(free_port)
cluster_init n1 "$port" "snowflake_id.node_id = $NODE_ID"
cluster_start n1 || fail "cluster did not start"

psql_on n1 <<SQL
CREATE EXTENSION snowflake_id;
CREATE TABLE parent (id serial PRIMARY KEY, client int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE child (id bigserial PRIMARY KEY, parent_id int NOT NULL REFERENCES parent);
INSERT INTO parent (client) SELECT -1 FROM generate_series(1, $PRELOADED);
SQL

script="$SF_WORK/insert.sql"
cat >"$script" <<'PGBENCH'
WITH p AS (INSERT INTO parent (client) VALUES (:client_id) RETURNING id)
INSERT INTO child (parent_id) SELECT id FROM p;
PGBENCH

pgbench_out="$SF_WORK/pgbench.out"
pgbench -h 127.0.0.1 -p "$port" -U postgres -n -c "$CLIENTS" -j 2 -T "$SECONDS_OF_LOAD" \
  -f "$script" postgres >"$pgbench_out" 2>&1 &
bench_pid=$!
sleep 2

kill -0 "$bench_pid" 2>/dev/null || fail "pgbench ended before the conversion started"
echo "converting parent.id while $CLIENTS clients insert:"
start=$(now_ms)
psql_on n1 -c "SELECT * FROM snowflake_convert_column('parent', 'id', false)"
took=$(( $(now_ms) - start ))
kill -0 "$bench_pid" 2>/dev/null || fail "pgbench ended before the conversion finished: the test did not overlap"
pass "conversion took ${took} ms while pgbench was running"

rc=0
wait "$bench_pid" || rc=$?
grep -E '^(number of (transactions actually processed|failed transactions)|tps)' "$pgbench_out" || true
[ "$rc" -eq 0 ] || { cat "$pgbench_out"; fail "pgbench exited with status $rc"; }
if grep -qiE 'error|abort' "$pgbench_out"; then
  cat "$pgbench_out"; fail "pgbench reported errors"
fi
tx=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$pgbench_out")
[ -n "$tx" ] && [ "$tx" -gt 0 ] || fail "could not read the number of transactions from pgbench"
failed_tx=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$pgbench_out")
[ "${failed_tx:-0}" -eq 0 ] || fail "$failed_tx failed transactions"
pass "pgbench committed $tx transactions, none failed"

parents=$(sql_value n1 "SELECT count(*) FROM parent")
children=$(sql_value n1 "SELECT count(*) FROM child")
[ "$parents" -eq $((PRELOADED + tx)) ] || fail "parent has $parents rows, expected $((PRELOADED + tx))"
[ "$children" -eq "$tx" ] || fail "child has $children rows, expected $tx"
pass "no row lost: $parents parents, $children children"

[ "$(sql_value n1 "SELECT count(*) - count(DISTINCT id) FROM parent")" = 0 ] || fail "duplicate parent ids"
[ "$(sql_value n1 "SELECT count(*) FROM child c JOIN parent p ON p.id = c.parent_id")" = "$tx" ] ||
  fail "some children do not join their parent"
pass "ids unique, every child joins its parent"

old=$(sql_value n1 "SELECT count(*) FROM parent WHERE client >= 0 AND id < 1000000000")
new=$(sql_value n1 "SELECT count(*) FROM parent WHERE id >= 1000000000")
echo "rows inserted under load: $old with sequence values, $new with snowflake IDs"
[ "$old" -gt 0 ] || fail "no row was inserted with the sequence before the conversion"
[ "$new" -gt 0 ] || fail "no row was inserted with a snowflake ID after the conversion"
[ $((old + new)) -eq "$tx" ] || fail "$old + $new rows inserted under load, expected $tx"
[ "$(sql_value n1 "SELECT count(*) FROM parent WHERE id >= 1000000000 AND snowflake_node(id) <> $NODE_ID")" = 0 ] ||
  fail "new IDs are not from node $NODE_ID"
# Rows inserted after the conversion have larger ids than those before it
# (by insertion time: every snowflake row is later than every sequence row).
[ "$(sql_value n1 "SELECT count(*) FROM parent o, (SELECT min(at) AS first_new FROM parent WHERE id >= 1000000000) n
                   WHERE o.id < 1000000000 AND o.at > n.first_new")" = 0 ] ||
  fail "a row with a sequence value was inserted after the first snowflake row"
pass "the conversion happened mid-load, and new IDs are greater than old ones"

[ "$(sql_value n1 "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'parent'::regclass AND attname = 'id'")" = bigint ] ||
  fail "parent.id is not bigint"
[ "$(sql_value n1 "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'child'::regclass AND attname = 'parent_id'")" = bigint ] ||
  fail "child.parent_id is not bigint"
[ "$(sql_value n1 "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum WHERE d.adrelid = 'parent'::regclass AND a.attname = 'id'")" = "snowflake_next()" ] ||
  fail "parent.id's default is not snowflake_next()"
pass "parent.id and child.parent_id are bigint, DEFAULT snowflake_next()"

log_has n1 'terminated by signal|PANIC' && fail "the server log shows a crashed backend"
pass "convert_under_load"
