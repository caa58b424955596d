#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#
#   scripts/test.sh              every supported PostgreSQL: 15, 16, 17, 18, 19
#   scripts/test.sh --pg 17      one version (repeat --pg for several)
#
#   0. can a fresh machine still fetch every pinned server file
#      (scripts/check_sources.sh: downloads each into a scratch directory,
#      even when everything is cached, so CI fails when a fresh machine
#      would);
#   1. set-up (scripts/setup.sh: Debian packages, the PostgreSQL servers,
#      Rust 1.96, cargo-pgrx 0.19.3, cargo pgrx init); with every version, also each
#      fallback of set-up installed for real (tests/setup/fallbacks.sh);
#   2. cargo fmt --check; cargo clippy -D warnings with 15's and 19's
#      features (or the first version asked for when neither is) runs in
#      the background compile job of step 3d;
#   3. for each version, one after the other:
#      a. cargo pgrx test pgNN: the pure unit and property tests of the core
#         and the #[pg_test] tests inside a server (run as postgres);
#      b. cargo pgrx install into that server: --release on 15, whose
#         integration tests count instructions and build the release
#         packages; a debug build on 16 to 19, which reuses step a's
#         dependencies (2 minutes less per version on 2 cores), and whose
#         packages (package_install, deb_package) are then debug builds too
#         (SF_PACKAGE_DEBUG=1: the same files, with overflow checks on);
#      c. the pg_regress suite;
#      d. the integration tests that drive real clusters from outside
#         (during the first version's, the background compile job runs
#         clippy and builds the later versions' tests, at the lowest
#         priority): on 15
#         all of them but those that need a later version; on 16 to 19
#         those that exercise version-specific server behaviour
#         (VERSION_TESTS below) and each version's own (ONE_VERSION_TESTS:
#         two logical writers on 17, Citus and settings refusal on 18, the
#         registry and the Debian package on 19);
#   4. a real pg_upgrade from 17 to 18 and from 18 to 19, each when both
#      were tested (tests/upgrade/pg_upgrade.sh; why not from 15: UPGRADES
#      below).
# Any failure stops the run with a non-zero status. Each step prints its
# duration, and the run ends with a summary of the minutes per version.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=postgres.sh
. scripts/postgres.sh
# shellcheck source=rust.sh
. scripts/rust.sh

# The integration tests run on every version, not only on 15: concurrency,
# crash recovery with a clock set back, standbys and promotion, failover and
# every kind of WAL replay with the lease records (their WAL calls differ
# between versions), pg_dump and pg_restore, and the release archive
# installed into a clean server, copies of a data directory (the system
# identifier and binary-upgrade mode), and the read horizon (transaction
# callbacks, the process array, prepared transactions). (failover_pg_auto_failover
# and partman run on 15: the packages exist for Debian's 15 only.)
VERSION_TESTS=(concurrent_inserts clock_crash_restart standby_failover failover_wal failover_recovery
  dump_restore package_install copies horizon)
# And on one version each (their own reasons): the settings refusal reads
# PostgreSQL's list of settings one way on 15 and another from 16 on, so 15
# (all tests) and 18 cover both; Citus is built for 18 (scripts/postgres.sh,
# CITUS_PG; no Citus release supports 19 yet); two writers replicating each
# other set up with pg_createsubscriber need 17 or later; the node-id
# registry runs on 15 (all tests) and on 19 with its failover and restore
# (its copy cases include a pg_createsubscriber conversion on 17 and later:
# 19 runs it, as 17 did until 19 came);
# the Debian package installs with apt into Debian's 15 (all tests) and into
# the sid root's 19 (scripts/postgres.sh).
declare -A ONE_VERSION_TESTS=(
  [17]="logical_two_writers"
  [18]="citus citus_registry startup_refusal"
  [19]="registry registry_failover registry_restore deb_package")
# Of those, the ones 15 cannot run.
NOT_ON_15="citus citus_registry logical_two_writers"

# pg_upgrade needs a new server at least as recent, in release date, as the
# old one: Debian 12's 15.20 (November 2026) stores a column option
# (pg_attver) on every column that the 17.10 and 18.6 reachable here reject
# ("unrecognized parameter", in pg_upgrade's restore). 17.10 is older than
# 18.6, and 18.6 than 19rc1, so the tests upgrade from 17 to 18 and from 18
# to 19 (FROM:TO).
UPGRADES=(17:18 18:19)

versions=()
while [ $# -gt 0 ]; do
  case $1 in
    --pg)
      [ $# -ge 2 ] || { echo "test: --pg needs a version (${SF_PG_VERSIONS[*]})" >&2; exit 2; }
      case " ${SF_PG_VERSIONS[*]} " in
        *" $2 "*) versions+=("$2") ;;
        *) echo "test: unsupported PostgreSQL version '$2' (supported: ${SF_PG_VERSIONS[*]})" >&2; exit 2 ;;
      esac
      shift 2
      ;;
    -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test: unknown argument '$1' (usage: scripts/test.sh [--pg 15|16|17|18|19]...)" >&2; exit 2 ;;
  esac
done
[ ${#versions[@]} -gt 0 ] || versions=("${SF_PG_VERSIONS[@]}")

step_start=$SECONDS
step() {
  printf '     (took %ds)\n\n==== %s\n' $((SECONDS - step_start)) "$*"
  step_start=$SECONDS
}
declare -a summary=()

step "sources: can a fresh machine fetch every pinned server file?"
bash scripts/check_sources.sh

step "set-up: PostgreSQL ${versions[*]}"
setup_args=()
for v in "${versions[@]}"; do setup_args+=(--pg "$v"); done
bash scripts/setup.sh "${setup_args[@]}"

if [ ${#versions[@]} -eq ${#SF_PG_VERSIONS[@]} ]; then
  step "set-up fallbacks, each installed for real"
  bash tests/setup/fallbacks.sh
fi

step "cargo fmt --check"
cargo fmt --all -- --check

# Clippy with 15's and 19's features (when tested): the version-specific
# code is cfg'd for 15, for 16 and later, and for 18 and later; 16, 17 and
# 18 are compiled (and their few own lines checked by the compiler) in
# step 3a. It runs in the background compile job below.
clippy_versions=()
for v in "${versions[@]}"; do case $v in 15 | 19) clippy_versions+=("$v") ;; esac; done
[ ${#clippy_versions[@]} -gt 0 ] || clippy_versions=("${versions[0]}")

# The background compile job. The integration tests spend most of their
# time waiting on servers (a grant to run out, a standby to catch up, a
# clock to pass a bound), and the compiler needs both cores for minutes a
# version; so while the first version's integration tests run, one
# background job runs clippy and then builds every later version's test
# binary, which `cargo pgrx test` and `cargo pgrx install` of that version
# then find fresh (the library and the test binary share their
# dependencies: Cargo.toml's resolver and build-override). It runs at the
# lowest CPU priority (nice 19, idle I/O class), so a server or a test that
# wants the CPU gets it at once; cargo's lock on the target directory keeps
# it and a foreground cargo from building at the same time. Its output goes
# to a log, printed when it fails; the run fails when it does, checked
# before each later version and at the end.
BACKGROUND_LOG=$(mktemp /tmp/snowflake_test_background.XXXXXX)
BACKGROUND_RC=$BACKGROUND_LOG.status
background_pid= background_started=0
background_compile() {
  local v started
  for v in "${clippy_versions[@]}"; do
    started=$SECONDS
    echo "== cargo clippy --all-targets -- -D warnings (pg$v)"
    cargo clippy --all-targets --no-default-features --features "pg$v pg_test" -- -D warnings
    echo "== clippy pg$v passed ($((SECONDS - started))s)"
  done
  for v in "${versions[@]:1}"; do
    started=$SECONDS
    echo "== cargo test --lib --no-run (pg$v: cargo pgrx test's build)"
    cargo test --lib --no-run --no-default-features --features "pg$v pg_test"
    echo "== pg$v built ($((SECONDS - started))s)"
  done
}
start_background_compile() {
  [ "$background_started" -eq 0 ] || return 0
  background_started=1
  step "background compile job (clippy on ${clippy_versions[*]}, then the builds of ${versions[*]:1}) started; log: $BACKGROUND_LOG"
  # Its own process group (job control on for the fork), so that the exit
  # trap stops cargo and rustc with it.
  set -m
  (
    trap 'echo $? >"$BACKGROUND_RC"' EXIT
    renice -n 19 -p "$BASHPID" >/dev/null
    ionice -c 3 -p "$BASHPID" 2>/dev/null || true
    background_compile
  ) >"$BACKGROUND_LOG" 2>&1 </dev/null &
  background_pid=$!
  set +m
}
# Fails the run if the background job failed; with --wait, first waits for
# it to end.
check_background_compile() {
  [ -n "$background_pid" ] || return 0
  if [ "${1:-}" = --wait ] || [ -s "$BACKGROUND_RC" ]; then
    local rc=0
    wait "$background_pid" || rc=$?
    background_pid=
    grep '^== .*passed\|^== .*built' "$BACKGROUND_LOG" || true
    if [ "$rc" -ne 0 ]; then
      echo "test: the background compile job (clippy, later versions' builds) failed (status $rc); its log:" >&2
      cat "$BACKGROUND_LOG" >&2
      exit 1
    fi
  fi
}

PGRX_TEST_DIR=$(mktemp -d /tmp/snowflake_pgrx_test.XXXXXX)
chown postgres:postgres "$PGRX_TEST_DIR"
stop_background() {
  [ -z "$background_pid" ] || kill -- "-$background_pid" 2>/dev/null || true
  rm -rf "$PGRX_TEST_DIR" "$BACKGROUND_LOG" "$BACKGROUND_RC"
}
trap stop_background EXIT

for v in "${versions[@]}"; do
  version_start=$SECONDS
  check_background_compile
  pg_config=$(pg_config_for "$v")
  [ -n "$pg_config" ] || { echo "test: PostgreSQL $v is not installed (scripts/setup.sh --pg $v)" >&2; exit 1; }
  export PG_BIN; PG_BIN=$("$pg_config" --bindir)

  step "pg$v: cargo pgrx test (unit, property and #[pg_test] tests) on $("$pg_config" --version)"
  cargo pgrx test "pg$v" --runas postgres --pgdata "$PGRX_TEST_DIR/data$v"

  if [ "$v" = 15 ]; then
    step "pg$v: cargo pgrx install --release"
    cargo pgrx install --release --pg-config "$pg_config"
    export SF_PACKAGE_DEBUG=0
  else
    step "pg$v: cargo pgrx install (a debug build: see 3b above)"
    cargo pgrx install --pg-config "$pg_config"
    export SF_PACKAGE_DEBUG=1
  fi

  step "pg$v: pg_regress suite"
  bash tests/pg_regress/run.sh

  start_background_compile

  if [ "$v" = 15 ]; then
    # All, but those that need 16 or later or a build of the one version
    # that runs them.
    all=()
    for f in tests/integration/*.sh; do
      name=$(basename "$f" .sh)
      case $name in lib | lib_* | run_all) continue ;; esac
      case " $NOT_ON_15 " in *" $name "*) continue ;; esac
      all+=("$name")
    done
    step "pg$v: integration tests (all but: $NOT_ON_15)"
    bash tests/integration/run_all.sh "${all[@]}"
  else
    # shellcheck disable=SC2206 # the names are words
    tests=("${VERSION_TESTS[@]}" ${ONE_VERSION_TESTS[$v]:-})
    step "pg$v: integration tests (${tests[*]})"
    bash tests/integration/run_all.sh "${tests[@]}"
  fi
  summary+=("pg$v: $(((SECONDS - version_start + 30) / 60)) min")
done

for upgrade in "${UPGRADES[@]}"; do
  from=${upgrade%:*} to=${upgrade#*:}
  [[ " ${versions[*]} " == *" $from "* ]] && [[ " ${versions[*]} " == *" $to "* ]] || continue
  step "pg_upgrade from $from to $to"
  upgrade_start=$SECONDS
  PG_BIN=$("$(pg_config_for "$from")" --bindir) NEW_PG_BIN=$("$(pg_config_for "$to")" --bindir) \
    bash tests/integration/run_all.sh --dir tests/upgrade pg_upgrade
  summary+=("pg_upgrade $from -> $to: $(((SECONDS - upgrade_start + 30) / 60)) min")
done

if [ -n "$background_pid" ]; then
  step "waiting for the background compile job"
  check_background_compile --wait
fi
step "done"
printf '%s\n' "${summary[@]}"
echo "all steps passed in $((SECONDS / 60)) min"
# The closing line: each version's suite and the upgrade test passed (any
# failure has stopped the run before this line, with a non-zero status).
echo "suites: ${#summary[@]} passed, 0 failed"
