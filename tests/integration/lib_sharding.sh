# shellcheck shell=bash
# Helpers for the sharding tests (sharding_plproxy.sh, sharding_postgres_fdw.sh):
# three shards with node ids 1, 2, 3 and a router, set up by running the
# recipe files in examples/sharding/ verbatim, a pgbench load through the
# router, and the checks every engine must pass. Source it after lib.sh.
# (Named lib_*.sh, so run_all.sh does not take it for a test.)

SF_EXAMPLES=${SF_EXAMPLES:-examples/sharding}
SHARD_CLIENTS=8
SHARD_ROWS=${SF_SHARD_ROWS:-40000}
# The cluster that runs the node-id check: the router (Citus: the coordinator).
SHARD_CHECK_ON=router

# Settings for clusters that take a pgbench load; durable commits (fsync on)
# like production.
SHARD_CONF=("max_wal_size = '1GB'" "checkpoint_timeout = '30min'")

# shards_start RECIPE...: shard1..shard3 with snowflake_id.node_id 1..3, each
# set up with shard.sql and then the given recipe files.
shards_start() {
  local i f
  for i in 1 2 3; do
    cluster_init "shard$i" "$(free_port)" "snowflake_id.node_id = $i" "${SHARD_CONF[@]}"
    cluster_start "shard$i" || fail "shard$i did not start"
    psql_on "shard$i" -f "$SF_EXAMPLES/shard.sql"
    for f in "$@"; do psql_on "shard$i" -f "$SF_EXAMPLES/$f"; done
  done
  pass "shards started: node ids 1, 2, 3 on ports $(cluster_port shard1), $(cluster_port shard2), $(cluster_port shard3)"
}

# router_start: the router, a cluster without a node id (it issues no IDs;
# snowflake_id is loaded so that it can decode them).
router_start() {
  cluster_init router "$(free_port)" "${SHARD_CONF[@]}"
  cluster_start router || fail "the router did not start"
  psql_on router -c "CREATE EXTENSION snowflake_id"
}

# docs_recipe_matches FILE: docs/sharding.md shows examples/sharding/FILE in
# full (a fenced block whose first line is "-- examples/sharding/FILE...").
docs_recipe_matches() {
  doc_shows_file docs/sharding.md "$SF_EXAMPLES/$1" "examples/sharding/$1" ||
    fail "docs/sharding.md does not show $SF_EXAMPLES/$1 as it is"
}

# load_through NAME LABEL SCRIPT: SHARD_ROWS single-row transactions from
# SHARD_CLIENTS concurrent pgbench clients against cluster NAME; SCRIPT is a
# pgbench script that inserts one row. Prints and sets RATE (inserts/s).
load_through() {
  local name=$1 label=$2 script=$3 out
  local tx=$((SHARD_ROWS / SHARD_CLIENTS))
  out="$SF_WORK/pgbench.$name.out"
  if ! pgbench -n -h 127.0.0.1 -p "$(cluster_port "$name")" -U postgres \
      -c "$SHARD_CLIENTS" -j 2 -t "$tx" -f "$script" postgres >"$out" 2>&1; then
    cat "$out"
    fail "$label: pgbench reported an error"
  fi
  grep -q "number of failed transactions: 0 " "$out" || { cat "$out"; fail "$label: failed transactions"; }
  RATE=$(sed -nE 's/^tps = ([0-9]+)\.[0-9]+ \(without initial connection time\)/\1/p' "$out")
  [ -n "$RATE" ] || { cat "$out"; fail "$label: could not read pgbench's rate"; }
  echo "THROUGHPUT $label: $RATE inserts/s ($((tx * SHARD_CLIENTS)) rows, $SHARD_CLIENTS clients, one row per transaction)"
}

# A pgbench script inserting one row through SQL, with a random business key.
pgbench_script() {
  local file="$SF_WORK/$1.pgbench"
  printf '%s\n' '\set c random(1, 1000000000)' "$2" > "$file"
  echo "$file"
}

# shards_verify EXPECTED_ROWS: the IDs on the shards themselves: every shard
# got rows, EXPECTED_ROWS in all, no ID twice across the shards, and each ID
# decodes (on its shard) to that shard's node id. Leaves every (shard, id) in
# the router's table direct_ids, for comparing with what the router reads.
shards_verify() {
  local expected=$1 i rows total=0
  psql_on router \
    -c "CREATE TABLE direct_ids (shard int, node_id int, decoded_node int, id bigint)"
  for i in 1 2 3; do
    rows=$(sql_value "shard$i" "SELECT count(*) FROM orders")
    echo "shard$i (node id $i): $rows rows"
    [ "$rows" -gt 0 ] || fail "shard$i got no rows"
    total=$((total + rows))
    psql_on "shard$i" -c "\copy (SELECT $i, i.node_id, snowflake_node(o.id), o.id FROM orders o, snowflake_node_info() i) TO STDOUT" |
      psql_on router -c "\copy direct_ids FROM STDIN"
  done
  [ "$total" -eq "$expected" ] || fail "the shards hold $total rows, expected $expected"
  pass "every shard got rows, $total in all"
  [ "$(sql_value router "SELECT count(*) = count(DISTINCT id) AND count(*) = $expected FROM direct_ids")" = t ] ||
    fail "an ID occurs twice across the shards"
  pass "count(*) = count(DISTINCT id) = $expected over all shards"
  [ "$(sql_value router "SELECT count(*) FROM direct_ids WHERE node_id IS DISTINCT FROM shard OR decoded_node <> node_id")" = 0 ] ||
    fail "an ID does not decode to its shard's node id"
  pass "every ID decodes to its shard's node id"
}

# router_reads_every_id SQL: SQL, run on the router, returns (id) of every
# row through the router; it must be exactly the IDs on the shards.
router_reads_every_id() {
  local bad
  bad=$(sql_value router "SELECT count(*) FROM ($1) r FULL JOIN direct_ids d USING (id) WHERE r.id IS NULL OR d.id IS NULL")
  [ "$bad" = 0 ] || fail "the router's IDs and the shards' IDs differ in $bad rows"
  pass "the router reads back exactly the IDs on the shards"
}

# shard_restart_with I SETTING...: ALTER SYSTEM SET each "name = value" on
# shard I (as docs/sharding.md says to change a node id), then restart it.
shard_restart_with() {
  local i=$1 setting; shift
  for setting in "$@"; do psql_on "shard$i" -c "ALTER SYSTEM SET $setting"; done
  cluster_stop "shard$i"
  cluster_start "shard$i" || fail "shard$i did not restart"
  [ "$(sql_value "shard$i" "SHOW snowflake_id.node_id")" = "$(sql_value "shard$i" "SELECT node_id FROM snowflake_node_info()")" ] ||
    fail "shard$i: snowflake_node_info() does not show the node id in force"
}

# node_check_is EXPECTED: the rows of snowflake_node_check on the router (or
# SHARD_CHECK_ON), as
# lines problem|node_id|shards, must be EXPECTED (lines in any order, or
# empty). Shard names inside an array must be in sorted order.
node_check_is() {
  local got
  local want
  got=$(sql_value "$SHARD_CHECK_ON" "SELECT problem, node_id, shards FROM snowflake_node_check" | LC_ALL=C sort)
  want=$(printf '%s' "$1" | LC_ALL=C sort)
  if [ "$got" != "$want" ]; then
    printf 'expected:\n%s\ngot:\n%s\n' "$want" "$got"
    fail "snowflake_node_check does not report what it should"
  fi
}

# collision_check_scenario NAME1 NAME2 NAME3: check_nodes.sql on the router
# (SHARD_CHECK_ON)
# (after the engine's router recipe defined shard_node_info), with the names
# under which it must report shard1..shard3:
#   distinct node ids                    -> no rows;
#   shard3 restarted with node id 2      -> duplicate_node_id 2: exactly shard2, shard3;
#   shard3 with node id 3 but 11/11 bits -> layout_mismatch: {shard1, shard2} and {shard3};
#   shard3 as it was                     -> no rows.
collision_check_scenario() {
  local n1=$1 n2=$2 n3=$3
  # {a,b} with the names in sorted order, as array_agg(... ORDER BY shard).
  set_of() { printf '%s\n' "$@" | LC_ALL=C sort | paste -sd, | sed 's/.*/{&}/'; }
  psql_on "$SHARD_CHECK_ON" -f "$SF_EXAMPLES/check_nodes.sql"
  node_check_is ""
  pass "node check: distinct node ids, one layout: no problem reported"

  shard_restart_with 3 "snowflake_id.node_id = 2"
  node_check_is "duplicate_node_id|2|$(set_of "$n2" "$n3")"
  pass "node check: shard2 and shard3 both with node id 2: reported, exactly those two"

  shard_restart_with 3 "snowflake_id.node_id = 3" "snowflake_id.node_bits = 11" "snowflake_id.sequence_bits = 11"
  node_check_is "layout_mismatch||$(set_of "$n1" "$n2")
layout_mismatch||{$n3}"
  pass "node check: shard3 with another layout: layout mismatch reported, naming the shards"

  shard_restart_with 3 "snowflake_id.node_bits = 10" "snowflake_id.sequence_bits = 12"
  node_check_is ""
  pass "node check: shard3 restored: no problem reported"
}

# wait_statuses PID...: waits for each background job, and leaves their
# exit statuses, in the same order, in STATUSES.
wait_statuses() {
  local pid status
  STATUSES=()
  for pid in "$@"; do
    status=0
    wait "$pid" || status=$?
    STATUSES+=("$status")
  done
}
