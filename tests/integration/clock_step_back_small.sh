#!/usr/bin/env bash
# Clock fault 1: the server's clock steps back by 500 ms while four clients
# insert continuously.
#
# Expected: nothing fails (500 ms is well inside max_clock_drift = 5 s, so the
# generator keeps issuing from its logical clock, which never goes back), no
# ID is issued twice, every client sees its IDs strictly increasing in the
# order it inserted them, and the step is counted in snowflake_stats() and
# logged once as a WARNING.
#
# Run alone: bash tests/integration/clock_step_back_small.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
faketime_init

STEP=-0.5            # seconds, libfaketime relative offset
RUN_SECONDS=6        # pgbench duration; the step happens after STEP_AFTER
STEP_AFTER=2

port=$(free_port)
# Parallel workers would see the real clock on PG 15; the test table gets no
# unique index so that a duplicate is counted instead of failing a client.
cluster_init small "$port" \
  "snowflake_id.node_id = 1" \
  "max_parallel_workers_per_gather = 0" \
  "synchronous_commit = off"
cluster_start_faked small

psql_on small <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE t (
  id     bigint NOT NULL DEFAULT snowflake_next(),
  client int    NOT NULL,
  n      int    NOT NULL   -- per-client insertion counter
);
SQL

script="$SF_WORK/insert.sql"
cat > "$script" <<'PGB'
\set n :n + 1
INSERT INTO t (client, n) VALUES (:client_id, :n);
PGB

out="$SF_WORK/pgbench.out"
pgbench -n -h 127.0.0.1 -p "$port" -U postgres -c 4 -j 2 -T "$RUN_SECONDS" -D n=0 \
  -f "$script" postgres > "$out" 2>&1 &
pgbench_pid=$!

sleep "$STEP_AFTER"
rows_before_step=$(sql_value small "SELECT count(*) FROM t")
clock_set "$STEP"
echo "stepped the server clock back by ${STEP#-} s after ${STEP_AFTER} s ($rows_before_step rows inserted by then)"

pgbench_rc=0
wait "$pgbench_pid" || pgbench_rc=$?
clock_set +0   # forward again; a forward step is harmless
sed 's/^/  pgbench: /' "$out" | grep -E 'processed|failed|tps|error|ERROR|abort' || true
[ "$pgbench_rc" -eq 0 ] || fail "pgbench exited with $pgbench_rc"
processed=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
[ -n "$processed" ] || fail "could not read pgbench's transaction count"
[ "${failed:-0}" -eq 0 ] || fail "pgbench reported $failed failed transactions"

read -r rows distinct_ids dup_pairs order_violations nonpositive foreign_node < <(sql_value small "
  SELECT count(*), count(DISTINCT id),
         count(*) - count(DISTINCT (client, n)),
         (SELECT count(*) FROM (
            SELECT id, lag(id) OVER (PARTITION BY client ORDER BY n) AS prev FROM t) s
          WHERE id <= prev),
         count(*) FILTER (WHERE id <= 0),
         count(*) FILTER (WHERE snowflake_node(id) <> 1)
  FROM t" | tr '|' ' ')
echo "rows=$rows distinct_ids=$distinct_ids pgbench_transactions=$processed order_violations=$order_violations"
sql_value small "SELECT 'client ' || client || ': ' || count(*) || ' rows' FROM t GROUP BY client ORDER BY client" | sed 's/^/  /'
[ "$rows" -eq "$processed" ] || fail "table has $rows rows, pgbench committed $processed transactions"
[ "$dup_pairs" -eq 0 ] || fail "per-client counters repeat ($dup_pairs), the pgbench script is broken"
[ "$distinct_ids" -eq "$rows" ] || fail "$((rows - distinct_ids)) duplicate IDs"
[ "$order_violations" -eq 0 ] || fail "$order_violations IDs not greater than the same client's previous ID"
[ "$nonpositive" -eq 0 ] || fail "$nonpositive IDs are not positive"
[ "$foreign_node" -eq 0 ] || fail "$foreign_node IDs decode to a node other than 1"
[ "$rows" -gt "$rows_before_step" ] || fail "no rows were inserted after the step"

read -r ids_issued backward_steps largest_step max_drift waits wait_time drift_errors < <(sql_value small "
  SELECT ids_issued, backward_steps, largest_backward_step_ms, max_drift_ms, waits,
         round(wait_time_ms::numeric, 3), drift_errors
  FROM snowflake_stats()" | tr '|' ' ')
echo "stats: ids_issued=$ids_issued backward_steps=$backward_steps largest_backward_step_ms=$largest_step max_drift_ms=$max_drift waits=$waits wait_time_ms=$wait_time drift_errors=$drift_errors"
[ "$backward_steps" -ge 1 ] || fail "backward_steps = $backward_steps, expected at least 1"
# "Around 500 ms": the step as seen by a backend is 500 ms minus the time since
# the generator last read the clock (sub-millisecond under this load), plus
# whatever the sequence borrowed; a wide band keeps this from being a timing test.
{ [ "$largest_step" -ge 400 ] && [ "$largest_step" -le 700 ]; } ||
  fail "largest_backward_step_ms = $largest_step, expected about 500"
[ "$drift_errors" -eq 0 ] || fail "drift_errors = $drift_errors, expected 0"

echo "log:"
{ grep "clock stepped back" "$(cluster_log small)" | head -3 | sed 's/^/  /'; } || true
warning_lines=$(grep -c "WARNING:.*clock stepped back" "$(cluster_log small)" || true)
[ "$warning_lines" -ge 1 ] || fail "the server log has no WARNING containing \"clock stepped back\""
# Once per step, not once per backend that saw it.
[ "$warning_lines" -le "$backward_steps" ] ||
  fail "$warning_lines WARNINGs for $backward_steps backward step(s): a step must be logged once"

pass "500 ms backward step under 4 inserting clients: $rows rows, no failure, no duplicate, per-client order kept, step of ${largest_step} ms counted and logged"
