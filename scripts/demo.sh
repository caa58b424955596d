#!/usr/bin/env bash
# snowflake_id in two minutes. Shows, on a throwaway PostgreSQL cluster (15,
# or the version --pg names),
# that snowflake_next() works as a bigint primary key default, that the IDs it
# issues decode to time, node and sequence, and that a time range becomes an
# index range scan on the primary key.
#
#   scripts/demo.sh          set up, build, install, start the demo cluster
#                            and run the demo; the cluster keeps running
#   scripts/demo.sh --pg 19  the same on PostgreSQL 19 (or 16, 17, 18), which
#                            set-up installs first (scripts/postgres.sh)
#   scripts/demo.sh stop     stop the demo cluster and remove its files
#
# Steps: scripts/setup.sh --demo (the Debian packages that building needs,
# Rust 1.96, cargo-pgrx, `cargo pgrx init`; none of the tests' own tools),
# `cargo pgrx install --pg-config <that server's pg_config>`, then a
# cluster that runs as the postgres user, listens on 127.0.0.1 only, and has
# shared_preload_libraries = 'snowflake_id' and snowflake_id.node_id = 1.
# Running it again is safe: a running demo cluster is stopped and removed
# first (before the install, which replaces the library it has loaded).
#
# Environment:
#   SNOWFLAKE_DEMO_PORT  TCP port of the demo cluster (default 54330)
#   SNOWFLAKE_DEMO_DIR   its directory: data, socket, log (default /tmp/snowflake_demo)
#   SNOWFLAKE_DEMO_SKIP_BUILD=1  skip setup.sh and the install, and use the
#                        snowflake_id already installed (for quick re-runs)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PG_VERSION=15
PG_BIN=/usr/lib/postgresql/15/bin
PORT=${SNOWFLAKE_DEMO_PORT:-54330}
DEMO_DIR=${SNOWFLAKE_DEMO_DIR:-/tmp/snowflake_demo}
DATA=$DEMO_DIR/data
SOCK=$DEMO_DIR/sock
LOG=$DEMO_DIR/postgres.log
MARKER=$DEMO_DIR/.snowflake_demo
# shellcheck source=postgres.sh
. "$ROOT/scripts/postgres.sh"
# shellcheck source=rust.sh
. "$ROOT/scripts/rust.sh"

if [ -t 1 ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD='' PLAIN=''; fi
say() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
die() { echo "demo: $*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
# The server refuses to run as root: everything touching the cluster runs as
# postgres, from a directory postgres can read.
as_pg() {
  if [ "$(id -un)" = postgres ]; then (cd / && "$@"); else (cd / && sudo -u postgres "$@"); fi
}
demo_psql() {
  "$PG_BIN/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U postgres -d postgres "$@"
}

# Stops the demo cluster if it runs and removes its directory. Only removes a
# directory this script created (it holds the marker file), or an empty one.
demo_stop() {
  # Nothing to stop on a first run: no directory (and perhaps no postgres
  # user or sudo yet, before set-up has installed them).
  [ -d "$DEMO_DIR" ] || return 0
  # The server that runs it (recorded at its start: --pg may have changed).
  [ ! -f "$DEMO_DIR/.pg_bin" ] || PG_BIN=$(cat "$DEMO_DIR/.pg_bin")
  if as_pg test -f "$DATA/postmaster.pid"; then
    echo "demo: stopping the demo cluster in $DATA"
    as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null ||
      as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w -t 60 stop >/dev/null ||
      die "could not stop the cluster in $DATA"
  fi
  if [ -d "$DEMO_DIR" ]; then
    if [ -f "$MARKER" ]; then
      as_root rm -rf "$DEMO_DIR"
    elif [ -z "$(ls -A "$DEMO_DIR")" ]; then
      as_root rmdir "$DEMO_DIR"
    else
      die "$DEMO_DIR exists and is not a demo directory (no $MARKER); remove it or set SNOWFLAKE_DEMO_DIR"
    fi
  fi
}

command=run
while [ $# -gt 0 ]; do
  case $1 in
    --pg)
      [ $# -ge 2 ] || die "--pg needs a version (${SF_PG_VERSIONS[*]})"
      case " ${SF_PG_VERSIONS[*]} " in *" $2 "*) PG_VERSION=$2 ;; *) die "unsupported PostgreSQL version '$2' (${SF_PG_VERSIONS[*]})" ;; esac
      shift 2
      ;;
    *) command=$1; shift ;;
  esac
done

case $command in
  stop)
    demo_stop
    echo "demo: the demo cluster is stopped and $DEMO_DIR is removed"
    exit 0
    ;;
  run) ;;
  -h | --help | help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *) die "unknown command '$command' (use: scripts/demo.sh [--pg NN] [stop])" ;;
esac

say "Stopping any previous demo cluster"
demo_stop

if [ -z "${SNOWFLAKE_DEMO_SKIP_BUILD:-}" ]; then
  say "Setup: scripts/setup.sh --demo --pg $PG_VERSION"
  bash "$ROOT/scripts/setup.sh" --demo --pg "$PG_VERSION"
fi
PG_CONFIG=$(pg_config_for "$PG_VERSION")
[ -n "$PG_CONFIG" ] || die "PostgreSQL $PG_VERSION is not installed (scripts/setup.sh --pg $PG_VERSION)"
PG_BIN=$("$PG_CONFIG" --bindir)
if [ -n "${SNOWFLAKE_DEMO_SKIP_BUILD:-}" ]; then
  say "Skipping setup and install (SNOWFLAKE_DEMO_SKIP_BUILD is set)"
  [ -f "$("$PG_CONFIG" --pkglibdir)/snowflake_id.so" ] ||
    die "snowflake_id is not installed; run without SNOWFLAKE_DEMO_SKIP_BUILD"
else
  say "Build and install: cargo pgrx install --pg-config $PG_CONFIG"
  install_args=(--pg-config "$PG_CONFIG")
  [ "$(id -u)" -eq 0 ] || install_args+=(--sudo)
  (cd "$ROOT" && cargo pgrx install "${install_args[@]}")
fi

say "Starting the demo cluster: 127.0.0.1:$PORT, data in $DATA"
as_root mkdir -p "$DEMO_DIR"
as_root touch "$MARKER"
echo "$PG_BIN" | as_root tee "$DEMO_DIR/.pg_bin" >/dev/null
as_root chown postgres:postgres "$DEMO_DIR"
as_root chmod 755 "$DEMO_DIR"
as_pg "$PG_BIN/initdb" -D "$DATA" -A trust -U postgres --no-sync >/dev/null
as_pg mkdir -p "$SOCK"
as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<CONF

# snowflake_id demo (scripts/demo.sh)
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCK'
shared_preload_libraries = 'snowflake_id'
snowflake_id.node_id = 1
CONF
if ! as_pg "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start >/dev/null; then
  tail -20 "$LOG" >&2 || true
  die "the demo cluster did not start (is port $PORT taken? set SNOWFLAKE_DEMO_PORT)"
fi

say "Demo"
demo_psql --echo-all <<'SQL'
-- Every database that uses the IDs needs the extension.
CREATE EXTENSION snowflake_id;

-- A table keyed by snowflake IDs: the default does all the work.
CREATE TABLE events (
  id      bigint PRIMARY KEY DEFAULT snowflake_next(),
  n       int NOT NULL,
  payload text
);

\timing on
INSERT INTO events (n, payload)
SELECT g, 'event ' || g FROM generate_series(1, 100000) AS g;
\timing off
ANALYZE events;

-- IDs are unique and follow insertion order.
SELECT count(*) AS rows,
       count(DISTINCT id) AS distinct_ids,
       bool_and(id > prev) AS ids_increase_with_insertion_order
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM events) AS s;

-- Each ID carries its time, the node that issued it, and a sequence number.
SELECT e.id, e.payload, d.ts, d.node_id, d.sequence
FROM events AS e CROSS JOIN LATERAL snowflake_decode(e.id) AS d
ORDER BY e.id
LIMIT 5;

-- The parts one at a time, for the newest row.
SELECT id, snowflake_timestamp(id), snowflake_node(id), snowflake_sequence(id)
FROM events ORDER BY id DESC LIMIT 1;

-- A time range is an ID range: the newest events of the last minute.
SELECT id, payload, snowflake_timestamp(id)
FROM events
WHERE id >= snowflake_from_timestamp(now() - interval '1 minute')
ORDER BY id DESC
LIMIT 5;

SELECT count(*) AS events_in_last_minute
FROM events
WHERE id >= snowflake_from_timestamp(now() - interval '1 minute');

-- ... answered by the primary key index, no timestamp column needed.
EXPLAIN (COSTS OFF)
SELECT id, payload, snowflake_timestamp(id)
FROM events
WHERE id >= snowflake_from_timestamp(now() - interval '1 minute')
ORDER BY id DESC
LIMIT 5;

-- What the generator has done so far.
\x on
SELECT * FROM snowflake_stats();
\x off
SQL

plan=$(demo_psql -At -c "EXPLAIN (COSTS OFF)
  SELECT id FROM events
  WHERE id >= snowflake_from_timestamp(now() - interval '1 minute')
  ORDER BY id DESC LIMIT 5")
if ! grep -Eq 'Index (Only )?Scan.* using events_pkey' <<<"$plan" || ! grep -Fq 'Index Cond: (id >=' <<<"$plan"; then
  printf '%s\n' "$plan" >&2
  die "expected an index range scan on events_pkey (Index Cond on id) in the plan above"
fi

stop_cmd="scripts/demo.sh stop"
[ -z "${SNOWFLAKE_DEMO_DIR:-}" ] || stop_cmd="SNOWFLAKE_DEMO_DIR=$DEMO_DIR $stop_cmd"
say "The demo cluster is still running"
cat <<EOF
Connect:   $PG_BIN/psql -h 127.0.0.1 -p $PORT -U postgres
Log:       $LOG
Stop it:   $stop_cmd     (stops the cluster and removes $DEMO_DIR)
EOF
