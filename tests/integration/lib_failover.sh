# shellcheck shell=bash
# Helpers for the failover tests (failover_wal.sh, failover_recovery.sh,
# failover_pg_auto_failover.sh): a burst that leaves the stored IDs far
# ahead of the clock, and the checks every promoted (or recovered) server
# must pass (promote is in lib.sh). Source it after lib.sh.
# (Named lib_*.sh, so run_all.sh does not take it for a test.)

# The table every failover test writes: IDs from the generator, and where
# each row came from.
FAILOVER_TABLE="CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), src text NOT NULL)"

# max_batch SEQUENCE_BITS DRIFT_MS: the largest snowflake_next_batch() the
# layout and drift limit allow (docs/reference.md).
max_batch() {
  local n=$(( ($2 + 1) * (1 << $1) ))
  [ "$n" -gt 100000000 ] && n=100000000
  echo "$n"
}

# burst NAME SEQUENCE_BITS DRIFT_MS: one maximal batch, which pushes the
# generator up to DRIFT_MS ahead of the clock, stored as rows when it is
# small enough (with 1 sequence bit every pair of the next seconds is then
# taken), then 1000 rows by the column default; all committed. Prints the
# largest stored ID.
burst() {
  local name=$1 n; n=$(max_batch "$2" "$3")
  if [ "$n" -le 200000 ]; then
    psql_on "$name" -c "INSERT INTO t (id, src) SELECT id, 'batch' FROM snowflake_next_batch($n) id"
  else
    # The array form: a set of 20 million rows takes seconds to return,
    # the array about one.
    psql_on "$name" -c "SELECT cardinality(snowflake_next_batch_array($n))" >/dev/null
  fi
  psql_on "$name" -c "INSERT INTO t (src) SELECT 'burst' FROM generate_series(1, 1000)"
  sql_value "$name" "SELECT max(id) FROM t"
}

# ahead_ms NAME ID: how far ID's time lies ahead of NAME's clock, in ms.
ahead_ms() {
  sql_value "$1" "SELECT round(extract(epoch FROM snowflake_timestamp($2) - clock_timestamp()) * 1000)::bigint"
}

# check_resumes_above NAME LABEL OLD_MAX NODE [SECONDS]: the (promoted or
# recovered) server NAME issues IDs above OLD_MAX, the largest ID the old
# primary stored: its first snowflake_next(), then, with SECONDS, 8 pgbench
# clients inserting into t for SECONDS (any duplicate key aborts a client
# and fails the test), else 1000 rows; every new row of node NODE and above
# OLD_MAX, no duplicate in t.
check_resumes_above() {
  local name=$1 label=$2 old_max=$3 node=$4 seconds=${5:-0} first rc=0 out ok=1 tag
  # The rows of this check, apart from those of earlier checks replicated here.
  tag="after $name $(date +%s%N)"
  first=$(sql_value "$name" "SELECT snowflake_next()") || { fail_or_report "$label: snowflake_next() failed" || ok=0; first=0; }
  [ "$first" -gt "$old_max" ] ||
    fail_or_report "$label: first new ID $first is not above $old_max, the largest ID the old primary stored" || ok=0
  if [ "$seconds" -gt 0 ]; then
    out="$SF_WORK/$name.pgbench"
    printf "INSERT INTO t (src) VALUES ('%s');\n" "$tag" > "$SF_WORK/$name.sql"
    pgbench -n -h 127.0.0.1 -p "$(cluster_port "$name")" -U postgres -c 8 -j 2 -T "$seconds" \
      -f "$SF_WORK/$name.sql" postgres > "$out" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] ||
      grep -q "aborted\|duplicate key" "$out"; then
      grep -m3 "duplicate key\|aborted" "$out" || tail -5 "$out"
      fail_or_report "$label: pgbench failed (rc=$rc)" || ok=0
    fi
  else
    psql_on "$name" -c "INSERT INTO t (src) SELECT '$tag' FROM generate_series(1, 1000)" ||
      fail_or_report "$label: inserting 1000 rows failed" || ok=0
  fi
  [ "$(sql_value "$name" "SELECT count(*) FROM t WHERE src = '$tag' AND (id <= $old_max OR snowflake_node(id) <> $node)")" = 0 ] ||
    fail_or_report "$label: new rows with IDs not above $old_max or not of node $node" || ok=0
  [ "$(sql_value "$name" "SELECT count(*) = count(DISTINCT id) FROM t")" = t ] || fail_or_report "$label: duplicate IDs in t" || ok=0
  [ "$ok" = 1 ] || return 0
  pass "$label: first new ID $first > $old_max; $(sql_value "$name" "SELECT count(*) FROM t WHERE src = '$tag'") new rows of node $node, all above, no duplicate"
}

# fail_or_report MESSAGE: fail, or with SF_FAILOVER_REPORT_ONLY=1 print the
# failure and return 1 so that the test goes on with its next check (how
# the cases were shown to fail on the code before the WAL records).
fail_or_report() {
  [ "${SF_FAILOVER_REPORT_ONLY:-}" = 1 ] || fail "$1"
  echo "FAILED (reported, going on): $1"
  return 1
}

# make_sync PRIMARY: synchronous_standby_names = '*' on PRIMARY, and wait
# until its standby is synchronous (set once the standby runs: before, every
# commit would wait for it).
make_sync() {
  psql_on "$1" -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
  for _ in $(seq 1 100); do
    [ "$(sql_value "$1" "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")" = 1 ] && return 0
    sleep 0.1
  done
  fail "the standby of $1 did not become synchronous"
}
