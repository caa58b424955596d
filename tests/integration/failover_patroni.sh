#!/usr/bin/env bash
# A real HA manager under load: Patroni (Debian's 3.0) with one etcd (3.4)
# and two PostgreSQL servers on 127.0.0.1, Patroni's defaults
# (asynchronous replication) but shorter timeouts and use_pg_rewind
# (lib_patroni.sh says which and why). Both servers run node id 9 (one
# node that fails over), sequence_bits = 8 and max_clock_drift = 60s.
# Four writers keep taking IDs through whichever server is writable (libpq
# with both hosts and target_session_attrs=read-write), each recording what
# it got in a file: w1 and w2 insert rows (id bigint PRIMARY KEY DEFAULT
# snowflake_next(), RETURNING id), k1 takes batches of 400,000 IDs
# (snowflake_next_batch_array: it keeps the generator at the drift limit, a
# minute ahead of the clock) and k2 single snowflake_next() calls, neither
# with a row. Then
#   - the leader's walsender is frozen (SIGSTOP) while the writers go on
#     for a few rounds: IDs and rows the replica never sees; then its
#     Patroni and its postmaster are killed (kill -9), and Patroni promotes
#     the replica;
#   - the old leader's Patroni is started again: it rewinds its server
#     (pg_rewind) and follows the new leader;
#   - the same again the other way: the new leader's walsender frozen, it
#     is killed, and the first server is promoted once more.
# The writers run throughout and must make progress on each leader. At the
# end every ID counts: those the clients recorded (rows they were returned,
# IDs without a row) and every row of the table; no ID may be there twice
# (an ID of another record), and every ID a new leader issued lies above
# every ID the old one handed out. Each promoted server's successor floor
# (snowflake_stats()) must lie above the old leader's last IDs, and the test
# checks that it had to: those IDs lay ahead of the promoted server's clock
# and of the last lease it replayed, which is all a server without the
# floor resumed after (the code before 0fd11bc, such as 3cc1b47), so
# without the floor the new leader's IDs would have started among the old
# ones: k1's batches take most IDs of the seconds before the kill, and an
# ID there (one a second or two below the old leader's last, added to
# k2.ids of a kept run) fails the check below.
#
# Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/failover_patroni.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_failover.sh
. "$(dirname "$0")/lib_failover.sh"
# shellcheck source-path=SCRIPTDIR source=lib_patroni.sh
. "$(dirname "$0")/lib_patroni.sh"

WRITERS="w1 w2 k1 k2"
# patroni_before_stop (lib_patroni.sh's cleanup): the writers end, and a
# frozen walsender is thawed (lib.sh thaws the postmaster's children too,
# but only after Patroni is gone).
patroni_before_stop() {
  touch "$SF_WORK/writers.stop"
  local pid
  for pid in $(cat "$SF_WORK"/*.writer.pid 2>/dev/null); do kill "$pid" 2>/dev/null; done
  [ -f "$SF_WORK/frozen.pid" ] && kill -CONT "$(cat "$SF_WORK/frozen.pid")" 2>/dev/null
  return 0
}

etcd_start
for node in pg1 pg2; do
  patroni_init "$node" <<'PARAMETERS'
        shared_preload_libraries: snowflake_id
        snowflake_id.node_id: 9
        snowflake_id.sequence_bits: 8
        snowflake_id.max_clock_drift: 60s
PARAMETERS
done
patroni_run pg1
wait_leader pg1 180
psql_on pg1 -c "CREATE EXTENSION snowflake_id" -c "$FAILOVER_TABLE"
patroni_run pg2
wait_streaming pg1 pg2 180
[ "$(sql_value pg2 "SHOW snowflake_id.node_id")" = 9 ] || fail "pg2 does not have node id 9"
P1=$(cluster_port pg1) P2=$(cluster_port pg2)
pass "Patroni: etcd, pg1 leader and pg2 its streaming replica, both with node id 9"

# writer NAME SQL: runs SQL (each @ replaced by the round's number) through
# whichever server is writable, appending what it returns to
# $SF_WORK/NAME.ids (every line ends with the server's port), its errors
# to NAME.err, until $SF_WORK/writers.stop exists. A failed round (no
# writable server yet, a server killed under it) tries again 0.2 s later.
CONNINFO="host=127.0.0.1,127.0.0.1 port=$P1,$P2 user=postgres dbname=postgres target_session_attrs=read-write connect_timeout=5"
writer() {
  local name=$1 sql=$2 round=0
  while [ ! -e "$SF_WORK/writers.stop" ]; do
    round=$((round + 1))
    psql -X -q -At -F ' ' -v ON_ERROR_STOP=1 -d "$CONNINFO" -c "${sql//@/$round}" \
      >>"$SF_WORK/$name.ids" 2>>"$SF_WORK/$name.err" || sleep 0.2
  done
}
start_writer() {
  : > "$SF_WORK/$1.ids"
  writer "$@" &
  echo $! > "$SF_WORK/$1.writer.pid"
}
start_writer w1 "INSERT INTO t (src) SELECT 'w1:@:' || g FROM generate_series(1, 50) g RETURNING id, src, inet_server_port()"
start_writer w2 "INSERT INTO t (src) SELECT 'w2:@:' || g FROM generate_series(1, 50) g RETURNING id, src, inet_server_port()"
start_writer k1 "SELECT a[1], a[cardinality(a)], 'k1:@', inet_server_port() FROM snowflake_next_batch_array(400000) a"
start_writer k2 "SELECT snowflake_next(), 'k2:@:' || g, inet_server_port() FROM generate_series(1, 20) g"

# rounds_on NAME PORT: the writer's rounds (statements that returned) on
# the server at PORT since it last wrote through another one (the src
# field's second part is the round).
rounds_on() {
  awk -v port="$2" '
    { split($(NF - 1), f, ":") }
    $NF != port { delete seen; n = 0; next }
    !(f[2] in seen) { seen[f[2]]; n++ }
    END { print n + 0 }' "$SF_WORK/$1.ids"
}
# progress PORT ROUNDS: every writer has ROUNDS rounds on PORT (see rounds_on).
progress() {
  local w
  for w in $WRITERS; do [ "$(rounds_on "$w" "$1")" -ge "$2" ] || return 1; done
}
# drift_at_least NAME MS: NAME's IDs run at least MS ahead of its clock.
drift_at_least() { [ "$(sql_value "$1" "SELECT coalesce(drift_ms, 0) >= $2 FROM snowflake_stats()")" = t ]; }
# ms_of SERVER ID: the Unix time of ID in ms.
ms_of() { sql_value "$1" "SELECT (extract(epoch FROM snowflake_timestamp($2)) * 1000)::bigint"; }
# largest_on PORT: the largest ID any writer got from the server at PORT
# (the last of a batch; sort, as awk's numbers are doubles).
largest_on() {
  awk -v port="$1" '$NF == port { print $(NF - 2) }' "$SF_WORK"/*.ids | sort -n | tail -1
}

# failover OLD NEW LABEL: OLD, the leader, is cut off from its replica NEW
# (the walsender frozen), the writers go on on OLD for two rounds each,
# OLD's Patroni and postmaster are killed, and Patroni promotes NEW. Then:
# NEW's successor floor lies above the largest ID OLD handed out, which lay
# ahead of NEW's clock at the promotion and of the last lease NEW replayed
# (without the floor NEW would have issued it again); every writer makes
# three rounds on NEW.
failover() {
  local old=$1 new=$2 label=$3 walsender w rounds=() standby_lease kill_ms old_max old_max_ms floor
  local old_port new_port; old_port=$(cluster_port "$old") new_port=$(cluster_port "$new")
  wait_for 180 "$label: the writers did not take IDs 40 s ahead of $old's clock" drift_at_least "$old" 40000
  walsender=$(sql_value "$old" "SELECT pid FROM pg_stat_replication")
  [ -n "$walsender" ] || fail "$label: no walsender on $old"
  echo "$walsender" > "$SF_WORK/frozen.pid"
  kill -STOP "$walsender"
  for w in $WRITERS; do rounds+=("$(( $(rounds_on "$w" "$old_port") + 2 ))"); done
  more_rounds() {
    local w i=0
    for w in $WRITERS; do [ "$(rounds_on "$w" "$old_port")" -ge "${rounds[i]}" ] || return 1; i=$((i + 1)); done
  }
  wait_for 120 "$label: the writers did not make two rounds each on $old after its walsender froze" more_rounds
  # What NEW knows of OLD's IDs: the last lease record it replayed, kept in
  # its lease file (replay raises its generator to that lease's end), once
  # it has replayed all it received before the walsender froze.
  replayed_all() { [ "$(sql_value "$new" "SELECT pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()")" = t ]; }
  wait_for 60 "$label: $new did not replay what it received" replayed_all
  standby_lease=$(sed -n 's/^lease_until_unix_ms = //p' "$(cluster_dir "$new")/snowflake_id.lease")
  [ -n "$standby_lease" ] || fail "$label: $new replayed no lease of $old"
  patroni_kill "$old"
  kill_ms=$(now_ms)
  cluster_kill9 "$old"
  rm -f "$SF_WORK/frozen.pid"
  wait_leader "$new" 180
  echo "$label: $new writable $(( $(now_ms) - kill_ms )) ms after $old was killed"
  # (The first call after the promotion takes the node id over: the floor
  # is set then, at that call's clock.)
  wait_for 180 "$label: the writers did not make three rounds each on $new" progress "$new_port" 3
  pass "$label: every writer made three rounds on $new"
  old_max=$(largest_on "$old_port")
  old_max_ms=$(ms_of "$new" "$old_max")
  floor=$(sql_value "$new" "SELECT (extract(epoch FROM successor_floor) * 1000)::bigint || ' ' || successor_ahead_ms FROM snowflake_stats() WHERE successor_floor IS NOT NULL")
  [ -n "$floor" ] || fail "$label: snowflake_stats() on $new shows no successor floor"
  local floor_ms ahead_ms takeover_ms; read -r floor_ms ahead_ms <<<"$floor"
  takeover_ms=$((floor_ms - ahead_ms))
  echo "$label: the largest ID $old handed out, $old_max, lies $((old_max_ms - kill_ms)) ms ahead of the kill;" \
    "$new had replayed a lease to $((standby_lease - kill_ms)) ms and took the node id over $((takeover_ms - kill_ms)) ms" \
    "after the kill; its successor floor lies $((floor_ms - kill_ms)) ms ahead of the kill (successor_ahead_ms $ahead_ms)"
  [ "$floor_ms" -gt "$old_max_ms" ] ||
    fail "$label: $new's successor floor ($floor_ms) is not above the time of $old's largest ID ($old_max_ms)"
  [ "$old_max_ms" -gt "$takeover_ms" ] && [ "$old_max_ms" -gt "$standby_lease" ] ||
    fail "$label: vacuous: $old's largest ID ($old_max_ms) was not ahead of both $new's clock at the takeover ($takeover_ms) and its last replayed lease ($standby_lease)"
  pass "$label: $new's successor floor lies above $old's last IDs, which lay ahead of its clock at the takeover and of its replayed lease"
}

# First failover: pg1 to pg2.
wait_for 120 "the writers did not make three rounds each on pg1" progress "$P1" 3
failover pg1 pg2 "failover 1"

# The old leader comes back: Patroni rewinds it and it follows pg2.
patroni_run pg1
wait_streaming pg2 pg1 240
grep "pg_rewind exit code=0" "$SF_WORK/pg1.patroni.log" >/dev/null ||
  fail "pg1 rejoined without pg_rewind (its Patroni log has no 'pg_rewind exit code=0')"
pass "pg1 rewound (pg_rewind) and streaming from pg2"

# Second failover: pg2 to pg1.
wait_for_replay pg1 pg2
failover pg2 pg1 "failover 2"

# Every ID: the writers stop, then what they recorded and the table's rows.
touch "$SF_WORK/writers.stop"
for w in $WRITERS; do wait "$(cat "$SF_WORK/$w.writer.pid")" || true; done
rm -f "$SF_WORK"/*.writer.pid
psql_on pg1 -At -F ' ' -c "SELECT id, src FROM t" > "$SF_WORK/table.ids"
# The writers' failures are connections only (refused, read-only, closed
# by a kill): no server error, a duplicate key least of all.
for w in $WRITERS; do
  ! grep "ERROR:" "$SF_WORK/$w.err" || fail "$w: a statement failed with a server error"
done
python3 - "$SF_WORK" "$P1" "$P2" $WRITERS <<'PY' || fail "an ID was handed out twice, or out of order across a failover"
import sys
work, p1, p2, writers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
records = set()     # (low, high, src): an ID, or a batch's range
phases = [[], [], []]
ok = True
for w in writers:
    runs = []
    for line in open(f"{work}/{w}.ids"):
        f = line.split()
        low, high, src, port = (int(f[0]), int(f[0]), f[1], f[2]) if len(f) == 3 else (int(f[0]), int(f[1]), f[2], f[3])
        if not runs or runs[-1] != port:
            runs.append(port)
        if len(runs) <= 3:
            phases[len(runs) - 1].append((low, high))
        records.add((low, high, src))
    if runs != [p1, p2, p1]:
        print(f"{w}: wrote through the servers {runs}, not pg1, pg2, pg1 ({p1}, {p2}, {p1})")
        ok = False
rows = 0
for line in open(f"{work}/table.ids"):
    i, src = line.split()
    records.add((int(i), int(i), src))
    rows += 1
# Node 9 in every ID (10 node bits above 8 sequence bits).
bad = [r for r in records if (r[0] >> 8) & 1023 != 9 or (r[1] >> 8) & 1023 != 9]
if bad:
    print(f"{len(bad)} IDs not of node 9, e.g. {bad[:3]}")
    ok = False
# A batch is consecutive pairs of the node: every ID of node 9 between its
# first and last is its own. So sorted, no record may start at or below
# the end of one before it.
twice = 0
last = None
for r in sorted(records):
    if last is not None and r[0] <= last[1]:
        twice += 1
        if twice <= 5:
            print(f"handed out twice: {r} and {last}")
    if last is None or r[1] > last[1]:
        last = r
if twice:
    print(f"{twice} records overlap another")
    ok = False
for k in (0, 1):
    old, new = phases[k], phases[k + 1]
    if old and new and min(lo for lo, _ in new) <= max(hi for _, hi in old):
        print(f"failover {k + 1}: a new leader's ID {min(lo for lo, _ in new)} is not above the old leader's {max(hi for _, hi in old)}")
        ok = False
def pair(i):  # time and sequence, without the node
    return (i >> 18) << 8 | (i & 255)
ids = sum(pair(hi) - pair(lo) + 1 for lo, hi, _ in records)
print(f"{len(records)} records ({ids} IDs), {rows} rows in the table; per phase (pg1, pg2, pg1): "
      + ", ".join(f"{len(p)} records" for p in phases))
sys.exit(0 if ok else 1)
PY
pass "no ID handed out twice: every writer's IDs and every row, across both failovers; each new leader's above the old one's"
pass "failover_patroni"
