#!/usr/bin/env bash
# The portable edition's generator under concurrency (portable/, docs/portable.md):
# 16 pgbench sessions for a minute (SF_PORTABLE_SECONDS) on a server that
# does not load the extension, each transaction one of
#   - a single snowflake_next() (weight 450),
#   - a batch of 40 (weight 45): each batch is a reserve, which moves the
#     pair with setval() under the guard,
#   - a forced jump (weight 1; each moves the IDs up to 100 ms ahead, so
#     not so often that they outrun the clock): the owner's incarnation
#     record is reset, so the next call reserves past the clock plus
#     max_clock_drift_ms as after a restart (another setval() under the
#     guard),
# under a layout of 16 IDs a millisecond (sequence_bits 4) and a drift
# limit of 50 ms, so the sessions borrow the next milliseconds, wait at the
# limit and cross millisecond boundaries all the time. Then:
#   - no ID twice;
#   - in issue order: each call is bracketed by nextval() of one ordinary
#     sequence before and after it (a sequence is one counter under a lock,
#     ordered in real time), and a call that started after another had
#     returned got the larger ID;
#   - every ID decodes to the node id set, and to a time no later than the
#     row's clock plus the drift limit.
# And the guard's purpose, with the race made likely: on 2 cores a
# reserve's take and its setval() are microseconds apart, so two copies of
# the SQL file sleep 0.5 ms between them, under a layout of 2 IDs a
# millisecond and a drift limit of a minute (the batches drive the pair
# ahead of the clock, so a batch reserves from the pair, not from the
# clock, and overlaps what others take meanwhile), 10 s each: with the
# guard no ID twice; without it (the guard's four lines removed: the
# mutant) some ID twice, or this test could not see what the guard is for.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

SQL_FILE=$(cd "$(dirname "$0")/../.." && pwd)/portable/snowflake_id_portable.sql
SECONDS_RUN=${SF_PORTABLE_SECONDS:-60}
CLIENTS=16
NODE_ID=5

port=$(free_port)
cluster_init p1 "$port" "shared_preload_libraries = ''" "max_connections = 60"
cluster_start p1 || fail "cluster did not start"
psql_on p1 -c "CREATE ROLE app_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB"

# setup DB SQLFILE [SEQUENCE_BITS DRIFT_MS]: the edition installed by
# app_owner into DB, configured.
setup() {
  psql_on p1 -c "CREATE DATABASE $1 OWNER app_owner"
  psql_on p1 -U app_owner -d "$1" -f "$2" >/dev/null
  psql_on p1 -U app_owner -d "$1" <<SQL
UPDATE snowflake_portable.config SET node_id = $NODE_ID, sequence_bits = ${3:-4}, max_clock_drift_ms = ${4:-50};
CREATE SEQUENCE issue_order;
CREATE TABLE ids (before bigint NOT NULL, id bigint NOT NULL, after bigint NOT NULL,
                  at timestamptz NOT NULL DEFAULT clock_timestamp());
SQL
}

cat >"$SF_WORK/single.sql" <<'SQL'
INSERT INTO ids (before, id, after) SELECT nextval('issue_order'), snowflake_next(), nextval('issue_order');
SQL
cat >"$SF_WORK/batch.sql" <<'SQL'
INSERT INTO ids (before, id, after)
SELECT b, id, nextval('issue_order') FROM (SELECT nextval('issue_order') AS b) s, snowflake_next_batch(40) id;
SQL
cat >"$SF_WORK/jump.sql" <<'SQL'
SELECT setval('snowflake_portable.incarnation', 1);
INSERT INTO ids (before, id, after) SELECT nextval('issue_order'), snowflake_next(), nextval('issue_order');
SQL
chmod 644 "$SF_WORK"/*.sql

# load DB SECONDS: the three kinds of transaction from 16 sessions.
load() {
  as_pg pgbench -n -h 127.0.0.1 -p "$port" -U app_owner -c "$CLIENTS" -j 4 -T "$2" \
    -f "$SF_WORK/single.sql@450" -f "$SF_WORK/batch.sql@45" -f "$SF_WORK/jump.sql@1" "$1" \
    >"$SF_WORK/pgbench.$1.log" 2>&1 || { cat "$SF_WORK/pgbench.$1.log"; fail "pgbench on $1 failed"; }
}

setup good "$SQL_FILE"
load good "$SECONDS_RUN"
stats=$(psql_on p1 -d good -At -F ' ' -c "SELECT count(*), count(DISTINCT id) FROM ids")
read -r rows distinct <<<"$stats"
echo "good: $rows IDs in $SECONDS_RUN s from $CLIENTS sessions, $distinct distinct"
[ "$rows" -gt 10000 ] || fail "only $rows IDs issued"
[ "$rows" = "$distinct" ] || fail "$((rows - distinct)) IDs issued twice"
pass "no ID twice among $rows"

# Issue order: each call's start (before) and end (after) as events in the
# order of the one sequence; at each start, the largest ID of the calls
# ended so far must be below the starting call's ID. late_calls TABLE
# counts the calls that break it.
late_calls() {
  psql_on p1 -d good -At <<SQL
SELECT count(*) FROM (
  SELECT kind, id, max(id) FILTER (WHERE kind = 'end') OVER (ORDER BY pos ROWS UNBOUNDED PRECEDING) AS ended_max
  FROM (SELECT before AS pos, 'start' AS kind, id FROM $1 UNION ALL SELECT after, 'end', id FROM $1) events
) e
WHERE kind = 'start' AND ended_max >= id;
SQL
}
late=$(late_calls ids)
[ "$late" = 0 ] || fail "$late calls got an ID below one issued by a call that had returned before they started"
# (The check itself, on a sample: a call that starts after all others
# ended and gets the smallest ID is found.)
psql_on p1 -d good -c "CREATE TABLE sample AS SELECT * FROM ids ORDER BY before LIMIT 2000" \
  -c "INSERT INTO sample (before, id, after) SELECT max(after) + 1, min(id), max(after) + 2 FROM sample"
late=$(late_calls sample)
[ "$late" = 1 ] || fail "the issue-order check does not see a call out of order (it found $late)"
pass "in issue order across all sessions"

# (By the layout's arithmetic, not per-row calls of the decoders, which
# the test portable compares with the extension's.)
bad=$(psql_on p1 -d good -At -c "
  SELECT count(*) FROM ids
  WHERE (id >> 4) & 1023 <> $NODE_ID
     OR (id >> 14) + 1735689600000 > floor(extract(epoch FROM at) * 1000) + 50 + 1")
[ "$bad" = 0 ] || fail "$bad IDs with another node id or a time beyond the drift limit"
jumps=$(grep -A3 'jump.sql' "$SF_WORK/pgbench.good.log" | sed -nE 's/.* ([0-9]+) transactions .*/\1/p' | head -1)
pass "every ID has node $NODE_ID and a time within the drift limit; ${jumps:-?} forced jumps"

# widened GUARD: the SQL file with the sleep in the reserve; with GUARD=no
# also without the guard's lines.
widened() {
  [ "$(grep -c -- "-- the reserve's take" "$SQL_FILE")" = 1 ] || fail "the reserve's take is not the one line this test marks"
  [ "$(grep -c -- '-- guard: ' "$SQL_FILE")" = 4 ] || fail "the guard's lines are not the four this test removes"
  sed "s/-- the reserve's take\$/PERFORM pg_sleep(0.0005);/" "$SQL_FILE" |
    if [ "$1" = no ]; then grep -v -- '-- guard: '; else cat; fi
}
for guard in yes no; do
  db=widened_$guard
  widened "$guard" >"$SF_WORK/$db.sql"
  chmod 644 "$SF_WORK/$db.sql"
  setup "$db" "$SF_WORK/$db.sql" 1 60000
  load "$db" 10
  read -r rows twice <<<"$(psql_on p1 -d "$db" -At -F ' ' -c "SELECT count(*), count(*) - count(DISTINCT id) FROM ids")"
  echo "widened window, guard $guard: $rows IDs in 10 s, $twice issued twice"
  [ "$rows" -gt 1000 ] || fail "only $rows IDs issued with the widened window"
  if [ "$guard" = yes ]; then
    [ "$twice" = 0 ] || fail "with the guard and the widened window $twice IDs were issued twice"
  else
    [ "$twice" -gt 0 ] || fail "without the guard no ID was issued twice: this test does not exercise it"
  fi
done
pass "with the race widened, the guard holds (no ID twice) and the mutant without it issues IDs twice"
