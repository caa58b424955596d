#!/usr/bin/env bash
# A rolling upgrade of a fleet with a registry, from the previous release
# (sql/releases) to this one (docs/registry.md, "Upgrading the fleet"):
# servers of either release against either registry script work, or refuse
# with a clear error; none ever issues an ID twice.
#
#   1. The previous release everywhere: its registry script (from git) and
#      two servers o1, o2 of its package (scripts/package.sh --git-rev, the
#      archive extracted into a copy of this PostgreSQL). A server of this
#      build, n1, started against the registry not yet upgraded, refuses to
#      issue and says why: the registry's script has no keyed claims
#      (claim_keyed(), signed calls), which this release uses.
#   2. The registry script upgraded (run again) while o1 and o2 write:
#      every claim is kept, no server stops; n1 then claims by itself.
#   3. o1 upgraded (a clean shutdown, this build's library, ALTER EXTENSION
#      UPDATE): it claims again and issues on.
#   4. The new script's fence (fence_after_restore(), as after a restore)
#      with the mixed fleet writing: the servers of this build resume
#      their claims and never stop; o2, of the previous release, which
#      cannot resume, issues up to its grant's end and then refuses with
#      55000 and its release's hint (restart); upgraded in turn, it claims
#      above the fence and issues.
# Every ID is recorded; after each step none was issued twice.
# SF_REGISTRY_SQL: another new registry script (to see the test fail with a
# changed one).
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_rolling_upgrade.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NEW_REGISTRY_SQL=${SF_REGISTRY_SQL:-$ROOT/registry/snowflake_registry.sql}
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' "$ROOT/Cargo.toml" | head -1)

# --- the previous release: its registry script and its package
read -r prev_version prev_commit < <(
  awk '!/^#/ && NF == 2 { print $1, $2 }' "$ROOT/sql/releases" |
    while read -r v c; do [ "$v" != "$version" ] && printf '%s %s\n' "$v" "$c"; done |
    sort -V | tail -1)
[ -n "${prev_commit:-}" ] || fail "sql/releases names no release before $version"
git -C "$ROOT" cat-file -e "$prev_commit:registry/snowflake_registry.sql" 2>/dev/null ||
  fail "the previous release $prev_version ($prev_commit) has no registry/snowflake_registry.sql in this clone (a shallow clone? git fetch --unshallow)"
git -C "$ROOT" show "$prev_commit:Cargo.toml" | grep "^pg$PG_MAJOR = " >/dev/null ||
  { pass "the previous release $prev_version does not support PostgreSQL $PG_MAJOR: nothing to upgrade from"; exit 0; }
git -C "$ROOT" show "$prev_commit:registry/snowflake_registry.sql" > "$SF_WORK/registry-$prev_version.sql"
chmod 644 "$SF_WORK/registry-$prev_version.sql"
echo "the $prev_version package (commit $prev_commit; cached after the first build)"
(cd "$ROOT" && PG_CONFIG="$PG_BIN/pg_config" bash scripts/package.sh --git-rev "$prev_commit") \
  > "$SF_WORK/prev.out" 2> "$SF_WORK/prev.log" ||
  { tail -30 "$SF_WORK/prev.log"; fail "scripts/package.sh --git-rev $prev_commit failed"; }
prev_archive=$(tail -1 "$SF_WORK/prev.out")
[ -f "$prev_archive" ] || fail "scripts/package.sh named no archive: $(cat "$SF_WORK/prev.out")"
copy_postgres_tree "$PG_BIN/pg_config" "$SF_WORK/old-root" || fail "could not copy the PostgreSQL installation"
tar -xzf "$prev_archive" -C "$SF_WORK/old-root"
OLD_BIN="$SF_WORK/old-root$PG_BIN"
[ -f "$("$OLD_BIN/pg_config" --pkglibdir)/snowflake_id.so" ] || fail "the $prev_version archive did not put its library in $OLD_BIN's"

# The registry, with the previous release's script (lib_registry.sh installs
# SF_REGISTRY_SQL).
SF_REGISTRY_SQL="$SF_WORK/registry-$prev_version.sql"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"
MAX_GRANT_MS=8000
# The fleet, with its bound before any claim (the old script makes it at
# the first claim with an hour, which a fence would then wait for).
psql_on reg -c "INSERT INTO snowflake_registry.fleets (fleet, epoch_unix_ms, node_bits, sequence_bits, max_grant_ms)
                VALUES ('default', 1735689600000, 10, 12, $MAX_GRANT_MS)" >/dev/null

# old_init NAME: a server of the previous release.
old_init() { local keep=$PG_BIN; PG_BIN=$OLD_BIN node_init "$1"; PG_BIN=$keep; echo "$OLD_BIN" > "$SF_WORK/$1.bin"; }
extversion() { sql_value "$1" "SELECT extversion FROM pg_extension WHERE extname = 'snowflake_id'"; }
# upgrade NAME: a clean shutdown, this build's library, the catalog updated.
upgrade() {
  cluster_stop "$1"
  echo "$PG_BIN" > "$SF_WORK/$1.bin"
  cluster_start "$1" || fail "$1 did not start with this build: $(tail -5 "$(cluster_log "$1")")"
  psql_on "$1" -c "ALTER EXTENSION snowflake_id UPDATE" >/dev/null
  [ "$(extversion "$1")" = "$version" ] ||
    fail "$1's catalog is not $version after ALTER EXTENSION UPDATE"
}
# write_all MS NAME...: timed writers on each server for MS ms, from a fresh
# record of successes and failures.
write_all() {
  local ms=$1 name; shift
  for name in "$@"; do rm -f "$SF_WORK/ok.$name" "$SF_WORK/w.$name.err"; touch "$SF_WORK/w.$name.err"; done
  for name in "$@"; do timed_writer "$name" "$ms" & done
}
# no_errors NAME...: no writer failed.
no_errors() {
  local name
  for name in "$@"; do
    [ ! -s "$SF_WORK/w.$name.err" ] || fail "$name stopped issuing: $(sort -u "$SF_WORK/w.$name.err" | head -3)"
  done
}
node_id_of() { sql_value "$1" "SELECT snowflake_node(max(id)) FROM t"; }

# --- 1. the previous release everywhere; a server of this build refuses
old_init o1
old_init o2
node_init n1
cluster_start o1
cluster_start o2
cluster_start n1
for s in o1 o2; do make_table "$s"; wait_issuing "$s" 15; done
make_table n1
[ "$(extversion o1)" = "$prev_version" ] || fail "o1 runs $(extversion o1), not the previous release $prev_version"
for _ in $(seq 1 300); do
  grep -q "older than this server" <<<"$(sql_value n1 "SELECT registry_message FROM snowflake_stats()")" && break
  sleep 0.1
done
message=$(sql_value n1 "SELECT registry_message FROM snowflake_stats()")
grep -q "^the registry's script is older than this server" <<<"$message" ||
  fail "n1 against the $prev_version registry script does not say the script is older: $message"
refusal=$(sql_error n1 "SELECT snowflake_next()") || fail "n1 issues against the $prev_version registry script"
write_all 4000 o1 o2
wait
no_errors o1 o2
pass "a server of $version against the $prev_version registry script refuses to issue and says why ($(sqlstate_of "$refusal")): $message"

# --- 2. the registry script upgraded while every server writes
write_all 8000 o1 o2
sleep 2
upgraded_at=$(now_ms)
psql_on reg -f "$NEW_REGISTRY_SQL" >/dev/null 2>&1 || fail "the registry script does not install over the $prev_version one"
wait_issuing n1 30
wait
no_errors o1 o2
nodes=$(for s in o1 o2 n1; do node_id_of "$s"; done | sort -n | tr '\n' ' ')
[ "$(echo "$nodes" | tr ' ' '\n' | sed '/^$/d' | sort -u | wc -l)" = 3 ] || fail "three servers, node ids $nodes"
gaps=$(for s in o1 o2; do echo "$s $(longest_gap "$s" "$upgraded_at") ms"; done | paste -sd, - | sed 's/,/, /g')
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.holders WHERE state = 'held'")" = 3 ] ||
  fail "the upgraded registry does not show three held claims: $(sql_value reg "SELECT node_id, state FROM snowflake_registry.holders")"
no_duplicates "the registry upgraded under the fleet"
pass "the registry script upgraded under two writing servers: every claim kept, none stopped (longest time without an ID: $gaps); n1 claimed (node ids $nodes)"

# --- 3. o1 upgraded
o1_before=$(sql_value o1 "SELECT max(id) FROM t")
upgrade o1
wait_issuing o1 15
[ "$(sql_value o1 "SELECT max(id) FROM t")" -gt "$o1_before" ] || fail "o1's IDs after its upgrade are not above its earlier ones"
no_duplicates "o1 upgraded"
pass "o1 upgraded to $version: it claimed node id $(node_of o1) and issues"

# --- 4. the new script's fence under the mixed fleet
# (A registry script installed over older claims refuses to resume for
# max_grant_ms after: the rule it rests on held only from then on.)
for _ in $(seq 1 200); do
  [ "$(sql_value reg "SELECT claims_kept_live_since < clock_timestamp() - make_interval(secs => ($MAX_GRANT_MS + 2000) / 1000.0) FROM snowflake_registry.rules")" = t ] && break
  sleep 0.1
done
o2_node=$(node_id_of o2)
write_all 10000 o1 o2 n1
sleep 2
fenced_at=$(now_ms)
sql_value reg "SELECT claims_ended FROM snowflake_registry.fence_after_restore()" >/dev/null
wait
no_errors o1 n1
for s in o1 n1; do
  log_has "$s" "resumed claim [0-9]+ of node id [0-9]+ after the registry's fence" ||
    fail "$s did not resume its claim: $(grep snowflake_id "$(cluster_log "$s")" | tail -3)"
done
gaps=$(for s in o1 n1; do echo "$s $(longest_gap "$s" "$fenced_at") ms"; done | paste -sd, - | sed 's/,/, /g')
# o2, of the previous release, cannot resume: it stops at its grant's end.
grep -q "gave the node id to another server" "$SF_WORK/w.o2.err" ||
  fail "o2 ($prev_version) did not stop at its grant's end after the fence: $(sort -u "$SF_WORK/w.o2.err" | head -3)"
o2_refusal=$(sql_error o2 "SELECT snowflake_next()") || fail "o2 ($prev_version) issues after the fence ended its claim"
[ "$(sqlstate_of "$o2_refusal")" = 55000 ] || fail "o2's refusal is not 55000: $o2_refusal"
o2_last=$(sql_value o2 "SELECT max(id) FROM t")
fence_ms=$(sql_value reg "SELECT fence_ms FROM snowflake_registry.fleets WHERE fleet = 'default'")
o2_until=$(sql_value reg "SELECT max(until_ms) FROM snowflake_registry.grants WHERE data_directory = '$(cluster_dir o2)'")
[ $((o2_last >> 22)) -le "$o2_until" ] || fail "o2 issued at $((o2_last >> 22)) ms, past its grant's end $o2_until"
no_duplicates "the fence under the mixed fleet"
upgrade o2
wait_issuing o2 30
o2_first=$(sql_value o2 "SELECT min(id) FROM t WHERE id > $o2_last")
[ $((o2_first >> 22)) -gt "$fence_ms" ] ||
  fail "o2's first ID after its upgrade (time $((o2_first >> 22))) is not above the fence $fence_ms"
no_duplicates "o2 upgraded after the fence"
pass "the fence under the mixed fleet: o1 and n1 ($version) resumed, issuing on (longest time without an ID: $gaps); o2 ($prev_version, node id $o2_node) stopped at its grant's end with 55000, and once upgraded claimed node id $(node_of o2) above the fence"
