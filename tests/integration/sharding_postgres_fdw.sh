#!/usr/bin/env bash
# postgres_fdw recipe (examples/sharding/, shown in docs/sharding.md): three shards
# with node ids 1, 2, 3 and a router whose orders table is hash-partitioned
# by the business key into foreign partitions, one per shard.
#   - INSERT ... RETURNING id through the router returns the ID the shard
#     issued (the router's id column is GENERATED, so postgres_fdw sends
#     DEFAULT and the shard's snowflake_next() fires);
#   - 8 concurrent pgbench clients insert 40,000 rows through the router;
#     every shard got rows; count(*) = count(DISTINCT id) over all shards;
#     every ID decodes to its shard's node id; the router reads every ID back;
#   - the node-id check over foreign tables reports nothing with distinct ids,
#     exactly the two shards that share a node id, and a layout mismatch;
#   - throughput through the router, printed as a THROUGHPUT line.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/sharding_postgres_fdw.sh
# SF_SHARD_ROWS (default 40000) sets the rows of the load.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_sharding.sh
. "$(dirname "$0")/lib_sharding.sh"

require_installed_extension
[ -f "$("$PG_BIN/pg_config" --sharedir)/extension/postgres_fdw.control" ] ||
  fail "postgres_fdw is not installed (apt-get install postgresql-contrib; scripts/setup.sh does)"
for f in shard.sql postgres_fdw_router.sql check_nodes.sql; do docs_recipe_matches "$f"; done
pass "docs/sharding.md shows the postgres_fdw recipe files as they are"

# shellcheck disable=SC2119 # shard.sql only: the router needs nothing on the shards
shards_start
router_start
psql_on router -v host1=127.0.0.1 -v host2=127.0.0.1 -v host3=127.0.0.1 \
  -v port1="$(cluster_port shard1)" -v port2="$(cluster_port shard2)" -v port3="$(cluster_port shard3)" \
  -v db1=postgres -v db2=postgres -v db3=postgres -v shard_user=postgres -v shard_password=unused \
  -f "$SF_EXAMPLES/postgres_fdw_router.sql"
pass "router set up with postgres_fdw_router.sql"

# RETURNING id through the router is the shard's ID: it is on the shard, and
# it decodes to the shard's node id.
returned="$SF_WORK/returning.out"
psql_on router -At -F ' ' -c "INSERT INTO orders (customer, item) SELECT 'customer-' || g, 'item' FROM generate_series(1, 30) g RETURNING id, customer" > "$returned"
[ "$(wc -l < "$returned")" -eq 30 ] || fail "RETURNING returned $(wc -l < "$returned") rows, expected 30"
shards_hit=""
while read -r id customer; do
  [ -n "$id" ] || fail "RETURNING id returned NULL for $customer"
  node=$(sql_value router "SELECT snowflake_node($id)")
  [ "$(sql_value "shard$node" "SELECT customer FROM orders WHERE id = $id")" = "$customer" ] ||
    fail "RETURNING id gave $id for $customer, which is not that row's ID on shard$node"
  case " $shards_hit " in *" $node "*) ;; *) shards_hit="$shards_hit $node" ;; esac
done < "$returned"
[ "$(echo "$shards_hit" | wc -w)" -eq 3 ] || fail "30 keys reached only shards$shards_hit"
pass "INSERT ... RETURNING id through the router returns the ID each shard issued (shards$shards_hit)"
for i in 1 2 3; do psql_on "shard$i" -c "TRUNCATE orders"; done

load_through router "through the postgres_fdw router" \
  "$(pgbench_script fdw "INSERT INTO orders (customer, item) VALUES ('customer-' || :c, 'item');")"
shards_verify "$SHARD_ROWS"
router_reads_every_id "SELECT id FROM orders"
# Each row is on the shard its key's hash partition names.
misplaced=$(sql_value router "SELECT count(*) FROM orders o JOIN direct_ids d USING (id) WHERE d.shard::text <> substr(o.tableoid::regclass::text, 8)")
[ "$misplaced" = 0 ] || fail "$misplaced rows are not on the shard of their hash partition"
pass "every row is on the shard of its key's hash partition"
scans=$(sql_value router "EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE customer = 'alice'" | grep -c "Foreign Scan")
[ "$scans" = 1 ] || fail "a lookup by customer scans $scans shards, expected 1"
pass "a lookup by the business key asks one shard"

collision_check_scenario shard1 shard2 shard3
pass "sharding_postgres_fdw"
