#!/usr/bin/env bash
# Runs the integration tests: every tests/integration/*.sh except the helpers
# (lib.sh and lib_*.sh) and this script, or only the ones named on the
# command line (with or without .sh: `run_all.sh concurrent_inserts
# startup_refusal`). Each test runs in its own bash process, one after the
# other (or N at once: --jobs below), so a failing test neither stops the
# others nor leaves clusters behind for them. Prints each test's output and result, and ends with the line `N
# passed, M failed`; the exit status is non-zero if any test failed (or a
# named test does not exist).
#
# `--dir DIR` runs the tests of another folder the same way (scripts/test.sh
# runs tests/upgrade, whose tests need two PostgreSQL versions, like that).
#
# `--jobs N` runs N tests at once (default 1): N workers take the next name
# of the list as each finishes one (so put the longest first), and each
# test's output is printed whole when it ends, not interleaved. The tests
# can share a machine: each has its own clusters, ports (the kernel's free
# ones), socket and work directories, and reads, never writes, the server
# installation. scripts/test.sh runs 15's integration tests, which wait on
# servers most of the time, two at once.
#
# A test that runs longer than SF_TEST_TIMEOUT seconds (default 900; the
# slowest takes about a minute) is stopped with SIGTERM, which runs its EXIT
# trap (clusters stopped, log tails printed), and counts as failed: a hang
# fails the run with the test's name instead of eating the CI time limit.
#
# The tests install nothing, but they start clusters that load the installed
# snowflake_id.so, so in a shared checkout run it under the install lock:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/run_all.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
self=$(basename "$0")
jobs=1
while [ $# -gt 0 ]; do
  case $1 in
    --dir)
      [ $# -ge 2 ] && [ -d "$2" ] || { echo "run_all: --dir needs a folder of tests" >&2; exit 2; }
      here=$(cd "$2" && pwd)
      shift 2
      ;;
    --jobs)
      [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]?$ ]] || { echo "run_all: --jobs needs a number of tests to run at once (1 to 99)" >&2; exit 2; }
      jobs=$2
      shift 2
      ;;
    *) break ;;
  esac
done
timeout_s=${SF_TEST_TIMEOUT:-900}

declare -a names=()
if [ $# -gt 0 ]; then
  for arg in "$@"; do
    names+=("$(basename "${arg%.sh}")")
  done
else
  for f in "$here"/*.sh; do
    case $(basename "$f") in
      lib.sh | lib_*.sh | "$self") continue ;;
    esac
    names+=("$(basename "$f" .sh)")
  done
fi

# run_one NAME: runs one test, its output to stdout; prints its result line
# ("PASS name (12s)", "FAIL name (...)") last, on fd 3.
run_one() {
  local name=$1 file="$here/$1.sh" start rc took
  if [[ "$name.sh" == lib.sh || "$name.sh" == lib_*.sh || "$name.sh" == "$self" || ! -f "$file" ]]; then
    echo "=== $name: no such test in $here"
    echo "FAIL $name (no such test)" >&3
    return
  fi
  echo "=== $name"
  start=$SECONDS
  rc=0
  (cd "$root" && timeout --kill-after=60 "$timeout_s" bash "$file" </dev/null) 2>&1 || rc=$?
  took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    echo "PASS $name (${took}s)" >&3
  elif [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ "$took" -ge "$timeout_s" ]; }; then
    echo "FAIL $name (timed out after ${took}s, limit ${timeout_s}s)" >&3
  else
    echo "FAIL $name (exit status $rc, ${took}s)" >&3
  fi
}

results_dir=$(mktemp -d /tmp/snowflake_run_all.XXXXXX)
trap 'rm -rf "$results_dir"' EXIT
if [ "$jobs" -eq 1 ]; then
  for i in "${!names[@]}"; do
    run_one "${names[$i]}" 3>"$results_dir/$i.result"
    echo "=== $(cat "$results_dir/$i.result")"
    echo
  done
else
  # The queue: the index of the next test to start, under a lock. Each
  # worker prints a test's output whole when the test ends (under a second
  # lock, so two outputs never mix).
  echo 0 >"$results_dir/next"
  worker() {
    local i
    while :; do
      i=$(flock "$results_dir/next" bash -c 'read -r i <"$1"; echo $((i + 1)) >"$1"; echo "$i"' _ "$results_dir/next")
      [ "$i" -lt "${#names[@]}" ] || return 0
      run_one "${names[$i]}" >"$results_dir/$i.out" 3>"$results_dir/$i.result"
      {
        flock 9
        cat "$results_dir/$i.out"
        echo "=== $(cat "$results_dir/$i.result")"
        echo
      } 9>"$results_dir/print.lock"
    done
  }
  worker_pids=()
  for _ in $(seq 1 "$jobs"); do
    worker &
    worker_pids+=($!)
  done
  # Stopped (^C, a timeout above this script): each running test's
  # `timeout` is told, which passes it on to its test, whose EXIT trap stops
  # its clusters.
  stop_workers() {
    local pid running
    running=$(descendants $$)
    kill -TERM "${worker_pids[@]}" 2>/dev/null || true  # (no next test)
    for pid in $running; do
      [ "$(ps -o comm= -p "$pid" 2>/dev/null)" != timeout ] || kill -TERM "$pid" 2>/dev/null || true
    done
    wait
    rm -rf "$results_dir"
    exit 143
  }
  descendants() {
    local child
    for child in $(pgrep -P "$1"); do
      echo "$child"
      descendants "$child"
    done
  }
  trap stop_workers INT TERM
  for pid in "${worker_pids[@]}"; do wait "$pid"; done
  trap - INT TERM
fi

passed=0
failed=0
declare -a results=()
for i in "${!names[@]}"; do
  result=$(cat "$results_dir/$i.result" 2>/dev/null || echo "FAIL ${names[$i]} (no result: its worker was stopped)")
  results+=("$result")
  case $result in PASS*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done

echo "=== results"
[ "${#results[@]}" -eq 0 ] || printf '%s\n' "${results[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
