#!/usr/bin/env bash
# Public IDs on real servers, as an operator and an application meet them:
#   1. two servers of a fleet, one with its key file outside the data
#      directory (an absolute path), one inside it (relative): the same
#      public IDs;
#   2. an independent FF1, Bouncy Castle's (tests/integration/java/Ff1Check.java,
#      itself checked against NIST's sample #7 first), gives the server's
#      public IDs for 10,000 issued IDs and the ends of the range;
#   3. 1,000,000 issued IDs: snowflake_private(snowflake_public(id)) = id
#      for the bigint and the text form, every public ID distinct, and no
#      order left (Spearman's rank correlation with the IDs near 0);
#   4. the key stays secret: a plain role can convert IDs but can read
#      neither the setting nor the file; the key is in no message;
#   5. the key file's refusals: unset (55000), missing or unreadable,
#      readable by others, malformed (F0000, the line, never the key);
#   6. rotation without a restart: a version added to the file is used by
#      an open session, text forms of the old version still read; a version
#      removed is refused in new sessions (22023, the hint lists the
#      versions); another file named by a reload is read.
# NIST's samples themselves are checked by the unit tests
# (src/core/public_id.rs).
#
# Run from the repository root, with the extension installed (a release
# build: 2,000,000 conversions):
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/public_ids.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
BC_JAR=${SF_BCPROV_JAR:-/usr/share/java/bcprov.jar}
[ -f "$BC_JAR" ] || fail "no Bouncy Castle at $BC_JAR (Debian's libbcprov-java: scripts/setup.sh installs it)"
here=$(cd "$(dirname "$0")" && pwd)

# --- 1. a fleet of two, one key file each, the same keys
keys_dir="$SF_WORK/keys"
mkdir -p "$keys_dir"; chown postgres:postgres "$keys_dir"; chmod 0700 "$keys_dir"
public_keys_write "$keys_dir/public.keys"
cluster_init a "$(free_port)" "snowflake_id.node_id = 1" "snowflake_id.public_id_keys = '$keys_dir/public.keys'"
cluster_init b "$(free_port)" "snowflake_id.node_id = 2" "snowflake_id.public_id_keys = 'public_id.keys'"
public_keys_write "$(cluster_dir b)/public_id.keys"
cluster_start a || fail "a did not start"
cluster_start b || fail "b did not start"
for n in a b; do psql_on "$n" -c "CREATE EXTENSION snowflake_id"; done
checks_a=$(sql_value a "SELECT string_agg(key_version || ':' || check_value, ' ' ORDER BY key_version) FROM snowflake_public_keys()")
checks_b=$(sql_value b "SELECT string_agg(key_version || ':' || check_value, ' ' ORDER BY key_version) FROM snowflake_public_keys()")
[ "$checks_a" = "$checks_b" ] || fail "the check values differ: a $checks_a, b $checks_b"
grep -qE '^1:1[0-9A-Za-z]{11} 2:2[0-9A-Za-z]{11}$' <<<"$checks_a" || fail "snowflake_public_keys() shows $checks_a"
ids="252172774628397056, 0, 9223372036854775807, $(sql_value a "SELECT snowflake_next()"), $(sql_value b "SELECT snowflake_next()")"
for v in 1 2; do
  on_a=$(sql_value a "SELECT string_agg(snowflake_public_text(id, $v), ' ' ORDER BY id) FROM unnest(ARRAY[$ids]::bigint[]) id")
  on_b=$(sql_value b "SELECT string_agg(snowflake_public_text(id, $v), ' ' ORDER BY id) FROM unnest(ARRAY[$ids]::bigint[]) id")
  [ "$on_a" = "$on_b" ] || fail "version $v: a and b give different public IDs: $on_a / $on_b"
done
pass "two servers with the same key file (absolute path, and relative to the data directory) give the same public IDs (check values $checks_a)"

# --- 2. against Bouncy Castle's FF1
psql_on a -q -c "CREATE TABLE issued AS SELECT id FROM snowflake_next_batch(10000) id
                 UNION ALL VALUES (0), (1), (2), (4294967295), (4294967296), (9223372036854775806), (9223372036854775807)"
sql_value a "SELECT id FROM issued ORDER BY id" > "$SF_WORK/ids.txt"
sql_value a "SELECT snowflake_public(id, 2) FROM issued ORDER BY id" > "$SF_WORK/server_public.txt"
java -cp "$BC_JAR" "$here/java/Ff1Check.java" "$TEST_PUBLIC_KEY_2" < "$SF_WORK/ids.txt" \
  > "$SF_WORK/bc_public.txt" 2> "$SF_WORK/bc.err" || { cat "$SF_WORK/bc.err"; fail "the Bouncy Castle check failed"; }
grep -q "NIST sample #7" "$SF_WORK/bc.err" || fail "Bouncy Castle was not checked against NIST's sample"
[ "$(wc -l < "$SF_WORK/bc_public.txt")" = 10007 ] || fail "Bouncy Castle gave $(wc -l < "$SF_WORK/bc_public.txt") public IDs, not 10007"
cmp -s "$SF_WORK/server_public.txt" "$SF_WORK/bc_public.txt" || {
  diff "$SF_WORK/server_public.txt" "$SF_WORK/bc_public.txt" | head -5
  fail "the server's public IDs differ from Bouncy Castle's FF1"
}
pass "Bouncy Castle's FF1 ($(basename "$(readlink -f "$BC_JAR")"), checked against NIST sample #7) gives the server's public IDs for 10,007 IDs"

# --- 3. a million IDs
start=$(now_ms)
read -r total distinct bad_bigint bad_text rho < <(sql_value a "
  WITH ids AS (SELECT id FROM snowflake_next_batch(1000000) id),
       pub AS (SELECT id, snowflake_public(id, 1) AS p, snowflake_public_text(id, 2) AS t FROM ids)
  SELECT count(*), count(DISTINCT p),
         count(*) FILTER (WHERE snowflake_private(p, 1) <> id),
         count(*) FILTER (WHERE snowflake_private(t) <> id),
         round((SELECT corr(r_id, r_p) FROM (SELECT rank() OVER (ORDER BY id) AS r_id,
                                                    rank() OVER (ORDER BY p) AS r_p FROM pub) r)::numeric, 4)
  FROM pub" | tr '|' ' ')
took=$(( $(now_ms) - start ))
[ "$total" = 1000000 ] && [ "$distinct" = 1000000 ] || fail "1,000,000 IDs gave $distinct distinct public IDs of $total"
[ "$bad_bigint" = 0 ] && [ "$bad_text" = 0 ] || fail "round trips failed: $bad_bigint (bigint), $bad_text (text)"
awk -v r="$rho" 'BEGIN { exit !(r > -0.01 && r < 0.01) }' || fail "the rank correlation of 1,000,000 consecutive IDs with their public IDs is $rho"
pass "1,000,000 consecutive IDs: every public ID distinct, both forms round-trip, rank correlation $rho (${took} ms for 4,000,000 conversions and the ranks)"

# --- 4. secret from plain roles
psql_on a -q -c "CREATE ROLE app LOGIN" -c "GRANT SELECT ON issued TO app"
as_app() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port a)" -U app -d postgres -At "$@"; }
[ "$(as_app -c "SELECT snowflake_private(snowflake_public_text(min(id), 1)) = min(id) FROM issued")" = t ] ||
  fail "a plain role cannot convert IDs"
out=$(as_app -c "SHOW snowflake_id.public_id_keys" 2>&1 || true)
grep -q "pg_read_all_settings" <<<"$out" || fail "a plain role reads the setting: $out"
out=$(as_app -c "SELECT pg_read_file('$keys_dir/public.keys')" 2>&1 || true)
grep -q "permission denied" <<<"$out" || fail "a plain role reads the key file: $out"
if grep -rqi "$TEST_PUBLIC_KEY_1\|$TEST_PUBLIC_KEY_2" "$(cluster_log a)"; then fail "a key is in the server log"; fi
pass "a plain role converts IDs but reads neither the setting nor the key file; no key in the log"

# --- 5. the key file's refusals
# expect_refusal LABEL SQLSTATE TEXT: a new session's conversion fails with
# SQLSTATE and a message or hint containing TEXT, and shows no key.
expect_refusal() {
  local label=$1 state=$2 text=$3 out
  out=$(psql_on a -v VERBOSITY=verbose -c "SELECT snowflake_public(1, 1)" 2>&1 || true)
  grep -q "ERROR:  $state" <<<"$out" || fail "$label: not $state: $out"
  grep -qF "$text" <<<"$out" || fail "$label: no '$text' in: $out"
  grep -qiF "$TEST_PUBLIC_KEY_1" <<<"$out" && fail "$label: the error shows the key"
  pass "$label: $state, $(grep -m1 -E 'HINT' <<<"$out" | cut -c1-110)"
}
set_keys() {
  psql_on a -q -c "ALTER SYSTEM SET snowflake_id.public_id_keys = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
  for _ in $(seq 1 100); do
    [ "$(sql_value a "SHOW snowflake_id.public_id_keys")" = "$1" ] && return 0
    sleep 0.1
  done
  fail "the reload did not set snowflake_id.public_id_keys to '$1'"
}
set_keys ""
expect_refusal "no key file set" 55000 "openssl rand -hex 32"
set_keys "$keys_dir/missing.keys"
expect_refusal "a missing key file" F0000 "No such file"
public_keys_write "$keys_dir/open.keys"
chmod 0640 "$keys_dir/open.keys"
set_keys "$keys_dir/open.keys"
expect_refusal "a key file its group may read" F0000 "chmod 0600"
public_keys_write "$keys_dir/bad.keys" "1 $TEST_PUBLIC_KEY_1" "2 ${TEST_PUBLIC_KEY_2:0:60}"
set_keys "$keys_dir/bad.keys"
expect_refusal "a short key on line 3" F0000 "line 3: the key of version 2 is not 64 hex digits"
public_keys_write "$keys_dir/twice.keys" "1 $TEST_PUBLIC_KEY_1" "1 $TEST_PUBLIC_KEY_2"
set_keys "$keys_dir/twice.keys"
expect_refusal "a version given twice" F0000 "key version 1 is given twice"

# --- 6. rotation
rot="$keys_dir/rotating.keys"
public_keys_write "$rot" "1 $TEST_PUBLIC_KEY_1"
set_keys "$rot"
old_text=$(sql_value a "SELECT snowflake_public_text(252172774628397056, 1)")
# One session across the change: version 2 appears in the file meanwhile
# (psql's \! copies a prepared file over it; cp keeps the mode and owner).
public_keys_write "$rot.next" "1 $TEST_PUBLIC_KEY_1" "2 $TEST_PUBLIC_KEY_2"
out=$(psql_on a -At -c "SELECT 'pid ' || pg_backend_pid()" \
        -c "SELECT 'v1 ' || snowflake_public_text(252172774628397056, 1)" \
        -c "\\! cp '$rot.next' '$rot'" \
        -c "SELECT 'v2 ' || snowflake_public_text(252172774628397056, 2)" \
        -c "SELECT 'pid ' || pg_backend_pid()" 2>&1) || fail "the session across the rotation failed: $out"
new_text=$(sql_value b "SELECT snowflake_public_text(252172774628397056, 2)")
grep -qx "v1 $old_text" <<<"$out" && grep -qx "v2 $new_text" <<<"$out" ||
  fail "the session across the rotation gave: $out (want v1 $old_text, v2 $new_text)"
[ "$(grep -c '^pid ' <<<"$out")" = 2 ] && [ "$(grep '^pid ' <<<"$out" | sort -u | wc -l)" = 1 ] ||
  fail "the rotation was not seen within one session: $out"
[ "$(sql_value a "SELECT snowflake_private('$old_text')")" = 252172774628397056 ] || fail "the version 1 text no longer reads"
pass "a version added to the key file is used by an open session; version 1's text forms still read"
public_keys_write "$rot" "2 $TEST_PUBLIC_KEY_2"
out=$(psql_on a -v VERBOSITY=verbose -c "SELECT snowflake_private('$old_text')" 2>&1 || true)
grep -q "ERROR:  22023" <<<"$out" && grep -q "has no key version 1" <<<"$out" && grep -q "Its versions are 2" <<<"$out" ||
  fail "a removed version is not refused as documented: $out"
pass "a version removed from the file is refused in new sessions (22023, the versions listed)"

pass "public_ids"
