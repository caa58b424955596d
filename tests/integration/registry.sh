#!/usr/bin/env bash
# Node ids from a registry (docs/registry.md): a registry database without
# the extension, and servers that claim their node ids from it.
#
# Every ID any server issues here is recorded as it is issued (INSERT ...
# RETURNING), and the test ends with the check that none was issued twice.
# Cases: six servers started at the same moment with one configuration; a
# fixed node id held by a live server, passed on at a clean shutdown; a
# layout that differs from the fleet's; the registry down at start, down
# while issuing past the grant, and back; a holder paused (SIGSTOP) while
# its node id is taken over, resumed: it never issues past its grant, and
# its successor only above it, and it takes the node id back by itself
# once its successor has stopped; copies: `cp -a` of a stopped data directory
# started beside its original, a crash-consistent copy of a running one, a
# restored backup, and (17 and later) a pg_createsubscriber conversion;
# least privilege of the client role; a full pool; and at the end, for every
# ID recorded, snowflake_registry.who_issued() names the server that issued
# it (restarts, reclaims and the paused holder included).
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# --- six servers started at the same moment, one configuration
for i in 1 2 3 4 5 6; do node_init "n$i"; done
for i in 1 2 3 4 5 6; do cluster_start "n$i" & done
wait
for i in 1 2 3 4 5 6; do make_table "n$i"; done
for i in 1 2 3 4 5 6; do issue "n$i" 2000 & done
wait
nodes=$(for i in 1 2 3 4 5 6; do node_of "n$i"; done | sort -n | tr '\n' ' ')
[ "$(echo "$nodes" | wc -w)" = 6 ] && [ "$(echo "$nodes" | tr ' ' '\n' | sed '/^$/d' | sort -u | wc -l)" = 6 ] ||
  fail "six servers started together got node ids: $nodes"
pass "six servers started together claimed distinct node ids: $nodes"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.holders WHERE state = 'held'")" = 6 ] ||
  fail "the registry does not list six held node ids"
no_duplicates "concurrent first starts"
# snowflake_stats() shows the claim: held, a grant ahead, nothing failing.
[ "$(sql_value n1 "SELECT registry_state = 'held' AND grant_until > now() AND registry_message IS NULL
                   AND issuing_held IS NULL AND node_id = $(node_of n1) FROM snowflake_stats()")" = t ] ||
  fail "snowflake_stats() on n1 does not show a held claim: $(sql_value n1 "SELECT registry_state, grant_until, registry_message, issuing_held FROM snowflake_stats()")"
pass "snowflake_stats() shows the claim: registry_state held, grant_until ahead"

# --- a fixed node id held by a live server; passed on at a clean shutdown
X1=$(node_of n1)
node_init n7 "snowflake_id.node_id = $X1"
cluster_start n7
make_table n7
expect_refusal n7 "SELECT snowflake_next()" 55000 \
  "node id $X1 of fleet \"default\" is held by .*:$(cluster_port n1) (data directory $(cluster_dir n1)" \
  "n7 under node id $X1, held by n1 (the refusal must name its live holder)"
[ "$(sql_value n7 "SELECT issuing_held || ' ' || registry_state FROM snowflake_stats()")" = "registry_no_node_id failed" ] ||
  fail "snowflake_stats() on n7 does not show the hold: $(sql_value n7 "SELECT issuing_held, registry_state, registry_message FROM snowflake_stats()")"
sql_value n7 "SELECT registry_message FROM snowflake_stats()" | grep "is held by" >/dev/null ||
  fail "snowflake_stats().registry_message on n7 does not say who holds the node id"
pass "a fixed node id held by a live server is refused, naming it (also in snowflake_stats())"
cluster_stop n1
start=$(now_ms)
wait_issuing n7 10
[ "$(node_of n7)" = "$X1" ] || fail "n7 has node id $(node_of n7), not $X1"
pass "the fixed node id passed on $(( $(now_ms) - start )) ms after its holder's clean shutdown"
issue n7 1000
no_duplicates "fixed node id"

# --- a layout that differs from the fleet's
node_init n8 "snowflake_id.node_bits = 9"
cluster_start n8
make_table n8
expect_refusal n8 "SELECT snowflake_next()" 22023 \
  'fleet "default" issues IDs with epoch .* layout 41/10/12 .* this server .* layout 42/9/12' \
  "n8 with another layout than its fleet's (the refusal must say what differs)"
pass "a server whose layout differs from its fleet's is refused"
cluster_stop n8

# --- the registry down: at start, and while issuing past the grant
# (n9 made first: its initdb can take longer than n2's grant of 3 s on a
# busy machine, and n2 must be asked within its grant.)
node_init n9
cluster_stop reg
issue n2 100 || fail "n2 stopped issuing at once when the registry went down"
cluster_start n9
make_table n9
expect_refusal n9 "SELECT snowflake_next()" 08001 "port=$(cluster_port reg)" \
  "n9 without reaching the registry (the error must name it)"
pass "a server that cannot reach the registry at start refuses (08001)"
sleep $((GRANT_MS / 1000 + 1))
expect_refusal n2 "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, 10)" 08001 \
  "grant ended at .* has not renewed it" "n2 past its grant with the registry down"
[ "$(sql_value n2 "SELECT registry_state = 'held' AND grant_until < now() AND registry_message LIKE '%$(cluster_port reg)%' FROM snowflake_stats()")" = t ] ||
  fail "snowflake_stats() on n2 does not show the grant ended and the registry failing: $(sql_value n2 "SELECT registry_state, grant_until, registry_message FROM snowflake_stats()")"
pass "issuing stops when the grant runs out with the registry down (snowflake_stats(): grant_until past, registry_message says why)"
cluster_start reg
wait_issuing n2 15
wait_issuing n9 15
pass "n2 and n9 issue again by themselves once the registry is back"
no_duplicates "registry down and back"

# --- a paused holder whose node id is taken over
X3=$(node_of n3)
node_init n10 "snowflake_id.node_id = $X3"
cluster_start n10
make_table n10
sql_error n10 "SELECT snowflake_next()" >/dev/null || fail "n10 issued under n3's live node id"
# Writers on both, recording (node id, ID) per server.
writer() {
  local name=$1 end=$(( $(now_ms) + $2 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    psql_on "$name" -At -c "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, 20) RETURNING id" \
      >> "$SF_WORK/w.$name" 2>> "$SF_WORK/w.$name.err" || true
  done
}
pid3=$(head -1 "$(cluster_dir n3)/postmaster.pid")
writer n3 8000 &
wpid3=$!
sleep 0.5
kill -STOP "$pid3"; pkill -STOP -P "$pid3"
# Once n3's grant has ended (it renews no more), n10's retries take the
# node id over (with the floor); n3, thawed, issues nothing past its grant.
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT port FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $X3")" = "$(cluster_port n10)" ] && break
  sleep 0.05
done
kill -CONT "$pid3"; pkill -CONT -P "$pid3"
writer n10 6000 &
wpid10=$!
wait "$wpid3" "$wpid10"
awk NF "$SF_WORK/w.n3" "$SF_WORK/w.n10" >> "$IDS"   # (each line ended, also a last one cut short)
record_issuer n3 < "$SF_WORK/w.n3"
record_issuer n10 < "$SF_WORK/w.n10"
[ "$(node_of n10)" = "$X3" ] || fail "n10 did not take over node id $X3"
n3_max=$(sort -n "$SF_WORK/w.n3" | tail -1)
n10_min=$(sort -n "$SF_WORK/w.n10" | sed -n 1p)
[ -n "$n3_max" ] && [ -n "$n10_min" ] || fail "a writer issued nothing (n3: $n3_max, n10: $n10_min)"
# Same node id: the time fields must not overlap.
[ $((n3_max >> 22)) -lt $((n10_min >> 22)) ] ||
  fail "the paused holder issued at $((n3_max >> 22)) ms, its successor from $((n10_min >> 22)) ms: their ranges overlap"
grep -q "ended this server's claim" "$SF_WORK/w.n3.err" ||
  fail "the resumed holder did not stop at its grant's end: $(tail -3 "$SF_WORK/w.n3.err")"
[ "$(sql_value n3 "SELECT issuing_held || ' ' || registry_state FROM snowflake_stats()")" = "registry_lost lost" ] ||
  fail "snowflake_stats() on n3 does not show the lost claim: $(sql_value n3 "SELECT issuing_held, registry_state, registry_message FROM snowflake_stats()")"
pass "the paused holder issued up to $((n3_max >> 22)) ms, within its grant, and then refused; its successor from $((n10_min >> 22)) ms; $(wc -l < "$SF_WORK/w.n3") and $(wc -l < "$SF_WORK/w.n10") IDs"
no_duplicates "paused holder"

# --- the holder taken over claims its node id again by itself: refused
# while n10 holds it, taken back once n10 has stopped (its clean shutdown
# releases it at the bound it issued), above every ID n10 issued. (Before,
# it refused until restarted: a claim could take a live one then, and the
# two would have taken the node id from each other in turn.)
for _ in $(seq 1 50); do
  sql_value n3 "SELECT registry_message FROM snowflake_stats()" | grep "is held by" >/dev/null && break
  sleep 0.1
done
sql_value n3 "SELECT registry_message FROM snowflake_stats()" | grep "is held by" >/dev/null ||
  fail "n3 does not ask for node id $X3 again: $(sql_value n3 "SELECT registry_state, registry_message FROM snowflake_stats()")"
n10_max=$(sort -n "$SF_WORK/w.n10" | tail -1)
cluster_stop n10
wait_issuing n3 15
[ "$(node_of n3)" = "$X3" ] || fail "n3 issues under node id $(node_of n3), not its own $X3"
n3_again=$(sql_value n3 "SELECT max(id) FROM t")
[ "$n3_again" -gt "$n10_max" ] || fail "n3's ID $n3_again, after it claimed node id $X3 again, is not above n10's last $n10_max"
# (And not only because the clock moved on: the claim made again starts
# above n10's last ID time.)
again_floor=$(sql_value reg "SELECT g.floor_ms FROM snowflake_registry.grants g JOIN snowflake_registry.node_ids n USING (claim_id)
                             WHERE n.fleet = 'default' AND n.node_id = $X3")
[ "$again_floor" -ge $((n10_max >> 22)) ] || fail "n3's claim made again has floor $again_floor, below n10's last ID time $((n10_max >> 22))"
log_has n3 "node id $X3 claimed again after its claim ended" || fail "n3's log does not say it claimed node id $X3 again"
pass "the holder taken over asked for node id $X3 again, refused while n10 held it, and took it back by itself once n10 stopped, above n10's IDs"
no_duplicates "the holder taken over, claiming again"

# --- copies
copy_setup() { # copy_setup FROM TO: the copied directory as a new server
  local to=$1 port; port=$(free_port)
  mkdir -p "$(cluster_dir "$to").sock"; chown postgres:postgres "$(cluster_dir "$to").sock"
  echo "$port" > "$SF_WORK/$to.port"
  echo "$PG_BIN" > "$SF_WORK/$to.bin"
  SF_CLUSTERS+=("$to")
  as_pg rm -f "$(cluster_dir "$to")/postmaster.pid"
  cluster_conf "$to" "port = $port" "unix_socket_directories = '$(cluster_dir "$to").sock'"
}
# cp -a of a stopped data directory, started beside its original.
cluster_stop n4
cp -a "$(cluster_dir n4)" "$(cluster_dir n4c)"
copy_setup n4c
cluster_start n4 & cluster_start n4c & wait
wait_issuing n4 10; wait_issuing n4c 10
[ "$(node_of n4)" != "$(node_of n4c)" ] || fail "n4 and its cp -a copy both issue under node id $(node_of n4)"
issue n4 1000; issue n4c 1000
pass "cp -a of a stopped server: node ids $(node_of n4) and $(node_of n4c)"
# A crash-consistent copy of a running server (every process frozen).
pid5=$(head -1 "$(cluster_dir n5)/postmaster.pid")
kill -STOP "$pid5"; pkill -STOP -P "$pid5"
cp -a "$(cluster_dir n5)" "$(cluster_dir n5c)"
kill -CONT "$pid5"; pkill -CONT -P "$pid5"
copy_setup n5c
cluster_start n5c
wait_issuing n5c 10
issue n5 1000; issue n5c 1000
[ "$(node_of n5)" != "$(node_of n5c)" ] || fail "n5 and its running copy both issue under node id $(node_of n5)"
pass "crash-consistent copy of a running server: node ids $(node_of n5) and $(node_of n5c)"
# A restored backup: held as a copy (backup_label) until accepted, then
# its own node id.
(cd / && as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$(cluster_port n6)" -U postgres \
  -D "$(cluster_dir n6b)" -X stream -c fast --no-sync)
copy_setup n6b
cluster_start n6b
expect_refusal n6b "SELECT snowflake_next()" 55000 "" "a restored backup before acceptance"
psql_on n6b -c "SELECT snowflake_accept_configuration()" >/dev/null
wait_issuing n6b 10
issue n6 1000; issue n6b 1000
[ "$(node_of n6)" != "$(node_of n6b)" ] || fail "n6 and its restored backup both issue under node id $(node_of n6)"
pass "restored backup: refused until accepted, then node ids $(node_of n6) and $(node_of n6b)"
if [ "$PG_MAJOR" -ge 17 ]; then
  # pg_createsubscriber needs a logical publisher: n6 restarts with it (a
  # clean restart: it releases its node id and claims it again).
  x6=$(node_of n6)
  psql_on n6 -c "ALTER SYSTEM SET wal_level = logical" >/dev/null
  cluster_stop n6
  cluster_start n6
  wait_issuing n6 10
  [ "$(node_of n6)" = "$x6" ] || fail "n6 restarted cleanly with node id $(node_of n6), not its own $x6"
  cluster_basebackup n6s "$(free_port)" n6
  cluster_start n6s
  wait_for_replay n6s n6
  cluster_stop n6s
  create_subscriber n6s n6
  cluster_start n6s
  out=$(sql_error n6s "SELECT snowflake_next()") || fail "a pg_createsubscriber conversion issued before acceptance"
  psql_on n6s -c "SELECT snowflake_accept_configuration()" >/dev/null
  wait_issuing n6s 10
  issue n6s 1000
  [ "$(node_of n6)" != "$(node_of n6s)" ] || fail "n6 and its converted standby both issue under node id $(node_of n6)"
  pass "pg_createsubscriber conversion: refused until accepted, then node ids $(node_of n6) and $(node_of n6s)"
fi
no_duplicates "copies"

# --- least privilege, and a full pool (the registry's functions, as the client role)
for q in "SELECT * FROM snowflake_registry.node_ids" "SELECT * FROM snowflake_registry.grants" \
  "UPDATE snowflake_registry.node_ids SET until_ms = 0" "DELETE FROM snowflake_registry.grants" \
  "SELECT * FROM snowflake_registry.holders"; do
  out=$(registry_sql "$q" 2>&1) && fail "the client role may run: $q"
  grep -q "permission denied" <<<"$out" || fail "$q: $out"
done
X2=$(node_of n2)
claim2=$(sql_value reg "SELECT claim_id FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $X2")
out=$(registry_sql "SELECT snowflake_registry.renew('default', $X2, $claim2, 'not-the-holders-token', 0, 3000)" 2>&1) &&
  fail "another server's claim was renewed without its token"
grep -q "is lost" <<<"$out" || fail "renewal without the token: $out"
registry_sql "SELECT snowflake_registry.release('default', $X2, $claim2, 'not-the-holders-token', 0)" >/dev/null
# (NULL is no token either: a comparison with NULL is not a refusal.)
registry_sql "SELECT snowflake_registry.release('default', $X2, NULL, NULL, 0)" >/dev/null
out=$(registry_sql "SELECT snowflake_registry.renew('default', $X2, NULL, NULL, 0, 3000)" 2>&1) &&
  fail "another server's claim was renewed with a NULL token"
[ "$(sql_value reg "SELECT state FROM snowflake_registry.holders WHERE fleet = 'default' AND node_id = $X2")" = held ] ||
  fail "another server's claim was released without its token (or with a NULL one)"
pass "the client role cannot read or change the registry's tables, nor renew or release another server's claim"
# (A fleet is made by the owner, with its epoch and layout.)
psql_on reg -c "SELECT snowflake_registry.create_fleet('tiny', 1735689600000, 1, 12)" >/dev/null
now=$(( $(now_ms) - 1735689600000 ))
for i in 1 2; do
  registry_sql "SELECT node_id FROM snowflake_registry.claim('tiny', 1735689600000, 1, 12, NULL, NULL, 'token-of-holder-$i', $i, 'h$i', $i, '/d$i', $now, 60000)" >/dev/null
done
out=$(registry_sql "SELECT node_id FROM snowflake_registry.claim('tiny', 1735689600000, 1, 12, NULL, NULL, 'token-of-holder-3', 3, 'h3', 3, '/d3', $now, 60000)" 2>&1) &&
  fail "a third claim in a fleet of two node ids succeeded"
grep -q 'all 2 node ids of fleet "tiny" are held' <<<"$out" && grep -q "1: h2:2 (data directory /d2" <<<"$out" ||
  fail "the full pool's error does not list the holders: $out"
pass "a full pool is refused, listing its holders"
# The node id a data directory held last is only preferred when no one else
# holds it: a copy remembers its original's node id, and a lapsed grant of
# the original (the registry was away, or the original paused) must not pass
# to the copy: the original renews as soon as it can. (The fault soak found
# it: a copy started during a registry outage took its original's node id,
# and the original stopped issuing for good.) Grants of 1 ms lapse at once.
psql_on reg -c "DO \$\$ BEGIN IF to_regproc('snowflake_registry.create_fleet') IS NOT NULL THEN
  PERFORM snowflake_registry.create_fleet('pref'); END IF; END \$\$" >/dev/null
claim_pref() { # claim_pref TOKEN DIR PREFERRED GRANT_MS: the node id granted
  registry_sql "SELECT node_id FROM snowflake_registry.claim('pref', 1735689600000, 10, 12, NULL, $3, '$1', 77, 'hp', 5432, '$2', $(( $(now_ms) - 1735689600000 )), $4)"
}
orig=$(claim_pref token-of-the-original-1 /orig NULL 1)
sleep 0.05
copy=$(claim_pref token-of-the-copy-00001 /copy "$orig" 1)
[ "$copy" != "$orig" ] ||
  fail "a copy (same system identifier and host, another data directory) took its original's lapsed node id $orig by preference"
sleep 0.05
again=$(claim_pref token-of-the-original-2 /orig "$orig" 60000)
[ "$again" = "$orig" ] || fail "a restarted server did not get back its own lapsed node id $orig (got $again)"
other=$(claim_pref token-of-another-server1 /other "$copy" 60000)
[ "$other" != "$copy" ] || fail "another data directory took the lapsed node id $copy by preference"
pass "the preferred node id: a restart gets back its own lapsed one ($orig); a copy or another data directory does not take one that lapsed ($copy, $other)"

# --- who issued each ID: the grant history answers for every ID recorded
psql_on reg -q -c "CREATE TABLE issued (id bigint, port int)" -c "\\copy issued FROM '$ISSUED_BY'"
total=$(sql_value reg "SELECT count(*) FROM issued")
[ "$total" -eq "$(wc -l < "$IDS")" ] || fail "who issued: $total IDs loaded, $(wc -l < "$IDS") recorded"
wrong=$(sql_value reg "SELECT count(*) FROM issued i
  WHERE (SELECT array_agg(w.port) FROM snowflake_registry.who_issued('default', i.id) w) IS DISTINCT FROM ARRAY[i.port]")
if [ "$wrong" != 0 ]; then
  psql_on reg -c "SELECT i.id, i.port AS issued_by, w.port AS answer, w.claim_id, w.granted_from, w.granted_until
    FROM issued i LEFT JOIN LATERAL snowflake_registry.who_issued('default', i.id) w ON true
    WHERE i.port IS DISTINCT FROM w.port LIMIT 5" >&2
  fail "who_issued() did not name the issuing server alone for $wrong of $total IDs"
fi
servers=$(sql_value reg "SELECT count(DISTINCT port) FROM issued")
claims=$(sql_value reg "SELECT count(DISTINCT w.claim_id) FROM issued i, snowflake_registry.who_issued('default', i.id) w")
reclaimed=$(sql_value reg "SELECT count(*) FROM (SELECT w.node_id FROM issued i, snowflake_registry.who_issued('default', i.id) w
  GROUP BY w.node_id HAVING count(DISTINCT w.port) > 1) s")
[ "$reclaimed" -ge 1 ] || fail "who issued: no node id had two holders (the test shows nothing)"
out=$(registry_sql "SELECT * FROM snowflake_registry.who_issued('default', 1)" 2>&1) &&
  fail "the client role may call who_issued()"
grep -q "permission denied" <<<"$out" || fail "who_issued() as the client role: $out"
beyond=$(sql_value reg "SELECT ((max(until_ms) + 86400000) << 22) FROM snowflake_registry.grants WHERE fleet = 'default'")
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.who_issued('default', $beyond)")" = 0 ] ||
  fail "who_issued() answered for an ID whose time no grant covers"
expect_refusal reg "SELECT * FROM snowflake_registry.who_issued('nofleet', 1)" 22023 "" "who_issued() of an unknown fleet"
pass "who issued: all $total IDs traced to the one server that issued them ($servers servers, $claims grants, $reclaimed node ids held in turn by several servers); not for the client role"

no_duplicates "registry"
