#!/usr/bin/env bash
# Every successor starts above everything its predecessor could have handed
# out, without a registry, and does not stop when nothing is wrong
# (docs/operations.md, "Successors"). Each case fails on the code before
# the successor's floor (0.3.0 before it):
#   - asynchronous failover: the standby stops hearing its primary (the
#     walsender frozen with SIGSTOP), the primary hands a client a maximal
#     batch (up to max_clock_drift ahead of its clock) that never reaches a
#     row or the standby, is killed, and the standby is promoted at once.
#     No ID the promoted server issues lies in the client's range (every
#     pair of it is the client's), its first insert succeeds at once (well
#     within a second), and snowflake_stats() and the log say how far ahead
#     the floor put the IDs. In the default layout and with one sequence bit;
#     and promoted, then crashed before its first ID and restarted; and two
#     takeovers in a row, the second (a standby of the first successor)
#     without the first's lease, only its timeline; a cascaded standby
#     promoted after its primary's primary died; a point-in-time recovery
#     to a target a second before the end, the client's batch in that
#     second;
#   - a standby with a smaller max_clock_drift (5 s) than its primary (60 s)
#     that was 39 s ahead: promoted, it issues at once (it refused every ID
#     for 34 s); also with its own node id, accepted after the promotion;
#   - a maximal batch right after the takeover does not wait;
#   - an accepted copy of an original that ran a larger max_clock_drift
#     (60 s, 40 s ahead after the copy was taken) than the copy (5 s): its
#     IDs start above every ID the original handed out;
#   - a standby given the same node id change as its primary (9 to 10,
#     accepted there) issues after promotion without an acceptance of its
#     own, and a promoted server that accepted a change stays accepted
#     after a crash before its first checkpoint.
#
# Run from the repository root, with the extension installed (one case:
# name it, e.g. `successors.sh copy`):
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/successors.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_failover.sh
. "$(dirname "$0")/lib_failover.sh"

require_installed_extension

# client_batch NAME COUNT: a client takes COUNT IDs and keeps them (no row):
# prints the smallest and the largest. A batch is consecutive pairs, so
# every ID of its node between the two is the client's.
client_batch() {
  sql_value "$1" "SELECT a[1] || ' ' || a[cardinality(a)] FROM (SELECT snowflake_next_batch_array($2) a) b"
}

# first_insert NAME LABEL: the first insert after the takeover succeeds at
# once: prints its ID; fails when it errs or the statement took 1 s or more.
first_insert() {
  local out id ms
  out=$(psql_on "$1" -At -F ' ' -c "INSERT INTO t (src) VALUES ('first') RETURNING id, round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::int" 2>&1) ||
    fail "$2: the first insert after the takeover failed: $out"
  read -r id ms <<<"$out"
  [ "$ms" -lt 1000 ] || fail "$2: the first insert took $ms ms"
  echo "$id"
}

# check_outside NAME LABEL LOW HIGH NODE: the server NAME, taken over,
# issues IDs above HIGH (8 clients inserting for 3 s, and 1000 more), none
# in LOW..HIGH, every one of node NODE.
check_outside() {
  local name=$1 label=$2 low=$3 high=$4 node=$5 out rc=0
  printf "INSERT INTO t (src) VALUES ('after');\n" > "$SF_WORK/$name.sql"
  out=$(pgbench -n -h 127.0.0.1 -p "$(cluster_port "$name")" -U postgres -c 8 -j 2 -T 3 \
    -f "$SF_WORK/$name.sql" postgres 2>&1) || rc=$?
  [ "$rc" = 0 ] || { printf '%s\n' "$out" | tail -5; fail "$label: pgbench failed"; }
  psql_on "$name" -c "INSERT INTO t (src) SELECT 'after' FROM generate_series(1, 1000)"
  local counts; counts=$(sql_value "$name" "SELECT count(*) || ' ' || count(*) FILTER (WHERE id BETWEEN $low AND $high) || ' ' || count(*) FILTER (WHERE id <= $high OR snowflake_node(id) <> $node) FROM t WHERE src IN ('first', 'after')")
  local total inside below; read -r total inside below <<<"$counts"
  [ "$inside" = 0 ] || fail "$label: $inside of $total new IDs were handed to the client before the takeover"
  [ "$below" = 0 ] || fail "$label: $below of $total new IDs are not above $high or not of node $node"
  pass "$label: $total new IDs, none of the client's, all above $high"
}

# check_reported NAME LABEL: snowflake_stats() and the log name the floor.
check_reported() {
  local ahead
  ahead=$(sql_value "$1" "SELECT successor_ahead_ms FROM snowflake_stats() WHERE successor_floor IS NOT NULL")
  [ -n "$ahead" ] || fail "$2: snowflake_stats() shows no successor floor"
  log_has "$1" "took over its node id: new IDs start at .* \(${ahead} ms ahead of the clock" ||
    fail "$2: the log does not say where the successor's floor put the IDs"
  pass "$2: snowflake_stats() and the log say the floor put IDs $ahead ms ahead of the clock"
}

# primary_and_standby P S CONF...: a primary P of node 9 with CONF and 100
# rows in t, and S, its streaming standby, which has replayed them.
primary_and_standby() {
  local p=$1 s=$2; shift 2
  cluster_init "$p" "$(free_port)" "snowflake_id.node_id = 9" "$@"
  cluster_start "$p" || fail "$p did not start"
  psql_on "$p" -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE" \
    -c "INSERT INTO t (src) SELECT 'before' FROM generate_series(1, 100)"
  cluster_basebackup "$s" "$(free_port)" "$p"
  cluster_start "$s" || fail "$s did not start"
  wait_for_replay "$s" "$p"
}

# cut_off NAME CONF...: primary_and_standby NAME-p NAME-s, then the standby
# stops hearing the primary (the walsender frozen with SIGSTOP).
cut_off() {
  local name=$1; shift
  primary_and_standby "$name-p" "$name-s" "$@"
  freeze_walsender "$name-p"
}

# freeze_walsender P: P's one standby stops hearing it (its walsender
# frozen with SIGSTOP).
freeze_walsender() {
  local walsender
  walsender=$(sql_value "$1" "SELECT pid FROM pg_stat_replication")
  [ -n "$walsender" ] || fail "$1: no walsender"
  kill -STOP "$walsender"
}

# batch_then_takeover OLD NEW COUNT NAME LABEL: OLD's client takes a batch
# of COUNT IDs and keeps it; OLD is killed and NEW promoted at once; NEW's
# first insert, and every ID after it, lie above the batch (check_outside).
batch_then_takeover() {
  local old=$1 new=$2 name=$4 range low high first
  range=$(client_batch "$old" "$3")
  read -r low high <<<"$range"
  echo "$name: $old's client holds $low .. $high, $(ahead_ms "$old" "$high") ms ahead of its clock"
  cluster_kill9 "$old"
  promote "$new"
  first=$(first_insert "$new" "$name")
  [ "$first" -gt "$high" ] || fail "$name: $new's first ID $first is not above $old's client's $high"
  check_outside "$new" "$5" "$low" "$high" 9
}

# async_case NAME SEQUENCE_BITS: asynchronous failover with IDs a client
# kept and the standby never saw.
async_case() {
  local name=$1 bits=$2 p="$1-p" s="$1-s" range low high first t0 t1
  cut_off "$name" "snowflake_id.sequence_bits = $bits"
  range=$(client_batch "$p" "$(max_batch "$bits" 5000)")
  read -r low high <<<"$range"
  echo "$name: the client holds $low .. $high, $(ahead_ms "$p" "$high") ms ahead of the primary's clock"
  cluster_kill9 "$p"
  t0=$(now_ms)
  promote "$s"
  first=$(first_insert "$s" "$name")
  t1=$(now_ms)
  echo "$name: first insert $first, $((t1 - t0)) ms after the promotion began"
  [ "$first" -gt "$high" ] || fail "$name: the first new ID $first is not above the client's $high"
  # A maximal batch right after the takeover waits no more than on any
  # server: not at all.
  psql_on "$s" -c "SELECT cardinality(snowflake_next_batch_array($(max_batch "$bits" 5000)))" >/dev/null
  [ "$(sql_value "$s" "SELECT waits FROM snowflake_stats()")" = 0 ] ||
    fail "$name: a maximal batch after the takeover waited for the clock ($(sql_value "$s" "SELECT waits || ' waits, ' || wait_time_ms || ' ms' FROM snowflake_stats()"))"
  check_outside "$s" "$name (asynchronous, sequence_bits $bits)" "$low" "$high" 9
  check_reported "$s" "$name"
}

# async_crash_case: as async_case (one sequence bit), but the promoted
# server crashes (kill -9) before it issued anything, and restarts as a
# primary: it is a successor still.
async_crash_case() {
  local p=crash-p s=crash-s range low high first
  # (20 s ahead: the crash and the restart take seconds.)
  cut_off crash "snowflake_id.sequence_bits = 1" "snowflake_id.max_clock_drift = '20s'"
  range=$(client_batch "$p" "$(max_batch 1 20000)")
  read -r low high <<<"$range"
  cluster_kill9 "$p"
  promote "$s"
  cluster_kill9 "$s"
  cluster_start "$s" || fail "crash: the promoted standby did not restart"
  first=$(first_insert "$s" "crash")
  [ "$first" -gt "$high" ] || fail "crash: the first new ID $first, after the crash, is not above the client's $high"
  check_outside "$s" "promoted, crashed before its first ID, restarted" "$low" "$high" 9
}

# chain_case: two takeovers in a row. A primary A, its standby B, and C, a
# standby of B. A dies and B is promoted; C follows B onto its new timeline,
# then stops hearing it before B's first lease; B hands a client a maximal
# batch (its floor, and the limit beyond), dies, and C is promoted within
# seconds. C never saw B's lease, only B's timeline: it must start above
# the client's batch all the same.
chain_case() {
  local walsender st
  primary_and_standby ch2-a ch2-b
  cluster_basebackup ch2-c "$(free_port)" ch2-b
  cluster_start ch2-c || fail "chain: C did not start"
  wait_for_replay ch2-c ch2-a
  cluster_kill9 ch2-a
  promote ch2-b
  for _ in $(seq 1 300); do
    st=$(sql_value ch2-b "SELECT pid || ' ' || state FROM pg_stat_replication" || true)
    [[ "$st" == *streaming* ]] && break
    sleep 0.1
  done
  [[ "$st" == *streaming* ]] || fail "chain: C does not stream from B after B's promotion"
  wait_for_replay ch2-c ch2-b
  walsender=${st%% *}
  kill -STOP "$walsender"
  batch_then_takeover ch2-b ch2-c "$(max_batch 12 5000)" chain \
    "two takeovers in a row, the second without the first's lease"
}

# cascade_case: a cascaded standby (C, a standby of the standby B) promoted
# after the primary A died: B stopped hearing A (its walsender frozen)
# while A handed a client a maximal batch 20 s ahead of its clock.
cascade_case() {
  primary_and_standby casc-a casc-b "snowflake_id.sequence_bits = 1" "snowflake_id.max_clock_drift = '20s'"
  cluster_basebackup casc-c "$(free_port)" casc-b
  cluster_start casc-c || fail "cascade: C did not start"
  wait_for_replay casc-c casc-a
  freeze_walsender casc-a
  batch_then_takeover casc-a casc-c "$(max_batch 1 20000)" cascade "a cascaded standby promoted, asynchronous"
  check_reported casc-c "cascade"
}

# pitr_case: a point-in-time recovery to a target a second before the end:
# in that last second the primary handed a client a maximal batch (60 s
# ahead of its clock) whose lease the recovery never replays, committed a
# row, and died. The restore, on a host whose max_clock_drift is 5 s,
# promoted at the target and accepted (it may be a copy: copies.sh),
# starts above the client's IDs.
pitr_case() {
  local archive="$SF_WORK/pitr-archive" target range low high first wal
  mkdir -p "$archive"; chown postgres:postgres "$archive"
  cluster_init pitr-p "$(free_port)" "snowflake_id.node_id = 9" "snowflake_id.sequence_bits = 1" \
    "snowflake_id.max_clock_drift = '60s'" "archive_mode = on" "archive_command = 'cp %p $archive/%f'"
  cluster_start pitr-p || fail "pitr: the primary did not start"
  psql_on pitr-p -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE" \
    -c "INSERT INTO t (src) SELECT 'before' FROM generate_series(1, 100)"
  cluster_basebackup pitr-r "$(free_port)" pitr-p
  rm -f "$(cluster_dir pitr-r)/standby.signal"
  psql_on pitr-p -c "INSERT INTO t (src) SELECT 'before the target' FROM generate_series(1, 100)"
  target=$(sql_value pitr-p "SELECT clock_timestamp()")
  sleep 1
  range=$(client_batch pitr-p "$(max_batch 1 60000)")
  read -r low high <<<"$range"
  psql_on pitr-p -c "INSERT INTO t (src) VALUES ('the end')"
  echo "pitr: target $target; after it the client holds $low .. $high, $(ahead_ms pitr-p "$high") ms ahead of the clock"
  wal=$(sql_value pitr-p "SELECT pg_walfile_name(pg_current_wal_lsn())")
  psql_on pitr-p -c "SELECT pg_switch_wal()" >/dev/null
  for _ in $(seq 1 300); do
    [ -f "$archive/$wal" ] && break
    sleep 0.1
  done
  [ -f "$archive/$wal" ] || fail "pitr: $wal was not archived within 30 s"
  cluster_kill9 pitr-p
  cluster_conf pitr-r "restore_command = 'cp $archive/%f %p'" "recovery_target_time = '$target'" \
    "recovery_target_action = 'promote'" "primary_conninfo = ''" "snowflake_id.max_clock_drift = '5s'"
  as_pg touch "$(cluster_dir pitr-r)/recovery.signal"
  cluster_start pitr-r || fail "pitr: the restore did not start"
  for _ in $(seq 1 300); do
    [ "$(sql_value pitr-r "SELECT pg_is_in_recovery()" 2>/dev/null)" = f ] && break
    sleep 0.1
  done
  [ "$(sql_value pitr-r "SELECT pg_is_in_recovery()")" = f ] || fail "pitr: the restore did not finish recovery"
  [ "$(sql_value pitr-r "SELECT count(*) FILTER (WHERE src = 'the end') || ' ' || count(*) FROM t")" = "0 200" ] ||
    fail "pitr: the restore did not stop at the target"
  psql_on pitr-r -c "SELECT snowflake_accept_configuration()" >/dev/null
  first=$(first_insert pitr-r "pitr")
  [ "$first" -gt "$high" ] || fail "pitr: the restore's first ID $first is not above the client's $high"
  check_outside pitr-r "a point-in-time recovery to a second before the end" "$low" "$high" 9
}

# A standby with a smaller drift limit than its primary, 39 s ahead.
smaller_drift_case() {
local node=${1:-9} p="small${1:-}-p" sb="small${1:-}-s" range low old_max first label
label="a standby with max_clock_drift 5s promoted 39 s ahead of its 60s primary"
cluster_init "$p" "$(free_port)" "snowflake_id.node_id = 9" "snowflake_id.sequence_bits = 6" \
  "snowflake_id.max_clock_drift = '60s'"
cluster_start "$p" || fail "small: the primary did not start"
psql_on "$p" -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
cluster_basebackup "$sb" "$(free_port)" "$p"
cluster_conf "$sb" "snowflake_id.max_clock_drift = '5s'" "snowflake_id.node_id = $node"
cluster_start "$sb" || fail "small: the standby did not start"
range=$(client_batch "$p" $((39 * 64000)))
read -r low old_max <<<"$range"
echo "small: the client holds $low .. $old_max, $(ahead_ms "$p" "$old_max") ms ahead of the clock"
wait_for_replay "$sb" "$p"
cluster_kill9 "$p"
promote "$sb"
if [ "$node" != 9 ]; then
  # Its own node id: held until accepted, and the acceptance may start as
  # far ahead as the old primary's recorded limit allows.
  label="$label, with node id $node accepted"
  psql_on "$sb" -c "SELECT snowflake_accept_configuration()" >/dev/null ||
    fail "small: the acceptance of node id $node after the promotion was refused"
fi
first=$(first_insert "$sb" "small")
[ "$first" -gt "$old_max" ] || fail "small: the first new ID $first is not above $old_max"
check_outside "$sb" "$label" "$low" "$old_max" "$node"
}

# An accepted copy of an original with a larger drift limit.
copy_case() {
local range low high first
cluster_init orig "$(free_port)" "snowflake_id.node_id = 4" "snowflake_id.sequence_bits = 6" \
  "snowflake_id.max_clock_drift = '60s'"
cluster_start orig || fail "copy: the original did not start"
psql_on orig -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE" \
  -c "INSERT INTO t (src) SELECT 'before' FROM generate_series(1, 100)"
cluster_basebackup copy "$(free_port)" orig
rm -f "$(cluster_dir copy)/standby.signal"
cluster_conf copy "snowflake_id.max_clock_drift = '5s'"
range=$(client_batch orig $((40 * 64000)))
read -r low high <<<"$range"
echo "copy: after the copy was taken the original handed out $low .. $high, $(ahead_ms orig "$high") ms ahead of its clock"
cluster_kill9 orig
cluster_start copy || fail "copy: the copy did not start"
[ "$(sql_value copy "SELECT issuing_held FROM snowflake_stats()")" = copied ] || fail "copy: the copy is not held"
psql_on copy -c "SELECT snowflake_accept_configuration()" >/dev/null
first=$(first_insert copy "copy")
[ "$first" -gt "$high" ] || fail "copy: the first new ID $first is not above the original's $high"
check_outside copy "an accepted copy (5s) of an original 40 s ahead under 60s" "$low" "$high" 4
}

# The same node id change on a primary and its standby.
same_change_case() {
local c old_max first
primary_and_standby ch-p ch-s
for c in ch-s ch-p; do
  cluster_conf "$c" "snowflake_id.node_id = 10"
  cluster_stop "$c"
  cluster_start "$c" || fail "change: $c did not restart"
done
psql_on ch-p -c "SELECT snowflake_accept_configuration()" >/dev/null \
  -c "INSERT INTO t (src) SELECT 'node 10' FROM generate_series(1, 100)"
old_max=$(sql_value ch-p "SELECT max(id) FROM t")
wait_for_replay ch-s ch-p
cluster_kill9 ch-p
promote ch-s
first=$(first_insert ch-s "change")
[ "$first" -gt "$old_max" ] || fail "change: the first new ID $first is not above $old_max"
[ "$(sql_value ch-s "SELECT snowflake_node($first)")" = 10 ] || fail "change: the promoted standby does not issue under node 10"
pass "a standby given its primary's accepted node id change (9 to 10) issues after promotion: $first"
}

# A promoted server that accepted a change, crashed before a checkpoint.
accepted_crash_case() {
local old_max first
cluster_init acc-p "$(free_port)" "snowflake_id.node_id = 9"
cluster_start acc-p || fail "accepted: the primary did not start"
psql_on acc-p -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
cluster_basebackup acc-s "$(free_port)" acc-p
cluster_conf acc-s "snowflake_id.node_id = 11" "checkpoint_timeout = '1h'"
cluster_start acc-s || fail "accepted: the standby did not start"
# (Many pages for the standby to write: its checkpoint after the promotion
# is spread over checkpoint_timeout, and is still running at the crash.)
psql_on acc-p -c "INSERT INTO t (src) SELECT 'node 9' FROM generate_series(1, 200000)"
old_max=$(sql_value acc-p "SELECT max(id) FROM t")
wait_for_replay acc-s acc-p
cluster_kill9 acc-p
promote acc-s
sql_error acc-s "SELECT snowflake_next()" >/dev/null || fail "accepted: the standby with another node id was not held"
psql_on acc-s -c "SELECT snowflake_accept_configuration()" >/dev/null \
  -c "INSERT INTO t (src) SELECT 'node 11' FROM generate_series(1, 100)"
cluster_kill9 acc-s
cluster_start acc-s || fail "accepted: the promoted server did not restart"
first=$(first_insert acc-s "accepted, crashed")
[ "$first" -gt "$old_max" ] && [ "$(sql_value acc-s "SELECT snowflake_node($first)")" = 11 ] ||
  fail "accepted: after the crash the first new ID $first is not above $old_max under node 11"
pass "a promoted server that accepted node 11 issues after a crash before its first checkpoint: $first"
}

# The cases, all or those named: successors.sh [async12 async1 async_crash
# chain cascade pitr smaller_drift smaller_drift_node copy same_change
# accepted_crash].
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(async12 async1 async_crash chain cascade pitr smaller_drift smaller_drift_node copy same_change accepted_crash)
for c in "${cases[@]}"; do
  case $c in
    async12) async_case async12 12 ;;
    async1) async_case async1 1 ;;
    smaller_drift_node) smaller_drift_case 11 ;;
    async_crash|chain|cascade|pitr|smaller_drift|copy|same_change|accepted_crash) "${c}_case" ;;
    *) fail "unknown case '$c'" ;;
  esac
done
