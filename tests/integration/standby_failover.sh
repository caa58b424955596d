#!/usr/bin/env bash
# Hot standbys and failover: a primary with node id 4 and two streaming
# replicas made with pg_basebackup (they inherit node id 4).
#   - on a standby, snowflake_next() refuses with SQLSTATE 25006, the
#     documented message and hint; decoding works; snowflake_node_info()
#     says node 4, in recovery, the primary's system identifier;
#   - the failover check (examples/replication/failover_check.sql, shown in
#     docs/operations.md) passes on a standby whose clock is in sync, and fails,
#     naming the table, on one whose clock is 3 s behind (libfaketime);
#   - after the primary stops and the in-sync standby is promoted (the check
#     passes there too), it issues
#     IDs under node 4, greater than every ID it received by replication.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/standby_failover.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
faketime_init
CHECK=examples/replication/failover_check.sql
doc_shows_file docs/operations.md "$CHECK" || fail "docs/operations.md does not show $CHECK as it is"
pass "docs/operations.md shows $CHECK as it is"

cluster_init primary "$(free_port)" "snowflake_id.node_id = 4"
cluster_start primary || fail "the primary did not start"
psql_on primary -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), n int)" \
  -c "INSERT INTO orders (n) SELECT g FROM generate_series(1, 1000) g"

cluster_basebackup standby "$(free_port)" primary
cluster_start standby || fail "the standby did not start"
cluster_basebackup late "$(free_port)" primary
clock_set -3
cluster_start_faked late || fail "the standby with a clock 3 s behind did not start"
[ "$(sql_value standby "SHOW snowflake_id.node_id")" = 4 ] || fail "the standby did not inherit node id 4"
pass "two standbys made with pg_basebackup, with node id 4 like the primary"

# More rows after the base backup, so the standbys hold IDs beyond the lease
# file they copied; and IDs of node 4 in a column without the default (from
# a batch), beside a bigint column of plain numbers the check must ignore
# (one of them looks like an ID of node 4 ten years ahead: a hash, say).
psql_on primary -c "INSERT INTO orders (n) SELECT g FROM generate_series(1001, 21000) g" \
  -c "CREATE TABLE imported (ext_id bigint, amount bigint)" \
  -c "INSERT INTO imported SELECT x, 1000000 FROM snowflake_next_batch(1000) AS x" \
  -c "INSERT INTO imported VALUES (NULL, snowflake_from_timestamp(now() + interval '10 years') | (4 << 12))"
imported_max=$(sql_value primary "SELECT max(ext_id) FROM imported")
wait_for_replay standby primary
wait_for_replay late primary
max_id=$(sql_value primary "SELECT max(id) FROM orders")
[ "$(sql_value standby "SELECT max(id) FROM orders")" = "$max_id" ] || fail "the standby does not have the primary's rows"
pass "the standbys replayed 21000 rows, largest ID $max_id"

out=$(sql_error standby "SELECT snowflake_next()") || fail "snowflake_next() issued an ID on a standby"
printf '%s\n' "$out" | sed 's/^/  /'
[ "$(sqlstate_of "$out")" = 25006 ] || fail "expected SQLSTATE 25006"
grep -q "cannot issue IDs on a server in recovery" <<<"$out" || fail "the message does not say the server is in recovery"
grep -q "^HINT:  Issue IDs on the primary: an INSERT reached a standby, so route writes to the primary (target_session_attrs=read-write" <<<"$out" || fail "no hint naming target_session_attrs"
out=$(sql_error standby "INSERT INTO orders (n) VALUES (0)") || fail "an insert succeeded on a standby"
pass "on the standby snowflake_next() refuses with 25006 and a hint"

[ "$(sql_value standby "SELECT count(*) FROM orders WHERE snowflake_node(id) <> 4 OR (SELECT d.node_id FROM snowflake_decode(id) d) <> 4")" = 0 ] ||
  fail "decoding on the standby gives another node id"
[ "$(sql_value standby "SELECT abs(extract(epoch FROM snowflake_timestamp($max_id) - now())) < 60")" = t ] ||
  fail "snowflake_timestamp on the standby is off"
[ "$(sql_value standby "SELECT node_id = 4 AND in_recovery AND system_identifier = $(sql_value primary "SELECT system_identifier FROM pg_control_system()") FROM snowflake_node_info")" = t ] ||
  fail "snowflake_node_info on the standby does not say node 4, in recovery, the primary's system identifier"
[ "$(sql_value primary "SELECT NOT in_recovery FROM snowflake_node_info()")" = t ] || fail "the primary says it is in recovery"
pass "on the standby decoding works and snowflake_node_info says node 4, in recovery, same system identifier"

cluster_stop primary
out=$(sql_error late "\\i $CHECK") || fail "the failover check passed on a standby whose clock is 3 s behind the last IDs"
printf '%s\n' "$out" | sed 's/^/  /'
grep -q "not past the IDs already issued: .*orders.id: largest ID $max_id" <<<"$out" ||
  fail "the failover check does not name orders.id and its largest ID"
grep -q "imported.ext_id: largest ID $imported_max" <<<"$out" ||
  fail "the failover check does not name imported.ext_id (IDs from a batch, no default) and its largest ID"
grep -q "imported.amount" <<<"$out" && fail "the failover check names a column of plain numbers"
pass "failover check: refuses on the standby whose clock is behind, naming orders.id and imported.ext_id (IDs without the default), not imported.amount"
out=$(psql_on standby -f "$CHECK" 2>&1) || { printf '%s\n' "$out"; fail "the failover check failed on the standby in sync"; }
printf '%s\n' "$out" | sed 's/^/  /'
pass "failover check: passes on the standby whose clock is in sync"

(cd / && as_pg "$PG_BIN/pg_ctl" -D "$(cluster_dir standby)" -w -t 60 promote >/dev/null) || fail "promotion failed"
[ "$(sql_value standby "SELECT in_recovery FROM snowflake_node_info()")" = f ] || fail "the promoted server says it is in recovery"
psql_on standby -f "$CHECK" >/dev/null 2>&1 || fail "the failover check failed on the promoted server"
first=$(sql_value standby "SELECT snowflake_next()")
psql_on standby -c "INSERT INTO orders (n) SELECT -g FROM generate_series(1, 5000) g"
[ "$first" -gt "$max_id" ] || fail "the promoted server issued $first, not greater than $max_id"
[ "$(sql_value standby "SELECT min(id) > $max_id AND bool_and(snowflake_node(id) = 4) FROM orders WHERE n < 0")" = t ] ||
  fail "the promoted server inserted IDs not greater than $max_id or not of node 4"
[ "$(sql_value standby "SELECT count(*) = count(DISTINCT id) AND count(*) = 26000 FROM orders")" = t ] ||
  fail "duplicate IDs after promotion"
pass "promoted: IDs of node 4 from $first on, all greater than the largest replicated ID $max_id"
pass "standby_failover"
