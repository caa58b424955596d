#!/usr/bin/env bash
# Builds the release packages of snowflake_id for one PostgreSQL major version:
#
#   scripts/package.sh                      # PostgreSQL 15 (Debian's pg_config)
#   scripts/package.sh --pg 17              # 16 to 19, as scripts/setup.sh --pg installs them
#   scripts/package.sh --pg all             # packages for each of 15 to 19
#   PG_CONFIG=/path/to/pg_config scripts/package.sh   # any other server (a source build)
#   scripts/package.sh --git-rev REV        # the packages of an earlier commit (a previous
#                                           # release, for the upgrade test; cached)
#   scripts/package.sh --arch arm64         # for arm64, built on amd64 (scripts/cross.sh:
#                                           # how, and what it installs first)
#
# It runs `cargo pgrx package` (a release build plus the generated install
# script) and makes two packages of its output, in target/package/:
#
# 1. The Debian package postgresql-<major>-snowflake-id_<version>-1_<arch>.deb
#    (<arch>: amd64, or arm64 with --arch arm64),
#    in the layout of Debian's and the PostgreSQL project's (apt.postgresql.org)
#    server packages, whatever pg_config built it:
#      /usr/lib/postgresql/<major>/lib/snowflake_id.so
#      /usr/share/postgresql/<major>/extension/snowflake_id.control,
#        snowflake_id--<version>.sql and the upgrade scripts (sql/)
#      /usr/share/doc/postgresql-<major>-snowflake-id/: copyright,
#        changelog.Debian.gz, examples/ (the monitoring queries and rules)
#    Depends on postgresql-<major> and on the libraries the .so links
#    (dpkg-shlibdeps); on postgresql-<major> (>= <the headers' minor
#    release>) when the headers declare a server function that came in a
#    minor release (heap_datum_check(): 15.20, 17.12, ...: a server
#    without it refuses a library that calls it). `apt-get install
#    ./<file>.deb` installs it.
# 2. The archive snowflake_id-<version>-pg<major>-linux-<machine>.tar.gz
#    (<machine>: x86_64 or aarch64), whose
#    paths are the building server's own directories (pg_config's pkglibdir
#    and sharedir), relative to /, for servers not packaged by Debian:
#    `tar -xzf <archive> -C /` on a server with the same paths.
# Neither needs Rust where it is installed. Prints the archive's path on the
# last line, the Debian package's on the line before.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=postgres.sh
. scripts/postgres.sh
# shellcheck source=rust.sh
. scripts/rust.sh

usage() { echo "package: usage: scripts/package.sh [--pg 15|16|17|18|19|all] [--arch amd64|arm64] [--git-rev REV]" >&2; exit 2; }
git_rev="" arch=$(dpkg --print-architecture) all=0
while [ $# -gt 0 ]; do
  case $1 in
    --pg)
      [ $# -ge 2 ] || usage
      if [ "$2" = all ]; then all=1; shift 2; continue; fi
      PG_CONFIG=$(pg_config_for "$2")
      [ -n "$PG_CONFIG" ] || { echo "package: PostgreSQL $2 is not installed (scripts/setup.sh --pg $2)" >&2; exit 1; }
      shift 2 ;;
    --git-rev) [ $# -ge 2 ] || usage; git_rev=$2; shift 2 ;;
    --arch)
      [ $# -ge 2 ] || usage
      case $2 in amd64 | arm64) arch=$2 ;; *) usage ;; esac
      shift 2 ;;
    *) usage ;;
  esac
done
if [ "$all" = 1 ]; then
  for v in "${SF_PG_VERSIONS[@]}"; do bash "$ROOT/scripts/package.sh" --pg "$v" --arch "$arch"; done
  exit 0
fi
# Another architecture than this machine's: a cross build.
cross=""
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
  [ "$arch" = arm64 ] && [ "$(dpkg --print-architecture)" = amd64 ] ||
    { echo "package: $arch packages are built on amd64 or on $arch itself" >&2; exit 1; }
  [ -z "$git_rev" ] || { echo "package: --git-rev builds for this machine only" >&2; exit 1; }
  # shellcheck source=cross.sh
  . scripts/cross.sh
  cross=$SF_CROSS_TARGET
fi
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
major=$(pg_major "$PG_CONFIG")
case $arch in amd64) machine=x86_64 ;; arm64) machine=aarch64 ;; *) machine=$(uname -m) ;; esac
[ -n "$major" ] || { echo "package: cannot read the PostgreSQL major of $PG_CONFIG" >&2; exit 1; }
out="$ROOT/target/package"
mkdir -p "$out"
# Where cargo builds: this tree's, or CARGO_TARGET_DIR.
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
# One build and copy at a time in a target directory: every version's build
# writes the same target/debug/libsnowflake_id.so, which cargo pgrx copies
# after cargo has let go of its own lock, and scripts/test.sh runs two
# versions at once (its with_install_lock takes the same lock). A nested
# run (--git-rev builds through this script) holds it already.
if [ -z "${SF_INSTALL_LOCK_HELD:-}" ]; then
  mkdir -p "$target_dir"
  exec 8>"$target_dir/.snowflake_install.lock"
  flock 8
  export SF_INSTALL_LOCK_HELD=1
fi

# An earlier commit: its sources from git, built in a directory of their own
# (in this tree's target directory: below), packed by this script. A commit's packages never change, so they are kept in the
# cache of scripts/postgres.sh and built once per machine.
if [ -n "$git_rev" ]; then
  commit=$(git -C "$ROOT" rev-parse --verify "$git_rev^{commit}" 2>/dev/null) ||
    { echo "package: $git_rev is not a commit of this clone (a shallow clone lacks old commits: git fetch --unshallow)" >&2; exit 1; }
  cache="$SF_PG_CACHE/packages/$commit-pg$major-$(basename "$(dirname "$(dirname "$PG_CONFIG")")")"
  if [ ! -f "$cache/.done" ]; then
    src="$out/src-$commit"
    rm -rf "$src" && mkdir -p "$src"
    git -C "$ROOT" archive "$commit" | tar -x -C "$src"
    # This script, not the commit's (older ones made no Debian package),
    # and the toolchain script it sources (older ones had none).
    cp "$ROOT/scripts/package.sh" "$ROOT/scripts/rust.sh" "$src/scripts/"
    # Built with this tree's pgrx (its pins and lock file): cargo-pgrx
    # builds only the pgrx it is the version of, and a second cargo-pgrx
    # (plus a release build with its own dependencies) cost 7 of the 9
    # minutes of tests/integration/deb_package.sh on a bare machine. The
    # package is that release's code and SQL (its catalog is checked against
    # the frozen sql/snowflake_id--<version>.sql by package_install.sh), a
    # debug build: it is only the starting point of an upgrade test.
    old_pgrx=$(sed -nE 's/^pgrx = "=?([0-9.]+)"$/\1/p' "$src/Cargo.toml")
    new_pgrx=$(sed -nE 's/^pgrx = "=?([0-9.]+)"$/\1/p' "$ROOT/Cargo.toml")
    [ -n "$old_pgrx" ] && [ -n "$new_pgrx" ] || { echo "package: cannot read the pgrx versions of $commit and of this tree" >&2; exit 1; }
    if [ "$old_pgrx" != "$new_pgrx" ]; then
      echo "package: building $commit (pgrx $old_pgrx) with this tree's pgrx $new_pgrx" >&2
      sed -i -E "s/^(pgrx(-tests)? = \")=?$old_pgrx\"/\1=$new_pgrx\"/" "$src/Cargo.toml"
      cp "$ROOT/Cargo.lock" "$src/Cargo.lock"
    fi
    # And with this tree's feature resolver and build-script settings
    # (Cargo.toml), which decide whether its dependencies are the ones
    # already built here: with the edition's resolver instead, most of
    # them (pgrx's bindings among them) were built again, 200 s of a bare
    # machine's run instead of about 30.
    resolver=$(sed -nE 's/^resolver = "([0-9])"$/\1/p' "$ROOT/Cargo.toml")
    if [ -n "$resolver" ] && ! grep -q '^resolver = ' "$src/Cargo.toml"; then
      sed -i "/^edition = /a resolver = \"$resolver\"" "$src/Cargo.toml"
    fi
    if grep -q '^\[profile.dev.build-override\]' "$ROOT/Cargo.toml" &&
      ! grep -q '^\[profile.dev.build-override\]' "$src/Cargo.toml"; then
      { echo; sed -n '/^\[profile.dev.build-override\]/,/^$/p' "$ROOT/Cargo.toml"; } >>"$src/Cargo.toml"
    fi
    # In this tree's target directory, whose debug build of the same pgrx
    # for the same server (cargo pgrx test's) it reuses: a build of the
    # release's crate alone, half a minute instead of five on a bare
    # machine. The crate's library files are not named by a hash (cdylib
    # and lib in one unit), so the release's build overwrites this tree's
    # target/debug/libsnowflake_id.so and .rlib while cargo still counts this
    # tree's build as fresh: they are removed after it (also when it fails),
    # so the next build of this tree makes them again.
    forget_previous_outputs() {
      rm -f "$target_dir"/debug/libsnowflake_id.{so,rlib,d} "$target_dir"/debug/deps/libsnowflake_id.{so,rlib} \
        "$target_dir"/debug/deps/snowflake_id.d
    }
    trap forget_previous_outputs EXIT
    (cd "$src" && CARGO_TARGET_DIR="$target_dir" PG_CONFIG="$PG_CONFIG" \
      SF_PACKAGE_OUT="$src/out" SF_PACKAGE_DATE="$(git -C "$ROOT" log -1 --format=%aD "$commit")" SF_PACKAGE_DEBUG=1 \
      bash scripts/package.sh > /dev/null)
    forget_previous_outputs
    trap - EXIT
    rm -rf "$cache" && mkdir -p "$cache"
    cp "$src"/out/* "$cache/"
    touch "$cache/.done"
    rm -rf "$src"
  fi
  find "$cache" -maxdepth 1 -type f ! -name .done -exec cp {} "$out/" \;
  deb=$(cd "$cache" && ls -1 ./*.deb); archive=$(cd "$cache" && ls -1 ./*.tar.gz)
  echo "$out/${deb#./}"
  echo "$out/${archive#./}"
  exit 0
fi
out=${SF_PACKAGE_OUT:-$out}
mkdir -p "$out"

version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || { echo "package: cannot read the version in Cargo.toml" >&2; exit 1; }
pkglibdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
# SF_PACKAGE_DEBUG=1: a debug build, for tests only: an earlier commit's
# package (above), the starting point of an upgrade test; and on 16 to 19
# in scripts/test.sh, whose installed build is a debug build (the packages
# are tested for their files, layout and installation, not their speed).
# The same files and install script as the release build, in a fraction of
# the time on 2 cores.
profile=release package_args=()
if [ "${SF_PACKAGE_DEBUG:-0}" = 1 ]; then profile=debug package_args=(--debug); fi
staged="$target_dir/$profile/snowflake_id-pg$major"
if [ -n "$cross" ]; then
  cross_ensure && cross_env "$major" || { echo "package: the arm64 build's toolchain or headers are missing (above)" >&2; exit 1; }
  package_args+=(--target "$cross")
  staged="$target_dir/$cross/$profile/snowflake_id-pg$major"
fi
rm -rf "$staged"   # no leftovers (an upgrade script removed from sql/)
cargo pgrx package "${package_args[@]}" --pg-config "$PG_CONFIG" >&2
[ -f "$staged$pkglibdir/snowflake_id.so" ] || { echo "package: $staged has no library" >&2; exit 1; }

# --- the Debian package
pkg="postgresql-$major-snowflake-id"
debversion="$version-1"
root="$target_dir/package-root/$pkg-$arch"
rm -rf "$root"
libdir="$root/usr/lib/postgresql/$major/lib"
extdir="$root/usr/share/postgresql/$major/extension"
docdir="$root/usr/share/doc/$pkg"
install -d -m 755 "$libdir" "$extdir" "$docdir" "$root/DEBIAN"
install -m 644 "$staged$pkglibdir/snowflake_id.so" "$libdir/"
for f in "$staged$sharedir/extension/"*; do install -m 644 "$f" "$extdir/"; done
if [ -d monitoring ]; then
  install -d -m 755 "$docdir/examples"
  for f in monitoring/queries.yaml monitoring/alerts.yml; do
    [ -f "$f" ] && install -m 644 "$f" "$docdir/examples/"
  done
fi
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: snowflake_id"
  echo
  echo "Files: *"
  echo "Copyright: 2026 the snowflake_id developers"
  echo "License: PostgreSQL"
  if [ -f LICENSE ]; then sed -n '3,$p' LICENSE | sed 's/^$/./; s/^/ /'; fi
} > "$docdir/copyright"
chmod 644 "$docdir/copyright"
# The date of the commit built, so that a rebuild makes the same changelog.
date=${SF_PACKAGE_DATE:-$(git -C "$ROOT" log -1 --format=%aD 2>/dev/null || date -R)}
printf '%s (%s) unstable; urgency=medium\n\n  * snowflake_id %s for PostgreSQL %s.\n\n -- snowflake_id developers <maintainers@snowflake-id.invalid>  %s\n' \
  "$pkg" "$debversion" "$version" "$major" "$date" | gzip -9n > "$docdir/changelog.Debian.gz"
chmod 644 "$docdir/changelog.Debian.gz"
# The libraries the .so needs, as Debian package dependencies.
shlibs=$(
  tmp=$(mktemp -d)
  mkdir "$tmp/debian" && echo "Source: $pkg" > "$tmp/debian/control"
  cd "$tmp" && dpkg-shlibdeps -O "$libdir/snowflake_id.so" 2>/dev/null | sed -n 's/^shlibs:Depends=//p'
  rm -rf "$tmp"
)
[ -n "$shlibs" ] || { echo "package: dpkg-shlibdeps found no dependencies of snowflake_id.so" >&2; exit 1; }
# The server's own functions are not in a shared library, so dpkg-shlibdeps
# cannot see them. Headers that version composite datums (CVE-2026-6460's
# fix, in a minor release of each major) declare heap_datum_check(), which
# their inline heap_getattr() calls and pgrx 0.19.4 calls in its own
# (pg_server_dependency, scripts/postgres.sh): the headers' minor release
# is then the least server of the major the library is built for, whether
# or not this build's linker kept the call.
server_depends=$(pg_server_dependency "$major" "${PGRX_INCLUDEDIR_SERVER:-$("$PG_CONFIG" --includedir-server)}") || exit 1
(cd "$root" && find usr -type f | sort | xargs md5sum) > "$root/DEBIAN/md5sums"
cat > "$root/DEBIAN/control" <<EOF
Package: $pkg
Version: $debversion
Architecture: $arch
Maintainer: snowflake_id developers <maintainers@snowflake-id.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $server_depends, $shlibs
Section: database
Priority: optional
Description: time-ordered unique 64-bit IDs for PostgreSQL $major
 snowflake_id issues 64-bit, time-ordered, globally unique IDs from inside
 PostgreSQL: id bigint PRIMARY KEY DEFAULT snowflake_next(). The generator
 lives in shared memory (shared_preload_libraries = 'snowflake_id'), is
 lock-free, and never issues the same ID twice on one node, also when the
 clock steps back or the server crashes; a node-id registry keeps node ids
 unique across a fleet.
 .
 This package is for PostgreSQL $major.
EOF
deb="$out/${pkg}_${debversion}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
dpkg-deb --info "$deb" >&2
dpkg-deb --contents "$deb" >&2

# --- the archive (files only: directory entries would reset the modes of
# /usr and friends when extracted with -C /)
archive="$out/snowflake_id-$version-pg$major-linux-$machine.tar.gz"
(cd "$staged" && find . -type f | sort) |
  tar -C "$staged" --owner=0 --group=0 --numeric-owner --no-recursion -czf "$archive" -T -
tar -tzvf "$archive" >&2
echo "$deb"
echo "$archive"
