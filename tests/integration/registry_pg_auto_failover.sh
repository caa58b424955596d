#!/usr/bin/env bash
# Promotion and split brain with a registry (docs/registry-design.md, "Promotion and
# split brain") under a real HA manager: pg_auto_failover (Debian's
# postgresql-15-auto-failover, pg_autoctl 2.0), a monitor and two nodes on
# 127.0.0.1 whose node id comes from the registry's pool
# (snowflake_id.registry set, snowflake_id.node_id unset).
#
# The primary (node1) is isolated, not killed: its pg_autoctl service and
# its PostgreSQL are frozen with SIGSTOP while a writer inserts on it. The
# monitor gets neither reports nor health checks and promotes node2, which
# claims a node id of its own from the registry. node1's PostgreSQL is then
# resumed (SIGCONT) with its pg_autoctl still frozen (a keeper cut off from
# the monitor): node1 takes writes while node2 takes writes too, both for
# 5 s (split brain). Only then is node1's pg_autoctl resumed;
# pg_auto_failover demotes node1 and makes it node2's secondary. (Freezing
# PostgreSQL alone also makes the monitor fail over, but node1's live keeper
# turns it read-only as soon as it is resumed: no split brain. Freezing the
# keeper alone leaves the health checks passing: no failover in 30 s.)
# Every ID either node issued is recorded; pinned down:
#   - no ID issued twice, though both nodes issued at the same time;
#   - node2's node id differs from node1's: node1's claim still stood when
#     node2 asked for its preferred node id (node1's), so node2 got a free
#     one; node1, resumed, kept its claim (renewals succeed, `held`);
#   - node2's IDs all lie above every ID it replayed;
#   - snowflake_stats() on both shows the claim held, the grant ahead of the
#     clock, no hold, no registry error; the registry lists both claims.
#
# The grant is 30 s (the default), longer than the isolation: node1's grant
# must still stand when node2 claims. With a grant shorter than the
# isolation, node1's grant ends while it is frozen and node2 takes node1's
# node id over above it (the floor) instead: node1, resumed, then issues
# nothing (its grant is past, its renewals fail), a case registry_failover.sh
# covers with a fixed node id.
#
# pg_auto_failover makes the primary's commits wait for its standby
# (synchronous_standby_names): on the isolated primary a commit would wait
# forever, though snowflake_next() has handed out the IDs. The writers on
# node1 commit with synchronous_commit = local, so that node1 really takes
# writes after the promotion and the test sees every ID it issued.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_pg_auto_failover.sh
# (SF_REGISTRY_SQL=path: another registry script, to see the test fail with
# a guard of the registry removed; lib_registry.sh reads it.)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

# pg_autoctl under private XDG directories, its cleanup, autoctl_run,
# wait_state, start_monitor, start_nodes (PostgreSQL 15 only: else skipped).
# shellcheck source-path=SCRIPTDIR source=lib_pg_auto_failover.sh
. "$(dirname "$0")/lib_pg_auto_failover.sh"
T0=$(now_ms)
elapsed() { echo "$(( ($(now_ms) - T0) / 1000 )) s"; }

# The registry server `reg`, $REGISTRY, issue (recorded IDs), no_duplicates.
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# The processes frozen with SIGSTOP (process groups as -PGID) and the
# writers, whose stop files end them: before the cleanup stops every
# `pg_autoctl run` (lib_pg_auto_failover.sh), pgaf_before_stop resumes
# the frozen ones and ends the writers.
declare -a FROZEN=() WRITERS=()
pgaf_before_stop() {
  local p
  for p in "${FROZEN[@]}"; do kill -CONT -- "$p" 2>/dev/null; done
  touch "$SF_WORK/stop.node1" "$SF_WORK/stop.node2"
  for p in "${WRITERS[@]}"; do kill "$p" 2>/dev/null; done
}

# writer NAME: inserts 50 IDs at a time on NAME (recorded), committing
# locally, until $SF_WORK/stop.NAME exists (at most 3 minutes); refusals go
# to $SF_WORK/w.NAME.err.
writer() {
  local name=$1 end=$(( $(now_ms) + 180000 ))
  export PGOPTIONS="-c synchronous_commit=local"
  while [ ! -e "$SF_WORK/stop.$name" ] && [ "$(now_ms)" -lt "$end" ]; do
    issue "$name" 50 2>> "$SF_WORK/w.$name.err" || sleep 0.05
  done
}
start_writer() {
  rm -f "$SF_WORK/stop.$1"
  writer "$1" &
  WRITERS+=($!)
}
# stop_writer NAME PID: ends the writer and waits for it.
stop_writer() { touch "$SF_WORK/stop.$1"; wait "$2"; }
# registry_holder NODE_ID: the port and state of the node id's claim.
registry_holder() {
  sql_value reg "SELECT port || ' ' || state FROM snowflake_registry.holders WHERE fleet = 'default' AND node_id = $1"
}
# stats NAME: the registry columns of snowflake_stats(), one line.
stats() {
  sql_value "$1" "SELECT concat_ws(' | ', 'node_id=' || node_id, 'registry_state=' || registry_state,
    'grant ahead ' || round(extract(epoch FROM grant_until - clock_timestamp()))::int || ' s',
    'issuing_held=' || coalesce(issuing_held, 'none'), 'registry_message=' || coalesce(registry_message, 'none'))
    FROM snowflake_stats()"
}
# check_claim_held NAME NODE_ID: snowflake_stats() on NAME shows the claim
# of NODE_ID held, its grant ahead of the clock, no hold, no registry error.
check_claim_held() {
  [ "$(sql_value "$1" "SELECT node_id = $2 AND registry_state = 'held' AND grant_until > clock_timestamp()
      AND issuing_held IS NULL AND registry_message IS NULL FROM snowflake_stats()")" = t ] ||
    fail "$1: snowflake_stats() does not show node id $2's claim held: $(stats "$1")"
}

# --- pg_auto_failover: the monitor (health checks shortened, as in
# failover_pg_auto_failover.sh: start_monitor), node1 with the registry,
# node2 its copy (start_nodes).
start_monitor
start_nodes <<CONF
shared_preload_libraries = 'pg_stat_statements,snowflake_id'
snowflake_id.registry = '$REGISTRY'
snowflake_id.registry_grant = '30s'
shared_buffers = '64MB'
CONF
make_table node1
wait_issuing node1 15
issue node1 2000
wait_for_replay node2 node1
P1_NODE=$(node_of node1)
[ -n "$P1_NODE" ] || fail "node1 has no node id from the registry: $(stats node1)"
check_claim_held node1 "$P1_NODE"
[ "$(sql_value node2 "SHOW snowflake_id.registry")" = "$REGISTRY" ] || fail "node2 did not inherit snowflake_id.registry"
[ "$(sql_value node2 "SELECT node_id IS NULL FROM snowflake_stats()")" = t ] || fail "the standby node2 holds a node id: $(stats node2)"
echo "the standby node2: $(stats node2)"
pass "pg_auto_failover with the registry: node1 primary with node id $P1_NODE from the pool, node2 its secondary, holding none ($(elapsed))"

# --- node1 isolated while a writer inserts on it
start_writer node1
w1=$!
sleep 1
wait_for_replay node2 node1
autoctl_pgid=$(cat "$SF_WORK/node1.autoctl.pid")
pm1=$(head -1 "$(cluster_dir node1)/postmaster.pid")
# The postmaster runs in pg_autoctl's process group, but each of its
# children in a session of its own (PostgreSQL's children call setsid()): the
# group first (the keeper would notice its PostgreSQL stopped), then the
# postmaster's children (the backends, the lease worker: no renewals).
[ "$(ps -o pgid= -p "$pm1" | tr -d ' ')" = "$autoctl_pgid" ] ||
  fail "node1's postmaster is not in its pg_autoctl's process group"
FROZEN+=("-$autoctl_pgid" "$pm1")
kill -STOP -- "-$autoctl_pgid"
kill -STOP "$pm1"; pkill -STOP -P "$pm1" || true
stopped_at=$(now_ms)
stopped_ts=$(sql_value node2 "SELECT clock_timestamp()")
echo "node1 (pg_autoctl and PostgreSQL) stopped with SIGSTOP at $(elapsed)"
wait_state node2 'wait_primary|primary' 60
for _ in $(seq 1 300); do [ "$(sql_value node2 "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && break; sleep 0.1; done
[ "$(sql_value node2 "SELECT pg_is_in_recovery()")" = f ] || fail "node2 was not promoted"
# Before node2 issues: all it has are the rows it replayed.
replayed=$(sql_value node2 "SELECT max(id) FROM t")
replayed_n=$(sql_value node2 "SELECT count(*) FROM t")
promoted_at=$(sql_value node2 "SELECT clock_timestamp()")
echo "node2 promoted $(( $(now_ms) - stopped_at )) ms after node1 was stopped; it replayed $replayed_n IDs up to $replayed"
wait_issuing node2 15
S_NODE=$(node_of node2)
echo "node2 issues under node id $S_NODE $(( $(now_ms) - stopped_at )) ms after node1 was stopped; node1's node id $P1_NODE in the registry: port $(registry_holder "$P1_NODE") (node1's port is $(cluster_port node1))"
start_writer node2
w2=$!

# --- split brain: node1's PostgreSQL resumed (the postmaster and its
# children), its pg_autoctl still frozen
# (The freeze held: node1's lease worker did not renew its claim.)
[ "$(sql_value reg "SELECT max(renewed_at) < '$stopped_ts' FROM snowflake_registry.grants WHERE port = $(cluster_port node1)")" = t ] ||
  fail "node1 renewed its claim while it was stopped with SIGSTOP"
resumed_ts=$(sql_value node2 "SELECT clock_timestamp()")
kill -CONT "$pm1"; pkill -CONT -P "$pm1" || true
FROZEN=("-$autoctl_pgid")
n1_before=$(grep -c $'\t'"$(cluster_port node1)\$" "$ISSUED_BY" || true)
sleep 5
[ ! -s "$SF_WORK/w.node1.err" ] ||
  fail "node1 refused after it was resumed, though its claim should still stand: $(tail -3 "$SF_WORK/w.node1.err")"
stop_writer node1 "$w1"
stop_writer node2 "$w2"
n1_after=$(grep -c $'\t'"$(cluster_port node1)\$" "$ISSUED_BY" || true)
echo "split brain for 5 s: node1 issued $(( n1_after - n1_before )) IDs after it was resumed ($(stats node1)); node2 $(stats node2)"
no_duplicates "split brain under pg_auto_failover (node ids from the pool)"

# Both sides issued after the promotion, under distinct node ids.
if [ -z "$S_NODE" ] || [ "$S_NODE" = "$P1_NODE" ]; then
  fail "the promoted node2 has node id '$S_NODE', the isolated but running node1 $P1_NODE (node1's claim: $(registry_holder "$P1_NODE"))"
fi
# (The freeze held: node1 issued nothing while it was stopped.)
[ "$(sql_value node1 "SELECT count(*) FROM t WHERE snowflake_timestamp(id) BETWEEN '$stopped_ts'::timestamptz + interval '0.5 s' AND '$resumed_ts'")" = 0 ] ||
  fail "node1 issued IDs while it was stopped with SIGSTOP"
n1_split=$(sql_value node1 "SELECT count(*) FROM t WHERE snowflake_timestamp(id) > '$promoted_at'")
[ "$n1_split" -gt 0 ] || fail "node1 issued no ID after node2's promotion: no split brain was tested"
[ "$(sql_value node1 "SELECT count(*) FROM t WHERE snowflake_node(id) <> $P1_NODE")" = 0 ] || fail "node1 has IDs of another node id"
# node2's IDs: all of its node id, all above what it replayed.
[ "$(sql_value node2 "SELECT count(*) FROM t WHERE id > $replayed AND snowflake_node(id) <> $S_NODE")" = 0 ] ||
  fail "node2 issued IDs of another node id than its claim's $S_NODE"
s2_n=$(sql_value node2 "SELECT count(*) FROM t WHERE snowflake_node(id) = $S_NODE")
s2_min=$(sql_value node2 "SELECT min(id) FROM t WHERE snowflake_node(id) = $S_NODE")
[ "$s2_n" -gt 0 ] || fail "node2 issued no ID"
[ "$s2_min" -gt "$replayed" ] || fail "node2's lowest ID $s2_min is not above $replayed, the largest ID it replayed"
[ "$(sql_value node2 "SELECT count(*) FROM t WHERE snowflake_node(id) = $P1_NODE")" = "$replayed_n" ] ||
  fail "node2 has IDs of node1's node id $P1_NODE it did not replay"
# The registry columns of snowflake_stats(), and the registry's view.
check_claim_held node1 "$P1_NODE"
check_claim_held node2 "$S_NODE"
[ "$(registry_holder "$P1_NODE")" = "$(cluster_port node1) held" ] || fail "the registry: node id $P1_NODE is $(registry_holder "$P1_NODE")"
[ "$(registry_holder "$S_NODE")" = "$(cluster_port node2) held" ] || fail "the registry: node id $S_NODE is $(registry_holder "$S_NODE")"
pass "split brain: node1 (node id $P1_NODE) issued $n1_split IDs after node2's promotion, node2 (node id $S_NODE) $s2_n, the lowest above the $replayed it replayed; both claims held ($(elapsed))"

# --- pg_auto_failover resolves it: node1's pg_autoctl resumed, node1 demoted
kill -CONT -- "-$autoctl_pgid"
FROZEN=()
wait_state node1 secondary 90
wait_state node2 primary 30
[ "$(sql_value node1 "SELECT pg_is_in_recovery()")" = t ] || fail "node1 is not a standby after rejoining"
echo "after the rejoin: node1 $(stats node1); node id $P1_NODE in the registry: $(registry_holder "$P1_NODE")"
issue node2 1000
no_duplicates "after node1 rejoined as node2's secondary"
check_claim_held node2 "$S_NODE"
pass "registry_pg_auto_failover ($(elapsed))"
