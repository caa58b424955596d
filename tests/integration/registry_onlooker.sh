#!/usr/bin/env bash
# What an onlooker of the registry sees proves nothing it can use again
# (docs/registry-threats.md, "pg_monitor" and "a fleet member"):
#   1. For at least 30 s, while the plain-SQL edition (through dblink) and
#      an extension server renew, a pg_monitor role reads every query text
#      pg_stat_activity shows on the registry; the registry logs every
#      statement with its parameters (log_statement = all,
#      log_min_error_statement = debug5) into pg_stat_statements as well.
#   2. A member of the client role then replays all of it: every statement
#      as it was seen, and every hex string in it as a token (release(),
#      renew()), as a proof (release_signed()) and as a revealed secret
#      (claim_keyed()) against the claims the two servers hold.
#   3. Neither claim was released, taken or handed a key: both servers
#      renew and issue on, and no ID was issued twice.
#   4. The rules one by one: the hash of a claim's secret seen in flight
#      gets no answer; a retry that reveals the secret gets the claim's
#      answer and key once; a signed call is accepted once; a wrong proof
#      takes no lock (left in an open transaction, the holder's next call
#      does not wait); a keyed claim cannot be reached with a plain token.
# On the code before signed calls, step 3 fails: the plain token is in the
# texts, and release() with it ends the holder's claim.
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_onlooker.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

SQL_FILE=$ROOT/portable/snowflake_id_portable.sql
WATCH_S=${SF_WATCH_S:-30}
stats=no
if [ -f "$("$PG_BIN/pg_config" --pkglibdir 2>/dev/null || echo /nonexistent)/pg_stat_statements.so" ]; then
  stats=yes
  cluster_conf reg "shared_preload_libraries = 'pg_stat_statements'" "pg_stat_statements.track = 'all'"
fi
cluster_conf reg "log_statement = 'all'" "log_min_error_statement = 'debug5'" "log_parameter_max_length = -1" \
  "log_parameter_max_length_on_error = -1"
cluster_stop reg
cluster_start reg
[ "$stats" = no ] || psql_on reg -c "CREATE EXTENSION pg_stat_statements" >/dev/null
psql_on reg >/dev/null <<'SQL'
CREATE ROLE watcher LOGIN; GRANT pg_monitor TO watcher;
CREATE ROLE intruder LOGIN; GRANT snowflake_registry_client TO intruder;
CREATE ROLE portable_node LOGIN PASSWORD 'portable-secret'; GRANT snowflake_registry_client TO portable_node;
SQL
hba=$(cluster_dir reg)/pg_hba.conf
{ echo "host all portable_node 127.0.0.1/32 scram-sha-256"; cat "$hba"; } >"$SF_WORK/hba" && as_pg cp "$SF_WORK/hba" "$hba"
psql_on reg -c "SELECT pg_reload_conf()" >/dev/null

# The extension server.
node_init n1
cluster_start n1
make_table n1
wait_issuing n1 30

# The plain-SQL edition, its shortest grant: a renewal about every 500 ms of writes.
cluster_init p1 "$(free_port)" "shared_preload_libraries = ''"
cluster_start p1
portable_owner_db p1
owner >/dev/null <<SQL
UPDATE snowflake_portable.config SET registry_fleet = 'default', registry_grant_ms = 1000;
INSERT INTO snowflake_portable.registry_connection (conninfo)
VALUES ('host=127.0.0.1 port=$(cluster_port reg) dbname=postgres user=portable_node password=portable-secret connect_timeout=2');
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next());
SQL
p1_issue() {
  local out
  out=$(owner -At -c "INSERT INTO t SELECT snowflake_next() FROM generate_series(1, $1) RETURNING id") || return 1
  { flock 9; echo "$out" >>"$IDS"; } 9>"$SF_WORK/record.lock"
}
p1_writer() {
  local end=$(( $(now_ms) + $1 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    p1_issue 20 2>>"$SF_WORK/p1.err" || true
    sleep 0.02
  done
}
p1_issue 1 || fail "the plain-SQL edition did not issue: $(owner -c 'SELECT snowflake_next()' 2>&1 | tail -2)"
held="SELECT string_agg(concat_ws(':', node_id, claim_id, released_at IS NULL), ' ' ORDER BY node_id)
      FROM snowflake_registry.node_ids WHERE data_directory = 'portable:app' OR port = $(cluster_port n1)"
# The fleet's epoch and layout (what a fleet member knows).
shape=$(sql_value reg "SELECT concat_ws(', ', epoch_unix_ms, node_bits, sequence_bits) FROM snowflake_registry.fleets WHERE fleet = 'default'")
claims_before=$(sql_value reg "$held")
[ "$(wc -w <<<"$claims_before")" = 2 ] || fail "not two claims held: $claims_before"
pass "the extension server and the plain-SQL edition hold their claims: $claims_before"

# --- 1. The onlooker watches for WATCH_S s (and until it saw 3 registry calls).
: >"$SF_WORK/p1.err"
timed_writer n1 $(( (WATCH_S + 15) * 1000 )) &
w1=$!
p1_writer $(( (WATCH_S + 15) * 1000 )) &
w2=$!
psql -X -q -At -h "$(cluster_dir reg).sock" -p "$(cluster_port reg)" -U watcher -d postgres >"$SF_WORK/seen" <<SQL
CREATE TEMP TABLE seen (q text);
DO \$\$
DECLARE
    started timestamptz := clock_timestamp();
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        INSERT INTO seen SELECT a.query FROM pg_stat_activity a
        WHERE a.query LIKE '%snowflake_registry.%' AND a.pid <> pg_backend_pid();
        EXIT WHEN clock_timestamp() > started + interval '$WATCH_S s'
                  AND (SELECT count(DISTINCT q) FROM seen) >= 3;
        EXIT WHEN clock_timestamp() > started + interval '$((WATCH_S * 4)) s';
        PERFORM pg_sleep(0.002);
    END LOOP;
END
\$\$;
SELECT DISTINCT replace(q, E'\n', ' ') FROM seen;
SQL
wait "$w1" "$w2"
seen=$(grep -c "snowflake_registry\." "$SF_WORK/seen" || true)
[ "$seen" -ge 3 ] || fail "the pg_monitor role saw $seen registry calls in pg_stat_activity (at least 3 expected)"
grep -q "renew" "$SF_WORK/seen" || fail "the pg_monitor role saw no renewal: $(head -3 "$SF_WORK/seen")"
# What the registry's log and pg_stat_statements hold of the same calls.
cp "$(cluster_log reg)" "$SF_WORK/reg.log.seen"
if [ "$stats" = yes ]; then
  psql -X -q -At -h "$(cluster_dir reg).sock" -p "$(cluster_port reg)" -U watcher -d postgres \
    -c "SELECT replace(query, E'\n', ' ') FROM pg_stat_statements WHERE query LIKE '%snowflake_registry.%'" >"$SF_WORK/statements"
else
  : >"$SF_WORK/statements"
fi
pass "watched ${WATCH_S}+ s: $seen distinct registry calls in pg_stat_activity, $(grep -c "snowflake_registry\." "$SF_WORK/reg.log.seen" || true) log lines, $(wc -l <"$SF_WORK/statements") statements (pg_stat_statements: $stats)"

# --- 2. A member of the client role replays all of it.
# Every statement as seen (pg_stat_activity, the log's statement lines).
{
  cat "$SF_WORK/seen"
  sed -nE 's/.*(statement|execute [^:]*): (SELECT .*snowflake_registry\..*)$/\2/p' "$SF_WORK/reg.log.seen"
} | grep "snowflake_registry\." | sort -u >"$SF_WORK/statements.replay"
# Every hex string of 16 digits or more anywhere in it.
cat "$SF_WORK/seen" "$SF_WORK/reg.log.seen" "$SF_WORK/statements" |
  grep -oE "[0-9a-f]{16,}" | sort -u >"$SF_WORK/candidates"
[ -s "$SF_WORK/candidates" ] || fail "no hex string at all in what the onlooker saw (the texts were not read)"
intruder() { psql -X -q -At -h "$(cluster_dir reg).sock" -p "$(cluster_port reg)" -U intruder -d postgres "$@"; }
# Both holders keep writing meanwhile (the plain-SQL edition renews only
# from its calls: idle, its claim would end, and its node id be free to
# anyone).
touch "$SF_WORK/writing"
(
  while [ -e "$SF_WORK/writing" ]; do
    issue n1 20 2>>"$SF_WORK/w.n1.err" || true
    p1_issue 20 2>>"$SF_WORK/p1.err" || true
    sleep 0.02
  done
) &
writers=$!
replayed=0
while IFS= read -r stmt; do
  intruder -c "$stmt" >/dev/null 2>&1 || true
  replayed=$((replayed + 1))
done <"$SF_WORK/statements.replay"
targets=$(sql_value reg "SELECT string_agg(format('(%L,%s,%s)', fleet, node_id, claim_id), ',')
                         FROM snowflake_registry.node_ids WHERE released_at IS NULL")
intruder >"$SF_WORK/stolen" <<SQL
CREATE TEMP TABLE candidate (h text);
\\copy candidate FROM '$SF_WORK/candidates'
CREATE TEMP TABLE target (fleet text, node_id int, claim_id bigint);
INSERT INTO target VALUES $targets;
CREATE TEMP TABLE stolen (what text);
DO \$\$
DECLARE
    c record;
    k record;
BEGIN
    FOR c IN SELECT * FROM candidate, target LOOP
        BEGIN
            PERFORM snowflake_registry.release(c.fleet, c.node_id, c.claim_id, c.h, 0);
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
        BEGIN
            PERFORM snowflake_registry.renew(c.fleet, c.node_id, c.claim_id, c.h, 0, 1);
            INSERT INTO stolen VALUES (format('renew() with %s', c.h));
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
        IF length(c.h) = 32 THEN  -- (a signing key, were one shown)
            BEGIN
                PERFORM snowflake_registry.release_signed(c.fleet, c.node_id, c.claim_id, 4611686018427387903, 0,
                    encode(sha256(convert_to(c.h || encode(sha256(convert_to(concat_ws('|', 'release', c.node_id,
                        c.claim_id, 4611686018427387903, 0, c.fleet), 'UTF8')), 'hex'), 'UTF8')), 'hex'));
            EXCEPTION WHEN OTHERS THEN NULL;
            END;
        END IF;
        IF length(c.h) = 64 THEN
            BEGIN
                PERFORM snowflake_registry.release_signed(c.fleet, c.node_id, c.claim_id, 4611686018427387903, 0, c.h);
            EXCEPTION WHEN OTHERS THEN NULL;
            END;
        END IF;
        BEGIN
            SELECT * INTO k FROM snowflake_registry.claim_keyed(c.fleet, $shape, c.node_id, NULL,
                encode(sha256(convert_to(c.h || 'x', 'UTF8')), 'hex'), ARRAY[c.h], 1, 'intruder', 1, '/intruder', 0, 1000);
            IF k.claim_id = c.claim_id THEN
                INSERT INTO stolen VALUES (format('the key of claim %s with %s', c.claim_id, c.h));
            END IF;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END LOOP;
END
\$\$;
SELECT what FROM stolen;
SQL
rm -f "$SF_WORK/writing"
wait "$writers"
[ ! -s "$SF_WORK/stolen" ] || fail "the onlooker's replay took a claim's rights: $(head -3 "$SF_WORK/stolen")"
pass "replayed $replayed statements and $(wc -l <"$SF_WORK/candidates") hex strings as tokens, proofs and secrets"

# --- 3. The holders kept their claims, and issue on.
claims_after=$(sql_value reg "$held")
[ "$claims_after" = "$claims_before" ] ||
  fail "the holders' claims changed under the onlooker's replay: $claims_before, then $claims_after"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE ended = 'released'")" = 0 ] ||
  fail "a claim was released: $(sql_value reg "SELECT string_agg(concat_ws(' ', claim_id, node_id, data_directory), '; ') FROM snowflake_registry.grants WHERE ended = 'released'")"
issue n1 5 || fail "the extension server stopped issuing after the replay"
p1_issue 5 || fail "the plain-SQL edition stopped issuing after the replay: $(tail -2 "$SF_WORK/p1.err")"
[ "$(sql_value reg "$held")" = "$claims_before" ] || fail "a holder claimed again after the replay: $(sql_value reg "$held")"
no_duplicates "after the onlooker's replay"

# --- 4. The rules one by one, as the client role.
hash_of() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
epoch_ms=$(sql_value reg "SELECT epoch_unix_ms FROM snowflake_registry.fleets WHERE fleet = 'default'")
now=$(( $(now_ms) - epoch_ms ))
claim_sql() { # SECRET_HASH PREVIOUS_SECRET
  echo "SELECT claim_id || ' ' || signing_key FROM snowflake_registry.claim_keyed('default', $shape, 900, NULL,
        '$1', $2, 7, 'h', 1, '/rules', $now, 60000)"
}
first=$(intruder -c "$(claim_sql "$(hash_of secret-number-one-000)" NULL)")
read -r claim key <<<"$first"
[ ${#key} = 32 ] || fail "a keyed claim answered no signing key: $first"
out=$(intruder -v VERBOSITY=verbose -c "$(claim_sql "$(hash_of secret-number-one-000)" NULL)" 2>&1) &&
  fail "the hash of a claim's secret, sent again, got an answer: $out"
grep -q "22023" <<<"$out" || fail "the hash sent again was not refused with 22023: $out"
again=$(intruder -c "$(claim_sql "$(hash_of secret-number-two-000)" "ARRAY['secret-number-one-000']")")
[ "${again%% *}" = "$claim" ] || fail "a retry revealing the claim's secret did not get its claim: $first, then $again"
[ "${again#* }" != "$key" ] || fail "a retry's answer carried the key of the answer before: $again"
other=$(intruder -c "$(claim_sql "$(hash_of secret-number-three-0)" "ARRAY['secret-number-one-000']")" 2>&1) || true
[ "${other%% *}" != "$claim" ] || fail "a secret revealed twice got the claim again: $other"
# An onlooker sends the holder's next retry (seen in flight) before it: it
# gets an answer, the holder's own copy is refused, and the holder's retry
# after that (revealing this one's secret too) gets the claim with a new
# key: the onlooker's no longer signs.
stolen=$(intruder -c "$(claim_sql "$(hash_of secret-number-four-00)" "ARRAY['secret-number-two-000']")")
[ "${stolen%% *}" = "$claim" ] || fail "the retry sent first did not get the claim: $stolen"
out=$(intruder -v VERBOSITY=verbose -c "$(claim_sql "$(hash_of secret-number-four-00)" "ARRAY['secret-number-two-000']")" 2>&1) &&
  fail "the holder's copy of a retry sent before it got an answer too: $out"
grep -q "22023" <<<"$out" || fail "the holder's copy of a retry sent before it was refused otherwise: $out"
held=$(intruder -c "$(claim_sql "$(hash_of secret-number-five-00)" "ARRAY['secret-number-two-000', 'secret-number-four-00']")")
[ "${held%% *}" = "$claim" ] || fail "the holder's next retry did not get its claim: $held"
[ "${held#* }" != "${stolen#* }" ] || fail "the holder's retry got the key the onlooker got first"
key=${stolen#* }
release_with() { # CALL: a release signed with $key
  local text="release|900|$claim|$1|$now|default" inner
  inner=$(printf '%s' "$text" | sha256sum | cut -d' ' -f1)
  intruder -c "SELECT snowflake_registry.release_signed('default', 900, $claim, $1, $now,
    '$(printf '%s%s' "$key" "$inner" | sha256sum | cut -d' ' -f1)')" >/dev/null 2>&1 || true
}
release_with 3
[ "$(sql_value reg "SELECT released_at IS NULL FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = 900")" = t ] ||
  fail "the key of an earlier answer released the claim"
key=${held#* }
pass "a seen hash gets no answer; a revealed secret gets its claim's answer once; each answer a new key (the one an onlooker won first no longer signs)"

# A claim another client made under a hash of the holder's it saw (in the
# log, while the holder's claim waited and was refused), with every call
# number of its key burnt: revealing the secret, the holder does not get a
# claim made with another identity; one made with its own identity comes
# with a new key and its calls numbered from 0. (Before: the holder got the
# other client's claim and key, which then released it under the holder's
# IDs.)
claim_on() { # NODE SECRET_HASH PREVIOUS HOST DIR
  echo "SELECT claim_id || ' ' || signing_key FROM snowflake_registry.claim_keyed('default', $shape, $1, NULL,
        '$2', $3, 7, '$4', 1, '$5', $now, 60000)"
}
signed() { # FUNCTION NODE CLAIM CALL KEY ARGS...: the call's SQL, signed with KEY
  local f=$1 node=$2 claim=$3 call=$4 k=$5 text inner; shift 5
  text="$f|$node|$claim|$call|$(IFS='|'; echo "$*")|default"
  inner=$(printf '%s' "$text" | sha256sum | cut -d' ' -f1)
  echo "SELECT snowflake_registry.${f}_signed('default', $node, $claim, $call, $(IFS=,; echo "$*"),
        '$(printf '%s%s' "$k" "$inner" | sha256sum | cut -d' ' -f1)')"
}
burn=9223372036854775807
planted=$(intruder -c "$(claim_on 901 "$(hash_of secret-number-six-000)" NULL intruder /intruder)")
intruder -c "$(signed renew 901 "${planted%% *}" $burn "${planted#* }" "$now" 60000)" >/dev/null ||
  fail "the planted claim's renewal with the last call number failed"
out=$(intruder -c "$(claim_on 901 "$(hash_of secret-number-seven-0)" "ARRAY['secret-number-six-000']" h /rules)" 2>&1) || true
[ "${out%% *}" != "${planted%% *}" ] || fail "a claim made under the holder's hash with another identity was answered to the holder: $out"
planted=$(intruder -c "$(claim_on 902 "$(hash_of secret-number-eight-0)" NULL h /rules)")
intruder -c "$(signed renew 902 "${planted%% *}" $burn "${planted#* }" "$now" 60000)" >/dev/null ||
  fail "the planted claim's renewal with the last call number failed"
mine=$(intruder -c "$(claim_on 902 "$(hash_of secret-number-nine-0)" "ARRAY['secret-number-eight-0']" h /rules)")
[ "${mine%% *}" = "${planted%% *}" ] || fail "the holder's retry did not get the claim made with its identity: $mine"
[ "${mine#* }" != "${planted#* }" ] || fail "the holder's retry got the planted claim's key"
out=$(intruder -c "$(signed renew 902 "${mine%% *}" 1 "${mine#* }" "$now" 60000)" 2>&1) ||
  fail "the holder's first signed call after the planted claim's burnt numbers was refused: $out"
intruder -c "$(signed release 902 "${planted%% *}" $((burn - 1)) "${planted#* }" 0)" >/dev/null 2>&1 || true
[ "$(sql_value reg "SELECT released_at IS NULL FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = 902")" = t ] ||
  fail "the planted claim's key released the holder's claim"
pass "a claim planted under the holder's hash: not handed over with another identity; with the holder's, a new key and call numbers from 0"

proof() { # TEXT: the proof with the claim's key (as the registry's call_proof)
  local inner; inner=$(printf '%s' "$1" | sha256sum | cut -d' ' -f1)
  printf '%s%s' "$key" "$inner" | sha256sum | cut -d' ' -f1
}
renew_sql() { # CALL
  echo "SELECT snowflake_registry.renew_signed('default', 900, $claim, $1, $now, 60000, '$(proof "renew|900|$claim|$1|$now|60000|default")')"
}
out=$(intruder -c "$(renew_sql 5)" 2>&1) || fail "a signed renewal was refused: $out"
out=$(intruder -v VERBOSITY=verbose -c "$(renew_sql 5)" 2>&1) && fail "a signed renewal was accepted twice"
grep -q "22023" <<<"$out" || fail "a signed renewal sent again was not refused with 22023: $out"
out=$(intruder -v VERBOSITY=verbose -c "$(renew_sql 4)" 2>&1) && fail "a signed renewal with a lower number was accepted"
# A wrong proof in a transaction left open takes no lock: the holder's
# next call does not wait.
wrong="SELECT snowflake_registry.release_signed('default', 900, $claim, 6, 0, '$(hash_of wrong)')"
psql -X -q -h "$(cluster_dir reg).sock" -p "$(cluster_port reg)" -U intruder -d postgres \
  -c "BEGIN" -c "$wrong" -c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
opener=$!
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%'")" = 1 ] && break
  sleep 0.1
done
start=$(now_ms)
intruder -c "SET lock_timeout = '1s'" -c "$(renew_sql 7)" >/dev/null ||
  fail "the holder's renewal failed behind a wrong proof left in an open transaction"
[ $(( $(now_ms) - start )) -lt 1000 ] || fail "the holder's renewal waited $(( $(now_ms) - start )) ms behind a wrong proof"
kill "$opener" 2>/dev/null || true
wait "$opener" 2>/dev/null || true
[ "$(sql_value reg "SELECT released_at IS NULL FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = 900")" = t ] ||
  fail "a wrong proof released the claim"
out=$(intruder -v VERBOSITY=verbose -c "SELECT snowflake_registry.release('default', 900, $claim, 'keyed:$(hash_of secret-number-two-000)', 0)" 2>&1) &&
  fail "a keyed claim was released with its token's text: $out"
grep -q "22023" <<<"$out" || fail "a plain call on a keyed claim was not refused with 22023: $out"
pass "a signed call is accepted once and in order; a wrong proof takes no lock and changes nothing; a plain token never reaches a keyed claim"
