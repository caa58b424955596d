#!/usr/bin/env bash
# A registry failover under a writing fleet (docs/registry-tests.md, "A failover of the
# registry"): the registry has a synchronous streaming standby;
# four servers take node ids from it through a connection string that
# names both (target_session_attrs=read-write) and write all along, with a
# 12 s grant (renewed every 2 s). The registry's primary is killed and its
# standby promoted: a new timeline, so the registry fences the fleet (every
# claim ends; every floor at least its clock plus the fleet's
# max_grant_ms, here 15 s).
#
#   1. n1, n2, n3 are told at their next renewal that the fence ended
#      their claims, and resume them (snowflake_registry.resume: the claim
#      is the node id's last, with its token, and its grant has not ended),
#      reporting the grants they hold: issuing never stops. Checked: each
#      resumed, and the longest time each writer could not issue is below
#      one renewal interval (2 s). (Before, each claimed its node id again
#      above the fence and could not issue for max_grant_ms less
#      max_clock_drift: about 10 s here, a minute with the defaults.)
#   2. n4 is frozen (SIGSTOP) from before the failover until its grant has
#      ended: it cannot resume (another server could have taken its node id
#      over in a history the registry lost), and claims its node id again
#      above the fence, by itself.
#   3. The registry's primary (the promoted standby) runs with
#      synchronous_commit = off and is killed and started again under the
#      same writers: the same timeline, no fence; every renewal it
#      acknowledged survived; the longest time without an ID is measured.
#   4. The registry's functions, called as the client role: a claim of a
#      fixed node id whose claim is live is refused also for the same
#      identity (the holder's own restart, or a copy: before, it took the
#      claim over at once, and the holder stopped); resume() is refused
#      with a wrong token and for a grant that has ended.
#   5. A second fence while a claim made again waits for its floor: the
#      claim is resumed, and its node id published when the clock nears
#      the floor.
#
# Also: lowering a fleet's max_grant_ms keeps the longer bound's reach for
# the fences that follow (the grants given under it may reach that far).
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

MAX_GRANT_MS=15000
GRANT_MS=12000
RENEW_MS=$(( GRANT_MS / 6 ))
SERVERS=(n1 n2 n3 n4)
EPOCH=1735689600000

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
  node_init "$s" "snowflake_id.registry = '$BOTH'" "snowflake_id.registry_fleet = 'reclaim'" "$ALLOW_UNVERIFIED" \
    "snowflake_id.registry_grant = '${GRANT_MS}ms'"
  cluster_start "$s"
  make_table "$s"
done
declare -A NODE
for s in "${SERVERS[@]}"; do
  wait_issuing "$s" 20
  NODE[$s]=$(node_of "$s")
done
pass "four servers claimed node ids ${NODE[*]} of fleet reclaim through a connection string naming both registry servers"

# reg_call SQL: SQL as the client role on the registry's primary, through
# both hosts; reg_error SQL: its error (SQLSTATE and message), or fail.
reg_call() {
  psql -X -q -At -v ON_ERROR_STOP=1 -d "$BOTH" -c "$1"
}
reg_error() {
  local out
  out=$(psql -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -d "$BOTH" -c "$1" 2>&1) &&
    fail "not refused: $1 (answered $out)"
  echo "$out"
}
now_id_ms() { echo $(( $(now_ms) - EPOCH )); }
# probe_claim NODE TOKEN GRANT_MS: a fixed claim as the client role, with
# the identity of a made-up server; prints claim_id.
probe_claim() {
  reg_call "SELECT claim_id FROM snowflake_registry.claim('reclaim', $EPOCH, 10, 12, $1, NULL, '$2', 77, 'probe-host', 1, '/probe', $(now_id_ms), $3)"
}

# --- 4a. a live claim is not taken over by a claim of the same identity
probe1=$(probe_claim 1000 probe-token-0000000001 60000)
out=$(reg_error "SELECT * FROM snowflake_registry.claim('reclaim', $EPOCH, 10, 12, 1000, NULL, 'probe-token-0000000002', 77, 'probe-host', 1, '/probe', $(now_id_ms), 60000)")
grep -q "55000" <<<"$out" && grep -q "previous run" <<<"$out" ||
  fail "a claim of the same identity was not refused as the holder's previous run: $out"
[ "$(sql_value reg "SELECT claim_id FROM snowflake_registry.node_ids WHERE fleet = 'reclaim' AND node_id = 1000")" = "$probe1" ] ||
  fail "the live claim of node id 1000 was taken over"
# (A second probe with a grant of 2 s: ended by the time the fence comes.)
probe2=$(probe_claim 1001 probe-token-0000000003 2000)
pass "a live claim is refused to a claim of the same identity (system identifier, host, port, data directory)"

pids=()
for s in "${SERVERS[@]}"; do
  timed_writer "$s" 32000 &
  pids+=($!)
done
sleep 2
# n4 frozen, every process of it, until its grant has surely ended.
n4_pid=$(head -1 "$(cluster_dir n4)/postmaster.pid")
kill -STOP "$n4_pid"; pkill -STOP -P "$n4_pid"
n4_frozen_at=$(now_ms)
sleep 1
# --- the failover: the primary killed, the synchronous standby promoted
failover_at=$(now_ms)
cluster_kill9 reg
promote regs

# --- 4b. resume(), as the client role
out=$(reg_error "SELECT snowflake_registry.resume('reclaim', 1000, $probe1, 'not-the-token-00000001', $(( $(now_id_ms) + 5000 )), $(now_id_ms), 60000)")
grep -q "55000" <<<"$out" && grep -q "does not know it" <<<"$out" ||
  fail "resume() with a wrong token was not refused: $out"
out=$(reg_error "SELECT snowflake_registry.resume('reclaim', 1000, NULL, NULL, $(( $(now_id_ms) + 5000 )), $(now_id_ms), 60000)")
grep -q "22023" <<<"$out" || fail "resume() with no claim or token was not refused: $out"
until1=$(reg_call "SELECT snowflake_registry.resume('reclaim', 1000, $probe1, 'probe-token-0000000001', 0, $(now_id_ms), 60000)")
[ "$until1" -gt "$(now_id_ms)" ] || fail "the probe's claim was not resumed: $until1"
[ "$(sql_value regs "SELECT resumed || ' ' || (ended IS NULL) FROM snowflake_registry.grants WHERE claim_id = $probe1")" = "1 true" ] ||
  fail "the resumed claim's grant row: $(sql_value regs "SELECT resumed, ended FROM snowflake_registry.grants WHERE claim_id = $probe1")"
out=$(reg_error "SELECT snowflake_registry.resume('reclaim', 1001, $probe2, 'probe-token-0000000003', 0, $(now_id_ms), 2000)")
grep -q "55000" <<<"$out" && grep -q "grant ended" <<<"$out" ||
  fail "resume() of a claim whose grant had ended was not refused: $out"
pass "resume(): refused with another token and after the grant's end; with its token and its grant running, the claim goes on"

sleep $(( (GRANT_MS + 2000 - ($(now_ms) - n4_frozen_at)) / 1000 + 1 ))
kill -CONT "$n4_pid"; pkill -CONT -P "$n4_pid"
n4_thawed_at=$(now_ms)
wait "${pids[@]}"
fence=$(sql_value regs "SELECT fence_ms FROM snowflake_registry.fleets WHERE fleet = 'reclaim'")
[ "$(sql_value regs "SELECT count(*) FROM snowflake_registry.fences WHERE fleet = 'reclaim'")" -ge 1 ] ||
  fail "the promoted registry did not fence the fleet (a new timeline)"
no_duplicates "registry failover"

# --- 1. n1 to n3 resumed
report=""
for s in n1 n2 n3; do
  [ "$(node_of "$s")" = "${NODE[$s]}" ] || fail "$s has node id $(node_of "$s") after the failover, not its ${NODE[$s]}"
  log_has "$s" "resumed claim [0-9]+ of node id ${NODE[$s]} after the registry's fence" ||
    fail "$s did not resume its claim: $(grep -E "snowflake_id" "$(cluster_log "$s")" | tail -4)"
  [ "$(sql_value regs "SELECT g.resumed FROM snowflake_registry.node_ids n JOIN snowflake_registry.grants g USING (claim_id) WHERE n.fleet = 'reclaim' AND n.node_id = ${NODE[$s]}")" = 1 ] ||
    fail "the registry does not show $s's claim as resumed"
  [ "$(sql_value "$s" "SELECT registry_state || ' ' || registry_resumes FROM snowflake_stats()")" = "held 1" ] ||
    fail "$s: $(sql_value "$s" "SELECT registry_state, registry_resumes, registry_message FROM snowflake_stats()")"
  gap=$(longest_gap "$s" "$failover_at")
  [ "$gap" -lt "$RENEW_MS" ] ||
    fail "$s could not issue for $gap ms after the failover, a renewal interval ($RENEW_MS ms) or more"
  report+=" ${s}: ${gap} ms;"
done
pass "registry failover: n1, n2, n3 resumed their claims, issuing never stopped; longest time without an ID:$report"

# --- 2. n4, frozen past its grant, claimed again above the fence
log_has n4 "is not resumed" || fail "n4 does not say why its claim was not resumed"
log_has n4 "claimed again after its claim ended" || fail "n4 did not claim its node id again"
[ "$(node_of n4)" = "${NODE[n4]}" ] || fail "n4 has node id $(node_of n4), not its ${NODE[n4]}"
[ "$(sql_value n4 "SELECT registry_resumes FROM snowflake_stats()")" = 0 ] || fail "n4 counts a resumption"
after=$(awk -v t="$n4_thawed_at" '$1 > t' "$SF_WORK/ok.n4" | wc -l)
[ "$after" -gt 0 ] || fail "n4 issued nothing after it was thawed: $(tail -2 "$SF_WORK/w.n4.err")"
last=$(sql_value n4 "SELECT max(id) FROM t")
[ $((last >> 22)) -gt "$fence" ] || fail "n4's last ID (time $((last >> 22))) is not above the fence $fence"
pass "n4, frozen past its grant's end: not resumed, its node id claimed again above the fence"

# --- 3. a crash of the registry with synchronous_commit = off
fences=$(sql_value regs "SELECT count(*) FROM snowflake_registry.fences")
psql_on regs -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null
pids=()
for s in "${SERVERS[@]}"; do
  timed_writer "$s" 16000 &
  pids+=($!)
done
sleep 5
crash_at=$(now_ms)
cluster_kill9 regs
cluster_start regs || fail "the registry did not start again after its crash"
wait "${pids[@]}"
no_duplicates "registry crash with synchronous_commit = off"
[ "$(sql_value regs "SELECT count(*) FROM snowflake_registry.fences")" = "$fences" ] ||
  fail "the registry fenced after a crash on its own timeline"
report=""
for s in "${SERVERS[@]}"; do
  [ "$(sql_value "$s" "SELECT registry_state FROM snowflake_stats()")" = held ] ||
    fail "$s after the registry's crash: $(sql_value "$s" "SELECT registry_state, registry_message FROM snowflake_stats()")"
  gap=$(longest_gap "$s" "$crash_at")
  [ "$gap" -lt "$RENEW_MS" ] ||
    fail "$s could not issue for $gap ms after the registry's crash, a renewal interval ($RENEW_MS ms) or more"
  report+=" ${s}: ${gap} ms;"
done
renewed=$(sql_value regs "SELECT count(*) FROM snowflake_registry.node_ids WHERE fleet = 'reclaim' AND released_at IS NULL AND renewed_at > to_timestamp($crash_at / 1000.0)")
[ "$renewed" -ge 4 ] || fail "only $renewed claims renewed after the registry's crash"
pass "registry crash with synchronous_commit = off: no fence, every claim held; longest time without an ID:$report"

# --- 5. a second fence while a claim made again waits for its floor
# n4 frozen past its grant again; a fence by hand as it thaws: it claims
# its node id again with the fence as its floor (about 15 s ahead), and
# waits. A second fence then ends that claim too; n4 resumes it (its grant
# reaches the floor) and must still publish its node id once the clock is
# near the floor. (Before, a resumption set the claim held without its
# node id: n4 refused until restarted.)
n4_pid=$(head -1 "$(cluster_dir n4)/postmaster.pid")
kill -STOP "$n4_pid"; pkill -STOP -P "$n4_pid"
sleep $(( GRANT_MS / 1000 + 2 ))
sql_value regs "SELECT count(*) FROM snowflake_registry.fence_after_restore()" >/dev/null
kill -CONT "$n4_pid"; pkill -CONT -P "$n4_pid"
for _ in $(seq 1 100); do
  [ "$(sql_value n4 "SELECT registry_state FROM snowflake_stats()")" = waiting ] && break
  sleep 0.1
done
[ "$(sql_value n4 "SELECT registry_state FROM snowflake_stats()")" = waiting ] ||
  fail "n4 is not waiting for its floor after the fence: $(sql_value n4 "SELECT registry_state, registry_message FROM snowflake_stats()")"
resumes=$(sql_value n4 "SELECT registry_resumes FROM snowflake_stats()")
sql_value regs "SELECT count(*) FROM snowflake_registry.fence_after_restore()" >/dev/null
for _ in $(seq 1 100); do
  [ "$(sql_value n4 "SELECT registry_resumes FROM snowflake_stats()")" -gt "$resumes" ] && break
  sleep 0.1
done
[ "$(sql_value n4 "SELECT registry_resumes FROM snowflake_stats()")" -gt "$resumes" ] ||
  fail "n4 did not resume its waiting claim after the second fence: $(sql_value n4 "SELECT registry_state, registry_message FROM snowflake_stats()")"
wait_issuing n4 30
[ "$(sql_value n4 "SELECT registry_state FROM snowflake_stats()")" = held ] ||
  fail "n4 issues but its claim is not held: $(sql_value n4 "SELECT registry_state, registry_message FROM snowflake_stats()")"
no_duplicates "a second fence while waiting"
pass "a claim made again and waiting for its floor, fenced once more: resumed, and its node id published when the clock neared the floor"

# --- lowering max_grant_ms keeps the longer bound's reach
sql_value regs "UPDATE snowflake_registry.fleets SET max_grant_ms = 1000 WHERE fleet = 'reclaim'" >/dev/null
reach=$(sql_value regs "SELECT reach_until_unix_ms - epoch_unix_ms FROM snowflake_registry.fleets WHERE fleet = 'reclaim'")
now=$(now_id_ms)
[ "$reach" -ge $(( now + MAX_GRANT_MS - 1000 )) ] ||
  fail "lowering max_grant_ms kept no reach ($reach, now $now)"
sql_value regs "SELECT * FROM snowflake_registry.fence_after_restore()" >/dev/null
fence2=$(sql_value regs "SELECT fence_ms FROM snowflake_registry.fleets WHERE fleet = 'reclaim'")
[ "$fence2" -ge "$reach" ] || fail "a fence after lowering max_grant_ms lies at $fence2, below the old bound's reach $reach"
pass "a fence after max_grant_ms was lowered still reaches the old bound ($((fence2 - now)) ms ahead)"
