#!/usr/bin/env bash
# A renewal that meets the registry's fence while the fence's transaction
# is open is told that the fence ended its claim, so its holder resumes the
# claim (issuing never stops) instead of claiming the node id again above
# the fence (issuing stops until the clock reaches it).
#
# renew() read the fleet's row (when it was last fenced) before it waited
# for the lock on the claim's row that the fence held; once the fence
# committed, the claim's row was ended but the fleet's row it had read was
# the one before the fence, so the answer was "the claim ... is lost: it
# was released", which the server does not resume. Seen once in a whole
# suite run on a busy machine (registry_rolling_upgrade: "n1 stopped
# issuing"); here made certain: the fence is held open until the renewal
# waits on its lock. Then the holder resumes the claim.
#
# Only the registry: its functions called as the servers call them.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REGISTRY_SQL=${SF_REGISTRY_SQL:-$ROOT/registry/snowflake_registry.sql}

cluster_init reg "$(free_port)"
as_pg sed -i "/^shared_preload_libraries = 'snowflake_id'$/d" "$(cluster_dir reg)/postgresql.conf"
cluster_start reg
psql_on reg -v ON_ERROR_STOP=1 -f "$REGISTRY_SQL" >/dev/null || fail "the registry script does not install"
psql_on reg -c "SELECT snowflake_registry.create_fleet('default')" >/dev/null

EPOCH=1735689600000
now() { echo $(( $(now_ms) - EPOCH )); }
# claim NODE TOKEN: claims NODE for 60 s; prints the claim's number.
claim() {
  sql_value reg "SELECT claim_id FROM snowflake_registry.claim('default', $EPOCH, 10, 12, $1, NULL, '$2', 1, 'h$1', 1, '/d$1', $(now), 60000)"
}

# fenced_during SQL: SQL run while a fence_after_restore() is open in
# another session, waiting on its lock, then the fence committed; prints
# SQL's answer (its error, with the SQLSTATE).
fenced_during() {
  local fifo="$SF_WORK/fence.in" out="$SF_WORK/during.out" fence_pid during_pid waiting=""
  rm -f "$fifo" && mkfifo "$fifo"
  psql_on reg -X -q -v ON_ERROR_STOP=1 -f - < "$fifo" > "$SF_WORK/fence.out" 2>&1 &
  fence_pid=$!
  exec 7>"$fifo"
  echo "BEGIN; SELECT claims_ended FROM snowflake_registry.fence_after_restore();" >&7
  # (The fence is open once its session waits for the next command.)
  for _ in $(seq 1 100); do
    [ "$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'")" = 1 ] && break
    sleep 0.1
  done
  psql_on reg -X -q -v VERBOSITY=verbose -At -c "$1" > "$out" 2>&1 &
  during_pid=$!
  for _ in $(seq 1 100); do
    waiting=$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
    [ "$waiting" = 1 ] && break
    sleep 0.1
  done
  [ "$waiting" = 1 ] || { echo "COMMIT;" >&7; exec 7>&-; wait; fail "the call did not wait on the open fence: $(cat "$out")"; }
  echo "COMMIT;" >&7
  exec 7>&-
  wait "$fence_pid" || fail "the fence failed: $(cat "$SF_WORK/fence.out")"
  wait "$during_pid" || true
  cat "$out"
}

# --- a renewal that waits on the open fence
c1=$(claim 5 tok-renew-0000000001)
out=$(fenced_during "SELECT snowflake_registry.renew('default', 5, $c1, 'tok-renew-0000000001', $(now), 3000)")
[ "$(sqlstate_of "$out")" = 55000 ] || fail "the renewal that met the fence: not 55000: $out"
grep -q 'is lost: the registry ended every claim at ' <<<"$out" ||
  fail "the renewal that met the fence was not told the fence ended its claim (its holder would not resume): $out"
pass "a renewal that waited on an open fence: 55000, the claim ended by the fence (resumable)"

# ... and its holder resumes it.
until=$(sql_value reg "SELECT until_ms FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = 5")
resumed=$(sql_value reg "SELECT snowflake_registry.resume('default', 5, $c1, 'tok-renew-0000000001', $until, $(now), 3000)") ||
  fail "the claim the fence ended, with its grant running, was not resumed"
[ "$resumed" -ge "$until" ] || fail "the resumed grant ($resumed) ends before the one held ($until)"
pass "its holder resumed it, granted up to $resumed"

pass "registry_fence_race"
