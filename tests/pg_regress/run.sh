#!/usr/bin/env bash
# Runs the pg_regress suite (tests/pg_regress/sql, expected output in
# tests/pg_regress/expected) with PostgreSQL's own pg_regress against a
# throwaway cluster that preloads snowflake_id with node id 5 and the test
# keys of public IDs (versions 1 and 2, tests/integration/lib.sh). The installed
# extension is used: run `cargo pgrx install` first (scripts/test.sh does).
# The server is PG_BIN's (default Debian's 15): for another version,
#   PG_BIN=$(dirname "$(scripts/pg_config.sh 17)") tests/pg_regress/run.sh
#
# The tests are discovered: every sql/NAME.sql runs, setup.sql first (it
# creates the extension and the helpers), the others in name order, each
# compared with expected/NAME.out. A test without an expected file fails
# (create it with SF_REGRESS_ACCEPT=1 and read it before committing).
#
#   tests/pg_regress/run.sh            run every test
#   tests/pg_regress/run.sh usage      run some
#   SF_REGRESS_ACCEPT=1 tests/pg_regress/run.sh   rewrite expected/ from the results
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/lib.sh"

PG_REGRESS=$(dirname "$("$PG_BIN/pg_config" --pgxs)")/../test/regress/pg_regress
tests=()
for arg in "$@"; do tests+=("$(basename "${arg%.sql}")"); done
if [ ${#tests[@]} -eq 0 ]; then
  for f in "$here"/sql/*.sql; do
    name=$(basename "$f" .sql)
    [ "$name" = setup ] || tests+=("$name")
  done
fi
for t in setup "${tests[@]}"; do
  [ -f "$here/sql/$t.sql" ] || { echo "no such test: $here/sql/$t.sql" >&2; exit 2; }
  if [ ! -f "$here/expected/$t.out" ] && [ -z "${SF_REGRESS_ACCEPT:-}" ]; then
    echo "no expected output for $t: create $here/expected/$t.out (SF_REGRESS_ACCEPT=1 $0 $t)" >&2
    exit 2
  fi
done

port=$(free_port)
cluster_init regress "$port" "snowflake_id.node_id = 5" "max_parallel_workers_per_gather = 0" "max_prepared_transactions = 5" \
  "snowflake_id.public_id_keys = 'public_id.keys'"
# The test keys of public IDs (versions 1 and 2), in the data directory.
public_keys_write "$(cluster_dir regress)/public_id.keys"
cluster_start regress

out="$SF_WORK/regress_out"
mkdir -p "$out"
chmod 777 "$out"
status=0
# From the repository root, so that tests can \i files of examples/.
cd "$here/../.."
# --bindir: pg_regress would otherwise look for psql where its server was
# built (a wheel's build directory, for 16 and 18).
PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres "$PG_REGRESS" \
  --inputdir="$here" --outputdir="$out" --bindir="$PG_BIN" \
  --dbname=snowflake_regress \
  setup "${tests[@]}" || status=$?
if [ $status -ne 0 ]; then
  [ -f "$out/regression.diffs" ] && cat "$out/regression.diffs"
fi
if [ -n "${SF_REGRESS_ACCEPT:-}" ]; then
  for t in setup "${tests[@]}"; do cp "$out/results/$t.out" "$here/expected/$t.out"; done
  echo "expected output rewritten from this run"
fi
exit $status
