#!/usr/bin/env bash
# Two writers that replicate each other with logical replication
# (examples/replication/two_writers_*.sql, shown in docs/sharding.md), set up
# the way a large database gets a second writer: a physical standby of A,
# converted into a logical subscriber by pg_createsubscriber (17+).
#   - the converted server B keeps A's node id and lease and is held as a
#     copy (55000) until it has its own node id and accepts it;
#   - two_writers_b.sql / two_writers_a.sql make the pair bidirectional
#     (origin = none);
#   - 4 pgbench clients insert on A and 4 on B at once: both servers end with
#     the same rows, count(*) = count(DISTINCT id), each ID carrying the node
#     id of the server that inserted it, no apply error in either log;
#   - the node-id check (two_writers_node_info.sql + check_nodes.sql) reports
#     nothing; then B is given A's node id: concurrent inserts on both make
#     the same IDs, A's apply worker fails on the primary key (the failure a
#     duplicated node id causes), and the check reports duplicate_node_id.
#
# Run from the repository root, with the extension installed into 17 or later:
#   PG_BIN=$(dirname "$(scripts/pg_config.sh 17)") \
#     flock /tmp/snowflake_id.pg.lock bash tests/integration/logical_two_writers.sh
# SF_WRITER_TX (default 1000) sets the transactions of each pgbench client.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
[ -x "$PG_BIN/pg_createsubscriber" ] ||
  fail "PostgreSQL $PG_MAJOR has no pg_createsubscriber (17 and later): run this test with PG_BIN of 17 or 18"
[ -f "$("$PG_BIN/pg_config" --sharedir)/extension/postgres_fdw.control" ] ||
  fail "postgres_fdw is not installed into $PG_BIN/.."
WRITER_TX=${SF_WRITER_TX:-1000}
EX=examples/replication
for f in two_writers_b.sql two_writers_a.sql two_writers_node_info.sql; do
  doc_shows_file docs/sharding.md "$EX/$f" "examples/replication/$f" || fail "docs/sharding.md does not show $EX/$f as it is"
done
doc_shows_file docs/sharding.md examples/sharding/check_nodes.sql "examples/sharding/check_nodes.sql" ||
  fail "docs/sharding.md does not show examples/sharding/check_nodes.sql as it is"
pass "docs/sharding.md shows the two-writer recipe files as they are"

LOGICAL=("wal_level = logical" "max_replication_slots = 10" "max_wal_senders = 10"
  "max_logical_replication_workers = 4" "max_worker_processes = 16")
cluster_init a "$(free_port)" "snowflake_id.node_id = 1" "${LOGICAL[@]}"
cluster_start a || fail "A did not start"
psql_on a <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE items (id bigint PRIMARY KEY DEFAULT snowflake_next(), origin text NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO items (origin) SELECT 'a-before' FROM generate_series(1, 1000);
SQL

# B: a physical standby of A, converted by pg_createsubscriber.
cluster_basebackup b "$(free_port)" a
cluster_start b || fail "B (A's standby) did not start"
wait_for_replay b a
cluster_stop b
create_subscriber b a --publication writers_a --subscription from_a
cluster_start b || fail "B did not start after pg_createsubscriber"
err=$(sql_error b "SELECT snowflake_next()") || fail "B, converted from A's standby with A's node id, issued an ID"
[ "$(sqlstate_of "$err")" = 55000 ] || { echo "$err"; fail "B: expected 55000 (a copy)"; }
pass "B, made by pg_createsubscriber from A's standby, keeps node id 1 and is held as a copy (55000)"

# The recipe: B's own node id, then two_writers_b.sql and two_writers_a.sql.
psql_on b -c "ALTER SYSTEM SET snowflake_id.node_id = 2"
cluster_stop b; cluster_start b || fail "B did not restart"
psql_on b -o /dev/null -f "$EX/two_writers_b.sql"
psql_on a -v b_conninfo="host=127.0.0.1 port=$(cluster_port b) dbname=postgres user=postgres" -f "$EX/two_writers_a.sql"
pass "pair set up: B with node id 2 (two_writers_b.sql), A subscribed to B (two_writers_a.sql)"

# wait_same_rows: until A and B hold the same rows (60 s at most).
wait_same_rows() {
  local qa qb
  for _ in $(seq 1 600); do
    qa=$(sql_value a "SELECT count(*) || ':' || coalesce(sum(hashint8(id)), 0) FROM items")
    qb=$(sql_value b "SELECT count(*) || ':' || coalesce(sum(hashint8(id)), 0) FROM items")
    [ "$qa" = "$qb" ] && return 0
    sleep 0.1
  done
  fail "A ($qa) and B ($qb) do not converge within 60 s"
}

for s in a b; do
  printf '%s\n' "INSERT INTO items (origin) VALUES ('$s');" > "$SF_WORK/$s.pgbench"
done
pgbench -n -h 127.0.0.1 -p "$(cluster_port a)" -U postgres -c 4 -j 2 -t "$WRITER_TX" -f "$SF_WORK/a.pgbench" postgres > "$SF_WORK/pgbench_a.out" 2>&1 &
pid_a=$!
pgbench -n -h 127.0.0.1 -p "$(cluster_port b)" -U postgres -c 4 -j 2 -t "$WRITER_TX" -f "$SF_WORK/b.pgbench" postgres > "$SF_WORK/pgbench_b.out" 2>&1 &
pid_b=$!
wait "$pid_a" || { cat "$SF_WORK/pgbench_a.out"; fail "pgbench on A failed"; }
wait "$pid_b" || { cat "$SF_WORK/pgbench_b.out"; fail "pgbench on B failed"; }
wait_same_rows
rows=$((1000 + 8 * WRITER_TX))
for s in a b; do
  [ "$(sql_value "$s" "SELECT count(*) = $rows AND count(DISTINCT id) = $rows FROM items")" = t ] ||
    fail "$s: expected $rows rows with distinct IDs: $(sql_value "$s" "SELECT count(*), count(DISTINCT id) FROM items")"
  [ "$(sql_value "$s" "SELECT count(*) FROM items WHERE snowflake_node(id) <> CASE WHEN origin LIKE 'a%' THEN 1 ELSE 2 END")" = 0 ] ||
    fail "$s: IDs that do not carry the node id of the server that inserted them"
done
for s in a b; do
  log_has "$s" "duplicate key|conflict" && fail "$s's log reports a replication conflict"
done
pass "4 clients on A and 4 on B at once: both hold the same $rows rows, no ID twice, each with its writer's node id, no conflict"

# The node-id check, on A.
psql_on a -o /dev/null -v peer_host=127.0.0.1 -v peer_port="$(cluster_port b)" -v peer_db=postgres \
  -v peer_user=postgres -v peer_password=unused -f "$EX/two_writers_node_info.sql" -f examples/sharding/check_nodes.sql
[ "$(sql_value a "SELECT count(*) FROM snowflake_node_check")" = 0 ] ||
  { psql_on a -c "SELECT * FROM snowflake_node_check"; fail "the node check reports a problem on a healthy pair"; }
pass "node check on A (two_writers_node_info.sql + check_nodes.sql): nothing to report"

# The failure a duplicated node id causes: B given A's node id.
psql_on b -c "ALTER SYSTEM SET snowflake_id.node_id = 1"
cluster_stop b; cluster_start b || fail "B did not restart"
psql_on b -o /dev/null -c "SELECT snowflake_accept_configuration()"
got=$(sql_value a "SELECT problem || '|' || node_id || '|' || shards::text FROM snowflake_node_check")
[ "$got" = "duplicate_node_id|1|{\"peer 127.0.0.1:$(cluster_port b)\",\"this server\"}" ] ||
  fail "the node check does not report B with A's node id (got: '$got')"
pass "node check: B with A's node id is reported: $got"
# (Acceptance starts B above its lease, a few seconds ahead of the clock:
# wait until B issues at the clock again, where A issues.)
caught_up=0
for _ in $(seq 1 300); do
  [ "$(sql_value b "SELECT snowflake_timestamp(snowflake_next()) <= clock_timestamp()")" = t ] && { caught_up=1; break; }
  sleep 0.1
done
[ "$caught_up" = 1 ] || fail "B does not issue at the clock 30 s after the acceptance"
# Both insert at once, in rounds, until an apply worker meets a key the
# other side made (the first round almost always does).
conflict() {
  log_has a 'duplicate key value violates unique constraint "items_pkey"' ||
    log_has b 'duplicate key value violates unique constraint "items_pkey"'
}
for round in 1 2 3 4 5; do
  psql_on a -c "INSERT INTO items (origin) SELECT 'a-dup' FROM generate_series(1, 100000)" &
  pid_a=$!
  psql_on b -c "INSERT INTO items (origin) SELECT 'b-dup' FROM generate_series(1, 100000)" &
  pid_b=$!
  wait "$pid_a" || fail "the insert on A failed"
  wait "$pid_b" || fail "the insert on B failed"
  for _ in $(seq 1 100); do conflict && break; sleep 0.1; done
  conflict && break
  echo "round $round: no conflict yet"
done
conflict || fail "with one node id on both writers no apply worker failed in 5 rounds: the test did not make colliding IDs"
pass "with one node id on both writers, concurrent inserts made the same IDs and replication stopped on a primary key violation"
