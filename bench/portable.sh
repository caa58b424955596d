#!/usr/bin/env bash
# The portable edition's speed, side by side with the extension, with
# Instagram's published next_id() (a sequence modulo 1024 beside the clock:
# the SQL generator people copy today) and with SELECT 1, on one server, in
# one run, with paired repetitions (each round runs every contender once,
# in a rotated order, so that a slow moment of the machine hits all of
# them):
#   1. one session, one call per transaction (pgbench -c 1): what a
#      DEFAULT snowflake_next() costs an OLTP insert;
#   2. 16 sessions in bulk: 100 calls a transaction, IDs per second.
# The extension is the one installed in the server (PG_BIN, default
# Debian's 15); say which build it is when quoting the figures.
#
#   bash bench/portable.sh [--seconds S] [--rounds R]
# Prints medians and ratios; docs/portable.md#speed has a run's figures.
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)
SECONDS_EACH=5 ROUNDS=3
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "usage: bench/portable.sh [--seconds S] [--rounds R]" >&2; exit 2 ;;
  esac
done
# shellcheck source=../tests/integration/lib.sh
. "$ROOT/tests/integration/lib.sh"
# shellcheck source=lib.sh
. "$BENCH/lib.sh"
require_installed_extension

port=$(free_port)
cluster_init bench "$port" "snowflake_id.node_id = 1" "max_connections = 60" "shared_buffers = '512MB'" \
  "autovacuum = off" "jit = off"
cluster_start bench
for db in ext portable instagram plain; do psql_on bench -c "CREATE DATABASE $db"; done
psql_on bench -d ext -c "CREATE EXTENSION snowflake_id"
psql_on bench -d portable -f "$ROOT/portable/snowflake_id_portable.sql" >/dev/null
psql_on bench -d portable -c "UPDATE snowflake_portable.config SET node_id = 2"
bench_instagram_sql | psql_on bench -d instagram

declare -A DB=([select1]=plain [extension]=ext [portable]=portable [instagram]=instagram)
declare -A CALL=([select1]="1" [extension]="snowflake_next()" [portable]="snowflake_next()" [instagram]="insta_next_id()")
for name in "${!DB[@]}"; do
  echo "SELECT ${CALL[$name]};" >"$SF_WORK/one.$name.sql"
  echo "SELECT count(${CALL[$name]}) FROM generate_series(1, 100);" >"$SF_WORK/bulk.$name.sql"
done
chmod 644 "$SF_WORK"/*.sql

# run KIND NAME CLIENTS: transactions per second of one pgbench run.
run() {
  as_pg pgbench -n -h 127.0.0.1 -p "$port" -U postgres -c "$3" -j "$(( $3 < 4 ? $3 : 4 ))" -T "$SECONDS_EACH" \
    -f "$SF_WORK/$1.$2.sql" "${DB[$2]}" 2>&1 | sed -nE 's/^tps = ([0-9.]+) .*/\1/p'
}

RESULTS="$SF_WORK/results"
: >"$RESULTS"
order=(select1 extension portable instagram)
for round in $(seq 1 "$ROUNDS"); do
  for kind in one bulk; do
    clients=1; [ "$kind" = bulk ] && clients=16
    for i in "${!order[@]}"; do
      name=${order[$(( (i + round) % ${#order[@]} ))]}
      tps=$(run "$kind" "$name" "$clients")
      echo "$kind $name $round $tps" | tee -a "$RESULTS"
    done
  done
done

python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for kind, name, rnd, tps in rows:
    by.setdefault((kind, name), {})[rnd] = float(tps)
def med(k, n): return statistics.median(by[(k, n)].values())
def ratio(k, a, b):
    return statistics.median(by[(k, a)][r] / by[(k, b)][r] for r in by[(k, a)])
print("\none session, one call per transaction (transactions/s, median of the rounds):")
for n in ("select1", "extension", "portable", "instagram"):
    print(f"  {n:10} {med('one', n):10.0f}   {ratio('one', n, 'select1'):.2f} x SELECT 1")
print("\n16 sessions, 100 calls a transaction (IDs/s):")
for n in ("extension", "portable", "instagram"):
    print(f"  {n:10} {med('bulk', n) * 100:10.0f}   {ratio('bulk', n, 'extension'):.3f} x the extension")
print("\n(ratios: the median of each round's own ratio)")
PY
