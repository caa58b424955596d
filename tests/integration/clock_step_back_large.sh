#!/usr/bin/env bash
# Clock fault 2: the server's clock steps back by one hour.
#
# Expected: snowflake_next() fails at once (no session hangs until the clock
# catches up) with SQLSTATE 58000, a message giving the size of the step and a
# hint naming snowflake_id.max_clock_drift; the error is counted in
# snowflake_stats().drift_errors. Once the clock is right again, inserts
# resume, and no ID is ever issued twice.
#
# On the way it also steps back by a little more than max_clock_drift
# (5.15 s against 5 s): that excess is small, so the call is expected to wait
# for the clock, not fail.
#
# Run alone: bash tests/integration/clock_step_back_large.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
faketime_init

port=$(free_port)
cluster_init large "$port" \
  "snowflake_id.node_id = 2" \
  "max_parallel_workers_per_gather = 0"
cluster_start_faked large

psql_on large <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE t (id bigint NOT NULL DEFAULT snowflake_next(), phase text NOT NULL);
INSERT INTO t (phase) SELECT 'before' FROM generate_series(1, 1000);
SQL
echo "inserted $(sql_value large "SELECT count(*) FROM t") rows on the right clock"

stats() {
  sql_value large "SELECT $1 FROM snowflake_stats()"
}

# --- a step just past max_clock_drift: the backend waits, then issues -------
# One session issues an ID, then (psql's \! runs the shell here) waits for the
# next second boundary, so that its backend re-reads the offset file at its
# next clock reading, and sets the clock 5.15 s behind that ID's time
# (clock_set_behind in lib_clock.sh); then it inserts. The drift is 5150 ms
# minus the few ms between writing the file and the insert's clock reading:
# over the 5000 ms limit by less than 200 ms, so the insert must sleep until
# the clock catches up, and succeed.
waits0=$(stats waits); wait_time0=$(stats wait_time_ms)
small_rc=0
SF_CLOCK_FILE=$SF_CLOCK_FILE SF_CLOCK_LIB=$SF_CLOCK_LIB \
  psql_on large -v VERBOSITY=verbose > "$SF_WORK/small.out" 2>&1 <<'SQL' || small_rc=$?
SELECT (extract(epoch FROM snowflake_timestamp(snowflake_next())) * 1000)::bigint AS last_ms \gset
\setenv LAST_MS :last_ms
\! . "$SF_CLOCK_LIB" && clock_set_behind "$SF_CLOCK_FILE" "$LAST_MS" 5150
\timing on
INSERT INTO t (phase) VALUES ('small step');
\timing off
SQL
clock_set +0
small_ms=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$SF_WORK/small.out")
waits1=$(stats waits); wait_time1=$(stats wait_time_ms)
echo "clock 5.15 s behind the last ID (max_clock_drift 5 s): insert rc=$small_rc in ${small_ms:-?} ms, waits +$((waits1 - waits0)), wait_time_ms ${wait_time0} -> ${wait_time1}"
[ "$small_rc" -eq 0 ] || { cat "$SF_WORK/small.out"; fail "a step back of 5.15 s (excess under 200 ms) made the insert fail"; }
[ "$waits1" -gt "$waits0" ] || fail "the insert after a 5.15 s step did not wait for the clock"

# --- a one-hour step: the call fails at once -----------------------------------
clock_set -1h
expect_drift_error large "$SF_WORK/large.out" "step back 1 h"
elapsed_ms=$DRIFT_ERROR_MS
behind_ms=$(sed -n 's/.*the clock is \([0-9]*\) ms behind.*/\1/p' "$SF_WORK/large.out" | head -1)
[ -n "$behind_ms" ] || fail "message does not give the step in ms"
{ [ "$behind_ms" -ge 3590000 ] && [ "$behind_ms" -le 3610000 ]; } || fail "message says ${behind_ms} ms behind, expected about 3600000"

# The column default fails the same way.
rc=0
psql_on large -v VERBOSITY=verbose -c "INSERT INTO t (phase) VALUES ('during')" > "$SF_WORK/insert.out" 2>&1 || rc=$?
{ [ "$rc" -ne 0 ] && grep -q "^ERROR:  58000: " "$SF_WORK/insert.out"; } ||
  { cat "$SF_WORK/insert.out"; fail "INSERT with the clock an hour behind did not fail with 58000"; }

read -r backward_steps largest_step drift drift_errors < <(sql_value large "
  SELECT backward_steps, largest_backward_step_ms, drift_ms, drift_errors FROM snowflake_stats()" | tr '|' ' ')
echo "stats during the step: backward_steps=$backward_steps largest_backward_step_ms=$largest_step drift_ms=$drift drift_errors=$drift_errors"
[ "$drift_errors" -ge 2 ] || fail "drift_errors = $drift_errors, expected at least 2"
[ "$backward_steps" -ge 1 ] || fail "backward_steps = $backward_steps"
[ "$largest_step" -ge 3590000 ] || fail "largest_backward_step_ms = $largest_step, expected about 3600000"
grep -q "WARNING:.*clock stepped back" "$(cluster_log large)" || fail "no WARNING \"clock stepped back\" in the log"
echo "log:"
{ grep "WARNING:.*clock stepped back" "$(cluster_log large)" | sed 's/^/  /'; } || true

# --- clock right again: inserts resume -----------------------------------------
clock_set +0
psql_on large <<'SQL'
INSERT INTO t (phase) SELECT 'after' FROM generate_series(1, 1000);
INSERT INTO t (phase) VALUES ('after');
INSERT INTO t (phase) VALUES ('after');
SQL
read -r rows distinct_ids during after_count max_before min_after < <(sql_value large "
  SELECT count(*), count(DISTINCT id),
         count(*) FILTER (WHERE phase = 'during'),
         count(*) FILTER (WHERE phase = 'after'),
         max(id) FILTER (WHERE phase IN ('before', 'small step')),
         min(id) FILTER (WHERE phase = 'after')
  FROM t" | tr '|' ' ')
echo "after restoring the clock: rows=$rows distinct_ids=$distinct_ids after=$after_count max_before=$max_before min_after=$min_after"
[ "$after_count" -eq 1002 ] || fail "inserts did not resume"
[ "$during" -eq 0 ] || fail "$during rows were inserted while the clock was an hour behind"
[ "$distinct_ids" -eq "$rows" ] || fail "$((rows - distinct_ids)) duplicate IDs"
[ "$min_after" -gt "$max_before" ] || fail "IDs after the step are not above those before"

pass "1 h backward step: immediate 58000 in ${elapsed_ms} ms (${behind_ms} ms behind), drift_errors=$drift_errors, inserts resumed, $rows distinct IDs"
