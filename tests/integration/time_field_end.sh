#!/usr/bin/env bash
# The end of the time field (docs/runbook.md, "54000"): a 35-bit time field
# lasts about 397 days. A server whose time field has ended
#   - refuses each ID with SQLSTATE 54000 and a hint that gives the way out;
#   - restarts (on the code before, the restart was FATAL: the whole server,
#     every database in it, stayed down), warns, and answers other queries;
#   - accepts no change in place (a later epoch, under the same node id or
#     another, other widths): held, and the acceptance refused (55000);
#   - the way out works: a new server (initdb) with the same widths, a later
#     epoch and a node id no server issued under with the old epoch, the
#     data dumped into it. Its IDs sort below the old ones, none equals an
#     old one, every one decodes to the new node id and to the present, and
#     it issues again after a restart.
# The server runs on a faked clock (libfaketime) that is moved to the time
# field's end, an hour ahead of the real clock.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/time_field_end.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
faketime_init

# 10 node bits and 18 sequence bits leave 35 time bits: 2^35 - 1 ms, the
# last millisecond of the field, lies an hour ahead of the real clock.
field_ms=$(( (1 << 35) - 1 ))
end_ms=$(( ($(now_ms) / 1000 + 3600) * 1000 ))
epoch_s=$(( (end_ms - field_ms) / 1000 ))
old_epoch=$(date -u -d "@$epoch_s" '+%Y-%m-%d %H:%M:%S+00')
end_ms=$(( epoch_s * 1000 + field_ms ))

# clock_to SECONDS: the server's clock SECONDS after the field's last
# millisecond (negative: before it).
clock_to() {
  local offset_s=$(( (end_ms - $(now_ms)) / 1000 + $1 ))
  clock_set "+$offset_s"
}

restart() {
  cluster_stop tf
  cluster_start_faked tf || fail "$1: the server did not start"
}

cluster_init tf "$(free_port)" "snowflake_id.node_id = 7" "snowflake_id.node_bits = 10" \
  "snowflake_id.sequence_bits = 18" "snowflake_id.epoch = '$old_epoch'"
cluster_start_faked tf || fail "the server did not start"
psql_on tf -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), src text)"

echo "== the last seconds of the field (epoch $old_epoch, 35 time bits)"
clock_to -20
psql_on tf -c "INSERT INTO t (src) SELECT 'old' FROM generate_series(1, 1000)"
old_min=$(sql_value tf "SELECT min(id) FROM t")
old_max=$(sql_value tf "SELECT max(id) FROM t")
clock_to 5
out=$(sql_error tf "SELECT snowflake_next()") || fail "an ID past the end of the time field was issued: $out"
[ "$(sqlstate_of "$out")" = 54000 ] || fail "past the end: expected SQLSTATE 54000, got: $out"
grep -q "35-bit time field is exhausted" <<<"$out" || fail "past the end: the message does not say the field is exhausted: $out"
grep -Eq '^HINT: .*Move the databases to a new server .* a later snowflake_id.epoch, the same node_bits and sequence_bits and a snowflake_id.node_id no server ever issued under' <<<"$out" ||
  fail "past the end: the hint does not give the way out: $out"
pass "past the end of the field each ID is refused (54000) with the way out"

echo "== a restart past the end"
restart "past the end"
[ "$(sql_value tf "SELECT count(*) FROM t")" = 1000 ] || fail "past the end: the restarted server does not answer"
log_has tf "WARNING: .*35-bit time field ended" || fail "past the end: no warning at the restart"
out=$(sql_error tf "SELECT snowflake_next()") || fail "an ID was issued after the restart: $out"
[ "$(sqlstate_of "$out")" = 54000 ] || fail "after the restart: expected SQLSTATE 54000, got: $out"
pass "the server restarts past the end of the field, warns, and still refuses IDs (54000)"

echo "== no change in place"
new_epoch=$(date -u -d '1 day ago' '+%Y-%m-%d 00:00:00+00')
# refused_in_place LABEL CONF...: restarted with CONF, the change is held
# and its acceptance refused (55000): in place, a later epoch would issue
# the old IDs again (under the same node id at once; under another one
# after a change back, or on a standby that replays the change).
refused_in_place() {
  local label=$1; shift
  cluster_conf tf "$@"
  restart "$label"
  [ "$(sql_value tf "SELECT issuing_held FROM snowflake_stats()")" = configuration_changed ] ||
    fail "$label: the change is not held"
  out=$(sql_error tf "SELECT snowflake_accept_configuration()") || fail "$label: accepted: $out"
  [ "$(sqlstate_of "$out")" = 55000 ] || fail "$label: expected SQLSTATE 55000, got: $out"
  out=$(sql_error tf "SELECT snowflake_next()") || fail "$label: an ID was issued: $out"
  pass "$label: held, and its acceptance refused (55000)"
}
refused_in_place "a later epoch under the same node id" "snowflake_id.epoch = '$new_epoch'"
refused_in_place "a later epoch and node id 8" "snowflake_id.node_id = 8"
refused_in_place "a later epoch, node id 8 and one sequence bit less" "snowflake_id.sequence_bits = 17"

echo "== the way out: a new server (initdb), a later epoch, the same widths, node id 8, the data dumped into it"
cluster_conf tf "snowflake_id.node_id = 7" "snowflake_id.sequence_bits = 18" "snowflake_id.epoch = '$old_epoch'"
restart "the old server back to its configuration"
cluster_init tf2 "$(free_port)" "snowflake_id.node_id = 8" "snowflake_id.node_bits = 10" \
  "snowflake_id.sequence_bits = 18" "snowflake_id.epoch = '$new_epoch'"
cluster_start tf2 || fail "the way out: the new server did not start"
pg_dump -h 127.0.0.1 -p "$(cluster_port tf)" -U postgres postgres | psql_on tf2 -v ON_ERROR_STOP=1 >/dev/null ||
  fail "the way out: the dump did not restore"
psql_on tf2 -c "INSERT INTO t (src) SELECT 'new' FROM generate_series(1, 1000)"
read -r n nodes new_max ok_time <<<"$(sql_value tf2 "SELECT count(DISTINCT id), string_agg(DISTINCT snowflake_node(id)::text, ','), max(id), bool_and(abs(extract(epoch FROM snowflake_timestamp(id) - now())) < 60) FROM t WHERE src = 'new'" | tr '|' ' ')"
[ "$n" = 1000 ] && [ "$nodes" = 8 ] || fail "the way out: $n new IDs of node(s) $nodes, expected 1000 of node 8"
[ "$ok_time" = t ] || fail "the way out: a new ID does not decode to the present"
[ "$new_max" -lt "$old_min" ] || fail "the way out: new IDs up to $new_max, old from $old_min: expected them below"
[ "$(sql_value tf2 "SELECT count(*) FROM t WHERE src = 'old' AND snowflake_node(id, '$old_epoch', 10, 18) = 7")" = 1000 ] ||
  fail "the way out: the old rows are not all node 7's"
cluster_stop tf2
cluster_start tf2 || fail "the way out: the new server did not restart"
psql_on tf2 -c "INSERT INTO t (src) SELECT 'after restart' FROM generate_series(1, 100)" ||
  fail "the way out: no ID after a restart"
[ "$(sql_value tf2 "SELECT count(DISTINCT id) || ' ' || count(*) FROM t")" = "2100 2100" ] || fail "the way out: an ID repeats"
pass "the way out: a new server issues IDs of node 8 below the old ones ($new_max < $old_min ..$old_max), none an old one, also after a restart"
