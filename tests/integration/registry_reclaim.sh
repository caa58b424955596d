#!/usr/bin/env bash
# A registry failover under a writing fleet (docs/registry.md, "When the
# registry fails over"): the registry has a synchronous streaming standby;
# four servers take node ids from it through a connection string that
# names both (target_session_attrs=read-write) and write all along. The
# registry's primary is killed and its standby promoted: a new timeline, so
# the registry fences the fleet (every claim ends; every floor at least
# its clock plus the fleet's max_grant_ms, here 8 s).
#
# Each server is told at its next renewal that its claim ended, claims the
# same node id again by itself (a new token), and issues again once its
# clock is near the fence (within snowflake_id.max_clock_drift, 5 s): no
# restart, no person. (Before, each stopped at its grant's end and stayed
# stopped until restarted: the whole fleet.) Checked: every server issues
# again, with its own node id, above the fence; no ID twice; and the longest
# time each server's writer could not issue, against the bound: the fence
# less the drift limit, plus a renewal and a retry.
#
# Also: lowering a fleet's max_grant_ms keeps the longer bound's reach for
# the fences that follow (the grants given under it may reach that far).
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

MAX_GRANT_MS=8000
DRIFT_MS=5000
SERVERS=(n1 n2 n3 n4)

# --- the registry's synchronous standby
cluster_basebackup regs "$(free_port)" reg
as_pg touch "$(cluster_dir regs)/standby.signal"
cluster_start regs || fail "the registry's standby did not start"
cluster_conf reg "synchronous_standby_names = '*'"
psql_on reg -c "SELECT pg_reload_conf()" >/dev/null
psql_on reg -c "SELECT snowflake_registry.create_fleet('reclaim')" \
  -c "UPDATE snowflake_registry.fleets SET max_grant_ms = $MAX_GRANT_MS WHERE fleet = 'reclaim'" >/dev/null
[ "$(sql_value reg "SELECT reach_until_unix_ms FROM snowflake_registry.fleets WHERE fleet = 'reclaim'")" = -1 ] ||
  fail "lowering the bound of a fleet that never granted anything kept a reach"
BOTH="host=127.0.0.1,127.0.0.1 port=$(cluster_port reg),$(cluster_port regs) dbname=postgres user=fleet_node target_session_attrs=read-write"

for s in "${SERVERS[@]}"; do
  node_init "$s" "snowflake_id.registry = '$BOTH'" "snowflake_id.registry_fleet = 'reclaim'"
  cluster_start "$s"
  make_table "$s"
done
declare -A NODE
for s in "${SERVERS[@]}"; do
  wait_issuing "$s" 20
  NODE[$s]=$(node_of "$s")
done
pass "four servers claimed node ids ${NODE[*]} of fleet reclaim through a connection string naming both registry servers"

# writer NAME MS: inserts (recorded) on NAME for MS ms; the time of each
# success goes to $SF_WORK/ok.NAME.
writer() {
  local name=$1 end=$(( $(now_ms) + $2 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    if issue "$name" 20 2>> "$SF_WORK/w.$name.err"; then now_ms >> "$SF_WORK/ok.$name"; fi
    sleep 0.02
  done
}
pids=()
for s in "${SERVERS[@]}"; do
  writer "$s" 30000 &
  pids+=($!)
done
sleep 3
# --- the failover: the primary killed, the synchronous standby promoted
failover_at=$(now_ms)
cluster_kill9 reg
promote regs
wait "${pids[@]}"
fence=$(sql_value regs "SELECT fence_ms FROM snowflake_registry.fleets WHERE fleet = 'reclaim'")
[ "$(sql_value regs "SELECT count(*) FROM snowflake_registry.fences WHERE fleet = 'reclaim'")" -ge 1 ] ||
  fail "the promoted registry did not fence the fleet (a new timeline)"
no_duplicates "registry failover"

report=""
for s in "${SERVERS[@]}"; do
  [ "$(node_of "$s")" = "${NODE[$s]}" ] || fail "$s has node id $(node_of "$s") after the failover, not its ${NODE[$s]}"
  after=$(awk -v t="$failover_at" '$1 > t' "$SF_WORK/ok.$s" | wc -l)
  [ "$after" -gt 0 ] || fail "$s issued nothing after the failover: $(tail -2 "$SF_WORK/w.$s.err")"
  last=$(sql_value "$s" "SELECT max(id) FROM t")
  [ $((last >> 22)) -gt "$fence" ] || fail "$s's last ID (time $((last >> 22))) is not above the fence $fence"
  [ "$(sql_value "$s" "SELECT registry_state FROM snowflake_stats()")" = held ] ||
    fail "$s: $(sql_value "$s" "SELECT registry_state, registry_message FROM snowflake_stats()")"
  gap=$(awk -v t="$failover_at" 'NR > 1 && $1 > t && $1 - prev > max { max = $1 - prev } { prev = $1 } END { print max + 0 }' "$SF_WORK/ok.$s")
  # The fence lies MAX_GRANT_MS past the failover; issuing resumes DRIFT_MS
  # before it; allow a renewal interval (grant / 6), a retry and slack.
  [ "$gap" -le $(( MAX_GRANT_MS - DRIFT_MS + 3000 )) ] ||
    fail "$s could not issue for $gap ms, more than the fence less the drift limit plus 3 s"
  report+=" ${s}: ${gap} ms;"
done
pass "registry failover: every server claimed its node id again by itself and issued above the fence; longest time without an ID:$report"

# --- lowering max_grant_ms keeps the longer bound's reach
sql_value regs "UPDATE snowflake_registry.fleets SET max_grant_ms = 1000 WHERE fleet = 'reclaim'" >/dev/null
reach=$(sql_value regs "SELECT reach_until_unix_ms - epoch_unix_ms FROM snowflake_registry.fleets WHERE fleet = 'reclaim'")
now=$(( $(now_ms) - 1735689600000 ))
[ "$reach" -ge $(( now + MAX_GRANT_MS - 1000 )) ] ||
  fail "lowering max_grant_ms kept no reach ($reach, now $now)"
sql_value regs "SELECT * FROM snowflake_registry.fence_after_restore()" >/dev/null
fence2=$(sql_value regs "SELECT fence_ms FROM snowflake_registry.fleets WHERE fleet = 'reclaim'")
[ "$fence2" -ge "$reach" ] || fail "a fence after lowering max_grant_ms lies at $fence2, below the old bound's reach $reach"
pass "a fence after max_grant_ms was lowered still reaches the old bound ($((fence2 - now)) ms ahead)"
