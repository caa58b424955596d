#!/usr/bin/env bash
# The PGXN distribution: META.json follows the PGXN meta spec 1.0.0 as PGXN's
# own validator reads it (pgxn_meta, the PGXN project's crate; scripts/setup.sh
# installs it), and the release zip of scripts/pgxn.sh is what PGXN takes:
#   1. META.json is valid, and a copy with a wrong license is not (the
#      validator really validates);
#   2. its version is Cargo.toml's, the one extension it provides has that
#      version and points to that version's frozen install script, and its
#      docfile exists;
#   3. the zip holds one directory snowflake_id-<version>/ with META.json
#      (the same, and valid), the sources, the Makefile PGXN clients run, the
#      README and the LICENSE;
#   4. `make install` from the unpacked zip asks cargo-pgrx to install into
#      the given pg_config (make -n: nothing is built).
#   bash tests/integration/pgxn.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
export PATH="$HOME/.cargo/bin:$PATH"
command -v pgxn_meta >/dev/null || fail "pgxn_meta not found (cargo install pgxn_meta --version 0.7.0 --locked; scripts/setup.sh does)"
work=$(mktemp -d /tmp/snowflake_pgxn.XXXXXX)
trap 'rm -rf "$work"' EXIT

# --- 1.
pgxn_meta META.json || fail "pgxn_meta rejects META.json"
sed 's/"license": "postgresql"/"license": "postgresql-ish"/' META.json > "$work/bad.json"
cmp -s META.json "$work/bad.json" && fail "could not change the license in a copy of META.json"
if pgxn_meta "$work/bad.json" >/dev/null 2>&1; then fail "pgxn_meta accepts a META.json with an unknown license"; fi
pass "META.json is valid PGXN meta spec 1.0.0 (pgxn_meta $(pgxn_meta --version | awk '{ print $NF }')), and a wrong license is caught"

# --- 2.
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
meta() { python3 -c "import json, sys; d = json.load(open('META.json')); print(eval(sys.argv[1], {}, {'d': d}))" "$1"; }
[ "$(meta "d['version']")" = "$version" ] || fail "META.json's version $(meta "d['version']") is not Cargo.toml's $version"
[ "$(meta "sorted(d['provides'])")" = "['snowflake_id']" ] || fail "META.json provides $(meta "sorted(d['provides'])")"
[ "$(meta "d['provides']['snowflake_id']['version']")" = "$version" ] || fail "the provided extension's version is not $version"
[ "$(meta "d['provides']['snowflake_id']['file']")" = "sql/snowflake_id--$version.sql" ] || fail "the provided file is not sql/snowflake_id--$version.sql"
[ -f "sql/snowflake_id--$version.sql" ] || fail "sql/snowflake_id--$version.sql is missing"
[ -f "$(meta "d['provides']['snowflake_id']['docfile']")" ] || fail "the docfile is missing"
[ "$(meta "d['license']")" = postgresql ] && grep -q '^license = "PostgreSQL"$' Cargo.toml || fail "META.json and Cargo.toml disagree on the license"
pass "META.json: version $version, provides snowflake_id $version (sql/snowflake_id--$version.sql), license as Cargo.toml's"

# --- 3.
zip=$(bash scripts/pgxn.sh)
[ "$(basename "$zip")" = "snowflake_id-$version.zip" ] || fail "the zip is named $(basename "$zip")"
python3 - "$zip" "$version" <<'PY' || fail "the zip's layout is wrong"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
top = {n.split('/')[0] for n in z.namelist()}
want = 'snowflake_id-' + sys.argv[2]
assert top == {want}, f"top-level entries {sorted(top)}, not {want}/"
names = set(z.namelist())
for f in ['META.json', 'Makefile', 'README.md', 'LICENSE', 'Cargo.toml', 'Cargo.lock', 'snowflake_id.control',
          'src/lib.rs', 'sql/snowflake_id--' + sys.argv[2] + '.sql']:
    assert f"{want}/{f}" in names, f"{f} is missing"
PY
mkdir -p "$work/unzipped"
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$zip" "$work/unzipped"
dist="$work/unzipped/snowflake_id-$version"
cmp -s META.json "$dist/META.json" || fail "the zip's META.json differs from the working tree's"
pgxn_meta "$dist/META.json" >/dev/null || fail "pgxn_meta rejects the zip's META.json"
pass "$(basename "$zip"): one directory snowflake_id-$version/ with a valid META.json, the sources, Makefile, README.md and LICENSE"

# --- 4.
out=$(make -s -n -C "$dist" install PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config)
[ "$out" = 'cargo pgrx install --release --pg-config "/usr/lib/postgresql/15/bin/pg_config"' ] ||
  fail "make install in the unpacked zip would run: $out"
pass "make install in the unpacked zip runs cargo pgrx install --release --pg-config <the given pg_config>"

pass "pgxn"
