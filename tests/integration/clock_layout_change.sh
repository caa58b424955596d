#!/usr/bin/env bash
# Clock fault 5: the layout or the epoch changes on a cluster that already
# issued IDs.
#
# IDs issued under the old configuration and IDs issued under the new one
# could collide or sort wrongly, so after such a change snowflake_next() must
# refuse (SQLSTATE 55000, naming what changed) until a superuser runs
# snowflake_accept_configuration(). After that, new IDs must be greater than
# every ID issued before the change.
#
# Why the order holds after acceptance: the lease file bounds the time of
# every ID the old configuration issued (lease_until, in the old epoch and
# time field). Acceptance takes the largest ID the old layout could have
# issued up to that lease (lease_until in the old time field, every node and
# sequence bit set), raises the generator's floor in the new layout above it,
# and writes a new lease under the new configuration. The generator's pair
# never decreases, so every later ID is above that floor, hence above every
# old ID, whatever the wall clock maps to in the new layout.
#
# Where the new layout maps the present onto smaller IDs (a later epoch, or a
# wider time field, as with fewer node bits and the same sequence bits) that
# floor lies far ahead of the clock, years for node_bits 10 -> 8: IDs would
# then carry times in the future. The extension refuses such an acceptance
# instead (it tells the distance and says to keep the time field's width and
# epoch, or to raise max_clock_drift beyond it); the test checks that this
# refusal changes nothing and that restoring the old settings works.
#
# Cases, in order, on one cluster (node 5):
#   1. node_bits 10 -> 8 alone (time field 41 -> 43 bits): 55000, acceptance
#      refused, still 55000, old setting restored, IDs flow and stay ordered.
#   2. node_bits 10 -> 8 and sequence_bits 12 -> 14 (same time field): 55000
#      naming both, a non-superuser cannot accept, a superuser can, new IDs
#      above old ones, and a restart does not ask again.
#   3. epoch 2025-01-01 -> 2024-01-01 (earlier: larger time values): same.
#   4. epoch 2024-01-01 -> 2025-01-01 (later by a year): acceptance refused,
#      then restored as in 1.
#
# Run alone: bash tests/integration/clock_layout_change.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

port=$(free_port)
cluster_init layout "$port" \
  "snowflake_id.node_id = 5" \
  "max_parallel_workers_per_gather = 0"
cluster_start layout

psql_on layout <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE t (id bigint NOT NULL, config text NOT NULL);
INSERT INTO t SELECT snowflake_next(), 'original' FROM generate_series(1, 10000);
CREATE ROLE app LOGIN;
GRANT ALL ON t TO app;
SQL

# refused NAME EXPECTED: snowflake_next() fails with 55000 and names EXPECTED
# and the way to accept; snowflake_stats() shows the hold and names EXPECTED.
refused() {
  local label=$1 expected=$2 rc=0
  psql_on layout -v VERBOSITY=verbose -c "SELECT snowflake_next()" > "$SF_WORK/refused.out" 2>&1 || rc=$?
  echo "  snowflake_next(): rc=$rc"
  sed 's/^/    /' "$SF_WORK/refused.out"
  [ "$rc" -ne 0 ] || fail "$label: snowflake_next() issued an ID under a changed configuration"
  grep -q "^ERROR:  55000: " "$SF_WORK/refused.out" || fail "$label: expected SQLSTATE 55000"
  grep -q "$expected" "$SF_WORK/refused.out" || fail "$label: the error does not name $expected"
  grep -q "snowflake_accept_configuration" "$SF_WORK/refused.out" ||
    fail "$label: the error does not say how to accept the change (snowflake_accept_configuration)"
  [ "$(sql_value layout "SELECT issuing_held FROM snowflake_stats()")" = configuration_changed ] ||
    fail "$label: snowflake_stats().issuing_held is not 'configuration_changed'"
  sql_value layout "SELECT held_message FROM snowflake_stats()" | grep "$expected" >/dev/null ||
    fail "$label: snowflake_stats().held_message does not name $expected"
}

# restart_with LABEL CONF_LINE...: stop, append the lines (later lines win), start.
restart_with() {
  local label=$1; shift
  cluster_stop layout
  cluster_conf layout "$@"
  cluster_start layout || fail "$label: the server did not start"
  echo "$label: restarted with: $*"
}

largest_so_far() {
  sql_value layout "SELECT greatest(max(id), snowflake_next()) FROM t"
}

# check_above LABEL MAX_BEFORE: 10,000 new IDs, all above MAX_BEFORE, no duplicate.
check_above() {
  local label=$1 max_before=$2 rc=0 min_after rows distinct_ids drift
  psql_on layout -v VERBOSITY=verbose -c "INSERT INTO t SELECT snowflake_next(), '$label' FROM generate_series(1, 10000)" \
    > "$SF_WORK/after.out" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { cat "$SF_WORK/after.out"; fail "$label: snowflake_next() fails"; }
  read -r min_after rows distinct_ids < <(sql_value layout "
    SELECT min(id) FILTER (WHERE config = '$label'), count(*), count(DISTINCT id) FROM t" | tr '|' ' ')
  drift=$(sql_value layout "SELECT drift_ms FROM snowflake_stats()")
  echo "  max id before=$max_before min id after=$min_after (decoded $(sql_value layout "SELECT snowflake_decode($min_after)")) drift_ms=$drift rows=$rows distinct=$distinct_ids"
  [ "$min_after" -gt "$max_before" ] || fail "$label: a new ID ($min_after) is not above the largest old one ($max_before)"
  [ "$distinct_ids" -eq "$rows" ] || fail "$label: $((rows - distinct_ids)) duplicate IDs"
}

# change_and_accept LABEL EXPECTED_NAME CONF_LINE...: a change that can be
# accepted.
change_and_accept() {
  local label=$1 expected=$2; shift 2
  local max_before rc
  max_before=$(largest_so_far)
  restart_with "$label" "$@"
  refused "$label" "$expected"

  # Only a superuser may accept.
  rc=0
  psql_on layout -U app -v VERBOSITY=verbose -c "SELECT snowflake_accept_configuration()" > "$SF_WORK/app.out" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || fail "$label: a non-superuser accepted the configuration change"
  echo "  as a non-superuser: $(grep -m1 ERROR "$SF_WORK/app.out")"

  psql_on layout -At -c "SELECT snowflake_accept_configuration()" > "$SF_WORK/accept.out" 2>&1 ||
    { cat "$SF_WORK/accept.out"; fail "$label: snowflake_accept_configuration() failed"; }
  echo "  snowflake_accept_configuration() returned: $(tr '\n' ' ' < "$SF_WORK/accept.out")"
  # A change of widths is a change of the whole fleet: the acceptance says so.
  if grep -q "node_bits changed\|sequence_bits changed" "$SF_WORK/accept.out"; then
    grep -q "the layout changed: every server issuing IDs for the same tables must run this layout before any of them issues again" "$SF_WORK/accept.out" ||
      fail "$label: accepting a layout change does not say that every node must change before any issues again"
  fi
  check_above "$label" "$max_before"

  # The acceptance is durable: a restart under the same configuration does
  # not refuse again, and IDs keep increasing.
  max_before=$(largest_so_far)
  cluster_stop layout
  cluster_start layout || fail "$label: the server did not restart after acceptance"
  local next
  next=$(sql_value layout "SELECT snowflake_next()") || fail "$label: refused again after a restart"
  [ "$next" -gt "$max_before" ] || fail "$label: after a restart, $next is not above $max_before"
  pass "$label: refused with 55000 naming $expected, accepted, new IDs above the old ones, acceptance survives a restart"
}

# acceptance_refused LABEL EXPECTED_NAME RESTORE_LINE CONF_LINE...: a change
# that would put IDs far ahead of the clock: acceptance fails and changes
# nothing; restoring the old setting makes IDs flow again, still ordered.
acceptance_refused() {
  local label=$1 expected=$2 restore=$3; shift 3
  local max_before rc=0
  max_before=$(largest_so_far)
  restart_with "$label" "$@"
  refused "$label" "$expected"
  psql_on layout -v VERBOSITY=verbose -c "SELECT snowflake_accept_configuration()" > "$SF_WORK/accept.out" 2>&1 || rc=$?
  echo "  snowflake_accept_configuration(): rc=$rc"
  sed 's/^/    /' "$SF_WORK/accept.out"
  [ "$rc" -ne 0 ] || fail "$label: accepted a configuration whose IDs would lie far ahead of the clock"
  grep -q "ahead of the clock" "$SF_WORK/accept.out" || fail "$label: the refusal does not say how far ahead of the clock IDs would be"
  refused "$label (after the refused acceptance)" "$expected"
  restart_with "$label, restored" "$restore"
  check_above "$label" "$max_before"
  pass "$label: refused with 55000 naming $expected, acceptance refused (IDs would be far ahead of the clock), works again once restored"
}

acceptance_refused "node_bits 10->8" "node_bits" "snowflake_id.node_bits = 10" \
  "snowflake_id.node_bits = 8"
change_and_accept "node/sequence split 10/12->8/14" "node_bits changed from 10 to 8" \
  "snowflake_id.node_bits = 8" "snowflake_id.sequence_bits = 14"
grep -q "sequence_bits changed from 12 to 14" "$SF_WORK/refused.out" || fail "the error does not name sequence_bits"
change_and_accept "epoch 2025->2024" "epoch changed" \
  "snowflake_id.epoch = '2024-01-01 00:00:00+00'"
acceptance_refused "epoch 2024->2025" "epoch changed" "snowflake_id.epoch = '2024-01-01 00:00:00+00'" \
  "snowflake_id.epoch = '2025-01-01 00:00:00+00'"

pass "layout and epoch changes refused until accepted; order kept across all of them ($(sql_value layout "SELECT count(*) FROM t") IDs)"
