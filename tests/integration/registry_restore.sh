#!/usr/bin/env bash
# A registry restored from an older backup (docs/registry.md, "Restoring the
# registry from a backup"). The restored registry has lost the claims and
# renewals made after the backup: without a fence, a node id claimed only
# in the lost history is "never claimed" again, and its next holder starts
# with no floor, issuing the IDs the lost claim's holder issued.
#
#   1. Restored with recovery (pg_basebackup, then archive recovery to the
#      end of its WAL: a new timeline), noticed by the registry itself:
#      - a server `a` claimed node id 2 after the backup, issued a batch
#        that runs 20 s ahead of the clock (the fleet has sequence_bits = 1,
#        two IDs a millisecond, and `a` a long grant), and crashed (no
#        release);
#      - after the restore, server `c`, whose clock is inside `a`'s range of
#        ID times, claims from the pool and gets node id 2 again, but with
#        the fence as its floor (the registry's clock at the restore plus the
#        fleet's max_grant_ms): it waits, then issues above all of `a`'s IDs;
#      - server `b`, which held node id 1 since before the backup and kept
#        running with a 30 s grant, is told the fence ended its claim and
#        resumes it (the registry knows the claim and its token, and b's
#        grant has not ended: no other server can have taken node id 1 in
#        the lost history); it issues on, and node id 1's floor rises to
#        the grant b reports;
#      - the registry records the fence (`fences`) and its new timeline.
#   2. Restored from a copy of its stopped data directory (same timeline,
#      same system identifier: nothing to notice): the operator runs
#      fence_after_restore(), and the next holder of a node id claimed in
#      the lost history (by `d`, which ran ahead and crashed) starts above
#      it; `g`, which claimed in the lost history and kept running, is told
#      the registry does not know its claim, and claims its node id again
#      by itself above the fence.
#   3. With `on_new_timeline = 'trust'` (a registry that fails over only to
#      synchronous standbys), a new timeline is recorded and fences nothing:
#      a holder keeps its claim and issues on.
# Every ID is recorded; each case ends with the check that none was issued
# twice. Seen failing (SF_REGISTRY_SQL, a changed registry script): without
# `PERFORM snowflake_registry.check_incarnation()` case 1 fails with IDs
# issued twice; with a fence_after_restore() that does nothing, case 2.
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_restore.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# (A lead of 20 s, so that the restore fits in it on a busy machine: under
# two busy loops a restore took more than the 12 s it had before.)
MAX_GRANT_MS=30000
# Two IDs a millisecond, so a batch runs far ahead of the clock.
FLEET=("snowflake_id.sequence_bits = 1")
# A server that runs ahead: a grant and a drift limit that allow it.
AHEAD=("snowflake_id.registry_grant = '25s'" "snowflake_id.max_clock_drift = '60s'")
REG_DIR=$(cluster_dir reg)

# writer NAME MS: inserts (recorded) on NAME for MS milliseconds, at about
# the pace of the clock.
writer() {
  local name=$1 end=$(( $(now_ms) + $2 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    issue "$name" 100 2>> "$SF_WORK/w.$name.err" || true
    sleep 0.1
  done
}
# id_ms ID: the ID's time field (ms since the epoch; 10 node bits, 1
# sequence bit). id_unix_ms ID: that time in ms since 1970 (the default
# epoch, 2025-01-01, is 1735689600000).
id_ms() { echo $(( $1 >> 11 )); }
id_unix_ms() { echo $(( $(id_ms "$1") + 1735689600000 )); }
registry_admin() { sql_value reg "$1"; }

# --- before the backup: the fleet exists, node id 0 released, 1 held by b
# (The fleet made with its bound before any claim: lowering it later would
# keep the longer one's reach for its length.)
registry_admin "SELECT snowflake_registry.create_fleet('default', 1735689600000, 10, 1, $MAX_GRANT_MS)" >/dev/null
node_init z "${FLEET[@]}"
cluster_start z
make_table z
issue z 100
cluster_stop z
node_init b "${FLEET[@]}" "snowflake_id.registry_grant = '30s'"
cluster_start b
make_table b
issue b 1000
[ "$(node_of b)" = 1 ] || fail "b has node id $(node_of b), expected 1"
timeline_before=$(registry_admin "SELECT timeline FROM snowflake_registry.incarnation")

(cd / && as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$(cluster_port reg)" -U postgres \
  -D "$SF_WORK/reg.backup" -X stream -c fast --no-sync)
pass "registry backed up (timeline $timeline_before); node ids 0 (released) and 1 (b) claimed"

# --- after the backup: a claims node id 2, issues 20 s ahead, crashes
# (c made before: the restore must end within a's lead.)
node_init c "${FLEET[@]}"
node_init a "${FLEET[@]}" "${AHEAD[@]}"
cluster_start a
make_table a
[ "$(node_of a)" = 2 ] || fail "a has node id $(node_of a), expected 2"
writer b 2000 &
wb=$!
issue a 40000
wait "$wb"
a_first=$(sql_value a "SELECT min(id) FROM t")
a_last=$(sql_value a "SELECT max(id) FROM t")
a_count=$(sql_value a "SELECT count(*) FROM t")
cluster_kill9 a
pass "a issued $a_count IDs under node id 2 (ID times $(id_ms "$a_first") .. $(id_ms "$a_last")), then crashed"

# --- 1. the registry restored from the backup, with recovery: a new timeline
cluster_stop reg
mv "$REG_DIR" "$SF_WORK/reg.lost"
cp -a "$SF_WORK/reg.backup" "$REG_DIR"
as_pg touch "$REG_DIR/recovery.signal"
# No archive: replay the backup's own WAL, then a new timeline.
cluster_conf reg "restore_command = 'false'"
cluster_start reg || fail "the restored registry did not start: $(tail -5 "$(cluster_log reg)")"
wait_primary
[ "$(registry_admin "SELECT count(*) FROM snowflake_registry.node_ids WHERE node_id = 2")" = 0 ] ||
  fail "the restored registry knows node id 2: the backup was not older than a's claim"

# c's clock is inside a's range of ID times (a ran 20 s ahead): without the
# fence its IDs would be a's.
cluster_start c
make_table c
[ "$(now_ms)" -lt "$(id_unix_ms "$a_last")" ] ||
  fail "the restore took longer than a's lead: c's clock is past a's IDs, the test shows nothing"
wait_issuing c 60
writer c 3000
no_duplicates "after the restore"
fence_ms=$(registry_admin "SELECT fence_ms FROM snowflake_registry.fleets")
[ "$fence_ms" -gt "$(id_ms "$a_last")" ] ||
  fail "the fence $fence_ms is not above a's last ID time $(id_ms "$a_last")"
[ "$(node_of c)" = 2 ] || fail "c has node id $(node_of c), expected a's 2 (the lowest the restored registry never saw)"
c_first=$(sql_value c "SELECT min(id) FROM t")
[ "$c_first" -gt "$a_last" ] || fail "c's first ID $c_first is not above a's last $a_last"
why=$(registry_admin "SELECT why FROM snowflake_registry.fences")
grep -q "timeline changed\|timeline.*changed\|changed from" <<<"$why" || fail "the fence does not say why: $why"
[ "$(registry_admin "SELECT timeline FROM snowflake_registry.incarnation")" -gt "$timeline_before" ] ||
  fail "the registry did not record its new timeline"
pass "restored registry fenced at ID time $fence_ms (a's last: $(id_ms "$a_last")): c took node id 2 above a's IDs; fence: $why"

# b's claim (made before the backup) ended with the fence, but the
# restored registry knows it, with its token, and b's grant (30 s) still
# runs: b resumes it, reporting that grant (renewed in the lost history),
# and issues on without a pause; node id 1's floor rises to b's grant.
# (Before, b claimed node id 1 again above the fence and waited for it;
# before that, it stopped until restarted.)
b_before=$(sql_value b "SELECT max(id) FROM t")
for _ in $(seq 1 100); do
  [ "$(registry_admin "SELECT count(*) FROM snowflake_registry.grants WHERE node_id = 1 AND resumed >= 1")" = 1 ] && break
  sleep 0.1
done
[ "$(registry_admin "SELECT count(*) FROM snowflake_registry.grants WHERE node_id = 1 AND resumed >= 1 AND ended IS NULL")" = 1 ] ||
  fail "b did not resume its claim: $(registry_admin "SELECT claim_id, ended, resumed FROM snowflake_registry.grants WHERE node_id = 1"); $(grep snowflake_id "$(cluster_log b)" | tail -3)"
log_has b "resumed claim [0-9]+ of node id 1 after the registry's fence" || fail "b's log does not say it resumed"
issue b 100 || fail "b does not issue after resuming: $(psql_on b -c 'SELECT snowflake_next()' 2>&1 | head -2)"
[ "$(node_of b)" = 1 ] || fail "b has node id $(node_of b), not its own 1"
b_after=$(sql_value b "SELECT max(id) FROM t")
[ "$b_after" -gt "$b_before" ] || fail "b's ID after resuming ($b_after) is not above its earlier $b_before"
b_grant=$(sql_value b "SELECT (extract(epoch FROM grant_until) * 1000)::bigint - 1735689600000 FROM snowflake_stats()")
[ "$(registry_admin "SELECT max_until_ms >= $b_grant FROM snowflake_registry.node_ids WHERE node_id = 1")" = t ] ||
  fail "node id 1's floor is below b's grant $b_grant"
no_duplicates "b resumed"
pass "b, holder since before the backup: its claim fenced and resumed (its grant still ran), issuing on without a pause"
cluster_stop c

# --- 2. a restore the registry cannot notice: a copy of its stopped data directory
cluster_stop reg
rm -rf "$SF_WORK/reg.snapshot"
cp -a "$REG_DIR" "$SF_WORK/reg.snapshot"
cluster_start reg
wait_primary
# (g and e made before d issues: the restore must end within d's lead.)
node_init g "${FLEET[@]}"
node_init e "${FLEET[@]}"
node_init d "${FLEET[@]}" "${AHEAD[@]}"
cluster_start d
make_table d
issue d 40000
d_node=$(node_of d)
d_last=$(sql_value d "SELECT max(id) FROM t")
cluster_kill9 d
# g claims after the snapshot too, and keeps running through the restore.
cluster_start g
make_table g
issue g 100
g_node=$(node_of g)
g_before=$(sql_value g "SELECT max(id) FROM t")
cluster_stop reg
rm -rf "$REG_DIR"
cp -a "$SF_WORK/reg.snapshot" "$REG_DIR"
cluster_start reg
fences_before=$(registry_admin "SELECT count(*) FROM snowflake_registry.fences")
registry_admin "SELECT * FROM snowflake_registry.fence_after_restore()" >/dev/null
cluster_start e
[ "$(now_ms)" -lt "$(id_unix_ms "$d_last")" ] ||
  fail "the restore took longer than d's lead: e's clock is past d's IDs, the test shows nothing"
make_table e
wait_issuing e 60
writer e 2000
no_duplicates "after fence_after_restore()"
[ "$(node_of e)" = "$d_node" ] || fail "e has node id $(node_of e), expected d's $d_node"
e_first=$(sql_value e "SELECT min(id) FROM t")
fence2=$(registry_admin "SELECT fence_ms FROM snowflake_registry.fleets")
{ [ "$(id_ms "$e_first")" -gt "$fence2" ] && [ "$e_first" -gt "$d_last" ]; } ||
  fail "e's first ID $e_first (time $(id_ms "$e_first")) is not above the fence $fence2 and d's last ID $d_last"
[ "$(registry_admin "SELECT count(*) FROM snowflake_registry.fences")" -gt "$fences_before" ] ||
  fail "fence_after_restore() recorded no fence"
pass "restored from a copy of its data directory and fenced by hand: e took d's node id $d_node above the fence"

# g's claim was made in the history the restore lost: the registry does not
# know it (so it cannot be resumed). g issues up to its grant's end, then
# claims its node id again by itself, above the fence, and issues on.
# (Before, it refused until restarted.)
for _ in $(seq 1 300); do
  log_has g "node id $g_node claimed again after its claim ended" && break
  sleep 0.1
done
wait_issuing g 60
[ "$(node_of g)" = "$g_node" ] || fail "g issues under node id $(node_of g), not its own $g_node"
g_after=$(sql_value g "SELECT max(id) FROM t")
{ [ "$g_after" -gt "$g_before" ] && [ "$(id_ms "$g_after")" -gt "$fence2" ]; } ||
  fail "g's ID $g_after (time $(id_ms "$g_after")) is not above its earlier $g_before and the fence $fence2"
log_has g "node id $g_node claimed again after its claim ended" ||
  fail "g's log does not say it claimed node id $g_node again: $(grep snowflake_id "$(cluster_log g)" | tail -3)"
no_duplicates "g, whose claim the restore lost"
pass "g, whose claim the restore lost, claimed node id $g_node again by itself above the fence and issues on"

# --- 3. on_new_timeline = 'trust': a new timeline (here: recovery of the
# registry's own WAL, as after a failover) fences nothing
registry_admin "UPDATE snowflake_registry.incarnation SET on_new_timeline = 'trust'" >/dev/null
fences_before=$(registry_admin "SELECT count(*) FROM snowflake_registry.fences")
timeline_before=$(registry_admin "SELECT timeline FROM snowflake_registry.incarnation")
cluster_stop reg
as_pg touch "$REG_DIR/recovery.signal"
cluster_start reg
wait_primary
writer e 3000
[ "$(sql_value e "SELECT registry_state FROM snowflake_stats()")" = held ] ||
  fail "e's claim did not survive a trusted new timeline: $(sql_value e "SELECT registry_state, registry_message FROM snowflake_stats()")"
[ ! -s "$SF_WORK/w.e.err" ] || fail "e stopped issuing across a trusted new timeline: $(tail -2 "$SF_WORK/w.e.err")"
{ [ "$(registry_admin "SELECT timeline FROM snowflake_registry.incarnation")" -gt "$timeline_before" ] &&
  [ "$(registry_admin "SELECT count(*) FROM snowflake_registry.fences")" = "$fences_before" ]; } ||
  fail "with on_new_timeline = trust the registry fenced, or did not record its new timeline"
no_duplicates "after a trusted new timeline"
pass "on_new_timeline = trust: a new timeline of the registry is recorded, not fenced; e kept its claim"
