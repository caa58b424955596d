#!/usr/bin/env bash
# Failover at an HA manager's speed never reissues an ID: the lease travels
# in the WAL. Each case: a primary of node 9 and a streaming
# standby made with pg_basebackup; one maximal snowflake_next_batch() puts
# the generator up to max_clock_drift (5 s) ahead of the clock, 1000 rows
# commit, the primary is killed (kill -9) and the standby promoted at once.
# The promoted server must issue IDs above every ID it received, and 8
# clients inserting for 7 s (past the stored IDs' times) must meet no duplicate key:
#   - asynchronous replication, the default layout;
#   - synchronous replication (synchronous_standby_names = '*');
#   - asynchronous, sequence_bits = 1 (2 IDs per millisecond): every pair of
#     the 5 s ahead is stored, so a standby that resumed after its copied
#     lease file and its own clock would reissue them (this case fails on
#     the code before the WAL records: first new ID below the stored ones);
#   - pg_walinspect names the records (resource manager snowflake_id, type
#     LEASE, the lease in the description), where the server has it;
#   - a standby without the library preloaded stops at the first lease
#     record, with PostgreSQL's message and hint (docs/operations.md).
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/failover_wal.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_failover.sh
. "$(dirname "$0")/lib_failover.sh"

require_installed_extension

# failover_case NAME SEQUENCE_BITS SYNC: the whole case, clusters NAME-p and
# NAME-s.
failover_case() {
  local name=$1 bits=$2 sync=$3 p="$1-p" s="$1-s" old_max ahead
  local conf=("snowflake_id.node_id = 9" "snowflake_id.sequence_bits = $bits")
  cluster_init "$p" "$(free_port)" "${conf[@]}"
  cluster_start "$p" || fail "$name: the primary did not start"
  psql_on "$p" -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
  cluster_basebackup "$s" "$(free_port)" "$p"
  cluster_start "$s" || fail "$name: the standby did not start"
  if [ "$sync" = sync ]; then make_sync "$p"; fi
  old_max=$(burst "$p" "$bits" 5000)
  ahead=$(ahead_ms "$p" "$old_max")
  [ "$sync" = sync ] || wait_for_replay "$s" "$p"
  cluster_kill9 "$p"
  promote "$s"
  [ "$(sql_value "$s" "SELECT max(id) FROM t")" = "$old_max" ] || fail "$name: the standby did not receive every row"
  echo "$name: $sync replication, sequence_bits $bits: largest stored ID $old_max, $ahead ms ahead of the clock at the kill"
  check_resumes_above "$s" "$name (promoted at once)" "$old_max" 9 7
}

failover_case async 12 async
failover_case sync 12 sync
failover_case seq1 1 async

# pg_walinspect and pg_waldump on a primary that issued IDs.
cluster_init inspect "$(free_port)" "snowflake_id.node_id = 3"
cluster_start inspect || fail "the inspect cluster did not start"
start_lsn=$(sql_value inspect "SELECT pg_current_wal_lsn()")
psql_on inspect -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE" \
  -c "INSERT INTO t (src) SELECT 'x' FROM generate_series(1, 1000)"
end_lsn=$(sql_value inspect "SELECT pg_current_wal_lsn()")
if [ "$(sql_value inspect "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_walinspect'")" = 1 ]; then
  psql_on inspect -c "CREATE EXTENSION pg_walinspect"
  row=$(sql_value inspect "SELECT resource_manager || ' ' || record_type || ' ' || description FROM pg_get_wal_records_info('$start_lsn', '$end_lsn') WHERE resource_manager = 'snowflake_id' LIMIT 1")
  echo "  pg_walinspect: $row"
  [[ "$row" == "snowflake_id LEASE lease_until_unix_ms "*", node_id 3, epoch_unix_ms "*", layout 41/10/12" ]] ||
    fail "pg_walinspect does not name the lease record: '$row'"
  pass "pg_walinspect: resource manager snowflake_id, record type LEASE, the lease, node and layout in the description"
else
  echo "  (this PostgreSQL has no pg_walinspect: not checked)"
fi
waldump=$(cd / && as_pg "$(cluster_bin inspect)/pg_waldump" -p "$(cluster_dir inspect)/pg_wal" -s "$start_lsn" -e "$end_lsn" 2>/dev/null | grep "custom128" || true)
waldump=${waldump%%$'\n'*}
echo "  pg_waldump: $waldump"
[ -n "$waldump" ] || fail "pg_waldump does not show the records of resource manager 128 as custom128"
pass "pg_waldump shows the records as custom128 (it cannot load an extension's descriptions)"

# A standby without the library preloaded cannot replay the records.
cluster_init bare-p "$(free_port)" "snowflake_id.node_id = 5"
cluster_start bare-p || fail "bare-p did not start"
psql_on bare-p -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
cluster_basebackup bare-s "$(free_port)" bare-p
cluster_conf bare-s "shared_preload_libraries = ''"
cluster_start bare-s || fail "the standby without the library did not start"
psql_on bare-p -c "INSERT INTO t (src) VALUES ('x')"
for _ in $(seq 1 100); do
  [ -f "$(cluster_dir bare-s)/postmaster.pid" ] || break
  sleep 0.1
done
[ ! -f "$(cluster_dir bare-s)/postmaster.pid" ] || fail "the standby without the library kept running"
log_has bare-s "resource manager with ID 128 not registered" || fail "no 'resource manager with ID 128 not registered' in the log of the standby without the library"
grep -A1 "resource manager with ID 128 not registered" "$(cluster_log bare-s)" | sed -n '1,4s/^/  /p'
pass "a standby without the library stops at the first lease record, with PostgreSQL's message"
pass "failover_wal"
