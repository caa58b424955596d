#!/usr/bin/env bash
# The cost of the lease in the WAL, on a primary with a
# synchronous streaming standby (synchronous_standby_names = '*'), with
# snowflake_id.lease_sync off and then on:
#   1. one session at full speed: 10,000,000 snowflake_next() in one query:
#      IDs/s, lease records written (per second), bytes of WAL per million
#      IDs (the query writes no other WAL);
#   2. pgbench -M prepared, SELECT snowflake_next(), 8 clients, 5 s, five
#      paired repetitions (off, on): transactions/s and the median of the
#      per-repetition ratios on/off;
#   3. the first ID after a pause (the lease has run out and must be
#      extended): median and largest of 20, in ms.
# Prints a table; raw output in bench/results/<date>-wal/.
#
#   bench/wal.sh [--pg NN]     (default 15)
# Needs what scripts/setup.sh installs; builds like bench/run.sh (release,
# a private copy of the server).
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)
PG_VERSION=15
while [ $# -gt 0 ]; do
  case $1 in
    --pg) PG_VERSION=$2; shift ;;
    *) echo "usage: bench/wal.sh [--pg NN]" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=lib.sh
. "$BENCH/lib.sh"
BENCH_PG_CONFIG=$(bash "$ROOT/scripts/pg_config.sh" "$PG_VERSION")
OUT="$BENCH/results/$(date -u +%Y-%m-%dT%H%M%SZ)-wal"
mkdir -p "$OUT"
bench_build "$OUT"
# shellcheck source=../tests/integration/lib.sh
. "$ROOT/tests/integration/lib.sh"
# shellcheck source=../tests/integration/lib_failover.sh
. "$ROOT/tests/integration/lib_failover.sh"

cluster_init p "$(free_port)" "snowflake_id.node_id = 1" \
  "max_wal_size = '4GB'" "checkpoint_timeout = '30min'"
cluster_start p
psql_on p -c "CREATE EXTENSION snowflake_id" -c "
CREATE FUNCTION pause_then_next(n int) RETURNS SETOF float8 LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz;
BEGIN
  FOR i IN 1..n LOOP
    PERFORM pg_sleep(0.3);
    t0 := clock_timestamp();
    PERFORM snowflake_next();
    RETURN NEXT extract(epoch FROM clock_timestamp() - t0) * 1000;
  END LOOP;
END \$\$"
cluster_basebackup s "$(free_port)" p
cluster_start s
make_sync p
echo "primary on $(cluster_port p), synchronous standby on $(cluster_port s), $("$PG_BIN/postgres" --version)"

set_sync() {
  psql_on p -c "ALTER SYSTEM SET snowflake_id.lease_sync = $1" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 0.5
}

one_session() {
  local lsn0 w0 t0 t1 lsn1 w1
  lsn0=$(sql_value p "SELECT pg_current_wal_insert_lsn()")
  w0=$(sql_value p "SELECT lease_writes FROM snowflake_stats()")
  t0=$(now_ms)
  sql_value p "SELECT count(x) FROM (SELECT snowflake_next() AS x FROM generate_series(1, 10000000)) s" >/dev/null
  t1=$(now_ms)
  lsn1=$(sql_value p "SELECT pg_current_wal_insert_lsn()")
  w1=$(sql_value p "SELECT lease_writes FROM snowflake_stats()")
  sql_value p "SELECT format('%s IDs/s, %s lease records (%s/s), %s bytes of WAL per million IDs',
      round(1e7 / ($t1 - $t0) * 1000), $w1 - $w0, round(($w1 - $w0) / (($t1 - $t0) / 1000.0), 1),
      round(pg_wal_lsn_diff('$lsn1', '$lsn0') / 10.0))"
}

tps() {
  printf 'SELECT snowflake_next();\n' > "$OUT/next.sql"
  pgbench -n -M prepared -h 127.0.0.1 -p "$(cluster_port p)" -U postgres -c 8 -j 2 -T 5 -f "$OUT/next.sql" postgres 2>&1 |
    tee -a "$OUT/pgbench.log" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}

pause() {
  sql_value p "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 3) || ' ms median, ' || round(max(x)::numeric, 3) || ' ms largest' FROM pause_then_next(20) x"
}

declare -A SESSION PAUSE
for mode in off on; do
  set_sync "$mode"
  SESSION[$mode]=$(one_session)
  PAUSE[$mode]=$(pause)
done
ratios=()
for rep in 1 2 3 4 5; do
  set_sync off; off=$(tps)
  set_sync on; on=$(tps)
  echo "pgbench repetition $rep: off $off tps, on $on tps"
  ratios+=("$(python3 -c "print(round($on / $off, 3))")")
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 3p)
{
  echo "| lease_sync | one session, 10M IDs | first ID after a pause |"
  echo "|---|---|---|"
  echo "| off | ${SESSION[off]} | ${PAUSE[off]} |"
  echo "| on | ${SESSION[on]} | ${PAUSE[on]} |"
  echo
  echo "pgbench SELECT snowflake_next(), 8 clients: on/off ratios ${ratios[*]}, median $median"
} | tee "$OUT/summary.md"
