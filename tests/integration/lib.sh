# shellcheck shell=bash
# Shared helpers for the integration tests: throwaway PostgreSQL clusters
# that run as the `postgres` user, listen on 127.0.0.1 only, each on its own
# port and socket directory under one work directory, and are stopped (and
# removed) by the script that started them, also when a test fails.
#
# Source it from a test script:   . "$(dirname "$0")/lib.sh"
# then call `cluster_init NAME PORT [postgresql.conf lines...]`, `cluster_start NAME`,
# `psql_on NAME -c ...`. Every cluster started through here is stopped by an
# EXIT trap.

set -euo pipefail

# The server under test: PG_BIN, its bin directory (default Debian's 15;
# scripts/test.sh --pg NN sets it). Its client programs (psql, pgbench,
# pg_dump, ...) come first in PATH, so that every tool matches the server.
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
export PATH="$PG_BIN:$PATH"
# shellcheck source=../../scripts/postgres.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/postgres.sh"
# PG_MAJOR: the server's major version, for the few version-specific steps.
PG_MAJOR=$(pg_major "$PG_BIN/pg_config")
SF_WORK=${SF_WORK:-$(mktemp -d /tmp/snowflake_it.XXXXXX)}
chmod 755 "$SF_WORK"
chown postgres:postgres "$SF_WORK"
declare -a SF_CLUSTERS=()

# Runs a command as the postgres user, keeping the environment variables that
# libfaketime, our helpers and the emulated arm64 server (QEMU_LD_PREFIX,
# tests/integration/arm64.sh) need.
as_pg() {
  sudo -u postgres --preserve-env=LD_PRELOAD,FAKETIME_TIMESTAMP_FILE,FAKETIME_CACHE_DURATION,FAKETIME_DONT_FAKE_MONOTONIC,FAKETIME_DONT_RESET,PGOPTIONS,QEMU_LD_PREFIX "$@"
}

cluster_dir()  { echo "$SF_WORK/$1"; }
cluster_port() { cat "$SF_WORK/$1.port"; }
cluster_log()  { echo "$SF_WORK/$1.log"; }
# cluster_bin NAME: the bin directory of the server that made the cluster
# (PG_BIN at cluster_init), so that a test with two versions (pg_upgrade)
# starts and stops each cluster with its own pg_ctl.
cluster_bin()  { cat "$SF_WORK/$1.bin" 2>/dev/null || echo "$PG_BIN"; }

# cluster_init NAME PORT [conf line...]: initdb plus a postgresql.conf that
# preloads snowflake_id. Extra arguments are appended as configuration lines;
# SF_INITDB_OPTS adds initdb options.
cluster_init() {
  local name=$1 port=$2; shift 2
  local dir; dir=$(cluster_dir "$name")
  # cd / so that initdb, running as postgres, does not warn about a working
  # directory it cannot read.
  # shellcheck disable=SC2086 # SF_INITDB_OPTS: extra initdb options, split on spaces
  (cd / && as_pg "$PG_BIN/initdb" -D "$dir" -A trust -U postgres --no-sync ${SF_INITDB_OPTS:-} >/dev/null)
  mkdir -p "$dir.sock"; chown postgres:postgres "$dir.sock"
  echo "$port" > "$SF_WORK/$name.port"
  echo "$PG_BIN" > "$SF_WORK/$name.bin"
  {
    echo "listen_addresses = '127.0.0.1'"
    echo "port = $port"
    echo "unix_socket_directories = '$dir.sock'"
    echo "shared_preload_libraries = 'snowflake_id'"
    echo "fsync = on"
    echo "max_connections = 100"
    for line in "$@"; do echo "$line"; done
  } | as_pg tee -a "$dir/postgresql.conf" >/dev/null
  SF_CLUSTERS+=("$name")
}

# cluster_conf NAME LINE...: append configuration lines.
cluster_conf() {
  local name=$1; shift
  for line in "$@"; do echo "$line"; done | as_pg tee -a "$(cluster_dir "$name")/postgresql.conf" >/dev/null
}

# cluster_start NAME: start and wait; returns pg_ctl's status (non-zero when
# the server refuses to start), leaving the log in $(cluster_log NAME).
cluster_start() {
  local name=$1
  (cd / && as_pg "$(cluster_bin "$name")/pg_ctl" -D "$(cluster_dir "$name")" -l "$(cluster_log "$name")" -w -t 60 start >/dev/null)
}

cluster_stop() {
  local name=$1 mode=${2:-fast}
  local dir; dir=$(cluster_dir "$name")
  if [ -f "$dir/postmaster.pid" ]; then
    (cd / && as_pg "$(cluster_bin "$name")/pg_ctl" -D "$dir" -m "$mode" -w -t 60 stop >/dev/null 2>&1) || true
  fi
}

# cluster_kill9 NAME: SIGKILL the postmaster and every backend (a crash).
cluster_kill9() {
  local name=$1 dir pid
  dir=$(cluster_dir "$name")
  pid=$(head -1 "$dir/postmaster.pid")
  pkill -9 -P "$pid" || true
  kill -9 "$pid" || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  sleep 0.5
}

# psql_on NAME [psql args...]: psql over TCP to the cluster as postgres.
psql_on() {
  local name=$1; shift
  psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port "$name")" -U postgres -d postgres "$@"
}

# sql_value NAME SQL: one value, unaligned.
sql_value() {
  psql_on "$1" -At -c "$2"
}

_sf_cleanup() {
  local rc=$?
  local pid
  for name in "${SF_CLUSTERS[@]}"; do
    # (A cluster a test froze with SIGSTOP cannot stop: thaw it first.)
    pid=$(head -1 "$(cluster_dir "$name")/postmaster.pid" 2>/dev/null) &&
      { kill -CONT "$pid"; pkill -CONT -P "$pid"; } 2>/dev/null || true
    cluster_stop "$name" immediate
  done
  if [ $rc -ne 0 ]; then
    for name in "${SF_CLUSTERS[@]}"; do
      [ -f "$(cluster_log "$name")" ] || continue
      # The background workers' own account (claims, renewals, fences,
      # resumptions, leases), which a tail of repeated ERROR lines from
      # writers hides; then the tail.
      echo "--- $name log: snowflake_id's LOG and WARNING lines, and refused resumptions (the last 15)"
      grep -E '(LOG|WARNING):  snowflake_(id|registry)|cannot be resumed' "$(cluster_log "$name")" | tail -15 || true
      echo "--- tail of $name log"
      tail -20 "$(cluster_log "$name")"
    done
  fi
  if [ -z "${SF_KEEP:-}" ]; then rm -rf "$SF_WORK"; fi
  exit $rc
}
trap _sf_cleanup EXIT
# Make Ctrl-C and kill run the EXIT trap too, so no cluster is left behind.
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# A free TCP port on 127.0.0.1 from a range unlikely to be used.
free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# sql_error NAME SQL [DATABASE]: runs SQL that is expected to fail, with
# verbose error reports (so the SQLSTATE is printed as
# "ERROR:  55000: message"). Prints psql's output (stdout and stderr);
# returns 1 if the SQL unexpectedly succeeded.
sql_error() {
  local out
  if out=$(psql_on "$1" -d "${3:-postgres}" -v VERBOSITY=verbose -c "$2" 2>&1); then
    printf '%s\n' "$out"
    return 1
  fi
  printf '%s\n' "$out"
}

# sqlstate_of TEXT: the SQLSTATE of the first ERROR/FATAL line of verbose
# psql output, or nothing.
sqlstate_of() {
  printf '%s\n' "$1" | sed -nE 's/^(psql:[^ ]* )?(ERROR|FATAL): +([0-9A-Z]{5}): .*/\3/p' | head -1
}

# doc_shows_file DOC FILE [NAME]: the Markdown page DOC shows FILE in full, as
# a fenced ```sql block equal to the file (with NAME, one whose first line
# starts "-- NAME"), so that what users copy is what the tests run.
doc_shows_file() {
  python3 - "$1" "$2" "${3:-}" <<'PY'
import sys
doc, path, name = sys.argv[1:]
text, want = open(doc).read(), open(path).read()
blocks = [b.split("```", 1)[0] for b in text.split("```sql\n")[1:]]
sys.exit(0 if any(b == want and (not name or b.startswith("-- " + name)) for b in blocks) else 1)
PY
}

# log_has NAME ERE: the cluster's server log matches the extended regular
# expression, case-insensitively.
log_has() {
  grep -Eiq -- "$2" "$(cluster_log "$1")"
}

# ---------------------------------------------------------------------------
# Faked clocks (libfaketime), for the clock-fault tests.
#
# Only the server processes run under libfaketime: cluster_start_faked NAME
# starts pg_ctl (which must see the same clock as the postmaster, or `-w`
# mistakes the new postmaster.pid for a stale one) with LD_PRELOAD and the
# FAKETIME_* variables exported; the postmaster and every process it forks
# inherit them. psql and pgbench keep running on the real clock.
# clock_set OFFSET then steps the server's clock. Offsets are libfaketime's
# relative form: +0, -0.5 (seconds), -5, -1h.
#
# Why FAKETIME_CACHE_DURATION=0 and not FAKETIME_NO_CACHE=1: with no cache,
# libfaketime 0.9.10 fopen()s the offset file on every clock reading, and
# PostgreSQL 15 reads the clock inside its SIGALRM handler (timeout.c calls
# GetCurrentTimestamp(); the idle-stats timeout fires about once a second in a
# busy backend). A SIGALRM that lands inside libfaketime's fopen() re-enters
# it, and the second fopen() waits forever for the stdio lock the first one
# holds (gdb: CommitTransactionCommand > GetCurrentTimestamp > gettimeofday >
# read_config_file > fopen > <signal handler> > GetCurrentTimestamp > ... >
# fopen > __lll_lock_wait_private). One pgbench client then never finishes.
# With a cache of 0 seconds libfaketime re-reads the file at the first reading
# of every new (real) second, and it stamps the fetch before opening the
# file, so a reading from a signal handler during that fopen() uses the
# cached offset instead of opening the file again (unless a second boundary
# passes within those microseconds). The price: a process sees a new offset
# only from the next second boundary on, which clock_set waits for.
SF_FAKETIME_LIB=${SF_FAKETIME_LIB:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}
SF_CLOCK_FILE="$SF_WORK/clock.offset"

# faketime_init: check that libfaketime is installed and reset the clock to +0.
faketime_init() {
  [ -r "$SF_FAKETIME_LIB" ] || fail "libfaketime not found at $SF_FAKETIME_LIB (apt-get install faketime; scripts/setup.sh does)"
  clock_set +0
}

# sleep_past_second_boundary, clock_write, clock_set_behind (POSIX sh, so
# that a psql session's \! can source SF_CLOCK_LIB too).
SF_CLOCK_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib_clock.sh
# shellcheck source-path=SCRIPTDIR source=lib_clock.sh
. "$SF_CLOCK_LIB"

# clock_set OFFSET: step the faked clock of every server started with
# cluster_start_faked; returns once every server process sees the new offset
# (at most a second later).
clock_set() {
  clock_write "$SF_CLOCK_FILE" "$1"
  sleep_past_second_boundary
}

# cluster_start_faked NAME: like cluster_start, on the faked clock.
cluster_start_faked() {
  (
    unset FAKETIME
    export LD_PRELOAD="$SF_FAKETIME_LIB" FAKETIME_TIMESTAMP_FILE="$SF_CLOCK_FILE" \
      FAKETIME_CACHE_DURATION=0 FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_DONT_RESET=1
    cluster_start "$1"
  )
}

# now_ms: the real wall clock in milliseconds (for bounds on how long a
# client call took).
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# require_installed_extension: fail early, with the fix, when snowflake_id is
# not installed into the PostgreSQL the clusters run.
require_installed_extension() {
  local libdir; libdir=$("$PG_BIN/pg_config" --pkglibdir)
  [ -f "$libdir/snowflake_id.so" ] ||
    fail "snowflake_id is not installed in $libdir (cargo pgrx install --pg-config $PG_BIN/pg_config)"
}

# The test keys of public IDs: fixed, so that expected outputs can show
# public IDs (never use them for real: they are in this file).
TEST_PUBLIC_KEY_1=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
TEST_PUBLIC_KEY_2=2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94

# public_keys_write FILE [LINE...]: a key file of public IDs, owned by
# postgres with mode 0600; the lines default to version 1 and 2 of the test
# keys.
public_keys_write() {
  local file=$1; shift
  [ $# -gt 0 ] || set -- "1 $TEST_PUBLIC_KEY_1" "2 $TEST_PUBLIC_KEY_2"
  : > "$file"
  chown postgres:postgres "$file"
  chmod 0600 "$file"
  {
    echo "# test keys of public IDs (tests/integration/lib.sh)"
    for line in "$@"; do echo "$line"; done
  } > "$file"
}

# run_example LABEL OUT CMD...: runs a client example with its output in
# OUT, prints that output, and fails with it when the example fails.
run_example() {
  local label=$1 out=$2; shift 2
  "$@" >"$out" 2>&1 || { cat "$out"; fail "the $label example failed"; }
  cat "$out"
}

# client_deps_ensure: the client examples' dependencies, installed once into
# the repository (examples/python/.venv with psycopg from PyPI, and
# examples/node/node_modules by npm ci from the committed lock file); later
# calls reuse them. Under a lock: two lanes of scripts/test.sh may ask at once.
# Sets PY_CLIENT (the venv's python), PSYCOPG_VERSION and NODE_PG_VERSION.
client_deps_ensure() {
  local root py_dir node_dir venv
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  py_dir="$root/examples/python" node_dir="$root/examples/node"
  venv="$py_dir/.venv"
  PSYCOPG_VERSION=$(sed -nE 's/^psycopg==([0-9.]+).*/\1/p' "$py_dir/requirements.txt")
  NODE_PG_VERSION=$(node -e "console.log(require('$node_dir/package-lock.json').packages['node_modules/pg'].version)")
  PY_CLIENT="$venv/bin/python"
  (
    flock 9
    if ! "$PY_CLIENT" -c "import psycopg, sys; sys.exit(psycopg.__version__ != '$PSYCOPG_VERSION')" 2>/dev/null; then
      echo "installing psycopg $PSYCOPG_VERSION into $venv"
      python3 -m venv "$venv"
      "$venv/bin/pip" install -q --disable-pip-version-check -r "$py_dir/requirements.txt"
    fi
    local have_pg
    have_pg=$(node -e "try { console.log(require('$node_dir/node_modules/pg/package.json').version) } catch (e) { console.log('none') }")
    if [ "$have_pg" != "$NODE_PG_VERSION" ]; then
      echo "npm ci in $node_dir (pg $NODE_PG_VERSION)"
      (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  ) 9>"$root/examples/.deps.lock"
}

# expect_drift_error NAME OUT LABEL: snowflake_next() on NAME must fail at once
# with the documented drift error (SQLSTATE 58000, the message, a hint naming
# the setting). Its output is kept in OUT; sets DRIFT_ERROR_MS to how long the
# failing call took.
expect_drift_error() {
  local name=$1 out=$2 label=$3 rc=0 start
  start=$(now_ms)
  psql_on "$name" -v VERBOSITY=verbose -c "SELECT snowflake_next()" > "$out" 2>&1 || rc=$?
  DRIFT_ERROR_MS=$(( $(now_ms) - start ))
  echo "$label: snowflake_next() returned rc=$rc after ${DRIFT_ERROR_MS} ms:"
  sed 's/^/  /' "$out"
  [ "$rc" -ne 0 ] || fail "$label: snowflake_next() issued an ID with the clock far behind the last issued ID"
  [ "$DRIFT_ERROR_MS" -lt 5000 ] || fail "$label: the failing call took ${DRIFT_ERROR_MS} ms; it must fail at once"
  grep -q "^ERROR:  58000: " "$out" || fail "$label: expected SQLSTATE 58000"
  grep -q "behind the last issued ID" "$out" || fail "$label: the message does not say the clock is behind the last issued ID"
  grep -q "^HINT: .*snowflake_id.max_clock_drift" "$out" || fail "$label: no hint naming snowflake_id.max_clock_drift"
  # The time of the last issued ID, and never the lease file's deletion.
  grep -Eq "^DETAIL:  The last ID this server issued has the time [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+" "$out" ||
    fail "$label: the detail does not give the time of the last issued ID"
  grep -q "^HINT: .*Never delete the lease file (snowflake_id.lease) to clear this error" "$out" ||
    fail "$label: the hint does not say never to delete the lease file"
}

# cluster_basebackup NAME PORT FROM: a streaming standby of the running
# cluster FROM, made with pg_basebackup -R (so it inherits FROM's settings,
# snowflake_id.node_id included, and a copy of its lease file), listening on
# PORT with its own socket directory. Stopped by the EXIT trap like the others.
cluster_basebackup() {
  local name=$1 port=$2 from=$3
  local dir; dir=$(cluster_dir "$name")
  (cd / && as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$(cluster_port "$from")" -U postgres \
    -D "$dir" -R -X stream -c fast --no-sync)
  mkdir -p "$dir.sock"; chown postgres:postgres "$dir.sock"
  echo "$port" > "$SF_WORK/$name.port"
  cluster_bin "$from" > "$SF_WORK/$name.bin"
  SF_CLUSTERS+=("$name")
  cluster_conf "$name" "port = $port" "unix_socket_directories = '$dir.sock'"
}

# promote NAME: pg_ctl promote, waiting until it is done.
promote() {
  (cd / && as_pg "$(cluster_bin "$1")/pg_ctl" -D "$(cluster_dir "$1")" -w -t 60 promote >/dev/null) ||
    fail "promotion of $1 failed"
}

# wait_for_replay STANDBY PRIMARY: wait (up to 60 s) until STANDBY has replayed
# everything PRIMARY has written so far.
wait_for_replay() {
  local lsn; lsn=$(sql_value "$2" "SELECT pg_current_wal_lsn()")
  for _ in $(seq 1 600); do
    [ "$(sql_value "$1" "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && return 0
    sleep 0.1
  done
  fail "$1 did not replay up to $lsn within 60 s"
}

# create_subscriber NAME FROM [OPTION...]: pg_createsubscriber (17 and later)
# converts NAME, a stopped streaming standby of the running cluster FROM,
# into a logical subscriber of FROM's database postgres; extra options
# (--publication, --subscription) are passed on. Fails with its log's tail.
create_subscriber() {
  local name=$1 from=$2 log="$SF_WORK/pg_createsubscriber.$1.log"
  shift 2
  (cd "$SF_WORK" && as_pg "$PG_BIN/pg_createsubscriber" -D "$(cluster_dir "$name")" \
    -P "host=127.0.0.1 port=$(cluster_port "$from") user=postgres dbname=postgres" -d postgres \
    "$@" -U postgres -s "$SF_WORK" -p "$(free_port)" >"$log" 2>&1) ||
    { tail -20 "$log"; fail "pg_createsubscriber failed on $name"; }
}

# server_dependency PG_CONFIG: what a package built for that server must
# depend on for its server, from PostgreSQL's release notes rather than
# from the headers scripts/package.sh reads: the minor releases that began
# to version composite datums (CVE-2026-6460) added heap_datum_check(),
# which older servers of the major lack, so a package built against such a
# release (the tests build against their server's own minor release) needs
# postgresql-NN (>= that release); before them, postgresql-NN.
server_dependency() {
  local config=$1 major version first
  major=$(pg_major "$config")
  version=$("$config" --version | sed -nE 's/^PostgreSQL ([^ ]+).*/\1/p')
  version=$(sed -E 's/^([0-9]+(\.[0-9]+)?)(alpha|beta|rc)/\1~\3/' <<<"$version")
  case $major in
    14) first=14.25 ;; 15) first=15.20 ;; 16) first=16.16 ;; 17) first=17.12 ;; 18) first=18.7 ;; 19) first=19~rc2 ;;
    *) first="" ;;
  esac
  if [ -n "$first" ] && dpkg --compare-versions "$version" ge "$first"; then
    echo "postgresql-$major (>= $version)"
  else
    echo "postgresql-$major"
  fi
}

# portable_owner_db NAME: on cluster NAME, the role app_owner (not a
# superuser), its database app with dblink, and the portable edition
# ($SQL_FILE) installed there by app_owner; `owner` runs psql there as
# app_owner.
portable_owner_db() {
  PORTABLE_CLUSTER=$1
  psql_on "$1" >/dev/null <<'SQL'
CREATE ROLE app_owner LOGIN NOSUPERUSER;
CREATE DATABASE app OWNER app_owner;
\c app
CREATE EXTENSION dblink;
SQL
  owner -f "$SQL_FILE" >/dev/null
}
owner() { psql_on "$PORTABLE_CLUSTER" -U app_owner -d app "$@"; }
