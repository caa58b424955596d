#!/usr/bin/env bash
# Promotion with a registry (docs/registry-design.md, "Promotion and split brain"):
# a streaming standby inherits its primary's settings (the registry's
# connection string, the node id or none) and the node id it held last (the
# marker in the data directory). At promotion it claims a node id of its own
# from the registry; the old primary is not stopped: both sides issue IDs
# (split brain) and none may be issued twice.
#
#   1. Node id unset (taken from the pool): the promoted standby gets
#      another node id than its still-running primary, though it prefers the
#      primary's, and issues above every ID it replayed. Writers on both for
#      4 s after the promotion.
#   2. The registry unreachable at promotion: the promoted server refuses
#      (08001, snowflake_stats() shows registry_no_node_id) rather than
#      issue under the node id it inherited; once the registry is back it
#      claims one and issues.
#   3. A fixed node id (snowflake_id.node_id, inherited): the promoted
#      standby is refused while its primary holds the node id (55000, naming
#      the holder). The primary is then cut off (SIGSTOP): its claim goes
#      stale, the standby takes the node id over above the primary's grant
#      (the floor); the primary, resumed, issues only within its grant and
#      then stops. Same node id, disjoint ID times.
# Every ID any server issues is recorded; the test ends with the check that
# none was issued twice.
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_failover.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# writer NAME MS: inserts (recorded) on NAME for MS milliseconds; failures
# (a refused call) are kept in $SF_WORK/w.NAME.err.
writer() {
  local name=$1 end=$(( $(now_ms) + $2 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    issue "$name" 50 2>> "$SF_WORK/w.$name.err" || true
  done
}
# max_id NAME: the largest ID in NAME's table t.
max_id() { sql_value "$1" "SELECT max(id) FROM t"; }

# --- 1. split brain, node id from the pool
node_init p1
cluster_start p1
make_table p1
issue p1 2000
cluster_basebackup s1 "$(free_port)" p1
cluster_start s1
# A standby claims nothing until promoted, and that is no hold.
[ "$(sql_value s1 "SELECT registry_state || ' ' || coalesce(issuing_held, 'none') FROM snowflake_stats()")" = "starting none" ] ||
  fail "the standby's claim: $(sql_value s1 "SELECT registry_state, issuing_held FROM snowflake_stats()")"
issue p1 1000
wait_for_replay s1 p1
P1_NODE=$(node_of p1)
writer p1 6000 &
wp1=$!
sleep 1
wait_for_replay s1 p1
replayed=$(max_id s1)
promote s1
wait_issuing s1 15
writer s1 4000 &
ws1=$!
wait "$wp1" "$ws1"
no_duplicates "split brain (node ids from the pool)"
S1_NODE=$(node_of s1)
[ -n "$S1_NODE" ] && [ "$S1_NODE" != "$P1_NODE" ] ||
  fail "the promoted standby has node id '$S1_NODE', its still-running primary $P1_NODE"
[ "$(sql_value s1 "SELECT registry_state FROM snowflake_stats()")" = held ] || fail "s1's claim is not held"
first_s1=$(sql_value s1 "SELECT min(id) FROM t WHERE snowflake_node(id) = $S1_NODE")
[ "$first_s1" -gt "$replayed" ] || fail "the promoted standby's first ID $first_s1 is not above the $replayed it replayed"
[ -s "$SF_WORK/w.p1.err" ] && fail "the old primary stopped issuing: $(tail -2 "$SF_WORK/w.p1.err")"
pass "promoted while its primary kept issuing: node id $S1_NODE (the primary's is $P1_NODE), first ID above the $replayed replayed; $(sql_value p1 "SELECT count(*) FROM t") and $(sql_value s1 "SELECT count(*) FROM t WHERE snowflake_node(id) = $S1_NODE") IDs"
cluster_stop s1

# --- 2. the registry unreachable at promotion
cluster_basebackup s2 "$(free_port)" p1
cluster_start s2
wait_for_replay s2 p1
cluster_stop reg
promote s2
expect_refusal s2 "SELECT snowflake_next()" 08001 "port=$(cluster_port reg)" \
  "the promoted standby without the registry (it must not fall back to the inherited node id)"
[ "$(sql_value s2 "SELECT issuing_held FROM snowflake_stats()")" = registry_no_node_id ] ||
  fail "snowflake_stats() on s2 does not show registry_no_node_id"
cluster_start reg
wait_issuing s2 15
S2_NODE=$(node_of s2)
[ "$S2_NODE" != "$P1_NODE" ] || fail "s2 got the node id of its primary, which still holds it"
wait_issuing p1 15
issue p1 500
issue s2 500
no_duplicates "promotion with the registry down"
pass "promoted with the registry down: refused (08001) until the registry was back, then node id $S2_NODE"
cluster_stop s2
cluster_stop p1

# --- 3. a fixed node id, inherited
FIXED=40
node_init p3 "snowflake_id.node_id = $FIXED"
cluster_start p3
make_table p3
issue p3 2000
cluster_basebackup s3 "$(free_port)" p3
cluster_start s3
issue p3 1000
wait_for_replay s3 p3
replayed=$(max_id s3)
promote s3
expect_refusal s3 "SELECT snowflake_next()" 55000 "node id $FIXED of fleet \"default\" is held by .*:$(cluster_port p3) " \
  "the promoted standby under its primary's live node id $FIXED (the refusal must name the primary)"
# The primary cut off: writers on it, then SIGSTOP (no renewals), until the
# standby has taken the node id over; then SIGCONT.
pid3=$(head -1 "$(cluster_dir p3)/postmaster.pid")
writer p3 8000 &
wp3=$!
sleep 0.5
kill -STOP "$pid3"; pkill -STOP -P "$pid3"
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT port FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $FIXED")" = "$(cluster_port s3)" ] && break
  sleep 0.1
done
kill -CONT "$pid3"; pkill -CONT -P "$pid3"
wait_issuing s3 15
writer s3 5000 &
ws3=$!
wait "$wp3" "$ws3"
no_duplicates "split brain (fixed node id)"
[ "$(node_of s3)" = "$FIXED" ] || fail "s3 did not take node id $FIXED over"
p3_max=$(sql_value p3 "SELECT max(id) FROM t")
s3_min=$(sql_value s3 "SELECT min(id) FROM t WHERE id > $replayed")
[ $((p3_max >> 22)) -lt $((s3_min >> 22)) ] ||
  fail "the old primary issued up to $((p3_max >> 22)) ms, the promoted standby from $((s3_min >> 22)) ms: their ranges overlap"
grep -q "ended this server's claim" "$SF_WORK/w.p3.err" ||
  fail "the resumed primary did not stop at its grant's end: $(tail -3 "$SF_WORK/w.p3.err")"
[ "$(sql_value p3 "SELECT issuing_held FROM snowflake_stats()")" = registry_lost ] || fail "p3 does not show registry_lost"
pass "fixed node id $FIXED: refused while the primary held it; taken over when the primary was cut off; the primary issued up to $((p3_max >> 22)) ms and stopped, the promoted standby from $((s3_min >> 22)) ms"

pass "registry_failover"
