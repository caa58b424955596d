#!/usr/bin/env bash
# A copy of a server's data directory must not become a second writer with
# the same node id without the operator's word (src/core/instance.rs):
#   - a pg_basebackup clone started without standby.signal holds
#     snowflake_next() (55000, message naming backup_label, hint naming
#     snowflake_accept_configuration), while the original goes on issuing;
#     the hold outlives a restart (PostgreSQL has renamed backup_label by
#     then); with its own node id and the acceptance it issues IDs;
#   - a restored backup with recovery.signal (a point-in-time restore, to
#     the end of its WAL) holds likewise; accepted, it issues IDs above the
#     original's;
#   - a lease file copied from another database system (a file copied by
#     hand) holds, naming both system identifiers; so does, on 17 and later,
#     a standby converted by a real pg_createsubscriber (new identifier),
#     until it has its own node id and the acceptance;
#   - a copy of the stopped data directory restored with recovery.signal (a
#     snapshot restore, no backup_label) holds;
#   - on 17 and later, a standby of a server that never issued an ID (no
#     lease file), converted by pg_createsubscriber: held, by the system
#     identifier recorded at the first start (snowflake_id.system);
#   - a standby made from the same kind of backup (standby.signal) is not a
#     copy: promoted, it issues IDs at once; a standby of a held primary is
#     (a copy of a copy): it keeps the hold file, and promoted it is held
#     until accepted; so is a held server restarted with standby.signal and
#     promoted;
#   - a lease file of the previous format (version 1, without the system
#     identifier) is read as before.
# On the code before the check the clones issue IDs at once, equal to the
# original's in the same milliseconds.
#
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/copies.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

# expect_copy_hold NAME WHAT ERE: snowflake_next() on NAME fails with 55000,
# a message matching ERE and the hint to give it its own node id; and
# snowflake_stats() says so (issuing_held 'copied', held_message as ERE).
expect_copy_hold() {
  local out
  out=$(sql_error "$1" "SELECT snowflake_next()") || fail "$2: snowflake_next() issued an ID on a copy"
  [ "$(sqlstate_of "$out")" = 55000 ] || { printf '%s\n' "$out"; fail "$2: SQLSTATE is not 55000"; }
  grep -qE "$3" <<<"$out" || { printf '%s\n' "$out"; fail "$2: the message does not match /$3/"; }
  grep -q 'HINT:  Give this server its own snowflake_id.node_id' <<<"$out" ||
    { printf '%s\n' "$out"; fail "$2: the hint is missing"; }
  [ "$(sql_value "$1" "SELECT issuing_held FROM snowflake_stats()")" = copied ] ||
    fail "$2: snowflake_stats().issuing_held is not 'copied'"
  sql_value "$1" "SELECT held_message FROM snowflake_stats()" | grep -E "$3" >/dev/null ||
    fail "$2: snowflake_stats().held_message does not match /$3/"
  pass "$2: snowflake_next() refused with 55000 ($(printf '%s\n' "$out" | sed -n 's/^ERROR: *55000: //p' | cut -c1-110)...)"
}

# clone NAME FROM [signal]: a pg_basebackup of FROM in NAME's directory,
# without -R (no standby.signal, no primary_conninfo); "recovery" adds
# recovery.signal, "standby" -R's standby.signal.
clone() {
  local name=$1 from=$2 signal=${3:-} dir port
  dir=$(cluster_dir "$name"); port=$(free_port)
  local -a opts=()
  [ "$signal" = standby ] && opts=(-R)
  (cd / && as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$(cluster_port "$from")" -U postgres \
    -D "$dir" "${opts[@]}" -X stream -c fast --no-sync)
  [ "$signal" = recovery ] && as_pg touch "$dir/recovery.signal"
  mkdir -p "$dir.sock"; chown postgres:postgres "$dir.sock"
  echo "$port" > "$SF_WORK/$name.port"
  cluster_bin "$from" > "$SF_WORK/$name.bin"
  SF_CLUSTERS+=("$name")
  cluster_conf "$name" "port = $port" "unix_socket_directories = '$dir.sock'"
  # Archive recovery needs a restore command; this one finds nothing, so
  # recovery replays the WAL the backup carries and ends there.
  [ "$signal" = recovery ] && cluster_conf "$name" "restore_command = 'false'"
  return 0
}

cluster_init orig "$(free_port)" "snowflake_id.node_id = 5"
cluster_start orig
psql_on orig <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v text);
INSERT INTO t (v) SELECT 'before' FROM generate_series(1, 1000);
SQL
orig_sysid=$(sql_value orig "SELECT system_identifier FROM pg_control_system()")

# --- a base backup started as it is: a second primary
clone clone orig
cluster_start clone
[ "$(sql_value clone "SELECT pg_is_in_recovery()")" = f ] || fail "the clone is not a primary"
expect_copy_hold clone "base backup started without standby.signal" 'copy of another server.*backup_label.*without standby.signal'
psql_on orig -c "INSERT INTO t (v) SELECT 'original' FROM generate_series(1, 1000)"
pass "the original goes on issuing"
cluster_stop clone
cluster_start clone
[ -f "$(cluster_dir clone)/backup_label" ] && fail "backup_label is still there after the first start"
expect_copy_hold clone "the same clone restarted (backup_label renamed by PostgreSQL)" 'without standby.signal'
# Its own node id, then the acceptance.
cluster_stop clone
cluster_conf clone "snowflake_id.node_id = 6"
cluster_start clone
accepted=$(sql_value clone "SELECT snowflake_accept_configuration()")
grep -q 'snowflake_id.node_id changed from 5 to 6' <<<"$accepted" || fail "acceptance does not name the node id change: $accepted"
grep -q 'this server is a copy' <<<"$accepted" || fail "acceptance does not name the copy: $accepted"
psql_on clone -c "INSERT INTO t (v) SELECT 'clone' FROM generate_series(1, 1000)"
[ "$(sql_value clone "SELECT count(*) FROM t WHERE v = 'clone' AND snowflake_node(id) = 6")" = 1000 ] ||
  fail "the accepted clone does not issue under node id 6"
[ -f "$(cluster_dir clone)/snowflake_id.hold" ] && fail "the hold file survived the acceptance"
cluster_stop clone
cluster_start clone
psql_on clone -c "INSERT INTO t (v) VALUES ('clone after restart')"
pass "with its own node id (6) and the acceptance the clone issues IDs, also after a restart"
cluster_stop clone

# --- a point-in-time restore: backup_label and recovery.signal
clone pitr orig recovery
cluster_start pitr
for _ in $(seq 1 100); do [ "$(sql_value pitr "SELECT pg_is_in_recovery()")" = f ] && break; sleep 0.1; done
[ "$(sql_value pitr "SELECT pg_is_in_recovery()")" = f ] || fail "the restore did not finish recovery"
expect_copy_hold pitr "restore with recovery.signal" 'restored from a backup or a snapshot \(recovery.signal without standby.signal\)'
orig_max=$(sql_value orig "SELECT max(id) FROM t WHERE snowflake_node(id) = 5")
accepted=$(sql_value pitr "SELECT snowflake_accept_configuration()")
grep -q 'this server is a copy' <<<"$accepted" || fail "acceptance of the restore: $accepted"
first=$(sql_value pitr "INSERT INTO t (v) VALUES ('restored') RETURNING id")
[ "$first" -gt "$orig_max" ] || fail "the accepted restore issued $first, not above the original's $orig_max"
pass "the accepted restore (the original is gone, says the operator) issues above the original's IDs ($first > $orig_max)"
cluster_stop pitr

# --- a standby from a backup is not a copy, and its promotion needs nothing
clone standby orig standby
cluster_start standby
wait_for_replay standby orig
as_pg "$PG_BIN/pg_ctl" -D "$(cluster_dir standby)" -w promote >/dev/null
cluster_stop orig
psql_on standby -c "INSERT INTO t (v) SELECT 'promoted' FROM generate_series(1, 1000)"
pass "a standby made from a backup (standby.signal) is promoted and issues IDs without acceptance"
cluster_stop standby

# --- a copy of the stopped data directory restored with recovery.signal (a
# snapshot restore: no backup_label)
as_pg cp -a "$(cluster_dir orig)" "$(cluster_dir snap)"
as_pg rm -f "$(cluster_dir snap)/postmaster.pid"
mkdir -p "$(cluster_dir snap).sock"; chown postgres:postgres "$(cluster_dir snap).sock"
free_port > "$SF_WORK/snap.port"; cluster_bin orig > "$SF_WORK/snap.bin"; SF_CLUSTERS+=(snap)
cluster_conf snap "port = $(cluster_port snap)" "unix_socket_directories = '$(cluster_dir snap).sock'" \
  "restore_command = 'false'"
as_pg touch "$(cluster_dir snap)/recovery.signal"
cluster_start snap
for _ in $(seq 1 100); do [ "$(sql_value snap "SELECT pg_is_in_recovery()")" = f ] && break; sleep 0.1; done
expect_copy_hold snap "snapshot restored with recovery.signal (no backup_label)" 'backup or a snapshot \(recovery.signal without standby.signal\)'
cluster_stop snap

# --- a lease file of another database system
cluster_init other "$(free_port)" "snowflake_id.node_id = 5"
as_pg cp -p "$(cluster_dir orig)/snowflake_id.lease" "$(cluster_dir other)/snowflake_id.lease"
cluster_start other
psql_on other -c "CREATE EXTENSION snowflake_id"
other_sysid=$(sql_value other "SELECT system_identifier FROM pg_control_system()")
expect_copy_hold other "lease file of another system" "written by another database system \(system identifier $orig_sysid, this server's is $other_sysid\)"
psql_on other -c "SELECT snowflake_accept_configuration()" >/dev/null
grep -q "^system_identifier = $other_sysid\$" "$(cluster_dir other)/snowflake_id.lease" ||
  fail "the accepted lease file does not carry this system's identifier"
pass "accepted, the lease file is rewritten as this system's"
cluster_stop other

# --- a real pg_createsubscriber (17 and later): the standby it converts into
# a logical subscriber keeps the node id and the lease, under a new system
# identifier
if [ -x "$PG_BIN/pg_createsubscriber" ]; then
  cluster_init pub "$(free_port)" "snowflake_id.node_id = 11" "wal_level = logical" \
    "max_replication_slots = 10" "max_wal_senders = 10"
  cluster_start pub
  psql_on pub -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v text)" \
    -c "INSERT INTO t (v) SELECT 'pub' FROM generate_series(1, 1000)"
  clone sub pub standby
  cluster_conf sub "max_replication_slots = 10" "max_logical_replication_workers = 4" "max_worker_processes = 16"
  cluster_start sub
  wait_for_replay sub pub
  cluster_stop sub
  create_subscriber sub pub
  pass "pg_createsubscriber converted a standby of node 11 into a logical subscriber"
  cluster_start sub
  [ "$(sql_value sub "SELECT system_identifier FROM pg_control_system()")" != "$(sql_value pub "SELECT system_identifier FROM pg_control_system()")" ] ||
    fail "pg_createsubscriber did not give the subscriber a new system identifier"
  expect_copy_hold sub "standby converted by pg_createsubscriber" 'written by another database system.*pg_createsubscriber'
  # The recipe: its own node id, then the acceptance.
  cluster_stop sub
  cluster_conf sub "snowflake_id.node_id = 12"
  cluster_start sub
  psql_on sub -c "SELECT snowflake_accept_configuration()" >/dev/null
  psql_on sub -c "CREATE TABLE local_t (id bigint PRIMARY KEY DEFAULT snowflake_next())" \
    -c "INSERT INTO local_t SELECT FROM generate_series(1, 100)"
  [ "$(sql_value sub "SELECT count(*) FROM local_t WHERE snowflake_node(id) = 12")" = 100 ] ||
    fail "the converted subscriber does not issue under its new node id"
  pass "with its own node id (12) and the acceptance, the subscriber issues IDs"
  cluster_stop sub
  cluster_stop pub
  # The same conversion of a server that has not issued an ID yet: no lease
  # file, only the system identifier its first start recorded.
  cluster_init pub0 "$(free_port)" "snowflake_id.node_id = 13" "wal_level = logical" \
    "max_replication_slots = 10" "max_wal_senders = 10"
  cluster_start pub0
  psql_on pub0 -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v text)"
  [ ! -f "$(cluster_dir pub0)/snowflake_id.lease" ] || fail "pub0 has a lease file before issuing an ID: the case is not the one tested"
  clone sub0 pub0 standby
  cluster_conf sub0 "max_replication_slots = 10" "max_logical_replication_workers = 4" "max_worker_processes = 16"
  cluster_start sub0
  wait_for_replay sub0 pub0
  cluster_stop sub0
  create_subscriber sub0 pub0
  cluster_start sub0
  expect_copy_hold sub0 "standby of a server that never issued an ID, converted by pg_createsubscriber" \
    'first started by another database system.*pg_createsubscriber'
  cluster_stop sub0
  cluster_stop pub0
fi

# --- a standby of a held server is a copy of a copy: it keeps the hold file
# it copied, and promoted it is held until accepted
cluster_init held "$(free_port)" "snowflake_id.node_id = 8"
echo "set by the test: a held primary" | as_pg tee "$(cluster_dir held)/snowflake_id.hold" >/dev/null
cluster_start held
psql_on held -c "CREATE EXTENSION snowflake_id" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next())"
expect_copy_hold held "a primary with a hold file" 'set by the test'
clone held_standby held standby
cluster_start held_standby
wait_for_replay held_standby held
[ -f "$(cluster_dir held_standby)/snowflake_id.hold" ] || fail "the standby of a held primary lost the hold file"
cluster_stop held
as_pg "$PG_BIN/pg_ctl" -D "$(cluster_dir held_standby)" -w promote >/dev/null
expect_copy_hold held_standby "a standby of a held primary, promoted" 'set by the test.*kept on this standby'
psql_on held_standby -c "SELECT snowflake_accept_configuration()" >/dev/null
psql_on held_standby -c "INSERT INTO t SELECT FROM generate_series(1, 100)"
pass "a standby of a held primary keeps the hold: promoted, it is held until accepted, then issues IDs"
cluster_stop held_standby
# The held server itself, given standby.signal and promoted: still held.
as_pg touch "$(cluster_dir held)/standby.signal"
cluster_start held
as_pg "$PG_BIN/pg_ctl" -D "$(cluster_dir held)" -w promote >/dev/null
expect_copy_hold held "a held server restarted as a standby (standby.signal) and promoted" 'set by the test'
cluster_stop held

# --- a version 1 lease file (written before the system identifier) is read
python3 - "$(cluster_dir other)/snowflake_id.lease" <<'PY'
import sys
path = sys.argv[1]
lines = [l for l in open(path).read().splitlines(keepends=True)
         if not l.startswith(("system_identifier", "checksum"))]
body = "".join(lines).replace("version = 2", "version = 1")
h = 0xcbf29ce484222325
for b in body.encode():
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
open(path, "w").write(body + "checksum = %016x\n" % h)
PY
lease_before=$(sed -n 's/^lease_until_unix_ms = //p' "$(cluster_dir other)/snowflake_id.lease")
cluster_start other
id=$(sql_value other "SELECT snowflake_next()")
[ "$(sql_value other "SELECT (extract(epoch FROM snowflake_timestamp($id)) * 1000)::bigint > $lease_before")" = t ] ||
  fail "after a version 1 lease file, the first ID is not after its lease"
grep -q '^version = 2$' "$(cluster_dir other)/snowflake_id.lease" || fail "the lease file was not rewritten as version 2"
pass "a version 1 lease file is read, the first ID comes after its lease, and the file is rewritten as version 2"
