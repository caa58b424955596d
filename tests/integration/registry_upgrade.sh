#!/usr/bin/env bash
# The registry script installed again over a live registry of the previous
# release (sql/releases; its registry/snowflake_registry.sql from git) keeps
# every floor and claim: a claim made before the upgrade, in a fleet the old
# script created at its first claim, is unchanged after it, its holder
# renews with its token, a retry of that claim gets its first answer, the
# fleet keeps working without create_fleet(), and the registry records its
# identity (it has claims). (docs/registry.md, "Set-up": running the file
# again is the upgrade.)
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

read -r prev_version prev_commit < <(awk '!/^#/ && NF == 2 { print $1, $2 }' "$ROOT/sql/releases" | sort -V | tail -1)
git -C "$ROOT" cat-file -e "$prev_commit:registry/snowflake_registry.sql" 2>/dev/null ||
  fail "the previous release $prev_version ($prev_commit) has no registry/snowflake_registry.sql in this clone (a shallow clone? git fetch --unshallow)"
git -C "$ROOT" show "$prev_commit:registry/snowflake_registry.sql" > "$SF_WORK/registry-$prev_version.sql"
chmod 644 "$SF_WORK/registry-$prev_version.sql"

cluster_init reg "$(free_port)"
as_pg sed -i "/^shared_preload_libraries = 'snowflake_id'$/d" "$(cluster_dir reg)/postgresql.conf"
cluster_start reg
psql_on reg -v ON_ERROR_STOP=1 -f "$SF_WORK/registry-$prev_version.sql" >/dev/null 2>&1 ||
  fail "the $prev_version registry script does not install"
EPOCH=1735689600000
now=$(( $(now_ms) - EPOCH ))
token=tok-0123456789abcdef
claim_sql="SELECT claim_id FROM snowflake_registry.claim('orders', $EPOCH, 10, 12, 5, NULL, '$token', 1, 'h', 1, '/d', $now, 30000)"
c1=$(sql_value reg "$claim_sql")
rows="SELECT string_agg(concat_ws('|', fleet, node_id, claim_id, token, floor_ms, until_ms, max_until_ms, released_at), ';' ORDER BY fleet, node_id) FROM snowflake_registry.node_ids"
before=$(sql_value reg "$rows")

psql_on reg -v ON_ERROR_STOP=1 -f "$ROOT/registry/snowflake_registry.sql" >/dev/null ||
  fail "this registry script does not install over the $prev_version one"
[ "$(sql_value reg "$rows")" = "$before" ] || fail "the upgrade changed node_ids: $before, then $(sql_value reg "$rows")"
sql_value reg "SELECT snowflake_registry.renew('orders', 5, $c1, '$token', $now, 30000)" >/dev/null ||
  fail "the claim made before the upgrade cannot be renewed after it"
[ "$(sql_value reg "$claim_sql")" = "$c1" ] || fail "a retry of the claim made before the upgrade did not get its first answer"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.incarnation")" = 1 ] ||
  fail "the upgraded registry, which has claims, did not record its identity"
[ "$(sql_value reg "SELECT claim_id > $c1 FROM snowflake_registry.claim('orders', $EPOCH, 10, 12, NULL, NULL, 'tok-another-server-0', 2, 'h2', 2, '/d2', $now, 30000)")" = t ] ||
  fail "the fleet the $prev_version script created at its first claim does not take new claims"
pass "the registry script over a live $prev_version registry: node_ids unchanged, the old claim renews and its retry gets its first answer, its fleet takes new claims, the identity is recorded"
