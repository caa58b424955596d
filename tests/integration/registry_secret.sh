#!/usr/bin/env bash
# The registry's connection string holds no secret, and ordinary users do
# not learn where the registry is (docs/registry-design.md, "Who sees the
# registry's connection string"):
#
# 1. A password in snowflake_id.registry stops the server at start, in
#    every form libpq reads: key = value (also with tabs, quoted, and
#    sslpassword), a URI's user part, a URI parameter (also
#    percent-encoded). The log says why (every member of
#    pg_read_all_settings, pg_monitor among them, reads the setting) and
#    where the password goes instead. (Before, the server started, and a
#    member of pg_monitor read the password with SHOW.)
# 2. A password file works: a registry role with a SCRAM password, the
#    password in a file named by passfile=, and the server claims a node id
#    and issues.
# 3. With the registry unreachable, a plain user's snowflake_next() error
#    and snowflake_stats() name neither the registry's host, port, database
#    nor role, nor libpq's words about them: the failure and its SQLSTATE
#    only. A member of pg_monitor (who can read the setting anyway) and a
#    superuser see where it is. (Before, every user saw them.)
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"

REG_PORT=$(cluster_port reg)

# --- 1. a password in the setting: the server does not start
node_init refused
refused_with() { # CONF_VALUE KEY: the server refuses to start, the log says why
  rm -f "$(cluster_log refused)"
  cluster_conf refused "snowflake_id.registry = '$1'"
  if cluster_start refused; then
    cluster_stop refused
    fail "the server started with a $2 in snowflake_id.registry ($1)"
  fi
  log_has refused "snowflake_id.registry holds a $2: every member of pg_read_all_settings" ||
    fail "no reason in the log for ($1): $(tail -5 "$(cluster_log refused)")"
  log_has refused "passfile=" || fail "the log does not say where the password goes ($1)"
  if grep -q "s3cret" "$(cluster_log refused)"; then
    fail "the log shows the password ($1)"
  fi
}
refused_with "host=127.0.0.1 port=$REG_PORT dbname=postgres user=fleet_node password=s3cret" password
refused_with "host=127.0.0.1 port=$REG_PORT\tpassword\t=\ts3cret" password
refused_with "host=127.0.0.1 password = ''s3cret and more'' dbname=postgres" password
refused_with "host=127.0.0.1 port=$REG_PORT sslpassword=s3cret" sslpassword
refused_with "postgresql://fleet_node:s3cret@127.0.0.1:$REG_PORT/postgres" password
refused_with "postgresql://127.0.0.1:$REG_PORT/postgres?sslmode=disable&sslpassword=s3cret" sslpassword
refused_with "postgresql://127.0.0.1:$REG_PORT/postgres?pass%77ord=s3cret" password
pass "a password in snowflake_id.registry stops the server in all 7 forms, and the log says where it goes"

# --- 2. the password in a password file
passfile=$(password_role fleet_pw scram-sha-256)
if psql -X -At -h 127.0.0.1 -p "$REG_PORT" -U fleet_pw -d postgres -w -c "SELECT 1" >/dev/null 2>&1; then
  fail "the registry let fleet_pw in without its password (the test proves nothing)"
fi
node_init withfile "snowflake_id.registry = 'host=127.0.0.1 port=$REG_PORT dbname=postgres user=fleet_pw passfile=$passfile'" "$ALLOW_UNVERIFIED"
cluster_start withfile || fail "the server with a passfile did not start: $(tail -5 "$(cluster_log withfile)")"
make_table withfile
wait_issuing withfile 20
[ "$(sql_value withfile "SELECT registry_state FROM snowflake_stats()")" = held ] ||
  fail "the claim through the password file is not held"
pass "the password in a file named by passfile=: claimed node $(node_of withfile) and issued"
cluster_stop withfile

# --- 3. who sees where the registry is
gone_port=$(free_port)
node_init hidden "snowflake_id.registry = 'host=127.0.0.1 port=$gone_port dbname=regsecretdb user=regsecretrole'"
cluster_start hidden
psql_on hidden -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE ROLE plain LOGIN" -c "CREATE ROLE watcher LOGIN IN ROLE pg_monitor" >/dev/null
for _ in $(seq 1 100); do
  [ "$(sql_value hidden "SELECT registry_state FROM snowflake_stats()")" = failed ] && break
  sleep 0.1
done
[ "$(sql_value hidden "SELECT registry_state FROM snowflake_stats()")" = failed ] ||
  fail "the claim against a registry that is not there did not fail"
as_role() { # ROLE SQL: output and errors, verbose
  psql -X -q -v VERBOSITY=verbose -h 127.0.0.1 -p "$(cluster_port hidden)" -U "$1" -d postgres -At -c "$2" 2>&1 || true
}
names_registry() { # TEXT: mentions the registry's port, database or role
  grep -Eq "$gone_port|regsecretdb|regsecretrole|127\.0\.0\.1" <<< "$1"
}
plain_error=$(as_role plain "SELECT snowflake_next()")
plain_stats=$(as_role plain "SELECT held_message, registry_message FROM snowflake_stats()")
[ "$(sqlstate_of "$plain_error")" = 08001 ] || fail "a plain user's error is not 08001: $plain_error"
grep -q "could not reach the registry" <<< "$plain_error" ||
  fail "a plain user is not told that the registry cannot be reached: $plain_error"
if names_registry "$plain_error"; then fail "a plain user's error says where the registry is: $plain_error"; fi
if names_registry "$plain_stats"; then fail "a plain user's snowflake_stats() says where the registry is: $plain_stats"; fi
grep -q "could not reach the registry" <<< "$plain_stats" ||
  fail "a plain user's snowflake_stats() does not say the registry failed: $plain_stats"
for role in watcher postgres; do
  seen=$(as_role "$role" "SELECT snowflake_next()")
  names_registry "$seen" || fail "$role does not see where the registry is: $seen"
  seen=$(as_role "$role" "SELECT registry_message FROM snowflake_stats()")
  grep -q "$gone_port" <<< "$seen" || fail "$role does not see libpq's words in snowflake_stats(): $seen"
done
[ "$(as_role watcher "SHOW snowflake_id.registry")" = "host=127.0.0.1 port=$gone_port dbname=regsecretdb user=regsecretrole" ] ||
  fail "a member of pg_monitor cannot read the setting (the premise of part 1): $(as_role watcher "SHOW snowflake_id.registry")"
pass "a plain user sees that the registry failed (08001), not where it is; pg_monitor's members and superusers see where"
