#!/usr/bin/env bash
# Clock fault: the clock steps back one hour while a call sleeps because its
# IDs ran ahead of the clock.
#
# A call whose IDs would run past max_clock_drift sleeps until the clock
# catches up (here 3 s: two batches of 2.9 s of IDs each, with one sequence
# bit, against a 3 s limit). If the clock steps back an hour during that
# sleep, the call must not sleep for the hour: each sleep is bounded by the
# drift it waits out, on the monotonic clock, and the drift is checked again
# after it, so the call fails at once with the drift error (58000). (It
# used to sleep towards its wall-clock target, an hour away after the
# step: only a cancel ended it; statement_timeout, which reads the same
# stepped clock, did not.)
#
# Run alone: bash tests/integration/clock_step_during_wait.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
faketime_init

port=$(free_port)
cluster_init wait "$port" \
  "snowflake_id.node_id = 3" \
  "snowflake_id.sequence_bits = 1" \
  "snowflake_id.max_clock_drift = '3s'"
cluster_start_faked wait
psql_on wait -c "CREATE EXTENSION snowflake_id"

# One session: a batch of 5,800 IDs (2 per millisecond: 2.9 s ahead of the
# clock, within the limit), then another, which must sleep about 2.8 s.
# Bounded from outside at 40 s: the old code would sleep an hour.
session_start=$(now_ms)
timeout 40 psql -X -h 127.0.0.1 -p "$port" -U postgres -d postgres -v VERBOSITY=verbose > "$SF_WORK/session.out" 2>&1 <<'SQL' &
SELECT count(*) AS first_batch FROM unnest(snowflake_next_batch_array(5800));
SELECT count(*) AS second_batch FROM unnest(snowflake_next_batch_array(5800));
SQL
session=$!
# While the second call sleeps: the clock steps back one hour (seen by the
# server from the next second boundary on, inside the sleep).
sleep 0.5
clock_write "$SF_CLOCK_FILE" -1h
rc=0
wait "$session" || rc=$?
took=$(($(now_ms) - session_start))
cat "$SF_WORK/session.out"
# Whatever happened, end any call still asleep before the clock goes back.
psql_on wait -At -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'" >/dev/null || true
clock_set +0

[ "$rc" -ne 124 ] || fail "the call slept on after the clock stepped back an hour (still asleep after 40 s)"
grep -q "first_batch" "$SF_WORK/session.out" && grep -A2 "first_batch" "$SF_WORK/session.out" | grep 5800 >/dev/null ||
  fail "the first batch did not issue 5800 IDs"
grep -q "ERROR:  58000: snowflake_id: the clock is .* ms behind the last issued ID" "$SF_WORK/session.out" ||
  fail "the sleeping call did not end with the drift error (58000)"
[ "$took" -lt 15000 ] || fail "the session took $took ms: the sleep outlasted the drift it waited out"
pass "a call asleep for the drift limit when the clock stepped back an hour failed with 58000 after $took ms in all"

# The generator is unharmed: with the clock right again, IDs resume above
# every one issued.
sleep 3.5
next=$(sql_value wait "SELECT snowflake_next()")
last=$(sql_value wait "SELECT last_id FROM snowflake_stats()")
[ "$next" = "$last" ] || fail "snowflake_stats().last_id ($last) is not the ID just issued ($next)"
pass "IDs resume once the clock is right: $next"
