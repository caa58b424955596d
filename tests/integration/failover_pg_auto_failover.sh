#!/usr/bin/env bash
# A real HA manager: pg_auto_failover (Debian's postgresql-15-auto-failover,
# pg_autoctl 2.0) with a monitor and two nodes on 127.0.0.1, set up as
# docs/operations.md ("Tested recipe: pg_auto_failover") shows. The nodes
# run with node id 9, sequence_bits = 1 and max_clock_drift = 60s, so a
# maximal batch stores every ID of the next minute and a promoted node that
# resumed after its copied lease file and its clock would reissue them.
#   - switchover: a maximal batch on node1, `pg_autoctl perform switchover`
#     at once, then 8 clients inserting through the new primary (node2);
#   - failover: a maximal batch on node2, its whole pg_autoctl service and
#     PostgreSQL killed (kill -9), the monitor promotes node1, then inserts;
# each time: zero duplicate keys, every new ID above every old one.
# PostgreSQL 15 only (the package exists for Debian's 15).
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/failover_pg_auto_failover.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_failover.sh
. "$(dirname "$0")/lib_failover.sh"

# pg_autoctl under private XDG directories, its cleanup, autoctl_run,
# wait_state, start_monitor, start_nodes (PostgreSQL 15 only: else skipped).
# shellcheck source-path=SCRIPTDIR source=lib_pg_auto_failover.sh
. "$(dirname "$0")/lib_pg_auto_failover.sh"

# The recipe (docs/operations.md shows it; lib_pg_auto_failover.sh runs
# it): the monitor, then node1 with these settings and node2 its copy.
start_monitor
start_nodes <<CONF
shared_preload_libraries = 'pg_stat_statements,snowflake_id'
snowflake_id.node_id = 9
snowflake_id.sequence_bits = 1
snowflake_id.max_clock_drift = '60s'
shared_buffers = '64MB'
CONF
psql_on node1 -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
[ "$(sql_value node2 "SHOW snowflake_id.node_id")" = 9 ] || fail "node2 does not have node id 9"
pass "pg_auto_failover: monitor, node1 primary and node2 secondary, both with node id 9"

# Switchover right after a maximal batch.
old_max=$(burst node1 1 60000)
echo "switchover: largest stored ID $old_max, $(ahead_ms node1 "$old_max") ms ahead of the clock"
start=$(now_ms)
autoctl perform switchover --pgdata "$(cluster_dir monitor)" >> "$SF_WORK/monitor.autoctl.log" 2>&1 ||
  fail "pg_autoctl perform switchover failed"
wait_state node2 primary 60
for _ in $(seq 1 100); do [ "$(sql_value node2 "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && break; sleep 0.1; done
echo "switchover: node2 writable $(( $(now_ms) - start )) ms after the switchover began"
check_resumes_above node2 "pg_auto_failover switchover, node2 promoted" "$old_max" 9 5
wait_state node1 secondary 90

# Failover: node2's whole service killed right after a maximal batch.
old_max=$(burst node2 1 60000)
wait_for_replay node1 node2
echo "failover: largest stored ID $old_max, $(ahead_ms node2 "$old_max") ms ahead of the clock"
start=$(now_ms)
kill -9 -- "-$(cat "$SF_WORK/node2.autoctl.pid")" 2>/dev/null || true
cluster_kill9 node2
# Alone, the promoted node stays in wait_primary: writable, no standby.
wait_state node1 'wait_primary|primary' 120
for _ in $(seq 1 600); do [ "$(sql_value node1 "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && break; sleep 0.1; done
echo "failover: node1 writable $(( $(now_ms) - start )) ms after node2 was killed"
check_resumes_above node1 "pg_auto_failover failover, node1 promoted" "$old_max" 9 5
pass "failover_pg_auto_failover"
