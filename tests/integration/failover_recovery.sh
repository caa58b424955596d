#!/usr/bin/env bash
# Every way of replaying the WAL resumes above the last replayed lease
# (the lease in the WAL). A primary of node 9 with sequence_bits = 1 (2 IDs
# per ms) and max_clock_drift = 60s: one maximal batch stores every pair of
# the next 60 s, so a server that resumed after an old lease file and its
# own clock would reissue stored IDs for a minute, whatever the timing (each
# case fails on the code before the WAL records). Made before the burst: a
# standby, a cascaded standby (a standby of the standby), a second standby,
# and a base backup for point-in-time recovery; the WAL is archived. After
# the burst and a checkpoint:
#   - the second standby is restarted (not promoted): its restart point is
#     past the records, so it must keep them in its own lease file;
#   - the primary is killed; the cascaded standby and the restarted one are
#     promoted;
#   - the base backup is restored to a time after the burst
#     (recovery_target_time, archived WAL) and promoted;
#   - on another primary, killed after the burst, the lease file is put back
#     to a copy from before it: crash recovery replays the records;
# each must issue IDs above every stored one. A standby configured with
# another node id must have the change accepted after promotion (refused
# while in recovery) and then starts above the replayed leases. Then
# lease_sync = on with a
# synchronous standby: an ID handed out by SELECT and never stored is below
# every ID of the promoted standby; with the standby down, a call that needs
# a new lease waits and a statement_timeout ends the wait.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/failover_recovery.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_failover.sh
. "$(dirname "$0")/lib_failover.sh"

require_installed_extension
ARCHIVE="$SF_WORK/archive"
mkdir -p "$ARCHIVE"; chown postgres:postgres "$ARCHIVE"

cluster_init primary "$(free_port)" "snowflake_id.node_id = 9" "snowflake_id.sequence_bits = 1" \
  "snowflake_id.max_clock_drift = '60s'" "archive_mode = on" "archive_command = 'cp %p $ARCHIVE/%f'"
cluster_start primary || fail "the primary did not start"
psql_on primary -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE" \
  -c "INSERT INTO t (src) SELECT 'before' FROM generate_series(1, 100)"
cluster_basebackup standby "$(free_port)" primary
cluster_start standby || fail "the standby did not start"
cluster_basebackup cascade "$(free_port)" standby
cluster_start cascade || fail "the cascaded standby did not start"
cluster_basebackup restarted "$(free_port)" primary
cluster_start restarted || fail "the second standby did not start"
cluster_basebackup pitr "$(free_port)" primary
rm -f "$(cluster_dir pitr)/standby.signal"
pass "primary (node 9, sequence_bits 1, max_clock_drift 60s), standby, cascaded standby, second standby, base backup"

old_max=$(burst primary 1 60000)
sleep 0.2
target=$(sql_value primary "SELECT clock_timestamp()")
sleep 0.2
psql_on primary -c "INSERT INTO t (src) VALUES ('after the target')"
marker=$(sql_value primary "SELECT max(id) FROM t")
# A checkpoint after the burst: the second standby's restart point (taken
# at its shutdown) moves past the lease records.
psql_on primary -c "CHECKPOINT" -c "SELECT pg_switch_wal()" >/dev/null
for name in standby cascade restarted; do wait_for_replay "$name" primary; done
echo "burst: largest stored ID $old_max, $(ahead_ms primary "$old_max") ms ahead of the clock; recovery target $target"

(cd / && as_pg "$(cluster_bin restarted)/pg_ctl" -D "$(cluster_dir restarted)" -w -t 60 -m fast restart >/dev/null) ||
  fail "the second standby did not restart"
wait_for_replay restarted primary
for _ in $(seq 1 100); do
  [ -f "$ARCHIVE/$(sql_value primary "SELECT pg_walfile_name(pg_current_wal_lsn() - 1)")" ] && break
  sleep 0.1
done
cluster_kill9 primary

promote cascade
check_resumes_above cascade "cascaded standby, promoted" "$marker" 9
promote restarted
check_resumes_above restarted "standby restarted after the burst, then promoted" "$marker" 9

cluster_conf pitr "restore_command = 'cp $ARCHIVE/%f %p'" "recovery_target_time = '$target'" \
  "recovery_target_action = 'promote'" "primary_conninfo = ''"
as_pg touch "$(cluster_dir pitr)/recovery.signal"
cluster_start pitr || fail "the point-in-time restore did not start"
for _ in $(seq 1 300); do
  [ "$(sql_value pitr "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && break
  sleep 0.1
done
[ "$(sql_value pitr "SELECT pg_is_in_recovery()")" = f ] || fail "the point-in-time restore did not finish recovery"
[ "$(sql_value pitr "SELECT max(id) FROM t")" = "$old_max" ] || fail "the restore did not stop at the target (after the burst, before the last row)"
# A restored backup may run beside its original: held until the operator
# says the original is gone (tests/integration/copies.sh has the details).
out=$(sql_error pitr "SELECT snowflake_next()") || fail "the point-in-time restore issued an ID before acceptance"
[ "$(sqlstate_of "$out")" = 55000 ] || { printf '%s\n' "$out"; fail "the restore's hold is not 55000"; }
psql_on pitr -c "SELECT snowflake_accept_configuration()" >/dev/null
pass "the point-in-time restore is held as a possible copy (55000) until accepted"
check_resumes_above pitr "point-in-time restore to $target" "$old_max" 9

# Crash recovery, on a primary of its own: its last checkpoint is before
# the burst, and its lease file is put back to the copy from then.
cluster_init crash "$(free_port)" "snowflake_id.node_id = 9" "snowflake_id.sequence_bits = 1" \
  "snowflake_id.max_clock_drift = '60s'"
cluster_start crash || fail "the crash primary did not start"
psql_on crash -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE" \
  -c "INSERT INTO t (src) SELECT 'before' FROM generate_series(1, 100)" -c "CHECKPOINT"
cp -p "$(cluster_dir crash)/snowflake_id.lease" "$SF_WORK/lease.before"
crash_max=$(burst crash 1 60000)
cluster_kill9 crash
cp -p "$SF_WORK/lease.before" "$(cluster_dir crash)/snowflake_id.lease"
cluster_start crash || fail "the crash primary did not restart"
check_resumes_above crash "crash recovery with the lease file from before the burst" "$crash_max" 9

# A standby with another node id (10): its copied lease file (node 9)
# blocks it from the start, and the records it replays are remembered, so
# that acceptance after promotion starts above the old primary's last lease,
# not above the lease file it copied. Acceptance is refused in recovery.
cluster_init fp "$(free_port)" "snowflake_id.node_id = 9" "snowflake_id.sequence_bits = 1" \
  "snowflake_id.max_clock_drift = '60s'"
cluster_start fp || fail "the primary of node 9 did not start"
psql_on fp -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE" \
  -c "INSERT INTO t (src) SELECT 'before' FROM generate_series(1, 100)"
cluster_basebackup fs "$(free_port)" fp
cluster_conf fs "snowflake_id.node_id = 10"
cluster_start fs || fail "the standby with node id 10 did not start"
fp_max=$(burst fp 1 60000)
wait_for_replay fs fp
out=$(sql_error fs "SELECT snowflake_accept_configuration()") || fail "acceptance succeeded on a standby"
[ "$(sqlstate_of "$out")" = 25006 ] || { printf '%s\n' "$out"; fail "acceptance on a standby: expected 25006"; }
grep -q "cannot accept a configuration change on a server in recovery" <<<"$out" || fail "acceptance on a standby: wrong message"
cluster_kill9 fp
promote fs
out=$(sql_error fs "SELECT snowflake_next()") || fail "the promoted standby with node id 10 issued an ID before acceptance"
[ "$(sqlstate_of "$out")" = 55000 ] || { printf '%s\n' "$out"; fail "expected 55000 before acceptance"; }
psql_on fs -At -c "SELECT snowflake_accept_configuration()" | sed 's/^/  /'
check_resumes_above fs "standby with node id 10, promoted, change accepted" "$fp_max" 10
pass "another node id on the standby: acceptance refused in recovery (25006), required after promotion (55000), then above the replayed leases"

# lease_sync = on, synchronous standby.
cluster_init sp "$(free_port)" "snowflake_id.node_id = 9" "snowflake_id.lease_sync = on"
cluster_start sp || fail "the lease_sync primary did not start"
psql_on sp -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
cluster_basebackup ss "$(free_port)" sp
cluster_start ss || fail "the synchronous standby did not start"
make_sync sp
psql_on sp -c "INSERT INTO t (src) SELECT 'stored' FROM generate_series(1, 1000)"
pass "lease_sync: 1000 rows inserted through a synchronous lease"

cluster_stop ss
sleep 0.5   # the lease (200 ms ahead) runs out: the next ID needs a new one
out=$(sql_error sp "SET statement_timeout = '1s'; SELECT snowflake_next()") || fail "lease_sync: an ID was issued while the synchronous standby was down"
printf '%s\n' "$out" | sed 's/^/  /'
[ "$(sqlstate_of "$out")" = 57014 ] || fail "lease_sync: expected the statement timeout (57014) to end the wait"
pass "lease_sync: with the synchronous standby down, snowflake_next() waits, and statement_timeout ends the wait"
cluster_start ss || fail "the synchronous standby did not restart"
unstored=$(sql_value sp "SELECT max(x) FROM (SELECT snowflake_next() AS x FROM generate_series(1, 1000)) s")
stored_max=$(sql_value sp "SELECT max(id) FROM t")
[ "$unstored" -gt "$stored_max" ] || fail "lease_sync: IDs after the standby's return are not above the stored ones"
cluster_kill9 sp
promote ss
check_resumes_above ss "lease_sync: promoted synchronous standby, above the largest ID handed out and never stored" "$unstored" 9
pass "failover_recovery"
