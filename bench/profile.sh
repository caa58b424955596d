#!/usr/bin/env bash
# Where the time of a generator call goes, in a backend of a throwaway cluster
# running the release build (the same build and cluster as bench/run.sh).
#
#   bench/profile.sh [perf|callgrind] [SQL]
#
# perf (the default): samples the backend (perf record -e cpu-clock -g, which
#   works in VMs without hardware counters) while it runs SQL 15 times, and
#   prints the hottest functions. Installs linux-perf from apt if missing.
# callgrind: runs SQL once in single-user mode (postgres --single) under
#   valgrind --tool=callgrind and prints instructions per function:
#   repeatable to the instruction, unlike timings. Installs valgrind if missing.
#
# SQL defaults to the one-session benchmark at N = 1,000,000 (callgrind:
# 100,000) for snowflake_next(); set it to compare, e.g.
#   bench/profile.sh callgrind "SELECT count(x) FROM (SELECT nextval('seq_cache') AS x FROM generate_series(1, 100000)) s"
# Output is kept in bench/results/profile-<date>/.
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)
TOOL=${1:-perf}
case $TOOL in
  perf) N=1000000 ;;
  callgrind) N=100000 ;;
  *) echo "usage: bench/profile.sh [perf|callgrind] [SQL]" >&2; exit 2 ;;
esac
SQL=${2:-"SELECT count(x) FROM (SELECT snowflake_next() AS x FROM generate_series(1, $N)) s"}
OUT="$BENCH/results/profile-$(date -u +%Y-%m-%dT%H%M%SZ)"
mkdir -p "$OUT"

need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "installing $2 (apt)"
  apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$BENCH/lib.sh"
bench_build "$OUT"
# shellcheck source-path=SCRIPTDIR source=../tests/integration/lib.sh
. "$ROOT/tests/integration/lib.sh"
bench_cluster

if [ "$TOOL" = perf ]; then
  need perf linux-perf
  {
    echo "SELECT pg_backend_pid();"
    echo "$SQL;"                      # warm-up
    echo "\\! sleep 0.5"
    for _ in $(seq 1 15); do echo "$SQL;"; done
  } > "$OUT/load.sql"
  psql_on bench -At -f "$OUT/load.sql" > "$OUT/load.out" &
  load=$!
  for _ in $(seq 1 50); do [ -s "$OUT/load.out" ] && break; sleep 0.1; done
  pid=$(head -1 "$OUT/load.out")
  sleep 0.3
  perf record -q -e cpu-clock -F 4999 -g -p "$pid" -o "$OUT/perf.data" -- sleep 3 2>/dev/null
  wait "$load"
  perf report -i "$OUT/perf.data" --no-children --sort dso,sym -g none --stdio > "$OUT/report.txt" 2>/dev/null || true
  grep -E '^ +[0-9]' "$OUT/report.txt" | sed -n 1,40p | tee "$OUT/top.txt"
else
  need valgrind valgrind
  cluster_stop bench
  dir=$(cluster_dir bench)
  echo "$SQL;" > "$OUT/query.sql"
  chown -R postgres:postgres "$OUT"
  # Single-user mode loads shared_preload_libraries like a server does.
  # Only the query's execution is counted (not start-up, shared memory set-up).
  (cd / && as_pg valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
      --toggle-collect=standard_ExecutorRun \
      "$PG_BIN/postgres" --single -D "$dir" -c jit=off postgres < "$OUT/query.sql") \
    > "$OUT/valgrind.log" 2>&1
  callgrind_annotate --inclusive=no "$OUT/callgrind.out" > "$OUT/top.txt" 2>&1 || true
  sed -n '/PROGRAM TOTALS/,+40p' "$OUT/top.txt" | sed 's|/work/[^ ]*/||g'
  echo "(instructions per row: divide by the N of the query)"
fi
cluster_stop bench
rm -rf "$OUT/pg"
echo "profile kept in $OUT"
