#!/usr/bin/env bash
# Clock fault 3: a crash (kill -9 of the postmaster and every backend), and the
# clock set back one hour before the server starts again.
#
# Shared memory, and with it the generator's last (time, sequence), is gone
# after the crash; what survives is the lease file, whose lease_until no
# issued ID exceeds. The restarted generator resumes after lease_until, so:
# - with max_clock_drift at its default (5 s), the logical clock is an hour
#   ahead of the wall clock and snowflake_next() fails with the drift error
#   (58000) instead of issuing an ID that could repeat one from before;
# - with max_clock_drift raised to 2 h (a reload, no restart), IDs flow again,
#   and every new ID is greater than every ID issued before the crash.
#
# Run alone: bash tests/integration/clock_crash_restart.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
faketime_init

port=$(free_port)
cluster_init crash "$port" \
  "snowflake_id.node_id = 3" \
  "max_parallel_workers_per_gather = 0"
cluster_start_faked crash

psql_on crash <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE t (id bigint NOT NULL DEFAULT snowflake_next(), phase text NOT NULL);
INSERT INTO t (phase) SELECT 'before' FROM generate_series(1, 20000);
SQL
# The largest ID handed out before the crash: the committed rows, and a batch
# that is only returned to the client (issued IDs count even if never stored).
max_table=$(sql_value crash "SELECT max(id) FROM t")
max_returned=$(sql_value crash "SELECT max(snowflake_next()) FROM generate_series(1, 100000)")
max_last=$(sql_value crash "SELECT snowflake_next()")
max_before=$(printf '%s\n' "$max_table" "$max_returned" "$max_last" | sort -n | tail -1)
[ "$max_before" = "$max_last" ] || fail "the last ID issued ($max_last) is not the largest ($max_before)"
read -r issued lease_until lease_writes < <(sql_value crash "
  SELECT ids_issued, lease_until, lease_writes FROM snowflake_stats()" | tr '|' ';' | tr ' ' '_' | tr ';' ' ')
echo "before the crash: ids_issued=$issued max_id=$max_before ($(sql_value crash "SELECT snowflake_timestamp($max_before)")) lease_until=$lease_until lease_writes=$lease_writes"

cluster_kill9 crash
clock_set -1h
cluster_start_faked crash || fail "the server did not restart after the crash"
echo "restarted after kill -9 with the clock one hour back: server time $(sql_value crash "SELECT clock_timestamp()"), real $(date -u '+%F %T')"
rows_after_recovery=$(sql_value crash "SELECT count(*) FROM t")
[ "$rows_after_recovery" -eq 20000 ] || fail "crash recovery left $rows_after_recovery rows, expected 20000"

expect_drift_error crash "$SF_WORK/drift.out" "restart one hour after the lease, default max_clock_drift"

# Raise the limit with a reload; wait until new sessions see it.
psql_on crash -c "ALTER SYSTEM SET snowflake_id.max_clock_drift = 7200000" -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 50); do
  [ "$(sql_value crash "SELECT max_clock_drift_ms FROM snowflake_stats()")" = 7200000 ] && break
  sleep 0.1
done
[ "$(sql_value crash "SELECT max_clock_drift_ms FROM snowflake_stats()")" = 7200000 ] ||
  fail "max_clock_drift did not become 7200000 after pg_reload_conf()"

psql_on crash <<'SQL'
INSERT INTO t (phase) SELECT 'after' FROM generate_series(1, 20000);
SQL
read -r rows distinct_ids min_after max_after < <(sql_value crash "
  SELECT count(*), count(DISTINCT id), min(id) FILTER (WHERE phase = 'after'),
         max(id) FILTER (WHERE phase = 'after') FROM t" | tr '|' ' ')
read -r drift max_drift drift_errors backward_steps < <(sql_value crash "
  SELECT drift_ms, max_drift_ms, drift_errors, backward_steps FROM snowflake_stats()" | tr '|' ' ')
echo "after raising max_clock_drift to 2 h: new ids $min_after .. $max_after, the first at $(sql_value crash "SELECT snowflake_timestamp($min_after)"), max id before the crash=$max_before"
echo "  rows=$rows distinct_ids=$distinct_ids drift_ms=$drift max_drift_ms=$max_drift drift_errors=$drift_errors backward_steps=$backward_steps"
[ "$min_after" -gt "$max_before" ] || fail "an ID issued after the restart ($min_after) is not above the largest before the crash ($max_before)"
[ "$distinct_ids" -eq "$rows" ] || fail "$((rows - distinct_ids)) duplicate IDs"
[ "$drift_errors" -ge 1 ] || fail "drift_errors = $drift_errors"
# The logical clock resumed after the lease, about an hour ahead of the faked wall clock.
[ "$drift" -ge 3500000 ] || fail "drift_ms = $drift, expected about an hour"

clock_set +0
pass "crash + clock back 1 h: drift error at default max_clock_drift, then after raising it every new ID (min $min_after) > every ID before the crash (max $max_before)"
