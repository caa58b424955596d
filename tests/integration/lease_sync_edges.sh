#!/usr/bin/env bash
# snowflake_id.lease_sync = on where the synchronous wait cannot happen the
# usual way (the review mends of the lease in the WAL, which had no failing
# test):
#   - synchronous_standby_names is set but max_wal_senders = 0: no standby
#     can ever confirm, and PostgreSQL's own commits do not wait then; the
#     lease does not wait either, and IDs are issued at once (before the
#     mend, every call that needed a lease waited for ever);
#   - the lease worker cannot run (max_worker_processes = 0): a call that
#     needs a lease gives up after 15 s with 58030 and a message naming the
#     worker and max_worker_processes, instead of waiting for ever;
#   - a synchronous standby that never confirms: calls wait, and
#     snowflake_stats().lease_waiting says so; lease_sync turned off
#     (ALTER SYSTEM, reload) frees them within seconds.
#
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/lease_sync_edges.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

# --- no WAL senders
cluster_init nosend "$(free_port)" "snowflake_id.node_id = 1" "snowflake_id.lease_sync = on" \
  "wal_level = minimal" "max_wal_senders = 0" "synchronous_standby_names = '*'"
cluster_start nosend
psql_on nosend -c "CREATE EXTENSION snowflake_id"
start=$(now_ms)
out=$(PGOPTIONS="-c statement_timeout=10s" psql_on nosend -At -c "SELECT count(*) FROM (SELECT snowflake_next() FROM generate_series(1, 100000)) s" 2>&1) ||
  fail "lease_sync with max_wal_senders = 0: snowflake_next() did not return ($out)"
[ "$out" = 100000 ] || fail "lease_sync with max_wal_senders = 0: $out"
pass "lease_sync with synchronous_standby_names but max_wal_senders = 0: 100000 IDs in $(( $(now_ms) - start )) ms, no wait for a standby that cannot exist"
cluster_stop nosend

# --- no lease worker
cluster_init noworker "$(free_port)" "snowflake_id.node_id = 1" "snowflake_id.lease_sync = on" \
  "max_worker_processes = 0" "max_parallel_workers = 0"
cluster_start noworker
psql_on noworker -c "CREATE EXTENSION snowflake_id"
start=$(now_ms)
out=$(PGOPTIONS="-c statement_timeout=60s" sql_error noworker "SELECT snowflake_next()") ||
  fail "lease_sync without a lease worker: snowflake_next() issued an ID"
took=$(( $(now_ms) - start ))
printf '%s\n' "$out" | sed 's/^/  /'
[ "$(sqlstate_of "$out")" = 58030 ] || fail "lease_sync without a lease worker: expected 58030, got '$(sqlstate_of "$out")'"
grep -q 'lease worker.*has not been running for 15 s; check max_worker_processes' <<<"$out" ||
  fail "lease_sync without a lease worker: the message does not name the worker and max_worker_processes"
grep -q '^HINT:  With snowflake_id.lease_sync = on only the lease worker' <<<"$out" ||
  fail "lease_sync without a lease worker: the hint does not say how to give it a slot"
[ "$took" -ge 14000 ] && [ "$took" -lt 40000 ] || fail "lease_sync without a lease worker: gave up after $took ms (expected about 15 s)"
pass "lease_sync without a lease worker: 58030 after $took ms, naming max_worker_processes"

# --- lease_sync turned off while calls wait for a standby that never comes
# A synchronous standby that never confirms (synchronous_standby_names names
# one that does not exist): a call that needs a lease waits. Turning
# lease_sync off and reloading must free it within seconds (it used to wait
# on until cancelled: a backend reads a reload only between statements).
# The clients' own commits are local (synchronous_commit = local), so that
# only the lease waits.
cluster_init nosync "$(free_port)" "snowflake_id.node_id = 1" "snowflake_id.lease_sync = on" \
  "synchronous_standby_names = 'nobody'"
cluster_start nosync
PGOPTIONS="-c synchronous_commit=local" psql_on nosync -c "CREATE EXTENSION snowflake_id"
start=$(now_ms)
PGOPTIONS="-c synchronous_commit=local" timeout 40 psql -X -At -h 127.0.0.1 -p "$(cluster_port nosync)" -U postgres -d postgres \
  -c "SELECT count(*) FROM (SELECT snowflake_next() FROM generate_series(1, 1000)) s" > "$SF_WORK/nosync.out" 2>&1 &
waiting=$!
sleep 3
kill -0 "$waiting" 2>/dev/null || { cat "$SF_WORK/nosync.out"; fail "lease_sync with a standby that never confirms: the call did not wait"; }
[ "$(sql_value nosync "SELECT lease_waiting FROM snowflake_stats()")" = t ] ||
  fail "snowflake_stats().lease_waiting is not true while a call waits for the lease"
PGOPTIONS="-c synchronous_commit=local" psql_on nosync -c "ALTER SYSTEM SET snowflake_id.lease_sync = off" -c "SELECT pg_reload_conf()" >/dev/null
turned_off=$(now_ms)
rc=0
wait "$waiting" || rc=$?
freed_after=$(( $(now_ms) - turned_off ))
[ "$rc" -ne 124 ] || fail "lease_sync turned off: the waiting call still waited 40 s after the call began"
[ "$rc" -eq 0 ] && [ "$(cat "$SF_WORK/nosync.out")" = 1000 ] || { cat "$SF_WORK/nosync.out"; fail "lease_sync turned off: the waiting call failed (rc=$rc)"; }
[ "$freed_after" -lt 5000 ] || fail "lease_sync turned off: the waiting call returned $freed_after ms after the reload"
[ "$(sql_value nosync "SELECT lease_waiting FROM snowflake_stats()")" = f ] ||
  fail "snowflake_stats().lease_waiting is still true after the wait ended"
pass "lease_sync turned off and reloaded: the call waiting for a standby that never confirms returned 1000 IDs $freed_after ms later"
cluster_stop nosync
