#!/usr/bin/env bash
# The background workers come back, and the registry's I/O stays apart
# from the lease (the registry's worker of its own, which comes back, and
# the keepalives on its connection; docs/registry-design.md, "Starting, stopping,
# crashing" and "A highly available registry").
#
# The lease worker ("snowflake_id lease") used to claim, renew and release
# the node id and extend the lease ahead. Sent SIGTERM alone (an operator's
# kill, a tool that stops stray processes: it is not a backend that
# pg_terminate_backend() reaches), it released the node id and exited with
# status 0, which PostgreSQL never restarts: the server stopped issuing for
# good. Now the registry has a worker of its own ("snowflake_id registry"):
#   1. sent SIGTERM alone, the registry worker is started again within
#      about 5 s and resumes the same claim (the registry sees no new
#      claim, renewals go on); the server issues past the grant it held
#      when the worker was killed, with no ID twice; snowflake_stats() and
#      the log say what happened; it keeps coming back, and so does the
#      lease worker;
#   2. a clean shutdown still releases the node id (the postmaster marks
#      postmaster.pid "stopping" before it signals the workers);
#   3. with a fixed node id and lease_sync = on (backends wait for the
#      lease worker to extend the lease): the lease worker comes back too,
#      and issuing goes on;
#   4. a registry frozen (SIGSTOP) for 4 s under a server with lease_sync =
#      on, which issues all the while: the longest wait between two IDs
#      stays under a second (it was the whole freeze: one worker did the
#      registry calls and the lease extensions the backends wait for);
#   5. the connection to the registry has TCP keepalives of 10 s on both
#      sides (the registry's side was the kernel's 2 hours: after a
#      partition its sessions lingered while servers opened new ones);
#   6. the registry session has a lock_timeout of a second and a
#      statement_timeout below the worker's 5 s: with the registry's tables
#      locked for 8 s no session of the worker waits there more than 1.5 s
#      (each call the worker gave up on stayed behind, waiting).
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# worker_pid NAME KIND: the PID of NAME's "snowflake_id KIND" worker
# (lease or registry; a child of the postmaster).
worker_pid() {
  local pm; pm=$(head -1 "$(cluster_dir "$1")/postmaster.pid")
  ps -o pid=,args= --ppid "$pm" | awk -v kind="snowflake_id $2" 'index($0, kind) && !found { print $1; found = 1 }'
}
# worker_back NAME KIND OLD_PID SECONDS: waits for a KIND worker other than
# OLD_PID; prints its PID, or fails.
worker_back() {
  local i pid
  for i in $(seq 1 $(($4 * 5))); do
    pid=$(worker_pid "$1" "$2")
    if [ -n "$pid" ] && [ "$pid" != "$3" ]; then echo "$pid"; return 0; fi
    sleep 0.2
  done
  fail "$1: no $2 worker came back within $4 s after the SIGTERM of $3 (ps: $(ps -o pid=,args= --ppid "$(head -1 "$(cluster_dir "$1")/postmaster.pid")" | tr '\n' ';'))"
}

# --- 1. SIGTERM of the registry worker alone
node_init w
cluster_start w
make_table w
wait_issuing w 20
node=$(node_of w)
claim=$(sql_value reg "SELECT claim_id FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node")
pid1=$(worker_pid w registry)
[ -n "$pid1" ] || fail "w has no registry worker: $(ps -o pid=,args= --ppid "$(head -1 "$(cluster_dir w)/postmaster.pid")" | tr '\n' ';')"
grant1=$(sql_value w "SELECT (extract(epoch FROM grant_until) * 1000)::bigint FROM snowflake_stats()")
kill -TERM "$pid1"
pid2=$(worker_back w registry "$pid1" 15)
pass "the registry worker, sent SIGTERM alone, was started again ($pid1, then $pid2)"
# Past the grant held at the kill: renewals went on.
sleep $((GRANT_MS / 1000 + 2))
issue w 500 || fail "w stopped issuing after its lease worker was terminated: $(psql_on w -c 'SELECT snowflake_next()' 2>&1 | head -2)"
[ "$(sql_value w "SELECT (extract(epoch FROM grant_until) * 1000)::bigint > $grant1 AND node_id = $node AND registry_state = 'held'
                     AND registry_worker_restarts = 1 AND registry_resumes = 0 FROM snowflake_stats()")" = t ] ||
  fail "w's claim was not resumed: $(sql_value w "SELECT node_id, registry_state, grant_until, registry_message, registry_worker_restarts FROM snowflake_stats()")"
[ "$(sql_value reg "SELECT claim_id FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node")" = "$claim" ] ||
  fail "the restarted worker made a new claim instead of resuming claim $claim"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE fleet = 'default' AND node_id = $node")" = 1 ] ||
  fail "the registry has more than one grant of node id $node"
log_has w "terminated while the server runs" && log_has w "resumes claim $claim of node id $node" ||
  fail "w's log does not say the registry worker was terminated and resumed the claim"
no_duplicates "after the worker's SIGTERM"
pass "it resumed claim $claim of node id $node: renewed past the grant it held when killed, issuing went on, no new claim"

# Twice more, quickly: it keeps coming back; and the lease worker too.
for kind in registry registry lease; do
  old=$(worker_pid w $kind)
  kill -TERM "$old"
  worker_back w $kind "$old" 15 >/dev/null
done
wait_issuing w 10

# --- 2. a clean shutdown still releases
cluster_stop w
[ "$(sql_value reg "SELECT state FROM snowflake_registry.holders WHERE fleet = 'default' AND node_id = $node")" = released ] ||
  fail "a clean shutdown after the worker's restarts did not release node id $node: $(sql_value reg "SELECT state FROM snowflake_registry.holders WHERE node_id = $node")"
pass "a clean shutdown after three restarts of the registry worker and one of the lease worker releases the node id"

# --- 3. a fixed node id, lease_sync = on: backends need the worker
cluster_init f "$(free_port)" "snowflake_id.node_id = 3" "snowflake_id.lease_sync = on"
cluster_start f
psql_on f -c "CREATE EXTENSION snowflake_id" >/dev/null
psql_on f -c "SELECT snowflake_next()" >/dev/null
old=$(worker_pid f lease)
kill -TERM "$old"
worker_back f lease "$old" 15 >/dev/null
[ "$(sql_value f "SELECT count(*) FROM (SELECT snowflake_next() FROM generate_series(1, 200000)) s")" = 200000 ] ||
  fail "f (lease_sync = on) could not issue after its lease worker was terminated"
pass "with a fixed node id and lease_sync = on, the lease worker comes back and issuing goes on"

# --- 4. a frozen registry does not delay the lease (lease_sync = on)
node_init s "snowflake_id.lease_sync = on" "snowflake_id.registry_grant = '20s'"
cluster_start s
make_table s
wait_issuing s 20
psql_on s >/dev/null <<'SQL'
CREATE FUNCTION longest_gap(seconds float8) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    prev timestamptz := clock_timestamp();
    now_ timestamptz;
    gap float8 := 0;
BEGIN
    WHILE clock_timestamp() < t0 + make_interval(secs => seconds) LOOP
        PERFORM snowflake_next();
        now_ := clock_timestamp();
        gap := greatest(gap, extract(epoch FROM now_ - prev));
        prev := now_;
    END LOOP;
    RETURN gap;
END
$$;
SQL
sql_value s "SELECT longest_gap(7)" > "$SF_WORK/gap" &
gap_pid=$!
sleep 1.5
reg_pm=$(head -1 "$(cluster_dir reg)/postmaster.pid")
kill -STOP "$reg_pm"; pkill -STOP -P "$reg_pm"
sleep 4
pkill -CONT -P "$reg_pm"; kill -CONT "$reg_pm"
wait "$gap_pid" || fail "s could not issue while the registry was frozen"
gap=$(cat "$SF_WORK/gap")
awk -v g="$gap" 'BEGIN { exit !(g < 1.0) }' ||
  fail "with the registry frozen for 4 s, s (lease_sync = on) waited ${gap} s between two IDs"
pass "with the registry frozen for 4 s, the longest wait between two IDs on a server with lease_sync = on was ${gap} s"

# --- 5. TCP keepalives on both sides of the registry connection
# (A server of its own reaching the registry over TCP, allowed by name: the
# others use its Unix socket.)
node_init k "snowflake_id.registry = 'host=127.0.0.1 port=$(cluster_port reg) dbname=postgres user=fleet_node'" "$ALLOW_UNVERIFIED"
cluster_start k
make_table k
wait_issuing k 20
reg_port=$(cluster_port reg)
client_port=$(sql_value reg "SELECT client_port FROM pg_stat_activity WHERE application_name = 'snowflake_id registry' AND client_port IS NOT NULL LIMIT 1")
[ -n "$client_port" ] || fail "no session of a registry worker on the registry (pg_stat_activity: $(sql_value reg "SELECT string_agg(application_name, ', ') FROM pg_stat_activity"))"
keepalive_s() { # the keepalive timer of a socket, in seconds (ss -o), or nothing
  ss -tnoH state established "( sport = :$1 and dport = :$2 )" |
    grep -o 'timer:(keepalive,[^,]*' | head -1 | sed -E 's/.*keepalive,//' |
    awk '/min$/ { print $0 * 60; next } /ms$/ { print $0 / 1000; next } { print $0 + 0 }'
}
for side in "$reg_port $client_port registry's" "$client_port $reg_port server's"; do
  read -r from to who <<< "$side"
  t=$(keepalive_s "$from" "$to")
  [ -n "$t" ] || fail "the $who side of the registry connection has no keepalive timer: $(ss -tnoH state established "( sport = :$from and dport = :$to )")"
  awk -v t="$t" 'BEGIN { exit !(t <= 10.5) }' || fail "the $who side's keepalive timer is $t s, not at most 10 s"
done
pass "the registry connection has TCP keepalives of at most 10 s on both sides"

# --- 6. The registry session's time limits: nothing left waiting
# An operator's transaction keeps the registry's node_ids locked for 8 s.
# The worker's renewals fail within a second (its session's lock_timeout)
# rather than wait; each call it gave up on (after 5 s) used to stay behind
# at the registry, waiting on the lock, while the worker opened another
# session.
psql_on reg -c "BEGIN" -c "LOCK TABLE snowflake_registry.node_ids IN ACCESS EXCLUSIVE MODE" \
  -c "SELECT pg_sleep(8)" -c "COMMIT" >/dev/null &
locker=$!
most_sessions=0
while kill -0 "$locker" 2>/dev/null; do
  read -r waiting sessions <<< "$(sql_value reg "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock' AND clock_timestamp() - query_start > interval '1.5 s'), count(*) FROM pg_stat_activity WHERE application_name = 'snowflake_id registry'" | tr '|' ' ')"
  [ "$waiting" = 0 ] ||
    fail "a registry worker's session waited on a lock for more than 1.5 s: $(sql_value reg "SELECT string_agg(format('%s %s %s', pid, state, clock_timestamp() - query_start), '; ') FROM pg_stat_activity WHERE application_name = 'snowflake_id registry'")"
  [ "$sessions" -le "$most_sessions" ] || most_sessions=$sessions
  sleep 0.2
done
wait "$locker"
[ "$most_sessions" -le 2 ] || fail "the registry had up to $most_sessions sessions of the registry workers of s and k (one each) while its tables were locked"
wait_issuing s 20
pass "with the registry's node_ids locked for 8 s, no worker session waited on it for more than 1.5 s, at most $most_sessions were open (s and k, one each), and s issues again"
no_duplicates "the end"
