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
# shellcheck source-path=SCRIPTDIR source=failover_lib.bash
. "$(dirname "$0")/failover_lib.bash"

if [ "$PG_MAJOR" != 15 ]; then
  pass "skipped: pg_auto_failover comes from Debian's postgresql-15-auto-failover, for PostgreSQL 15 only"
  exit 0
fi
require_installed_extension
command -v pg_autoctl >/dev/null || fail "pg_autoctl not found (apt-get install postgresql-15-auto-failover; scripts/setup.sh does)"

# pg_autoctl keeps its state under the XDG directories: private ones, so
# that the test neither sees nor leaves state in the postgres user's home.
XDG="$SF_WORK/xdg"
mkdir -p "$XDG/config" "$XDG/data" "$XDG/run"
chown -R postgres:postgres "$XDG"; chmod 700 "$XDG/run"
autoctl() {
  (cd / && sudo -u postgres env XDG_CONFIG_HOME="$XDG/config" XDG_DATA_HOME="$XDG/data" \
    XDG_RUNTIME_DIR="$XDG/run" PG_CONFIG="$PG_BIN/pg_config" PATH="$PG_BIN:$PATH" pg_autoctl "$@")
}

# Every `pg_autoctl run` is stopped before lib.sh stops the clusters (it
# would restart them).
declare -a AUTOCTL_NODES=()
pgaf_cleanup() {
  local rc=$? node
  for node in "${AUTOCTL_NODES[@]}"; do
    autoctl stop --pgdata "$(cluster_dir "$node")" --immediate >/dev/null 2>&1 || true
  done
  pkill -9 -f "pg_autoctl.*$SF_WORK" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    for node in "${AUTOCTL_NODES[@]}"; do echo "--- tail of $node's pg_autoctl log"; tail -15 "$SF_WORK/$node.autoctl.log"; done
  fi
  (exit "$rc"); _sf_cleanup
}
trap pgaf_cleanup EXIT

# autoctl_run NAME: `pg_autoctl run` for the node in the background, in a
# process group of its own (to kill it whole for the failover).
autoctl_run() {
  AUTOCTL_NODES+=("$1")
  setsid bash -c "$(declare -f autoctl); XDG='$XDG' PG_BIN='$PG_BIN' autoctl run --pgdata '$(cluster_dir "$1")'" \
    >> "$SF_WORK/$1.autoctl.log" 2>&1 &
  echo $! > "$SF_WORK/$1.autoctl.pid"
  disown
}

# state NAME: the node's current state as the monitor sees it.
state() {
  autoctl show state --pgdata "$(cluster_dir monitor)" --json 2>/dev/null |
    python3 -c "import json,sys; print(next((n['current_group_state'] for n in json.load(sys.stdin) if n.get('nodename', n.get('node_name')) == '$1'), 'none'))"
}

# wait_state NAME STATES SECONDS: until the node's state is one of STATES
# (an extended regular expression such as 'wait_primary|primary').
wait_state() {
  for _ in $(seq 1 $(( $3 * 5 ))); do
    [[ "$(state "$1")" =~ ^($2)$ ]] && return 0
    sleep 0.2
  done
  fail "$1 did not reach state $2 within $3 s (it is $(state "$1"))"
}

# The recipe (docs/operations.md shows these lines).
MONITOR_PORT=$(free_port); echo "$MONITOR_PORT" > "$SF_WORK/monitor.port"
autoctl create monitor --pgdata "$(cluster_dir monitor)" --pgport "$MONITOR_PORT" \
  --hostname 127.0.0.1 --auth trust --no-ssl >> "$SF_WORK/monitor.autoctl.log" 2>&1
autoctl config set --pgdata "$(cluster_dir monitor)" postgresql.listen_addresses 127.0.0.1 >/dev/null
cat >> "$(cluster_dir monitor)/postgresql.conf" <<CONF
shared_buffers = '64MB'
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 3000
pgautofailover.primary_demote_timeout = 5000
CONF
autoctl_run monitor
MONITOR_URI="postgres://autoctl_node@127.0.0.1:$MONITOR_PORT/pg_auto_failover?sslmode=disable"
for _ in $(seq 1 150); do psql -X -h 127.0.0.1 -p "$MONITOR_PORT" -U autoctl_node -d pg_auto_failover -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.2; done

create_node() {
  local name=$1 port; port=$(free_port); echo "$port" > "$SF_WORK/$name.port"
  autoctl create postgres --pgdata "$(cluster_dir "$name")" --pgport "$port" --name "$name" \
    --hostname 127.0.0.1 --listen 127.0.0.1 --auth trust --no-ssl --monitor "$MONITOR_URI" \
    >> "$SF_WORK/$name.autoctl.log" 2>&1 || { tail -20 "$SF_WORK/$name.autoctl.log"; fail "pg_autoctl create postgres $name failed"; }
}

create_node node1
cat >> "$(cluster_dir node1)/postgresql.conf" <<CONF
shared_preload_libraries = 'pg_stat_statements,snowflake_id'
snowflake_id.node_id = 9
snowflake_id.sequence_bits = 1
snowflake_id.max_clock_drift = '60s'
shared_buffers = '64MB'
CONF
autoctl_run node1
wait_state node1 single 60
create_node node2
autoctl_run node2
wait_state node2 secondary 90
wait_state node1 primary 30
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
