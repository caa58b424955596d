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
#      Rust 1.96, cargo-pgrx 0.19.4, cargo pgrx init); with every version, also each
#      fallback of set-up installed for real (tests/setup/fallbacks.sh);
#   2. cargo fmt --check; cargo clippy -D warnings with 15's and 19's
#      features (or the first version asked for when neither is) runs in
#      the background compile job of step 3a;
#   3. for each version: cargo pgrx test pgNN (the pure unit and property
#      tests of the core and the #[pg_test] tests inside a server, run as
#      postgres); cargo pgrx install into that server; the pg_regress
#      suite; the integration tests that drive real clusters from outside:
#      on 15 all of them but those that need a later version; on 16 to 19
#      those that exercise version-specific server behaviour (VERSION_TESTS
#      below) and each version's own (ONE_VERSION_TESTS: two logical
#      writers on 17, Citus and settings refusal on 18, the registry and
#      the Debian package on 19). 15 installs its --release build (its
#      tests count instructions and build the release packages); 16 to 19
#      install a debug build, which reuses cargo pgrx test's dependencies,
#      and build debug packages (SF_PACKAGE_DEBUG=1: the same files, with
#      overflow checks on). The order, for the time on 2 cores:
#      a. the first version (15) installs a debug build first and runs its
#         pg_regress suite and integration tests on it (two tests at once;
#         SF_TEST_JOBS=1: one after the other), while the
#         background compile job (at the lowest priority) builds its test
#         binary and its release library and builds the later versions'
#         tests, then runs clippy; then its cargo pgrx test and its release
#         install; the integration tests that need the release build then
#         start in a lane of their own (the release lane), beside b;
#      b. the later versions in two lanes at once (16 and 18 in this
#         shell, 17 and 19 beside it), once the background job has built
#         their tests (its clippy goes on beside them); each lane's output
#         is printed when it ends. SF_TEST_LANES=1: one
#         lane, after 15's release build's tests;
#   4. a real pg_upgrade from 16 to 18 and from 18 to 19, each when both
#      were tested: of a server with IDs (tests/upgrade/pg_upgrade.sh), and
#      of a registry under a writing fleet (registry_pg_upgrade.sh); why not
#      from 15: UPGRADES below.
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
# identifier and binary-upgrade mode), the read horizon (transaction
# callbacks, the process array, prepared transactions), and the portable
# edition installed and used without superuser (its concurrency test runs
# on 18), and the snowflake type from Node.js, Python and Java clients, and
# converted in place. (failover_pg_auto_failover
# runs on 15: the package exists for Debian's 15 only. failover_patroni
# runs on 15 too: Debian's Patroni drives any version, but its two
# failovers under load take a minute, and what it adds to failover_wal's
# promotions is the HA manager, not the server's version.)
VERSION_TESTS=(concurrent_inserts clock_crash_restart standby_failover failover_wal failover_recovery
  dump_restore package_install copies horizon portable type_clients)
# And on one version each (their own reasons): the settings refusal reads
# PostgreSQL's list of settings one way on 15 and another from 16 on, so 15
# (all tests) and 18 cover both; Citus is built for 18 (scripts/postgres.sh,
# CITUS_PG; no Citus release supports 19 yet); two writers replicating each
# other set up with pg_createsubscriber need 17 or later; the node-id
# registry runs on 15 (all tests) and on 19 with its failover and restore
# (its copy cases include a pg_createsubscriber conversion on 17 and later:
# 19 runs it, as 17 did until 19 came); the partitioning recipe runs with
# Debian's pg_partman 4.7 on 15 (all tests) and with pg_partman 5 on 17
# (scripts/postgres.sh, PARTMAN5_PG);
# the Debian package installs with apt into Debian's 15 (all tests) and into
# the sid root's 19 (scripts/postgres.sh); the portable edition's
# concurrency test (a minute of 16 sessions: any version shows it) runs on
# 18, whose lane has minutes to spare, instead of on 15, the critical path.
declare -A ONE_VERSION_TESTS=(
  [17]="logical_two_writers partman"
  [18]="citus citus_registry startup_refusal portable_concurrency"
  [19]="registry registry_failover registry_restore deb_package")
# 15's integration tests, the critical path, run two at once
# (SF_TEST_JOBS=1: one after the other): they wait on servers most of the
# time, and each has its own clusters, ports and directories. The later
# versions get the same from their two lanes. These start first, the
# longest first (as measured on 15 in CI, 2026-11-29: soak 205 s down to
# about 50; failover_patroni, added later: 54 s alone on this project's
# 2 cores, 69 s beside two busy loops), so that the two ends come close
# together.
LONGEST_ON_15="soak failover_pg_auto_failover failover_patroni registry_restore registry_reclaim portable_registry
  failover_recovery sharding_plproxy portable failover_wal registry_pg_auto_failover
  sharding_postgres_fdw registry registry_worker registry_failover"
# Of those, the ones 15 does not run (it cannot, or another version runs it
# off the critical path).
NOT_ON_15="citus citus_registry logical_two_writers portable_concurrency"

# pg_upgrade needs a new server at least as recent, in release date, as the
# old one: Debian 12's 15.20 and trixie's 17.12 (November 2026) store a
# column option (pg_attver) on every column that the 18.6 reachable here
# rejects ("unrecognized parameter", in pg_upgrade's restore). 16.14 is
# older than 18.6, and 18.6 than 19rc1, so the tests upgrade from 16 to 18
# (two major versions at once, as pg_upgrade allows) and from 18 to 19
# (FROM:TO); and 15 to 15 (pg_upgrade.sh alone: pg_upgrade takes one major
# version to itself), so that the upgrade's holds and its registry case run
# on 15 too, the version of every other test.
UPGRADES=(15:15 16:18 18:19)

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
    -h | --help) sed -n '2,48p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test: unknown argument '$1' (usage: scripts/test.sh [--pg 15|16|17|18|19]...)" >&2; exit 2 ;;
  esac
done
[ ${#versions[@]} -gt 0 ] || versions=("${SF_PG_VERSIONS[@]}")

step_start=$SECONDS
step() {
  printf '     (took %ds)\n\n==== %s\n' $((SECONDS - step_start)) "$*"
  step_start=$SECONDS
  check_lanes
}

# The lanes: steps that run in the background beside this shell's (15's
# release build's tests; the second lane of later versions), each in its
# own process group (the exit trap stops it whole), its output in a log
# printed when it is waited for, or its last lines when the run fails
# first. A lane that fails stops the run at this shell's next step, not
# only when it is waited for.
MAIN_PID=$BASHPID
declare -A lane_pids=() lane_logs=() lane_names=()
start_lane() { # KEY NAME COMMAND...: COMMAND in a lane
  local key=$1 name=$2 log
  shift 2
  log=$(mktemp /tmp/snowflake_test_lane.XXXXXX)
  lane_logs[$key]=$log lane_names[$key]=$name
  step "$name: started in the background; its log: $log"
  set -m
  (
    set +m
    trap 'echo $? >"$log.status"' EXIT
    step_start=$SECONDS
    "$@"
    step "$name: done"
  ) >"$log" 2>&1 </dev/null &
  lane_pids[$key]=$!
  set +m
}
print_lane() { # KEY
  echo "---- ${lane_names[$1]}: its output"
  cat "${lane_logs[$1]}"
  echo "---- end of ${lane_names[$1]}"
}
wait_lane() { # KEY
  local key=$1 pid=${lane_pids[$1]:-} rc=0
  [ -n "$pid" ] || return 0
  unset "lane_pids[$key]"   # (before step, whose check_lanes would wait here again)
  step "waiting for ${lane_names[$key]}"
  wait "$pid" || rc=$?
  print_lane "$key"
  [ "$rc" -eq 0 ] || { echo "test: ${lane_names[$key]} failed (status $rc): its output is above" >&2; exit 1; }
}
check_lanes() {
  [ "$BASHPID" = "$MAIN_PID" ] || return 0
  local key
  for key in "${!lane_pids[@]}"; do
    [ -s "${lane_logs[$key]}.status" ] && [ "$(cat "${lane_logs[$key]}.status")" != 0 ] || continue
    wait_lane "$key"
  done
}


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

step "shell patterns: no early-exit reader under pipefail"
bash tests/lint/shell_patterns.sh

step "docs against code: reference tables, links, page lengths"
python3 tests/lint/docs.py

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
# version; so the first version installs a debug build (its dependencies
# are the only build on the critical path), and while its integration
# tests run, one background job builds the rest, in this order: that
# version's test binary (and on 15 its release library and the arm64
# one), every later version's test binary, which `cargo pgrx test` and
# `cargo pgrx install` of that version then find fresh (the library and
# the test binary share their dependencies: Cargo.toml's resolver and
# build-override), and last clippy, beside the later versions' lanes
# (which wait only for their builds) in a target directory of its own. On
# 15 it also makes the arm64 root, from the start of the debug install. It runs
# at the lowest CPU priority (nice 19, idle I/O class), so a server or a
# test that wants the CPU gets it at once, until the foreground needs what
# it builds (raise_background_priority); cargo's lock on the target
# directory keeps it and a foreground cargo from building at the same
# time. None of its builds writes the library files that an install
# copies (target/debug/libsnowflake_id.so; a release build only for 15,
# installed after it ends). Its output goes to a log, printed when it
# fails; the run fails when it does, checked before each later step and at
# the end.
BACKGROUND_LOG=$(mktemp /tmp/snowflake_test_background.XXXXXX)
BACKGROUND_RC=$BACKGROUND_LOG.status
LATER_BUILDS_DONE=$BACKGROUND_LOG.later
FIRST_INSTALLED=$BACKGROUND_LOG.installed
CLIPPY_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}/clippy
background_pid= background_started=0
first=${versions[0]}
background_compile() {
  local v started arm64_pid=""
  # The arm64 root (tests/integration/arm64.sh, a release test of 15):
  # debootstrap and apt under emulation, minutes of one core, made beside
  # the builds when it is not cached.
  if [ "$first" = 15 ]; then
    echo "== the arm64 root (scripts/cross.sh arm64_root 15), beside the builds"
    (. scripts/cross.sh && arm64_root 15 >/dev/null) &
    arm64_pid=$!
  fi
  # The job starts with the first version's debug install (for the arm64
  # root's minutes of one core); its builds wait for that install, which
  # they would otherwise hold cargo's lock against.
  until [ -e "$FIRST_INSTALLED" ]; do sleep 1; done
  started=$SECONDS
  echo "== cargo test --lib --no-run (pg$first: cargo pgrx test's build)"
  cargo test --lib --no-run --no-default-features --features "pg$first pg_test"
  echo "== pg$first built ($((SECONDS - started))s)"
  if [ "$first" = 15 ]; then
    # The command `cargo pgrx install --release` runs (its arguments to
    # rustc included, or it would build the crate again).
    started=$SECONDS
    echo "== cargo rustc --lib --release (pg15: cargo pgrx install --release's build)"
    cargo rustc --lib --release --features pg15 --no-default-features -- -C link-arg=-Wl,--no-gc-sections
    echo "== pg15 release built ($((SECONDS - started))s)"
    # The arm64 package's build (scripts/package.sh --arch arm64 runs this
    # command through cargo pgrx package --target). Before the later
    # versions' builds: it holds cargo's lock on the host's release
    # directory too, which the release build's tests package from (holding
    # the install lock the lanes need).
    started=$SECONDS
    echo "== cargo rustc --lib --release --target aarch64-unknown-linux-gnu (pg15: the arm64 package's build)"
    (. scripts/cross.sh && cross_env 15 &&
      cargo rustc --lib --release --target "$SF_CROSS_TARGET" --features pg15 --no-default-features -- -C link-arg=-Wl,--no-gc-sections)
    echo "== pg15 arm64 release built ($((SECONDS - started))s)"
  fi
  for v in "${versions[@]:1}"; do
    started=$SECONDS
    echo "== cargo test --lib --no-run (pg$v: cargo pgrx test's build)"
    cargo test --lib --no-run --no-default-features --features "pg$v pg_test"
    echo "== pg$v built ($((SECONDS - started))s)"
  done
  # What the later versions' lanes wait for (wait_for_later_builds);
  # clippy goes on beside them.
  touch "$LATER_BUILDS_DONE"
  # Clippy in a target directory of its own: in the lanes' (the debug
  # one) it would hold cargo's lock for minutes while their builds and
  # installs wait; nothing else uses what it makes.
  for v in "${clippy_versions[@]}"; do
    started=$SECONDS
    echo "== cargo clippy --all-targets -- -D warnings (pg$v)"
    CARGO_TARGET_DIR="$CLIPPY_TARGET_DIR" cargo clippy --all-targets --no-default-features --features "pg$v pg_test" -- -D warnings
    echo "== clippy pg$v passed ($((SECONDS - started))s)"
  done
  if [ -n "$arm64_pid" ]; then
    wait "$arm64_pid" || { echo "== the arm64 root could not be made (above)"; return 1; }
    echo "== the arm64 root built"
  fi
}
start_background_compile() {
  background_started=1
  step "background compile job (the test build of $first$([ "$first" = 15 ] && echo ' and its release build'), clippy on ${clippy_versions[*]}, the builds of ${versions[*]:1}) started; log: $BACKGROUND_LOG"
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
# Gives the background job normal priority, once the foreground waits on
# it (on its result or on cargo's lock, which it holds): at nice 19 beside
# anything else that wants the CPU (another job on a shared CI machine, two
# busy loops) it gets a sliver of a core and the whole run waits on it. The
# whole process group: cargo and the rustc it runs; the rustc it starts
# later inherit cargo's priority.
raise_background_priority() {
  [ -n "$background_pid" ] || return 0
  renice -n 0 -g "$background_pid" >/dev/null 2>&1 ||
    echo "test: could not raise the background compile job's priority (renice needs root); it goes on at nice 19" >&2
  ionice -c 2 -n 4 -P "$background_pid" 2>/dev/null || true
}
# Fails the run if the background job failed; with --wait, first raises its
# priority and waits for it to end.
check_background_compile() {
  [ -n "$background_pid" ] || return 0
  if [ "${1:-}" = --wait ] || [ -s "$BACKGROUND_RC" ]; then
    [ "${1:-}" != --wait ] || raise_background_priority
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

# Waits until the background job has built the later versions' tests
# (it goes on with the arm64 build and clippy), at normal priority from
# now on: the foreground waits on it. Fails the run if it failed.
wait_for_later_builds() {
  [ -n "$background_pid" ] || return 0
  raise_background_priority
  until [ -e "$LATER_BUILDS_DONE" ] || [ -s "$BACKGROUND_RC" ]; do sleep 1; done
  check_background_compile
}

# Two versions' steps at once (the lanes, below) must not both build and
# install: `cargo pgrx test`, `cargo pgrx install` and scripts/package.sh
# copy target/debug/libsnowflake_id.so after cargo has let go of its own
# lock, and every version's build writes that one file. They hold this
# lock from the build to the copy (scripts/package.sh takes it itself).
mkdir -p "${CARGO_TARGET_DIR:-$ROOT/target}"
INSTALL_LOCK=${CARGO_TARGET_DIR:-$ROOT/target}/.snowflake_install.lock
with_install_lock() { flock "$INSTALL_LOCK" "$@"; }

# Integration tests of 15 that run once its release build is installed:
# they count instructions, build the release packages, and issue faster
# than the clock allows (which a debug build does not); and the rolling
# upgrade, which starts from the previous release's package that
# deb_package builds (on a bare machine, a build beside the background
# compile job would wait on cargo's lock); and the arm64 package under
# emulation (arm64), whose release build and root the background job
# makes; and public IDs (public_ids), whose four million conversions a
# debug build makes slowly.
RELEASE_TESTS="instructions package_install deb_package registry_rolling_upgrade clock_burst arm64 public_ids"

PGRX_TEST_DIR=$(mktemp -d /tmp/snowflake_pgrx_test.XXXXXX)
chown postgres:postgres "$PGRX_TEST_DIR"
SUMMARY_FILE=$(mktemp /tmp/snowflake_test_summary.XXXXXX)
stop_background() {
  local key
  [ -z "$background_pid" ] || kill -- "-$background_pid" 2>/dev/null || true
  for key in "${!lane_pids[@]}"; do
    if [ -s "${lane_logs[$key]}.status" ]; then
      echo "test: ${lane_names[$key]} had ended (status $(cat "${lane_logs[$key]}.status")); its last lines:" >&2
    else
      kill -- "-${lane_pids[$key]}" 2>/dev/null || true
      echo "test: ${lane_names[$key]} was stopped; its log so far:" >&2
    fi
    tail -50 "${lane_logs[$key]}" >&2
  done
  rm -rf "$PGRX_TEST_DIR" "$BACKGROUND_LOG" "$BACKGROUND_RC" "$LATER_BUILDS_DONE" "$FIRST_INSTALLED" "$SUMMARY_FILE"
  for key in "${!lane_logs[@]}"; do rm -f "${lane_logs[$key]}" "${lane_logs[$key]}.status"; done
}
trap stop_background EXIT

# A version's `cargo pgrx test`: the pure unit and property tests and the
# #[pg_test] tests inside a server, run as postgres.
pgrx_test() {
  step "pg$1: cargo pgrx test (unit, property and #[pg_test] tests) on $("$2" --version)"
  with_install_lock cargo pgrx test "pg$1" --runas postgres --pgdata "$PGRX_TEST_DIR/data$1"
}
# Installs the build a version's tests use: --release on 15, debug on the
# others (see 3 above); package tests build the same profile.
install_build() {
  if [ "$1" = 15 ]; then
    step "pg$1: cargo pgrx install --release"
    with_install_lock cargo pgrx install --release --pg-config "$2"
    export SF_PACKAGE_DEBUG=0
  else
    step "pg$1: cargo pgrx install (a debug build: see 3 above)"
    with_install_lock cargo pgrx install --pg-config "$2"
    export SF_PACKAGE_DEBUG=1
  fi
}
# A version's integration tests, less those named in $2: on 15 all but
# those that need a later version (or a build of the one version that
# runs them) or run on one off the critical path (NOT_ON_15), on the
# others VERSION_TESTS and the version's own.
integration_tests() {
  local v=$1 leave_out=${2:-} names=() name f
  if [ "$v" = 15 ]; then
    # The longest first, then the rest by name (two at once: see below).
    for f in $(printf 'tests/integration/%s.sh\n' $LONGEST_ON_15) tests/integration/*.sh; do
      name=$(basename "$f" .sh)
      case $name in lib | lib_* | run_all) continue ;; esac
      case " $NOT_ON_15 $leave_out ${names[*]} " in *" $name "*) continue ;; esac
      names+=("$name")
    done
    step "pg$v: integration tests, ${SF_TEST_JOBS:-2} at once (all but: $NOT_ON_15${leave_out:+; and, after the release build: $leave_out})"
    SF_PORTABLE_QUICK=0 bash tests/integration/run_all.sh --jobs "${SF_TEST_JOBS:-2}" "${names[@]}"
    return
  else
    # shellcheck disable=SC2206 # the names are words
    names=("${VERSION_TESTS[@]}" ${ONE_VERSION_TESTS[$v]:-})
    step "pg$v: integration tests (${names[*]}; portable without what 15 ran of it)"
  fi
  # (The portable edition's crash, promotion and clock cases run on 15: on
  # the others, its install, IDs, privileges, errors and decoding.)
  SF_PORTABLE_QUICK=1 bash tests/integration/run_all.sh "${names[@]}"
}

# 15's integration tests of the release build.
release_tests_15() {
  local started=$SECONDS
  step "pg15: integration tests of the release build ($RELEASE_TESTS)"
  # shellcheck disable=SC2086 # the names are words
  bash tests/integration/run_all.sh $RELEASE_TESTS
  echo "pg15, the release build's tests: $(((SECONDS - started + 30) / 60)) min" >>"$SUMMARY_FILE"
}

# One version's suite: `cargo pgrx test`, the install, pg_regress, the
# integration tests.
run_version() {
  local v=$1 version_start=$SECONDS pg_config
  pg_config=$(pg_config_for "$v")
  [ -n "$pg_config" ] || { echo "test: PostgreSQL $v is not installed (scripts/setup.sh --pg $v)" >&2; exit 1; }
  export PG_BIN; PG_BIN=$("$pg_config" --bindir)

  if [ "$v" = "$first" ]; then
    # The first version: a debug build installed and tested while the
    # background job builds the rest; then its cargo pgrx test, and on 15
    # the release build with the tests that need it.
    start_background_compile
    step "pg$v: cargo pgrx install (a debug build; the background job builds the rest)"
    with_install_lock cargo pgrx install --pg-config "$pg_config"
    touch "$FIRST_INSTALLED"
    export SF_PACKAGE_DEBUG=1
    step "pg$v: pg_regress suite"
    bash tests/pg_regress/run.sh
    if [ "$v" = 15 ]; then integration_tests "$v" "$RELEASE_TESTS"; else integration_tests "$v"; fi
    check_background_compile
    # cargo pgrx test waits on cargo's lock while the background job builds.
    raise_background_priority
    pgrx_test "$v" "$pg_config"
    if [ "$v" = 15 ]; then
      install_build "$v" "$pg_config"
      # Beside the later versions when there are any (a lane of its own,
      # the "release lane"; SF_TEST_LANES=1: here, one step after the other).
      if [ ${#versions[@]} -gt 1 ] && [ "${SF_TEST_LANES:-2}" != 1 ]; then
        start_lane release "the release lane (pg15's release build: $RELEASE_TESTS)" release_tests_15
      else
        release_tests_15
      fi
    fi
  else
    pgrx_test "$v" "$pg_config"
    install_build "$v" "$pg_config"
    step "pg$v: pg_regress suite"
    bash tests/pg_regress/run.sh
    integration_tests "$v"
  fi
  echo "pg$v: $(((SECONDS - version_start + 30) / 60)) min" >>"$SUMMARY_FILE"
}

run_version "$first"

# The later versions, in two lanes at once (SF_TEST_LANES=1: one after the
# other): their integration tests wait on servers most of the time, as the
# first version's do, and every version has its own installation, its own
# clusters (each test its own ports and directories) and its own
# `cargo pgrx test` data directory and port. They start once the
# background job has built their tests (waited for here: cargo's lock
# would make both lanes wait for it anyway); its clippy, in a target
# directory of its own, goes on beside them. The second lane's output goes
# to a log, printed when it ends (or, when the first lane fails, its last
# lines).
rest=("${versions[@]:1}")
[ ${#rest[@]} -eq 0 ] || wait_for_later_builds
lane_a=() lane_b=()
for i in "${!rest[@]}"; do
  if [ "${SF_TEST_LANES:-2}" = 1 ] || [ $((i % 2)) = 0 ]; then lane_a+=("${rest[$i]}"); else lane_b+=("${rest[$i]}"); fi
done
run_versions() { local v; for v in "$@"; do run_version "$v"; done; }
[ ${#lane_b[@]} -eq 0 ] || start_lane second "the second lane (${lane_b[*]}, beside ${lane_a[*]})" run_versions "${lane_b[@]}"
run_versions "${lane_a[@]}"
wait_lane second
wait_lane release

for upgrade in "${UPGRADES[@]}"; do
  from=${upgrade%:*} to=${upgrade#*:}
  [[ " ${versions[*]} " == *" $from "* ]] && [[ " ${versions[*]} " == *" $to "* ]] || continue
  step "pg_upgrade from $from to $to"
  upgrade_start=$SECONDS
  upgrade_tests=(pg_upgrade registry_pg_upgrade)
  [ "$from" != "$to" ] || upgrade_tests=(pg_upgrade)
  PG_BIN=$("$(pg_config_for "$from")" --bindir) NEW_PG_BIN=$("$(pg_config_for "$to")" --bindir) \
    bash tests/integration/run_all.sh --dir tests/upgrade "${upgrade_tests[@]}"
  echo "pg_upgrade $from -> $to: $(((SECONDS - upgrade_start + 30) / 60)) min" >>"$SUMMARY_FILE"
done

if [ -n "$background_pid" ]; then
  step "waiting for the background compile job"
  check_background_compile --wait
fi
step "done"
cat "$SUMMARY_FILE"
echo "all steps passed in $((SECONDS / 60)) min"
# The closing line: each version's suite and the upgrade test passed (any
# failure has stopped the run before this line, with a non-zero status).
echo "suites: $(wc -l <"$SUMMARY_FILE") passed, 0 failed"
