#!/usr/bin/env bash
# A pg_upgrade of the registry's own server under a writing fleet
# (docs/registry-design.md, "Resuming after a fence"): the registry runs on the
# older major version; four servers of the fleet (the older version too,
# with the default 30 s grant) write all along. The registry is stopped,
# upgraded with pg_upgrade --link to the newer version, and started on the
# same port: a new system identifier, so it fences the fleet (every claim
# ends; every floor at least its clock plus max_grant_ms, a minute). Each
# server resumes its claim at its next renewal (its grant still runs):
# checked that every server resumed, that none issued an ID twice, and that
# the longest time any writer could not issue is below one renewal
# interval (5 s). Before, every server claimed its node id again above the
# fence: about 55 s without an ID.
#
#   PG_BIN=<old bin> NEW_PG_BIN=<new bin> bash tests/upgrade/registry_pg_upgrade.sh
#
# (scripts/test.sh runs it with tests/upgrade/pg_upgrade.sh: from 16 to 18
# and from 18 to 19.) The extension must be installed into the older
# server (the fleet's); the registry needs none.
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../integration/lib_registry.sh
. "$(dirname "$0")/../integration/lib_registry.sh"

[ -n "${NEW_PG_BIN:-}" ] || fail "NEW_PG_BIN (the newer server's bin directory) is not set"
OLD_PG_BIN=$PG_BIN
old_major=$("$OLD_PG_BIN/postgres" --version | sed -E 's/.* ([0-9]+)[.a-z].*/\1/')
new_major=$("$NEW_PG_BIN/postgres" --version | sed -E 's/.* ([0-9]+)[.a-z].*/\1/')
GRANT_MS=30000
RENEW_MS=$(( GRANT_MS / 6 ))
SERVERS=(n1 n2 n3 n4)

psql_on reg -c "SELECT snowflake_registry.create_fleet('upgraded')" >/dev/null
for s in "${SERVERS[@]}"; do
  node_init "$s" "snowflake_id.registry_fleet = 'upgraded'" "snowflake_id.registry_grant = '${GRANT_MS}ms'"
  cluster_start "$s"
  make_table "$s"
done
for s in "${SERVERS[@]}"; do wait_issuing "$s" 20; done
old_sysid=$(sql_value reg "SELECT system_identifier FROM pg_control_system()")
pass "four servers of PostgreSQL $old_major claimed node ids from a registry on PostgreSQL $old_major"

pids=()
for s in "${SERVERS[@]}"; do
  timed_writer "$s" 30000 &
  pids+=($!)
done
sleep 3

# --- the registry upgraded: stopped, pg_upgrade --link, started on its port
# (the new cluster made first, as an operator would, outside the outage)
new_opts=""
[ "$new_major" -ge 18 ] && [ "$old_major" -lt 18 ] && new_opts="--no-data-checksums"
PG_BIN=$NEW_PG_BIN SF_INITDB_OPTS=$new_opts cluster_init regnew "$(free_port)"
as_pg sed -i "/^shared_preload_libraries = 'snowflake_id'$/d" "$(cluster_dir regnew)/postgresql.conf"
upgrade_at=$(now_ms)
reg_port=$(cluster_port reg)
cluster_stop reg
log="$SF_WORK/pg_upgrade.log"
if ! (cd "$SF_WORK" && as_pg "$NEW_PG_BIN/pg_upgrade" --link \
  --old-bindir "$OLD_PG_BIN" --new-bindir "$NEW_PG_BIN" \
  --old-datadir "$(cluster_dir reg)" --new-datadir "$(cluster_dir regnew)" \
  --old-port "$reg_port" --new-port "$(cluster_port regnew)" \
  --username postgres --socketdir "$SF_WORK" >"$log" 2>&1); then
  cat "$log"
  fail "pg_upgrade of the registry from $old_major to $new_major failed"
fi
# The upgraded registry takes the old one's port and socket directory: the
# fleet's connection string (through the socket) does not change.
cluster_conf regnew "port = $reg_port" "unix_socket_directories = '$(cluster_dir reg).sock'"
echo "$reg_port" > "$SF_WORK/regnew.port"
cluster_start regnew || fail "the upgraded registry did not start: $(tail -5 "$(cluster_log regnew)")"
up_ms=$(( $(now_ms) - upgrade_at ))
wait "${pids[@]}"
[ "$(sql_value regnew "SHOW server_version_num" | cut -c1-2)" = "$new_major" ] ||
  fail "the registry is not PostgreSQL $new_major after the upgrade"
new_sysid=$(sql_value regnew "SELECT system_identifier FROM pg_control_system()")
[ "$new_sysid" != "$old_sysid" ] || fail "pg_upgrade kept the system identifier: nothing to fence"
[ "$(sql_value regnew "SELECT count(*) FROM snowflake_registry.fences WHERE fleet = 'upgraded'")" -ge 1 ] ||
  fail "the upgraded registry did not fence the fleet (a new system identifier)"
pass "the registry upgraded to PostgreSQL $new_major in $up_ms ms (system identifier $old_sysid -> $new_sysid), and fenced the fleet"
no_duplicates "registry pg_upgrade"

report=""
for s in "${SERVERS[@]}"; do
  # (A server whose renewal retries were backing off may resume a moment
  # after the writers end.)
  for _ in $(seq 1 100); do
    [ "$(sql_value "$s" "SELECT registry_state || ' ' || registry_resumes FROM snowflake_stats()")" = "held 1" ] && break
    sleep 0.1
  done
  [ "$(sql_value "$s" "SELECT registry_state || ' ' || registry_resumes FROM snowflake_stats()")" = "held 1" ] ||
    fail "$s did not resume its claim: $(sql_value "$s" "SELECT registry_state, registry_resumes, registry_message FROM snowflake_stats()"); $(grep snowflake_id "$(cluster_log "$s")" | tail -3)"
  gap=$(longest_gap "$s" "$upgrade_at")
  [ "$gap" -lt "$RENEW_MS" ] ||
    fail "$s could not issue for $gap ms across the registry's upgrade, a renewal interval ($RENEW_MS ms) or more"
  report+=" ${s}: ${gap} ms;"
done
pass "registry pg_upgrade $old_major -> $new_major: every server resumed its claim; longest time without an ID:$report"
