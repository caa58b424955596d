#!/usr/bin/env bash
# A real pg_upgrade of a cluster with snowflake IDs from one major version to
# a newer one (scripts/test.sh runs it from 16 to 18 and from 18 to 19, and
# says why not from 15), or to the same one (15 to 15). pg_upgrade does not carry the lease file; the extension notes while
# pg_upgrade runs that the lease is still to come (snowflake_id.upgraded),
# so that:
#   - started without the lease, the upgraded server refuses to issue IDs
#     (55000, the hint says to copy the file), instead of starting from its
#     clock as a new server would;
#   - with the lease copied as docs/upgrading.md says, but a forgotten
#     snowflake_id.epoch line in the new postgresql.conf, it refuses
#     (the configuration guard has the old lease to compare with);
#   - with the settings carried over, it adopts the lease as its own, keeps
#     every row, resumes after the old server's lease, and issues IDs above
#     every old one, under the same node id;
#   - a held copy (a hold file), upgraded with its lease file copied, stays
#     held: a held server marks its lease file (system identifier 0), and
#     the hold travels with it;
#   - a server with its node id from a registry: pg_upgrade's own starts
#     write no lease (no worker runs in binary-upgrade mode), so the
#     upgraded server is held until the lease is copied, then issues above
#     the old cluster's largest ID;
#   - a server started in binary-upgrade mode, as pg_upgrade starts both,
#     runs no worker of the extension (15 starts background workers there;
#     the code before ran the lease worker).
#
#   PG_BIN=<old bin> NEW_PG_BIN=<new bin> bash tests/upgrade/pg_upgrade.sh
#
# snowflake_id must be installed into both servers (cargo pgrx install
# --pg-config for each); pg_upgrade itself checks that the new server can
# load every library the old cluster uses.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"

[ -n "${NEW_PG_BIN:-}" ] || fail "NEW_PG_BIN is not set: the bin directory of the PostgreSQL to upgrade to"
OLD_PG_BIN=$PG_BIN
old_major=$PG_MAJOR
new_major=$(pg_major "$NEW_PG_BIN/pg_config")
# (The same major version too: pg_upgrade allows it; scripts/test.sh runs
# 15 to 15.)
[ "$new_major" -ge "$old_major" ] || fail "NEW_PG_BIN ($new_major) is older than PG_BIN ($old_major)"
require_installed_extension
PG_BIN=$NEW_PG_BIN require_installed_extension

# --- the old cluster, with IDs from snowflake_next() and from a batch
cluster_init old "$(free_port)" "snowflake_id.node_id = 12"
cluster_start old
psql_on old <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text NOT NULL);
INSERT INTO orders (item) SELECT 'item ' || i FROM generate_series(1, 20000) AS i;
INSERT INTO orders (id, item) SELECT id, 'batch' FROM snowflake_next_batch(5000) AS id;
-- Keyed by the snowflake type, whose OID pg_upgrade must keep.
CREATE TABLE typed (id snowflake PRIMARY KEY DEFAULT snowflake_next(), n int);
INSERT INTO typed (n) SELECT i FROM generate_series(1, 1000) AS i;
SQL
typed_before=$(sql_value old "SELECT md5(string_agg(row_to_json(t)::text, ',' ORDER BY id)) FROM typed t")
old_count=$(sql_value old "SELECT count(*) FROM orders")
old_max=$(sql_value old "SELECT max(id) FROM orders")
old_sum=$(sql_value old "SELECT sum(id) FROM orders")
old_version=$(sql_value old "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")
old_lease=$(sql_value old "SELECT lease_until FROM snowflake_stats()")
echo "old cluster (PostgreSQL $old_major): $old_count rows, largest ID $old_max"
cluster_stop old

# --- the new cluster: initdb with the same settings, then pg_upgrade.
# PostgreSQL 18's initdb turns data checksums on by default, and pg_upgrade
# needs both clusters alike: off in the new one only when the old one is
# older than 18.
new_opts=""
[ "$new_major" -ge 18 ] && [ "$old_major" -lt 18 ] && new_opts="--no-data-checksums"
new_port=$(free_port)
PG_BIN=$NEW_PG_BIN SF_INITDB_OPTS=$new_opts cluster_init new "$new_port" "snowflake_id.node_id = 12"
# pg_upgrade starts both servers itself, with their sockets in its working
# directory, and writes its logs under the new data directory.
# upgrade OLD NEW: pg_upgrade of cluster OLD into the new cluster NEW; its
# log in $SF_WORK/pg_upgrade.NEW.log, shown when it fails.
upgrade() {
  local log="$SF_WORK/pg_upgrade.$2.log"
  if ! (cd "$SF_WORK" && as_pg "$NEW_PG_BIN/pg_upgrade" \
    --old-bindir "$OLD_PG_BIN" --new-bindir "$NEW_PG_BIN" \
    --old-datadir "$(cluster_dir "$1")" --new-datadir "$(cluster_dir "$2")" \
    --old-port "$(cluster_port "$1")" --new-port "$(cluster_port "$2")" \
    --username postgres --socketdir "$SF_WORK" >"$log" 2>&1); then
    cat "$log"
    find "$(cluster_dir "$2")" -path '*pg_upgrade_output.d*' -name '*.log' -exec tail -n 20 {} + 2>/dev/null || true
    fail "pg_upgrade of $1 from $old_major to $new_major failed"
  fi
  tail -5 "$log"
}
upgrade old new
pass "pg_upgrade from PostgreSQL $old_major to $new_major"

# pg_upgrade leaves the lease file behind (it carries no file from the root
# of the data directory).
[ -f "$(cluster_dir new)/snowflake_id.lease" ] && fail "pg_upgrade carried the lease file (the docs say it does not)"
[ -f "$(cluster_dir new)/snowflake_id.upgraded" ] || fail "no snowflake_id.upgraded note in the upgraded cluster"
[ -f "$(cluster_dir old)/snowflake_id.upgraded" ] && fail "the note was written into the old cluster too"
pass "pg_upgrade left the lease behind, and the extension noted it (snowflake_id.upgraded) in the new cluster only"

# --- started without the lease: held
cluster_start new || fail "the upgraded cluster did not start"
out=$(sql_error new "SELECT snowflake_next()") || fail "the upgraded server issued an ID without the old lease"
[ "$(sqlstate_of "$out")" = 55000 ] || { printf '%s\n' "$out"; fail "without the lease: SQLSTATE is not 55000"; }
grep -q 'made by pg_upgrade and its lease file (snowflake_id.lease) was not copied' <<<"$out" ||
  { printf '%s\n' "$out"; fail "without the lease: the message does not say why"; }
grep -q 'HINT:  Stop this server and copy snowflake_id.lease from the old data directory' <<<"$out" ||
  { printf '%s\n' "$out"; fail "without the lease: the hint does not say what to do"; }
pass "started without the old lease, the upgraded server refuses to issue IDs (55000, hint: copy the file)"
cluster_stop new

# --- the lease copied (both servers stopped), a forgotten epoch line: held
as_pg cp -p "$(cluster_dir old)/snowflake_id.lease" "$(cluster_dir new)/snowflake_id.lease"
cluster_conf new "snowflake_id.epoch = '2025-06-01 00:00:00+00'"
cluster_start new || fail "the upgraded cluster did not start with the lease"
out=$(sql_error new "SELECT snowflake_next()") || fail "the upgraded server issued an ID under another epoch"
grep -q 'snowflake_id.epoch changed' <<<"$out" || { printf '%s\n' "$out"; fail "the epoch change is not named"; }
pass "with the lease copied and another epoch in postgresql.conf, the upgraded server refuses (the epoch change is named)"
cluster_stop new
as_pg sed -i "/^snowflake_id.epoch = '2025-06-01/d" "$(cluster_dir new)/postgresql.conf"

# --- the upgraded server, settings carried over
cluster_start new || fail "the upgraded cluster did not start"
[ "$(sql_value new "SHOW server_version_num" | cut -c1-2)" = "$new_major" ] || fail "the upgraded cluster is not PostgreSQL $new_major"
[ "$(sql_value new "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")" = "$old_version" ] ||
  fail "the extension's version changed in the upgrade"
[ "$(sql_value new "SELECT count(*) FROM orders")" = "$old_count" ] || fail "rows were lost in the upgrade"
[ "$(sql_value new "SELECT sum(id) FROM orders")" = "$old_sum" ] || fail "IDs changed in the upgrade"
[ "$(sql_value new "SELECT count(*) FROM orders WHERE snowflake_node(id) = 12")" = "$old_count" ] ||
  fail "old IDs do not decode to node 12 after the upgrade"
pass "the upgraded cluster keeps $old_count rows, their IDs and the extension $old_version"
[ "$(sql_value new "SELECT md5(string_agg(row_to_json(t)::text, ',' ORDER BY id)) FROM typed t")" = "$typed_before" ] ||
  fail "the table keyed by the snowflake type changed in the upgrade (rows or their JSON)"
[ "$(sql_value new "SELECT bool_and(jsonb_typeof(to_jsonb(t) -> 'id') = 'string') AND count(*) = 1000 FROM typed t")" = t ] ||
  fail "after the upgrade, the snowflake type is not a JSON string"
pass "the table keyed by the snowflake type: the same 1,000 rows and JSON after the upgrade"
[ "$(sql_value new "SELECT lease_until >= '$old_lease'::timestamptz FROM snowflake_stats()")" = t ] ||
  fail "the upgraded server's lease is not at or after the old server's ($old_lease)"
pass "the upgraded server resumes from the old server's lease ($old_lease)"
[ -f "$(cluster_dir new)/snowflake_id.upgraded" ] && fail "the snowflake_id.upgraded note is still there"
new_sysid=$(sql_value new "SELECT system_identifier FROM pg_control_system()")
grep -q "^system_identifier = $new_sysid\$" "$(cluster_dir new)/snowflake_id.lease" ||
  fail "the adopted lease does not carry the new system's identifier"
pass "the copied lease is adopted as the new system's ($new_sysid), the note removed"

psql_on new -c "INSERT INTO orders (item) SELECT 'after ' || i FROM generate_series(1, 5000) AS i"
new_min=$(sql_value new "SELECT min(id) FROM orders WHERE item LIKE 'after %'")
echo "first ID after the upgrade: $new_min (largest before: $old_max)"
[ "$new_min" -gt "$old_max" ] || fail "the upgraded server issued $new_min, not above the old largest ID $old_max"
[ "$(sql_value new "SELECT snowflake_node($new_min)")" = 12 ] || fail "new IDs do not carry node id 12"
[ "$(sql_value new "SELECT count(*) = count(DISTINCT id) FROM orders")" = t ] || fail "duplicate IDs after the upgrade"
pass "the upgraded server issues IDs above every old one, under node id 12"

# --- a held copy upgraded: the hold travels with the lease file
# A restored copy held until accepted (its hold file, as the extension
# writes it), upgraded and given its lease file as the docs say, must stay
# held: pg_upgrade does not carry the hold file, but a held server writes
# its lease marked as held.
PG_BIN=$OLD_PG_BIN cluster_init heldold "$(free_port)" "snowflake_id.node_id = 14"
cluster_start heldold
psql_on heldold -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next())" \
  -c "INSERT INTO t SELECT FROM generate_series(1, 100)"
cluster_stop heldold
echo "set by the test: a restored copy, held" | as_pg tee "$(cluster_dir heldold)/snowflake_id.hold" >/dev/null
cluster_start heldold
sql_error heldold "SELECT snowflake_next()" >/dev/null || fail "the held copy issued an ID before the upgrade"
grep -q "^system_identifier = 0\$" "$(cluster_dir heldold)/snowflake_id.lease" ||
  fail "the held server did not mark its lease file as held"
cluster_stop heldold
PG_BIN=$NEW_PG_BIN SF_INITDB_OPTS=$new_opts cluster_init heldnew "$(free_port)" "snowflake_id.node_id = 14"
upgrade heldold heldnew
as_pg cp -p "$(cluster_dir heldold)/snowflake_id.lease" "$(cluster_dir heldnew)/snowflake_id.lease"
cluster_start heldnew || fail "the upgraded held copy did not start"
out=$(sql_error heldnew "SELECT snowflake_next()") || fail "the upgraded held copy issued an ID: the hold was lost in the upgrade"
[ "$(sqlstate_of "$out")" = 55000 ] || { printf '%s\n' "$out"; fail "upgraded held copy: SQLSTATE is not 55000"; }
grep -q 'made by pg_upgrade from a server held as a possible copy' <<<"$out" ||
  { printf '%s\n' "$out"; fail "upgraded held copy: the message does not say why"; }
pass "a held copy, upgraded with its lease file copied as documented, is still held (55000)"
psql_on heldnew -c "SELECT snowflake_accept_configuration()" >/dev/null
psql_on heldnew -c "INSERT INTO t SELECT FROM generate_series(1, 100)"
[ "$(sql_value heldnew "SELECT count(*) = count(DISTINCT id) AND count(*) = 200 FROM t")" = t ] || fail "IDs twice after accepting the upgraded copy"
pass "accepted, the upgraded copy issues IDs, none twice"

# --- with node ids from a registry: pg_upgrade's own starts of the two
# clusters run no worker, so they claim nothing and write no lease. (They
# did: the new cluster's lease, stamped with its own identifier, was
# adopted at its first start, which issued IDs below the old cluster's
# last one, under another node id.)
# shellcheck source-path=SCRIPTDIR source=../integration/lib_registry.sh
. "$(dirname "$0")/../integration/lib_registry.sh"
# (A grant longer than the burst below, which runs 5 s ahead.)
node_init regold "snowflake_id.registry_grant = '30s'"
cluster_start regold || fail "the registry's fleet server did not start"
make_table regold
wait_issuing regold 20
# IDs up to the drift limit ahead of the clock, as a burst leaves them.
reg_max=$(sql_value regold "SELECT a[cardinality(a)] FROM (SELECT snowflake_next_batch_array(20000000) a) b")
reg_node=$(node_of regold)
echo "registry fleet server: node id $reg_node, largest ID $reg_max"
cluster_stop regold
PG_BIN=$NEW_PG_BIN SF_INITDB_OPTS=$new_opts node_init regnew "snowflake_id.registry_grant = '30s'"
upgrade regold regnew
[ -f "$(cluster_dir regnew)/snowflake_id.lease" ] &&
  fail "with a registry, a lease was written while pg_upgrade ran (its starts ran the workers)"
pass "with a registry, pg_upgrade's starts wrote no lease into the new cluster"
cluster_start regnew || fail "the upgraded fleet server did not start"
out=$(sql_error regnew "SELECT snowflake_next()") || fail "the upgraded fleet server issued an ID without the old lease"
[ "$(sqlstate_of "$out")" = 55000 ] && [ "$(sql_value regnew "SELECT issuing_held FROM snowflake_stats()")" = lease_missing_after_upgrade ] ||
  { printf '%s\n' "$out"; fail "with a registry and without the lease: not held as lease_missing_after_upgrade"; }
cluster_stop regnew
as_pg cp -p "$(cluster_dir regold)/snowflake_id.lease" "$(cluster_dir regnew)/snowflake_id.lease"
cluster_start regnew || fail "the upgraded fleet server did not start with the lease"
wait_issuing regnew 20
# (The row wait_issuing just inserted is the largest, if it is above them.)
reg_first=$(sql_value regnew "SELECT max(id) FROM t")
[ "$reg_first" -gt "$reg_max" ] || fail "the upgraded fleet server issued $reg_first, not above the old largest ID $reg_max"
pass "with a registry: held without the lease; with it, IDs above the old cluster's largest ($reg_first > $reg_max)"

# --- pg_upgrade's own starts are in binary-upgrade mode (postgres -b): the
# extension starts no worker there, whether or not PostgreSQL starts
# background workers in that mode (15 does: its logical replication
# launcher runs; on the code before, so did the lease worker).
PG_BIN=$NEW_PG_BIN cluster_init binup "$(free_port)" "snowflake_id.node_id = 13"
(cd / && as_pg "$NEW_PG_BIN/pg_ctl" -D "$(cluster_dir binup)" -l "$(cluster_log binup)" -o "-b" -w -t 60 start >/dev/null) ||
  fail "the server did not start in binary-upgrade mode"
children() { ps -o args= --ppid "$(head -1 "$(cluster_dir binup)/postmaster.pid")" || true; }
launcher=no
for _ in $(seq 1 50); do
  grep -q "logical replication launcher" <<<"$(children)" && { launcher=yes; break; }
  sleep 0.1
done
if [ "$launcher" = yes ]; then
  # PostgreSQL started its own worker: ours, registered with it, would be up
  # by now or within the second after.
  sleep 1
  ! grep -q "snowflake_id" <<<"$(children)" ||
    fail "in binary-upgrade mode the extension started a worker: $(children | grep snowflake_id)"
  pass "in binary-upgrade mode (pg_upgrade's starts) PostgreSQL $new_major starts its background workers, the extension none"
else
  ! grep -q "snowflake_id" <<<"$(children)" || fail "in binary-upgrade mode the extension started a worker"
  pass "in binary-upgrade mode PostgreSQL $new_major starts no background worker, nor does the extension"
fi
cluster_stop binup
