#!/usr/bin/env bash
# Many cores: how issuing scales when many sessions issue at once, every
# generator reachable here side by side in one run, on one server version.
#
#   bench/many_core.sh                       build (release) for PostgreSQL 18, full matrix
#   bench/many_core.sh --reduced             bulk at 1, 2, 4, 8, 16 sessions for snowflake_id
#                                            (1, 4, 16 for the others), pgbench at 16 and 64
#                                            clients: fits a 10-minute slot on a lent machine
#   bench/many_core.sh --server NAME=TREE    no build: a PostgreSQL installation TREE with a
#                                            snowflake_id in it (repeatable: "before" and
#                                            "after" builds side by side, each its own cluster)
#   bench/many_core.sh --threads NAME=PROG   also the pure core at 1 to 16 threads, PROG being
#                                            the compiled bench/threads.rs (repeatable)
#   bench/many_core.sh --seconds S --reps N --rows R --out DIR
#   bench/many_core.sh --parts one,bulk --clients "16" --sessions "1 2" --snowflake-only --thread-ms 500
#                                            a part of the matrix: which tables, which client
#                                            and session counts, and no generator but
#                                            snowflake_next() and the floor
#
# What it measures (one table each, Markdown, printed last and written to
# DIR/report.md; every single figure in DIR/raw.csv):
#   1. one call per transaction: pgbench -M prepared, `SELECT <generator>;`,
#      at 16 and 64 clients (full: 1 to 64), transactions per second, and
#      the ratio to `SELECT 1` of the same run (the floor);
#   2. bulk: `SELECT count(x) FROM (SELECT <generator> AS x FROM
#      generate_series(1, R)) s` in each of N sessions started together
#      (pgbench -t 1, which connects every client before it starts any),
#      IDs per second in all. Each snowflake_id measurement starts with the
#      drift drained (snowflake_stats().drift_ms at or below 0), so that it
#      measures the generator, not the throttle; max_clock_drift is 60s, so
#      that no run of this size is throttled;
#   3. primary-key inserts: one-row INSERTs whose key comes from its
#      default, pgbench at 16 and 64 clients, synchronous_commit = off,
#      inserts per second, and the primary key's bytes per row after the
#      runs; for snowflake_next() also the table hash-partitioned by its key
#      (the recipe in docs/performance.md);
#   4. with --threads: the pure generator from 1 to 16 threads, in a tight
#      loop and with other work between calls (--thread-ms each).
# Figures are the mean of --reps repetitions (default 2); the builds given
# with --server alternate within each repetition (first one first, then the
# other order), so that a slow moment of the machine falls on both.
#
# pgEdge's snowflake, in the issue's table, comes from a build of its
# public source that no package registry serves: it is not here.
#
# As root, the servers run as `nobody` (PostgreSQL refuses root). Needs
# about 4 GB of memory per server. Nothing here is a test: figures are read
# by people (docs/performance.md), never compared by CI.
set -euo pipefail

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)
MODE=full SECONDS_PER_RUN=5 REPS=2 ROWS=1000000 OUT_DIR="" PARTS=one,bulk,insert,threads
ONLY_SF=no CLIENTS_ARG="" SESSIONS_ARG="" THREAD_MS=1000
declare -a SERVERS=() THREADS=()
while [ $# -gt 0 ]; do
  case $1 in
    --reduced) MODE=reduced ;;
    --server) SERVERS+=("$2"); shift ;;
    --threads) THREADS+=("$2"); shift ;;
    --seconds) SECONDS_PER_RUN=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --rows) ROWS=$2; shift ;;
    --out) OUT_DIR=$2; shift ;;
    --parts) PARTS=$2; shift ;;
    --clients) CLIENTS_ARG=$2; shift ;;
    --sessions) SESSIONS_ARG=$2; shift ;;
    --snowflake-only) ONLY_SF=yes ;;
    --thread-ms) THREAD_MS=$2; shift ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
OUT_DIR=${OUT_DIR:-$ROOT/bench/results/many-core-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT_DIR"
WORK=$(mktemp -d /tmp/sf_many_core.XXXXXX)
chmod 755 "$WORK"

if [ "$MODE" = full ]; then
  CLIENTS="1 2 4 8 16 32 64"; BULK_SF="1 2 4 8 16"; BULK_OTHER="1 2 4 8 16"
else
  CLIENTS="16 64"; BULK_SF="1 2 4 8 16"; BULK_OTHER="1 4 16"
fi
INSERT_CLIENTS="16 64"
[ -n "$CLIENTS_ARG" ] && CLIENTS=$CLIENTS_ARG
[ -n "$SESSIONS_ARG" ] && BULK_SF=$SESSIONS_ARG && BULK_OTHER=$SESSIONS_ARG
part() { [[ ",$PARTS," == *",$1,"* ]]; }
CORES=$(nproc)

# Without --server: build this tree (release) into a private copy of the
# server, as bench/run.sh does.
if [ ${#SERVERS[@]} -eq 0 ]; then
  # shellcheck source=lib.sh
  BENCH_PG_CONFIG=${BENCH_PG_CONFIG:-$(. "$ROOT/scripts/postgres.sh" && pg_config_for 18)}
  . "$BENCH/lib.sh"
  bench_build "$OUT_DIR"
  SERVERS=("snowflake_id=$(cd "$PG_BIN/.." && pwd)")
fi

# Runs a command as the servers' user: `nobody` when we are root.
as_server() {
  if [ "$(id -u)" = 0 ]; then
    (cd / && setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@")
  else
    (cd / && "$@")
  fi
}
[ "$(id -u)" = 0 ] && chown 65534:65534 "$WORK"

declare -A BIN PORT
STARTED=()
cleanup() {
  for name in "${STARTED[@]}"; do
    as_server "${BIN[$name]}/pg_ctl" -D "$WORK/$name" -m immediate stop >/dev/null 2>&1 || true
    cp "$WORK/server-$name.log" "$OUT_DIR/" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_server NAME TREE: initdb, settings, start, schema.
start_server() {
  local name=$1 tree=$2 dir="$WORK/$1"
  BIN[$name]=$tree/bin
  PORT[$name]=$(free_port)
  as_server "$tree/bin/initdb" -D "$dir" -U postgres -A trust --no-sync >/dev/null
  mkdir -p "$dir.sock"; [ "$(id -u)" = 0 ] && chown 65534:65534 "$dir.sock"
  cat >>"$dir/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = ${PORT[$name]}
unix_socket_directories = '$dir.sock'
shared_preload_libraries = 'snowflake_id'
snowflake_id.node_id = 1
snowflake_id.max_clock_drift = '60s'
max_connections = 200
shared_buffers = '2GB'
work_mem = '256MB'
max_wal_size = '16GB'
checkpoint_timeout = '1h'
autovacuum = off
jit = off
max_parallel_workers_per_gather = 0
EOF
  # (The log in $WORK, which the server's user may write; copied at exit.)
  as_server "$tree/bin/pg_ctl" -D "$dir" -l "$WORK/server-$name.log" -w -t 60 start >/dev/null
  STARTED+=("$name")
  sql "$name" >/dev/null <<'SQL'
CREATE EXTENSION snowflake_id;
CREATE SEQUENCE seq_plain;
CREATE SEQUENCE seq_cache CACHE 100;
SQL
}

sql() { local name=$1; shift; "${BIN[$name]}/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${PORT[$name]}" -U postgres -d postgres -At "$@"; }

# pgbench_tps NAME CLIENTS ARGS...: the tps pgbench reports (without the
# initial connection time).
pgbench_tps() {
  local name=$1 clients=$2; shift 2
  local jobs=$(( clients < CORES ? clients : CORES ))
  "${BIN[$name]}/pgbench" -n -h 127.0.0.1 -p "${PORT[$name]}" -U postgres -c "$clients" -j "$jobs" "$@" postgres 2>&1 |
    tee -a "$OUT_DIR/pgbench.log" | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}

# drain NAME: wait until snowflake_id's drift is at or below 0.
drain() {
  local name=$1 drift
  for _ in $(seq 1 1200); do
    drift=$(sql "$name" -c "SELECT coalesce(drift_ms, 0) FROM snowflake_stats()")
    [ "$drift" -le 0 ] && return 0
    sleep 0.05
  done
  echo "drift did not drain on $name" >&2; return 1
}

RAW=$OUT_DIR/raw.csv
echo "kind,server,generator,n,rep,value" > "$RAW"
record() { echo "$1,$2,$3,$4,$5,$6" >> "$RAW"; }

# The generators: label and SQL expression. snowflake_next() is measured
# on every server; the others on the first only (they do not depend on
# the build).
declare -a OTHER_LABELS=("nextval()" "nextval() CACHE 100" "gen_random_uuid()")
declare -a OTHER_EXPRS=("nextval('seq_plain')" "nextval('seq_cache')" "gen_random_uuid()")

names=()
for s in "${SERVERS[@]}"; do
  start_server "${s%%=*}" "${s#*=}"
  names+=("${s%%=*}")
done
FIRST=${names[0]}
VERSION_NUM=$(sql "$FIRST" -c "SHOW server_version_num")
if [ "$VERSION_NUM" -ge 180000 ]; then
  OTHER_LABELS+=("uuidv7()"); OTHER_EXPRS+=("uuidv7()")
fi
# The primary-key tables of the insert runs (made in the first repetition).
declare -a INS_LABELS=("snowflake_next()" "snowflake_next() in 16 hash partitions" "bigserial" "nextval() CACHE 100" "gen_random_uuid()")
declare -a INS_DDL=(
  "CREATE TABLE ins_0 (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int)"
  "CREATE TABLE ins_1 (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int) PARTITION BY HASH (id); SELECT format('CREATE TABLE ins_1_%s PARTITION OF ins_1 FOR VALUES WITH (MODULUS 16, REMAINDER %s)', r, r) FROM generate_series(0, 15) r \\gexec"
  "CREATE TABLE ins_2 (id bigserial PRIMARY KEY, v int)"
  "CREATE TABLE ins_3 (id bigint PRIMARY KEY DEFAULT nextval('seq_cache'), v int)"
  "CREATE TABLE ins_4 (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v int)")
if [ "$VERSION_NUM" -ge 180000 ]; then
  INS_LABELS+=("uuidv7()"); INS_DDL+=("CREATE TABLE ins_5 (id uuid PRIMARY KEY DEFAULT uuidv7(), v int)")
fi

# bulk NAME LABEL EXPR SESSIONS: one bulk measurement of repetition $rep.
bulk() {
  echo "SELECT count(x) FROM (SELECT $3 AS x FROM generate_series(1, $ROWS)) s;" > "$WORK/bulk.sql"
  local tps; tps=$(pgbench_tps "$1" "$4" -t 1 -f "$WORK/bulk.sql")
  record bulk "$1" "$2" "$4" "$rep" "$(python3 -c "print(round($tps * $ROWS))")"
}
[ "$ONLY_SF" = yes ] && OTHER_LABELS=() && OTHER_EXPRS=()
echo "servers: ${names[*]} ($(sql "$FIRST" -c "SELECT version()" | cut -d, -f1)); $CORES cores; $MODE matrix; ${SECONDS_PER_RUN}s runs; $REPS reps; $ROWS rows per bulk session" | tee "$OUT_DIR/report.md"

# The servers in the order of repetition REP: as given, then reversed.
in_order() { if [ $(( $1 % 2 )) = 1 ]; then printf '%s\n' "${names[@]}"; else printf '%s\n' "${names[@]}" | tac; fi; }

for rep in $(seq 1 "$REPS"); do
  part one && echo "repetition $rep: one call per transaction" >&2
  for c in $CLIENTS; do
    part one || break
    for i in "${!OTHER_LABELS[@]}"; do
      echo "SELECT ${OTHER_EXPRS[$i]};" > "$WORK/one.sql"
      record one "$FIRST" "${OTHER_LABELS[$i]}" "$c" "$rep" "$(pgbench_tps "$FIRST" "$c" -M prepared -T "$SECONDS_PER_RUN" -f "$WORK/one.sql")"
    done
    # The floor and snowflake_next() on every server, side by side.
    while read -r name; do
      for expr in 1 "snowflake_next()"; do
        echo "SELECT $expr;" > "$WORK/one.sql"
        label=$expr; [ "$expr" = 1 ] && label="SELECT 1 (floor)"
        record one "$name" "$label" "$c" "$rep" "$(pgbench_tps "$name" "$c" -M prepared -T "$SECONDS_PER_RUN" -f "$WORK/one.sql")"
      done
    done < <(in_order "$rep")
  done

  if part bulk; then
  echo "repetition $rep: bulk" >&2
  for n in $BULK_OTHER; do
    bulk "$FIRST" "SELECT 1 (floor)" 1 "$n"
    for i in "${!OTHER_LABELS[@]}"; do
      [ "${OTHER_EXPRS[$i]}" = "gen_random_uuid()" ] && continue
      bulk "$FIRST" "${OTHER_LABELS[$i]}" "${OTHER_EXPRS[$i]}" "$n"
    done
  done
  for n in $BULK_SF; do
    while read -r name; do
      drain "$name"
      bulk "$name" "snowflake_next()" "snowflake_next()" "$n"
    done < <(in_order "$rep")
  done
  for name in "${names[@]}"; do
    sql "$name" -c "SELECT 'stats $name: waits ' || waits || ', borrowed_ms ' || borrowed_ms || ', max_drift_ms ' || max_drift_ms FROM snowflake_stats()" >> "$OUT_DIR/stats.log"
  done
  fi
  part insert || continue

  echo "repetition $rep: primary-key inserts" >&2
  if [ "$rep" = 1 ]; then
    for i in "${!INS_DDL[@]}"; do printf '%s\n' "${INS_DDL[$i]}" | sql "$FIRST" >/dev/null; done
  fi
  for c in $INSERT_CLIENTS; do
    for i in "${!INS_LABELS[@]}"; do
      echo "INSERT INTO ins_$i (v) VALUES (1);" > "$WORK/ins.sql"
      record insert "$FIRST" "${INS_LABELS[$i]}" "$c" "$rep" \
        "$(PGOPTIONS='-c synchronous_commit=off' pgbench_tps "$FIRST" "$c" -M prepared -T "$SECONDS_PER_RUN" -f "$WORK/ins.sql")"
    done
  done
done
for i in "${!INS_LABELS[@]}"; do
  part insert || break
  record key_bytes "$FIRST" "${INS_LABELS[$i]}" 0 0 "$(sql "$FIRST" -c "
    SELECT round(sum(pg_relation_size(i.indexrelid))::numeric / (SELECT count(*) FROM ins_$i), 1)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
    WHERE c.relname = 'ins_$i' OR c.relname LIKE 'ins\\_${i}\\_%'")"
done

# The pure core: a tight loop, and with 200 steps of other work between
# calls (about what a backend does between two rows; bench/threads.rs).
for work in 0 200; do
  for t in "${THREADS[@]}"; do
    part threads || break
    echo "pure core: ${t%%=*}, work $work" >&2
    "${t#*=}" 1,2,4,8,16 "$THREAD_MS" "$work" | sed -n 's/^| \([0-9]*\) | \([0-9.]*\)M | \([0-9]*\) |$/\1 \2 \3/p' |
      while read -r n rate ns; do
        record threads "${t%%=*}, work $work" "issue()" "$n" 1 "$(python3 -c "print(round($rate * 1e6))")"
        record thread_ns "${t%%=*}, work $work" "issue()" "$n" 1 "$ns"
      done
  done
done

python3 "$BENCH/many_core_report.py" "$RAW" "${names[@]}" | tee -a "$OUT_DIR/report.md"
echo "report: $OUT_DIR/report.md" >&2
