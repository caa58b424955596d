#!/usr/bin/env bash
# A release folder (scripts/release.sh) checked as its users meet it: the
# checksums, every file that should be there and nothing else, and each
# package installed on a server of its major and architecture, which then
# issues IDs.
#
#   bash tests/release/release_folder.sh target/release-0.3.0
#
#   1. `sha256sum -c SHA256SUMS` passes in the folder; SHA256SUMS lists every
#      file of the folder; the folder has, for each major of
#      SF_PG_VERSIONS, the .deb and the archive for amd64 and arm64, and the
#      PGXN zip and the source tarball (with Cargo.lock and Cargo.toml of
#      the folder's version).
#   2. Per major: the arm64 package has the amd64 one's paths, modes and
#      dependencies, its SQL and control files byte for byte; each library
#      is an ELF of its architecture; each archive holds the library and
#      SQL files of the .deb of its architecture, byte for byte.
#   3. Installed and run, each on a cluster that preloads it: CREATE
#      EXTENSION gives the folder's version, 1,000 IDs as a column default
#      carry the node id and a time within a minute of the clock.
#        amd64, 15: apt-get install ./<deb> into Debian's PostgreSQL 15;
#        amd64, 17 and 19: the same in the Debian trixie and sid roots
#          (scripts/postgres.sh);
#        amd64, 16 and 18 (servers from wheels, not Debian's packages): the
#          archive unpacked over a copy of the server, as its users do;
#        arm64, 15, 17 and 19: apt-get install ./<deb> in a copy of the
#          arm64 Debian root with that server (12's 15, trixie's 17, sid's
#          19), the server run under emulation (scripts/cross.sh);
#        arm64, 16 and 18: the archive's files in the arm64 build of the
#          server's wheel, under emulation.
#      (For apt-get the development build of 15, 17 and 19 is moved out of the
#      server's directories and put back at the end, as in
#      tests/integration/deb_package.sh.)
#
# Needs root (apt-get, chroot, binfmt_misc), this repository's set-up with
# every version (scripts/setup.sh --pg all) and the arm64 roots (made when
# missing: minutes each). About 10 minutes on 2 cores once the roots are
# made, most of it emulation.
# Not in scripts/test.sh: it checks what scripts/release.sh made, which
# takes longer than the suite can spend (docs/releases.md).
set -euo pipefail
[ $# -eq 1 ] && [ -f "$1/SHA256SUMS" ] || { echo "usage: tests/release/release_folder.sh RELEASE_FOLDER (with its SHA256SUMS)" >&2; exit 2; }
folder=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. tests/integration/lib.sh
# shellcheck source=../../scripts/cross.sh
. scripts/cross.sh
[ "$(id -u)" -eq 0 ] || fail "release_folder installs packages with apt-get: run it as root"
started=$SECONDS

# --- 1. the checksums and the list of files
(cd "$folder" && sha256sum --quiet -c SHA256SUMS) || fail "sha256sum -c SHA256SUMS fails in $folder"
listed=$(awk '{ print $2 }' "$folder/SHA256SUMS" | sed 's/^\*//' | LC_ALL=C sort)
present=$(cd "$folder" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort)
[ "$listed" = "$present" ] || fail "SHA256SUMS does not list exactly the folder's files: $(diff <(echo "$listed") <(echo "$present") | grep '^[<>]' | tr '\n' ' ')"
src=$(cd "$folder" && ls -1 snowflake_id-*.tar.gz | grep -Ev -- '-pg[0-9]+-linux-' || true)
[ "$(wc -w <<<"$src")" = 1 ] || fail "expected one source tarball, found: ${src:-none}"
version=${src#snowflake_id-}
version=${version%.tar.gz}
expected="snowflake_id-$version.tar.gz
snowflake_id-$version.zip"
for major in "${SF_PG_VERSIONS[@]}"; do
  expected+="
postgresql-$major-snowflake-id_$version-1_amd64.deb
postgresql-$major-snowflake-id_$version-1_arm64.deb
snowflake_id-$version-pg$major-linux-x86_64.tar.gz
snowflake_id-$version-pg$major-linux-aarch64.tar.gz"
done
[ "$(LC_ALL=C sort <<<"$expected")" = "$present" ] ||
  fail "the folder's files are not a release's: $(diff <(LC_ALL=C sort <<<"$expected") <(echo "$present") | grep '^[<>]' | tr '\n' ' ')"
src_list=$(tar -tzf "$folder/$src")
for f in Cargo.lock Cargo.toml; do
  grep -qx "snowflake_id-$version/$f" <<<"$src_list" || fail "the source tarball has no snowflake_id-$version/$f"
done
[ "$(tar -xzOf "$folder/$src" "snowflake_id-$version/Cargo.toml" | sed -nE 's/^version = "([^"]+)"$/\1/p' | head -1)" = "$version" ] ||
  fail "the source tarball's Cargo.toml is not version $version"
pass "sha256sum -c SHA256SUMS: $(wc -l <"$folder/SHA256SUMS") files OK, the folder has every file of release $version and no other"

# --- 2. the packages of each major against each other and their archives
for major in "${SF_PG_VERSIONS[@]}"; do
  amd=$folder/postgresql-$major-snowflake-id_$version-1_amd64.deb
  arm=$folder/postgresql-$major-snowflake-id_$version-1_arm64.deb
  diff <(deb_paths "$amd") <(deb_paths "$arm") >"$SF_WORK/contents.diff" ||
    { cat "$SF_WORK/contents.diff" >&2; fail "$major: the arm64 package's paths or modes differ from the amd64 one's"; }
  [ "$(dpkg-deb -f "$arm" Depends)" = "$(dpkg-deb -f "$amd" Depends)" ] || fail "$major: the two packages' dependencies differ"
  server_depends=$(server_dependency "$(pg_config_for "$major")")
  [[ $(dpkg-deb -f "$amd" Depends) == "$server_depends, "* ]] || fail "$major: the package's Depends does not begin with $server_depends: $(dpkg-deb -f "$amd" Depends)"
  for arch in amd64 arm64; do
    deb=$folder/postgresql-$major-snowflake-id_$version-1_$arch.deb
    [ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$(basename "$deb"): Architecture $(dpkg-deb -f "$deb" Architecture)"
    [ "$(dpkg-deb -f "$deb" Version)" = "$version-1" ] || fail "$(basename "$deb"): Version $(dpkg-deb -f "$deb" Version)"
    x=$SF_WORK/deb-$major-$arch
    dpkg-deb -x "$deb" "$x"
    want=$([ "$arch" = amd64 ] && echo "Advanced Micro Devices X86-64" || echo AArch64)
    [ "$(elf_machine "$x/usr/lib/postgresql/$major/lib/snowflake_id.so")" = "$want" ] ||
      fail "$(basename "$deb"): its library is a $(elf_machine "$x/usr/lib/postgresql/$major/lib/snowflake_id.so") ELF"
    # The archive of the same architecture: the same files, by name.
    m=$([ "$arch" = amd64 ] && echo x86_64 || echo aarch64)
    t=$SF_WORK/tar-$major-$arch
    mkdir "$t" && tar -xzf "$folder/snowflake_id-$version-pg$major-linux-$m.tar.gz" -C "$t"
    n=0
    while IFS= read -r f; do
      in_tar=$(find "$t" -type f -name "$(basename "$f")")
      [ "$(wc -l <<<"$in_tar")" = 1 ] && [ -n "$in_tar" ] || fail "$major $arch: the archive does not hold $(basename "$f") once"
      cmp -s "$x/$f" "$in_tar" || fail "$major $arch: $(basename "$f") differs between the .deb and the archive"
      n=$((n + 1))
    done < <(cd "$x" && find usr/lib usr/share/postgresql -type f)
    [ "$(find "$t" -type f | wc -l)" = "$n" ] || fail "$major $arch: the archive holds $(find "$t" -type f | wc -l) files, the .deb $n"
  done
  while IFS= read -r f; do
    cmp -s "$SF_WORK/deb-$major-amd64/$f" "$SF_WORK/deb-$major-arm64/$f" || fail "$major: $f differs between amd64 and arm64"
  done < <(cd "$SF_WORK/deb-$major-amd64" && find usr/share/postgresql -type f)
done
pass "each major's arm64 package has the amd64 one's paths, modes, dependencies and SQL; each library an ELF of its architecture; each archive the files of its .deb, byte for byte"

# --- 3. installed, and run
# issues NAME NODE: CREATE EXTENSION on the running cluster NAME gives the
# folder's version, and 1,000 IDs as a column default carry NODE and a time
# within a minute of the clock.
issues() {
  local name=$1 node=$2
  psql_on "$name" -c "CREATE EXTENSION snowflake_id" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int)" \
    -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 1000) g" >/dev/null
  [ "$(sql_value "$name" "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'")" = "$version" ] ||
    fail "$name: CREATE EXTENSION did not give $version"
  [ "$(sql_value "$name" "SELECT count(DISTINCT id) = 1000 AND bool_and(snowflake_node(id) = $node)
                                 AND bool_and(abs(extract(epoch FROM snowflake_timestamp(id) - now())) < 60) FROM t")" = t ] ||
    fail "$name: the IDs are not 1,000 IDs of node id $node within a minute of the clock"
}
# run_server NAME NODE: a cluster of PG_BIN's server that preloads the
# library, started, checked by `issues`, stopped.
run_server() {
  cluster_init "$1" "$(free_port)" "snowflake_id.node_id = $2"
  cluster_start "$1" || { tail -20 "$(cluster_log "$1")" >&2; fail "$1: the server with the package's library did not start"; }
  issues "$1" "$2"
  cluster_stop "$1"
}
ran=()
# apt_install ROOT DEB: apt-get install ./DEB (a file of the folder) with
# the apt of the Debian at ROOT ("" for this machine's), and dpkg lists its
# package at the folder's version.
apt_install() {
  local root=$1 deb=$2 pkg=${2%%_*}
  cp "$folder/$deb" "${root:-}/tmp/"
  chroot "${root:-/}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "/tmp/$deb" >"$SF_WORK/apt.log" 2>&1 ||
    { cat "$SF_WORK/apt.log" >&2; fail "apt-get install ./$deb${root:+ in $root} failed"; }
  rm -f "${root:-}/tmp/$deb"
  [ "$(chroot "${root:-/}" dpkg-query -W -f '${Version} ${Status}' "$pkg")" = "$version-1 install ok installed" ] ||
    fail "dpkg${root:+ in $root} does not list $pkg $version-1 as installed"
}

# amd64 with apt-get: 15 into this machine's Debian, 17 and 19 into their
# Debian roots.
# ROOTFS is / or the root's path; the development build moved out first.
PKG_ROOTS=()
restore_devbuilds() {
  local entry root major pkg libdir extdir saved f
  for entry in "${PKG_ROOTS[@]}"; do
    IFS='|' read -r root major <<<"$entry"
    pkg=postgresql-$major-snowflake-id
    libdir=$root/usr/lib/postgresql/$major/lib extdir=$root/usr/share/postgresql/$major/extension
    saved=$SF_WORK/devbuild-$major
    if chroot "${root:-/}" dpkg -s "$pkg" >/dev/null 2>&1; then
      chroot "${root:-/}" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "$pkg" >/dev/null 2>&1 || true
    fi
    for f in "$saved"/snowflake_id*.so; do [ -e "$f" ] && mv "$f" "$libdir/"; done
    for f in "$saved"/snowflake_id*; do [ -e "$f" ] && mv "$f" "$extdir/"; done
  done
  return 0
}
trap 'rc=$?; set +e; for n in "${SF_CLUSTERS[@]}"; do cluster_stop "$n" immediate; done; restore_devbuilds; (exit $rc); _sf_cleanup' EXIT
for major in 15 17 19; do
  [[ " ${SF_PG_VERSIONS[*]} " == *" $major "* ]] || continue
  config=$(pg_config_for "$major")
  [ -n "$config" ] || fail "PostgreSQL $major is not installed (scripts/setup.sh --pg $major)"
  bindir=$("$config" --bindir)
  case $bindir in
    /usr/lib/postgresql/"$major"/bin) root="" ;;
    */usr/lib/postgresql/"$major"/bin) root=${bindir%/usr/lib/postgresql/*} ;;
    *) fail "PostgreSQL $major is not Debian's package ($bindir)" ;;
  esac
  pkg=postgresql-$major-snowflake-id
  chroot "${root:-/}" dpkg -s "$pkg" >/dev/null 2>&1 && fail "$pkg is already installed${root:+ in $root}: apt-get purge $pkg first"
  saved=$SF_WORK/devbuild-$major
  mkdir -p "$saved"
  PKG_ROOTS+=("$root|$major")
  for f in $(find "$root/usr/lib/postgresql/$major/lib" "$root/usr/share/postgresql/$major/extension" -maxdepth 1 -name 'snowflake_id*'); do
    mv "$f" "$saved/"
  done
  apt_install "$root" "postgresql-$major-snowflake-id_$version-1_amd64.deb"
  PG_BIN=$bindir run_server "amd64_$major" "$major"
  ran+=("$major amd64 (apt-get)")
done
restore_devbuilds
PKG_ROOTS=()

# amd64, the servers from wheels: the archive unpacked over a copy.
for major in 16 18; do
  [[ " ${SF_PG_VERSIONS[*]} " == *" $major "* ]] || continue
  config=$(pg_config_for "$major")
  [ -n "$config" ] || fail "PostgreSQL $major is not installed (scripts/setup.sh --pg $major)"
  copy=$SF_WORK/server-$major
  copy_postgres_tree "$config" "$copy" || fail "could not copy PostgreSQL $major's installation"
  tar -xzf "$folder/snowflake_id-$version-pg$major-linux-x86_64.tar.gz" -C "$copy"
  [ -f "$copy$("$config" --pkglibdir)/snowflake_id.so" ] ||
    fail "the $major archive's paths are not this server's ($("$config" --pkglibdir)): made with another SF_PG_CACHE?"
  chmod -R a+rX "$copy"
  PG_BIN=$copy$("$config" --bindir) run_server "amd64_$major" "$major"
  ran+=("$major amd64 (the archive)")
done

# arm64, under emulation.
base=$(arm64_root 15) || fail "no arm64 root (scripts/cross.sh arm64_root)"
# The arm64 servers' programs run through qemu with the root's libraries
# (the same in its copy), also when the EXIT trap stops them.
export QEMU_LD_PREFIX=$base
# arm64_apt MAJOR NODE: apt-get install ./<the arm64 deb> in a copy of the
# arm64 root with Debian's postgresql-MAJOR, and its server run.
arm64_apt() {
  local major=$1 node=$2 root
  root=$SF_WORK/arm64-root-$major
  cp -a "$(arm64_root "$major")" "$root" || fail "no arm64 root with PostgreSQL $major (scripts/cross.sh arm64_root $major)"
  apt_install "$root" "postgresql-$major-snowflake-id_$version-1_arm64.deb"
  [ "$(elf_machine "$root/usr/lib/postgresql/$major/bin/postgres")" = AArch64 ] || fail "the arm64 root's postgres is not an arm64 program"
  QEMU_LD_PREFIX=$root
  PG_BIN=$root/usr/lib/postgresql/$major/bin run_server "arm64_$major" "$node"
  ran+=("$major arm64 (apt-get, emulated)")
}
if [[ " ${SF_PG_VERSIONS[*]} " == *" 15 "* ]]; then arm64_apt 15 115; fi
QEMU_LD_PREFIX=$base
for major in 16 18; do
  [[ " ${SF_PG_VERSIONS[*]} " == *" $major "* ]] || continue
  bin=$(arm64_wheel_server "$major" "$SF_WORK/arm64-server-$major") || fail "no arm64 server of PostgreSQL $major"
  libdir=$("$bin/pg_config" --pkglibdir) sharedir=$("$bin/pg_config" --sharedir)
  install -m 755 "$(find "$SF_WORK/tar-$major-arm64" -name snowflake_id.so)" "$libdir/"
  find "$SF_WORK/tar-$major-arm64" -path '*/extension/*' -type f -exec install -m 644 {} "$sharedir/extension/" \;
  [ "$(elf_machine "$bin/postgres")" = AArch64 ] || fail "$bin/postgres is not an arm64 program"
  PG_BIN=$bin run_server "arm64_$major" "$((100 + major))"
  ran+=("$major arm64 (the archive, emulated)")
done
# (Last: their roots' libraries are trixie's and sid's, newer than what the
# others' programs were built with; the EXIT trap stops every cluster with
# sid's.)
if [[ " ${SF_PG_VERSIONS[*]} " == *" 17 "* ]]; then arm64_apt 17 117; fi
if [[ " ${SF_PG_VERSIONS[*]} " == *" 19 "* ]]; then arm64_apt 19 119; fi

pass "installed and run, CREATE EXTENSION gives $version, 1,000 IDs each: $(printf '%s; ' "${ran[@]}" | sed 's/; $//')"
pass "release_folder: $folder ($((SECONDS - started)) s)"
