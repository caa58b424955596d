#!/usr/bin/env bash
# Instructions per ID, counted by callgrind: the measure of the generator's
# cost that does not move with the machine's noise.
#
#   bench/instructions.sh                 PostgreSQL 15, every generator
#   bench/instructions.sh --pg 18         another supported version
#   bench/instructions.sh --pg all        15 to 19 in turn
#   bench/instructions.sh --quick         snowflake_next() and the targets' baselines only
#   bench/instructions.sh --edge          only the snowflake type against bigint, and public IDs
#   bench/instructions.sh --registry      also snowflake_next() with its node id from a
#                                         registry against a fixed node id (running servers)
#   bench/instructions.sh --no-check      report, but do not fail on a missed target
#   bench/instructions.sh --installed     no build: the server in PG_BIN (default
#                                         Debian's 15) with the snowflake_id installed
#                                         in it (cargo pgrx install --release), as the
#                                         integration test instructions.sh runs it
#
# Wall-clock figures on this kind of machine swing by 2x from run to run
# (docs/performance.md); the number of instructions a backend executes does
# not. Each generator runs in its own single-user backend (postgres --single,
# the library preloaded from the benchmark's private release build, see
# bench/lib.sh) under valgrind --tool=callgrind, with instructions counted
# only inside exec_simple_query (not start-up or shut-down). The input is
# cut into segments by a marker statement, SELECT pg_sleep(0), and callgrind
# dumps its counts when pg_sleep is entered (--dump-before), so each
# segment's count stands alone:
#   0. warm-up: a few one-call transactions and a short statement (catalog
#      caches, the function's first call, the plan of a PL/pgSQL function);
#   1. T one-call transactions, `SELECT <gen>;` each (T = 20,000);
#   2. one statement over N rows,
#      `SELECT count(x) FROM (SELECT <gen> AS x FROM generate_series(1, N)) s`
#      (N = 1,000,000; 200,000 for gen_random_uuid() and uuidv7(), 20,000
#      for the PL/pgSQL generator, whose calls cost a hundred times more).
# Per one-call transaction = (segment 1 - the same with SELECT 1) / T, and
# per call = (segment 2 - the same with the constant 1) / N. Left out of
# snowflake_next()'s segments: its lease writes (Shared::extend_lease,
# inclusive), which a single-user backend, having no lease worker, makes
# itself once per 200 ms of ID time: their count follows wall time, not
# calls, so a run slowed by valgrind and a busy machine counted more of
# them per call (1.071x clock_timestamp() under two busy loops, where a
# quiet machine measured about 1.01x). The report gives what was left out. Both segments
# include the marker's tail, which is the same for every generator and so
# cancels. The batch forms are reported per ID of their whole statement,
# beside snowflake_next()'s whole statement per row.
#
# Instruction-count targets, checked here and not by a timed test:
#   per one-call transaction, snowflake_next() <= 1.02x clock_timestamp()
#   (PostgreSQL's cheapest volatile function), both over SELECT 1;
#   per call in one statement, snowflake_next() <= 300 instructions over 1.
# A missed target makes the script exit 1 (after the report).
#
# The full run (not --quick) also counts, as --edge alone does, public
# IDs: per call of snowflake_public, snowflake_private and their text forms
# over N/10 rows of a table, over the same count of the ID itself (no
# target: a figure for the docs); and the snowflake type against
# bigint: the same values (N/5 rows, in a scrambled order) in a bigint
# column and in a snowflake column, and the same statement over each, one
# segment each: a predicate on every row (`WHERE id > 5`), a sort, a hash
# aggregate (`DISTINCT`, sorting disabled), an index build, and an insert
# into a table whose primary key (of the type, or bigint) defaults to
# snowflake_next(). Target: per row, each costs at most 1% more on the type
# than on bigint (it runs bigint's own functions: int8gt, btint8cmp and its
# sort support, hashint8).
#
# --registry starts the benchmark cluster itself under valgrind (postmaster
# and backends; a backend's counts go to its own file), twice: with
# snowflake_id.node_id = 1 alone, and with that node id granted by a
# throwaway registry server (snowflake_id.registry; the registry is
# registry/snowflake_registry.sql on a server without the extension). The
# single-user mode above has no lease worker, so no claim. A psql session
# runs the same segments in each; the difference between the two is what
# the registry adds to a call. Nothing is asked of the registry on the hot
# path, so it must be next to nothing: a target too (at most 5 instructions
# more per call, the claimed node id's load, and 60 per transaction, 1%,
# for a server's backend is not quite as repeatable as a single-user one).
#
# Output: a Markdown report on stdout and in bench/results/instructions-<date>/
# (report.md, and the callgrind files of the last version for
# callgrind_annotate). Each version builds the extension (release) first.
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)

VERSIONS=(15)
VERSIONS_GIVEN=0
QUICK=0
EDGE=0
CHECK=1
REGISTRY=0
INSTALLED=0
usage() { echo "usage: bench/instructions.sh [--pg 15|16|17|18|19|all] [--quick|--edge] [--registry] [--no-check] [--installed]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --pg) [ $# -ge 2 ] || usage
      if [ "$2" = all ]; then VERSIONS=(15 16 17 18 19); else VERSIONS=("$2"); fi
      VERSIONS_GIVEN=1
      shift ;;
    --quick) QUICK=1 ;;
    --edge) EDGE=1 ;;
    --registry) REGISTRY=1 ;;
    --no-check) CHECK=0 ;;
    --installed) INSTALLED=1 ;;
    -h | --help) sed -n '2,/^set -e/{/^set -e/!p}' "$0"; exit 0 ;;
    *) usage ;;
  esac
  shift
done

T=${SF_BENCH_TRANSACTIONS:-20000}
N_CHEAP=${SF_BENCH_ROWS:-1000000}
TARGET_TXN_RATIO=1.02
TARGET_CALL=300
TARGET_TYPE_RATIO=1.01
# What a server's backend may vary by between two runs (see --registry).
REGISTRY_SLACK_CALL=5
REGISTRY_SLACK_TXN=60

OUT=${SF_BENCH_OUT:-"$BENCH/results/instructions-$(date -u +%Y-%m-%dT%H%M%SZ)"}
mkdir -p "$OUT"
REPORT="$OUT/report.md"
: > "$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
MISSED=()

need_valgrind() {
  command -v valgrind >/dev/null 2>&1 && command -v callgrind_annotate >/dev/null 2>&1 && return 0
  echo "installing valgrind (apt)"
  apt-get install -y -qq --no-install-recommends valgrind >/dev/null ||
    { echo "bench: valgrind is missing and could not be installed: run scripts/setup.sh (as root)" >&2; exit 1; }
}
need_valgrind

# rows_for GEN: N of the one-statement segment.
rows_for() {
  case $1 in
    uuid | uuidv7) echo $((N_CHEAP / 5)) ;;
    instagram) echo $((N_CHEAP / 50)) ;;
    *) echo "$N_CHEAP" ;;
  esac
}

# expr_of GEN: its SQL expression (bench/lib.sh's gen_expr, plus clock_timestamp()).
expr_of() {
  case $1 in
    clock) echo "clock_timestamp()" ;;
    *) gen_expr "$1" ;;
  esac
}

MARKER="SELECT pg_sleep(0);"
# What a query costs the backend, from the start of its transaction to its
# commit: parsing, analysis, planning, the portal (execution and sending the
# result) and the commit. The binaries are stripped, so exec_simple_query,
# which is static, cannot be named: these are the exported functions it
# calls, none of which calls another of them once the warm-up has run (a
# PL/pgSQL function plans its queries through pg_plan_queries on its first
# calls only; its SPI calls CreateDestReceiver inside PortalRun, whose few
# instructions are left out of its figures). Reading the query text is left out: in single-user mode it is
# read a character at a time, which a server reading from a socket does not
# do, and which would charge a longer function name.
CALLGRIND_OPTS=(--tool=callgrind --collect-atstart=no --dump-before=pg_sleep)
for f in StartTransactionCommand pg_parse_query pg_analyze_and_rewrite_fixedparams \
  pg_plan_queries CreatePortal PortalDefineQuery PortalStart CreateDestReceiver \
  PortalRun PortalDrop CommitTransactionCommand EndCommand; do
  CALLGRIND_OPTS+=(--toggle-collect="$f")
done

# write_input GEN FILE: the segments of one generator (see the header).
write_input() {
  local gen=$1 file=$2 expr n
  expr=$(expr_of "$gen")
  n=$(rows_for "$gen")
  {
    for _ in 1 2 3 4 5; do echo "SELECT $expr;"; done
    echo "SELECT count(x) FROM (SELECT $expr AS x FROM generate_series(1, 100)) s;"
    echo "$MARKER"
    for _ in $(seq 1 "$T"); do echo "SELECT $expr;"; done
    echo "$MARKER"
    echo "SELECT count(x) FROM (SELECT $expr AS x FROM generate_series(1, $n)) s;"
  } > "$file"
}

# write_batch_input FILE: the batch forms, one segment each.
write_batch_input() {
  local file=$1 n=$N_CHEAP
  {
    echo "SELECT count(x) FROM snowflake_next_batch(10) x;"
    echo "SELECT count(x) FROM (SELECT snowflake_next_batch(10) AS x) s;"
    echo "SELECT cardinality(snowflake_next_batch_array(10));"
    echo "$MARKER"
    echo "SELECT count(x) FROM snowflake_next_batch($n) x;"
    echo "$MARKER"
    echo "SELECT count(x) FROM (SELECT snowflake_next_batch($n) AS x) s;"
    echo "$MARKER"
    echo "SELECT cardinality(snowflake_next_batch_array($n));"
  } > "$file"
}

# The statements of the type comparison (see the header): a name, then the
# statement with %t for the table; SET lines before a segment are not part
# of it.
TYPE_STATEMENTS=(
  "a predicate on every row|SELECT count(*) FROM %t WHERE id > 5;"
  "a sort|SELECT count(*) FROM (SELECT id FROM %t ORDER BY id DESC OFFSET 0) s;"
  "a hash aggregate|SELECT count(*) FROM (SELECT DISTINCT id FROM %t) s;"
  "an index build|CREATE INDEX ON %t (id);"
  "an insert into a primary key with DEFAULT snowflake_next()|INSERT INTO %t_keyed (v) SELECT id FROM %t;"
)

# sort_setting STATEMENT: the SET that the statement's segment runs under
# (sorting off for the hash aggregate).
sort_setting() {
  if [[ $1 == *DISTINCT* ]]; then echo "SET enable_sort = off;"; else echo "SET enable_sort = on;"; fi
}

# write_type_input FILE N: the type comparison, a segment per statement and
# type, bigint first. Each segment holds its statement and the SET for the
# next one (the last, a SET too), so every segment has one SET alike.
write_type_input() {
  local file=$1 n=$2 entry stmt t
  local -a order=()
  for entry in "${TYPE_STATEMENTS[@]}"; do
    for t in type_bigint type_snowflake; do order+=("${entry#*|}" "$t"); done
  done
  {
    echo "CREATE TABLE type_bigint (id bigint);"
    # A scrambled order (a multiplicative step modulo N), so that the sort
    # and the index build compare.
    echo "INSERT INTO type_bigint SELECT 252172774628397056 + ((g::bigint * 7919) % $n << 22) FROM generate_series(1, $n) g;"
    echo "CREATE TABLE type_snowflake (id snowflake);"
    echo "INSERT INTO type_snowflake SELECT id FROM type_bigint;"
    echo "CREATE TABLE type_bigint_warm AS SELECT * FROM type_bigint LIMIT 1000;"
    echo "CREATE TABLE type_snowflake_warm AS SELECT * FROM type_snowflake LIMIT 1000;"
    for t in type_bigint type_snowflake type_bigint_warm type_snowflake_warm; do
      echo "CREATE TABLE ${t}_keyed (id ${t#type_} PRIMARY KEY DEFAULT snowflake_next(), v bigint);" | sed 's/_warm PRIMARY/ PRIMARY/'
    done
    echo "VACUUM ANALYZE type_bigint, type_snowflake, type_bigint_warm, type_snowflake_warm;"
    echo "SET work_mem = '1GB';"
    echo "SET maintenance_work_mem = '1GB';"
    for ((i = 0; i < ${#order[@]}; i += 2)); do
      sort_setting "${order[i]}"
      stmt=${order[i]}
      echo "${stmt//'%t'/${order[i + 1]}_warm}"
    done
    sort_setting "${order[0]}"
    for ((i = 0; i < ${#order[@]}; i += 2)); do
      echo "$MARKER"
      stmt=${order[i]}
      echo "${stmt//'%t'/${order[i + 1]}}"
      if [ $((i + 2)) -lt ${#order[@]} ]; then sort_setting "${order[i + 2]}"; else sort_setting ""; fi
    done
  } > "$file"
}

# segment_counts PREFIX: the instruction count of each dump of one process
# (PREFIX.1, PREFIX.2, ..., then the final PREFIX), in order, one per line.
segment_counts() {
  local prefix=$1 k=1
  while [ -f "$prefix.$k" ]; do
    awk '/^summary:/ { print $2 }' "$prefix.$k"
    k=$((k + 1))
  done
  awk '/^summary:/ { print $2 }' "$prefix"
}

# run_single NAME INPUT: INPUT through a single-user backend under callgrind;
# the dumps are $OUT/NAME.cg[.k].
run_single() {
  local name=$1 input=$2 dir
  dir=$(cluster_dir bench)
  rm -f "$OUT/$name".cg*
  chown -R postgres:postgres "$OUT"
  if ! (cd / && as_pg valgrind --callgrind-out-file="$OUT/$name.cg" \
      "${CALLGRIND_OPTS[@]}" "$PG_BIN/postgres" --single -D "$dir" postgres < "$input") > "$OUT/$name.log" 2>&1; then
    tail -20 "$OUT/$name.log"
    echo "bench: the single-user run of $name failed" >&2
    exit 1
  fi
  if grep -q 'ERROR:' "$OUT/$name.log"; then
    grep -m3 'ERROR:' "$OUT/$name.log" >&2
    echo "bench: $name raised an error" >&2
    exit 1
  fi
}

# lease_cost FILE: the instructions of one dump inside the backend's lease
# writes (Shared::extend_lease, inclusive; 0 when it did not run).
lease_cost() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    awk '/Shared>::extend_lease \[/ { gsub(",", "", $1); s += $1 } END { printf "%d\n", s }'
}

# per_unit A B UNITS: (A - B) / UNITS with one decimal.
per_unit() { awk -v a="$1" -v b="$2" -v u="$3" 'BEGIN { printf "%.1f", (a - b) / u }'; }
# fmt_int X: X rounded, with thousands separated by commas.
fmt_int() {
  awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); sign = ""
    if (s ~ /^-/) { sign = "-"; s = substr(s, 2) }
    out = ""
    while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    print sign s out }'
}

declare -A TXN CALL WHOLE LEASE_TXN LEASE_CALL

measure_version() {
  local v=$1 gens gen seg
  if [ "$INSTALLED" = 1 ]; then
    [ "$(pg_major "$PG_BIN/pg_config")" = "$v" ] ||
      { echo "bench: --installed measures the server in PG_BIN ($PG_BIN), not $v" >&2; exit 2; }
  else
    export BENCH_PG_CONFIG
    case $v in
      15) BENCH_PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config ;;
      16 | 17 | 18 | 19) BENCH_PG_CONFIG=$(install_postgres "$v") ;;
      *) echo "bench: unsupported PostgreSQL version '$v'" >&2; exit 2 ;;
    esac
    bench_build "$OUT"
  fi
  bench_cluster
  cluster_stop bench
  if [ "$EDGE" = 1 ]; then
    measure_type "$v"
    measure_public "$v"
    rm -rf "$(cluster_dir bench)"
    [ "$INSTALLED" = 1 ] || rm -rf "$OUT/pg"
    return
  fi

  gens=(select1 clock snowflake)
  [ "$QUICK" = 1 ] || gens+=(bigserial cache100 uuid instagram)
  [ "$QUICK" = 1 ] || [ "$v" -lt 18 ] || gens+=(uuidv7)
  for gen in "${gens[@]}"; do
    echo "counting $gen on $v"
    write_input "$gen" "$OUT/$gen.sql"
    run_single "$gen" "$OUT/$gen.sql"
    mapfile -t seg < <(segment_counts "$OUT/$gen.cg")
    [ "${#seg[@]}" -eq 3 ] || { echo "bench: $gen gave ${#seg[@]} segments, not 3" >&2; exit 1; }
    if [ "$gen" = snowflake ]; then
      LEASE_TXN[$v]=$(lease_cost "$OUT/$gen.cg.2")
      LEASE_CALL[$v]=$(lease_cost "$OUT/$gen.cg")
      seg[1]=$((seg[1] - LEASE_TXN[$v]))
      seg[2]=$((seg[2] - LEASE_CALL[$v]))
    fi
    TXN[$v.$gen]=${seg[1]}
    CALL[$v.$gen]=${seg[2]}
  done
  if [ "$QUICK" = 0 ]; then
    echo "counting the batch forms on $v"
    write_batch_input "$OUT/batch.sql"
    run_single batch "$OUT/batch.sql"
    mapfile -t seg < <(segment_counts "$OUT/batch.cg")
    [ "${#seg[@]}" -eq 4 ] || { echo "bench: the batch run gave ${#seg[@]} segments, not 4" >&2; exit 1; }
    WHOLE[$v.batch_from]=$(per_unit "${seg[1]}" 0 "$N_CHEAP")
    WHOLE[$v.batch_select]=$(per_unit "${seg[2]}" 0 "$N_CHEAP")
    WHOLE[$v.batch_array]=$(per_unit "${seg[3]}" 0 "$N_CHEAP")
  fi
  WHOLE[$v.snowflake]=$(per_unit "${CALL[$v.snowflake]}" 0 "$N_CHEAP")

  report_version "$v" "${gens[@]}"
  [ "$QUICK" = 1 ] || measure_type "$v"
  [ "$QUICK" = 1 ] || measure_public "$v"
  [ "$REGISTRY" = 0 ] || measure_registry "$v"
  cluster_stop bench
  rm -rf "$(cluster_dir bench)"
  [ "$INSTALLED" = 1 ] || rm -rf "$OUT/pg"
}

label_of() {
  case $1 in
    select1) echo "the floor: \`SELECT 1\` / the constant 1" ;;
    clock) echo "\`clock_timestamp()\` (cheapest volatile built-in)" ;;
    snowflake) echo "\`snowflake_next()\`" ;;
    bigserial) echo "\`nextval()\` (bigserial)" ;;
    cache100) echo "\`nextval()\`, CACHE 100" ;;
    uuid) echo "\`gen_random_uuid()\`" ;;
    uuidv7) echo "\`uuidv7()\`" ;;
    instagram) echo "Instagram's PL/pgSQL \`next_id()\`" ;;
  esac
}

report_version() {
  local v=$1 gen txn call ratio met_txn met_call; shift
  local base_txn=${TXN[$v.select1]} base_call=${CALL[$v.select1]}
  say ""
  say "**PostgreSQL $("$PG_BIN/postgres" --version | sed 's/.*) //')**, T = $(fmt_int "$T") one-call transactions, one statement of N rows"
  say ""
  say "| generator | per one-call transaction, over \`SELECT 1\` | per call in one statement, over the constant 1 | N |"
  say "|---|---|---|---|"
  for gen in "$@"; do
    if [ "$gen" = select1 ]; then
      say "| $(label_of "$gen") | $(fmt_int "$(per_unit "$base_txn" 0 "$T")") in all | $(fmt_int "$(per_unit "$base_call" 0 "$N_CHEAP")") in all | $(fmt_int "$N_CHEAP") |"
      continue
    fi
    txn=$(per_unit "${TXN[$v.$gen]}" "$base_txn" "$T")
    # The floor of a statement of N rows, scaled to the generator's N.
    call=$(awk -v c="${CALL[$v.$gen]}" -v b="$base_call" -v n="$(rows_for "$gen")" -v nb="$N_CHEAP" \
      'BEGIN { printf "%.1f", (c - b * n / nb) / n }')
    say "| $(label_of "$gen") | $(fmt_int "$txn") | $(fmt_int "$call") | $(fmt_int "$(rows_for "$gen")") |"
    eval "TXN_$gen=$txn CALL_$gen=$call"
  done
  say ""
  say "(Left out of \`snowflake_next()\`'s figures: its lease writes, one per 200 ms of ID time, so as many as the run's wall time allows: $(fmt_int "${LEASE_TXN[$v]}") instructions in the transactions and $(fmt_int "${LEASE_CALL[$v]}") in the statement.)"
  if [ "$QUICK" = 0 ]; then
    say ""
    say "| whole statement of N = $(fmt_int "$N_CHEAP") IDs | instructions per ID |"
    say "|---|---|"
    say "| \`SELECT count(x) FROM (SELECT snowflake_next() AS x FROM generate_series(1, N)) s\` | $(fmt_int "${WHOLE[$v.snowflake]}") |"
    say "| \`SELECT count(x) FROM snowflake_next_batch(N) x\` | $(fmt_int "${WHOLE[$v.batch_from]}") |"
    say "| \`SELECT count(x) FROM (SELECT snowflake_next_batch(N) AS x) s\` | $(fmt_int "${WHOLE[$v.batch_select]}") |"
    say "| \`SELECT cardinality(snowflake_next_batch_array(N))\` | $(fmt_int "${WHOLE[$v.batch_array]}") |"
  fi
  ratio=$(awk -v a="$TXN_snowflake" -v b="$TXN_clock" 'BEGIN { printf "%.3f", a / b }')
  met_txn=$(awk -v r="$ratio" -v t="$TARGET_TXN_RATIO" 'BEGIN { print (r <= t) ? "yes" : "**no**" }')
  met_call=$(awk -v c="$CALL_snowflake" -v t="$TARGET_CALL" 'BEGIN { print (c <= t) ? "yes" : "**no**" }')
  say ""
  say "| instruction-count target | measured | met |"
  say "|---|---|---|"
  say "| per one-call transaction, \`snowflake_next()\` <= ${TARGET_TXN_RATIO}x \`clock_timestamp()\` | ${ratio}x | $met_txn |"
  say "| per call in one statement, \`snowflake_next()\` <= $TARGET_CALL | $(fmt_int "$CALL_snowflake") | $met_call |"
  [ "$met_txn" = yes ] || MISSED+=("$v: per transaction ${ratio}x clock_timestamp()")
  [ "$met_call" = yes ] || MISSED+=("$v: per call $CALL_snowflake instructions")
}

# measure_type V: the snowflake type against bigint (see the header), in
# one single-user backend; reports and checks the target.
measure_type() {
  local v=$1 n=$((N_CHEAP / 5)) k=0 entry name bigint typed ratio met seg
  echo "counting the snowflake type against bigint on $v"
  write_type_input "$OUT/type.sql" "$n"
  run_single type "$OUT/type.sql"
  mapfile -t seg < <(segment_counts "$OUT/type.cg")
  local segments=$((1 + 2 * ${#TYPE_STATEMENTS[@]})) i file
  [ "${#seg[@]}" -eq "$segments" ] ||
    { echo "bench: the type run gave ${#seg[@]} segments, not $segments" >&2; exit 1; }
  # Less the lease writes of snowflake_next() in the inserts (one per 200 ms
  # of ID time: their count follows the run's wall time, see the header).
  for ((i = 1; i < segments; i++)); do
    file="$OUT/type.cg.$((i + 1))"
    [ "$i" = $((segments - 1)) ] && file="$OUT/type.cg"
    seg[i]=$((seg[i] - $(lease_cost "$file")))
  done
  say ""
  say "| the snowflake type against bigint, $(fmt_int "$n") rows | bigint, instructions per row | snowflake, per row | ratio | at most ${TARGET_TYPE_RATIO}x |"
  say "|---|---|---|---|---|"
  for entry in "${TYPE_STATEMENTS[@]}"; do
    name=${entry%%|*}
    bigint=${seg[$((1 + 2 * k))]} typed=${seg[$((2 + 2 * k))]}
    ratio=$(awk -v a="$typed" -v b="$bigint" 'BEGIN { printf "%.4f", a / b }')
    met=$(awk -v r="$ratio" -v t="$TARGET_TYPE_RATIO" 'BEGIN { print (r <= t) ? "yes" : "**no**" }')
    say "| $name (\`${entry#*|}\`) | $(per_unit "$bigint" 0 "$n") | $(per_unit "$typed" 0 "$n") | ${ratio}x | $met |"
    [ "$met" = yes ] || MISSED+=("$v: the snowflake type costs ${ratio}x bigint in $name")
    k=$((k + 1))
  done
}

# The public-ID conversions counted, over the floor: a label, then the
# expression over the table pub_in (x an ID, t its text form).
PUBLIC_EXPRS=(
  "the floor: the ID itself|x"
  "\`snowflake_public(id, 1)\`|snowflake_public(x, 1)"
  "\`snowflake_private(public_id, 1)\`|snowflake_private(x, 1)"
  "\`snowflake_public_text(id, 1)\`|snowflake_public_text(x, 1)"
  "\`snowflake_private(public_text)\`|snowflake_private(t)"
)

# measure_public V: instructions per public-ID conversion (see the header).
measure_public() {
  local v=$1 n=$((N_CHEAP / 10)) entry k=0 floor count seg
  echo "counting public IDs on $v"
  {
    echo "CREATE TABLE pub_in AS SELECT 252172774628397056 + (g::bigint << 22) AS x, snowflake_public_text(252172774628397056 + (g::bigint << 22), 1) AS t FROM generate_series(1, $n) g;"
    for entry in "${PUBLIC_EXPRS[@]}"; do echo "SELECT count(${entry#*|}) FROM pub_in WHERE x < 252172774628397056 + (10 << 22);"; done
    for entry in "${PUBLIC_EXPRS[@]}"; do
      echo "$MARKER"
      echo "SELECT count(${entry#*|}) FROM pub_in;"
    done
  } > "$OUT/public.sql"
  run_single public "$OUT/public.sql"
  mapfile -t seg < <(segment_counts "$OUT/public.cg")
  [ "${#seg[@]}" -eq $((1 + ${#PUBLIC_EXPRS[@]})) ] ||
    { echo "bench: the public-ID run gave ${#seg[@]} segments, not $((1 + ${#PUBLIC_EXPRS[@]}))" >&2; exit 1; }
  floor=${seg[1]}
  say ""
  say "| public IDs, $(fmt_int "$n") rows | instructions per call, over the floor |"
  say "|---|---|"
  for entry in "${PUBLIC_EXPRS[@]}"; do
    k=$((k + 1))
    if [ "$k" = 1 ]; then
      say "| ${entry%%|*} | $(fmt_int "$(per_unit "$floor" 0 "$n")") per row in all |"
      continue
    fi
    count=$(per_unit "${seg[$k]}" "$floor" "$n")
    say "| ${entry%%|*} | $(fmt_int "$count") |"
  done
}

# measure_registry V: snowflake_next() on a running server, node id fixed
# and then claimed from a registry, counted in the backend of a psql session.
measure_registry() {
  local v=$1 mode conf gen pid seg
  local -A R_TXN R_CALL
  echo "counting snowflake_next() with and without a registry on $v"
  cluster_init registry "$(free_port)" "shared_preload_libraries = ''"
  cluster_start registry
  psql_on registry -f "$ROOT/registry/snowflake_registry.sql" > "$OUT/registry-install.log"
  psql_on registry -c "CREATE ROLE fleet LOGIN IN ROLE snowflake_registry_client" > /dev/null
  conf="$(cluster_dir bench)/postgresql.conf"
  cp "$conf" "$OUT/postgresql.conf.fixed"
  for mode in fixed registry; do
    cp "$OUT/postgresql.conf.fixed" "$conf"
    if [ "$mode" = registry ]; then
      # (Node id 1 as before, now granted by the registry: the lease file
      # of the fixed run names it, and another one would hold the server.)
      # (Through the registry's socket: an unverified TCP connection is not
      # used.)
      echo "snowflake_id.registry = 'host=$(cluster_dir registry).sock port=$(cluster_port registry) user=fleet dbname=postgres'" >> "$conf"
    fi
    rm -f "$OUT"/srv.cg*
    chown -R postgres:postgres "$OUT"
    (cd / && as_pg valgrind --callgrind-out-file="$OUT/srv.cg.%p" \
      "${CALLGRIND_OPTS[@]}" "$PG_BIN/postgres" -D "$(cluster_dir bench)") > "$OUT/server-$mode.log" 2>&1 &
    for _ in $(seq 1 600); do
      "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$(cluster_port bench)" && break
      sleep 0.2
    done
    "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$(cluster_port bench)" ||
      { tail -20 "$OUT/server-$mode.log"; echo "bench: the server under valgrind ($mode) did not start in 2 minutes" >&2; exit 1; }
    # The first ID waits for the claim (up to a few seconds under valgrind).
    for _ in $(seq 1 60); do
      psql_on bench -Atc "SELECT snowflake_next()" > /dev/null 2>&1 && break
      sleep 1
    done
    psql_on bench -Atc "SELECT snowflake_next()" > /dev/null ||
      { echo "bench: the server under valgrind ($mode) issued no ID within a minute" >&2; exit 1; }
    for gen in select1 snowflake; do
      write_input "$gen" "$OUT/$gen.sql"
      sed -i '1i SELECT pg_backend_pid();' "$OUT/$gen.sql"
      psql_on bench -At -f "$OUT/$gen.sql" > "$OUT/$mode-$gen.out"
      pid=$(head -1 "$OUT/$mode-$gen.out")
      # The backend writes its last dump as it exits, after psql has gone.
      for _ in $(seq 1 300); do
        grep -qs '^summary:' "$OUT/srv.cg.$pid" && break
        sleep 0.2
      done
      grep -qs '^summary:' "$OUT/srv.cg.$pid" ||
        { echo "bench: no final callgrind dump from backend $pid ($mode, $gen) after a minute" >&2; exit 1; }
      mapfile -t seg < <(segment_counts "$OUT/srv.cg.$pid")
      [ "${#seg[@]}" -eq 3 ] || { echo "bench: $mode $gen gave ${#seg[@]} segments, not 3" >&2; exit 1; }
      R_TXN[$mode.$gen]=${seg[1]}
      R_CALL[$mode.$gen]=${seg[2]}
    done
    [ "$mode" = fixed ] || psql_on bench -Atc "SELECT snowflake_node(snowflake_next())" > "$OUT/registry-node.out"
    cluster_stop bench
    wait || true
  done
  cp "$OUT/postgresql.conf.fixed" "$conf"
  cluster_stop registry
  rm -rf "$(cluster_dir registry)"
  say ""
  say "| \`snowflake_next()\` on a running server (psql session) | per one-call transaction, over \`SELECT 1\` | per call in one statement, over the constant 1 |"
  say "|---|---|---|"
  local -A txn call
  for mode in fixed registry; do
    txn[$mode]=$(per_unit "${R_TXN[$mode.snowflake]}" "${R_TXN[$mode.select1]}" "$T")
    call[$mode]=$(per_unit "${R_CALL[$mode.snowflake]}" "${R_CALL[$mode.select1]}" "$N_CHEAP")
    say "| $([ "$mode" = fixed ] && echo "\`snowflake_id.node_id = 1\`" || echo "node id $(cat "$OUT/registry-node.out") granted by \`snowflake_id.registry\`") |" \
      "$(fmt_int "${txn[$mode]}") | $(fmt_int "${call[$mode]}") |"
  done
  local dtxn dcall met
  dtxn=$(awk -v a="${txn[registry]}" -v b="${txn[fixed]}" 'BEGIN { printf "%.0f", a - b }')
  dcall=$(awk -v a="${call[registry]}" -v b="${call[fixed]}" 'BEGIN { printf "%.0f", a - b }')
  met=$(awk -v t="$dtxn" -v c="$dcall" -v st="$REGISTRY_SLACK_TXN" -v sc="$REGISTRY_SLACK_CALL" \
    'BEGIN { print (t <= st && c <= sc) ? "yes" : "**no**" }')
  say ""
  say "| target | measured | met |"
  say "|---|---|---|"
  say "| the registry adds at most $REGISTRY_SLACK_CALL instructions per call and $REGISTRY_SLACK_TXN per transaction | $dcall per call, $dtxn per transaction | $met |"
  [ "$met" = yes ] || MISSED+=("$v: the registry adds $dcall instructions per call, $dtxn per transaction")
}

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$BENCH/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../tests/integration/lib.sh
. "$ROOT/tests/integration/lib.sh"

if [ "$INSTALLED" = 1 ] && [ "$VERSIONS_GIVEN" = 0 ]; then
  VERSIONS=("$(pg_major "$PG_BIN/pg_config")")
fi

say "# Instructions per ID (callgrind)"
say ""
say "Measured $(date -u '+%Y-%m-%d %H:%M') UTC by \`bench/instructions.sh$([ "$QUICK" = 1 ] && echo " --quick")$([ "$EDGE" = 1 ] && echo " --edge")$([ "$REGISTRY" = 1 ] && echo " --registry")\`, $([ "$INSTALLED" = 1 ] && echo "the build installed in $PG_BIN/.., source tree at ")commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src || echo "+changes"), $(valgrind --version)."
for v in "${VERSIONS[@]}"; do
  measure_version "$v"
done
echo "report kept in $REPORT"
if [ "$CHECK" = 1 ] && [ "${#MISSED[@]}" -gt 0 ]; then
  printf 'bench: target missed: %s\n' "${MISSED[@]}" >&2
  exit 1
fi
