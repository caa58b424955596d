#!/usr/bin/env bash
# snowflake_horizon() under load: consumers that page through an outbox by
# ID miss no row when they read below the horizon, and do miss rows when
# they only read above the last ID they saw.
#   - writers: 6 pgbench clients, each transaction 40 rows, a random pause
#     of 0 to 30 ms before it ends, 10% rolled back; meanwhile a loop of
#     prepared transactions (20 rows each) from sessions that exit at once,
#     committed (or, one in four, rolled back) 1 to 2 s later from another
#     session;
#   - two pollers at once, each a procedure that commits after every page:
#     the naive one reads `id > last`, the other takes snowflake_horizon()
#     in one statement and reads `id > last AND id < horizon` in the next;
#   - at the end, after a last page: at least 100,000 committed rows; the
#     horizon poller saw every one of them exactly once; the naive poller
#     missed some (the reason for the horizon);
#   - IDs issued by parallel workers hold their leader's transaction's
#     horizon until it commits;
#   - a transaction prepared before a restart holds the horizon after it
#     (kept in snowflake_id.prepared), until COMMIT PREPARED; one whose
#     bound was lost makes the horizon refuse (55000) until it ends;
#   - a commit waiting for a synchronous standby (not visible yet) holds the
#     horizon until it is visible.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/horizon.sh
# SF_HORIZON_SECONDS (default 15) sets how long the writers run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
SECONDS_OF_WRITES=${SF_HORIZON_SECONDS:-15}

cluster_init h "$(free_port)" "snowflake_id.node_id = 7" "max_prepared_transactions = 20" \
  "max_wal_size = '1GB'" "synchronous_commit = off"
cluster_start h || fail "the server did not start"
psql_on h <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE TABLE outbox (id bigint PRIMARY KEY DEFAULT snowflake_next(), payload text NOT NULL);
CREATE TABLE seen (poller text NOT NULL, id bigint NOT NULL);
-- One consumer: pages until `until`, committing after each page; naive
-- pages read above the last ID seen, the others below the horizon too.
CREATE PROCEDURE poll(poller text, naive boolean, until timestamptz) LANGUAGE plpgsql AS $$
DECLARE
    last bigint := 0;
    h bigint;
    m bigint;
BEGIN
    LOOP
        IF naive THEN
            WITH got AS (INSERT INTO seen SELECT poller, id FROM outbox WHERE id > last RETURNING id)
            SELECT max(id) INTO m FROM got;
        ELSE
            h := snowflake_horizon();   -- its own statement: the read below starts after it
            WITH got AS (INSERT INTO seen SELECT poller, id FROM outbox WHERE id > last AND id < h RETURNING id)
            SELECT max(id) INTO m FROM got;
        END IF;
        last := greatest(last, coalesce(m, last));
        COMMIT;
        EXIT WHEN clock_timestamp() > until;
        PERFORM pg_sleep(0.005);
    END LOOP;
END $$;
SQL
pass "outbox, and the two pollers as procedures"

printf '%s\n' '\set pause random(0, 30)' '\set r random(1, 100)' 'BEGIN;' \
  "INSERT INTO outbox (payload) SELECT 'w' FROM generate_series(1, 40);" '\sleep :pause ms' \
  '\if :r <= 10' 'ROLLBACK;' '\else' 'COMMIT;' '\endif' > "$SF_WORK/writer.pgbench"
until_ts=$(sql_value h "SELECT clock_timestamp() + interval '$((SECONDS_OF_WRITES + 2)) seconds'")
psql_on h -c "CALL poll('horizon', false, '$until_ts')" > "$SF_WORK/poll_horizon.out" 2>&1 &
poll_h=$!
psql_on h -c "CALL poll('naive', true, '$until_ts')" > "$SF_WORK/poll_naive.out" 2>&1 &
poll_n=$!
pgbench -n -h 127.0.0.1 -p "$(cluster_port h)" -U postgres -c 6 -j 2 -T "$SECONDS_OF_WRITES" \
  -f "$SF_WORK/writer.pgbench" postgres > "$SF_WORK/pgbench.out" 2>&1 &
bench=$!
# Prepared transactions from sessions that exit, ended later by others.
prepared=0
end=$((SECONDS + SECONDS_OF_WRITES - 2))
while [ $SECONDS -lt $end ]; do
  prepared=$((prepared + 1))
  psql_on h -c "BEGIN" -c "INSERT INTO outbox (payload) SELECT 'prepared' FROM generate_series(1, 20)" \
    -c "PREPARE TRANSACTION 'p$prepared'" >/dev/null
  if [ "$prepared" -gt 2 ]; then
    n=$((prepared - 2))
    if [ $((n % 4)) -eq 0 ]; then how=ROLLBACK; else how=COMMIT; fi
    psql_on h -c "$how PREPARED 'p$n'" >/dev/null
  fi
  sleep 0.6
done
for n in $((prepared - 1)) "$prepared"; do
  [ "$n" -gt 0 ] && psql_on h -c "COMMIT PREPARED 'p$n'" >/dev/null
done
wait "$bench" || { cat "$SF_WORK/pgbench.out"; fail "pgbench failed"; }
wait "$poll_h" || { cat "$SF_WORK/poll_horizon.out"; fail "the horizon poller failed"; }
wait "$poll_n" || { cat "$SF_WORK/poll_naive.out"; fail "the naive poller failed"; }
# A last page each, with nothing in progress any more.
psql_on h -c "CALL poll('horizon-last', false, clock_timestamp())" -c "CALL poll('naive-last', true, clock_timestamp())" >/dev/null
echo "load and pollers done after $SECONDS s"
[ "$(sql_value h "SELECT count(*) FROM pg_prepared_xacts")" = 0 ] || fail "prepared transactions left"
echo "writers: $(grep -E '^number of transactions actually processed' "$SF_WORK/pgbench.out"); $prepared prepared transactions"

rows=$(sql_value h "SELECT count(*) FROM outbox")
[ "$rows" -ge 100000 ] || fail "only $rows committed rows: the test needs at least 100,000 (raise SF_HORIZON_SECONDS)"
# The last page of a poller starts from 0: only what the poller had not seen
# before counts as found by it, the rest it read again.
result() {
  sql_value h "SELECT count(*) FROM outbox o LEFT JOIN (SELECT DISTINCT id FROM seen WHERE poller = '$1') s USING (id)
               WHERE s.id IS NULL"
}
missed_h=$(result horizon)
missed_n=$(result naive)
twice=$(sql_value h "SELECT count(*) FROM (SELECT id FROM seen WHERE poller = 'horizon' GROUP BY id HAVING count(*) > 1) d")
echo "checked after $SECONDS s; committed rows: $rows; the horizon poller missed $missed_h, the naive poller $missed_n"
[ "$twice" = 0 ] || fail "the horizon poller read $twice rows twice"
[ "$missed_h" = 0 ] || fail "the horizon poller missed $missed_h committed rows"
pass "horizon poller: every one of the $rows committed rows, exactly once"
[ "$missed_n" -gt 0 ] || fail "the naive poller missed nothing: the load did not commit out of ID order"
pass "naive poller (id > last_seen): missed $missed_n rows that committed after it had passed their IDs"
[ "$(sql_value h "SELECT count(*) FROM outbox o LEFT JOIN (SELECT DISTINCT id FROM seen WHERE poller IN ('naive', 'naive-last')) s USING (id) WHERE s.id IS NULL")" = 0 ] ||
  fail "the naive poller's missed rows are not all there on a full read"
[ ! -f "$(cluster_dir h)/snowflake_id.prepared" ] || fail "snowflake_id.prepared is left after every prepared transaction ended"

# IDs issued by parallel workers hold their leader's transaction's horizon
# (the workers end before the leader commits). The leader issues nothing
# itself here (parallel_leader_participation = off).
psql_on h -o /dev/null -c "CREATE TABLE wide AS SELECT g FROM generate_series(1, 200000) g" -c "ANALYZE wide"
out=$(psql_on h -At <<'SQL'
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
BEGIN;
SELECT min(snowflake_next()) AS m FROM wide \gset
-- More workers of the same transaction (they start, and commit their own
-- connecting transactions, while the leader's goes on).
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT min(snowflake_next()) FROM wide;
SELECT min(snowflake_next()) FROM wide;
SELECT 'held ' || (snowflake_horizon() <= :m);
COMMIT;
SELECT 'after ' || (snowflake_horizon() > :m);
SQL
)
grep -Eq "Workers Launched: [1-9]" <<<"$out" || { echo "$out"; fail "the parallel plan launched no worker"; }
grep -q "^held true$" <<<"$out" || { echo "$out"; fail "IDs issued by parallel workers do not hold their leader's open transaction's horizon"; }
grep -q "^after true$" <<<"$out" || { echo "$out"; fail "after the leader's commit the horizon does not move past the workers' IDs"; }
pass "IDs issued by parallel workers hold the horizon until their leader's transaction ends"

# A prepared transaction across a restart.
held=$(sql_value h "BEGIN; INSERT INTO outbox (payload) VALUES ('across a restart') RETURNING id; PREPARE TRANSACTION 'across';" | head -1)
[ -f "$(cluster_dir h)/snowflake_id.prepared" ] || fail "no snowflake_id.prepared while a transaction is prepared"
cluster_stop h
cluster_start h || fail "the server did not restart"
psql_on h -c "INSERT INTO outbox (payload) VALUES ('after the restart')" >/dev/null
[ "$(sql_value h "SELECT snowflake_horizon() <= $held")" = t ] ||
  fail "after a restart, the transaction prepared before it no longer holds the horizon"
psql_on h -c "COMMIT PREPARED 'across'" >/dev/null
[ "$(sql_value h "SELECT snowflake_horizon() > (SELECT max(id) FROM outbox)")" = t ] ||
  fail "after COMMIT PREPARED, the horizon does not move past its ID"
[ ! -f "$(cluster_dir h)/snowflake_id.prepared" ] || fail "snowflake_id.prepared is left after the last prepared transaction ended"
pass "a transaction prepared before a restart holds the horizon after it, until COMMIT PREPARED"

# A prepared transaction whose bound was lost (here: the file removed while
# the server was down; after a failover or a restore there is none): the
# horizon refuses, naming it, until it ends.
psql_on h -o /dev/null -c "BEGIN" -c "INSERT INTO outbox (payload) VALUES ('lost bound')" -c "PREPARE TRANSACTION 'lost'"
cluster_stop h
rm "$(cluster_dir h)/snowflake_id.prepared"
cluster_start h || fail "the server did not restart"
err=$(sql_error h "SELECT snowflake_horizon()") || fail "the horizon was given with a prepared transaction whose bound is unknown"
[ "$(sqlstate_of "$err")" = 55000 ] && grep -q "prepared transaction 'lost'" <<<"$err" ||
  { echo "$err"; fail "expected 55000 naming the prepared transaction 'lost'"; }
psql_on h -c "COMMIT PREPARED 'lost'" >/dev/null
[ "$(sql_value h "SELECT snowflake_horizon() > (SELECT max(id) FROM outbox)")" = t ] ||
  fail "after the unknown prepared transaction ended, the horizon is not back"
pass "a prepared transaction with no known bound: the horizon refuses (55000, naming it) until it ends"

# A commit that waits (here for a synchronous standby that never comes) is
# not visible yet: its ID still holds the horizon, and only after the commit
# is visible does the horizon pass it.
psql_on h -o /dev/null -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()"
psql_on h -c "SET synchronous_commit = on" -c "INSERT INTO outbox (payload) VALUES ('waits for a standby')" \
  > "$SF_WORK/waiting.out" 2>&1 &
waiting=$!
for _ in $(seq 1 100); do
  [ "$(sql_value h "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")" = 1 ] && break
  sleep 0.1
done
[ "$(sql_value h "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")" = 1 ] ||
  fail "the insert did not wait for the synchronous standby"
during=$(sql_value h "SELECT snowflake_horizon()")
[ "$(sql_value h "SELECT count(*) FROM outbox WHERE payload = 'waits for a standby'")" = 0 ] ||
  fail "the waiting commit is already visible"
psql_on h -o /dev/null -c "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
wait "$waiting" || true
psql_on h -o /dev/null -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()"
waited=$(sql_value h "SELECT id FROM outbox WHERE payload = 'waits for a standby'")
[ -n "$waited" ] || { cat "$SF_WORK/waiting.out"; fail "the cancelled wait did not leave the row committed"; }
[ "$during" -le "$waited" ] || fail "while its commit waited, the horizon ($during) passed the row's ID ($waited)"
[ "$(sql_value h "SELECT snowflake_horizon() > $waited")" = t ] || fail "after the commit, the horizon does not pass the row's ID"
pass "a commit waiting for a synchronous standby holds the horizon until it is visible"
pass "horizon"
