#!/usr/bin/env bash
# Runs the client examples against a throwaway cluster:
#   - examples/python/orders.py with psycopg 3 (installed from PyPI into
#     examples/python/.venv, once; later runs reuse it): IDs are Python ints;
#   - examples/node/ids.js with the pg package (npm ci into
#     examples/node/node_modules from the committed package-lock.json, once):
#     int8 arrives as a string, Number() would not be exact, and every text
#     form round-trips.
# Each example asserts what it shows and exits non-zero if anything is off;
# this script also checks their output.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/client_examples.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
root=$(pwd)
py_dir="$root/examples/python"
node_dir="$root/examples/node"

# --- dependencies (idempotent)
client_deps_ensure

# --- cluster
NODE_ID=9
port=$(free_port)
cluster_init n1 "$port" "snowflake_id.node_id = $NODE_ID"
cluster_start n1 || fail "cluster did not start"
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres

# --- Python
out="$SF_WORK/python.out"
run_example Python "$out" "$PY_CLIENT" "$py_dir/orders.py"
grep -qE '^inserted id [0-9]{16,19} \(int\)$' "$out" || fail "the Python example did not read the ID as an int"
grep -q "node $NODE_ID," "$out" || fail "the Python example did not decode node $NODE_ID"
grep -q '^python example: ok$' "$out" || fail "the Python example did not finish"
[ "$(sql_value n1 "SELECT count(*) FROM py_orders WHERE snowflake_node(id) = $NODE_ID")" = 101 ] ||
  fail "py_orders does not hold the 101 rows the example inserted"
pass "Python (psycopg $PSYCOPG_VERSION): rows inserted, IDs read back as int"

# --- Node.js
out="$SF_WORK/node.out"
run_example Node.js "$out" bash -c "cd '$node_dir' && node ids.js"
grep -qE '^inserted id [0-9]{16,19} \(string\)$' "$out" || fail "int8 did not arrive as a string"
grep -q 'not a safe integer' "$out" || fail "the Node.js example did not show the precision problem"
for f in base62 base32 hex decimal; do
  grep -qE "^$f +[0-9A-Za-z]+$" "$out" || fail "the Node.js example did not round-trip $f"
done
grep -q '^node example: ok$' "$out" || fail "the Node.js example did not finish"
pass "Node.js (pg $NODE_PG_VERSION): int8 as string, text forms round-trip"

pass "client_examples"
