#!/usr/bin/env bash
# The portable edition (portable/snowflake_id_portable.sql, docs/portable.md)
# on a server that does not load the extension, installed and used by roles
# without superuser:
#   - installed by a role that owns only its database, and installed again
#     (an upgrade) without losing the configuration or the generator's state;
#   - a plain role issues IDs as a column default with EXECUTE alone, and
#     cannot touch the sequences or the configuration; every error carries
#     its SQLSTATE and a hint (no node id, a changed layout, an epoch in
#     the future or unreadable, a batch out of range, a standby);
#   - its decoding gives what the extension's gives, argument for argument,
#     errors included (when the extension is installed in this PostgreSQL);
#   - a crash that loses the WAL of IDs already handed out (a transaction
#     that returned a batch to its client and never committed), and a
#     standby promoted without that WAL: the pair comes back below them
#     (the case is real), and the first IDs after are above them;
#   - a crash of one backend (the postmaster stays); a READ ONLY
#     transaction (25006, no lock left); a database dropped and restored
#     from a dump under its name (a new incarnation);
#   - the clock stepped back: within the drift limit IDs continue from the
#     last; far behind, calls fail at once with 58000, and failing calls do
#     not push the generator ahead of the clock.
# SF_PORTABLE_QUICK=1 (scripts/test.sh sets it on 16 to 19, where 15 has
# run all of it) stops after the comparison with the extension: install,
# IDs, privileges, errors and decoding.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

SQL_FILE=$(cd "$(dirname "$0")/../.." && pwd)/portable/snowflake_id_portable.sql
faketime_init

port=$(free_port)
# wal_writer_delay 10 s: the WAL of a transaction that does not commit stays
# in memory long enough for the crash below to lose it.
cluster_init p1 "$port" "shared_preload_libraries = ''" "wal_writer_delay = '10s'" \
  "wal_level = replica" "max_wal_senders = 4"
cluster_start_faked p1 || fail "cluster did not start"
psql_on p1 <<'SQL'
CREATE ROLE app_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
CREATE ROLE app_user LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB;
CREATE DATABASE app OWNER app_owner;
SQL
owner() { psql_on p1 -U app_owner -d app "$@"; }
user() { psql_on p1 -U app_user -d app "$@"; }
# expect_error ROLE SQLSTATE SQL [HINT-ERE]: SQL as ROLE fails with SQLSTATE
# and a hint (matching HINT-ERE when given).
expect_error() {
  local out
  out=$(psql -X -h 127.0.0.1 -p "$port" -U "$1" -d app -v VERBOSITY=verbose -c "$3" 2>&1) &&
    fail "$3 (as $1) succeeded: $out"
  [ "$(sqlstate_of "$out")" = "$2" ] || fail "$3 (as $1): expected SQLSTATE $2, got: $out"
  if [ "$2" != 42501 ]; then
    grep -Eq "^HINT:  .*${4:-}" <<<"$out" || fail "$3 (as $1): no hint${4:+ matching $4}: $out"
  fi
}

owner -f "$SQL_FILE" >/dev/null
[ "$(owner -At -c "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")" = f ] || fail "app_owner is a superuser"
pass "installed by app_owner, who is not a superuser"

expect_error app_user 55000 "SELECT snowflake_next()" "Give this database a node id"
# (Checked on every call: a setting of the session's cannot skip it, as
# it skipped the first call's checks in earlier versions.)
PGOPTIONS="-c snowflake_portable.session_started=on" expect_error app_user 55000 "SELECT snowflake_next()" "Give this database a node id"
owner -c "UPDATE snowflake_portable.config SET node_id = 7" -c "GRANT CREATE ON DATABASE app TO app_user"
user <<'SQL'
CREATE SCHEMA mine;
CREATE TABLE mine.orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), at timestamptz DEFAULT clock_timestamp());
INSERT INTO mine.orders DEFAULT VALUES;
INSERT INTO mine.orders DEFAULT VALUES;
INSERT INTO mine.orders (id) SELECT snowflake_next_batch(5);
INSERT INTO mine.orders (id) SELECT unnest(snowflake_next_batch_array(3));
SQL
bad=$(user -At -c "
  SELECT count(*) FILTER (WHERE snowflake_node(id) <> 7 OR abs(extract(epoch FROM snowflake_timestamp(id) - at)) > 5)
       + count(*) FILTER (WHERE id <= prev)
  FROM (SELECT id, at, lag(id) OVER (ORDER BY at, id) AS prev FROM mine.orders) o")
[ "$(user -At -c "SELECT count(*) FROM mine.orders")" = 10 ] || fail "not 10 rows"
[ "$bad" = 0 ] || fail "$bad IDs with another node, a time far from the row's, or out of order"
[ "$(user -At -c "SELECT max(id) - min(id) FROM (SELECT snowflake_next_batch(5) id) b")" = 4 ] ||
  fail "a batch of 5 is not 5 consecutive IDs"
pass "a plain role issues IDs (defaults, batches) with node 7 and the time of the row"

expect_error app_user 42501 "SELECT nextval('snowflake_portable.pair')"
expect_error app_user 42501 "SELECT setval('snowflake_portable.pair', 1)"
expect_error app_user 42501 "UPDATE snowflake_portable.config SET node_id = 8"
expect_error app_user 42501 "SELECT snowflake_portable.reserve(1, 0, false, 0, 10, 12, 5000, false, NULL)"
expect_error app_user 42501 "SELECT pg_advisory_unlock_all(), setval('snowflake_portable.guard', 0)"
pass "a plain role can touch neither the sequences nor the configuration nor the internal functions"

expect_error app_owner 55000 "UPDATE snowflake_portable.config SET sequence_bits = 11" "Change only node_id"
expect_error app_owner 55000 "UPDATE snowflake_portable.config SET epoch = '2024-01-01'" "Change only node_id"
expect_error app_owner 22023 "UPDATE snowflake_portable.config SET node_id = NULL, epoch = '2999-01-01'" "in the past"
expect_error app_owner 22007 "UPDATE snowflake_portable.config SET epoch = 'yesterday'" "Write it like"
expect_error app_owner 22023 "UPDATE snowflake_portable.config SET node_id = 1024" "from 0 to 1023"
expect_error app_owner 22023 "UPDATE snowflake_portable.config SET max_clock_drift_ms = -1" "0 to 3600000"
expect_error app_user 22023 "SELECT snowflake_next_batch(0)" "Ask for 1 to"
expect_error app_user 22023 "SELECT snowflake_next_batch(100000001)" "Ask for 1 to"
owner -c "UPDATE snowflake_portable.config SET node_id = 9" -c "UPDATE snowflake_portable.config SET node_id = 7"
pass "configuration errors: a changed layout or epoch after IDs, a future or unreadable epoch, a node id out of range, a batch out of range"

# The largest batch (what fits in max_clock_drift_ms + 1 milliseconds) is
# issued also when the pair stands in the middle of a millisecond (right
# after a single call): it starts at the next one (before, it spanned a
# millisecond more and failed with 54000).
psql_on p1 -c "CREATE DATABASE edge OWNER app_owner"
psql_on p1 -U app_owner -d edge -f "$SQL_FILE" >/dev/null
psql_on p1 -U app_owner -d edge -c "UPDATE snowflake_portable.config SET node_id = 7, sequence_bits = 4, max_clock_drift_ms = 2"
out=$(psql_on p1 -U app_owner -d edge -At -c "
  DO \$\$ DECLARE ids bigint[]; BEGIN
    FOR i IN 1..20 LOOP
      PERFORM snowflake_next();
      ids := snowflake_next_batch_array(48);
      IF cardinality(ids) <> 48 OR (ids[48] >> 14) - (ids[1] >> 14) > 2 THEN RAISE EXCEPTION 'batch %: %', i, ids; END IF;
    END LOOP;
  END \$\$" -c "SELECT 'done'" 2>&1) || fail "the largest batch after a single call: $out"
grep -q done <<<"$out" || fail "the largest batch after a single call: $out"
pass "the largest batch (48 IDs under 4 sequence bits and a 2 ms limit) right after a single call"

before=$(user -At -c "SELECT snowflake_next()")
owner -f "$SQL_FILE" >/dev/null
[ "$(owner -At -c "SELECT node_id FROM snowflake_portable.config")" = 7 ] || fail "a second install lost the node id"
after=$(user -At -c "SELECT snowflake_next()")
[ "$after" -gt "$before" ] || fail "after a second install the IDs went back ($after after $before)"
pass "installed again (an upgrade): the node id and the generator kept"

# Decoding: the same answers as the extension's, when it is installed here.
if [ -f "$("$PG_BIN/pg_config" --pkglibdir)/snowflake_id.so" ]; then
  port2=$(free_port)
  cluster_init ext "$port2" "snowflake_id.node_id = 3"
  cluster_start ext || fail "the extension's cluster did not start"
  psql_on ext -c "CREATE EXTENSION snowflake_id"
  psql_on ext -c "CREATE DATABASE portable"
  psql_on ext -d portable -f "$SQL_FILE" >/dev/null
  compare() {
    local a b
    # (An error compares by its SQLSTATE: the messages differ in words.)
    a=$(psql_on ext -At -v VERBOSITY=verbose -c "$1" 2>&1) || a="ERROR $(sqlstate_of "$a")"
    b=$(psql_on ext -d portable -At -v VERBOSITY=verbose -c "$1" 2>&1) || b="ERROR $(sqlstate_of "$b")"
    [ "$a" = "$b" ] || fail "$1: the extension says '$a', the portable edition '$b'"
  }
  # The answers, one query a line, from each in one session.
  queries="$SF_WORK/decode.sql"
  for tz in UTC Asia/Kolkata America/New_York; do
    echo "SET TimeZone = '$tz';"
    for args in "'2025-01-01', 10, 12" "'2010-11-04 01:42:54.657+00', 10, 12" "'2020-06-30 12:00+05:30', 5, 8" \
                "'2025-01-01'::timestamptz, 10, 12" "'2025-01-01 00:00:00Z', 0, 28" "'2025-01-01', 27, 1"; do
      for id in 0 1 252172774628397056 9223372036854775807; do
        echo "SELECT * FROM snowflake_decode($id, $args);"
        echo "SELECT snowflake_timestamp($id, $args), snowflake_node($id, $args), snowflake_sequence($id, $args);"
      done
      echo "SELECT snowflake_from_timestamp('2025-06-04 05:06:07.089+00', $args);"
    done
  done >"$queries"
  a=$(psql_on ext -At -f "$queries")
  b=$(psql_on ext -d portable -At -f "$queries")
  [ "$(wc -l <<<"$a")" -ge 150 ] || fail "the decoding queries gave $(wc -l <<<"$a") lines"
  [ "$a" = "$b" ] || fail "decoding differs: $(diff <(echo "$a") <(echo "$b") | head -5)"
  for bad in "SELECT snowflake_decode(-1, '2025-01-01', 10, 12)" "SELECT snowflake_timestamp(1, '2025-01-01', 20, 12)" \
             "SELECT snowflake_timestamp(1, 'noon', 10, 12)" "SELECT snowflake_timestamp(1, '2025-02-30', 10, 12)" \
             "SELECT snowflake_from_timestamp('2024-01-01', '2025-01-01', 10, 12)" \
             "SELECT snowflake_from_timestamp('infinity', '2025-01-01', 10, 12)" \
             "SELECT snowflake_id_span('1 month', 10, 12)" "SELECT snowflake_id_span('-1 s', 10, 12)" \
             "SELECT snowflake_id_span('1.5 ms', 10, 12)" "SELECT snowflake_id_span('100 years', 10, 12)"; do
    compare "$bad"
  done
  compare "SELECT snowflake_id_span('1 day', 10, 12), snowflake_id_span('90 min', 5, 8), snowflake_id_span('1 day'), snowflake_from_timestamp('2026-01-01 00:00+00')"
  compare "SELECT snowflake_timestamp(252172774628397056), snowflake_node(252172774628397056), snowflake_sequence(252172774628397056), (snowflake_decode(252172774628397056)).ts"
  cluster_stop ext
  pass "decoding, from_timestamp and id_span give the extension's answers and SQLSTATEs in three time zones"
else
  echo "(the extension is not installed in $PG_BIN: the comparison with it skipped)"
fi

if [ "${SF_PORTABLE_QUICK:-}" = 1 ]; then
  echo "(SF_PORTABLE_QUICK=1: the standby, crash, promotion and clock cases left out)"
  exit 0
fi

# A standby refuses; the crash and the promotion below.
port3=$(free_port)
cluster_basebackup s1 "$port3" p1
cluster_start_faked s1 || fail "the standby did not start"
wait_for_replay s1 p1
out=$(psql -X -h 127.0.0.1 -p "$port3" -U app_user -d app -v VERBOSITY=verbose -c "SELECT snowflake_next()" 2>&1) &&
  fail "a standby issued an ID"
[ "$(sqlstate_of "$out")" = 25006 ] && grep -q "^HINT:  .*primary" <<<"$out" || fail "the standby's refusal: $out"
pass "a standby refuses with 25006 and a hint"

# Sixteen IDs a millisecond and a 20 s drift limit: a batch of 160,000
# reaches 10 s ahead of the clock, as a burst may.
psql_on p1 -c "CREATE DATABASE burst OWNER app_owner"
psql_on p1 -U app_owner -d burst -f "$SQL_FILE" >/dev/null
psql_on p1 -U app_owner -d burst -c "UPDATE snowflake_portable.config SET node_id = 7, sequence_bits = 4, max_clock_drift_ms = 20000"
psql_on p1 -U app_owner -d burst -c "SELECT snowflake_next()" >/dev/null
wait_for_replay s1 p1
cluster_stop s1

# lost_batch NAME: in a transaction that never commits, a batch 10 s ahead
# handed to the client; prints its largest ID once the client has it.
lost_batch() {
  local out="$SF_WORK/lost.$1"
  psql -X -h 127.0.0.1 -p "$port" -U app_owner -d burst -At \
    -c "BEGIN" -c "SELECT max(id) FROM snowflake_next_batch(160000) id" -c "SELECT pg_sleep(600)" >"$out" 2>&1 &
  for _ in $(seq 1 300); do grep -Eq '^[0-9]+$' "$out" && break; sleep 0.1; done
  grep -E '^[0-9]+$' "$out" | head -1 || { cat "$out" >&2; fail "the batch of $1 failed"; }
}
# after_loss LABEL NAME: on NAME, the lease came back below the lost batch
# (its record was never flushed: else the case shows nothing), and the next
# IDs are above the batch.
after_loss() {
  local lease first
  lease=$(psql_on "$2" -U app_owner -d burst -At -c "SELECT coalesce(pg_sequence_last_value('snowflake_portable.lease'), -1)")
  [ "$lease" -lt $((lost >> 14)) ] ||
    fail "$1: the lease ($lease) did not come back below the lost batch: the case shows nothing"
  first=$(psql_on "$2" -d burst -At -c "SELECT min(id) FROM (SELECT snowflake_next() AS id UNION ALL SELECT snowflake_next_batch(100)) i")
  [ "$first" -gt "$lost" ] || fail "$1: the ID $first after it is not above the lost batch's $lost: issued twice"
  pass "$1: the lease came back $(( (lost >> 14) - lease )) ms below IDs already handed out; the next IDs are above them"
}

# Committed IDs, a crash, and the clock 30 s behind at the restart: the
# recovered lease (its record flushed by the commit) keeps every new ID
# above them; calls wait for the clock (58000) rather than go below.
psql_on p1 -U app_owner -d burst -c "CREATE TABLE kept (id bigint PRIMARY KEY DEFAULT snowflake_next())" \
  -c "UPDATE snowflake_portable.config SET max_clock_drift_ms = 5000"
psql_on p1 -U app_owner -d burst -c "INSERT INTO kept SELECT snowflake_next_batch(1000)" -c "INSERT INTO kept DEFAULT VALUES"
kept=$(psql_on p1 -d burst -At -c "SELECT max(id) FROM kept")
cluster_kill9 p1
clock_set -30
cluster_start_faked p1 || fail "p1 did not restart with its clock 30 s behind"
out=$(psql -X -h 127.0.0.1 -p "$port" -U app_owner -d burst -v VERBOSITY=verbose -At -c "SELECT snowflake_next()" 2>&1) &&
  { [ "$out" -gt "$kept" ] || fail "30 s behind after a crash: $out is not above the committed $kept"; }
[ -n "$(sqlstate_of "$out")" ] && { [ "$(sqlstate_of "$out")" = 58000 ] || fail "30 s behind after a crash: $out"; }
clock_set +0
out=$(psql_on p1 -U app_owner -d burst -At -c "SELECT snowflake_next()")
[ "$out" -gt "$kept" ] || fail "after a crash the ID $out is not above the committed $kept"
pass "committed IDs, a crash, the clock 30 s behind at the restart: no ID below them (58000 until the clock is back)"
psql_on p1 -U app_owner -d burst -c "UPDATE snowflake_portable.config SET max_clock_drift_ms = 20000"

lost=$(lost_batch crash)
[ -n "$lost" ] || fail "the batch did not reach its client"
cluster_kill9 p1
cluster_start_faked p1 || fail "p1 did not restart after the crash"
after_loss "crash" p1

# A crash in place: one backend dies, the postmaster stays and resets every
# backend (restart_after_crash, the default). Its start time, so the
# incarnation, is unchanged; the unlogged pair is reset all the same.
started=$(psql_on p1 -At -c "SELECT pg_postmaster_start_time()")
lost=$(lost_batch "crash in place")
victim=$(psql_on p1 -At -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()")
[ -n "$victim" ] || fail "the session holding the lost batch is not found"
kill -9 "$victim"
for _ in $(seq 1 300); do
  # (Up again once a new session sees the pair reset by the recovery.)
  [ "$(psql_on p1 -U app_owner -d burst -At -c "SELECT pg_sequence_last_value('snowflake_portable.pair') IS NULL" 2>/dev/null)" = t ] && break
  sleep 0.1
done
[ "$(psql_on p1 -At -c "SELECT pg_postmaster_start_time()")" = "$started" ] ||
  fail "the postmaster restarted: this is not the crash in place"
after_loss "a crash in place (one backend killed, the postmaster stayed)" p1

# A READ ONLY transaction fails with 25006 and leaves no lock behind, with
# a reserve to make, right after a database's first reserve (which left
# the guard odd in earlier versions, and the READ ONLY call then kept the
# lock), and again.
psql_on p1 -c "CREATE DATABASE ro OWNER app_owner"
psql_on p1 -U app_owner -d ro -f "$SQL_FILE" >/dev/null
psql_on p1 -U app_owner -d ro -c "UPDATE snowflake_portable.config SET node_id = 7" -c "SELECT snowflake_next()" >/dev/null
for _ in 1 2; do
  out=$(psql -X -h 127.0.0.1 -p "$port" -U app_owner -d ro -v VERBOSITY=verbose \
    -c "SELECT pg_sleep(0.01)" -c "BEGIN READ ONLY" -c "SELECT snowflake_next()" -c "ROLLBACK" \
    -c "SELECT 'locks ' || count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()" 2>&1) || true
  [ "$(sqlstate_of "$out")" = 25006 ] || fail "snowflake_next() in a READ ONLY transaction: $out"
  grep -q "locks 0" <<<"$out" || fail "a READ ONLY transaction left an advisory lock held: $out"
done
psql_on p1 -U app_owner -d ro -At -c "SET lock_timeout = '5s'" -c "SELECT snowflake_next()" >/dev/null ||
  fail "after a READ ONLY transaction the next call did not issue"
pass "a READ ONLY transaction: 25006, no lock left behind"

# A database dropped and restored from a dump under its name (same server,
# same start): the pair's file is another, so a new incarnation, and the
# first ID is above every ID issued after the dump (here a batch 10 s
# ahead of the clock), though the dump's generator lies before them.
psql_on p1 -c "CREATE DATABASE rst OWNER app_owner"
psql_on p1 -U app_owner -d rst -f "$SQL_FILE" >/dev/null
psql_on p1 -U app_owner -d rst -c "UPDATE snowflake_portable.config SET node_id = 7, sequence_bits = 4, max_clock_drift_ms = 20000" \
  -c "SELECT snowflake_next()" >/dev/null
as_pg "$PG_BIN/pg_dump" -h 127.0.0.1 -p "$port" -U postgres -Fc -f "$SF_WORK/rst.dump" rst
after_dump=$(psql_on p1 -U app_owner -d rst -At -c "SELECT max(id) FROM snowflake_next_batch(160000) id")
psql_on p1 -c "DROP DATABASE rst" -c "CREATE DATABASE rst OWNER app_owner"
as_pg "$PG_BIN/pg_restore" -h 127.0.0.1 -p "$port" -U postgres -d rst "$SF_WORK/rst.dump"
first=$(psql_on p1 -U app_owner -d rst -At -c "SELECT snowflake_next()")
[ "$first" -gt "$after_dump" ] ||
  fail "restored from a dump under its name, the database issued $first, below $after_dump issued after the dump"
pass "a database dropped and restored from a dump under its name: its first ID is above those issued after the dump"

# The promotion: the standby stopped before the batch, so its WAL never
# reaches it; the primary dies; the standby is promoted.
lost=$(lost_batch promotion)
cluster_kill9 p1
cluster_conf s1 "primary_conninfo = ''"
cluster_start_faked s1 || fail "the standby did not start"
promote s1
after_loss "promotion of a standby that lacks the batch's WAL" s1

# The clock stepped back, on the promoted server.
# (Its first call after the promotion moved past the clock plus the drift
# limit: wait until the IDs are back at the clock.)
psql_on s1 -d app -c "UPDATE snowflake_portable.config SET max_clock_drift_ms = 3000" -U app_owner
for _ in $(seq 1 100); do
  [ "$(psql_on s1 -U app_user -d app -At -c "SELECT snowflake_timestamp(snowflake_next()) <= clock_timestamp()")" = t ] && break
  sleep 0.1
done
a=$(psql_on s1 -U app_user -d app -At -c "SELECT snowflake_next()")
clock_set -2
b=$(psql_on s1 -U app_user -d app -At -c "SELECT snowflake_next()")
[ "$b" -gt "$a" ] || fail "2 s behind (within the 3 s limit) the ID went back"
pass "the clock 2 s behind, within the limit: IDs continue from the last"
clock_set -1h
start=$(now_ms)
out=$(psql -X -h 127.0.0.1 -p "$port3" -U app_user -d app -v VERBOSITY=verbose -c "SELECT snowflake_next()" 2>&1) &&
  fail "an hour behind, an ID was issued"
[ $(( $(now_ms) - start )) -lt 5000 ] || fail "the failing call did not fail at once"
[ "$(sqlstate_of "$out")" = 58000 ] && grep -q "behind the last issued ID" <<<"$out" &&
  grep -q "^HINT:  .*max_clock_drift_ms" <<<"$out" || fail "an hour behind: $out"
pair_before=$(psql_on s1 -U app_owner -d app -At -c "SELECT pg_sequence_last_value('snowflake_portable.pair')")
failed=$(psql -X -h 127.0.0.1 -p "$port3" -U app_user -d app -At \
  -c "DO \$\$ DECLARE n int := 0; BEGIN FOR i IN 1..200 LOOP BEGIN PERFORM snowflake_next(); EXCEPTION WHEN sqlstate '58000' THEN n := n + 1; END; END LOOP; RAISE NOTICE 'failed %', n; END \$\$" 2>&1)
pair_after=$(psql_on s1 -U app_owner -d app -At -c "SELECT pg_sequence_last_value('snowflake_portable.pair')")
grep -q "failed 200" <<<"$failed" || fail "200 calls an hour behind: $failed"
[ $((pair_after - pair_before)) -le 1 ] || fail "200 failing calls moved the pair by $((pair_after - pair_before))"
clock_set +0
c=$(psql_on s1 -U app_user -d app -At -c "SELECT snowflake_next()")
[ "$c" -gt "$b" ] || fail "after the clock came back the ID went back"
pass "an hour behind: 58000 at once with a hint; 200 failing calls moved the pair by $((pair_after - pair_before)); back on time, IDs continue"
