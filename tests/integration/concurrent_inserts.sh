#!/usr/bin/env bash
# Proves that snowflake_next() as a column default stays correct under
# concurrent load on one node: 16 pgbench clients load three tables at the
# same time (1,008,000 rows into a, 201,600 into b, 50,400 into c, every
# table in every transaction), and afterwards
#   - no ID occurs twice, across the three tables;
#   - within each client, IDs strictly increase in the order the client
#     inserted its rows (across both tables), so the generator is monotonic
#     for any single session while other sessions interleave with it;
#   - across clients, in the order of issue: a call that started after
#     another call (in any session) had returned got the larger ID. Each
#     row of c takes nextval() of one sequence just before its ID and just
#     after it (a sequence is one counter under a lock, ordered in real
#     time), so "X returned before Y started" is "X's after < Y's before";
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
# SF_TX (default 63) sets the transactions per client; each transaction
# inserts 1000 rows into a, 200 into b and 50 into c.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

NODE_ID=7
CLIENTS=16
TX_PER_CLIENT=${SF_TX:-63}
ROWS_A_PER_TX=1000   # two statements of 500
ROWS_B_PER_TX=200
ROWS_C_PER_TX=50
EXPECT_A=$((CLIENTS * TX_PER_CLIENT * ROWS_A_PER_TX))
EXPECT_B=$((CLIENTS * TX_PER_CLIENT * ROWS_B_PER_TX))
EXPECT_C=$((CLIENTS * TX_PER_CLIENT * ROWS_C_PER_TX))

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
CREATE SEQUENCE issue_order;
CREATE TABLE c (before_call bigint NOT NULL, id bigint PRIMARY KEY, after_call bigint NOT NULL);
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
INSERT INTO c SELECT nextval('issue_order'), snowflake_next(), nextval('issue_order') FROM generate_series(1, 50);
COMMIT;
PGBENCH

echo "loading: $CLIENTS clients x $TX_PER_CLIENT transactions, $EXPECT_A rows into a, $EXPECT_B into b and $EXPECT_C into c"
start=$(date +%s.%N)
if ! pgbench_out=$(pgbench -h 127.0.0.1 -p "$port" -U postgres -n \
    -c "$CLIENTS" -j "$CLIENTS" -t "$TX_PER_CLIENT" -D batch=0 -f "$script" postgres 2>&1); then
  printf '%s\n' "$pgbench_out"
  fail "pgbench reported an error"
fi
end=$(date +%s.%N)
printf '%s\n' "$pgbench_out" | grep -E '^(number of (transactions actually processed|failed transactions)|tps)' || true
elapsed=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
rate=$(awk -v n=$((EXPECT_A + EXPECT_B + EXPECT_C)) -v s="$start" -v e="$end" 'BEGIN { printf "%d", n / (e - s) }')
echo "load took ${elapsed}s (about $rate rows/s)"

rows_a=$(sql_value n1 "SELECT count(*) FROM a")
rows_b=$(sql_value n1 "SELECT count(*) FROM b")
rows_c=$(sql_value n1 "SELECT count(*) FROM c")
[ "$rows_a" -eq "$EXPECT_A" ] || fail "a has $rows_a rows, expected $EXPECT_A"
[ "$rows_b" -eq "$EXPECT_B" ] || fail "b has $rows_b rows, expected $EXPECT_B"
[ "$rows_c" -eq "$EXPECT_C" ] || fail "c has $rows_c rows, expected $EXPECT_C"
pass "a has $rows_a rows, b has $rows_b rows, c has $rows_c rows"

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

check "no duplicate IDs across a, b and c" \
  "SELECT count(*) - count(DISTINCT id) FROM (SELECT id FROM all_rows UNION ALL SELECT id FROM c) s"
check "each row of c took its ID between its two sequence numbers" \
  "SELECT count(*) FROM c WHERE after_call <= before_call"
# For each row Y of c, the largest ID of the calls that had returned before
# Y's call started (after_call < Y.before_call) must be below Y's ID.
psql_on n1 -c "CREATE TABLE returned AS
                 SELECT after_call, max(id) OVER (ORDER BY after_call) AS largest_id FROM c" \
           -c "ALTER TABLE returned ADD PRIMARY KEY (after_call)" -c "ANALYZE returned"
check "in the order of issue across $CLIENTS sessions: an ID above every ID returned before its call" \
  "SELECT count(*) FROM c y
   WHERE (SELECT r.largest_id FROM returned r WHERE r.after_call < y.before_call
          ORDER BY r.after_call DESC LIMIT 1) >= y.id"
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
                                AND s.ids_issued >= $((EXPECT_A + EXPECT_B + EXPECT_C))
                                AND s.last_id = (SELECT max(id) FROM (SELECT id FROM all_rows UNION ALL SELECT id FROM c) s))
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
pass "concurrent_inserts: $((rows_a + rows_b + rows_c)) rows from $CLIENTS concurrent clients in ${elapsed}s"
