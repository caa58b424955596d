#!/usr/bin/env bash
# snowflake_next_batch_array(n) of a batch that does not fit in memory must
# fail as an ordinary error (53200, out of memory) that ends the statement,
# not abort the backend: an abort restarts the whole cluster and cuts every
# session. The server runs under a virtual memory limit (ulimit -v, about
# 700 MB), and a batch of 100,000,000 IDs (800 MB) is asked for: its array
# is allocated in PostgreSQL's memory, where the failure is an error. Before,
# it was built in a Rust Vec, whose failed allocation aborted the process.
# A batch that fits (10,000,000 IDs) works under the same limit, and no ID
# is consumed by the failed call.
#
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/batch_memory.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
LIMIT_KB=700000

# 100,000,000 IDs span 24,415 ms of 4096 IDs: the drift limit must allow it.
cluster_init mem "$(free_port)" "snowflake_id.node_id = 4" "snowflake_id.max_clock_drift = '30s'" \
  "shared_buffers = '32MB'"
dir=$(cluster_dir mem)
(cd / && as_pg bash -c "ulimit -v $LIMIT_KB && exec '$PG_BIN/pg_ctl' -D '$dir' -l '$(cluster_log mem)' -w -t 60 start" >/dev/null)
psql_on mem -c "CREATE EXTENSION snowflake_id"
started=$(sql_value mem "SELECT pg_postmaster_start_time()")

# Another session, busy throughout: it must not be cut.
psql_on mem -At -c "SELECT pg_sleep(4), 'bystander done'" > "$SF_WORK/bystander.out" 2>&1 &
bystander=$!
sleep 0.5

before=$(sql_value mem "SELECT ids_issued FROM snowflake_stats()")
out=$(sql_error mem "SELECT cardinality(snowflake_next_batch_array(100000000))") ||
  fail "a batch of 800 MB succeeded under a ${LIMIT_KB} kB limit: the test does not test"
printf '%s\n' "$out" | sed 's/^/  /'
[ "$(sqlstate_of "$out")" = 53200 ] || fail "expected SQLSTATE 53200 (out of memory), got '$(sqlstate_of "$out")'"
pass "a batch array of 100,000,000 IDs beyond the memory limit fails with 53200"

wait "$bystander" || { cat "$SF_WORK/bystander.out"; fail "another session was cut while the batch failed"; }
grep -q 'bystander done' "$SF_WORK/bystander.out" || fail "the other session did not finish"
[ "$(sql_value mem "SELECT pg_postmaster_start_time()")" = "$started" ] || fail "the server restarted"
log_has mem 'terminated by signal|was terminated|PANIC' && fail "the log shows a crashed backend"
[ "$(sql_value mem "SELECT ids_issued FROM snowflake_stats()")" = "$before" ] ||
  fail "the failed batch consumed IDs"
pass "no restart, the other session finished, no ID consumed"

got=$(sql_value mem "SELECT cardinality(a) = 10000000 AND a[1] < a[10000000] FROM snowflake_next_batch_array(10000000) AS a")
[ "$got" = t ] || fail "a batch array of 10,000,000 IDs did not work under the limit: $got"
pass "a batch array of 10,000,000 IDs works under the same limit"
