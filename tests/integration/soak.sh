#!/usr/bin/env bash
# The short fault soak (tests/soak/soak.py; docs/reliability.md): a registry
# with a synchronous standby, four servers claiming node ids from it, a
# server with a fixed node id and its standby, writers on every server, and
# faults of every kind drawn from fixed seeds, several at once; every
# recorded ID checked during the run and at the end (none twice, none
# refused by its server's primary key, each connection's increasing, each
# where the registry granted it), each server's wait after each fault
# against its bound, and no server stalled while no fault touched it. Then
# the same without a registry (fixed node ids, the lease file and the WAL
# only). A failure prints the seed and the schedule, which
# `python3 tests/soak/soak.py --seed N --seconds S` replays. First the
# soak's own checks on made-up timelines (tests/soak/test_checks.py).
. "$(dirname "$0")/lib.sh"
require_installed_extension
[ -r "${SF_FAKETIME_LIB:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}" ] ||
  fail "libfaketime is not installed (scripts/setup.sh installs it)"
soak=$(dirname "$0")/../soak/soak.py

python3 "$(dirname "$0")/../soak/test_checks.py" 2>&1 | tail -3 ||
  fail "the soak's own checks failed on made-up timelines"
pass "the soak's checks (made-up timelines)"

# Seed 1's schedule starts every fault kind within its first minute.
python3 "$soak" --seed "${SF_SOAK_SEED:-1}" --seconds "${SF_SOAK_SECONDS:-120}" ||
  fail "the soak with the registry failed (above: what, the seed and the schedule)"
pass "soak with the registry"
python3 "$soak" --no-registry --seed "${SF_SOAK_SEED:-2}" --seconds "${SF_SOAK_NO_REGISTRY_SECONDS:-50}" ||
  fail "the soak without a registry failed (above: what, the seed and the schedule)"
pass "soak without a registry"
