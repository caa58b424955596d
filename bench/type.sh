#!/usr/bin/env bash
# The snowflake type against bigint as a primary key, side by side in one
# run: what a table keyed by the type costs to fill and to store.
#
#   bench/type.sh                 release build of this tree, PostgreSQL 15, 5 repetitions
#   bench/type.sh --pg 18         another supported version
#   bench/type.sh --reps 3        fewer repetitions
#   bench/type.sh --installed     no build: the server in PG_BIN (default
#                                 Debian's 15) with snowflake_id installed in it
#
# Per repetition, in turn for each key type (the order alternates from one
# repetition to the next, so drift of the machine's load falls on both):
#   1. bulk: CREATE TABLE (id <type> PRIMARY KEY DEFAULT snowflake_next(),
#      v int), CHECKPOINT, then INSERT ... SELECT of N rows (1,000,000) timed:
#      rows/s; then the sizes of the primary key and of the table;
#   2. single rows: pgbench -M prepared, `INSERT INTO t (v) VALUES (1)`, 4
#      clients, 5 seconds, into a fresh table: transactions/s.
# The report gives each median and the median of the per-repetition ratios
# (type / bigint). Sizes must be equal: the type is stored as bigint is
# (8 bytes, by value) and its index is bigint's (int8_ops). Instruction
# counts of comparisons, sorts, hashing and index builds on the type against
# bigint: bench/instructions.sh (the full run).
#
# Output: bench/results/type-<date>/report.md (and raw.tsv), printed too.
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)

PG_VERSION=15
REPS=5
INSTALLED=0
ROWS=${SF_BENCH_ROWS:-1000000}
usage() { echo "usage: bench/type.sh [--pg 15|16|17|18|19] [--reps N] [--installed]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --pg) [ $# -ge 2 ] || usage; PG_VERSION=$2; shift ;;
    --reps) [ $# -ge 2 ] || usage; REPS=$2; shift ;;
    --installed) INSTALLED=1 ;;
    -h | --help) sed -n '2,/^set -e/{/^set -e/!p}' "$0"; exit 0 ;;
    *) usage ;;
  esac
  shift
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || usage

OUT="$BENCH/results/type-$(date -u +%Y-%m-%dT%H%M%SZ)"
mkdir -p "$OUT"
RAW="$OUT/raw.tsv"
printf 'bench\ttype\trep\tvalue\n' > "$RAW"
record() { printf '%s\t%s\t%s\t%s\n' "$@" >> "$RAW"; }
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$BENCH/lib.sh"
if [ "$INSTALLED" = 0 ]; then
  case $PG_VERSION in
    15) BENCH_PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config ;;
    16 | 17 | 18 | 19) BENCH_PG_CONFIG=$(install_postgres "$PG_VERSION") ;;
    *) echo "bench: unsupported PostgreSQL version '$PG_VERSION'" >&2; exit 2 ;;
  esac
  export BENCH_PG_CONFIG
  bench_build "$OUT"
fi
# shellcheck source-path=SCRIPTDIR source=../tests/integration/lib.sh
. "$ROOT/tests/integration/lib.sh"
bench_cluster
log "cluster on 127.0.0.1:$PORT, PostgreSQL $(sql_value bench 'SHOW server_version'); $REPS repetitions, results in $OUT"

# timed_insert TABLE: the INSERT of ROWS rows, in ms (psql's \timing).
timed_insert() {
  psql_on bench -At -c '\timing on' -c "INSERT INTO $1 (v) SELECT g FROM generate_series(1, $ROWS) g" |
    sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}

# drift_settle: wait until the IDs no longer run ahead of the clock (an
# earlier run borrowed milliseconds), so each run starts alike.
drift_settle() {
  for _ in $(seq 1 200); do
    [ "$(sql_value bench "SELECT coalesce(drift_ms, 0) FROM snowflake_stats()")" -le 0 ] && return 0
    sleep 0.1
  done
}

echo "INSERT INTO keyed (v) VALUES (1);" > "$OUT/pgbench_insert.sql"
for rep in $(seq 1 "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="bigint snowflake"; else order="snowflake bigint"; fi
  for type in $order; do
    psql_on bench -q -c "DROP TABLE IF EXISTS keyed" \
      -c "CREATE TABLE keyed (id $type PRIMARY KEY DEFAULT snowflake_next(), v int)" -c "CHECKPOINT"
    drift_settle
    ms=$(timed_insert keyed)
    record insert_rows_per_s "$type" "$rep" "$(awk -v n="$ROWS" -v ms="$ms" 'BEGIN { printf "%.0f", n / ms * 1000 }')"
    record pkey_bytes "$type" "$rep" "$(sql_value bench "SELECT pg_relation_size('keyed_pkey')")"
    record table_bytes "$type" "$rep" "$(sql_value bench "SELECT pg_relation_size('keyed')")"
    psql_on bench -q -c "DROP TABLE keyed" \
      -c "CREATE TABLE keyed (id $type PRIMARY KEY DEFAULT snowflake_next(), v int)" -c "CHECKPOINT"
    tps=$(pgbench -h 127.0.0.1 -p "$PORT" -U postgres -n -M prepared -c 4 -j 2 -T 5 \
            -f "$OUT/pgbench_insert.sql" postgres 2>>"$OUT/pgbench.err" |
          sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | tail -1)
    record pgbench_insert_tps "$type" "$rep" "${tps:-0}"
    log "rep $rep $type: insert $ms ms, pgbench ${tps:-0} tps"
  done
done
psql_on bench -q -c "DROP TABLE IF EXISTS keyed"
version_line=$("$PG_BIN/postgres" --version)
cluster_stop bench
[ "$INSTALLED" = 1 ] || rm -rf "$OUT/pg"

python3 - "$RAW" "$OUT/report.md" "$version_line" "$ROWS" "$(git -C "$ROOT" rev-parse --short HEAD)" <<'PY'
import csv, statistics, sys
raw, report, version, rows, commit = sys.argv[1:]
data = {}
for r in csv.DictReader(open(raw), delimiter="\t"):
    data.setdefault(r["bench"], {}).setdefault(r["type"], {})[int(r["rep"])] = float(r["value"])
labels = {
    "insert_rows_per_s": f"bulk INSERT of {int(rows):,} rows, rows/s",
    "pgbench_insert_tps": "single-row INSERT, pgbench 4 clients, transactions/s",
    "pkey_bytes": f"primary key after {int(rows):,} rows, bytes",
    "table_bytes": f"table after {int(rows):,} rows, bytes",
}
lines = [f"# The snowflake type against bigint as a primary key",
         "",
         f"{version}, commit {commit}, {len(data['insert_rows_per_s']['bigint'])} repetitions, "
         "alternating order; medians, and the median of the per-repetition ratios.",
         "",
         "| measure | bigint | snowflake | snowflake / bigint |",
         "|---|---|---|---|"]
for key, label in labels.items():
    b, s = data[key]["bigint"], data[key]["snowflake"]
    ratios = [s[k] / b[k] for k in b if k in s and b[k]]
    lines.append(f"| {label} | {statistics.median(b.values()):,.0f} | {statistics.median(s.values()):,.0f} "
                 f"| {statistics.median(ratios):.3f} |")
same_size = all(data[k]["bigint"] == data[k]["snowflake"] for k in ("pkey_bytes", "table_bytes"))
lines += ["", "Sizes equal in every repetition: " + ("yes" if same_size else "**no**")]
open(report, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if same_size else 1)
PY
echo "report kept in $OUT/report.md"
