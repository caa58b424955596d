#!/usr/bin/env bash
# The Debian package, installed for real with apt-get into Debian's
# PostgreSQL 15, or into PostgreSQL 19 in the Debian sid root of
# scripts/postgres.sh (with that root's apt-get and dpkg, through chroot), as
# a user would (the README's first install instruction):
#
#   1. The development build (cargo pgrx install) is moved out of the
#      server's directories first, and put back at the end, also when the
#      test fails; no snowflake_id file is left there meanwhile.
#   2. The previous release's package (sql/releases: its commit, built by
#      scripts/package.sh --git-rev with this tree's pgrx, a debug build)
#      installs with apt-get; a fresh cluster
#      preloads it, CREATE EXTENSION gives that version, and IDs are issued.
#      (On 19, which no earlier release supports: this version's package
#      installs, CREATE EXTENSION gives this version, IDs are issued.)
#   3. This version's package upgrades it with apt-get; after the restart the
#      old catalog still works with the new library, ALTER EXTENSION
#      snowflake_id UPDATE brings the catalog to this version, and the IDs
#      issued after it are all above those issued before, none twice.
#   4. apt-get purge removes it: none of the files the package listed is
#      left, and no snowflake_id file remains in the server's directories.
#
# Needs root and Debian's postgresql-15, or the sid root's postgresql-19
# (scripts/setup.sh --pg 19). 16 to 18 come from wheels, not from Debian's
# packages: their packages are checked against their server's pg_config
# paths by package_install.sh.
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/deb_package.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "deb_package installs packages with apt-get: run it as root"
# ROOTFS: where Debian's packages of this server are installed: / for 15,
# the trixie root for 17, the sid root for 19 (PG_BIN is
# ROOTFS/usr/lib/postgresql/NN/bin).
case $PG_BIN in
  /usr/lib/postgresql/"$PG_MAJOR"/bin) ROOTFS="" ;;
  */usr/lib/postgresql/"$PG_MAJOR"/bin) ROOTFS=${PG_BIN%/usr/lib/postgresql/*} ;;
  *) fail "deb_package runs on a PostgreSQL from Debian's packages: 15, or 17 and 19 in their Debian roots (PG_BIN=$PG_BIN)" ;;
esac
# in_root COMMAND...: a command of that Debian (apt-get, dpkg).
in_root() { if [ -n "$ROOTFS" ]; then chroot "$ROOTFS" "$@"; else "$@"; fi; }
in_root dpkg -s "postgresql-$PG_MAJOR" >/dev/null 2>&1 ||
  fail "Debian's postgresql-$PG_MAJOR is not installed${ROOTFS:+ in $ROOTFS} (scripts/setup.sh --pg $PG_MAJOR)"
LIBDIR=$ROOTFS/usr/lib/postgresql/$PG_MAJOR/lib
EXTDIR=$ROOTFS/usr/share/postgresql/$PG_MAJOR/extension
PKG=postgresql-$PG_MAJOR-snowflake-id
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)

# The newest release below this version, and its commit.
read -r prev_version prev_commit < <(
  awk '!/^#/ && NF == 2 { print $1, $2 }' sql/releases |
    while read -r v c; do [ "$v" != "$version" ] && printf '%s %s\n' "$v" "$c"; done |
    sort -V | tail -1)
[ -n "${prev_commit:-}" ] || fail "sql/releases names no release before $version"
git cat-file -e "$prev_commit^{commit}" 2>/dev/null ||
  fail "$prev_commit ($prev_version) is not a commit of this clone (a shallow clone lacks old commits: git fetch --unshallow)"
# Did that release support this major? (A feature pgNN in its Cargo.toml.)
prev_toml=$(git show "$prev_commit:Cargo.toml")
grep -q "^pg$PG_MAJOR = " <<<"$prev_toml" || prev_commit=""

# --- the packages
if [ -n "$prev_commit" ]; then
  echo "building the $prev_version package (commit $prev_commit; cached after the first build)"
  bash scripts/package.sh --git-rev "$prev_commit" > "$SF_WORK/prev.out" 2> "$SF_WORK/prev.log" ||
    { tail -30 "$SF_WORK/prev.log"; fail "scripts/package.sh --git-rev $prev_commit failed"; }
  prev_deb=$(tail -2 "$SF_WORK/prev.out" | head -1)
  [ "$(dpkg-deb --field "$prev_deb" Version)" = "$prev_version-1" ] || fail "$prev_deb is not version $prev_version-1"
else
  echo "no release before $version supports PostgreSQL $PG_MAJOR: this version's package installs first"
fi
bash scripts/package.sh --pg "$PG_MAJOR" > "$SF_WORK/cur.out" 2> "$SF_WORK/cur.log" ||
  { tail -30 "$SF_WORK/cur.log"; fail "scripts/package.sh --pg $PG_MAJOR failed"; }
cur_deb=$(tail -2 "$SF_WORK/cur.out" | head -1)
[ "$(dpkg-deb --field "$cur_deb" Version)" = "$version-1" ] || fail "$cur_deb is not version $version-1"
depends=$(dpkg-deb --field "$cur_deb" Depends) server_depends=$(server_dependency "$PG_BIN/pg_config")
[[ $depends == "$server_depends, "* ]] || fail "$cur_deb's Depends does not begin with $server_depends: $depends"
pass "packages: ${prev_deb:+$(basename "$prev_deb") and }$(basename "$cur_deb")"

# --- 1. the development build out of the way, and back at the end
ours() { find "$LIBDIR" "$EXTDIR" -maxdepth 1 -name 'snowflake_id*' 2>/dev/null | sort; }
saved="$SF_WORK/devbuild"
mkdir -p "$saved"
in_root dpkg -s "$PKG" >/dev/null 2>&1 && fail "$PKG is already installed: apt-get purge $PKG first"
for f in $(ours); do mv "$f" "$saved/"; done
restore_devbuild() {
  if in_root dpkg -s "$PKG" >/dev/null 2>&1; then in_root apt-get purge -y -q "$PKG" >/dev/null 2>&1 || true; fi
  for f in "$saved"/snowflake_id*.so; do [ -e "$f" ] && mv "$f" "$LIBDIR/"; done
  for f in "$saved"/snowflake_id*; do [ -e "$f" ] && mv "$f" "$EXTDIR/"; done
  return 0
}
# (The clusters stop before the package goes: they run its library.)
# (set +e: a failing command in the trap must not end it early.)
trap 'rc=$?; set +e; for n in "${SF_CLUSTERS[@]}"; do cluster_stop "$n" immediate; done; restore_devbuild; (exit $rc); _sf_cleanup' EXIT
[ -z "$(ours)" ] || fail "snowflake_id files left in the server's directories: $(ours)"
pass "the development build is moved out ($(find "$saved" -type f | wc -l) files); none is left in $LIBDIR or $EXTDIR"

# apt_install DEB: apt-get install of a package file, in the root (which
# sees it under its /tmp).
apt_install() {
  local deb=$1
  if [ -n "$ROOTFS" ]; then cp "$1" "$ROOTFS/tmp/"; deb=/tmp/$(basename "$1"); fi
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb" > "$SF_WORK/apt.log" 2>&1 ||
    { cat "$SF_WORK/apt.log"; fail "apt-get install $1 failed"; }
  [ -z "$ROOTFS" ] || rm -f "$ROOTFS$deb"
}
installed_as() { # VERSION: dpkg lists the package at VERSION
  [ "$(in_root dpkg-query -W -f '${Version} ${Status}' "$PKG")" = "$1 install ok installed" ]
}

if [ -n "$prev_commit" ]; then
  # --- 2. the previous release
  apt_install "$prev_deb"
  installed_as "$prev_version-1" || fail "dpkg does not list $PKG $prev_version-1 as installed"
  first_version=$prev_version
else
  # --- 2. this version first (no earlier release for this major)
  apt_install "$cur_deb"
  installed_as "$version-1" || fail "dpkg does not list $PKG $version-1 as installed"
  first_version=$version
fi
cluster_init pkg "$(free_port)" "snowflake_id.node_id = 12"
cluster_start pkg || fail "a cluster with the $first_version package's library did not start"
psql_on pkg -c "CREATE EXTENSION snowflake_id" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int)"
[ "$(sql_value pkg "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")" = "$first_version" ] ||
  fail "CREATE EXTENSION did not give $first_version"
psql_on pkg -c "INSERT INTO t (v) SELECT 1 FROM generate_series(1, 5000)"
[ "$(sql_value pkg "SELECT count(*) FROM t WHERE snowflake_node(id) = 12")" = 5000 ] || fail "the $first_version package issued no IDs"
pass "apt-get install of $(basename "${prev_deb:-$cur_deb}"): CREATE EXTENSION gives $first_version, 5000 IDs issued"

# --- 3. the upgrade
if [ -n "$prev_commit" ]; then
  apt_install "$cur_deb"
  installed_as "$version-1" || fail "dpkg does not list $PKG $version-1 as installed after the upgrade"
  # The library is preloaded: the new one is loaded at the restart.
  cluster_stop pkg
  cluster_start pkg || fail "the cluster did not start with the upgraded package's library"
  postmaster=$(head -1 "$(cluster_dir pkg)/postmaster.pid")
  grep -qF "$(readlink -f "$LIBDIR")/snowflake_id.so" "/proc/$postmaster/maps" || fail "the server did not load $LIBDIR/snowflake_id.so"
  # Before the update: the old catalog with the new library.
  [ "$(sql_value pkg "SELECT ids_issued >= 0 AND node_id = 12 FROM snowflake_stats()")" = t ] ||
    fail "snowflake_stats() of the $prev_version catalog does not work with the $version library"
  psql_on pkg -c "INSERT INTO t (v) SELECT 2 FROM generate_series(1, 5000)"
  psql_on pkg -c "ALTER EXTENSION snowflake_id UPDATE"
  [ "$(sql_value pkg "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")" = "$version" ] ||
    fail "ALTER EXTENSION snowflake_id UPDATE did not reach $version"
  [ "$(sql_value pkg "SELECT issuing_held IS NULL AND lease_failures = 0 FROM snowflake_stats()")" = t ] ||
    fail "snowflake_stats() of $version does not show its new columns"
  psql_on pkg -c "INSERT INTO t (v) SELECT 3 FROM generate_series(1, 5000)"
  [ "$(sql_value pkg "SELECT count(*) = count(DISTINCT id) AND count(*) = 15000 FROM t")" = t ] || fail "IDs repeated across the upgrade"
  [ "$(sql_value pkg "SELECT (SELECT min(id) FROM t WHERE v = 2) > (SELECT max(id) FROM t WHERE v = 1)
                         AND (SELECT min(id) FROM t WHERE v = 3) > (SELECT max(id) FROM t WHERE v = 2)")" = t ] ||
    fail "IDs after the upgrade are not above those before it"
  pass "apt-get install of $(basename "$cur_deb") upgrades $prev_version: the old catalog works after the restart, ALTER EXTENSION UPDATE gives $version, 15000 IDs in order, none twice"
fi

# --- 4. removal
listed=$(in_root dpkg -L "$PKG" | sort)
cluster_stop pkg
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "$PKG" > "$SF_WORK/apt.log" 2>&1 || { cat "$SF_WORK/apt.log"; fail "apt-get purge failed"; }
in_root dpkg -s "$PKG" >/dev/null 2>&1 && fail "$PKG is still installed after apt-get purge"
left=""
while read -r f; do
  [ -f "$ROOTFS$f" ] && left="$left $ROOTFS$f"
  case $f in /usr/share/doc/$PKG*) [ -e "$ROOTFS$f" ] && left="$left $ROOTFS$f" ;; esac
done <<< "$listed"
[ -z "$left" ] || fail "files left after apt-get purge:$left"
[ -z "$(ours)" ] || fail "snowflake_id files left in the server's directories: $(ours)"
pass "apt-get purge: none of the $(printf '%s\n' "$listed" | wc -l) paths the package listed is left as a file, its doc directory is gone, no snowflake_id file in $LIBDIR or $EXTDIR"

pass "deb_package"
