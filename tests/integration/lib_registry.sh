# shellcheck shell=bash
# The registry tests' set-up (registry.sh, registry_failover.sh), sourced
# after lib.sh: a registry server `reg` (a plain PostgreSQL, the extension
# not even preloaded) with registry/snowflake_registry.sql installed, the
# client role fleet_node, and helpers that start servers of the fleet,
# issue IDs recording each one with the port of the server that issued it
# ($IDS, $ISSUED_BY), and check that none was issued twice.
require_installed_extension
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IDS="$SF_WORK/ids"
: > "$IDS"
# Each recorded ID with the port of the server that issued it.
ISSUED_BY="$SF_WORK/issued_by"
: > "$ISSUED_BY"
chmod 666 "$IDS"

# --- the registry: a plain server, the extension not even preloaded
cluster_init reg "$(free_port)"
as_pg sed -i "/^shared_preload_libraries = 'snowflake_id'$/d" "$(cluster_dir reg)/postgresql.conf"
cluster_start reg
# (SF_REGISTRY_SQL: another registry script, to see a test fail with a
# guard of the registry removed.)
REGISTRY_SQL=${SF_REGISTRY_SQL:-$ROOT/registry/snowflake_registry.sql}
psql_on reg -f "$REGISTRY_SQL" >/dev/null 2>&1
# Installing again keeps the data and replaces the functions.
psql_on reg -f "$REGISTRY_SQL" >/dev/null 2>&1
psql_on reg -c "CREATE ROLE fleet_node LOGIN; GRANT snowflake_registry_client TO fleet_node"
# (Through the registry's Unix-domain socket: a connection over TCP without
# sslmode=verify-full is not used unless snowflake_id.registry_allow_unverified
# is on; a test that needs TCP says so.)
REGISTRY="host=$(cluster_dir reg).sock port=$(cluster_port reg) dbname=postgres user=fleet_node"
# The setting a server of the fleet needs to reach the registry over TCP
# without verification (registry_tls.sh has the certificates).
ALLOW_UNVERIFIED="snowflake_id.registry_allow_unverified = on"
GRANT_MS=3000

# node_init NAME [conf...]: a server of the fleet, with a short grant.
node_init() {
  local name=$1; shift
  cluster_init "$name" "$(free_port)" "snowflake_id.registry = '$REGISTRY'" \
    "snowflake_id.registry_grant = '${GRANT_MS}ms'" "$@"
}
make_table() {
  psql_on "$1" -c "CREATE EXTENSION IF NOT EXISTS snowflake_id" \
    -c "CREATE TABLE IF NOT EXISTS t (id bigint PRIMARY KEY DEFAULT snowflake_next())" >/dev/null
}
# issue NAME N: N IDs, recorded.
issue() {
  local out
  out=$(psql_on "$1" -At -c "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, $2) RETURNING id") || return 1
  [ -n "$out" ] || return 0
  # (Under a lock: servers issue in parallel, and a long write to a file
  # may be split, so two unlocked writers could interleave their lines.)
  {
    flock 9
    echo "$out" >> "$IDS"
    record_issuer "$1" <<< "$out"
  } 9> "$SF_WORK/record.lock"
}
# record_issuer NAME < IDS: notes NAME's port beside each ID.
record_issuer() {
  local port; port=$(cluster_port "$1")
  awk -v port="$port" 'NF { print $1 "\t" port }' >> "$ISSUED_BY"
}
node_of() { sql_value "$1" "SELECT node_id FROM snowflake_stats()"; }
# wait_issuing NAME SECONDS: until NAME issues (recorded), or fail.
wait_issuing() {
  local i
  for i in $(seq 1 $(($2 * 10))); do
    issue "$1" 1 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$1 did not issue within $2 s: $(psql_on "$1" -c 'SELECT snowflake_next()' 2>&1 | head -3)"
}
# timed_writer NAME MS: inserts 20 IDs at a time (recorded) on NAME for
# MS ms, about every 20 ms; the time of each success (ms since 1970) goes
# to $SF_WORK/ok.NAME, each failure to $SF_WORK/w.NAME.err.
timed_writer() {
  local name=$1 end=$(( $(now_ms) + $2 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    if issue "$name" 20 2>> "$SF_WORK/w.$name.err"; then now_ms >> "$SF_WORK/ok.$name"; fi
    sleep 0.02
  done
}
# longest_gap NAME SINCE: the longest time (ms) between two of NAME's
# successes (timed_writer) after SINCE (ms since 1970).
longest_gap() {
  awk -v t="$2" '$1 > t && prev && $1 - prev > max { max = $1 - prev } { prev = $1 } END { print max + 0 }' "$SF_WORK/ok.$1"
}
no_duplicates() {
  local dups; dups=$(sort "$IDS" | uniq -d | sed -n 1,5p)
  [ -z "$dups" ] || fail "$1: IDs issued twice: $dups"
  pass "$1: $(wc -l < "$IDS") IDs issued so far, none twice"
}
# expect_refusal NAME SQL SQLSTATE PATTERN CASE: SQL must fail on NAME with
# SQLSTATE, its message matching the grep PATTERN ("": any message); CASE
# names what is refused in the failure.
expect_refusal() {
  local out
  out=$(sql_error "$1" "$2") || fail "$5: it was not refused"
  [ "$(sqlstate_of "$out")" = "$3" ] || fail "$5: not $3: $out"
  [ -z "$4" ] ||
    grep -q "$4" <<<"$out" || fail "$5: the message does not match '$4': $out"
}
# wait_primary: until the registry, restored with recovery, has ended it.
wait_primary() {
  for _ in $(seq 1 300); do
    [ "$(sql_value reg "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && return 0
    sleep 0.1
  done
  fail "the restored registry did not end its recovery within 30 s: $(tail -5 "$(cluster_log reg)")"
}
# password_role ROLE METHOD: a client role of the registry that logs in
# over TCP with the password 'pw-in-a-file' and pg_hba.conf's METHOD
# (scram-sha-256, password), kept in a password file the server's OS user
# alone reads; prints the file's path.
password_role() {
  local hba passfile="$SF_WORK/$1.pgpass"
  psql_on reg -c "SET password_encryption = 'scram-sha-256'" \
    -c "CREATE ROLE $1 LOGIN PASSWORD 'pw-in-a-file'" -c "GRANT snowflake_registry_client TO $1" >/dev/null
  hba="$(cluster_dir reg)/pg_hba.conf"
  { echo "host all $1 127.0.0.1/32 $2"; cat "$hba"; } > "$SF_WORK/hba.new"
  as_pg cp "$SF_WORK/hba.new" "$hba"
  psql_on reg -c "SELECT pg_reload_conf()" >/dev/null
  echo "127.0.0.1:$(cluster_port reg):postgres:$1:pw-in-a-file" > "$passfile"
  chown postgres:postgres "$passfile"
  chmod 0600 "$passfile"
  echo "$passfile"
}
registry_sql() {
  psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port reg)" -U fleet_node -d postgres -c "$1"
}
