#!/usr/bin/env bash
# The lease file is never silently ignored, and a throttled call can be
# cancelled.
#
# 1. A fresh cluster has no lease file and issues IDs; the file then records
#    the configuration and a lease_until at or after the last ID.
# 2. A corrupt lease file: the server starts (decoding works) but
#    snowflake_next() fails with SQLSTATE XX001 and a message naming the
#    file; the log has a WARNING at start.
# 3. An unreadable lease file (mode 000): SQLSTATE 58030, naming the file.
# 4. The file removed: IDs are issued again (the operator's documented
#    way out once the clock is past every issued ID), and they are greater
#    than those issued before because the clock is.
# 5. A burst throttled by a tight max_clock_drift and few sequence bits is
#    ended by statement_timeout long before it could finish: the wait is
#    interruptible.
#
# Run alone: bash tests/integration/lease_file.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension

cluster_init lease "$(free_port)" "snowflake_id.node_id = 9"
cluster_start lease
data=$(cluster_dir lease)
lease="$data/snowflake_id.lease"

# --- 1. fresh cluster -----------------------------------------------------------
as_pg test ! -e "$lease" || fail "a new cluster already has a lease file"
psql_on lease -c "CREATE EXTENSION snowflake_id"
first_max=$(sql_value lease "SELECT max(snowflake_next()) FROM generate_series(1, 1000)")
as_pg test -e "$lease" || fail "no lease file after issuing IDs"
grep -q "^node_id = 9$" "$lease" || fail "the lease does not record node_id 9"
grep -q "^node_bits = 10$" "$lease" || fail "the lease does not record node_bits"
lease_ms=$(sed -n 's/^lease_until_unix_ms = //p' "$lease")
last_ms=$(sql_value lease "SELECT (extract(epoch FROM snowflake_timestamp($first_max)) * 1000)::bigint")
[ "$lease_ms" -ge "$last_ms" ] || fail "lease_until ($lease_ms) is before the last ID ($last_ms)"
pass "fresh cluster: lease written, lease_until $lease_ms >= last ID time $last_ms"

# --- 2. corrupt -------------------------------------------------------------------
cluster_stop lease
sed -i 's/^node_id = 9$/node_id = 8/' "$lease"
cluster_start lease
out=$(sql_error lease "SELECT snowflake_next()") || fail "snowflake_next() worked with a corrupt lease file"
echo "$out" | sed 's/^/  /'
[ "$(sqlstate_of "$out")" = XX001 ] || fail "expected SQLSTATE XX001 for a corrupt lease, got $(sqlstate_of "$out")"
grep -q "snowflake_id.lease" <<<"$out" || fail "the error does not name the lease file"
grep -q "^HINT: " <<<"$out" || fail "no hint"
# The hint gives the time the damaged file still reads, in UTC, and never
# invites deleting the file without it.
lease_text=$(python3 -c "import datetime,sys; t=datetime.datetime.fromtimestamp($lease_ms/1000, datetime.timezone.utc); print(t.strftime('%Y-%m-%d %H:%M:%S.') + '%03d' % ($lease_ms % 1000) + ' UTC')")
grep -q "^HINT: .*IDs were issued up to $lease_text: remove the file (then restart) only when the system clock is past that time" <<<"$out" ||
  fail "the hint does not give the lease's time ($lease_text)"
log_has lease "WARNING: .*snowflake_id.lease.*corrupt" || fail "no WARNING about the corrupt lease in the log"
[ "$(sql_value lease "SELECT snowflake_node($first_max)")" = 9 ] || fail "decoding does not work while the lease is corrupt"
pass "corrupt lease: XX001 naming the file, decoding still works"

# --- 3. unreadable ----------------------------------------------------------------
cluster_stop lease
sed -i 's/^node_id = 8$/node_id = 9/' "$lease"
chmod 000 "$lease"
cluster_start lease
out=$(sql_error lease "SELECT snowflake_next()") || fail "snowflake_next() worked with an unreadable lease file"
echo "$out" | sed 's/^/  /'
[ "$(sqlstate_of "$out")" = 58030 ] || fail "expected SQLSTATE 58030 for an unreadable lease, got $(sqlstate_of "$out")"
grep -q "could not read lease file" <<<"$out" || fail "the error does not say the file cannot be read"
pass "unreadable lease: 58030 naming the file"

# --- 4. removed -------------------------------------------------------------------
cluster_stop lease
rm -f "$lease"
cluster_start lease
after=$(sql_value lease "SELECT snowflake_next()")
[ "$after" -gt "$first_max" ] || fail "after removing the lease, $after is not greater than $first_max"
pass "lease removed: IDs issued again, $after > $first_max"

# --- 5. a throttled call is interruptible ------------------------------------------
cluster_stop lease
cluster_conf lease "snowflake_id.sequence_bits = 9" "snowflake_id.max_clock_drift = 10"
rm -f "$lease"   # the layout changed; this is a new generator
cluster_start lease
start=$(now_ms)
out=$(sql_error lease "SET statement_timeout = '1500ms'; SELECT count(snowflake_next()) FROM generate_series(1, 5000000)") ||
  fail "5,000,000 IDs at 512,000/s finished within a 1.5 s statement_timeout"
took=$(( $(now_ms) - start ))
echo "$out" | sed 's/^/  /'
[ "$(sqlstate_of "$out")" = 57014 ] || fail "expected 57014 (statement timeout), got $(sqlstate_of "$out")"
# The statement needs about 9.8 s at the layout's rate; cancelled, it ends
# within a fraction of that. (A bound, not a benchmark.)
[ "$took" -lt 6000 ] || fail "the cancelled statement took ${took} ms"
waits=$(sql_value lease "SELECT waits FROM snowflake_stats()")
[ "$waits" -gt 0 ] || fail "the statement was never throttled (waits = 0)"
pass "throttled burst cancelled by statement_timeout after ${took} ms (waits=$waits)"
