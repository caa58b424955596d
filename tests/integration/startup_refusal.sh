#!/usr/bin/env bash
# Proves that snowflake_id refuses to run with a configuration that could
# issue wrong IDs, and says why:
#   - the server refuses to start (pg_ctl start fails) when
#       snowflake_id.node_id is out of range for the layout (5000 and the
#         boundary 1024 with node_bits 10, and -2),
#       the bit widths leave fewer than 35 time bits (node_bits 20 +
#         sequence_bits 12, and the boundary node_bits 17 + sequence_bits 12),
#       snowflake_id.epoch is in the future,
#       a value PostgreSQL cannot parse (sequence_bits = '14 bits',
#         lease_sync = 'maybe', max_clock_drift = '5 parsecs'): PostgreSQL
#         itself only warns and keeps the default,
#       an unknown name under the prefix (snowflake_id.sequencebits = 14,
#         also in postgresql.auto.conf): PostgreSQL itself says nothing,
#     and each time the server log names the setting and the valid range or
#     the limit that was broken (or the file and line of the mistake);
#   - with the prefix reserved, a session's SET of an unknown
#     snowflake_id.* name is refused;
#   - an epoch so far in the past that the time field has run out (35 time
#     bits from 2000-01-01) stops no server: it starts, warns, and refuses
#     each ID with SQLSTATE 54000 and the way out;
#   - the boundaries are accepted: node_id 1023 with the default layout, and
#     node_bits 16 + sequence_bits 12 (exactly 35 time bits, recent epoch)
#     with node_id 65535 start and issue IDs that decode to that node (this
#     also proves that the refusals come from the checks, not from a broken
#     install);
#   - without snowflake_id.node_id the server starts, but snowflake_next()
#     and a column default using it fail with an error naming
#     snowflake_id.node_id, a hint, and a specific SQLSTATE (not XX000);
#   - without shared_preload_libraries, CREATE EXTENSION fails with a message
#     naming shared_preload_libraries, and so do snowflake_next(),
#     snowflake_stats() and snowflake_decode() of an extension created while
#     the library was preloaded; no backend crashes.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/startup_refusal.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

failures=0
bad() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# Shows the server log lines that explain a refusal.
show_log() {
  grep -Ei 'snowflake|FATAL|PANIC|shared_preload' "$(cluster_log "$1")" | sed 's/^/    log: /' | head -8 || true
}

# refuses NAME DESCRIPTION CONF_LINES ERE...: a fresh cluster with the given
# postgresql.conf lines (newline separated) must fail to start, and its log
# must match every ERE (case-insensitive).
refuses() {
  local name=$1 what=$2 conf=$3 re; shift 3
  local -a lines
  mapfile -t lines <<<"$conf"
  cluster_init "$name" "$(free_port)" "${lines[@]}"
  if cluster_start "$name" 2>/dev/null; then
    bad "$what: the server started"
    show_log "$name"
    cluster_stop "$name"
    return
  fi
  pass "$what: the server refuses to start"
  for re in "$@"; do
    if log_has "$name" "$re"; then
      pass "$what: the log matches /$re/"
    else
      bad "$what: the log does not match /$re/"
    fi
  done
  show_log "$name"
}

# starts NAME DESCRIPTION CONF_LINES NODE: a fresh cluster with the given
# configuration starts and its IDs decode to NODE.
starts() {
  local name=$1 what=$2 conf=$3 node=$4 got
  local -a lines
  mapfile -t lines <<<"$conf"
  cluster_init "$name" "$(free_port)" "${lines[@]}"
  if ! cluster_start "$name"; then
    bad "$what: the server did not start"
    show_log "$name"
    return
  fi
  if got=$(psql_on "$name" -At -c "CREATE EXTENSION snowflake_id" \
             -c "SELECT snowflake_node(snowflake_next())" 2>&1) && [ "$got" = "$node" ]; then
    pass "$what: the server starts and IDs decode to node $node"
  else
    bad "$what: expected IDs from node $node, got: $got"
  fi
  cluster_stop "$name"
}

# expect_error NAME DESCRIPTION SQL ERE [DATABASE]: SQL fails, its message
# (with hint and detail) matches ERE, and the SQLSTATE is not XX000.
expect_error() {
  local name=$1 what=$2 sql=$3 re=$4 db=${5:-postgres} out state
  if ! out=$(sql_error "$name" "$sql" "$db"); then
    bad "$what: '$sql' succeeded: $out"
    return
  fi
  state=$(sqlstate_of "$out")
  printf '%s\n' "$out" | sed 's/^/    /'
  if grep -Eiq -- "$re" <<<"$out"; then
    pass "$what: the error matches /$re/"
  else
    bad "$what: the error does not match /$re/"
  fi
  if [ -z "$state" ]; then
    bad "$what: no SQLSTATE in the error"
  elif [ "$state" = "XX000" ]; then
    bad "$what: SQLSTATE XX000 (internal error), expected a specific class"
  else
    pass "$what: SQLSTATE $state"
  fi
}

# Crashed backends show up in the log as "terminated by signal".
no_crash() {
  local name=$1
  if [ "$(sql_value "$name" "SELECT 1" 2>/dev/null)" != "1" ]; then
    bad "$name: the server no longer answers"
  elif log_has "$name" 'terminated by signal|PANIC|was terminated'; then
    bad "$name: the log shows a crashed backend"
  else
    pass "$name: the server is up and no backend crashed"
  fi
}

echo "== boundaries that must be accepted"
starts max_node "node_id = 1023 with the default layout" \
  "snowflake_id.node_id = 1023" 1023
# 35 time bits cover only 2^35 ms (about 397 days) after the epoch, so this
# layout needs a recent epoch: yesterday.
recent_epoch=$(date -u -d '1 day ago' '+%Y-%m-%d 00:00:00+00')
starts time35 "node_bits = 16, sequence_bits = 12 (35 time bits), node_id = 65535, epoch $recent_epoch" \
  "snowflake_id.node_bits = 16
snowflake_id.sequence_bits = 12
snowflake_id.epoch = '$recent_epoch'
snowflake_id.node_id = 65535" 65535

echo "== settings that must be refused at server start"
refuses node5000 "node_id = 5000 with node_bits = 10" \
  "snowflake_id.node_id = 5000" \
  'snowflake_id\.node_id' 'range' '1023'
refuses node1024 "node_id = 1024 with node_bits = 10" \
  "snowflake_id.node_id = 1024" \
  'snowflake_id\.node_id' 'range' '1023'
refuses node_neg "node_id = -2" \
  "snowflake_id.node_id = -2" \
  'snowflake_id\.node_id' 'range'
refuses bits31 "node_bits = 20, sequence_bits = 12 (31 time bits)" \
  "snowflake_id.node_id = 1
snowflake_id.node_bits = 20
snowflake_id.sequence_bits = 12" \
  'snowflake_id\.(node_bits|sequence_bits)' '35'
refuses bits34 "node_bits = 17, sequence_bits = 12 (34 time bits)" \
  "snowflake_id.node_id = 1
snowflake_id.node_bits = 17
snowflake_id.sequence_bits = 12" \
  'snowflake_id\.(node_bits|sequence_bits)' '35'
# A time field that has ended stops no server (time_field_end.sh): it
# starts, warns, and refuses each ID (54000) with the way out.
cluster_init epoch_past "$(free_port)" "snowflake_id.node_id = 1" "snowflake_id.node_bits = 16" \
  "snowflake_id.sequence_bits = 12" "snowflake_id.epoch = '2000-01-01 00:00:00+00'"
if cluster_start epoch_past; then
  pass "epoch too far in the past for 35 time bits (2000-01-01): the server starts"
  log_has epoch_past "WARNING: .*snowflake_id\.epoch = '2000-01-01 00:00:00\+00' is too far in the past: the 35-bit time field ended" ||
    bad "epoch 2000-01-01 with 35 time bits: no start-up warning"
  psql_on epoch_past -c "CREATE EXTENSION snowflake_id"
  expect_error epoch_past "snowflake_next() past the end of the time field" \
    "SELECT snowflake_next()" '^ERROR: +54000: .*time field'
  expect_error epoch_past "its hint: the way out" \
    "SELECT snowflake_next()" '^HINT: .*Move the databases to a new server .*a snowflake_id.node_id no server ever issued under'
  cluster_stop epoch_past
else
  bad "epoch 2000-01-01 with 35 time bits: the server did not start"
  show_log epoch_past
fi
refuses epoch_future "epoch in the future" \
  "snowflake_id.node_id = 1
snowflake_id.epoch = '2099-01-01 00:00:00+00'" \
  'snowflake_id\.epoch' 'future'

echo "== mistyped settings: refused, never started on defaults"
refuses bad_int "sequence_bits = '14 bits'" \
  "snowflake_id.node_id = 1
snowflake_id.sequence_bits = '14 bits'" \
  'FATAL: .*invalid value for "snowflake_id.sequence_bits": "14 bits" \(in ".*postgresql.conf" line [0-9]+\)' \
  'HINT: .*does not start on the default' 'HINT: .*snowflake_id.sequence_bits takes an integer from 1 to 28'
refuses bad_bool "lease_sync = 'maybe'" \
  "snowflake_id.node_id = 1
snowflake_id.lease_sync = 'maybe'" \
  'FATAL: .*invalid value for "snowflake_id.lease_sync": "maybe"' 'HINT: .*snowflake_id.lease_sync takes a boolean: on or off'
refuses bad_unit "max_clock_drift = '5 parsecs'" \
  "snowflake_id.node_id = 1
snowflake_id.max_clock_drift = '5 parsecs'" \
  'FATAL: .*invalid value for "snowflake_id.max_clock_drift": "5 parsecs"' "HINT: .*snowflake_id.max_clock_drift takes a duration from 0, such as '5s'"
refuses unknown_name "snowflake_id.sequencebits = 14 (a misspelt name)" \
  "snowflake_id.node_id = 1
snowflake_id.sequencebits = 14" \
  'FATAL: .*unknown setting "snowflake_id.sequencebits" \(in ".*postgresql.conf" line [0-9]+\)' \
  'HINT: .*node_id, epoch, node_bits, sequence_bits, max_clock_drift, max_clock_offset, lease_sync, registry, registry_fleet, registry_grant, registry_allow_unverified and public_id_keys'
refuses offset_range "max_clock_offset = '2h' (over its 1 h)" \
  "snowflake_id.node_id = 1
snowflake_id.max_clock_offset = '2h'" \
  'FATAL: .*snowflake_id.max_clock_offset' "HINT: .*snowflake_id.max_clock_offset takes a duration from 0 to 1h, such as '1s'"
# The same mistake made with ALTER SYSTEM (PostgreSQL accepts any name under
# an unreserved prefix there) is found in postgresql.auto.conf.
cluster_init auto_conf "$(free_port)" "snowflake_id.node_id = 1"
if cluster_start auto_conf; then
  psql_on auto_conf -c "ALTER SYSTEM SET snowflake_id.nodeid = 3" 2>/dev/null &&
    bad "ALTER SYSTEM of an unknown snowflake_id name succeeded on a running server (the prefix is not reserved)"
  cluster_stop auto_conf
  echo "snowflake_id.nodeid = '3'" | as_pg tee -a "$(cluster_dir auto_conf)/postgresql.auto.conf" >/dev/null
  if cluster_start auto_conf 2>/dev/null; then
    bad "an unknown name in postgresql.auto.conf: the server started"
    cluster_stop auto_conf
  elif log_has auto_conf 'unknown setting "snowflake_id.nodeid" \(in ".*postgresql.auto.conf" line'; then
    pass "an unknown name in postgresql.auto.conf: the server refuses to start, naming the file"
  else
    bad "an unknown name in postgresql.auto.conf: the log does not name it"
    show_log auto_conf
  fi
else
  bad "the cluster for the postgresql.auto.conf case did not start"
fi
starts good_values "well-formed values of every setting start" \
  "snowflake_id.node_id = 3
snowflake_id.sequence_bits = '12'
snowflake_id.lease_sync = off
snowflake_id.max_clock_drift = '5s'" 3

echo "== node_id not set"
cluster_init unset "$(free_port)"
if cluster_start unset; then
  pass "without snowflake_id.node_id the server starts"
  psql_on unset -c "CREATE EXTENSION snowflake_id" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), x int)"
  expect_error unset "snowflake_next() without node_id" \
    "SELECT snowflake_next()" 'snowflake_id\.node_id'
  expect_error unset "snowflake_next() without node_id has a hint that names the registry too" \
    "SELECT snowflake_next()" '^HINT: .*0 and 1023 .*claim a free node id from a registry \(snowflake_id\.registry'
  expect_error unset "INSERT using the column default without node_id" \
    "INSERT INTO t (x) VALUES (1)" 'snowflake_id\.node_id'
  expect_error unset "SET of an unknown snowflake_id name (the prefix is reserved)" \
    "SET snowflake_id.sequencebits = 14" 'invalid configuration parameter name "snowflake_id.sequencebits"'
  no_crash unset
  cluster_stop unset
else
  bad "without snowflake_id.node_id the server did not start"
  show_log unset
fi

echo "== not in shared_preload_libraries"
cluster_init nopreload "$(free_port)" "snowflake_id.node_id = 1"
# First create the extension while the library is preloaded, so that the
# functions exist when it no longer is.
if cluster_start nopreload; then
  psql_on nopreload -c "CREATE EXTENSION snowflake_id" -c "CREATE DATABASE fresh"
  cluster_stop nopreload
  cluster_conf nopreload "shared_preload_libraries = ''"
  if cluster_start nopreload; then
    pass "without shared_preload_libraries the server starts"
    expect_error nopreload "CREATE EXTENSION without preloading" \
      "CREATE EXTENSION snowflake_id" 'shared_preload_libraries' fresh
    expect_error nopreload "snowflake_next() without preloading" \
      "SELECT snowflake_next()" 'shared_preload_libraries'
    expect_error nopreload "the hint: add to the list, keep what is there, a node id or a registry" \
      "SELECT snowflake_next()" "^HINT: .*keeping the libraries already there .*'pg_stat_statements,snowflake_id'.*snowflake_id\.registry"
    expect_error nopreload "snowflake_stats() without preloading" \
      "SELECT * FROM snowflake_stats()" 'shared_preload_libraries'
    expect_error nopreload "snowflake_decode() without preloading" \
      "SELECT * FROM snowflake_decode(1)" 'shared_preload_libraries'
    no_crash nopreload
    cluster_stop nopreload
  else
    bad "without shared_preload_libraries the server did not start"
    show_log nopreload
  fi
else
  bad "the cluster for the shared_preload_libraries case did not start"
  show_log nopreload
fi

[ "$failures" -eq 0 ] || fail "$failures checks failed"
pass "startup_refusal"
