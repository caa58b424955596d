#!/usr/bin/env bash
# How many servers one registry carries: pgbench against the registry's own
# functions on a PostgreSQL 15 server of this machine (fsync on, synchronous
# commit on: every claim and renewal is a durable commit, as deployed).
#
#   bash bench/registry.sh [--servers N] [--seconds S] [--clients C]
#   (SF_REGISTRY_SQL=FILE: another registry script, e.g. an older one to
#   compare with, alternating runs)
#
#   1. a fleet of N servers starting at once: N claims from the pool, by C
#      clients at a time (each claim locks the fleet's row: claims of one
#      fleet are serialised by design);
#   2. renewals: C clients renewing random claims of the N for S seconds;
#   3. restarts: C clients each releasing a random claim and claiming that
#      node id again (what a rolling restart asks), for S seconds;
#   4. the fleet's steady load, computed: one renewal per holder every
#      registry_grant / 6 (5 s with the default 30 s grant), so N / 5
#      renewals per second, beside the measured rate.
# Claims are keyed and calls signed where the script has claim_keyed()
# (the proofs made in the bench's own functions, as a server makes them);
# an older script gets plain tokens.
# Needs scripts/setup.sh (PostgreSQL 15, pgbench). Prints the results; the
# numbers of a run are in docs/registry-tests.md ("How many servers one registry carries").
set -euo pipefail
BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)
SERVERS=1000 SECONDS_EACH=20 CLIENTS=8
while [ $# -gt 0 ]; do
  case $1 in
    --servers) SERVERS=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    *) echo "usage: bench/registry.sh [--servers N] [--seconds S] [--clients C]" >&2; exit 2 ;;
  esac
done
[ "$SERVERS" -le 1024 ] || { echo "registry bench: at most 1024 servers (node_bits 10)" >&2; exit 2; }
# shellcheck source=../tests/integration/lib.sh
. "$ROOT/tests/integration/lib.sh"

cluster_init reg "$(free_port)" "max_connections = 200"
as_pg sed -i "/^shared_preload_libraries = 'snowflake_id'$/d" "$(cluster_dir reg)/postgresql.conf"
cluster_start reg
# (SF_REGISTRY_SQL: another registry script, to compare two versions.)
psql_on reg -f "${SF_REGISTRY_SQL:-$ROOT/registry/snowflake_registry.sql}" >/dev/null
EPOCH=1735689600000   # 2025-01-01, the default epoch
GRANT=30000
psql_on reg <<SQL >/dev/null
-- A fleet other than "default" is made by the owner (an older registry
-- script made it at its first claim).
DO \$\$ BEGIN IF to_regproc('snowflake_registry.create_fleet') IS NOT NULL THEN
  PERFORM snowflake_registry.create_fleet('bench'); END IF; END \$\$;
CREATE TABLE bench_claims (node_id int PRIMARY KEY, claim_id bigint, secret text, key text);
CREATE SEQUENCE bench_calls;
-- A server's claim (keyed where the script has claim_keyed(), as the
-- registry worker makes it; else with a plain token). NULL: from the pool.
CREATE FUNCTION bench_claim_one(p_server int, p_node int) RETURNS bench_claims LANGUAGE plpgsql AS \$\$
DECLARE secret text := md5(random()::text); c record;
BEGIN
  IF to_regproc('snowflake_registry.claim_keyed') IS NOT NULL THEN
    SELECT * INTO STRICT c FROM snowflake_registry.claim_keyed('bench', $EPOCH, 10, 12, p_node, NULL,
        encode(sha256(convert_to(secret, 'UTF8')), 'hex'), NULL,
        1, 'host' || p_server, 5432, '/data', snowflake_registry.now_ms($EPOCH), $GRANT);
    RETURN (c.node_id, c.claim_id, secret, c.signing_key)::bench_claims;
  END IF;
  SELECT * INTO STRICT c FROM snowflake_registry.claim('bench', $EPOCH, 10, 12, p_node, NULL, secret,
      1, 'host' || p_server, 5432, '/data', snowflake_registry.now_ms($EPOCH), $GRANT);
  RETURN (c.node_id, c.claim_id, secret, NULL)::bench_claims;
END
\$\$;
CREATE FUNCTION bench_claim(p_server int) RETURNS void LANGUAGE sql AS \$\$
  INSERT INTO bench_claims SELECT * FROM bench_claim_one(p_server, NULL)
\$\$;
-- A holder's renewal (its calls one at a time: its row locked), signed as
-- the registry worker signs it (the proof made here, by the client's side).
CREATE FUNCTION bench_renew(p_node int) RETURNS bigint LANGUAGE plpgsql AS \$\$
DECLARE b bench_claims; call bigint; now bigint := snowflake_registry.now_ms($EPOCH);
BEGIN
  SELECT * INTO STRICT b FROM bench_claims WHERE node_id = p_node FOR UPDATE;
  call := nextval('bench_calls');  -- (after the lock: the holder's calls in order)
  IF b.key IS NULL THEN
    RETURN snowflake_registry.renew('bench', b.node_id, b.claim_id, b.secret, now, $GRANT);
  END IF;
  RETURN snowflake_registry.renew_signed('bench', b.node_id, b.claim_id, call, now, $GRANT,
      encode(sha256(convert_to(b.key || encode(sha256(convert_to(
          concat_ws('|', 'renew', b.node_id, b.claim_id, call, now, $GRANT, 'bench'), 'UTF8')), 'hex'), 'UTF8')), 'hex'));
END
\$\$;
-- A restart: release, then claim the same node id again.
CREATE FUNCTION bench_restart(p_node int) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE b bench_claims; call bigint; now bigint := snowflake_registry.now_ms($EPOCH);
BEGIN
  SELECT * INTO STRICT b FROM bench_claims WHERE node_id = p_node FOR UPDATE;
  call := nextval('bench_calls');
  IF b.key IS NULL THEN
    PERFORM snowflake_registry.release('bench', b.node_id, b.claim_id, b.secret, now);
  ELSE
    PERFORM snowflake_registry.release_signed('bench', b.node_id, b.claim_id, call, now,
        encode(sha256(convert_to(b.key || encode(sha256(convert_to(
            concat_ws('|', 'release', b.node_id, b.claim_id, call, now, 'bench'), 'UTF8')), 'hex'), 'UTF8')), 'hex'));
  END IF;
  UPDATE bench_claims SET (claim_id, secret, key) = (SELECT c.claim_id, c.secret, c.key FROM bench_claim_one(p_node, p_node) c)
  WHERE node_id = p_node;
END
\$\$;
SQL
work="$SF_WORK/bench"
mkdir -p "$work"
echo "SELECT bench_claim(:client_id * 100000 + :scale);" > "$work/claim.sql"
cat > "$work/renew.sql" <<SQL
\\set n random(0, $((SERVERS - 1)))
SELECT bench_renew(:n);
SQL
cat > "$work/restart.sql" <<SQL
\\set n random(0, $((SERVERS - 1)))
SELECT bench_restart(:n);
SQL
tps() { sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$1" | head -1; }
latency() { sed -nE 's/^latency average = ([0-9.]+) ms/\1/p' "$1" | head -1; }
run() {
  local name=$1; shift
  pgbench -h 127.0.0.1 -p "$(cluster_port reg)" -U postgres -n "$@" postgres > "$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; fail "pgbench $name failed"; }
}

per_client=$((SERVERS / CLIENTS))
claims=$((per_client * CLIENTS))
run claims -c "$CLIENTS" -j 2 -t "$per_client" -f "$work/claim.sql"
[ "$(sql_value reg "SELECT count(*) FROM bench_claims")" = "$claims" ] || fail "not $claims claims"
[ "$(sql_value reg "SELECT count(DISTINCT node_id) FROM snowflake_registry.node_ids WHERE fleet = 'bench'")" = "$claims" ] ||
  fail "the claims did not get distinct node ids"
run renew -c "$CLIENTS" -j 2 -T "$SECONDS_EACH" -f "$work/renew.sql"
run restart -c "$CLIENTS" -j 2 -T "$SECONDS_EACH" -f "$work/restart.sql"
[ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.node_ids WHERE fleet = 'bench' AND released_at IS NULL")" = "$claims" ] ||
  fail "after the restarts not every node id is held"

needed=$(awk -v n="$claims" -v g="$GRANT" 'BEGIN { printf "%.0f", n / (g / 6 / 1000) }')
echo
echo "registry on $(pg_config --version 2>/dev/null || echo PostgreSQL), $(nproc) cores, $CLIENTS clients, fsync on"
printf '%-44s %10s %12s\n' "" "per second" "latency ms"
printf '%-44s %10s %12s\n' "claims from the pool ($claims servers at once)" "$(tps "$work/claims.out")" "$(latency "$work/claims.out")"
printf '%-44s %10s %12s\n' "renewals ($SECONDS_EACH s)" "$(tps "$work/renew.out")" "$(latency "$work/renew.out")"
printf '%-44s %10s %12s\n' "restarts: release + claim ($SECONDS_EACH s)" "$(tps "$work/restart.out")" "$(latency "$work/restart.out")"
printf '%-44s %10s\n' "needed by $claims servers (grant 30 s: renew every 5 s)" "$needed"
echo "grants history: $(sql_value reg "SELECT count(*) FROM snowflake_registry.grants") rows"
