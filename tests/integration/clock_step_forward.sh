#!/usr/bin/env bash
# Calls that issue nothing leave nothing that blocks the others.
#
#   1. A forward clock step, corrected (a bad NTP step; a VM resumed from
#      suspend and set right): a server on a registry (3 s grants), its
#      clock an hour ahead. The registry grants nothing that far ahead, so
#      every call fails while the clock is wrong; once it is right again,
#      calls issue within a few seconds. Before, a call made while the clock
#      was ahead moved the generator an hour forward and then failed, and
#      every call after the correction failed with 58000 ("the clock is ...
#      behind the last issued ID", though no such ID was issued) until the
#      server was restarted.
#   2. Batches at the drift limit beside single calls: four sessions issue
#      batches of 5,000 IDs (sequence_bits = 1: two IDs a millisecond, so a
#      batch spans 2.5 s) under max_clock_drift = 3 s, a fifth single IDs.
#      No call fails. Before, batches waiting on the same generator woke
#      together and several took their ranges, so the generator ran a batch
#      and more past the limit and single calls failed with 58000 as if the
#      clock had stepped back (42 of 669 in the report).
#
# Run alone: bash tests/integration/clock_step_forward.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"
faketime_init

# --- 1. a forward step of an hour, corrected
node_init fwd
cluster_start_faked fwd
make_table fwd
wait_issuing fwd 30
issue fwd 100
before=$(sql_value fwd "SELECT max(id) FROM t")
clock_set +3600
ahead_out=$(sql_error fwd "SELECT snowflake_next()") ||
  fail "a call with the clock an hour ahead issued an ID the registry never granted"
pass "clock an hour ahead: the call failed ($(sqlstate_of "$ahead_out"))"
sql_error fwd "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, 50)" >/dev/null ||
  fail "fifty calls with the clock an hour ahead issued IDs"
sql_error fwd "SELECT count(*) FROM snowflake_next_batch(20)" >/dev/null ||
  fail "a batch with the clock an hour ahead was issued"
clock_set +0
# The registry worker renews on the corrected clock; every call issues again
# within a few grants (on the code before, 58000 for the hour).
ok=0
for _ in $(seq 1 200); do
  if issue fwd 10 2>"$SF_WORK/fwd.err"; then ok=1; break; fi
  sleep 0.1
done
[ "$ok" = 1 ] || fail "20 s after the clock was corrected the server still refuses: $(cat "$SF_WORK/fwd.err")"
issue fwd 100
after=$(sql_value fwd "SELECT min(id) FROM t WHERE id > $before")
[ "$(sql_value fwd "SELECT count(*) FROM snowflake_next_batch(100)")" = 100 ] || fail "a batch after the correction"
last_ms=$(sql_value fwd "SELECT (extract(epoch FROM snowflake_timestamp(max(id))) * 1000)::bigint FROM t")
[ $(( last_ms - $(now_ms) )) -lt 10000 ] ||
  fail "the IDs after the correction are $(( last_ms - $(now_ms) )) ms ahead of the clock"
no_duplicates "after the forward step"
pass "clock corrected: issuing again at once, IDs at the clock ($after above $before)"
cluster_stop fwd

# --- 2. batches at the drift limit beside single calls
port=$(free_port)
cluster_init batches "$port" "snowflake_id.node_id = 3" "snowflake_id.sequence_bits = 1" \
  "snowflake_id.max_clock_drift = '3s'"
cluster_start batches
psql_on batches -c "CREATE EXTENSION snowflake_id" >/dev/null
SECONDS_RUN=15
# calls LABEL CALL PAUSE_S: a session making CALL for SECONDS_RUN seconds,
# PAUSE_S apart, catching each failure; prints "LABEL <issued> failed
# <failed> <last error>".
calls() {
  psql_on batches -At <<SQL
SET client_min_messages = warning;
DO \$\$
DECLARE ok int := 0; bad int := 0; last_error text; stop timestamptz := clock_timestamp() + interval '$SECONDS_RUN s';
BEGIN
  WHILE clock_timestamp() < stop LOOP
    BEGIN
      PERFORM $2;
      ok := ok + 1;
    EXCEPTION WHEN others THEN
      bad := bad + 1; last_error := SQLSTATE || ' ' || SQLERRM;
    END;
    PERFORM pg_sleep($3);
  END LOOP;
  RAISE WARNING '$1 % failed % %', ok, bad, coalesce(last_error, '');
END
\$\$;
SQL
}
for i in 1 2 3 4; do
  calls batches "count(*) FROM snowflake_next_batch(5000)" 0 > "$SF_WORK/batch.$i" 2>&1 &
done
calls singles "snowflake_next()" 0.01 > "$SF_WORK/single" 2>&1
wait
singles=$(sed -n 's/.*WARNING:  singles \([0-9]*\) failed \([0-9]*\).*/\1 \2/p' "$SF_WORK/single")
[ -n "$singles" ] || fail "the single calls' session did not report: $(cat "$SF_WORK/single")"
read -r single_ok single_bad <<<"$singles"
batches_ok=0
for i in 1 2 3 4; do
  b=$(sed -n 's/.*WARNING:  batches \([0-9]*\) failed \([0-9]*\).*/\1 \2/p' "$SF_WORK/batch.$i")
  [ -n "$b" ] || fail "batch session $i did not report: $(cat "$SF_WORK/batch.$i")"
  read -r b_ok b_bad <<<"$b"
  [ "$b_bad" = 0 ] || fail "batch session $i: $b_bad of $((b_ok + b_bad)) batches failed: $(cat "$SF_WORK/batch.$i")"
  batches_ok=$((batches_ok + b_ok))
done
[ "$single_bad" = 0 ] ||
  fail "$single_bad of $((single_ok + single_bad)) single calls failed beside the batches: $(cat "$SF_WORK/single")"
[ "$batches_ok" -ge 6 ] || fail "only $batches_ok batches in $SECONDS_RUN s (the clock allows 6 and more): they did not run at the drift limit"
waits=$(sql_value batches "SELECT waits FROM snowflake_stats()")
[ "$waits" -gt 0 ] || fail "no call waited: the batches did not reach the drift limit"
pass "four sessions of batches at the drift limit ($batches_ok batches of 5,000, $waits waits) and $single_ok single calls beside them: none failed"
