# shellcheck shell=bash
# The Patroni test's set-up (failover_patroni.sh), sourced after lib.sh:
# Debian's Patroni 3.0 and etcd 3.4 (scripts/setup.sh installs both, their
# services left off), all on 127.0.0.1 with ports and directories of the
# test's own, run as postgres. It defines
#   etcd_start               one etcd member (its own client and peer ports)
#   patroni_init NAME        NAME's Patroni configuration (a node of the
#                            cluster; the PostgreSQL settings of its bootstrap
#                            from standard input, YAML lines under
#                            `parameters:`), its ports, its cluster in lib.sh's
#                            list (psql_on, cluster_kill9, the logs, the stop)
#   patroni_run NAME         Patroni for NAME, in a process group of its own
#   patroni_kill NAME        that Patroni killed (kill -9), its PostgreSQL left
#   rest NAME PATH           the HTTP status of NAME's REST API at PATH
#   wait_for SECONDS WHAT CMD...
#                            polls CMD until it succeeds, or fails with WHAT
#   wait_leader NAME SECONDS NAME's Patroni holds the leader key and its
#                            server is writable
#   wait_streaming PRIMARY STANDBY SECONDS
#                            STANDBY streams from PRIMARY
# and an EXIT trap that kills every Patroni (first, so none restarts a
# server), then etcd, before lib.sh stops the clusters.
# (Named lib_*.sh, so run_all.sh does not take it for a test.)

require_installed_extension
command -v patroni >/dev/null || fail "patroni not found (apt-get install patroni; scripts/setup.sh does)"
command -v etcd >/dev/null || fail "etcd not found (apt-get install etcd-server; scripts/setup.sh does)"

declare -a PATRONI_NODES=()
# The cleanup: first, if the test defines it, patroni_before_stop (to end
# its writers, thaw what it froze); then every Patroni killed, and etcd. On
# failure: the tail of each Patroni log and `patronictl list`.
patroni_cleanup() {
  local rc=$? node
  set +e
  if declare -F patroni_before_stop >/dev/null; then patroni_before_stop; fi
  if [ "$rc" -ne 0 ] && [ ${#PATRONI_NODES[@]} -gt 0 ]; then
    echo "--- patronictl list"
    timeout 20 patronictl -c "$SF_WORK/${PATRONI_NODES[0]}.yml" list 2>&1
  fi
  for node in "${PATRONI_NODES[@]}"; do patroni_kill "$node"; done
  [ -f "$SF_WORK/etcd.pid" ] && kill -9 -- "-$(cat "$SF_WORK/etcd.pid")" 2>/dev/null
  if [ "$rc" -ne 0 ]; then
    for node in "${PATRONI_NODES[@]}"; do echo "--- tail of $node's Patroni log"; tail -25 "$SF_WORK/$node.patroni.log"; done
  fi
  (exit "$rc"); _sf_cleanup
}
trap patroni_cleanup EXIT

# wait_for SECONDS WHAT CMD...: runs CMD every 0.2 s until it succeeds;
# fails with "WHAT within SECONDS s" when it never does.
wait_for() {
  local seconds=$1 what=$2 deadline; shift 2
  deadline=$(( $(date +%s) + seconds ))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "$what within $seconds s"
    sleep 0.2
  done
}

# etcd_start: one etcd member on 127.0.0.1 (v3 API, which Patroni's etcd3
# client speaks), its data under $SF_WORK/etcd; waits until it is healthy.
# Sets ETCD_PORT.
etcd_start() {
  local peer; ETCD_PORT=$(free_port); peer=$(free_port)
  setsid env -C / sudo -u postgres etcd --name sf --data-dir "$SF_WORK/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "sf=http://127.0.0.1:$peer" --initial-cluster-state new \
    >"$SF_WORK/etcd.log" 2>&1 </dev/null &
  echo $! > "$SF_WORK/etcd.pid"
  disown
  etcd_healthy() { curl -s -m 2 "http://127.0.0.1:$ETCD_PORT/health" | grep '"health":"true"' >/dev/null; }
  wait_for 60 "etcd did not become healthy (see $SF_WORK/etcd.log)" etcd_healthy
}

# patroni_init NAME <<PARAMETERS: NAME's configuration, $SF_WORK/NAME.yml:
# a member of the Patroni cluster `snowflake` with its own PostgreSQL and
# REST API ports; its data directory, log and socket directory where
# lib.sh keeps a cluster's (cluster_dir, cluster_log). The bootstrap's
# settings (stored in etcd by the first node, shared by both): Patroni's
# defaults (asynchronous replication, replication slots) but for
#   - ttl 15 s, loop_wait 2 s, retry_timeout 5 s (30, 10, 10): a failover in
#     about 20 s, not 40, still ttl >= loop_wait + 2 * retry_timeout;
#   - maximum_lag_on_failover 1 GB (1 MB): the replica that missed the last
#     seconds of its leader is the case under test, and Patroni would not
#     promote it once the leader's last reported position is 1 MB ahead;
#   - use_pg_rewind with wal_log_hints, so the old leader rejoins;
# and the PostgreSQL parameters of standard input (YAML, indented as under
# `parameters:`).
patroni_init() {
  local name=$1 parameters port rest dir
  parameters=$(cat)
  port=$(free_port); rest=$(free_port); dir=$(cluster_dir "$name")
  echo "$port" > "$SF_WORK/$name.port"
  echo "$rest" > "$SF_WORK/$name.rest"
  echo "$PG_BIN" > "$SF_WORK/$name.bin"
  mkdir -p "$dir.sock"; chown postgres:postgres "$dir.sock"
  cat > "$SF_WORK/$name.yml" <<YAML
scope: snowflake
name: $name
restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 15
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1073741824
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_log_hints: 'on'
$parameters
  initdb:
    - encoding: UTF8
    - auth: trust
postgresql:
  listen: 127.0.0.1:$port
  connect_address: 127.0.0.1:$port
  data_dir: $dir
  bin_dir: $PG_BIN
  pgpass: $SF_WORK/$name.pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: '$dir.sock'
    logging_collector: 'on'
    log_directory: '$SF_WORK'
    log_filename: '$name.log'
YAML
  chown postgres:postgres "$SF_WORK/$name.yml"
  SF_CLUSTERS+=("$name")
}

# patroni_run NAME: Patroni for NAME in the background, in a process group
# of its own (PostgreSQL, which it starts in a session of its own, outlives
# it: patroni_kill kills Patroni alone), its output appended to
# $SF_WORK/NAME.patroni.log.
patroni_run() {
  PATRONI_NODES+=("$1")
  setsid env -C / sudo -u postgres patroni "$SF_WORK/$1.yml" >>"$SF_WORK/$1.patroni.log" 2>&1 </dev/null &
  echo $! > "$SF_WORK/$1.patroni.pid"
  disown
}

# patroni_kill NAME: kill -9 of NAME's Patroni (its process group), its
# server left as it is; returns once it is gone.
patroni_kill() {
  local pid; pid=$(cat "$SF_WORK/$1.patroni.pid" 2>/dev/null) || return 0
  kill -9 -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do pgrep -g "$pid" >/dev/null || return 0; sleep 0.1; done
}

# rest NAME PATH: the HTTP status of NAME's REST API at PATH (000 when it
# does not answer): /leader is 200 on the node that holds the leader key.
rest() {
  curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(cat "$SF_WORK/$1.rest")$2" || true
}

# wait_leader NAME SECONDS: NAME's Patroni holds the leader key and its
# server is out of recovery.
wait_leader() {
  is_leader() { [ "$(rest "$1" /leader)" = 200 ] && [ "$(sql_value "$1" "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ]; }
  wait_for "$2" "$1 did not become Patroni's writable leader" is_leader "$1"
}

# wait_streaming PRIMARY STANDBY SECONDS: STANDBY is in recovery and
# PRIMARY has a streaming walsender (Patroni's replication slot names
# the member).
wait_streaming() {
  is_streaming() {
    [ "$(sql_value "$2" "SELECT pg_is_in_recovery()" 2>/dev/null)" = t ] &&
      [ "$(sql_value "$1" "SELECT count(*) FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE r.state = 'streaming' AND s.slot_name = '$2'" 2>/dev/null)" = 1 ]
  }
  wait_for "$3" "$2 did not stream from $1" is_streaming "$1" "$2"
}
