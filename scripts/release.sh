#!/usr/bin/env bash
# Every file a release publishes, into one folder, with their checksums:
#
#   scripts/release.sh                 into target/release-<version>/
#   scripts/release.sh --out DIR       into DIR (made empty first)
#   scripts/release.sh --pg 15 --pg 17 only those majors' packages
#
# The folder holds:
#   postgresql-<NN>-snowflake-id_<version>-1_<arch>.deb   for each of 15 to 19,
#       amd64 and arm64 (scripts/package.sh; arm64 built on this amd64
#       machine: scripts/cross.sh)
#   snowflake_id-<version>-pg<NN>-linux-<machine>.tar.gz  the same files for
#       servers not packaged by Debian (x86_64 and aarch64)
#   snowflake_id-<version>.zip         the PGXN archive (scripts/pgxn.sh)
#   snowflake_id-<version>.tar.gz      the source, Cargo.lock included (the
#       versions every dependency was built and tested with)
#   SHA256SUMS                         `sha256sum -c SHA256SUMS` in the folder
#                                      checks every file
# The packages are release builds. It builds from the commit checked out
# and refuses a tree with uncommitted changes (SF_RELEASE_DIRTY=1 allows it,
# for a trial): a release is a commit. Needs this repository's set-up with
# every version (scripts/setup.sh --pg all). Prints the folder's path.
# docs/releases.md: the files, and how a user checks and installs them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=postgres.sh
. scripts/postgres.sh

usage() { echo "release: usage: scripts/release.sh [--out DIR] [--pg NN]..." >&2; exit 2; }
out="" majors=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --pg)
      [ $# -ge 2 ] || usage
      case " ${SF_PG_VERSIONS[*]} " in *" $2 "*) majors+=("$2") ;; *) usage ;; esac
      shift 2 ;;
    *) usage ;;
  esac
done
[ ${#majors[@]} -gt 0 ] || majors=("${SF_PG_VERSIONS[@]}")
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || { echo "release: cannot read the version in Cargo.toml" >&2; exit 1; }
if [ -n "$(git status --porcelain --untracked-files=no)" ] && [ "${SF_RELEASE_DIRTY:-0}" != 1 ]; then
  echo "release: the tree has uncommitted changes: commit them (a release is a commit), or SF_RELEASE_DIRTY=1 for a trial" >&2
  exit 1
fi
git ls-files --error-unmatch Cargo.lock >/dev/null 2>&1 || { echo "release: Cargo.lock is not tracked" >&2; exit 1; }
out=${out:-$ROOT/target/release-$version}
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)
started=$SECONDS

# The packages, each major for both architectures, into the folder.
for major in "${majors[@]}"; do
  for arch in amd64 arm64; do
    echo "release: PostgreSQL $major, $arch" >&2
    SF_PACKAGE_OUT=$out SF_PACKAGE_DEBUG=0 bash scripts/package.sh --pg "$major" --arch "$arch" >/dev/null 2>"$out/.package.log" ||
      { tail -30 "$out/.package.log" >&2; echo "release: scripts/package.sh --pg $major --arch $arch failed" >&2; exit 1; }
  done
done
rm -f "$out/.package.log"

# The PGXN archive, and the source.
zip=$(bash scripts/pgxn.sh)
cp "$zip" "$out/"
git archive --format=tar --prefix="snowflake_id-$version/" HEAD | gzip -9n >"$out/snowflake_id-$version.tar.gz"

(cd "$out" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
(cd "$out" && sha256sum --quiet -c SHA256SUMS) || { echo "release: SHA256SUMS does not check" >&2; exit 1; }
echo "release: $(wc -l <"$out/SHA256SUMS") files in $out ($((SECONDS - started)) s)" >&2
echo "$out"
