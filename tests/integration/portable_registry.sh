#!/usr/bin/env bash
# The portable edition claims its node id from the registry through dblink,
# in one fleet with an extension server, both writing at once:
#   - the portable server claims a node id of its own (not the extension
#     server's), renews it from its calls (a 3 s grant, 12 s of writes),
#     and every ID it issues lies inside one of its own grants
#     (snowflake_registry.grants), as every extension ID in the extension
#     server's;
#   - restarted, it claims again (a new claim; the old one is never
#     renewed from another incarnation), and issues above what it issued;
#   - a copy of its database on the same server claims a node id of its
#     own, and the original keeps its claim;
#   - the registry paused (SIGSTOP) for longer than a grant: calls go on
#     until the grant ends, then fail with the connection's SQLSTATE and
#     take nothing; resumed, they issue again;
#   - the registry stalled inside a call: the call ends at statement_timeout
#     or registry_timeout_ms, and leaves no backend waiting on the registry;
#   - a claim's answer lost, then another node id asked for: a new token;
#   - a batch further ahead than half a grant: one renewal, not a spin;
#   - a crash (kill -9) while writing, and its clock stepped back 2 s: it
#     claims again and issues on, inside its grants;
#   - a fence on the registry while it writes: it resumes its claim;
#   - a pg_cron job renews the claim with no call made;
#   - split brain: a standby of the portable server promoted while the
#     portable server still writes claims a node id of its own, and both
#     write at once;
#   - no ID twice in the fleet.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

SQL_FILE=$ROOT/portable/snowflake_id_portable.sql
faketime_init
# A role that signs in with a password: dblink requires one of a role that
# is not a superuser.
psql_on reg -c "CREATE ROLE portable_node LOGIN PASSWORD 'portable-secret'; GRANT snowflake_registry_client TO portable_node"
hba=$(cluster_dir reg)/pg_hba.conf
{ echo "host all portable_node 127.0.0.1/32 scram-sha-256"; cat "$hba"; } >"$SF_WORK/hba" && as_pg cp "$SF_WORK/hba" "$hba"
psql_on reg -c "SELECT pg_reload_conf()" -c "CREATE TABLE issued (id bigint, port int)" >/dev/null

node_init n1
cluster_start n1
make_table n1

port=$(free_port)
cluster_init p1 "$port" "shared_preload_libraries = ''"
cluster_start_faked p1
portable_owner_db p1
owner <<SQL
UPDATE snowflake_portable.config SET registry_fleet = 'default', registry_grant_ms = $GRANT_MS;
INSERT INTO snowflake_portable.registry_connection (conninfo)
VALUES ('host=127.0.0.1 port=$(cluster_port reg) dbname=postgres user=portable_node password=portable-secret connect_timeout=2');
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next());
SQL
pass "the portable server (no superuser, no preload) is set to claim from the registry"

# p1_issue N: N IDs on p1 (recorded, as lib_registry's issue does).
p1_issue() {
  local out
  out=$(owner -At -c "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, $1) RETURNING id") || return 1
  { flock 9; echo "$out" >>"$IDS"; record_issuer p1 <<<"$out"; } 9>"$SF_WORK/record.lock"
}
# p1_writer MS: 20 IDs every 20 ms for MS ms; the time of each success to
# $SF_WORK/p1.ok, failures to $SF_WORK/p1.err.
p1_writer() {
  local end=$(( $(now_ms) + $1 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    if p1_issue 20 2>>"$SF_WORK/p1.err"; then now_ms >>"$SF_WORK/p1.ok"; fi
    sleep 0.02
  done
}
# in_grants: every recorded ID lies in a grant to the server that issued it.
in_grants() {
  local outside
  psql_on reg -c "TRUNCATE issued" >/dev/null
  psql_on reg -c "\\copy issued FROM '$ISSUED_BY'"
  outside=$(sql_value reg "
    SELECT count(*) FROM issued i
    WHERE NOT EXISTS (
      SELECT FROM snowflake_registry.grants g, snowflake_registry.fleets f
      WHERE f.fleet = 'default' AND g.fleet = 'default'
        AND g.node_id = (i.id >> f.sequence_bits) & ((1 << f.node_bits) - 1)
        AND g.floor_ms < i.id >> (f.node_bits + f.sequence_bits) AND i.id >> (f.node_bits + f.sequence_bits) <= g.until_ms
        AND g.port = i.port)")
  [ "$outside" = 0 ] || fail "$1: $outside IDs outside every grant to the server that issued them"
  pass "$1: every one of $(sql_value reg "SELECT count(*) FROM issued") IDs inside a grant to its server"
}

p1_issue 1 || fail "the first call on the portable server failed: $(cat "$SF_WORK/p1.err" 2>/dev/null)"
node_p1=$(owner -At -c "SELECT snowflake_node(max(id)) FROM t")
node_n1=$(node_of n1)
[ "$node_p1" != "$node_n1" ] || fail "the portable server and the extension server both have node id $node_p1"
holder=$(sql_value reg "SELECT data_directory FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_p1")
[ "$holder" = "portable:app" ] || fail "node id $node_p1 is held by '$holder', not the portable database"
pass "claimed node id $node_p1 (the extension server has $node_n1)"

# 12 s of writes on both: four grants' worth, renewed by the calls.
claims_before=$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE data_directory = 'portable:app'")
timed_writer n1 12000 &
w1=$!
p1_writer 12000
wait "$w1"
[ ! -s "$SF_WORK/p1.err" ] || fail "calls failed on the portable server while the registry ran: $(head -3 "$SF_WORK/p1.err")"
claims=$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE data_directory = 'portable:app'")
[ "$claims" = "$claims_before" ] || fail "the portable server claimed again ($claims claims) instead of renewing"
until_ms=$(sql_value reg "SELECT until_ms - floor_ms FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_p1")
[ "$until_ms" -gt 9000 ] || fail "the grant was not renewed past 9 s of IDs ($until_ms ms)"
# snowflake_portable.renew() (what a pg_cron job calls) raises the grant.
# (Once it is due: less than half the grant left.)
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT n.until_ms - snowflake_registry.now_ms(f.epoch_unix_ms) < $GRANT_MS / 2
                      FROM snowflake_registry.node_ids n JOIN snowflake_registry.fleets f USING (fleet)
                      WHERE n.fleet = 'default' AND n.node_id = $node_p1")" = t ] && break
  sleep 0.1
done
before_until=$(sql_value reg "SELECT until_ms FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_p1")
owner -c "SELECT snowflake_portable.renew()" >/dev/null
after_until=$(sql_value reg "SELECT until_ms FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_p1")
[ "$after_until" -gt "$before_until" ] || fail "snowflake_portable.renew() did not raise the grant ($before_until, then $after_until)"
pass "snowflake_portable.renew() raised the grant by $((after_until - before_until)) ms"
no_duplicates "12 s of writes on both"
in_grants "12 s of writes on both"

# A restart: a new claim, IDs above the earlier ones.
last=$(owner -At -c "SELECT max(id) FROM t")
cluster_stop p1
cluster_start_faked p1
p1_issue 5 || fail "the portable server did not issue after its restart: $(tail -3 "$SF_WORK/p1.err")"
first=$(owner -At -c "SELECT min(id) FROM t WHERE id > $last")
claims=$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE data_directory = 'portable:app'")
[ "$claims" = $((claims_before + 1)) ] || fail "after the restart: $claims claims, not one more"
[ "$(owner -At -c "SELECT count(*) FROM t WHERE id > $last")" = 5 ] || fail "after the restart IDs went below the earlier ones"
pass "restarted: a new claim (node id $(owner -At -c "SELECT snowflake_node($first)")), IDs above the earlier ones"

# A copy of the database on the same server (the same start time): the
# copy claims a node id of its own at its first call (it must not issue
# under its original's claim), and the original keeps its own.
node_p1=$(owner -At -c "SELECT snowflake_node($first)")
psql_on p1 -c "CREATE DATABASE app_copy TEMPLATE app OWNER app_owner"
copy_issue() {
  local out
  out=$(psql_on p1 -U app_owner -d app_copy -At -c "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, 20) RETURNING id") || return 1
  { flock 9; echo "$out" >>"$IDS"; record_issuer p1 <<<"$out"; } 9>"$SF_WORK/record.lock"
}
copy_issue || fail "the copy of the database did not issue"
p1_issue 20 || fail "the original did not issue after the copy"
node_copy=$(psql_on p1 -d app_copy -At -c "SELECT snowflake_node(max(id)) FROM t")
[ "$node_copy" != "$node_p1" ] || fail "the copy of the database issues under its original's node id $node_p1"
[ "$(owner -At -c "SELECT snowflake_node(max(id)) FROM t")" = "$node_p1" ] ||
  fail "the original lost its node id $node_p1 to its copy"
holder=$(sql_value reg "SELECT data_directory FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_copy")
[ "$holder" = "portable:app_copy" ] || fail "node id $node_copy is held by '$holder', not the copy"
psql_on p1 -c "DROP DATABASE app_copy"
no_duplicates "a copy of the database beside its original"
pass "a copy of the database (CREATE DATABASE ... TEMPLATE) claimed node id $node_copy; the original kept $node_p1"

# The registry paused for 3 grants and 5 s: calls go on until the grant ends, then
# fail and take nothing; resumed, they issue again.
: >"$SF_WORK/p1.err"
reg_pid=$(head -1 "$(cluster_dir reg)/postmaster.pid")
kill -STOP "$reg_pid"; pkill -STOP -P "$reg_pid"
paused_at=$(now_ms)
p1_writer $((3 * GRANT_MS + 5000))
kill -CONT "$reg_pid"; pkill -CONT -P "$reg_pid"
grep -q "could not establish connection\|could not be reached" "$SF_WORK/p1.err" ||
  fail "with the registry paused past the grant, no call failed on the connection: $(head -3 "$SF_WORK/p1.err")"
# (Calls succeed until the IDs reach the grant: a grant is in ID time, and
# after the restart the IDs run up to max_clock_drift_ms, 5 s, ahead of the
# clock, so that is at most a grant plus 5 s after the last renewal, plus a
# connection attempt's 2 s. in_grants below checks that no ID lies past
# the grant.)
last_ok=$(tail -1 "$SF_WORK/p1.ok")
[ "$last_ok" -le $((paused_at + GRANT_MS + 5000 + 2500)) ] ||
  fail "calls succeeded $((last_ok - paused_at)) ms after the registry was paused, past the grant"
for _ in $(seq 1 100); do p1_issue 1 2>/dev/null && break; sleep 0.1; done
p1_issue 1 || fail "the portable server did not issue after the registry came back"
pass "the registry paused: IDs until the grant ended, then errors; resumed, IDs again"

# The registry stalls inside a call (a lock its renewal waits for): the
# call ends at statement_timeout (57014), or after registry_timeout_ms
# (08006), not when the registry answers; then calls issue again.
# (Once a renewal is due: less than half the grant left.)
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT n.until_ms - snowflake_registry.now_ms(f.epoch_unix_ms) < $GRANT_MS / 2
                      FROM snowflake_registry.node_ids n JOIN snowflake_registry.fleets f USING (fleet)
                      WHERE n.fleet = 'default' AND n.node_id = (SELECT node_id FROM snowflake_registry.node_ids
                                                                  WHERE data_directory = 'portable:app' ORDER BY claim_id DESC LIMIT 1)")" = t ] && break
  sleep 0.1
done
psql_on reg -c "BEGIN" -c "LOCK TABLE snowflake_registry.node_ids" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
locker=$!
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT count(*) FROM pg_locks WHERE relation = 'snowflake_registry.node_ids'::regclass AND mode = 'AccessExclusiveLock' AND granted")" = 1 ] && break
  sleep 0.1
done
# stalled_call SQLSTATE SETTINGS: renew() fails with SQLSTATE within 8 s.
stalled_call() {
  local start out
  start=$(now_ms)
  out=$(owner -v VERBOSITY=verbose -c "$2" -c "SELECT snowflake_portable.renew()" 2>&1) && fail "renew() succeeded with the registry stalled"
  [ "$(sqlstate_of "$out")" = "$1" ] || fail "renew() with the registry stalled ($2): expected $1, got: $out"
  [ $(( $(now_ms) - start )) -lt 8000 ] || fail "renew() with the registry stalled ($2) took $(( $(now_ms) - start )) ms"
}
stalled_call 57014 "SET statement_timeout = '2s'"
stalled_call 08006 "UPDATE snowflake_portable.config SET registry_timeout_ms = 2000"
# (And the registry's side gave up too, its statement_timeout set by the
# connection: no backend of the portable server's role still waits on the
# lock, which is still held.)
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE usename = 'portable_node' AND wait_event_type = 'Lock'")" = 0 ] && break
  sleep 0.1
done
[ "$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE usename = 'portable_node' AND wait_event_type = 'Lock'")" = 0 ] ||
  fail "calls given up left backends on the registry waiting on its lock"
[ "$(sql_value reg "SELECT count(*) FROM pg_locks WHERE relation = 'snowflake_registry.node_ids'::regclass AND mode = 'AccessExclusiveLock' AND granted")" = 1 ] ||
  fail "the registry's lock ended before the check: it shows nothing"
psql_on reg -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'" >/dev/null
wait "$locker" || true
owner -c "UPDATE snowflake_portable.config SET registry_timeout_ms = 5000"
for _ in $(seq 1 100); do p1_issue 1 2>/dev/null && break; sleep 0.1; done
p1_issue 1 || fail "the portable server did not issue after the registry's stall"
pass "the registry stalled inside a call: 57014 at statement_timeout, 08006 after registry_timeout_ms; then IDs again"

# A claim whose answer is lost (given up at registry_timeout_ms; a deferred
# trigger on the registry holds its commit 1.5 s, so it commits after that),
# then another node id asked for: its claim gets a new token (the lost
# claim's token holds the first node id: reused, the registry refuses every
# claim with 22023).
owner -c "UPDATE snowflake_portable.config SET registry_timeout_ms = 300" >/dev/null
psql_on reg >/dev/null <<'SQL'
CREATE FUNCTION public.hold_portable_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.node_id = 900 AND NEW.data_directory = 'portable:app' THEN PERFORM pg_sleep(1.5); END IF;
    RETURN NEW;
END
$$;
CREATE CONSTRAINT TRIGGER hold_portable_claim AFTER INSERT ON snowflake_registry.grants
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.hold_portable_claim();
SQL
owner -c "UPDATE snowflake_portable.config SET node_id = 900" >/dev/null
out=$(owner -v VERBOSITY=verbose -c "SELECT snowflake_next()" 2>&1) && fail "a claim whose commit is held succeeded: $out"
[ "$(sqlstate_of "$out")" = 08006 ] || fail "a claim whose commit is held, given up after 300 ms: $out"
owner -c "UPDATE snowflake_portable.config SET node_id = 901" >/dev/null
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = 900 AND data_directory = 'portable:app'")" = 1 ] && break
  sleep 0.05
done
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = 900 AND data_directory = 'portable:app'")" = 1 ] ||
  fail "the claim given up on did not commit at the registry: the case shows nothing"
psql_on reg -c "DROP TRIGGER hold_portable_claim ON snowflake_registry.grants" >/dev/null
for _ in $(seq 1 50); do p1_issue 1 2>"$SF_WORK/p1.last" && break; sleep 0.1; done
p1_issue 1 || fail "after a lost claim and another node id asked for, calls fail: $(cat "$SF_WORK/p1.last")"
[ "$(owner -At -c "SELECT snowflake_node(max(id)) FROM t")" = 901 ] || fail "node id 901 was asked for, not claimed"
owner -c "UPDATE snowflake_portable.config SET node_id = NULL, registry_timeout_ms = 5000" >/dev/null
pass "a claim's answer lost, another node id asked for: claimed with a new token (node id 901)"

# A crash while writing, then the clock 2 s behind (within the drift limit).
p1_writer 3000 &
w1=$!
sleep 1.5
cluster_kill9 p1
wait "$w1"
cluster_start_faked p1
clock_set -2
: >"$SF_WORK/p1.err"
p1_writer 3000
[ ! -s "$SF_WORK/p1.err" ] || fail "after the crash, with the clock 2 s behind, calls failed: $(head -3 "$SF_WORK/p1.err")"
clock_set +0
no_duplicates "a crash and the clock 2 s behind"
in_grants "a crash and the clock 2 s behind"

# Split brain: a standby promoted while its primary still runs and writes.
cluster_basebackup s1 "$(free_port)" p1
cluster_start s1
wait_for_replay s1 p1
promote s1
s1_issue() {
  local out
  out=$(psql_on s1 -U app_owner -d app -At -c "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, 20) RETURNING id") || return 1
  { flock 9; echo "$out" >>"$IDS"; record_issuer s1 <<<"$out"; } 9>"$SF_WORK/record.lock"
}
p1_writer 4000 &
w1=$!
for _ in $(seq 1 100); do s1_issue 2>>"$SF_WORK/s1.err" || true; sleep 0.02; done
wait "$w1"
node_s1=$(psql_on s1 -d app -At -c "SELECT snowflake_node(max(id)) FROM t")
node_p1=$(owner -At -c "SELECT snowflake_node(max(id)) FROM t")
[ "$node_s1" != "$node_p1" ] || fail "the promoted standby issues with its primary's node id $node_p1"
[ "$(psql_on s1 -d app -At -c "SELECT count(*) FROM t WHERE snowflake_node(id) = $node_s1")" -ge 1000 ] ||
  fail "the promoted standby issued too few IDs: $(head -3 "$SF_WORK/s1.err")"
pass "split brain: the promoted standby claimed node id $node_s1, its primary writes on with $node_p1"
# A batch whose end lies further ahead than half a grant (the first call
# after a restart moves max_clock_drift_ms, 5 s, ahead; the grant is 3 s):
# one claim that covers the batch's end, not a reserve and a look at the
# grant on every pass until the clock catches up.
owner -c "SELECT setval('snowflake_portable.incarnation', 1)" >/dev/null
guard_before=$(owner -At -c "SELECT pg_sequence_last_value('snowflake_portable.guard')")
out=$(owner -At -c "INSERT INTO t SELECT snowflake_next_batch(10) RETURNING id") || fail "the batch 5 s ahead failed: $out"
{ flock 9; echo "$out" >>"$IDS"; record_issuer p1 <<<"$out"; } 9>"$SF_WORK/record.lock"
guard_after=$(owner -At -c "SELECT pg_sequence_last_value('snowflake_portable.guard')")
[ $((guard_after - guard_before)) -le 20 ] ||
  fail "a batch 5 s ahead took $(( (guard_after - guard_before) / 2 )) reserves"
pass "a batch 5 s ahead of the clock with a 3 s grant: $(( (guard_after - guard_before) / 2 )) reserves"

# pg_cron, where the service runs it, renews with no call at all: p1
# restarted with pg_cron preloaded (as a service preloads it), the owner
# schedules renew() every minute (Debian 12's pg_cron 1.4 counts in
# minutes; 1.5 takes seconds), and its run raises the grant, no call made.
cluster_stop p1
cluster_conf p1 "shared_preload_libraries = 'pg_cron'" "cron.database_name = 'app'" "cron.use_background_workers = on"
cluster_start_faked p1
psql_on p1 -d app -c "CREATE EXTENSION pg_cron" -c "GRANT USAGE ON SCHEMA cron TO app_owner" >/dev/null
p1_issue 1 || fail "p1 did not issue after its restart with pg_cron: $(tail -3 "$SF_WORK/p1.err")"
node_p1=$(owner -At -c "SELECT snowflake_node(max(id)) FROM t")
# renew() asks the registry only once the claim is due (less than half a
# grant left), and the first call after the restart took a grant that ends
# max_clock_drift_ms past the clock: the job is scheduled once the claim is
# due, or a run in the next seconds would rightly do nothing.
due="" due_wait_start=$SECONDS
for _ in $(seq 1 100); do
  due=$(owner -At -c "SELECT (pg_sequence_last_value('snowflake_portable.grant_word') >> c.node_bits)
                               < floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - c.epoch_unix_ms + c.registry_grant_ms / 2
                        FROM snowflake_portable.config c")
  [ "$due" = t ] && break
  sleep 0.2
done
[ "$due" = t ] || fail "p1's claim did not come due within 20 s of its last call"
due_waited=$((SECONDS - due_wait_start))
until_before=$(sql_value reg "SELECT until_ms FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_p1")
owner -c "SELECT cron.schedule('snowflake-renew', '* * * * *', 'SELECT snowflake_portable.renew()')" >/dev/null
for _ in $(seq 1 150); do
  [ "$(owner -At -c "SELECT count(*) FROM cron.job_run_details WHERE status IN ('succeeded', 'failed')")" -ge 1 ] && break
  sleep 0.5
done
run=$(owner -At -c "SELECT status || ': ' || coalesce(return_message, '') FROM cron.job_run_details ORDER BY runid LIMIT 1")
grep -q "^succeeded" <<<"$run" || fail "the pg_cron job's run: ${run:-none within 75 s}"
until_after=$(sql_value reg "SELECT until_ms FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_p1")
[ "$until_after" -gt "$until_before" ] || fail "the pg_cron job ran but did not raise the grant ($until_before, then $until_after)"
owner -c "SELECT cron.unschedule('snowflake-renew')" >/dev/null
pass "a pg_cron job (run as the owner) renewed the claim on node id $node_p1 by $((until_after - until_before)) ms, no call made (due $due_waited s after the call)"

# A fence (what the registry does after a restore or a failover of its
# own) while the portable server writes: it resumes its claim, the same
# node id, and no call fails (claimed again, it would wait a whole
# max_grant_ms above the fence, failing).
node_p1=$(owner -At -c "SELECT snowflake_node(max(id)) FROM t")
: >"$SF_WORK/p1.err"
: >"$SF_WORK/p1.ok"
p1_writer $((2 * GRANT_MS)) &
w1=$!
for _ in $(seq 1 100); do [ -s "$SF_WORK/p1.ok" ] && break; sleep 0.05; done
sql_value reg "SELECT count(*) FROM snowflake_registry.fence_after_restore()" >/dev/null
wait "$w1"
[ ! -s "$SF_WORK/p1.err" ] || fail "calls failed after a fence: $(head -3 "$SF_WORK/p1.err")"
[ "$(owner -At -c "SELECT snowflake_node(max(id)) FROM t")" = "$node_p1" ] || fail "after a fence the node id changed"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE data_directory = 'portable:app' AND resumed > 0")" -ge 1 ] ||
  fail "after a fence no claim of the portable server was resumed"
in_grants "a fence while writing"
pass "a fence while writing: the claim on node id $node_p1 resumed, no call failed"
# The promoted standby, idle since before the fence and past its grant,
# cannot resume: it claims again, with the fence as its floor, and says so
# (55000), not that its clock stepped back.
out=$(psql -X -h 127.0.0.1 -p "$(cluster_port s1)" -U app_owner -d app -v VERBOSITY=verbose -c "SELECT snowflake_next()" 2>&1) &&
  fail "the promoted standby issued below the fence: $out"
[ "$(sqlstate_of "$out")" = 55000 ] && grep -q "floor" <<<"$out" || fail "a new claim under the fence: $out"
pass "a new claim under the fence: 55000, issuing waits for the floor"

no_duplicates "the whole run"
in_grants "the whole run"
