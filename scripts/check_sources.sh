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
#
# SF_PG_SKIP_LOCATIONS (scripts/sources.sh) makes locations look unreachable:
# that is how the check is seen to fail.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=postgres.sh
. "$ROOT/scripts/postgres.sh"

strict=0
case ${1:-} in
  --strict) strict=1 ;;
  "") ;;
  *) echo "check_sources: unknown argument '$1' (usage: scripts/check_sources.sh [--strict])" >&2; exit 2 ;;
esac

# What each server needs: one of the IDs of each group ("|" separates
# alternatives, tried in this order by scripts/postgres.sh).
NEEDS=("16:pg16|pg16-fallback" "17:pg17" "17:pg17-headers" "18:pg18|pg18-fallback"
  "19:pg19-server" "19:pg19-client" "19:pg19-libpq5" "19:pg19-headers" "citus:citus"
  "arm64 16:pg16-arm64" "arm64 17:pg17-headers-arm64" "arm64 17:pg17-arm64" "arm64 18:pg18-arm64" "arm64 19:pg19-headers-arm64"
  "arm64 19:pg19-server-arm64" "arm64 19:pg19-client-arm64" "arm64 19:pg19-libpq5-arm64")

# It runs before set-up: pip needs a virtual environment (Debian's python3
# has venv only with python3-venv).
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_ensure python3-venv
_pg_as_root mkdir -p "$SF_PG_CACHE"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/snowflake_sources.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

declare -A fetched=()
gone=0
for id in $(source_ids); do
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

broken=0
for need in "${NEEDS[@]}"; do
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

# Debian experimental keeps only its newest upload of PostgreSQL 19: say
# when Debian serves another than the pinned one (in experimental or sid),
# which set-up then installs unpinned; once the pinned files are gone, the
# check above fails.
served=""
for suite in experimental sid; do
  APT_OPTS=()
  if ! _src_apt_config deb "$suite" 2>"$scratch/apt-$suite.err"; then
    echo "check_sources: WARNING: could not read Debian $suite's package list:" >&2
    sed 's/^/    /' "$scratch/apt-$suite.err" >&2
    continue
  fi
  v=$(apt-cache "${APT_OPTS[@]}" madison postgresql-19 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2; exit }')
  [ -n "$v" ] || continue
  if [ -z "$served" ] || dpkg --compare-versions "$v" gt "$served"; then served=$v; fi
done
if [ -z "$served" ]; then
  echo "check_sources: WARNING: Debian serves no postgresql-19 now (neither experimental nor sid)" >&2
elif [ "$served" != "$SF_PG19_PINNED" ]; then
  echo "check_sources: WARNING: Debian now serves postgresql-19 $served, not the pinned $SF_PG19_PINNED: set-up installs it unpinned; pin its files in scripts/sources.sh and SF_PG19_PINNED in scripts/postgres.sh" >&2
else
  echo "check_sources: ok       Debian still serves postgresql-19 $served, the pinned version"
fi

if [ $broken -eq 1 ]; then
  echo "check_sources: supply the missing files by hand (SF_PG_FILES, see scripts/sources.sh) or update their pins" >&2
  exit 1
fi
if [ $strict -eq 1 ] && [ $gone -gt 0 ]; then
  echo "check_sources: $gone pinned file(s) gone (--strict)" >&2
  exit 1
fi
echo "check_sources: a fresh machine can fetch every server's files"
