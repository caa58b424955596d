#!/usr/bin/env bash
# Builds the PGXN release zip: target/package/snowflake_id-<version>.zip,
# the tracked files of the working tree (uncommitted changes included, new
# files once added to git) under one directory snowflake_id-<version>/, with
# META.json at its top (PGXN's layout). Upload it at https://manager.pgxn.org.
# Prints the zip's path.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || { echo "pgxn: cannot read the version in Cargo.toml" >&2; exit 1; }
tree=$(git stash create 2>/dev/null || true)
mkdir -p target/package
zip="$ROOT/target/package/snowflake_id-$version.zip"
git archive --format=zip --prefix="snowflake_id-$version/" -o "$zip" "${tree:-HEAD}"
echo "$zip"
