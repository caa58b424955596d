#!/usr/bin/env bash
# Runs the integration tests: every tests/integration/*.sh except the helpers
# (lib.sh and lib_*.sh) and this script, or only the ones named on the
# command line (with or without .sh: `run_all.sh concurrent_inserts
# startup_refusal`). Each test runs in its own bash process, one after the
# other, so a failing test neither stops the others nor leaves clusters behind
# for them. Prints each test's output and result, and ends with the line `N
# passed, M failed`; the exit status is non-zero if any test failed (or a
# named test does not exist).
#
# `--dir DIR` runs the tests of another folder the same way (scripts/test.sh
# runs tests/upgrade, whose tests need two PostgreSQL versions, like that).
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
if [ "${1:-}" = --dir ]; then
  [ $# -ge 2 ] && [ -d "$2" ] || { echo "run_all: --dir needs a folder of tests" >&2; exit 2; }
  here=$(cd "$2" && pwd)
  shift 2
fi
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

passed=0
failed=0
declare -a results=()
for name in "${names[@]}"; do
  file="$here/$name.sh"
  if [[ "$name.sh" == lib.sh || "$name.sh" == lib_*.sh || "$name.sh" == "$self" || ! -f "$file" ]]; then
    echo "=== $name: no such test in $here" >&2
    results+=("FAIL $name (no such test)")
    failed=$((failed + 1))
    continue
  fi
  echo "=== $name"
  start=$SECONDS
  rc=0
  (cd "$root" && timeout --kill-after=60 "$timeout_s" bash "$file" </dev/null) || rc=$?
  took=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then
    results+=("PASS $name (${took}s)")
    passed=$((passed + 1))
  elif [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ "$took" -ge "$timeout_s" ]; }; then
    results+=("FAIL $name (timed out after ${took}s, limit ${timeout_s}s)")
    failed=$((failed + 1))
  else
    results+=("FAIL $name (exit status $rc, ${took}s)")
    failed=$((failed + 1))
  fi
  echo "=== ${results[-1]}"
  echo
done

echo "=== results"
[ "${#results[@]}" -eq 0 ] || printf '%s\n' "${results[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
