#!/usr/bin/env bash
# Another registry under the registry's address is noticed
# (docs/registry-threats.md, "an impostor on the registry's address"): each
# new connection asks the registry's id, made at its install.
#   1. n1 claims from the registry (through its socket) and issues.
#   2. The registry stopped, another one (an install of its own, the same
#      script) answers at the same socket and port: n1 renews nothing there
#      and says so (registry_message: another registry), issues until
#      its grant ends, then refuses with that reason; the other registry
#      holds no claim of n1's.
#   3. n1 restarted while the other registry answers: it makes no claim
#      there (its data directory last claimed from another
#      registry).
#   4. The plain-SQL edition (p1, through dblink), restarted while the other
#      registry answers: its claim is refused there (55000: not the registry
#      it last claimed from), and the other registry holds no claim of it.
#   5. The registry back (the same one: its id kept): n1 and p1 claim and
#      issue again; no ID twice. (A restore of the same registry keeps its
#      id: registry_restore.sh.)
# On the code before, n1 claimed again at the other registry (which knew
# none of the floors) after its renewals were refused, and at its restart;
# p1 claimed there at its restart.
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_identity.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# registry_message_within NAME PATTERN: NAME's registry_message once it
# matches PATTERN, waited for up to 20 s (the last one seen otherwise).
registry_message_within() {
  local message=""
  for _ in $(seq 1 200); do
    message=$(sql_value "$1" "SELECT registry_message FROM snowflake_stats()")
    grep -q "$2" <<<"$message" && break
    sleep 0.1
  done
  echo "$message"
}

reg_id=$(sql_value reg "SELECT registry_id FROM snowflake_registry.rules")
# portable_role NAME: the plain-SQL edition's login on registry NAME (dblink
# needs a password for a role that is not a superuser).
portable_role() {
  local hba
  psql_on "$1" -c "CREATE ROLE portable_node LOGIN PASSWORD 'portable-secret'" \
    -c "GRANT snowflake_registry_client TO portable_node" >/dev/null
  hba=$(cluster_dir "$1")/pg_hba.conf
  { echo "host all portable_node 127.0.0.1/32 scram-sha-256"; cat "$hba"; } >"$SF_WORK/hba" && as_pg cp "$SF_WORK/hba" "$hba"
  psql_on "$1" -c "SELECT pg_reload_conf()" >/dev/null
}
portable_role reg
cluster_init p1 "$(free_port)" "shared_preload_libraries = ''"
cluster_start p1
psql_on p1 -c "CREATE EXTENSION dblink" >/dev/null
psql_on p1 -f "$ROOT/portable/snowflake_id_portable.sql" >/dev/null
psql_on p1 >/dev/null <<SQL
UPDATE snowflake_portable.config SET registry_fleet = 'default', registry_grant_ms = 3000;
INSERT INTO snowflake_portable.registry_connection (conninfo)
VALUES ('host=127.0.0.1 port=$(cluster_port reg) dbname=postgres user=portable_node password=portable-secret connect_timeout=2');
SQL
p1_next() { psql_on p1 -At -c "SELECT snowflake_next()"; }
p1_next >>"$IDS" || fail "the plain-SQL edition did not claim: $(p1_next 2>&1 | tail -2)"
node_init n1
cluster_start n1
make_table n1
wait_issuing n1 20
grep -q " $reg_id\$" "$(cluster_dir n1)/snowflake_id.node" ||
  fail "n1 did not record the registry's id with its claim: $(cat "$(cluster_dir n1)/snowflake_id.node")"
pass "n1 claimed node id $(node_of n1), recording the registry's id $reg_id"

# --- 2. another registry under the same socket and port
cluster_init other "$(cluster_port reg)"
as_pg sed -i "/^shared_preload_libraries = 'snowflake_id'$/d" "$(cluster_dir other)/postgresql.conf"
cluster_conf other "unix_socket_directories = '$(cluster_dir reg).sock'"
cluster_stop reg
cluster_start other
psql_on other -f "$REGISTRY_SQL" >/dev/null 2>&1
psql_on other -c "CREATE ROLE fleet_node LOGIN; GRANT snowflake_registry_client TO fleet_node" >/dev/null
portable_role other
other_id=$(sql_value other "SELECT registry_id FROM snowflake_registry.rules")
[ "$other_id" != "$reg_id" ] || fail "two installs made one registry id"
message=$(registry_message_within n1 "another registry")
grep -q "^the registry at this address is another registry (id $other_id" <<<"$message" ||
  fail "n1 did not say that another registry answers: $message"
out=""
for _ in $(seq 1 100); do
  out=$(sql_error n1 "SELECT snowflake_next()") && break
  sleep 0.1
done
[ -n "$out" ] || fail "n1 still issues 10 s after another registry took the address"
grep -q "another registry" <<<"$out" || fail "n1's refusal does not say why: $out"
[ "$(sql_value other "SELECT count(*) FROM snowflake_registry.node_ids")" = 0 ] ||
  fail "n1 claimed at the other registry: $(sql_value other "SELECT string_agg(node_id || ' ' || data_directory, '; ') FROM snowflake_registry.node_ids")"
pass "another registry at the address: n1 renewed nothing there, said so, and stopped at its grant's end ($(sqlstate_of "$out"))"

# --- 3. restarted meanwhile: no claim at the other registry
cluster_stop n1
cluster_start n1
message=$(registry_message_within n1 "last claimed")
grep -q "^this data directory last claimed node id [0-9]* of fleet \"default\" from another registry (id $reg_id) than the one at this address (id $other_id)" <<<"$message" ||
  fail "n1, restarted, did not refuse to claim at the other registry: $message"
[ "$(sql_value other "SELECT count(*) FROM snowflake_registry.node_ids")" = 0 ] || fail "n1, restarted, claimed at the other registry"
pass "n1, restarted while the other registry answers, makes no claim there: $message"

# --- 4. the plain-SQL edition restarted meanwhile: its claim refused there
cluster_stop p1
cluster_start p1
out=$(sql_error p1 "SELECT snowflake_next()") || fail "p1, restarted, issued from the other registry"
[ "$(sqlstate_of "$out")" = 55000 ] && grep -q "is not the one the caller last claimed from (id $reg_id)" <<<"$out" ||
  fail "p1's claim at the other registry was refused otherwise: $out"
[ "$(sql_value other "SELECT count(*) FROM snowflake_registry.node_ids")" = 0 ] || fail "p1 claimed at the other registry"
pass "the plain-SQL edition, restarted while the other registry answers, makes no claim there (55000)"

# --- 5. the registry back
cluster_stop other
cluster_start reg
wait_issuing n1 30
for _ in $(seq 1 50); do p1_next >>"$IDS" 2>/dev/null && break; sleep 0.2; done
p1_next >>"$IDS" || fail "p1 did not issue with the registry back: $(p1_next 2>&1 | tail -2)"
no_duplicates "the registry back"
pass "the registry back (its id kept): n1 and p1 claimed and issue again"
