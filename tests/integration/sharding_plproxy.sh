#!/usr/bin/env bash
# PL/Proxy recipe (examples/sharding/, shown in docs/sharding.md): three shards
# with node ids 1, 2, 3 and a router on loopback ports.
#   - 8 concurrent pgbench clients insert 40,000 rows through the router,
#     routed by a hash of the business key (RUN ON hashtext(customer));
#   - every shard got rows; count(*) = count(DISTINCT id) over all shards;
#     every ID decodes to its shard's node id; the router reads every ID back
#     (RUN ON ALL);
#   - the node-id check through RUN ON ALL reports nothing with distinct ids,
#     exactly the two shards that share a node id, a layout mismatch, and a
#     partition repointed to the wrong shard by ALTER SERVER;
#   - throughput: inserts/s through the router, and directly into one shard
#     (the same load against shard1 alone), printed as THROUGHPUT lines.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/sharding_plproxy.sh
# SF_SHARD_ROWS (default 40000) sets the rows of each load.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_sharding.sh
. "$(dirname "$0")/lib_sharding.sh"

require_installed_extension
[ -f "$("$PG_BIN/pg_config" --sharedir)/extension/plproxy.control" ] ||
  fail "PL/Proxy is not installed (apt-get install postgresql-15-plproxy; scripts/setup.sh does)"
for f in shard.sql plproxy_shard.sql plproxy_router.sql check_nodes.sql; do docs_recipe_matches "$f"; done
pass "docs/sharding.md shows the PL/Proxy recipe files as they are"

shards_start plproxy_shard.sql
router_start
conninfo() { echo "host=127.0.0.1 port=$(cluster_port "shard$1") dbname=postgres user=postgres"; }
psql_on router -v shard1="$(conninfo 1)" -v shard2="$(conninfo 2)" -v shard3="$(conninfo 3)" \
  -f "$SF_EXAMPLES/plproxy_router.sql"
pass "router set up with plproxy_router.sql"

# One call through the router: the ID comes from the shard the key hashes to.
id=$(sql_value router "SELECT insert_order('alice', 'first order')")
[ "$(sql_value router "SELECT id FROM orders_of('alice')")" = "$id" ] || fail "orders_of('alice') does not return the ID insert_order returned"
shard=$(sql_value router "SELECT abs(hashtext('alice') % 3) + 1")
[ "$(sql_value "shard$shard" "SELECT snowflake_node(id) FROM orders WHERE customer = 'alice'")" = "$shard" ] ||
  fail "alice's row is not on shard$shard, the shard abs(hashtext('alice') % 3) picks"
pass "insert_order('alice') returned $id, issued by shard$shard, the shard its key hashes to"
psql_on router -c "SELECT 1 FROM all_order_ids()" >/dev/null
for i in 1 2 3; do psql_on "shard$i" -c "TRUNCATE orders"; done

load_through router "through the PL/Proxy router" \
  "$(pgbench_script plproxy "SELECT insert_order('customer-' || :c, 'item');")"
plproxy_rate=$RATE
shards_verify "$SHARD_ROWS"
router_reads_every_id "SELECT id FROM all_order_ids()"

collision_check_scenario "127.0.0.1:$(cluster_port shard1)/postgres" \
  "127.0.0.1:$(cluster_port shard2)/postgres" "127.0.0.1:$(cluster_port shard3)/postgres"

# Partition p2 repointed by ALTER SERVER (as at a failover) to the wrong
# server, shard2: the check reports node id 2 twice; repointed back, nothing.
# (The connect string differs from p1's: PL/Proxy runs partitions with equal
# connect strings on one connection, so RUN ON ALL would ask shard2 once.)
shard2_name="127.0.0.1:$(cluster_port shard2)/postgres"
psql_on router -c "ALTER SERVER orders_cluster OPTIONS (SET p2 '$(conninfo 2) application_name=p2')"
node_check_is "duplicate_node_id|2|{$shard2_name,$shard2_name}"
psql_on router -c "ALTER SERVER orders_cluster OPTIONS (SET p2 '$(conninfo 3)')"
node_check_is ""
pass "node check: a partition repointed to another shard by ALTER SERVER is reported; repointed back, nothing"

# The same load straight into one shard, for comparison.
psql_on shard1 -c "TRUNCATE orders"
load_through shard1 "directly into one shard" \
  "$(pgbench_script direct "INSERT INTO orders (customer, item) VALUES ('customer-' || :c, 'item');")"
[ "$(sql_value shard1 "SELECT count(*) = $SHARD_ROWS AND count(*) = count(DISTINCT id) FROM orders")" = t ] ||
  fail "the direct load did not insert $SHARD_ROWS distinct IDs"
echo "THROUGHPUT summary: PL/Proxy router $plproxy_rate inserts/s, one shard directly $RATE inserts/s"
pass "sharding_plproxy"
