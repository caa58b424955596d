#!/usr/bin/env bash
# The cost of snowflake_next() in instructions, checked against its targets
# (docs/performance.md): per one-call transaction at most 1.02x what
# clock_timestamp() costs, and at most 300 instructions per call in one
# statement, both over the floor of the same query without the function;
# and with the node id claimed from a registry, the same cost as with a
# fixed node id (nothing is asked of the registry on the hot path).
#
# Counted by callgrind in single-user and server backends of the installed
# release build (bench/instructions.sh --installed --quick --registry), not
# timed: the counts are the same from run to run, whatever else the machine
# does, so a failure here is a change in the code, the compiler or
# PostgreSQL, never noise. About two minutes. Alone:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/instructions.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
require_installed_extension

out="$SF_WORK/instructions"
mkdir -p "$out" "$SF_WORK/bench"
SF_BENCH_OUT=$out SF_WORK="$SF_WORK/bench" PG_BIN=$PG_BIN \
  bash "$root/bench/instructions.sh" --installed --quick --registry ||
  fail "snowflake_next() missed an instruction-count target (the report above; bench/instructions.sh --pg $PG_MAJOR profiles it)"
pass "snowflake_next() within its instruction-count targets on $PG_MAJOR, and no dearer with a registry"
