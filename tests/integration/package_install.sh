#!/usr/bin/env bash
# The release archive installs where there is no Rust, and versions upgrade.
#
# 1. scripts/package.sh builds the archive (cargo pgrx package + tar) and
#    the Debian package: the package holds the same files, byte for byte,
#    in the Debian layout of this major, with a control file that depends
#    on postgresql-NN (tests/integration/deb_package.sh installs it with
#    apt-get on Debian's 15).
# 2. A clean PostgreSQL root: a copy of the tested server's installation (PG_BIN:
#    Debian's 15 by default, scripts/test.sh --pg NN sets another) under a
#    scratch prefix, without any snowflake_id file (PostgreSQL finds its
#    share and lib directories relative to its binaries, so the copy is a
#    self-contained installation). The archive is extracted into it exactly
#    as on a server (`tar -xzf ... -C /`).
# 3. The library needs nothing but libc and libgcc (no Rust runtime); a
#    cluster of the copied binaries, with PATH free of cargo, preloads it,
#    and CREATE EXTENSION, snowflake_next() and the other functions work.
# 4. Versioning (see sql/README.md):
#    a. the frozen install script of the current version,
#       sql/snowflake_id--<version>.sql, gives the same catalog as the one
#       the sources generate;
#    b. from every other frozen version, ALTER EXTENSION snowflake_id UPDATE
#       through the upgrade scripts in the archive gives the same catalog as
#       a fresh install of the current version (and before the update, the
#       old catalog's snowflake_stats() works with the new library);
#    c. the check itself works: with a synthetic older version that lacks
#       snowflake_parse, an empty upgrade script is caught and one that
#       creates the function passes.
# The system installation is neither read for the extension nor changed.
#
# Run from the repository root (builds the release library if needed):
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/package_install.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

SYS_CONFIG=$PG_BIN/pg_config
LIBDIR=$("$SYS_CONFIG" --pkglibdir)
SHAREDIR=$("$SYS_CONFIG" --sharedir)
BINDIR=$("$SYS_CONFIG" --bindir)
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)

# --- 1. the archive
PG_CONFIG=$SYS_CONFIG bash scripts/package.sh 2>"$SF_WORK/package.log" > "$SF_WORK/package.out" || { cat "$SF_WORK/package.log"; fail "scripts/package.sh failed"; }
deb=$(tail -2 "$SF_WORK/package.out" | head -1)
archive=$(tail -1 "$SF_WORK/package.out")
[ -f "$archive" ] || fail "no archive at '$archive'"
[ -f "$deb" ] || fail "no Debian package at '$deb'"
echo "archive: $archive"
tar -tzvf "$archive"
expected=$(printf '%s\n' \
  ".$LIBDIR/snowflake_id.so" \
  ".$SHAREDIR/extension/snowflake_id--$version.sql" \
  ".$SHAREDIR/extension/snowflake_id.control" \
  $(cd sql && ls snowflake_id--*--*.sql 2>/dev/null | sed "s|^|.$SHAREDIR/extension/|") | sort)
[ "$(tar -tzf "$archive" | sort)" = "$expected" ] || fail "the archive does not hold exactly:
$expected"
pass "the archive holds the library, the control file, the install script and the upgrade scripts"

# The Debian package: the same files in the Debian layout for this major
# (/usr/lib/postgresql/NN/lib, /usr/share/postgresql/NN/extension), each
# byte for byte the archive's file at this server's pg_config path, plus
# its documentation; and a control file for this major.
major=$(pg_major "$SYS_CONFIG")
pkg="postgresql-$major-snowflake-id"
[ "$(basename "$deb")" = "${pkg}_$version-1_$(dpkg --print-architecture).deb" ] || fail "the Debian package is named $(basename "$deb")"
[ "$(dpkg-deb --field "$deb" Package)" = "$pkg" ] || fail "the package is not named $pkg"
[ "$(dpkg-deb --field "$deb" Version)" = "$version-1" ] || fail "the package's version is not $version-1"
mkdir -p "$SF_WORK/deb" "$SF_WORK/tar"
dpkg-deb -x "$deb" "$SF_WORK/deb"
depends=$(dpkg-deb --field "$deb" Depends)
server_depends=$(server_dependency "$SYS_CONFIG")
[[ $depends == "$server_depends, "* ]] || fail "the package's Depends does not begin with $server_depends: $depends"
grep -q "libc6 (>= " <<<"$depends" || fail "the package does not depend on libc6"
tar -xzf "$archive" -C "$SF_WORK/tar"
deb_files=$(cd "$SF_WORK/deb" && find . -type f | sort)
# debian_paths: the archive's paths (stdin) where the Debian package has them.
debian_paths() {
  sed "s|^\.$LIBDIR/|./usr/lib/postgresql/$major/lib/|; s|^\.$SHAREDIR/extension/|./usr/share/postgresql/$major/extension/|"
}
expected_deb=$(printf '%s\n' "$expected" | debian_paths
  printf '%s\n' ./usr/share/doc/$pkg/{copyright,changelog.Debian.gz,examples/queries.yaml,examples/alerts.yml})
[ "$deb_files" = "$(printf '%s\n' "$expected_deb" | sort)" ] || fail "the Debian package does not hold exactly:
$expected_deb
but:
$deb_files"
while read -r f; do
  mapped=$(printf '%s\n' "$f" | debian_paths)
  cmp -s "$SF_WORK/tar/$f" "$SF_WORK/deb/$mapped" || fail "$mapped in the Debian package differs from the archive's $f"
done <<< "$expected"
[ "$(dpkg-deb --contents "$deb" | awk '$2 != "root/root"' | wc -l)" = 0 ] || fail "the Debian package has files not owned by root"
pass "the Debian package $(basename "$deb") holds the same files in /usr/lib/postgresql/$major/lib and /usr/share/postgresql/$major/extension (Depends: $(dpkg-deb --field "$deb" Depends))"

# --- 2. a clean PostgreSQL root, and the archive extracted into it
root="$SF_WORK/root"
copy_postgres_tree "$SYS_CONFIG" "$root" || fail "could not copy the PostgreSQL installation"
# (The extension's files, not directories: the cache of scripts/postgres.sh
# is itself called snowflake_id.)
[ -z "$(find "$root" -type f -name 'snowflake_id*')" ] || fail "the clean root already has snowflake_id files"
[ "$("$root$BINDIR/pg_config" --sharedir)" = "$root$SHAREDIR" ] ||
  fail "the copied PostgreSQL does not find its share directory under the scratch prefix"
tar -xzf "$archive" -C "$root"
EXT="$root$SHAREDIR/extension"
pass "archive extracted into a clean PostgreSQL root at $root"

# --- 3. no Rust needed
lib="$root$LIBDIR/snowflake_id.so"
deps=$(ldd "$lib")
echo "$deps"
if grep -q "not found" <<<"$deps"; then fail "the library has missing dependencies"; fi
if grep -Eiq "libstd-|rustc|\.rustup|\.cargo" <<<"$deps"; then fail "the library depends on a Rust runtime"; fi
pass "the library needs only system libraries"

PG_BIN="$root$BINDIR"
# The system's programs without a Rust toolchain (Debian's rustc-web puts
# cargo and rustc in /usr/bin itself: scripts/rust.sh).
system_bin="$SF_WORK/bin-without-rust"
mkdir -p "$system_bin"
for f in /usr/bin/* /bin/*; do
  case ${f##*/} in cargo | cargo-* | rustc | rustdoc | rustfmt | clippy-driver | rust-*) continue ;; esac
  [ -e "$system_bin/${f##*/}" ] || ln -s "$f" "$system_bin/${f##*/}"
done
export PATH="$PG_BIN:/usr/sbin:/sbin:$system_bin"
command -v cargo >/dev/null && fail "cargo is still on PATH"
command -v rustc >/dev/null && fail "rustc is still on PATH"
cluster_init pkg "$(free_port)" "snowflake_id.node_id = 11"
cluster_start pkg || fail "a cluster of the clean root with the packaged library did not start"
psql_on pkg -c "CREATE EXTENSION snowflake_id"
[ "$(sql_value pkg "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")" = "$version" ] ||
  fail "the installed version is not $version"
[ "$(sql_value pkg "SELECT snowflake_node(snowflake_next()) = 11 AND snowflake_parse(snowflake_encode(snowflake_next())) > 0")" = t ] ||
  fail "snowflake_next/encode/parse do not work"
# The postmaster mapped the archive's library, not the system's.
postmaster=$(head -1 "$(cluster_dir pkg)/postmaster.pid")
mapped=$(grep -o '/[^ ]*snowflake_id\.so' "/proc/$postmaster/maps" | sort -u)
[ "$mapped" = "$lib" ] || fail "the server loaded '$mapped', not $lib"
pass "CREATE EXTENSION snowflake_id $version works from the archive"

# --- 4. versions
# fingerprint DB: every object of the extension, with its full definition
# (functions: arguments, defaults, result, volatility, strictness, parallel
# safety, C symbol; the type: storage, category and I/O functions; casts:
# context, method and function) and privileges.
fingerprint() {
  psql_on pkg -d "$1" -At -c "
    SELECT string_agg(x, E'\n' ORDER BY x) FROM (
      SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
             || CASE WHEN d.classid = 'pg_proc'::regclass
                     THEN E'\n' || pg_get_functiondef(d.objid)
                          || ' acl=' || coalesce((SELECT proacl::text FROM pg_proc WHERE oid = d.objid), 'default')
                     WHEN d.classid = 'pg_type'::regclass
                     THEN (SELECT format(' len=%s byval=%s align=%s storage=%s category=%s io=%s/%s/%s/%s',
                                         typlen, typbyval, typalign, typstorage, typcategory,
                                         typinput, typoutput, typreceive, typsend)
                           FROM pg_type WHERE oid = d.objid)
                     WHEN d.classid = 'pg_cast'::regclass
                     THEN (SELECT format(' context=%s method=%s function=%s',
                                         castcontext, castmethod, castfunc::regprocedure)
                           FROM pg_cast WHERE oid = d.objid)
                     ELSE '' END
      FROM pg_depend d
      WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
        AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')) s(x)"
}
fresh_db() { psql_on pkg -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"; }

fresh_db v_current
psql_on pkg -d v_current -c "CREATE EXTENSION snowflake_id"
current=$(fingerprint v_current)
[ -n "$current" ] || fail "empty fingerprint"

# a. the frozen script of the current version
frozen="sql/snowflake_id--$version.sql"
[ -f "$frozen" ] || fail "$frozen is missing: run scripts/freeze_schema.sh"
generated="$EXT/snowflake_id--$version.sql"
cp "$generated" "$SF_WORK/generated.sql"
cp "$frozen" "$generated"
fresh_db v_frozen
psql_on pkg -d v_frozen -c "CREATE EXTENSION snowflake_id"
cp "$SF_WORK/generated.sql" "$generated"
if [ "$(fingerprint v_frozen)" != "$current" ]; then
  diff <(fingerprint v_frozen) <(echo "$current") || true
  fail "$frozen differs from what the sources generate (above: < frozen, > generated).
  If $version is not released yet: run scripts/freeze_schema.sh.
  If it is: bump the version in Cargo.toml and write sql/snowflake_id--$version--<new>.sql."
fi
pass "$frozen matches the generated install script"

# b. every older frozen version updates to the current one
older=0
for f in sql/snowflake_id--*.sql; do
  v=$(basename "$f" .sql); v=${v#snowflake_id--}
  case $v in *--*) continue ;; esac
  [ "$v" = "$version" ] && continue
  older=$((older + 1))
  cp "$f" "$EXT/"
  db="v_from_$(echo "$v" | tr -c '0-9a-z\n' '_')"
  fresh_db "$db"
  psql_on pkg -d "$db" -c "CREATE EXTENSION snowflake_id VERSION '$v'"
  # The old catalog works with the new library until the update.
  [ "$(psql_on pkg -d "$db" -At -c "SELECT ids_issued >= 0 AND node_id = 11 FROM snowflake_stats()")" = t ] ||
    fail "snowflake_stats() of the $v catalog does not work with the $version library"
  psql_on pkg -d "$db" -c "ALTER EXTENSION snowflake_id UPDATE"
  [ "$(fingerprint "$db")" = "$current" ] || {
    diff <(fingerprint "$db") <(echo "$current") || true
    fail "$v updated to $version differs from a fresh install of $version (above: < updated, > fresh)"
  }
  pass "ALTER EXTENSION UPDATE from $v gives the same catalog as a fresh $version"
done
echo "$older older frozen version(s) checked"

# c. the check catches a wrong upgrade script: version 0.0.0-test is the
# current install script without snowflake_parse.
awk 'BEGIN { RS = "/\\* <begin connected objects> \\*/" } /snowflake_parse/ { print; exit }' "$generated" \
  > "$SF_WORK/parse_fn.sql"
grep -q 'CREATE  *FUNCTION "snowflake_parse"' "$SF_WORK/parse_fn.sql" || fail "could not cut snowflake_parse out of the install script"
{ cat "$generated"; echo 'DROP FUNCTION snowflake_parse(text, text);'; } > "$EXT/snowflake_id--0.0.0-test.sql"
: > "$EXT/snowflake_id--0.0.0-test--$version.sql"
fresh_db v_selftest
psql_on pkg -d v_selftest -c "CREATE EXTENSION snowflake_id VERSION '0.0.0-test'" -c "ALTER EXTENSION snowflake_id UPDATE"
[ "$(fingerprint v_selftest)" != "$current" ] || fail "the check did not notice an upgrade script that misses snowflake_parse"
cp "$SF_WORK/parse_fn.sql" "$EXT/snowflake_id--0.0.0-test--$version.sql"
fresh_db v_selftest
psql_on pkg -d v_selftest -c "CREATE EXTENSION snowflake_id VERSION '0.0.0-test'" -c "ALTER EXTENSION snowflake_id UPDATE"
[ "$(fingerprint v_selftest)" = "$current" ] || {
  diff <(fingerprint v_selftest) <(echo "$current") || true
  fail "the check refused a correct upgrade script"
}
pass "the catalog check catches a missing function and accepts the fix"

pass "package_install"
