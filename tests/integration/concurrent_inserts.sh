#!/usr/bin/env bash
# Proves that snowflake_next() as a column default stays correct under
# concurrent load on one node: 8 pgbench clients load two tables at the same
# time (>= 1,000,000 rows into a, >= 200,000 into b, both tables in every
# transaction), and afterwards
#   - no ID occurs twice, across both tables;
#   - within each client, IDs strictly increase in the order the client
#     inserted its rows (across both tables), so the generator is monotonic
#     for any single session while other sessions interleave with it;
#   - every ID decodes to node 7, the configured node, and snowflake_decode
#     agrees with snowflake_node/_timestamp/_sequence;
#   - every ID's time is within 1 second of the row's clock_timestamp();
#   - snowflake_from_timestamp(snowflake_timestamp(id)) <= id (range scans
#     by time never miss a row);
#   - snowflake_stats() reports node 7, at least as many IDs as rows, and
#     the largest ID as last_id.
# No assertion depends on how fast the machine is.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/concurrent_inserts.sh
# SF_TX (default 125) sets the transactions per client; each transaction
# inserts 1000 rows into a and 200 into b.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

NODE_ID=7
CLIENTS=8
TX_PER_CLIENT=${SF_TX:-125}
ROWS_A_PER_TX=1000   # two statements of 500
ROWS_B_PER_TX=200
EXPECT_A=$((CLIENTS * TX_PER_CLIENT * ROWS_A_PER_TX))
EXPECT_B=$((CLIENTS * TX_PER_CLIENT * ROWS_B_PER_TX))

port=$(free_port)
cluster_init n1 "$port" \
  "snowflake_id.node_id = $NODE_ID" \
  "max_wal_size = '2GB'" \
  "checkpoint_timeout = '30min'"
cluster_start n1 || fail "cluster with snowflake_id.node_id = $NODE_ID did not start"
pass "cluster started on port $port with snowflake_id.node_id = $NODE_ID"

psql_on n1 <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE a (
  id bigint PRIMARY KEY DEFAULT snowflake_next(),
  client int NOT NULL,
  n bigint NOT NULL,
  inserted_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE b (LIKE a INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
SQL

# n is the client's own insertion counter: pgbench keeps :batch per client
# across transactions, and within a transaction the statements and the
# generate_series rows run in order. Every transaction writes a, then b, then
# a again, so each client's sequence interleaves both tables.
script="$SF_WORK/load.sql"
cat >"$script" <<'PGBENCH'
\set batch :batch + 1
BEGIN;
INSERT INTO a (client, n) SELECT :client_id, :batch * 10000 + g FROM generate_series(1, 500) AS g;
INSERT INTO b (client, n) SELECT :client_id, :batch * 10000 + 1000 + g FROM generate_series(1, 200) AS g;
INSERT INTO a (client, n) SELECT :client_id, :batch * 10000 + 2000 + g FROM generate_series(1, 500) AS g;
COMMIT;
PGBENCH

echo "loading: $CLIENTS clients x $TX_PER_CLIENT transactions, $EXPECT_A rows into a and $EXPECT_B into b"
start=$(date +%s.%N)
if ! pgbench_out=$(pgbench -h 127.0.0.1 -p "$port" -U postgres -n \
    -c "$CLIENTS" -j 2 -t "$TX_PER_CLIENT" -D batch=0 -f "$script" postgres 2>&1); then
  printf '%s\n' "$pgbench_out"
  fail "pgbench reported an error"
fi
end=$(date +%s.%N)
printf '%s\n' "$pgbench_out" | grep -E '^(number of (transactions actually processed|failed transactions)|tps)' || true
elapsed=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
rate=$(awk -v n=$((EXPECT_A + EXPECT_B)) -v s="$start" -v e="$end" 'BEGIN { printf "%d", n / (e - s) }')
echo "load took ${elapsed}s (about $rate rows/s)"

rows_a=$(sql_value n1 "SELECT count(*) FROM a")
rows_b=$(sql_value n1 "SELECT count(*) FROM b")
[ "$rows_a" -eq "$EXPECT_A" ] || fail "a has $rows_a rows, expected $EXPECT_A"
[ "$rows_b" -eq "$EXPECT_B" ] || fail "b has $rows_b rows, expected $EXPECT_B"
pass "a has $rows_a rows, b has $rows_b rows"

psql_on n1 -c "CREATE VIEW all_rows AS
  SELECT 'a' AS tab, id, client, n, inserted_at FROM a
  UNION ALL
  SELECT 'b', id, client, n, inserted_at FROM b"
psql_on n1 -c "VACUUM ANALYZE a" -c "VACUUM ANALYZE b"

failures=0
# check DESCRIPTION SQL: SQL returns the number of offending rows, which must be 0.
check() {
  local what=$1 sql=$2 bad
  if ! bad=$(sql_value n1 "$sql" 2>&1); then
    echo "FAIL: $what: the query failed: $bad" >&2
    failures=$((failures + 1))
  elif [ "$bad" = "0" ]; then
    pass "$what"
  else
    echo "FAIL: $what: $bad offending rows" >&2
    failures=$((failures + 1))
  fi
}

check "no duplicate IDs across a and b" \
  "SELECT count(*) - count(DISTINCT id) FROM all_rows"
check "every ID is positive" \
  "SELECT count(*) FROM all_rows WHERE id <= 0"
check "each client's insertion counter is unique (the ordering check is well defined)" \
  "SELECT count(*) - count(DISTINCT (client, n)) FROM all_rows"
check "all $CLIENTS clients inserted rows" \
  "SELECT $CLIENTS - count(DISTINCT client) FROM all_rows"
check "within each client, IDs strictly increase in insertion order (across both tables)" \
  "SELECT count(*) FROM (
     SELECT id, lag(id) OVER (PARTITION BY client ORDER BY n) AS prev FROM all_rows
   ) s WHERE prev IS NOT NULL AND id <= prev"
check "every ID decodes to node $NODE_ID (snowflake_node)" \
  "SELECT count(*) FROM all_rows WHERE snowflake_node(id) IS DISTINCT FROM $NODE_ID"
check "snowflake_decode agrees with snowflake_timestamp/_node/_sequence and says node $NODE_ID" \
  "SELECT count(*) FROM all_rows r CROSS JOIN LATERAL snowflake_decode(r.id) d
   WHERE d.node_id IS DISTINCT FROM $NODE_ID
      OR d.ts IS DISTINCT FROM snowflake_timestamp(r.id)
      OR d.node_id IS DISTINCT FROM snowflake_node(r.id)
      OR d.sequence IS DISTINCT FROM snowflake_sequence(r.id)"
check "decoded sequence numbers are within 0 .. 4095" \
  "SELECT count(*) FROM all_rows WHERE snowflake_sequence(id) NOT BETWEEN 0 AND 4095"
check "every decoded time is within 1 second of the row's inserted_at" \
  "SELECT count(*) FROM all_rows
   WHERE abs(extract(epoch FROM snowflake_timestamp(id) - inserted_at)) >= 1
      OR snowflake_timestamp(id) IS NULL"
check "snowflake_from_timestamp(snowflake_timestamp(id)) <= id for every ID" \
  "SELECT count(*) FROM all_rows
   WHERE snowflake_from_timestamp(snowflake_timestamp(id)) IS NULL
      OR snowflake_from_timestamp(snowflake_timestamp(id)) > id"

# Informational: how far issued times were from the row times, and how much
# the clients' ID ranges overlapped (they should, since they ran at once).
psql_on n1 -c "SELECT round(max(abs(extract(epoch FROM snowflake_timestamp(id) - inserted_at)))::numeric * 1000, 3) AS max_abs_skew_ms,
                      max(snowflake_sequence(id)) AS max_sequence,
                      min(snowflake_timestamp(id)) AS first_id_time,
                      max(snowflake_timestamp(id)) AS last_id_time
               FROM all_rows"
psql_on n1 -c "SELECT count(*) AS clients_overlapping_another_client
               FROM (SELECT client, min(id) lo, max(id) hi FROM all_rows GROUP BY client) x
               WHERE EXISTS (SELECT 1 FROM (SELECT client, min(id) lo, max(id) hi FROM all_rows GROUP BY client) y
                             WHERE y.client <> x.client AND y.lo <= x.hi AND x.lo <= y.hi)"

check "snowflake_stats() reports node $NODE_ID, ids_issued >= rows inserted, last_id = max(id)" \
  "SELECT CASE WHEN count(*) = 1
                   AND bool_and(s.node_id = $NODE_ID
                                AND s.ids_issued >= $((EXPECT_A + EXPECT_B))
                                AND s.last_id = (SELECT max(id) FROM all_rows))
              THEN 0 ELSE 1 END
   FROM snowflake_stats() s"
psql_on n1 -x -c "SELECT * FROM snowflake_stats()"

if log_has n1 'terminated by signal|PANIC|server process .* was terminated'; then
  echo "FAIL: the server log shows a crashed backend" >&2
  failures=$((failures + 1))
else
  pass "no crashed backend in the server log"
fi

[ "$failures" -eq 0 ] || fail "$failures checks failed"
pass "concurrent_inserts: $((rows_a + rows_b)) rows from $CLIENTS concurrent clients in ${elapsed}s"
