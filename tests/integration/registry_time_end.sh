#!/usr/bin/env bash
# The end of the time field under a registry: a layout whose epoch makes
# the time field end about 40 s after the test starts (27 node bits, 1
# sequence bit: 35 bits of time, 397.7 days; two IDs a millisecond, so a
# batch of 2,000 runs a second ahead of the clock).
#
#   1. `a` holds node id 0 and issues batches until the field is used up,
#      running ahead of the clock up to max_clock_drift (15 s): it reaches the
#      field's last millisecond some 15 s before the clock does (b's window
#      below: 5 s were too few for a stop and two starts on a busy
#      machine), and
#      fails with 54000. It stops cleanly: its release sets the node id's
#      floor to the field's last millisecond.
#   2. `b`, with node id 0 too, claims it while the clock is still before
#      the field's end, with that floor, and must issue nothing: no
#      millisecond is left above it (54000). Before, the generator was
#      raised only to the pair before (end, 0), and `b` issued the field's
#      last millisecond again: a's IDs. `b` has no drift allowance
#      (max_clock_drift = 0), so it is always some seconds short of the
#      floor: it must say at once that the field is used up (before, it
#      said to wait for the floor, 55000, and said 54000 only when its
#      clock came within the drift limit of the end).
# Every ID is recorded; the test ends with the check that none was issued
# twice.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# The epoch: the field's 2^35 ms end LEAD_S seconds from now.
LEAD_S=40
epoch_s=$(( ($(now_ms) + LEAD_S * 1000 - (1 << 35)) / 1000 ))
EPOCH=$(date -u -d "@$epoch_s" '+%Y-%m-%d %H:%M:%S+00')
end_ms=$(( (1 << 35) - 1 ))
end_unix_ms=$(( epoch_s * 1000 + end_ms ))
LAYOUT=("snowflake_id.node_bits = 27" "snowflake_id.sequence_bits = 1" "snowflake_id.epoch = '$EPOCH'"
  "snowflake_id.registry_fleet = 'short'" "snowflake_id.node_id = 0")
psql_on reg -c "SELECT snowflake_registry.create_fleet('short', $((epoch_s * 1000)), 27, 1)" >/dev/null
# id_ms ID: the ID's time (ms since the epoch).
id_ms() { echo $(( $1 >> 28 )); }

# --- 1. a issues to the end of the field, ahead of the clock
node_init a "${LAYOUT[@]}" "snowflake_id.registry_grant = '20s'" "snowflake_id.max_clock_drift = '15s'"
cluster_start a
make_table a
wait_issuing a 30
# batch_until_full N: batches of N on a until one is refused (the field's
# rest is too small, or used up); fails if the clock reaches the field's end
# first. The refusal in $out.
batch_until_full() {
  while [ "$(now_ms)" -lt $(( end_unix_ms - 2000 )) ]; do
    out=$(psql_on a -v VERBOSITY=verbose -At -c "INSERT INTO t SELECT * FROM snowflake_next_batch($1) RETURNING id" 2>&1) ||
      return 0
    echo "$out" >> "$IDS"
  done
  fail "a did not use the field up before the clock came within 2 s of its end"
}
# Batches of 2,000 (a second of IDs) up to the end; the field's last pairs
# in smaller ones, the last two one at a time.
for n in 2000 200 20 1; do
  batch_until_full "$n"
  grep -q "54000" <<<"$out" || fail "a's batch of $n was refused otherwise: $out"
done
a_last=$(sql_value a "SELECT max(id) FROM t")
[ "$(id_ms "$a_last")" = "$end_ms" ] ||
  fail "a's last ID has time $(id_ms "$a_last"), not the field's last millisecond $end_ms"
left_ms=$(( end_unix_ms - $(now_ms) ))
pass "a issued to the field's last millisecond ($end_ms) $left_ms ms before the clock reached it, then 54000"
cluster_stop a
floor=$(sql_value reg "SELECT max_until_ms FROM snowflake_registry.node_ids WHERE fleet = 'short' AND node_id = 0")
[ "$floor" -ge "$end_ms" ] || fail "a's release left node id 0's floor at $floor, below the field's last millisecond $end_ms"

# --- 2. b claims node id 0 above the field's last millisecond, before the
# clock gets there
node_init b "${LAYOUT[@]}" "snowflake_id.max_clock_drift = 0"
cluster_start b
make_table b
for _ in $(seq 1 50); do
  [ "$(sql_value b "SELECT registry_state FROM snowflake_stats()")" = held ] && break
  sleep 0.1
done
[ "$(now_ms)" -lt "$end_unix_ms" ] ||
  fail "b claimed after the clock passed the field's end: the test shows nothing (a machine too slow?)"
for _ in 1 2 3 4 5; do issue b 10 2>/dev/null || true; done
no_duplicates "a and b at the end of the time field"
b_count=$(sql_value b "SELECT count(*) FROM t")
[ "$b_count" = 0 ] || fail "b issued $b_count IDs under a floor at the field's last millisecond (first: $(sql_value b "SELECT min(id) FROM t"))"
expect_refusal b "SELECT snowflake_next()" 54000 "" "b under a floor at the field's last millisecond"
pass "b, holding node id 0 above a floor at the field's last millisecond, issues nothing (54000)"
