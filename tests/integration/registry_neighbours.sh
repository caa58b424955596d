#!/usr/bin/env bash
# What the registry's neighbours cannot do to it: the other roles of the
# registry's server and database, and one member of the fleet that
# misbehaves (docs/registry-threats.md, the threat table). The
# registry script runs as a superuser, its claim(), renew(), release() and
# resume() as SECURITY DEFINER functions of that owner, and every server of
# the fleet shares its rows: a role that can plant objects where those run,
# or a client that holds a transaction open, reaches every server. Each
# case fails on the registry script before these guards:
#
#   install: a tenant of the registry's database (a role with CREATE on it,
#     not superuser) must not take over the install (the class of
#     CVE-2022-2625: CREATE ... IF NOT EXISTS and CREATE OR REPLACE adopt
#     an object someone else made). (a) The tenant makes the schema
#     snowflake_registry first, with a table node_ids whose trigger runs
#     ALTER ROLE tenant SUPERUSER: the install is refused (42501, naming
#     the schema's owner), and after a claim is attempted the tenant is
#     still not superuser (before: the install went through, and the first
#     claim, run by the SECURITY DEFINER claim(), made the tenant
#     superuser). (b) Installed, then the tenant given CREATE on the
#     schema: installing again is refused (42501). (c) Installed, then one
#     of its functions (holder_text) given to the tenant: installing again
#     is refused (42501). (d) Installing over an install by its owner (an
#     upgrade) still works and keeps the data. (e) A tenant named admin
#     makes the schema, with a trigger named keep_reach, for an installer
#     named "Admin": refused (the owner was compared as an identifier,
#     folded to admin, and the trigger's name was on the allow-list), and
#     "Admin" installs and upgrades its own. (f) An extension created in the
#     schema, (g) the client role made able to log in: each refused.
#   search_path: no registry function runs code planted on its caller's
#     search_path (the class of CVE-2018-1058). (a) Every function and
#     procedure of the schema snowflake_registry is created with
#     search_path = pg_catalog, pg_temp (who_issued() was not). (b) A role
#     with CREATE on the registry's database makes the schema "postgres"
#     (named like the admin role: first on the default search_path
#     "$user", public) and functions to_timestamp(numeric) and
#     to_timestamp(bigint) there and in public that make it superuser;
#     the admin then asks who_issued() and the holders view, and the client
#     role calls renew() with its search_path set to those schemas: the
#     role is still not superuser, and who_issued() names the right server.
#   open_transactions: one member of the fleet (a session of the client
#     role) holds a transaction open for 4 s after each of its calls in
#     turn: release(), renew() and resume() of another server's claim with
#     a wrong token, then renew(), release() and claim() of claims of its
#     own. Two servers issue all the while (a 3 s grant, renewed every
#     0.5 s), and a third starts during each hold: it issues within 6 s,
#     no registry backend waits on a lock for more than 1.5 s, the client
#     role has at most 8 backends, not one renewal of the two servers
#     fails and neither goes 1.5 s without an ID (before: the release()
#     with a wrong token locked the other server's row for the 4 s; its
#     renewals waited, or gave up after the registry session's
#     lock_timeout of a second, and its grant ran out), and while the
#     member's claim is held open the starting server is told which
#     registry process its claim waits on, the member's (55P03, "the
#     claims of fleet ... wait on registry process <pid> (...)"), then
#     issues once the hold ends.
#
# Run from the repository root, with the extension installed (one case:
# name it, e.g. `registry_neighbours.sh install`; SF_REGISTRY_SQL: another
# registry script, as for lib_registry.sh):
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_neighbours.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

EPOCH=1735689600000
# The registry's clock as ID time of a fleet with the epoch $1, in SQL
# (the holder's present of a client that runs in step with the registry).
now_sql() { echo "(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - $1)"; }
# reg_as ROLE DATABASE [psql args...]: psql to the registry's server as ROLE.
reg_as() {
  local role=$1 db=$2; shift 2
  psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port reg)" -U "$role" -d "$db" "$@"
}
# install_into DATABASE: installs the registry script there as the superuser
# postgres, as docs/registry.md says (psql -v ON_ERROR_STOP=1 -f), with
# verbose errors; prints psql's output, returns its status.
install_into() {
  psql_on reg -d "$1" -v VERBOSITY=verbose -f "$REGISTRY_SQL" 2>&1
}
# expect_install_refused DATABASE TEXT CASE: installing into DATABASE must
# fail with 42501 and a message containing TEXT.
expect_install_refused() {
  local out
  out=$(install_into "$1") && fail "$3: the install went through"
  [ "$(sqlstate_of "$out")" = 42501 ] || fail "$3: not refused with 42501: $out"
  grep -qF -- "$2" <<<"$out" || fail "$3: the refusal does not say '$2': $out"
}
superuser() { sql_value reg "SELECT rolsuper FROM pg_roles WHERE rolname = '$1'"; }

# --- install: a tenant of the registry's database
install_case() {
  psql_on reg -c "CREATE ROLE tenant LOGIN" >/dev/null
  local db
  for db in regtenant regtenant_grant regtenant_owner regupgrade; do
    psql_on reg -c "CREATE DATABASE $db" -c "GRANT CREATE ON DATABASE $db TO tenant" >/dev/null
  done

  # (a) The tenant makes the schema first: node_ids as the script makes it,
  # with a trigger that runs as whoever writes the row (claim(): the owner).
  reg_as tenant regtenant >/dev/null <<'SQL'
CREATE SCHEMA snowflake_registry;
CREATE TABLE snowflake_registry.node_ids (
    fleet text NOT NULL, node_id int NOT NULL, claim_id bigint NOT NULL, token text NOT NULL,
    system_identifier numeric(20) NOT NULL, host text NOT NULL, port int NOT NULL,
    data_directory text NOT NULL, floor_ms bigint NOT NULL, until_ms bigint NOT NULL,
    max_until_ms bigint NOT NULL, renew_every_ms bigint NOT NULL, claimed_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL, released_at timestamptz,
    PRIMARY KEY (fleet, node_id));
CREATE FUNCTION snowflake_registry.take_over() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    ALTER ROLE tenant SUPERUSER;
    RETURN NEW;
END
$$;
CREATE TRIGGER take_over BEFORE INSERT OR UPDATE ON snowflake_registry.node_ids
    FOR EACH ROW EXECUTE FUNCTION snowflake_registry.take_over();
SQL
  local out rc=0 claimed
  out=$(install_into regtenant) || rc=$?
  # A claim, if the install left one to call (as the client role).
  if [ "$(reg_as postgres regtenant -At -c "SELECT to_regprocedure('snowflake_registry.claim(text, bigint, int, int, int, int, text, numeric, text, int, text, bigint, bigint)') IS NOT NULL")" = t ]; then
    claimed=$(reg_as fleet_node regtenant -At -c "SELECT node_id FROM snowflake_registry.claim('default', $EPOCH, 10, 12, NULL, NULL,
      'tenant-claim-token-0001', 1, 'h', 1, '/d', $(now_sql $EPOCH), 3000)" 2>&1) || true
    echo "a claim in regtenant after the install: $claimed"
  fi
  [ "$(superuser tenant)" = f ] ||
    fail "install (a): the tenant that made the schema snowflake_registry first became superuser (install: rc $rc, ${out:-no output})"
  [ "$rc" -ne 0 ] || fail "install (a): the install into the tenant's schema snowflake_registry went through"
  [ "$(sqlstate_of "$out")" = 42501 ] || fail "install (a): not refused with 42501: $out"
  grep -qF 'the schema "snowflake_registry" belongs to role "tenant"' <<<"$out" ||
    fail "install (a): the refusal does not name the schema's owner: $out"
  pass "install (a): into a schema snowflake_registry the tenant made first (a trigger on node_ids), the install is refused (42501), and the tenant stays no superuser"

  # (b) The tenant may create in the installed schema.
  install_into regtenant_grant >/dev/null || fail "install (b): a first install into an empty database failed"
  reg_as postgres regtenant_grant -c "GRANT CREATE ON SCHEMA snowflake_registry TO tenant" >/dev/null
  expect_install_refused regtenant_grant 'role "tenant" may create objects in the schema "snowflake_registry"' "install (b)"
  pass "install (b): with CREATE on the schema granted to the tenant, installing again is refused (42501)"

  # (c) One of the registry's functions belongs to the tenant.
  install_into regtenant_owner >/dev/null || fail "install (c): a first install into an empty database failed"
  reg_as postgres regtenant_owner -c "ALTER FUNCTION snowflake_registry.holder_text(snowflake_registry.node_ids) OWNER TO tenant" >/dev/null
  expect_install_refused regtenant_owner 'belongs to role "tenant"' "install (c)"
  pass "install (c): with holder_text() owned by the tenant, installing again is refused (42501)"
  [ "$(superuser tenant)" = f ] || fail "install: the tenant became superuser"

  # (d) An upgrade by the owner: installed twice, the data kept.
  install_into regupgrade >/dev/null || fail "install (d): a first install into an empty database failed"
  reg_as postgres regupgrade -c "SELECT snowflake_registry.create_fleet('kept')" >/dev/null
  out=$(install_into regupgrade) || fail "install (d): installing again over the owner's install failed: $out"
  [ "$(reg_as postgres regupgrade -At -c "SELECT count(*) FROM snowflake_registry.fleets WHERE fleet = 'kept'")" = 1 ] ||
    fail "install (d): installing again lost the fleets"
  pass "install (d): installing again over the owner's own install works and keeps the data"

  # (e) Names compared as names: a tenant "admin" makes the schema (with a
  # trigger named like one of the script's) for an installer "Admin".
  psql_on reg -c 'CREATE ROLE admin LOGIN' -c 'CREATE ROLE "Admin" LOGIN SUPERUSER' \
    -c "CREATE DATABASE regcase" -c "GRANT CREATE ON DATABASE regcase TO admin" -c "CREATE DATABASE regcase2" >/dev/null
  reg_as admin regcase >/dev/null <<'SQL'
CREATE SCHEMA snowflake_registry;
CREATE TABLE snowflake_registry.node_ids (fleet text);
CREATE FUNCTION snowflake_registry.evil() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    ALTER ROLE admin SUPERUSER;
    RETURN NEW;
END
$$;
CREATE TRIGGER keep_reach BEFORE INSERT ON snowflake_registry.node_ids FOR EACH ROW EXECUTE FUNCTION snowflake_registry.evil();
SQL
  out=$(psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 -p "$(cluster_port reg)" -U Admin -d regcase -f "$REGISTRY_SQL" 2>&1) &&
    fail "install (e): the install by \"Admin\" into the schema of the tenant admin went through"
  [ "$(sqlstate_of "$out")" = 42501 ] && grep -qF 'belongs to role "admin"' <<<"$out" ||
    fail "install (e): not refused with 42501 naming the tenant admin: $out"
  psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port reg)" -U Admin -d regcase2 -f "$REGISTRY_SQL" -f "$REGISTRY_SQL" >/dev/null 2>&1 ||
    fail "install (e): the installer \"Admin\" could not install and upgrade its own registry"
  [ "$(superuser admin)" = f ] || fail "install (e): the tenant admin became superuser"
  pass "install (e): the installer \"Admin\" is refused the tenant admin's schema (42501), and installs and upgrades its own"

  # (f) An extension created in the schema; (g) the client role with LOGIN.
  reg_as postgres regupgrade -c "CREATE EXTENSION citext SCHEMA snowflake_registry" >/dev/null
  expect_install_refused regupgrade 'the extension citext' "install (f)"
  reg_as postgres regupgrade -c "DROP EXTENSION citext" >/dev/null
  psql_on reg -c "ALTER ROLE snowflake_registry_client LOGIN" >/dev/null
  expect_install_refused regupgrade 'the role snowflake_registry_client exists with rights' "install (g)"
  psql_on reg -c "ALTER ROLE snowflake_registry_client NOLOGIN" >/dev/null
  install_into regupgrade >/dev/null || fail "install (f, g): the install failed once the extension and LOGIN were gone"
  pass "install (f, g): an extension in the schema, and the client role able to log in, each stop the install (42501)"
}

# --- search_path: code planted on the caller's search_path
search_path_case() {
  local problems=() offenders
  # (a) The catalog.
  offenders=$(sql_value reg "SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text)
                             FROM pg_proc p WHERE p.pronamespace = 'snowflake_registry'::regnamespace
                               AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)")
  [ "$(sql_value reg "SELECT count(*) >= 10 FROM pg_proc WHERE pronamespace = 'snowflake_registry'::regnamespace")" = t ] ||
    fail "search_path (a): the schema snowflake_registry has fewer than 10 functions: the check would show nothing"
  if [ -n "$offenders" ]; then
    problems+=("search_path (a): functions of snowflake_registry without search_path = pg_catalog, pg_temp: $offenders")
  else
    pass "search_path (a): every function and procedure of snowflake_registry runs with search_path = pg_catalog, pg_temp"
  fi

  # (b) The attack: a role with CREATE on the registry's database.
  psql_on reg -c "CREATE ROLE tenant2 LOGIN" -c "GRANT CREATE ON DATABASE postgres TO tenant2" >/dev/null
  local public_granted=
  if [ "$(sql_value reg "SELECT has_schema_privilege('tenant2', 'public', 'CREATE')")" = f ]; then
    psql_on reg -c "GRANT CREATE ON SCHEMA public TO tenant2" >/dev/null
    public_granted=1
  fi
  local planted=""
  for fn in postgres.to_timestamp\(numeric\) postgres.to_timestamp\(bigint\) public.to_timestamp\(numeric\); do
    planted+="CREATE FUNCTION $fn RETURNS timestamptz LANGUAGE plpgsql AS \$\$
BEGIN
    ALTER ROLE tenant2 SUPERUSER;
    RETURN pg_catalog.to_timestamp(\$1::double precision);
END
\$\$;
"
  done
  reg_as tenant2 postgres >/dev/null <<SQL
CREATE SCHEMA postgres AUTHORIZATION tenant2;
GRANT USAGE ON SCHEMA postgres TO PUBLIC;
$planted
SQL
  # Armed: the admin's default search_path finds the planted function.
  [ "$(sql_value reg "SELECT pronamespace::regnamespace FROM pg_proc WHERE oid = 'to_timestamp(numeric)'::regprocedure")" = postgres ] ||
    fail "search_path (b): the admin's search_path ($(sql_value reg "SHOW search_path")) does not find the planted to_timestamp(numeric): the test shows nothing"

  node_init s
  cluster_start s
  make_table s
  wait_issuing s 20
  issue s 50 || fail "s could not issue"
  local port_s id node claim who out
  port_s=$(cluster_port s)
  id=$(awk -v p="$port_s" '$2 == p { id = $1 } END { print id }' "$ISSUED_BY")
  node=$(node_of s)
  claim=$(sql_value reg "SELECT claim_id FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node")
  who=$(sql_value reg "SELECT port FROM snowflake_registry.who_issued('default', $id)") ||
    fail "search_path (b): who_issued() failed"
  sql_value reg "SELECT count(*) FROM snowflake_registry.holders" >/dev/null || fail "search_path (b): the holders view failed"
  out=$(reg_as fleet_node postgres -v VERBOSITY=verbose -c "SET search_path = postgres, public;
    SELECT snowflake_registry.renew('default', $node, $claim + 1000000, 'wrong-token-000000000000', $(now_sql $EPOCH), 3000)" 2>&1) &&
    problems+=("search_path (b): the client role's renew() of a claim that is not its own was not refused")
  [ "$(sqlstate_of "$out")" = 55000 ] || problems+=("search_path (b): the renew() of a wrong claim was not refused with 55000: $out")
  if [ "$(superuser tenant2)" != f ]; then
    problems+=("search_path (b): the role that planted to_timestamp() on the admin's search_path became superuser")
  else
    pass "search_path (b): who_issued(), the holders view and renew() on a search_path with planted to_timestamp() ran none of it"
  fi
  [ "$who" = "$port_s" ] || problems+=("search_path (b): who_issued('default', $id) answered port '$who', not s's $port_s")

  psql_on reg -c "DROP SCHEMA postgres CASCADE" -c "DROP FUNCTION public.to_timestamp(numeric)" >/dev/null
  [ -z "$public_granted" ] || psql_on reg -c "REVOKE CREATE ON SCHEMA public FROM tenant2" >/dev/null
  cluster_stop s
  [ ${#problems[@]} -eq 0 ] || fail "$(printf '%s\n' "${problems[@]}")"
  pass "search_path (b): who_issued() names s (port $port_s) for ID $id"
}

# --- open_transactions: one member holds its transactions open
HOLD_S=4
# hold_open LABEL CALL: a session of the client role (application_name
# "member LABEL") runs BEGIN and CALL, then holds the transaction open for
# HOLD_S s (idle in it, aborted, if CALL failed), and commits; in the
# background (HOLD_PID), its output in $SF_WORK/hold.LABEL. Returns once
# CALL has run.
hold_open() {
  local label=$1 call=$2 seen=
  PGAPPNAME="member $label" reg_as fleet_node postgres -v ON_ERROR_STOP=0 -v VERBOSITY=verbose \
    >"$SF_WORK/hold.$label" 2>&1 <<SQL &
BEGIN;
$call;
\if :ERROR
\! sleep $HOLD_S
\else
SELECT pg_sleep($HOLD_S);
\endif
COMMIT;
SQL
  HOLD_PID=$!
  for _ in $(seq 1 30); do
    seen=$(sql_value reg "SELECT pid FROM pg_stat_activity WHERE application_name = 'member $label'
                          AND (query LIKE 'SELECT pg_sleep(%' OR state = 'idle in transaction (aborted)')")
    [ -z "$seen" ] || { HOLD_BACKEND=$seen; return 0; }
    sleep 0.1
  done
  fail "open_transactions: the member's call ($label) did not run within 3 s: $(cat "$SF_WORK/hold.$label")"
}
# start_c STEP: starts c during a hold; it must issue within 6 s of its
# start (noted in PROBLEMS otherwise). Sets C_MS (how long it took) and
# C_MESSAGES (what its registry_message said meanwhile).
start_c() {
  local t0 msg
  t0=$(now_ms)
  C_MESSAGES=
  cluster_start c
  make_table c
  until issue c 1 2>/dev/null; do
    msg=$(sql_value c "SELECT registry_message FROM snowflake_stats()" 2>/dev/null) || true
    case $C_MESSAGES in *"$msg"*) ;; *) C_MESSAGES="$C_MESSAGES$msg | " ;; esac
    if [ $(($(now_ms) - t0)) -gt 6000 ]; then
      PROBLEMS+=("$1: c did not issue within 6 s of its start: $(sql_value c "SELECT registry_state || ': ' || registry_message FROM snowflake_stats()")")
      C_MS=none
      return 0
    fi
    sleep 0.1
  done
  C_MS=$(($(now_ms) - t0))
}
# end_hold STEP EXPECT: waits for the hold to end; EXPECT: "ok" (CALL must
# have succeeded), a SQLSTATE (CALL must have been refused with it), or
# "any". Then c is stopped (it releases its node id).
end_hold() {
  local out
  wait "$HOLD_PID" || true
  out=$(cat "$SF_WORK/hold.$1")
  case $2 in
    any) ;;
    ok) ! grep -q 'ERROR:' <<<"$out" || fail "open_transactions: the member's own call ($1) failed, so the step shows nothing: $out" ;;
    *) [ "$(sqlstate_of "$out")" = "$2" ] || fail "open_transactions: the member's call ($1) was not refused with $2: $out" ;;
  esac
  cluster_stop c
  pass "open_transactions: $1 held open ${HOLD_S} s; c started meanwhile issued after ${C_MS} ms"
}
# step STEP CALL EXPECT: one held call, with c started during it.
step() {
  echo "$1" > "$SF_WORK/step"
  hold_open "$1" "$2"
  start_c "$1"
  end_hold "$1" "$3"
}
# member_claim TOKEN: a claim of the member's own, committed; prints
# "node_id claim_id".
member_claim() {
  registry_sql "SELECT node_id || ' ' || claim_id FROM snowflake_registry.claim('default', $epoch, $node_bits, $sequence_bits,
    NULL, NULL, '$1', 0, 'member', 1, '/member', $(now_sql "$epoch"), 3000)"
}

open_transactions_case() {
  PROBLEMS=()
  node_init a
  node_init b
  node_init c
  cluster_start a
  cluster_start b
  make_table a
  make_table b
  wait_issuing a 20
  wait_issuing b 20
  local node_a claim_a epoch node_bits sequence_bits since pids=() gap log_c log_size wrong=wrong-token-000000000000
  # (Where a's and b's logs stood before the holds.)
  local -A log_from=([a]=$(stat -c %s "$(cluster_log a)") [b]=$(stat -c %s "$(cluster_log b)"))
  node_a=$(node_of a)
  claim_a=$(sql_value reg "SELECT claim_id FROM snowflake_registry.node_ids WHERE fleet = 'default' AND node_id = $node_a")
  read -r epoch node_bits sequence_bits <<<"$(sql_value reg "SELECT epoch_unix_ms || ' ' || node_bits || ' ' || sequence_bits
                                                               FROM snowflake_registry.fleets WHERE fleet = 'default'")"
  rm -f "$SF_WORK/stop"
  echo setup > "$SF_WORK/step"
  since=$(now_ms)
  local name
  for name in a b; do
    (while [ ! -e "$SF_WORK/stop" ]; do timed_writer "$name" 1000; done) &
    pids+=($!)
  done
  # Every 0.2 s: the registry's backends waiting on a lock for more than
  # 1.5 s, those of the client role, and what each lock waiter runs.
  (
    while [ ! -e "$SF_WORK/stop" ]; do
      step_now=$(cat "$SF_WORK/step")
      sql_value reg "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock' AND clock_timestamp() - query_start > interval '1.5 s')
                            || ' ' || count(*) FILTER (WHERE usename = 'fleet_node') || ' $step_now '
                            || coalesce(string_agg(format('%s (%s, %s) waits on %s for %s: %s', pid, usename, application_name, wait_event,
                                 date_trunc('ms', clock_timestamp() - query_start), left(query, 70)), '; ')
                                 FILTER (WHERE wait_event_type = 'Lock'), '')
                     FROM pg_stat_activity" >> "$SF_WORK/samples" 2>&1 || true
      sleep 0.2
    done
  ) &
  pids+=($!)
  sleep 1

  # Another server's claim, with a wrong token.
  step release_wrong_token "SELECT snowflake_registry.release('default', $node_a, $claim_a, '$wrong', 0)" any
  step renew_wrong_token "SELECT snowflake_registry.renew('default', $node_a, $claim_a, '$wrong', $(now_sql "$epoch"), 3000)" 55000
  step resume_wrong_token "SELECT snowflake_registry.resume('default', $node_a, $claim_a, '$wrong',
    $(now_sql "$epoch") + 3000, $(now_sql "$epoch"), 3000)" 55000
  # Claims of its own, with their tokens.
  local own own2
  own=$(member_claim member-token-0000000001)
  step renew_own "SELECT snowflake_registry.renew('default', ${own% *}, ${own#* }, 'member-token-0000000001', $(now_sql "$epoch"), 3000)" ok
  own2=$(member_claim member-token-0000000002)
  step release_own "SELECT snowflake_registry.release('default', ${own2% *}, ${own2#* }, 'member-token-0000000002', $(now_sql "$epoch"))" ok
  log_c=$(cluster_log c)
  log_size=$(stat -c %s "$log_c")
  step claim_own "SELECT * FROM snowflake_registry.claim('default', $epoch, $node_bits, $sequence_bits, NULL, NULL,
    'member-token-0000000003', 0, 'member', 1, '/member', $(now_sql "$epoch"), 3000)" ok
  # c was told which registry process its claim waited on (in
  # registry_message while it waited, or in its log since its start).
  local new_log
  new_log=$(tail -c +$((log_size + 1)) "$log_c")
  if ! grep -q "wait on registry process $HOLD_BACKEND" <<<"$C_MESSAGES$new_log"; then
    PROBLEMS+=("claim_own: c was not told its claim waits on registry process $HOLD_BACKEND (the member's): registry_message: '${C_MESSAGES}'; log: $(awk '/WARNING/' <<<"$new_log" | tail -3)")
  fi

  touch "$SF_WORK/stop"
  wait "${pids[@]}"
  local waits most
  waits=$(awk '$1 > 0 && n++ < 5' "$SF_WORK/samples")
  [ -z "$waits" ] || PROBLEMS+=("registry backends waited on a lock for more than 1.5 s (count, client backends, step, waiters): $waits")
  most=$(awk '$2 > max { max = $2 } END { print max + 0 }' "$SF_WORK/samples")
  [ "$most" -le 8 ] || PROBLEMS+=("the client role had $most backends on the registry (at most 8): $(awk -v m="$most" '$2 == m && !n++' "$SF_WORK/samples")")
  local failed
  for name in a b; do
    gap=$(longest_gap "$name" "$since")
    echo "$name: the longest time without an ID: $gap ms"
    [ "$gap" -lt 1500 ] ||
      PROBLEMS+=("$name went $gap ms without an ID (its grant ran out): $(sort "$SF_WORK/w.$name.err" 2>/dev/null | uniq -c | sort -rn | sed -n 1,2p)")
    # Not one of its renewals failed (a wait for the member cut short by
    # the server's lock_timeout fails it, and the next one may come too
    # late for the grant).
    failed=$(tail -c +$((log_from[$name] + 1)) "$(cluster_log "$name")" | awk '/WARNING:  snowflake_id: registry / && n++ < 3')
    [ -z "$failed" ] || PROBLEMS+=("$name's calls to the registry failed while the member held its transactions: $failed")
  done
  [ ${#PROBLEMS[@]} -eq 0 ] || fail "open_transactions: $(printf '%s\n' "${PROBLEMS[@]}")"
  pass "open_transactions: no registry backend waited on a lock over 1.5 s (up to $most client backends); the longest gaps between IDs: a $(longest_gap a "$since") ms, b $(longest_gap b "$since") ms; c was told whom its claim waited on (process $HOLD_BACKEND)"
  cluster_stop a
  cluster_stop b
  no_duplicates "open_transactions"
}

# The cases, all or those named: registry_neighbours.sh [install
# search_path open_transactions].
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(install search_path open_transactions)
for c in "${cases[@]}"; do
  case $c in
    install | search_path | open_transactions) "${c}_case" ;;
    *) fail "unknown case '$c'" ;;
  esac
done
