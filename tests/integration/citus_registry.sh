#!/usr/bin/env bash
# Citus with the node-id registry (docs/registry.md, docs/citus.md):
# the coordinator is the registry. registry/
# snowflake_registry.sql is installed in a database of its own on the
# coordinator (`registry`, without the citus extension, so Citus neither
# propagates nor checks its DDL), and
# every node, the coordinator included, runs ONE shared set of settings
# (NODE_CONF: 'citus,snowflake_id' preloaded, snowflake_id.registry naming
# the coordinator, a short grant, no snowflake_id.node_id): nothing differs
# between the nodes but the port and data directory a second server on one
# host needs. Pins down:
#   - the coordinator claims its node id from itself (its registry worker
#     connects to its own server; the claim is retried until the registry,
#     installed after the server started and after CREATE EXTENSION citus,
#     answers), and each worker from the coordinator;
#   - the coordinator and two workers set up with examples/citus/
#     coordinator.sql verbatim hold distinct node ids, those of
#     snowflake_stats() on each node are what snowflake_registry.holders
#     lists (by port, all held), and the Citus node check
#     (examples/citus/node_info.sql + examples/sharding/check_nodes.sql)
#     reports no problem and shows the same node ids;
#   - scale-out under load: pgbench clients insert through the two workers
#     (a client's INSERT ... VALUES through a worker makes the ID on that
#     worker, see citus.sh); meanwhile four more workers, each made with the
#     same settings, are started, claim their node ids, are added with
#     citus_add_node, and take pgbench clients of their own: at the end six
#     writers insert at once (checked from the rows' times);
#   - installing the registry again (an upgrade) with the workers in place
#     keeps every claim;
#   - no pgbench transaction failed, in any round;
#   - the same checks of the node ids over the coordinator and six workers;
#   - at the end, over all rows: every row pgbench committed is there,
#     count(*) = count(DISTINCT id), and each ID carries the node id of the
#     worker its client talked to.
# (Installed in the Citus database itself, Citus treats the registry like
# any DDL: it warns that holder_text, is_live and the holders view stay
# local, and copies the schema, the other functions and the roles to each
# worker, without the tables. Harmless, but confusing: hence its own
# database.)
#
# Seen failing with the registry's guard removed (a claim that ignores live
# holders and gives every server node id 0), run with SF_REGISTRY_SQL naming
# that copy of the registry script: "node ids are not distinct".
#
# PostgreSQL 18 only (Citus is built into 18: scripts/postgres.sh,
# CITUS_PG). Run from the repository root, with the extension installed:
#   PG_BIN=$(dirname "$(scripts/pg_config.sh 18)") \
#     flock /tmp/snowflake_id.pg.lock bash tests/integration/citus_registry.sh
# SF_REGISTRY_SQL: another registry script (to see the test fail with a
# guard removed). SF_CITUS_REG_SETTLE (default 6): seconds the six writers
# insert together before the load stops.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_sharding.sh
. "$(dirname "$0")/lib_sharding.sh"

if [ "$PG_MAJOR" != "$CITUS_PG" ]; then
  pass "skipped: Citus is built into PostgreSQL $CITUS_PG only (scripts/postgres.sh, CITUS_PG)"
  exit 0
fi
require_installed_extension
citus_installed "$PG_BIN/pg_config" ||
  fail "Citus $CITUS_VERSION is not installed into $PG_BIN/.. (scripts/setup.sh --pg 18 builds it from citus-$CITUS_VERSION.tar.xz in ../shared/citus or SF_CITUS_SRC; see its warning)"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REGISTRY_SQL=${SF_REGISTRY_SQL:-$ROOT/registry/snowflake_registry.sql}
SETTLE_S=${SF_CITUS_REG_SETTLE:-6}
CITUS=examples/citus
# pgbench: clients per writer, and the length of one round (each writer runs
# rounds until the load stops, so that early and late writers end together).
CLIENTS=4
ROUND_S=3

# --- One configuration for every node --------------------------------------
coord_port=$(free_port)
REGISTRY="host=127.0.0.1 port=$coord_port dbname=registry user=fleet_node"
NODE_CONF=("shared_preload_libraries = 'citus,snowflake_id'"
  "snowflake_id.registry = '$REGISTRY'" "snowflake_id.registry_grant = '10s'"
  "snowflake_id.registry_allow_unverified = on"
  "max_connections = 200" "${SHARD_CONF[@]}")

# claimed_node NAME: NAME's claimed node id, waiting (at most 30 s) until it
# has one.
claimed_node() {
  local i id=""
  for i in $(seq 1 300); do
    id=$(sql_value "$1" "SELECT node_id FROM snowflake_stats()" 2>/dev/null) || id=""
    [ -z "$id" ] || { echo "$id"; return 0; }
    sleep 0.1
  done
  fail "$1 did not claim a node id within 30 s: $(sql_value "$1" "SELECT registry_state, registry_message FROM snowflake_stats()" 2>&1)"
}

# registry_sql SQL: on the coordinator's registry database, unaligned.
registry_sql() { psql_on coord -d registry -At -c "$1"; }
# install_registry: REGISTRY_SQL into the coordinator's registry database
# (its output kept in a file, shown if it fails).
install_registry() {
  psql_on coord -d registry -f "$REGISTRY_SQL" > "$SF_WORK/registry_install.out" 2>&1 ||
    { cat "$SF_WORK/registry_install.out"; fail "$REGISTRY_SQL did not install on the coordinator"; }
}

# The coordinator: the same settings, so it claims from its own registry,
# which is installed after it started (the claim is retried until then).
cluster_init coord "$coord_port" "${NODE_CONF[@]}"
cluster_start coord || fail "the coordinator did not start"
psql_on coord -c "CREATE EXTENSION citus"
psql_on coord -c "CREATE DATABASE registry"
install_registry
psql_on coord -d registry -c "CREATE ROLE fleet_node LOGIN" -c "GRANT snowflake_registry_client TO fleet_node"
psql_on coord -c "CREATE EXTENSION snowflake_id"
coord_node=$(claimed_node coord)
pass "the coordinator ($coord_port) claimed node id $coord_node from the registry in its own database"

# Two workers (writers), then coordinator.sql as it is in the docs.
for n in 1 2; do
  cluster_init "w$n" "$(free_port)" "${NODE_CONF[@]}"
  cluster_start "w$n" || fail "worker w$n did not start"
  psql_on "w$n" -c "CREATE EXTENSION citus"
done
psql_on coord -v coordinator_host=127.0.0.1 -v coordinator_port="$coord_port" \
  -v worker1_host=127.0.0.1 -v worker1_port="$(cluster_port w1)" \
  -v worker2_host=127.0.0.1 -v worker2_port="$(cluster_port w2)" \
  -f "$CITUS/coordinator.sql" >/dev/null
psql_on coord -f "$CITUS/node_info.sql" -f "$SF_EXAMPLES/check_nodes.sql"
SHARD_CHECK_ON=coord
nodes=(coord w1 w2)

# nodes_agree LABEL: the node ids of every node in $nodes (snowflake_stats()
# on each) are distinct, and each node's claim is held; the registry lists
# exactly those, by port, all held; the Citus node check reports nothing and
# shows the same node ids.
nodes_agree() {
  local label=$1 name own=() own_sorted registry citus state
  for name in "${nodes[@]}"; do own+=("$(cluster_port "$name") $(claimed_node "$name")"); done
  own_sorted=$(printf '%s\n' "${own[@]}" | sort -n)
  [ "$(printf '%s\n' "${own[@]}" | cut -d' ' -f2 | sort -u | wc -l)" = "${#nodes[@]}" ] ||
    fail "$label: node ids are not distinct (port node_id: $(echo "$own_sorted" | paste -sd,))"
  for name in "${nodes[@]}"; do
    state=$(sql_value "$name" "SELECT s.registry_state || ' ' || (s.node_id = i.node_id) FROM snowflake_stats() s, snowflake_node_info() i")
    [ "$state" = "held true" ] ||
      fail "$label: $name's claim is not held (registry_state, snowflake_node_info() agrees: $state): $(sql_value "$name" "SELECT registry_message FROM snowflake_stats()")"
  done
  registry=$(registry_sql "SELECT port || ' ' || node_id FROM snowflake_registry.holders WHERE state = 'held' ORDER BY port")
  [ "$registry" = "$own_sorted" ] ||
    { psql_on coord -d registry -c "SELECT fleet, node_id, state, host, port FROM snowflake_registry.holders ORDER BY node_id";
      fail "$label: the registry's holders (port node_id: $(echo "$registry" | paste -sd,)) are not the nodes' ($(echo "$own_sorted" | paste -sd,))"; }
  node_check_is ""
  citus=$(sql_value coord "SELECT split_part(shard, ':', 2) || ' ' || node_id FROM shard_node_info ORDER BY 1")
  [ "$citus" = "$own_sorted" ] ||
    fail "$label: the Citus node check's node ids ($(echo "$citus" | paste -sd,)) are not the nodes' ($(echo "$own_sorted" | paste -sd,))"
  pass "$label: ${#nodes[@]} distinct node ids (port node_id: $(echo "$own_sorted" | paste -sd,)), the same in snowflake_registry.holders (all held) and in the Citus node check, which reports no problem"
}
nodes_agree "the coordinator and two workers"
# Installing the registry again (an upgrade) with the workers in place: the
# claims stand.
install_registry
nodes_agree "the registry installed again"

# --- Scale-out under load ----------------------------------------------------
# writer_load N: rounds of pgbench (CLIENTS clients, ROUND_S seconds) through
# worker wN until load.stop exists; each round's report is kept.
writer_load() {
  local n=$1 round=0 port deadline=$((SECONDS + 300))
  port=$(cluster_port "w$n")
  printf '%s\n' '\set c random(1, 1000000000)' \
    "INSERT INTO orders (customer, item) VALUES ('load-' || :c, 'w$n');" > "$SF_WORK/w$n.pgbench"
  # (Bounded in time too: it must stop even if this script dies first.)
  while [ ! -f "$SF_WORK/load.stop" ] && [ $SECONDS -lt $deadline ]; do
    round=$((round + 1))
    pgbench -n -h 127.0.0.1 -p "$port" -U postgres -c "$CLIENTS" -j 2 -T "$ROUND_S" \
      -f "$SF_WORK/w$n.pgbench" postgres > "$SF_WORK/pgbench.w$n.$round.out" 2>&1 || return 1
  done
}
rm -f "$SF_WORK/load.stop"
load_start=$SECONDS
writer_pids=()
for n in 1 2; do
  writer_load "$n" &
  writer_pids+=($!)
done
sleep 2 # (the two writers under way first)
for n in 3 4 5 6; do
  cluster_init "w$n" "$(free_port)" "${NODE_CONF[@]}"
  cluster_start "w$n" || fail "worker w$n did not start"
  psql_on "w$n" -c "CREATE EXTENSION citus"
  psql_on coord -o /dev/null -c "SELECT citus_add_node('127.0.0.1', $(cluster_port "w$n"))"
  [ "$(sql_value "w$n" "SELECT count(*) FROM pg_extension WHERE extname = 'snowflake_id'")" = 1 ] ||
    fail "citus_add_node did not create snowflake_id on w$n"
  id=$(claimed_node "w$n")
  writer_load "$n" &
  writer_pids+=($!)
  nodes+=("w$n")
  pass "worker w$n ($(cluster_port "w$n")) claimed node id $id with the shared settings, added under load at $((SECONDS - load_start)) s; ${#writer_pids[@]} writers"
done
sleep "$SETTLE_S"
touch "$SF_WORK/load.stop"
wait_statuses "${writer_pids[@]}"
echo "load: $((SECONDS - load_start)) s"
committed=0
for n in 1 2 3 4 5 6; do
  rounds=0 tx=0
  for out in "$SF_WORK/pgbench.w$n".*.out; do
    rounds=$((rounds + 1))
    if [ "${STATUSES[$((n - 1))]}" -ne 0 ] || ! grep -q "number of failed transactions: 0 " "$out"; then
      cat "$out"; fail "pgbench through w$n: an error or a failed transaction (round $out)"
    fi
    tx=$((tx + $(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$out")))
  done
  echo "w$n: $tx transactions in $rounds rounds, none failed"
  committed=$((committed + tx))
done
pass "pgbench: $committed inserts through six writers, no failed transaction"
# Six writers inserted at once: the last writer's first insert came before
# any writer's last.
[ "$(sql_value coord "SELECT count(*) = 6 AND max(first) < min(last) FROM (SELECT min(created_at) AS first, max(created_at) AS last FROM orders GROUP BY item) w")" = t ] ||
  fail "the six writers did not insert at once: $(sql_value coord "SELECT string_agg(item || ' ' || min || '..' || max, ', ') FROM (SELECT item, min(created_at), max(created_at) FROM orders GROUP BY item) w")"
pass "all six writers inserted at once at the end"

nodes_agree "after scaling out to six workers under load, the coordinator and six workers"

# --- Every row ---------------------------------------------------------------
writers=()
for n in 1 2 3 4 5 6; do writers+=("('w$n', $(sql_value "w$n" "SELECT node_id FROM snowflake_stats()"))"); done
got=$(sql_value coord "SELECT count(*), count(DISTINCT id) FROM orders")
[ "$got" = "$committed|$committed" ] ||
  fail "over all rows: count(*)|count(DISTINCT id) = $got, expected $committed|$committed (what pgbench committed)"
wrong=$(sql_value coord "SELECT count(*) FROM orders o LEFT JOIN (VALUES $(IFS=,; echo "${writers[*]}")) w (item, node_id) USING (item) WHERE w.node_id IS DISTINCT FROM snowflake_node(o.id)")
[ "$wrong" = 0 ] || fail "over all rows: $wrong IDs do not carry the node id of the worker their client talked to"
pass "over all $committed rows: count(*) = count(DISTINCT id), each ID made under its writer's node id"
pass "citus_registry"
