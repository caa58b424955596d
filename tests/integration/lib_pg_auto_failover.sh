# shellcheck shell=bash
# The pg_auto_failover tests' set-up (failover_pg_auto_failover.sh,
# registry_pg_auto_failover.sh), sourced after lib.sh. On a PostgreSQL
# other than 15 the test passes as skipped and ends here: pg_auto_failover
# comes from Debian's postgresql-15-auto-failover (pg_autoctl 2.0). It sets
# up private XDG directories for pg_autoctl and an EXIT trap that stops
# every `pg_autoctl run` before lib.sh stops the clusters, and defines
# autoctl, autoctl_run, state, wait_state, start_monitor (the monitor, its
# health checks shortened), create_node and start_nodes (node1 primary,
# node2 its secondary).
# (Named lib_*.sh, so run_all.sh does not take it for a test.)

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
# would restart them), and then its process group killed (any pg_autoctl
# left under $SF_WORK too). First, if the test defines it, pgaf_before_stop
# (to resume what it froze, end its writers). On failure: the tail of each
# pg_autoctl log and the snowflake lines of node1's and node2's server logs.
declare -a AUTOCTL_NODES=()
pgaf_cleanup() {
  local rc=$? node
  set +e
  if declare -F pgaf_before_stop >/dev/null; then pgaf_before_stop; fi
  for node in "${AUTOCTL_NODES[@]}"; do
    autoctl stop --pgdata "$(cluster_dir "$node")" --immediate >/dev/null 2>&1
  done
  for node in "${AUTOCTL_NODES[@]}"; do
    kill -9 -- "-$(cat "$SF_WORK/$node.autoctl.pid")" 2>/dev/null
  done
  pkill -9 -f "pg_autoctl.*$SF_WORK" 2>/dev/null
  if [ "$rc" -ne 0 ]; then
    for node in "${AUTOCTL_NODES[@]}"; do echo "--- tail of $node's pg_autoctl log"; tail -15 "$SF_WORK/$node.autoctl.log"; done
    for node in node1 node2; do
      [ -f "$(cluster_dir "$node")/log/postgresql.log" ] || continue
      echo "--- snowflake lines of $node's server log"; grep -i snowflake "$(cluster_dir "$node")"/log/*.log | tail -10
    done
  fi
  (exit "$rc"); _sf_cleanup
}
trap pgaf_cleanup EXIT

# autoctl_run NAME: `pg_autoctl run` for the node in the background, in a
# process group of its own (to kill it whole: a failover, the cleanup).
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

# start_monitor: the monitor as docs/operations.md ("Tested recipe:
# pg_auto_failover") shows, its health checks and timeouts shortened, run
# and accepting connections; sets MONITOR_PORT and MONITOR_URI.
start_monitor() {
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
}

# create_node NAME: `pg_autoctl create postgres` for the node, registered
# with the monitor at $MONITOR_URI (not run yet).
create_node() {
  local name=$1 port; port=$(free_port); echo "$port" > "$SF_WORK/$name.port"
  autoctl create postgres --pgdata "$(cluster_dir "$name")" --pgport "$port" --name "$name" \
    --hostname 127.0.0.1 --listen 127.0.0.1 --auth trust --no-ssl --monitor "$MONITOR_URI" \
    >> "$SF_WORK/$name.autoctl.log" 2>&1 || { tail -20 "$SF_WORK/$name.autoctl.log"; fail "pg_autoctl create postgres $name failed"; }
}

# start_nodes <<CONF: node1 with the lines CONF (standard input) at the end
# of its postgresql.conf, after the include lines pg_autoctl adds (an
# included file would override them), run until it is "single"; then
# node2, a base backup of node1 (CONF included), run until it is node1's
# secondary and node1 primary.
start_nodes() {
  local conf; conf=$(cat)
  create_node node1
  echo "$conf" >> "$(cluster_dir node1)/postgresql.conf"
  autoctl_run node1
  wait_state node1 single 60
  create_node node2
  autoctl_run node2
  wait_state node2 secondary 90
  wait_state node1 primary 30
}
