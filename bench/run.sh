#!/usr/bin/env bash
# The benchmark suite: snowflake_id against the usual ways to make keys in
# PostgreSQL, in one run, interleaved and repeated, on a throwaway cluster.
#
#   bench/run.sh            quick mode (the default): one repetition, short runs, < 2 min
#   bench/run.sh --quick
#   bench/run.sh --full     7 repetitions of the short runs, 5 of inserts and
#                           pgbench, 3 of the long runs, < 20 min
#   bench/run.sh --pg 18    on another supported PostgreSQL (default 15);
#                           combine with --quick or --full
#
# Writes docs/benchmark.md (medians, ratios, the benchmark targets) and
# docs/benchmark.png (pgbench throughput against clients) for 15, and
# docs/benchmark-pg<NN>.md and .png for another version, and keeps the raw
# numbers in bench/results/<date>/. On 18 the run also compares against
# PostgreSQL 18's own uuidv7(), on a server built with OpenSSL as
# distributions build it ("18-openssl" of scripts/postgres.sh, built on the
# first such run: the wheel that the tests use is built without OpenSSL,
# and its uuidv7() reads /dev/urandom on every call). Generators compared:
#   snowflake   snowflake_next()
#   bigserial   nextval() of a plain sequence (what bigserial uses)
#   cache100    nextval() of a sequence with CACHE 100
#   uuid        gen_random_uuid()
#   uuidv7      uuidv7() (PostgreSQL 18 only)
#   instagram   Instagram's PL/pgSQL next_id() (a sequence, the clock, shifts)
#   select1     the constant 1: the floor (SELECT 1 for one-call transactions,
#               and the one-session query with no generator)
# Benchmarks:
#   1. one session: SELECT count(x) FROM (SELECT <gen> AS x FROM generate_series(1, N)) s,
#      N = 1,000,000 and 10,000,000 (snowflake_id with max_clock_drift = 60s, so
#      it is not throttled); the same query with the constant 1 in place of
#      the generator is the floor (the series and the count), which the
#      report subtracts to give each generator's own cost per call;
#   1b. the throttle: 10,000,000 IDs from a streamed series, with
#      max_clock_drift = 60s and then 10ms, where snowflake_id must keep to
#      the layout's 4,096,000 IDs/s;
#   2. pgbench -M prepared, one call per transaction, 1, 4, 16 and 64 clients;
#   3. INSERT ... SELECT of 1,000,000 rows (250,000 in quick mode) into a
#      table whose primary key defaults to the generator: rows/s and the
#      primary key's size;
#   4. snowflake_next_batch(1000000) in FROM and in the select list, and
#      snowflake_next_batch_array(1000000);
#   5. the criterion benchmark of the pure core (cargo bench --bench core).
#
# The extension is built in release mode with `cargo pgrx package` and run
# from a private copy of the PostgreSQL installation (see bench/lib.sh),
# so the benchmark neither touches nor depends on the extension installed on
# the machine, and other users' installs cannot change it mid-run. Clusters
# come from tests/integration/lib.sh (127.0.0.1, own port, stopped at exit).
# Needs: what scripts/setup.sh installs, and python3 (matplotlib is installed
# into bench/.venv from PyPI on the first run).
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)

MODE=quick
PG_VERSION=15
while [ $# -gt 0 ]; do
  case $1 in
    --quick) MODE=quick ;;
    --full) MODE=full ;;
    --pg) [ $# -ge 2 ] || { echo "usage: bench/run.sh [--quick|--full] [--pg 15|16|17|18|19]" >&2; exit 2; }
      PG_VERSION=$2; shift ;;
    -h | --help) sed -n '2,/^set -e/{/^set -e/!p}' "$0"; exit 0 ;;
    *) echo "usage: bench/run.sh [--quick|--full] [--pg 15|16|17|18|19]" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source-path=SCRIPTDIR source=../scripts/postgres.sh
. "$ROOT/scripts/postgres.sh"
# (15 is Debian's, installed by scripts/setup.sh in bench_build.)
case $PG_VERSION in
  15) BENCH_PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config ;;
  16 | 17 | 19) BENCH_PG_CONFIG=$(install_postgres "$PG_VERSION") ;;
  18) BENCH_PG_CONFIG=$(install_postgres 18-openssl) ;;
  *) echo "bench: unsupported PostgreSQL version '$PG_VERSION' (${SF_PG_VERSIONS[*]})" >&2; exit 2 ;;
esac
export BENCH_PG_CONFIG
REPORT_NAME=benchmark
[ "$PG_VERSION" = 15 ] || REPORT_NAME=benchmark-pg$PG_VERSION

# Ratios are computed per repetition between runs made minutes apart at most,
# and the report gives their median: on a shared 2-core machine, load from
# outside drifts, so more short repetitions beat fewer long ones.
if [ "$MODE" = full ]; then
  ONE_REPS=7      # one session at 1M, batches (each the median of 3 runs)
  REPS=5          # inserts
  LONG_REPS=3     # one session at 10M, the throttle
  PGBENCH_REPS=5
  PGBENCH_SECONDS=3
  LONG_GENS="snowflake bigserial cache100 select1"
  CRITERION_ARGS=(--warm-up-time 2 --measurement-time 4)
  INSERT_ROWS=1000000
else
  ONE_REPS=1      # (each the median of 3 runs)
  REPS=1
  LONG_REPS=1
  PGBENCH_REPS=1
  PGBENCH_SECONDS=1
  LONG_GENS="snowflake bigserial select1"
  CRITERION_ARGS=(--warm-up-time 0.3 --measurement-time 0.7)
  INSERT_ROWS=250000
fi
GENS="snowflake bigserial cache100 uuid instagram"
[ "$PG_VERSION" -ge 18 ] && GENS="$GENS uuidv7"
CLIENTS="1 4 16 64"

STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT="$BENCH/results/$STAMP"
mkdir -p "$OUT"
RAW="$OUT/raw.tsv"
printf 'bench\tgenerator\tparam\trep\tvalue\n' > "$RAW"
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$OUT/run.log"; }
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >> "$RAW"; }

log "mode $MODE; results in $OUT"

# --- build, cluster, schema (bench/lib.sh) --------------------------------------
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$BENCH/lib.sh"
bench_build "$OUT"
# shellcheck source-path=SCRIPTDIR source=../tests/integration/lib.sh
. "$ROOT/tests/integration/lib.sh"
bench_cluster
log "cluster on 127.0.0.1:$PORT, PostgreSQL $(sql_value bench 'SHOW server_version')"

# rotate N WORDS...: the words starting at position N mod count, so each
# generator takes every position in turn over the repetitions.
rotate() {
  local n=$1; shift
  local -a w=("$@")
  local k=$(( n % ${#w[@]} ))
  echo "${w[@]:k}" "${w[@]:0:k}"
}

# timed_ms SQL [WARMUP [K]]: milliseconds SQL took (psql's \timing), in a
# fresh session that first runs WARMUP (untimed), so that catalog caches,
# plans and the first-call set-up of each function are not part of the
# figure. With K, SQL runs K times in that session and the median counts:
# a run of a quarter of a second is easily hit by a pause of the VM.
timed_ms() {
  local sql=$1 warm=${2:-SELECT 1} k=${3:-1}
  local -a args=(-c "$warm" -c '\timing on')
  for _ in $(seq 1 "$k"); do args+=(-c "$sql"); done
  psql_on bench -At "${args[@]}" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' |
    sort -n | awk '{ t[NR] = $1 } END { print t[int((NR + 1) / 2)] }'
}

# drift_settle: wait until snowflake_id's IDs no longer run ahead of the
# clock (earlier runs borrowed milliseconds), so each run starts alike.
drift_settle() {
  local d
  for _ in $(seq 1 200); do
    d=$(sql_value bench "SELECT coalesce(drift_ms, 0) FROM snowflake_stats()")
    [ "$d" -le 0 ] && return 0
    sleep 0.1
  done
}

set_drift() {
  psql_on bench -c "ALTER SYSTEM SET snowflake_id.max_clock_drift = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 0.3
}

one_session() {
  local gen=$1 n=$2 rep=$3 ms k=1
  [ "$gen" = snowflake ] && drift_settle
  [ "$n" -le 1000000 ] && k=3
  ms=$(timed_ms "SELECT count(x) FROM (SELECT $(gen_expr "$gen") AS x FROM generate_series(1, $n)) s" \
               "SELECT count(x) FROM (SELECT $(gen_expr "$gen") AS x FROM generate_series(1, 1000)) s" "$k")
  record one_session "$gen" "$n" "$rep" "$(awk -v n="$n" -v ms="$ms" 'BEGIN { printf "%.0f", n / ms * 1000 }')"
}

# --- 1 and 4: one session, batches -------------------------------------------
log "one session, N = 1,000,000 ($ONE_REPS repetitions) and 10,000,000 ($LONG_REPS; $LONG_GENS), and batches"
# Each generator's 10M run follows its 1M run, so that load from outside the
# benchmark affects both alike.
for rep in $(seq 1 "$ONE_REPS"); do
  for gen in $(rotate "$rep" $GENS select1 batch_from batch_select batch_array); do
    case $gen in
      batch_*)
        case $gen in
          batch_from) sql="SELECT count(x) FROM snowflake_next_batch(%d) x" ;;
          batch_select) sql="SELECT count(x) FROM (SELECT snowflake_next_batch(%d) AS x) s" ;;
          batch_array) sql="SELECT cardinality(snowflake_next_batch_array(%d))" ;;
        esac
        drift_settle
        # shellcheck disable=SC2059
        ms=$(timed_ms "$(printf "$sql" 1000000)" "$(printf "$sql" 1000)" 3)
        record batch "$gen" 1000000 "$rep" "$(awk -v ms="$ms" 'BEGIN { printf "%.0f", 1e6 / ms * 1000 }')" ;;
      *)
        one_session "$gen" 1000000 "$rep"
        if [ "$rep" -le "$LONG_REPS" ] && [[ " $LONG_GENS " == *" $gen "* ]]; then
          one_session "$gen" 10000000 "$rep"
        fi ;;
    esac
  done
done

# --- 1b: the throttle ---------------------------------------------------------
# In the query above PostgreSQL materialises the whole series before the first
# row reaches snowflake_next(), so the statement's rate mixes that phase with
# the issuing. Here the series comes from a set-returning function in a select
# list (ProjectSet), which streams: the statement is nearly all issuing, so its
# rate shows the throttle. First with max_clock_drift = 60s (how fast one
# session issues), then with 10ms, where it must keep to the layout's limit of
# 4,096,000 IDs/s (10,000,000 IDs take at least 2,441 ms minus the 10 ms the
# IDs may run ahead).
log "the throttle: N = 10,000,000 with a streamed series, max_clock_drift 60s, then 10ms ($LONG_REPS repetitions)"
STREAM_SQL="SELECT count(x) FROM (SELECT snowflake_next() AS x FROM (SELECT generate_series(1, %d)) g) s"
stream_run() {
  local name=$1 rep=$2 ms
  drift_settle
  # shellcheck disable=SC2059
  ms=$(timed_ms "$(printf "$STREAM_SQL" 10000000)" "$(printf "$STREAM_SQL" 1000)")
  record stream "$name" 10000000 "$rep" "$(awk -v ms="$ms" 'BEGIN { printf "%.0f", 1e7 / ms * 1000 }')"
}
for rep in $(seq 1 "$LONG_REPS"); do
  stream_run snowflake "$rep"
  set_drift 10ms
  read -r waits0 wait_ms0 < <(sql_value bench "SELECT waits, wait_time_ms FROM snowflake_stats()" | tr '|' ' ')
  stream_run snowflake_throttled "$rep"
  read -r waits1 wait_ms1 < <(sql_value bench "SELECT waits, wait_time_ms FROM snowflake_stats()" | tr '|' ' ')
  record throttle_waits snowflake_throttled 10000000 "$rep" "$((waits1 - waits0))"
  record throttle_wait_ms snowflake_throttled 10000000 "$rep" "$(awk -v a="$wait_ms0" -v b="$wait_ms1" 'BEGIN { printf "%.0f", b - a }')"
  set_drift 60s
done

# --- 3: bulk insert with the default -----------------------------------------
log "INSERT $INSERT_ROWS rows with the generator as the primary key default ($REPS repetitions)"
table_ddl() {
  case $1 in
    uuid | uuidv7) echo "CREATE TABLE ins_$1 (id uuid PRIMARY KEY DEFAULT $(gen_expr "$1"), v int)" ;;
    *) echo "CREATE TABLE ins_$1 (id bigint PRIMARY KEY DEFAULT $(gen_expr "$1"), v int)" ;;
  esac
}
for rep in $(seq 1 "$REPS"); do
  for gen in $(rotate "$rep" $GENS); do
    psql_on bench -c "DROP TABLE IF EXISTS ins_$gen" -c "$(table_ddl "$gen")" -c "CHECKPOINT" 2>/dev/null
    [ "$gen" = snowflake ] && drift_settle
    ms=$(timed_ms "INSERT INTO ins_$gen (v) SELECT g FROM generate_series(1, $INSERT_ROWS) g" "SELECT $(gen_expr "$gen")")
    record insert "$gen" "$INSERT_ROWS" "$rep" "$(awk -v n="$INSERT_ROWS" -v ms="$ms" 'BEGIN { printf "%.0f", n / ms * 1000 }')"
    record pkey_bytes "$gen" "$INSERT_ROWS" "$rep" "$(sql_value bench "SELECT pg_relation_size('ins_${gen}_pkey')")"
    psql_on bench -c "DROP TABLE ins_$gen"
  done
done

# --- 2: pgbench, one call per transaction -----------------------------------
log "pgbench -M prepared, one call per transaction, clients $CLIENTS, ${PGBENCH_SECONDS}s each ($PGBENCH_REPS repetitions)"
for gen in $GENS select1; do
  echo "SELECT $(gen_expr "$gen");" > "$OUT/pgbench_$gen.sql"
done
for rep in $(seq 1 "$PGBENCH_REPS"); do
  for c in $CLIENTS; do
    for gen in $(rotate "$rep" $GENS select1); do
      j=$(( c < 2 ? c : 2 ))
      tps=$(pgbench -h 127.0.0.1 -p "$PORT" -U postgres -n -M prepared -c "$c" -j "$j" \
              -T "$PGBENCH_SECONDS" -f "$OUT/pgbench_$gen.sql" postgres 2>>"$OUT/pgbench.err" |
            sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | tail -1)
      record pgbench "$gen" "$c" "$rep" "${tps:-0}"
    done
  done
done
psql_on bench -x -c "SELECT * FROM snowflake_stats()" > "$OUT/stats.txt"
cluster_stop bench
PG_VERSION_LINE=$("$PG_BIN/postgres" --version)
PG_CONFIGURE=$("$PG_BIN/pg_config" --configure)
rm -rf "$OUT/pg"   # the private PostgreSQL tree (50 MB)

# --- 5: criterion ----------------------------------------------------------------
log "criterion: cargo bench --bench core ${CRITERION_ARGS[*]}"
# Its own target directory: `cargo pgrx package` builds the crate in the same
# profile with other settings, and sharing target/ would rebuild it each run.
export CARGO_TARGET_DIR="$ROOT/target/bench-core"
(cd "$ROOT" && cargo bench --bench core -- "${CRITERION_ARGS[@]}") > "$OUT/criterion.log" 2>&1 ||
  { tail -30 "$OUT/criterion.log"; exit 1; }
for d in "$CARGO_TARGET_DIR"/criterion/issue/*/; do
  name=$(basename "$d")
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["median"]["point_estimate"])' \
    "$d/new/estimates.json" | while read -r ns; do record criterion_ns "$name" 0 1 "$ns"; done
done

# --- report -----------------------------------------------------------------------
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "mode=$MODE"
  echo "cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
  echo "cores=$(nproc)"
  echo "memory=$(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo)"
  echo "kernel=$(uname -r)"
  echo "postgres=$PG_VERSION_LINE"
  if [[ $PG_CONFIGURE == *--with-openssl* ]]; then echo "postgres_build=with OpenSSL"; else echo "postgres_build=without OpenSSL"; fi
  echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
  echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$ROOT" && git diff --quiet -- . ':!docs' 2>/dev/null || echo '+changes')"
} > "$OUT/machine.txt"

VENV="$BENCH/.venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
  log "installing matplotlib into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q matplotlib
fi
"$VENV/bin/python" "$BENCH/report.py" "$OUT" "$ROOT/docs" "$REPORT_NAME"
log "done: docs/$REPORT_NAME.md, docs/$REPORT_NAME.png (raw data in $OUT)"
