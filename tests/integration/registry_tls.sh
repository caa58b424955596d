#!/usr/bin/env bash
# The registry connection's trust (docs/registry-design.md, "What the servers
# trust"): a registry with TLS (a certificate for "localhost" from a test
# authority made here with openssl), and servers of the fleet that reach it
# in each way:
#   - sslmode=verify-full with the authority: TLS (pg_stat_ssl on the
#     registry), registry_connection 'verified', no WARNING, IDs issued;
#   - a Unix-domain socket: 'socket', no WARNING;
#   - sslmode=require (TLS, nothing checked) and sslmode=disable, with
#     snowflake_id.registry_allow_unverified = on: each 'unverified', with
#     one WARNING (08000) in the log that names the fix, and IDs issued (the
#     answers are still checked against the rules);
#   - the same without that setting (off, the default), and the connection
#     string docs/registry.md once showed (host, port, dbname, user: libpq's
#     sslmode=prefer): the connection is closed unused, no claim reaches the
#     registry, snowflake_next() fails with 08001 naming the fix, and once
#     the setting is turned on (a reload) the server claims and issues
#     (before: every one of them issued from whatever answered);
#   - sslmode=verify-full against the wrong host name, and with another
#     authority: no connection, so no node id: snowflake_next() fails with
#     08001 and libpq's reason.
# No ID twice. (The set-up is the one docs/registry.md shows.)
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/registry_tls.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib_registry.sh
. "$(dirname "$0")/lib_registry.sh"
command -v openssl >/dev/null || fail "openssl not found (apt-get install openssl)"

# --- a test authority, the registry's certificate, and another authority
TLS="$SF_WORK/tls"
mkdir -p "$TLS"
(
  cd "$TLS"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=snowflake test CA" \
    -keyout ca.key -out ca.crt 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=another CA" \
    -keyout other.key -out other.crt 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
  printf 'subjectAltName = DNS:localhost\n' > san.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile san.ext -out server.crt 2>/dev/null
) || fail "openssl could not make the test certificates"
chown -R postgres:postgres "$TLS"
chmod 600 "$TLS/server.key"
cluster_conf reg "ssl = on" "ssl_cert_file = '$TLS/server.crt'" "ssl_key_file = '$TLS/server.key'" "log_connections = on"
psql_on reg -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 50); do [ "$(sql_value reg "SHOW ssl")" = on ] && break; sleep 0.1; done
[ "$(sql_value reg "SHOW ssl")" = on ] || fail "the registry did not turn TLS on: $(tail -3 "$(cluster_log reg)")"

PORT=$(cluster_port reg)
BASE="port=$PORT dbname=postgres user=fleet_node"
# tls_node NAME CONNINFO [CONF...]: a server of the fleet reaching the
# registry so.
tls_node() {
  local name=$1 conninfo=$2; shift 2
  REGISTRY="$conninfo" node_init "$name" "$@"; cluster_start "$name"; make_table "$name"
}
ALLOW="snowflake_id.registry_allow_unverified = on"
connection_of() { sql_value "$1" "SELECT registry_connection FROM snowflake_stats()"; }
# wait_claim_failed NAME: until NAME's claim has failed once (15 s at most).
wait_claim_failed() {
  for _ in $(seq 1 150); do
    [ "$(sql_value "$1" "SELECT registry_state FROM snowflake_stats()")" = failed ] && return 0
    sleep 0.1
  done
}
warned() { log_has "$1" "connection to the registry .* is not verified"; }

# (Each with its own application_name, to find its connection on the
# registry.)
tls_node vf "host=localhost hostaddr=127.0.0.1 $BASE sslmode=verify-full sslrootcert=$TLS/ca.crt application_name=sf_vf"
tls_node sock "host=$(cluster_dir reg).sock $BASE application_name=sf_sock"
tls_node req "host=127.0.0.1 $BASE sslmode=require application_name=sf_req" "$ALLOW"
tls_node plain "host=127.0.0.1 $BASE sslmode=disable application_name=sf_plain" "$ALLOW"
# A socket directory named by host=, the connection sent over TCP by
# hostaddr=: TCP, whatever host= says.
tls_node sockname "host=$(cluster_dir reg).sock hostaddr=127.0.0.1 $BASE sslmode=disable application_name=sf_sockname" "$ALLOW"
for s in vf sock req plain sockname; do wait_issuing "$s" 15; done
# ssl_of NAME: whether NAME's registry connection uses TLS, as the registry sees it.
ssl_of() {
  sql_value reg "SELECT string_agg(DISTINCT s.ssl::text, ',') FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                 WHERE a.application_name = 'sf_$1'"
}

[ "$(connection_of vf)" = verified ] || fail "verify-full: registry_connection is $(connection_of vf)"
for s in vf req; do [ "$(ssl_of "$s")" = true ] || fail "$s's registry connection does not use TLS: $(ssl_of "$s")"; done
for s in plain sockname; do [ "$(ssl_of "$s")" = false ] || fail "$s's registry connection: ssl $(ssl_of "$s")"; done
# (sock came through the socket, sockname over TCP: as the registry sees them.)
over_tcp() { sql_value reg "SELECT bool_and(client_addr IS NOT NULL) FROM pg_stat_activity WHERE application_name = 'sf_$1'"; }
{ [ "$(over_tcp sock)" = f ] && [ "$(over_tcp sockname)" = t ]; } ||
  fail "sock's connection over TCP: $(over_tcp sock); sockname's: $(over_tcp sockname)"
[ "$(connection_of sock)" = socket ] || fail "a Unix-domain socket: registry_connection is $(connection_of sock)"
for s in vf sock; do
  ! warned "$s" || fail "$s warned of an unverified connection: $(grep 'not verified' "$(cluster_log "$s")" | head -1)"
done
for s in req plain sockname; do
  [ "$(connection_of "$s")" = unverified ] || fail "$s: registry_connection is $(connection_of "$s"), not unverified"
  warned "$s" || fail "$s did not warn that its registry connection is not verified"
  grep -A2 "is not verified" "$(cluster_log "$s")" | grep "HINT: .*sslmode=verify-full" >/dev/null ||
    fail "$s's WARNING has no hint naming sslmode=verify-full: $(grep -A2 'is not verified' "$(cluster_log "$s")")"
  [ "$(grep -c "is not verified" "$(cluster_log "$s")")" = 1 ] ||
    fail "$s warned $(grep -c "is not verified" "$(cluster_log "$s")") times, not once"
done
pass "verify-full: TLS, verified, no warning; a socket: no warning; sslmode=require and disable, and a socket directory sent over TCP by hostaddr, allowed: unverified, one WARNING with the fix; all five issue"

# --- fail closed: without registry_allow_unverified, an unverified
# connection is closed unused (the documented string without sslmode: an
# impostor on the address would be believed)
# (Their role logs in with a password, in clear text as an impostor would
# ask for it, from a password file: the connection must be given up before
# the password goes out, so the registry never logs them in.)
passfile=$(password_role fleet_pw password)
PW="port=$PORT dbname=postgres user=fleet_pw passfile=$passfile"
tls_node dflt "host=127.0.0.1 $PW application_name=sf_dflt"
tls_node reqoff "host=127.0.0.1 $PW sslmode=require application_name=sf_reqoff"
for s in dflt reqoff; do
  wait_claim_failed "$s"
  out=$(sql_error "$s" "SELECT snowflake_next()") || fail "$s issued an ID over an unverified registry connection"
  [ "$(sqlstate_of "$out")" = 08001 ] || fail "$s: not 08001: $out"
  grep -q "not verified" <<<"$out" && grep -q "registry_allow_unverified" <<<"$out" ||
    fail "$s: the error does not say the connection is not verified and how to allow it: $out"
  [ "$(connection_of "$s")" = unverified ] || fail "$s: registry_connection is $(connection_of "$s"), not unverified"
  [ "$(sql_value reg "SELECT count(*) FROM snowflake_registry.grants WHERE data_directory = '$(cluster_dir "$s")'")" = 0 ] ||
    fail "$s's claim reached the registry over a connection it did not verify"
  # Given up before it logged in: no password would have gone out.
  ! grep -q "connection authorized: .*application_name=sf_$s" "$(cluster_log reg)" ||
    fail "$s logged in to the registry over a connection it did not verify"
done
psql_on dflt -c "ALTER SYSTEM SET snowflake_id.registry_allow_unverified = on" -c "SELECT pg_reload_conf()" >/dev/null
wait_issuing dflt 15
pass "without registry_allow_unverified, the documented string and sslmode=require are given up before logging in: no claim, 08001 naming the fix; allowed by a reload, the server claims and issues"

# --- the setting turned off again: the connection it allowed is closed
# before the next call (it was kept, and renewals went on over it)
[ "$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sf_req'")" = 1 ] ||
  fail "req has no session on the registry: the case shows nothing"
psql_on req -c "ALTER SYSTEM SET snowflake_id.registry_allow_unverified = off" -c "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 100); do
  [ "$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sf_req'")" = 0 ] && break
  sleep 0.1
done
[ "$(sql_value reg "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sf_req'")" = 0 ] ||
  fail "req kept its unverified registry connection after registry_allow_unverified was turned off"
for _ in $(seq 1 100); do
  grep -q "registry_allow_unverified" <<<"$(sql_value req "SELECT registry_message FROM snowflake_stats()")" && break
  sleep 0.1
done
grep -q "registry_allow_unverified" <<<"$(sql_value req "SELECT registry_message FROM snowflake_stats()")" ||
  fail "req's registry_message does not say why: $(sql_value req "SELECT registry_message FROM snowflake_stats()")"
pass "registry_allow_unverified turned off by a reload: the unverified connection is closed before the next renewal, which fails naming the setting"

# --- verify-full refuses a registry it cannot verify: no node id, no ID
tls_node wrongname "host=127.0.0.1 $BASE sslmode=verify-full sslrootcert=$TLS/ca.crt"
tls_node otherca "host=localhost hostaddr=127.0.0.1 $BASE sslmode=verify-full sslrootcert=$TLS/other.crt"
for s in wrongname otherca; do wait_claim_failed "$s"; done
for s in wrongname otherca; do
  out=$(sql_error "$s" "SELECT snowflake_next()") || fail "$s issued an ID from a registry it could not verify"
  [ "$(sqlstate_of "$out")" = 08001 ] || fail "$s: not 08001: $out"
  grep -Eqi "certificate|host name" <<<"$out" || fail "$s: the error does not give libpq's reason: $out"
  [ -z "$(connection_of "$s")" ] || fail "$s shows a registry connection: $(connection_of "$s")"
done
pass "verify-full with the wrong host name or another authority: no connection, no node id, 08001 with libpq's reason"
no_duplicates "the registry over TLS"
