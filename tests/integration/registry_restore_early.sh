#!/usr/bin/env bash
# A registry restored from a backup taken before its first claim
# (docs/registry.md, "Restoring the registry from a backup"): the backup knows
# no claim (only the fleet, made with its layout before the backup), so the
# fence must reach the claims it does not know.
#
#   1. Restored from a copy of its stopped data directory (nothing to
#      notice), fenced by hand with fence_after_restore() as the docs say
#      (with the fleet's longest grant, 12 s): server `a` claimed node id 0
#      after the backup with a 10 s grant and keeps issuing on it (its own
#      login is kept out of the restored registry, so it cannot renew);
#      `b`, started after the restore with node id 0 configured, claims it
#      (the restored registry never saw a's claim) with the fence as its
#      floor, and issues only above it. Before, the fence found no fleet to
#      fence and recorded nothing, `b` got node id 0 with no floor while `a`
#      still issued, and the two issued the same IDs.
#   2. Restored from a base backup with recovery (a new timeline): the
#      registry notices by itself at the first call, although the backup
#      predates every claim (the identity is recorded at install), and the
#      first claim of the fleet, which had no claim in the backup, starts an
#      hour ahead (the longest grant any fleet may have had).
# Every ID is recorded; each case ends with the check that none was issued
# twice. SF_REGISTRY_SQL=<the script before> shows case 1 fail with IDs
# issued twice.
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_restore_early.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# Two IDs a millisecond: two servers issuing at once under one node id
# repeat each other's IDs within a few milliseconds.
FLEET=("snowflake_id.sequence_bits = 1")
REG_DIR=$(cluster_dir reg)
registry_admin() { sql_value reg "$1"; }
# writer NAME MS: inserts (recorded) on NAME for MS milliseconds.
writer() {
  local name=$1 end=$(( $(now_ms) + $2 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    issue "$name" 200 2>> "$SF_WORK/w.$name.err" || true
  done
}

# --- the backups, before any claim: a copy of the stopped data directory
# and a base backup (a's own login role made before them)
[ "$(registry_admin "SELECT count(*) FROM snowflake_registry.node_ids")" = 0 ] || fail "the new registry has claims"
# The fleet's layout, given by the owner (a claim never shapes a fleet).
registry_admin "SELECT snowflake_registry.create_fleet('default', 1735689600000, 10, 1)" >/dev/null
psql_on reg -c "CREATE ROLE fleet_a LOGIN; GRANT snowflake_registry_client TO fleet_a" >/dev/null
cluster_stop reg
cp -a "$REG_DIR" "$SF_WORK/reg.cold"
cluster_start reg
(cd / && as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$(cluster_port reg)" -U postgres \
  -D "$SF_WORK/reg.base" -X stream -c fast --no-sync)
pass "registry backed up twice before its first claim"

# --- a claims node id 0 and writes
node_init a "${FLEET[@]}" "snowflake_id.registry = '${REGISTRY/user=fleet_node/user=fleet_a}'" \
  "snowflake_id.registry_grant = '10s'"
cluster_start a
make_table a
[ "$(node_of a)" = 0 ] || fail "a has node id $(node_of a), expected 0"
issue a 1000

# --- 1. restored from the cold copy, fenced by hand, the fleet let back in
# (a is kept out: it issues on the grant it holds, as a server the restored
# registry cannot reach would)
node_init b "${FLEET[@]}" "snowflake_id.node_id = 0"
writer a 8000 &
wa=$!
cluster_stop reg
mv "$REG_DIR" "$SF_WORK/reg.lost"
cp -a "$SF_WORK/reg.cold" "$REG_DIR"
cluster_start reg
[ "$(registry_admin "SELECT count(*) FROM snowflake_registry.node_ids")" = 0 ] || fail "the restored registry knows a claim"
psql_on reg -c "ALTER ROLE fleet_a NOLOGIN" >/dev/null
# The fleet's longest grant, as the operator knows it (a minute by default;
# a has 10 s, 12 s keeps the test short).
registry_admin "SELECT count(*) FROM snowflake_registry.fence_after_restore(p_longest_grant_ms => 12000)" >/dev/null
cluster_start b
make_table b
# a issues on its grant while b claims; b must wait for the fence.
for _ in $(seq 1 100); do
  [ "$(sql_value b "SELECT registry_state IN ('waiting', 'held') FROM snowflake_stats()" 2>/dev/null)" = t ] && break
  sleep 0.1
done
writer b 6000
wait "$wa"
no_duplicates "a and b after the restore from before the first claim"
fenced_until=$(registry_admin "SELECT fenced_until_unix_ms FROM snowflake_registry.incarnation")
[ "${fenced_until:--1}" -gt "$(now_ms)" ] ||
  fail "fence_after_restore() on a registry that knows no fleet recorded no fence: '$fenced_until'"
floor=$(registry_admin "SELECT floor_ms FROM snowflake_registry.node_ids WHERE node_id = 0")
a_last=$(sql_value a "SELECT max(id) FROM t")
[ $(( floor + 1735689600000 )) -ge $(( fenced_until - 1000 )) ] ||
  fail "node id 0's floor ($floor) is below the fence ($fenced_until ms since 1970)"
[ $(( floor << 11 )) -gt "$a_last" ] || fail "node id 0's floor $floor is not above a's last ID $a_last"
wait_issuing b 30
[ "$(node_of b)" = 0 ] || fail "b does not issue under node id 0: $(node_of b)"
b_first=$(sql_value b "SELECT min(id) FROM t")
[ "$b_first" -gt "$a_last" ] || fail "b's first ID $b_first is not above a's last $a_last"
no_duplicates "b issuing above the fence"
pass "fenced by hand: b took node id 0 above the fence (floor $floor), above every ID of a"
cluster_stop a
cluster_stop b

# --- 2. restored from the base backup with recovery: noticed by itself
cluster_stop reg
rm -rf "$REG_DIR"
cp -a "$SF_WORK/reg.base" "$REG_DIR"
as_pg touch "$REG_DIR/recovery.signal"
cluster_conf reg "restore_command = 'false'"
cluster_start reg || fail "the restored registry did not start: $(tail -5 "$(cluster_log reg)")"
wait_primary
restored_ms=$(now_ms)
node_init c "${FLEET[@]}"
cluster_start c
make_table c
for _ in $(seq 1 100); do
  [ "$(registry_admin "SELECT count(*) FROM snowflake_registry.node_ids")" = 1 ] && break
  sleep 0.1
done
fenced_until=$(registry_admin "SELECT fenced_until_unix_ms FROM snowflake_registry.incarnation")
[ "$fenced_until" -ge $(( restored_ms + 3600000 - 60000 )) ] ||
  fail "the registry restored with recovery did not fence: $(registry_admin "SELECT * FROM snowflake_registry.incarnation")"
floor=$(registry_admin "SELECT floor_ms FROM snowflake_registry.node_ids WHERE node_id = 0")
[ $(( floor + 1735689600000 )) -ge $(( restored_ms + 3600000 - 60000 )) ] ||
  fail "the first claim after the automatic fence has floor $floor, not an hour after the restore"
[ "$(sql_value c "SELECT registry_state FROM snowflake_stats()")" = waiting ] ||
  fail "c does not wait for the fence: $(sql_value c "SELECT registry_state, registry_message FROM snowflake_stats()")"
log_has reg "the first claim of a fleet this registry does not know starts after .*timeline changed" ||
  fail "the registry's log does not say why it fenced: $(grep snowflake_registry "$(cluster_log reg)" | tail -3)"
no_duplicates "after the automatic fence"
pass "restored with recovery from a backup before the first claim: fenced by itself (its new timeline); the fleet's first claim waits an hour"
