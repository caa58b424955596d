#!/usr/bin/env bash
# Builds the release archive of snowflake_id for one PostgreSQL major version:
#
#   scripts/package.sh                      # PostgreSQL 15 (Debian's pg_config)
#   scripts/package.sh --pg 17              # 16, 17 or 18, as scripts/setup.sh --pg installs them
#   scripts/package.sh --pg all             # one archive for each of 15, 16, 17 and 18
#   PG_CONFIG=/path/to/pg_config scripts/package.sh   # any other server (PGDG packages, a source build)
#
# It runs `cargo pgrx package` (a release build plus the generated install
# script) and packs its output into
#   target/package/snowflake_id-<version>-pg<major>-linux-<arch>.tar.gz
# whose paths are the server's own directories, relative to /:
#   <pkglibdir>/snowflake_id.so                          the library
#   <sharedir>/extension/snowflake_id.control            the control file
#   <sharedir>/extension/snowflake_id--<version>.sql     the install script
#   <sharedir>/extension/snowflake_id--<a>--<b>.sql      upgrade scripts (sql/)
# so that on a server with the same PostgreSQL packages (same pg_config
# paths, same or newer glibc; no Rust needed) `tar -xzf <archive> -C /`
# installs it. Prints the archive's path on the last line.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=postgres.sh
. scripts/postgres.sh

if [ "${1:-}" = --pg ]; then
  [ $# -eq 2 ] || { echo "package: usage: scripts/package.sh [--pg 15|16|17|18|all]" >&2; exit 2; }
  if [ "$2" = all ]; then
    for v in "${SF_PG_VERSIONS[@]}"; do bash "$ROOT/scripts/package.sh" --pg "$v"; done
    exit 0
  fi
  PG_CONFIG=$(pg_config_for "$2")
  [ -n "$PG_CONFIG" ] || { echo "package: PostgreSQL $2 is not installed (scripts/setup.sh --pg $2)" >&2; exit 1; }
elif [ $# -gt 0 ]; then
  echo "package: usage: scripts/package.sh [--pg 15|16|17|18|all]" >&2; exit 2
fi
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
major=$(pg_major "$PG_CONFIG")
[ -n "$version" ] && [ -n "$major" ] || { echo "package: cannot read the version or PostgreSQL major" >&2; exit 1; }

staged="target/release/snowflake_id-pg$major"
rm -rf "$staged"   # no leftovers (an upgrade script removed from sql/)
cargo pgrx package --pg-config "$PG_CONFIG" >&2
[ -f "$staged$("$PG_CONFIG" --pkglibdir)/snowflake_id.so" ] || { echo "package: $staged has no library" >&2; exit 1; }

mkdir -p target/package
archive="target/package/snowflake_id-$version-pg$major-linux-$(uname -m).tar.gz"
# Files only: directory entries would reset the modes of /usr and friends
# when extracted with -C /.
(cd "$staged" && find . -type f | sort) |
  tar -C "$staged" --owner=0 --group=0 --numeric-owner --no-recursion -czf "$archive" -T -
tar -tzvf "$archive" >&2
echo "$ROOT/$archive"
