#!/usr/bin/env bash
# Freezes the install script of the version in Cargo.toml as
# sql/snowflake_id--<version>.sql: the script a server that installed this
# version ran. tests/integration/package_install.sh checks that it still
# matches what the sources generate (as a catalog, not as text) and that
# every upgrade script leads from a frozen version to the current one.
#
# Run it before tagging a release, and while the version is unreleased
# whenever the SQL functions change. Once a version is released its frozen
# script never changes: bump the version in Cargo.toml and add
# sql/snowflake_id--<old>--<new>.sql instead.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
archive=$(bash scripts/package.sh | tail -1)
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
major=$("$PG_CONFIG" --version | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p')
generated="target/release/snowflake_id-pg$major$("$PG_CONFIG" --sharedir)/extension/snowflake_id--$version.sql"
cp "$generated" "sql/snowflake_id--$version.sql"
echo "froze sql/snowflake_id--$version.sql (from $archive)"
