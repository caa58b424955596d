#!/usr/bin/env bash
# A standby that cannot keep a replayed lease must not forget that at a
# restart.
#
# Redo writes every replayed lease into the standby's own lease file,
# because after a restart redo starts at the last restart point, past the
# records. When that write fails, the standby is blocked; the block used to
# live in memory only: after the disk was repaired and the standby
# restarted within the drift window (a restart point past the record), it
# started from its stale lease file and, promoted, issued IDs of its old
# primary's last burst again. Now the block is kept in the hold file: after
# the restart the standby is held, and promoted it refuses (55000) until
# accepted, after which its IDs lie above every ID the old primary issued.
#
# The failure: a directory in the place of the lease file's temporary file
# (snowflake_id.lease.tmp), so that creating it fails, on the standby only.
#
# Run alone: bash tests/integration/replay_unwritable.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_failover.sh
. "$(dirname "$0")/lib_failover.sh"

require_installed_extension

# One sequence bit and a 10 s drift limit: a burst takes every pair of the
# next 10 seconds, so IDs issued from a stale lease within them collide.
cluster_init primary "$(free_port)" "snowflake_id.node_id = 21" \
  "snowflake_id.sequence_bits = 1" "snowflake_id.max_clock_drift = '10s'"
cluster_start primary
psql_on primary -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
psql_on primary -c "INSERT INTO t (src) SELECT 'before' FROM generate_series(1, 100)"
cluster_basebackup standby "$(free_port)" primary
cluster_start standby
wait_for_replay standby primary

# The standby's lease file can no longer be written.
as_pg mkdir "$(cluster_dir standby)/snowflake_id.lease.tmp"
old_max=$(burst primary 1 10000)
wait_for_replay standby primary
log_has standby "a replayed lease could not be kept" ||
  fail "the standby did not report the lease it could not keep"
# A restart point past the lease records: after a restart redo does not
# replay them again.
psql_on primary -c "CHECKPOINT"
wait_for_replay standby primary
psql_on standby -c "CHECKPOINT"
pass "the standby replayed the burst's lease records but could not keep them (largest ID on the primary: $old_max, $(ahead_ms primary "$old_max") ms ahead)"

# The disk is repaired, the old primary is gone, and the standby restarts
# and is promoted at once, well within the drift window.
as_pg rmdir "$(cluster_dir standby)/snowflake_id.lease.tmp"
cluster_stop primary
cluster_stop standby
cluster_start standby
promote standby
out=$(sql_error standby "SELECT snowflake_next()") ||
  fail "the restarted, promoted standby issued an ID: it forgot the lease it could not keep"
[ "$(sqlstate_of "$out")" = 55000 ] || { printf '%s\n' "$out"; fail "SQLSTATE is not 55000"; }
grep -q "recovery could not keep the old primary's lease" <<<"$out" ||
  { printf '%s\n' "$out"; fail "the message does not say why"; }
pass "restarted within the drift window and promoted, the standby is held (55000: the lease it could not keep)"

psql_on standby -c "SELECT snowflake_accept_configuration()" >/dev/null
check_resumes_above standby "accepted" "$old_max" 21
pass "accepted, it issues IDs above every ID the old primary issued, none twice"
