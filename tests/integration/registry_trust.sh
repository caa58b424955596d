#!/usr/bin/env bash
# What the registry's clients and owner may trust (durable commits, checked
# answers, fleets made on purpose, floors kept, idempotent claims, bounded
# arguments; docs/registry-design.md, "What the servers trust"):
#
# 1. Durable whatever the registry's synchronous_commit: the client role
#    runs with synchronous_commit = off (as on a managed service or a busy
#    registry), and the transaction of each claim, renewal and release
#    still commits with synchronous_commit = on (remote_apply is kept).
#    (Before, it inherited 'off': an acknowledged grant could vanish in a
#    crash of the registry, with the same timeline and system identifier,
#    so nothing was fenced.) Then a registry running with synchronous_commit
#    = off and a 10 s WAL writer delay is killed (-9) right after a server's
#    claim: restarted, it still knows the claim and its grant.
# 2. Answers that no registry function gives are refused, never used: a
#    database that is not the registry (a wrong dbname, a proxy, anyone on
#    the network path) answers a claim with a node id outside the layout,
#    then with node 0, floor -1 and an endless grant, then a good claim
#    followed by a renewal past what was asked. The server issues nothing
#    it was not truly granted: snowflake_next() fails with SQLSTATE 08P01
#    and says why, snowflake_stats() shows it, and after the bad renewal it
#    issues only within the grant it had (then 08001, as with a registry
#    that does not answer).
# 3. Fleets are made on purpose: a claim for a fleet that does not exist
#    (a typo in snowflake_id.registry_fleet) is refused with 42704 and the
#    hint to create it, the client role cannot create one, the owner can,
#    with its epoch, layout and longest grant (create_fleet(); the install
#    makes "default" with the extension's defaults); a claim never shapes a
#    fleet: a client's first claim with epoch 0 and one node bit is refused
#    (before: it fixed the fleet's layout, and every server's claim was
#    refused); the owner may reshape a fleet until its first claim; and the
#    rows of node_ids, which hold the floors, cannot be deleted or truncated.
# 4. A claim is idempotent per token: the same token again (a retry whose
#    first answer was lost) gets the same answer, not a takeover of its own
#    claim with its own grant as the floor; and a server whose claim's
#    answer was lost (held past its call timeout) retries with the grant of
#    its first try, so the answer passes its check after registry_grant was
#    lowered (before: refused with 08P01, seen in the log).
# 5. Every argument of the client role's calls is bounded: a renewal
#    asking for a grant of 9e18 ms (which broke the holders view) and a
#    claim with a 300-character host are refused.
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

# --- 1a. the commit mode of each registry call, with the role's default off
psql_on reg -c "ALTER ROLE fleet_node SET synchronous_commit = off" >/dev/null
psql_on reg -c "SELECT snowflake_registry.create_fleet('durable', 0, 10, 12)" >/dev/null
token=0123456789abcdef0123456789abcd
mode_after() { # CALL: synchronous_commit at the end of the call's transaction
  psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port reg)" -U fleet_node -d postgres \
    -c "BEGIN" -c "$1" -c "SELECT 'mode=' || current_setting('synchronous_commit')" -c "COMMIT" | sed -n 's/^mode=//p'
}
[ "$(registry_sql "SHOW synchronous_commit")" = off ] || fail "the client role does not run with synchronous_commit = off"
claim_row=$(registry_sql "SELECT node_id || ' ' || claim_id FROM snowflake_registry.claim('durable', 0, 10, 12, 900, NULL,
  '${token}00', 1, 'h', 1, '/d', 1000, 3000)")
read -r _ claim_id <<< "$claim_row"
[ "$(mode_after "SELECT * FROM snowflake_registry.claim('durable', 0, 10, 12, 901, NULL, '${token}01', 1, 'h', 1, '/d', 1000, 3000)")" = on ] ||
  fail "a claim's transaction commits with synchronous_commit = $(mode_after "SELECT 1"), not on"
[ "$(mode_after "SELECT snowflake_registry.renew('durable', 900, $claim_id, '${token}00', 1000, 3000)")" = on ] ||
  fail "a renewal's transaction does not commit with synchronous_commit = on"
[ "$(mode_after "SELECT snowflake_registry.release('durable', 900, $claim_id, '${token}00', 1000)")" = on ] ||
  fail "a release's transaction does not commit with synchronous_commit = on"
# Stronger modes are kept.
psql_on reg -c "ALTER ROLE fleet_node SET synchronous_commit = remote_apply" >/dev/null
[ "$(mode_after "SELECT * FROM snowflake_registry.claim('durable', 0, 10, 12, 902, NULL, '${token}02', 1, 'h', 1, '/d', 1000, 3000)")" = remote_apply ] ||
  fail "a claim lowered synchronous_commit = remote_apply"
psql_on reg -c "ALTER ROLE fleet_node RESET synchronous_commit" >/dev/null
pass "claims, renewals and releases commit with synchronous_commit = on when the client's is off (remote_apply kept)"

# --- 1b. a registry crash with synchronous_commit = off loses no claim
psql_on reg -c "ALTER SYSTEM SET synchronous_commit = off" -c "ALTER SYSTEM SET wal_writer_delay = '10s'" \
  -c "SELECT pg_reload_conf()" >/dev/null
node_init a
cluster_start a
make_table a
wait_issuing a 20
node=$(node_of a)
until_a=$(sql_value a "SELECT (extract(epoch FROM grant_until) * 1000)::bigint FROM snowflake_stats()")
cluster_kill9 reg
cluster_start reg
known=$(sql_value reg "SELECT (f.epoch_unix_ms + n.max_until_ms) FROM snowflake_registry.node_ids n JOIN snowflake_registry.fleets f USING (fleet)
                       WHERE n.fleet = 'default' AND n.node_id = $node")
[ -n "$known" ] || fail "after a crash with synchronous_commit = off, the registry lost the claim of node id $node"
[ "$known" -ge "$until_a" ] ||
  fail "after a crash with synchronous_commit = off, the registry knows node id $node's grants up to $known ms, below the grant the server holds ($until_a ms)"
pass "a registry killed (-9) right after a claim, with synchronous_commit = off, still knows the claim and its grant"
psql_on reg -c "ALTER SYSTEM RESET synchronous_commit" -c "ALTER SYSTEM RESET wal_writer_delay" -c "SELECT pg_reload_conf()" >/dev/null
cluster_stop a
no_duplicates "before the impostor"

# --- 2. an impostor: a database with functions of the registry's names
psql_on reg -c "CREATE DATABASE impostor" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port reg)" -U postgres -d impostor >/dev/null <<'SQL'
CREATE SCHEMA snowflake_registry;
GRANT USAGE ON SCHEMA snowflake_registry TO PUBLIC;
-- What the impostor answers: 'node' (a node id past the layout), 'endless'
-- (node 0, floor -1, a grant to the end of time), 'renew' (a true-looking
-- claim, then a renewal past what was asked).
CREATE TABLE snowflake_registry.mode (m text);
INSERT INTO snowflake_registry.mode VALUES ('node');
GRANT SELECT ON snowflake_registry.mode TO PUBLIC;
CREATE FUNCTION snowflake_registry.registry_identity(OUT registry_id uuid, OUT system_identifier numeric)
LANGUAGE sql AS $$ SELECT '00000000-0000-4000-8000-000000000001'::uuid, 1::numeric $$;
CREATE FUNCTION snowflake_registry.claim_keyed(
    p_fleet text, p_epoch_unix_ms bigint, p_node_bits int, p_sequence_bits int,
    p_node_id int, p_preferred int, p_secret_hash text, p_previous_secrets text[],
    p_system_identifier numeric, p_host text, p_port int, p_data_directory text,
    p_holder_now_ms bigint, p_grant_ms bigint, p_registry_id uuid)
RETURNS TABLE (node_id int, claim_id bigint, floor_ms bigint, until_ms bigint, signing_key text)
LANGUAGE sql AS $$
    SELECT CASE m WHEN 'node' THEN 5000 WHEN 'endless' THEN 0 ELSE 7 END,
           1::bigint, -1::bigint,
           CASE m WHEN 'endless' THEN (1::bigint << 41) - 1 ELSE p_holder_now_ms + p_grant_ms END,
           '0123456789abcdef0123456789abcdef'
    FROM snowflake_registry.mode
$$;
CREATE FUNCTION snowflake_registry.renew_signed(
    p_fleet text, p_node_id int, p_claim_id bigint, p_call bigint, p_holder_now_ms bigint, p_grant_ms bigint, p_proof text)
RETURNS bigint LANGUAGE sql AS $$ SELECT p_holder_now_ms + 100 * p_grant_ms $$;
CREATE FUNCTION snowflake_registry.release_signed(
    p_fleet text, p_node_id int, p_claim_id bigint, p_call bigint, p_issued_until_ms bigint, p_proof text)
RETURNS void LANGUAGE sql AS $$ SELECT $$;
SQL
IMPOSTOR="host=127.0.0.1 port=$(cluster_port reg) dbname=impostor user=fleet_node"
impostor_mode() {
  psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port reg)" -U postgres -d impostor \
    -c "UPDATE snowflake_registry.mode SET m = '$1'" >/dev/null
}
cluster_init b "$(free_port)" "snowflake_id.registry = '$IMPOSTOR'" "snowflake_id.registry_grant = '${GRANT_MS}ms'" "$ALLOW_UNVERIFIED"
cluster_start b
make_table b
expect_refusal b "SELECT snowflake_next()" 08P01 "answer cannot be right: node id 5000 is outside this server's layout (0 to 1023)" \
  "b, answered node id 5000 with 10 node bits"
sql_value b "SELECT registry_state || ': ' || registry_message FROM snowflake_stats()" | grep "^failed: .*cannot be right" >/dev/null ||
  fail "snowflake_stats() on b does not show the refused answer: $(sql_value b "SELECT registry_state, registry_message FROM snowflake_stats()")"
log_has b "cannot be right" || fail "b's log does not say the registry's answer was refused"
pass "a claim answered with node id 5000 (10 node bits) is refused: 08P01, in snowflake_stats() and the log"

impostor_mode endless
sleep 3
expect_refusal b "SELECT snowflake_next()" 08P01 "answer cannot be right: the grant ends at 2199023255551 ms, past the" \
  "b, answered node 0, floor -1 and a grant to the end of the layout's time"
pass "a claim answered with node 0, floor -1 and an endless grant is refused"
cluster_stop b

# A true-looking claim, then a renewal past what was asked: the renewal is
# refused, the server issues within the grant it had, then stops.
impostor_mode renew
cluster_start b
wait_issuing b 20
[ "$(node_of b)" = 7 ] || fail "b did not take the impostor's plausible claim (node 7): $(node_of b)"
grant_b=$(sql_value b "SELECT (extract(epoch FROM grant_until) * 1000)::bigint FROM snowflake_stats()")
sleep 2
sql_value b "SELECT registry_message FROM snowflake_stats()" | grep "cannot be right: the grant ends at" >/dev/null ||
  fail "b's refused renewal is not shown: $(sql_value b "SELECT registry_state, grant_until, registry_message FROM snowflake_stats()")"
[ "$(sql_value b "SELECT (extract(epoch FROM grant_until) * 1000)::bigint FROM snowflake_stats()")" -le $((grant_b)) ] ||
  fail "b's grant grew with a renewal that cannot be right"
sleep $((GRANT_MS / 1000 + 1))
expect_refusal b "SELECT snowflake_next()" 08001 "has not renewed it: the registry's answer cannot be right" "b after its grant, with every renewal refused"
[ "$(sql_value b "SELECT (extract(epoch FROM snowflake_timestamp(max(id))) * 1000)::bigint <= $grant_b FROM t")" = t ] ||
  fail "b issued past the grant it had ($grant_b ms)"
pass "a renewal answered past what was asked is refused: the server issues within the grant it had, then stops (08001, saying why)"
cluster_stop b

# --- 3. fleets on purpose; floors that maintenance cannot lose
EPOCH=1735689600000
now=$(( $(now_ms) - EPOCH ))
out=$(registry_sql "SELECT * FROM snowflake_registry.claim('defualt', $EPOCH, 10, 12, NULL, NULL, '${token}10', 1, 'h', 1, '/d', $now, 3000)" 2>&1) &&
  fail "a claim for the fleet \"defualt\", which no one made, succeeded (a second ID space)"
grep -q 'fleet "defualt" does not exist in this registry' <<<"$out" && grep -q "create_fleet('defualt', $EPOCH, 10, 12)" <<<"$out" ||
  fail "the refusal of an unknown fleet does not name it and the way to make it: $out"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.fleets WHERE fleet = 'defualt'")" = 0 ] || fail "the refused claim made a fleet"
cluster_init c "$(free_port)" "snowflake_id.registry = '$REGISTRY'" "snowflake_id.registry_grant = '${GRANT_MS}ms'" \
  "snowflake_id.registry_fleet = 'defualt'"
cluster_start c
make_table c
expect_refusal c "SELECT snowflake_next()" 42704 'fleet "defualt" does not exist' "c, with a misspelt registry_fleet"
cluster_stop c
out=$(registry_sql "SELECT snowflake_registry.create_fleet('mine')" 2>&1) && fail "the client role created a fleet"
grep -q "permission denied" <<<"$out" || fail "the client role's create_fleet() failed otherwise: $out"
psql_on reg -c "SELECT snowflake_registry.create_fleet('second')" -c "SELECT snowflake_registry.create_fleet('second', $EPOCH, 9, 12)" \
  -c "SELECT snowflake_registry.create_fleet('second', $EPOCH, 9, 12)" >/dev/null
shape="SELECT concat_ws('/', epoch_unix_ms, node_bits, sequence_bits, max_grant_ms) FROM snowflake_registry.fleets WHERE fleet ="
# A client's first claim with another epoch and layout does not shape it.
out=$(registry_sql "SELECT node_id FROM snowflake_registry.claim('second', 0, 1, 12, NULL, NULL, '${token}12', 1, 'h', 1, '/d', $now, 3000)" 2>&1) &&
  fail "a claim with epoch 0 and one node bit was granted in a fleet made with 9 node bits"
grep -q "issues IDs with epoch $EPOCH ms and layout 42/9/12" <<<"$out" || fail "the claim with another layout was refused otherwise: $out"
[ "$(sql_value reg "$shape 'second'")" = "$EPOCH/9/12/60000" ] || fail "a client's claim changed the fleet: $(sql_value reg "$shape 'second'")"
[ "$(registry_sql "SELECT node_id FROM snowflake_registry.claim('second', $EPOCH, 9, 12, NULL, NULL, '${token}11', 1, 'h', 1, '/d', $now, 3000)")" = 0 ] ||
  fail "the first claim of a fleet the owner made did not get node id 0"
out=$(sql_error reg "SELECT snowflake_registry.create_fleet('second', $EPOCH, 8, 12)") || fail "a fleet with claims was reshaped"
[ "$(sqlstate_of "$out")" = 55000 ] && grep -q 'has claims' <<<"$out" || fail "reshaping a fleet with claims failed otherwise: $out"
[ "$(sql_value reg "$shape 'default'")" = "1735689600000/10/12/60000" ] || fail "the install did not make \"default\" with the defaults: $(sql_value reg "$shape 'default'")"
# A fleet an older script made, without a layout: a claim does not give it one.
psql_on reg -c "SELECT snowflake_registry.create_fleet('bare')" \
  -c "UPDATE snowflake_registry.fleets SET epoch_unix_ms = NULL, node_bits = NULL, sequence_bits = NULL WHERE fleet = 'bare'" >/dev/null
out=$(registry_sql "SELECT node_id FROM snowflake_registry.claim('bare', 0, 1, 12, NULL, NULL, '${token}13', 1, 'h', 1, '/d', $now, 3000)" 2>&1) &&
  fail "a claim gave a fleet without a layout its layout"
grep -q 'has no epoch and layout yet' <<<"$out" && grep -q "create_fleet('bare', 0, 1, 12)" <<<"$out" || fail "the claim in a fleet without a layout was refused otherwise: $out"
pass "a claim for an unknown fleet is refused (42704, with the hint to create_fleet()), also to a server with a misspelt registry_fleet; only the owner makes and shapes fleets (\"default\" at install): a client's claim with another layout changes nothing"
for stmt in "DELETE FROM snowflake_registry.node_ids WHERE fleet = 'second'" "TRUNCATE snowflake_registry.node_ids CASCADE" \
  "TRUNCATE snowflake_registry.fleets CASCADE"; do
  out=$(sql_error reg "$stmt") || fail "the owner's \"$stmt\" succeeded: floors lost"
  [ "$(sqlstate_of "$out")" = 55000 ] && grep -q "never deleted" <<<"$out" || fail "\"$stmt\" failed otherwise: $out"
done
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.node_ids WHERE fleet = 'second'")" = 1 ] || fail "node_ids lost a row"
pass "the rows of node_ids (the floors) cannot be deleted or truncated, not even by the owner (55000)"

# --- 4. the same token, the same answer
first=$(registry_sql "SELECT node_id || ' ' || claim_id || ' ' || floor_ms || ' ' || until_ms FROM snowflake_registry.claim('default', $EPOCH, 10, 12, 800, NULL, '${token}20', 1, 'h', 1, '/d', $now, 3000)")
again=$(registry_sql "SELECT node_id || ' ' || claim_id || ' ' || floor_ms || ' ' || until_ms FROM snowflake_registry.claim('default', $EPOCH, 10, 12, 800, NULL, '${token}20', 1, 'h', 1, '/d', $((now + 500)), 3000)")
[ "$first" = "$again" ] || fail "a claim retried with its token got another answer: $first, then $again (a takeover of its own claim)"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE fleet = 'default' AND node_id = 800")" = 1 ] ||
  fail "a claim retried with its token made a second grant"
auto1=$(registry_sql "SELECT node_id || ' ' || claim_id FROM snowflake_registry.claim('default', $EPOCH, 10, 12, NULL, NULL, '${token}21', 1, 'h', 1, '/d', $now, 3000)")
auto2=$(registry_sql "SELECT node_id || ' ' || claim_id FROM snowflake_registry.claim('default', $EPOCH, 10, 12, NULL, NULL, '${token}21', 1, 'h', 1, '/d', $now, 3000)")
[ "$auto1" = "$auto2" ] || fail "an automatic claim retried with its token took another node id: $auto1, then $auto2"
pass "a claim retried with its token gets the same node id, claim, floor and grant (fixed and automatic)"

# --- 4b. a server retries its claim after registry_grant was lowered: the
# retry repeats the first call's grant, so the first answer (the same
# claim) passes the server's check. The first answer is lost: a deferred
# trigger on the registry holds the claim's commit 6 s, past the server's
# 5 s call timeout, and the claim commits after the server gave up on it
# (at the commit, past the 4 s statement_timeout the server sets on its
# registry session, which would have cancelled a statement that slow).
# (Before, the retry
# asked for the new, shorter grant, the first answer was refused as past
# what was asked, 08P01, again and again.)
node_init r "snowflake_id.registry_grant = '20s'"
psql_on reg >/dev/null <<SQL
CREATE FUNCTION public.hold_claim() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    IF NEW.data_directory = '$(cluster_dir r)' THEN PERFORM pg_sleep(6); END IF;
    RETURN NEW;
END
\$\$;
CREATE CONSTRAINT TRIGGER hold_claim AFTER INSERT ON snowflake_registry.grants
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.hold_claim();
SQL
cluster_start r
make_table r
psql_on r -c "ALTER SYSTEM SET snowflake_id.registry_grant = '3s'" -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 100); do
  log_has r "no answer within 5 s" && break
  sleep 0.1
done
log_has r "no answer within 5 s" || fail "r's first claim was answered in time: the test shows nothing"
psql_on reg -c "DROP TRIGGER hold_claim ON snowflake_registry.grants" >/dev/null
wait_issuing r 20
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE data_directory = '$(cluster_dir r)'")" = 1 ] ||
  fail "r's retried claim made a second grant"
! log_has r "cannot be right" || fail "r refused its own claim's first answer: $(grep "cannot be right" "$(cluster_log r)" | tail -1)"
pass "a claim whose answer was lost, retried after registry_grant was lowered, is the same claim, and the server issues"
cluster_stop r
no_duplicates "the end"

# --- 5. every argument bounded
# (Claim 800 of part 4, renewed by its holder with an absurd grant: the
# renewal interval, a sixth of it, overflowed an interval, and the holders
# view and every later claim of node id 800 failed.)
out=$(registry_sql "SELECT snowflake_registry.renew('default', 800, $(echo "$first" | cut -d' ' -f2), '${token}20', $now, 9000000000000000000)" 2>&1) &&
  fail "a renewal asking for a grant of 9e18 ms was accepted"
grep -q "invalid renewal arguments" <<<"$out" || fail "an absurd renewal failed otherwise: $out"
sql_value reg "SELECT count(*) FROM snowflake_registry.holders" >/dev/null || fail "the holders view fails"
long=$(printf 'h%.0s' $(seq 1 300))
out=$(registry_sql "SELECT * FROM snowflake_registry.claim('default', $EPOCH, 10, 12, NULL, NULL, '${token}30', 1, '$long', 1, '/d', $now, 3000)" 2>&1) &&
  fail "a claim with a host of 300 characters was accepted"
grep -q "invalid claim arguments" <<<"$out" || fail "a claim with a long host failed otherwise: $out"
pass "absurd arguments are refused (22023): a grant of 9e18 ms, a host of 300 characters; the holders view still works"
