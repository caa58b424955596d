#!/usr/bin/env bash
# Citus recipe (examples/citus/, shown in docs/sharding.md): a coordinator
# (node id 1) and two workers (node ids 2 and 3) on loopback, every node
# preloading 'citus,snowflake_id'. Pins down where Citus evaluates
# DEFAULT snowflake_next(), as docs/sharding.md states it:
#   - CREATE EXTENSION snowflake_id on the coordinator reaches the workers;
#     run_command_on_all_nodes('SHOW snowflake_id.node_id') answers 1, 2, 3;
#   - INSERT ... VALUES (one row and several) through the coordinator: the
#     coordinator's node id, whatever the distribution column (the business
#     key, or the ID itself);
#   - INSERT ... VALUES run on a worker: that worker's node id;
#   - INSERT ... SELECT from a distributed table (into a co-located table,
#     into a table distributed by the ID, into a reference table): every ID
#     made on the worker that holds the source row's shard; from a plain
#     SELECT without a distributed table: the coordinator's;
#   - a reference table: one ID per row, the same on every placement;
#   - 8 pgbench clients through the coordinator and 8 through each worker at
#     once: no failed transaction, count(*) = count(DISTINCT id), every ID
#     carries the node id of the node the client talked to;
#   - the node-id check (examples/citus/node_info.sql +
#     examples/sharding/check_nodes.sql) over all nodes: nothing with
#     distinct ids; a worker restarted with a duplicate id, another layout,
#     no id; a worker replaced by a standby (in recovery); a node down.
#
# Needs Citus built into the server under test (scripts/setup.sh does it for
# PostgreSQL 18, scripts/postgres.sh install_citus). Run from the repository
# root, with the extension installed:
#   PG_BIN=$(dirname "$(scripts/pg_config.sh 18)") \
#     flock /tmp/snowflake_id.pg.lock bash tests/integration/citus.sh
# SF_CITUS_TX (default 200) sets the transactions of each pgbench client.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_sharding.sh
. "$(dirname "$0")/lib_sharding.sh"

require_installed_extension
citus_installed "$PG_BIN/pg_config" ||
  fail "Citus $CITUS_VERSION is not installed into $PG_BIN/.. (scripts/setup.sh --pg 18 builds it from citus-$CITUS_VERSION.tar.xz in ../shared/citus or SF_CITUS_SRC; see its warning)"
CITUS_TX=${SF_CITUS_TX:-200}
CITUS=examples/citus
doc_shows_file docs/citus.md "$CITUS/coordinator.sql" "examples/citus/coordinator.sql" ||
  fail "docs/citus.md does not show $CITUS/coordinator.sql as it is"
doc_shows_file docs/citus.md "$CITUS/node_info.sql" "examples/citus/node_info.sql" ||
  fail "docs/citus.md does not show $CITUS/node_info.sql as it is"
docs_recipe_matches check_nodes.sql
pass "docs/citus.md shows the Citus recipe files as they are"

# shard1 is the coordinator, shard2 and shard3 the workers (the names the
# shared node-check helpers use); each node's node id is its number.
for i in 1 2 3; do
  cluster_init "shard$i" "$(free_port)" "shared_preload_libraries = 'citus,snowflake_id'" \
    "snowflake_id.node_id = $i" "max_connections = 200" "${SHARD_CONF[@]}"
  cluster_start "shard$i" || fail "shard$i did not start"
  psql_on "shard$i" -c "CREATE EXTENSION citus"
done
port1=$(cluster_port shard1) port2=$(cluster_port shard2) port3=$(cluster_port shard3)
name_of() { echo "127.0.0.1:$(cluster_port "shard$1")"; }
psql_on shard1 -v coordinator_host=127.0.0.1 -v coordinator_port="$port1" \
  -v worker1_host=127.0.0.1 -v worker1_port="$port2" -v worker2_host=127.0.0.1 -v worker2_port="$port3" \
  -f "$CITUS/coordinator.sql" >/dev/null
psql_on shard1 -o /dev/null <<'SQL'
CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_next(), payload text NOT NULL);
SELECT create_distributed_table('events', 'id');
CREATE TABLE orders_copy (id bigint NOT NULL DEFAULT snowflake_next(), customer text NOT NULL,
                          source_id bigint NOT NULL, PRIMARY KEY (customer, id));
SELECT create_distributed_table('orders_copy', 'customer', colocate_with => 'orders');
CREATE TABLE countries (id bigint PRIMARY KEY DEFAULT snowflake_next(), name text NOT NULL);
SELECT create_reference_table('countries');
SQL
pass "Citus $(sql_value shard1 "SELECT extversion FROM pg_extension WHERE extname = 'citus'") on PostgreSQL $PG_MAJOR: coordinator $port1 (node id 1), workers $port2 (2) and $port3 (3), set up with coordinator.sql"

# The extension reached the workers.
for i in 2 3; do
  [ "$(sql_value "shard$i" "SELECT count(*) FROM pg_extension WHERE extname = 'snowflake_id'")" = 1 ] ||
    fail "CREATE EXTENSION snowflake_id on the coordinator did not reach worker shard$i"
done
pass "CREATE EXTENSION snowflake_id on the coordinator created it on both workers"
got=$(sql_value shard1 "SELECT string_agg(result, ' ' ORDER BY result) FROM run_command_on_all_nodes('SHOW snowflake_id.node_id')")
[ "$got" = "1 2 3" ] || fail "run_command_on_all_nodes('SHOW snowflake_id.node_id') answered '$got', expected '1 2 3'"
pass "run_command_on_all_nodes('SHOW snowflake_id.node_id') from the coordinator: $got"

# node_of_port: the node id each node reports, by port, for the checks below.
psql_on shard1 -o /dev/null -c "CREATE TABLE node_of_port AS
  SELECT n.nodeport AS port, r.result::int AS node_id
  FROM run_command_on_all_nodes('SHOW snowflake_id.node_id') r JOIN pg_dist_node n USING (nodeid)"
# Every ID of a query's rows decodes to the node id EXPECTED; prints them on failure.
nodes_are() {
  local label=$1 sql=$2 expected=$3 got
  got=$(sql_value shard1 "SELECT string_agg(DISTINCT snowflake_node(id)::text, ' ') FROM ($sql) q")
  [ "$got" = "$expected" ] || fail "$label: IDs made on node(s) '$got', expected '$expected'"
  pass "$label: node id $expected"
}

# --- Where the IDs are made -------------------------------------------------
psql_on shard1 -c "INSERT INTO orders (customer, item) VALUES ('c-single', 'coordinator')"
psql_on shard1 -c "INSERT INTO orders (customer, item) VALUES ('c-m1', 'coordinator'), ('c-m2', 'coordinator'), ('c-m3', 'coordinator'), ('c-m4', 'coordinator'), ('c-m5', 'coordinator'), ('c-m6', 'coordinator')"
nodes_are "INSERT ... VALUES (one row, six rows) through the coordinator, distributed by customer" \
  "SELECT id FROM orders WHERE item = 'coordinator'" 1
[ "$(sql_value shard1 "SELECT count(DISTINCT get_shard_id_for_distribution_column('orders', customer)) FROM orders")" -gt 1 ] ||
  fail "the coordinator's rows all went to one shard: the test says nothing about routing"
psql_on shard1 -c "INSERT INTO events (payload) VALUES ('coordinator-single')" \
  -c "INSERT INTO events (payload) VALUES ('coordinator-multi'), ('coordinator-multi'), ('coordinator-multi'), ('coordinator-multi')"
nodes_are "INSERT ... VALUES through the coordinator, distributed by the ID itself" \
  "SELECT id FROM events WHERE payload LIKE 'coordinator-%'" 1
for i in 2 3; do
  psql_on "shard$i" -c "INSERT INTO orders (customer, item) VALUES ('w$i-a', 'worker$i'), ('w$i-b', 'worker$i'), ('w$i-c', 'worker$i'), ('w$i-d', 'worker$i')" \
    -c "INSERT INTO events (payload) VALUES ('worker$i'), ('worker$i'), ('worker$i')"
  nodes_are "INSERT ... VALUES run on worker shard$i (orders by customer, events by ID)" \
    "SELECT id FROM orders WHERE item = 'worker$i' UNION ALL SELECT id FROM events WHERE payload = 'worker$i'" "$i"
done

# INSERT ... SELECT from a distributed table: made on the worker holding the
# source row's shard.
psql_on shard1 -c "INSERT INTO orders_copy (customer, source_id) SELECT customer, id FROM orders"
psql_on shard1 -c "INSERT INTO events (payload) SELECT 'from-orders:' || customer FROM orders"
psql_on shard1 -c "INSERT INTO countries (name) SELECT 'from-orders:' || customer FROM orders"
plan=$(sql_value shard1 "EXPLAIN (COSTS OFF) INSERT INTO orders_copy (customer, source_id) SELECT customer, id FROM orders")
grep -Eq "INSERT/SELECT method: (repartition|pull to coordinator)" <<<"$plan" ||
  { echo "$plan"; fail "INSERT ... SELECT between co-located tables is planned as a pushdown: the IDs' origin may change"; }
wrong=$(sql_value shard1 "
  WITH made AS (
    SELECT customer, id FROM orders_copy
    UNION ALL SELECT substr(payload, 13), id FROM events WHERE payload LIKE 'from-orders:%'
    UNION ALL SELECT substr(name, 13), id FROM countries WHERE name LIKE 'from-orders:%')
  SELECT count(*) FROM made m
  LEFT JOIN pg_dist_shard_placement p ON p.shardid = get_shard_id_for_distribution_column('orders', m.customer)
  LEFT JOIN node_of_port n ON n.port = p.nodeport
  WHERE n.node_id IS NULL OR snowflake_node(m.id) <> n.node_id")
total=$(sql_value shard1 "SELECT (SELECT count(*) FROM orders_copy) + (SELECT count(*) FROM events WHERE payload LIKE 'from-orders:%') + (SELECT count(*) FROM countries WHERE name LIKE 'from-orders:%')")
[ "$wrong" = 0 ] || fail "INSERT ... SELECT: $wrong of $total IDs were not made on the worker holding the source row's shard"
nodes_are "INSERT ... SELECT from a distributed table (into co-located, by-ID and reference tables): $total IDs, each made on the worker holding the source row's shard" \
  "SELECT id FROM orders_copy UNION ALL SELECT id FROM countries WHERE name LIKE 'from-orders:%'" "2 3"
[ "$total" -ge 45 ] || fail "INSERT ... SELECT copied only $total rows"
# A SELECT the coordinator must combine (GROUP BY a column other than the
# distribution column): the rows are combined on the coordinator, then sent
# on, and the IDs are still made on the workers.
psql_on shard1 -c "EXPLAIN (COSTS OFF) INSERT INTO events (payload) SELECT 'grouped:' || item FROM orders GROUP BY item" |
  grep -E "INSERT/SELECT method" || true
psql_on shard1 -c "INSERT INTO events (payload) SELECT 'grouped:' || item FROM orders GROUP BY item"
got=$(sql_value shard1 "SELECT count(*) || ' rows on node(s) ' || string_agg(DISTINCT snowflake_node(id)::text, ' ') FROM events WHERE payload LIKE 'grouped:%'")
case $got in
  "3 rows on node(s) 2" | "3 rows on node(s) 3" | "3 rows on node(s) 2 3") ;;
  *) fail "INSERT ... SELECT ... GROUP BY: expected 3 rows with IDs made on the workers, got $got" ;;
esac
pass "INSERT ... SELECT ... GROUP BY (a non-distribution column) through the coordinator: $got (workers)"
psql_on shard1 -c "INSERT INTO events (payload) SELECT 'series' FROM generate_series(1, 20)"
nodes_are "INSERT ... SELECT from generate_series (no distributed table) through the coordinator" \
  "SELECT id FROM events WHERE payload = 'series'" 1

# Reference table: one ID per row, the same on every placement.
psql_on shard1 -c "INSERT INTO countries (name) VALUES ('fr'), ('de'), ('it')"
psql_on shard2 -c "INSERT INTO countries (name) VALUES ('w2')"
nodes_are "INSERT ... VALUES into a reference table through the coordinator" "SELECT id FROM countries WHERE name IN ('fr', 'de', 'it')" 1
nodes_are "INSERT ... VALUES into a reference table on worker shard2" "SELECT id FROM countries WHERE name = 'w2'" 2
placements=$(sql_value shard1 "SELECT count(*), count(DISTINCT result) FROM run_command_on_placements('countries', 'SELECT string_agg(name || ''='' || id, '','' ORDER BY name) FROM %s')")
[ "$placements" = "3|1" ] || fail "the reference table's placements hold different IDs (placements|distinct contents: $placements)"
pass "reference table: the same IDs on all 3 placements"

# --- Load through the coordinator and both workers at once -------------------
# Each transaction: an insert, an INSERT ... SELECT of that row into the
# co-located table (made on the worker holding its shard), and a row of the
# reference table.
for i in 1 2 3; do
  printf '%s\n' '\set c random(1, 1000000000)' 'BEGIN;' \
    "INSERT INTO orders (customer, item) VALUES ('load-' || :c, 'via$i');" \
    "INSERT INTO orders_copy (customer, source_id) SELECT customer, id FROM orders WHERE customer = 'load-' || :c AND item = 'via$i';" \
    "INSERT INTO countries (name) VALUES ('load-via$i');" 'END;' > "$SF_WORK/via$i.pgbench"
done
# Meanwhile the read horizon is asked on both workers, over and over: Citus
# commits every write that touches the reference table in two phases, so the
# workers hold prepared transactions that issued no ID of theirs (the rows
# carry IDs made elsewhere). Such a transaction holds nothing back:
# snowflake_horizon() must answer every time.
horizon_poll() {
  local name=$1 polls=0 errors=0 with_prepared=0 out deadline=$((SECONDS + 300))
  # (Bounded in time too: it must stop even if this script dies first.)
  while [ ! -f "$SF_WORK/load.done" ] && [ $SECONDS -lt $deadline ]; do
    polls=$((polls + 1))
    if out=$(psql -X -At -h 127.0.0.1 -p "$(cluster_port "$name")" -U postgres -d postgres \
      -c "SELECT (SELECT count(*) FROM pg_prepared_xacts), snowflake_horizon()" 2>>"$SF_WORK/horizon_$name.err"); then
      [ "${out%%|*}" -gt 0 ] && with_prepared=$((with_prepared + 1))
    else
      errors=$((errors + 1))
    fi
  done
  echo "$polls $errors $with_prepared" > "$SF_WORK/horizon_$name.count"
}
rm -f "$SF_WORK/load.done"
horizon_pids=()
for name in shard2 shard3; do
  horizon_poll "$name" &
  horizon_pids+=($!)
done
pids=()
for i in 1 2 3; do
  pgbench -n -h 127.0.0.1 -p "$(cluster_port "shard$i")" -U postgres -c 8 -j 2 -t "$CITUS_TX" \
    -f "$SF_WORK/via$i.pgbench" postgres > "$SF_WORK/pgbench$i.out" 2>&1 &
  pids+=($!)
done
wait_statuses "${pids[@]}"
touch "$SF_WORK/load.done"
for pid in "${horizon_pids[@]}"; do wait "$pid"; done
for name in shard2 shard3; do
  read -r polls errors with_prepared < "$SF_WORK/horizon_$name.count"
  echo "horizon on $name during the load: $polls polls, $errors errors, $with_prepared with prepared transactions open"
  [ "$errors" -eq 0 ] || { sort "$SF_WORK/horizon_$name.err" | uniq -c | sort -rn | head -5 || true; fail "snowflake_horizon() on worker $name failed $errors times during two-phase commits"; }
  [ "$with_prepared" -gt 0 ] || fail "no poll of the horizon on $name saw a prepared transaction: the check proved nothing"
done
pass "snowflake_horizon() answered on both workers throughout the load, also while Citus's prepared transactions were open"
for i in 1 2 3; do
  [ "${STATUSES[$((i - 1))]}" -eq 0 ] || { cat "$SF_WORK/pgbench$i.out"; fail "pgbench through shard$i reported an error"; }
  grep -q "number of failed transactions: 0 " "$SF_WORK/pgbench$i.out" ||
    { cat "$SF_WORK/pgbench$i.out"; fail "pgbench through shard$i: failed transactions"; }
  echo "THROUGHPUT Citus, 8 clients through shard$i (3 x 8 clients at once): $(sed -nE 's/^tps = ([0-9]+)\.[0-9]+ \(without initial.*/\1/p' "$SF_WORK/pgbench$i.out") inserts/s"
done
rows=$((3 * 8 * CITUS_TX))
[ "$(sql_value shard1 "SELECT count(*) = $rows AND count(DISTINCT id) = $rows FROM orders WHERE item LIKE 'via%'")" = t ] ||
  fail "load: expected $rows rows with distinct IDs: $(sql_value shard1 "SELECT count(*), count(DISTINCT id) FROM orders WHERE item LIKE 'via%'")"
pass "load: $rows rows from 24 clients on three nodes, count(*) = count(DISTINCT id)"
[ "$(sql_value shard1 "SELECT count(*) FROM orders WHERE item LIKE 'via%' AND 'via' || snowflake_node(id) <> item")" = 0 ] ||
  fail "load: IDs that do not carry the node id of the node the client talked to"
pass "load: every ID carries the node id of the node its client talked to"
copies=$(sql_value shard1 "SELECT count(*) FROM orders_copy c JOIN orders o ON o.customer = c.customer AND o.id = c.source_id WHERE o.item LIKE 'via%'")
refs=$(sql_value shard1 "SELECT count(*) FROM countries WHERE name LIKE 'load-via%'")
[ "$copies" -ge "$rows" ] && [ "$refs" = "$rows" ] ||
  fail "load: $copies rows copied by INSERT ... SELECT and $refs reference-table rows, expected at least $rows and $rows"
[ "$(sql_value shard1 "SELECT count(*) FROM countries WHERE name LIKE 'load-via%' AND 'load-via' || snowflake_node(id) <> name")" = 0 ] ||
  fail "load: reference-table IDs that do not carry the node id of the node the client talked to"
placements=$(sql_value shard1 "SELECT count(*), count(DISTINCT result) FROM run_command_on_placements('countries', 'SELECT md5(string_agg(id::text, '','' ORDER BY id)) FROM %s')")
[ "$placements" = "3|1" ] || fail "load: the reference table's placements differ (placements|distinct contents: $placements)"
[ "$(sql_value shard1 "SELECT count(*) = count(DISTINCT id) FROM (SELECT id FROM orders UNION ALL SELECT id FROM orders_copy UNION ALL SELECT id FROM events UNION ALL SELECT id FROM countries) a")" = t ] ||
  fail "an ID occurs twice across the Citus tables"
pass "load: $copies rows copied by INSERT ... SELECT, $refs reference-table rows (the same on every placement); no ID twice across all the Citus tables"

# --- The node-id check over all Citus nodes -----------------------------------
SHARD_CHECK_ON=shard1
psql_on shard1 -f "$CITUS/node_info.sql"
[ "$(sql_value shard1 "SELECT count(*) FROM shard_node_info WHERE node_id IS NOT NULL")" = 3 ] ||
  fail "shard_node_info does not show the coordinator and both workers"
collision_check_scenario "$(name_of 1)" "$(name_of 2)" "$(name_of 3)"

psql_on shard3 -c "ALTER SYSTEM SET snowflake_id.node_id = -1"
cluster_stop shard3; cluster_start shard3 || fail "shard3 did not restart"
node_check_is "node_id_unset||{$(name_of 3)}"
pass "node check: a worker without a node id: reported"
shard_restart_with 3 "snowflake_id.node_id = 3"
node_check_is ""

# A coordinator that was never registered (no citus_set_coordinator_host):
# still asked, under its own name.
psql_on shard1 -o /dev/null -c "SELECT citus_remove_node('127.0.0.1', $port1)"
[ "$(sql_value shard1 "SELECT shard || '|' || node_id FROM shard_node_info WHERE shard LIKE 'coordinator%'")" = "coordinator (not in pg_dist_node)|1" ] ||
  { psql_on shard1 -c "SELECT * FROM shard_node_info"; fail "the node check leaves out a coordinator missing from pg_dist_node"; }
node_check_is ""
shard_restart_with 3 "snowflake_id.node_id = 1"
node_check_is "duplicate_node_id|1|{$(name_of 3),\"coordinator (not in pg_dist_node)\"}"
pass "node check: an unregistered coordinator is checked too (a worker with its node id is reported)"
shard_restart_with 3 "snowflake_id.node_id = 3"
node_check_is ""

# A worker replaced by a standby that was never promoted.
cluster_basebackup standby3 "$(free_port)" shard3
cluster_start standby3 || fail "the standby of shard3 did not start"
psql_on shard1 -c "SELECT citus_update_node(nodeid, '127.0.0.1', $(cluster_port standby3)) FROM pg_dist_node WHERE nodeport = $port3" >/dev/null
node_check_is "in_recovery||{127.0.0.1:$(cluster_port standby3)}"
pass "node check: a worker pointed at an unpromoted standby: in_recovery reported"
psql_on shard1 -c "SELECT citus_update_node(nodeid, '127.0.0.1', $port3) FROM pg_dist_node WHERE nodeport = $(cluster_port standby3)" >/dev/null
node_check_is ""
cluster_stop standby3

cluster_stop shard2
node_check_is "no_answer||{\"$(name_of 2) (failed: failed to connect to $(name_of 2))\"}"
pass "node check: a worker that is down: no_answer reported, with the error"
pass "citus"
