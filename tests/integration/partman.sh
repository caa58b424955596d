#!/usr/bin/env bash
# Time partitions on the ID itself, with pg_partman (the recipes shown in
# docs/partitioning.md: examples/partman/events_by_day.sql for pg_partman 5,
# events_by_day_partman4.sql for 4.7; the one for the pg_partman installed
# runs), on a server whose clock libfaketime moves forward a day at a time:
#   - create_parent makes today's partition and 3 ahead, each exactly one
#     UTC day of IDs (bounds at multiples of snowflake_id_span('1 day'),
#     starting at midnight UTC);
#   - 10 days of inserts (200 rows a day), maintenance after each: every row
#     lands in the partition of its day, never in the default partition,
#     and the partitions stay 3 days ahead of the newest ID;
#   - retention (7 days of IDs) drops the partitions of days 0 and 1, keeps
#     days 2 to 9;
#   - a query for one day's rows, bounded with snowflake_from_timestamp,
#     reads one partition: pruned at plan time with the IMMUTABLE form, at
#     executor start with the STABLE one.
#
# Needs pg_partman: Debian's postgresql-15-partman (4.7) in 15, pg_partman
# 5.2.4 in 17 (scripts/setup.sh installs both), and libfaketime. The suite
# runs it on both. Run from the repository root, with the extension installed:
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/partman.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
control="$("$PG_BIN/pg_config" --sharedir)/extension/pg_partman.control"
[ -f "$control" ] ||
  fail "pg_partman is not installed into $PG_BIN/.. (scripts/setup.sh installs it into 15 and 17)"
partman_version=$(sed -nE "s/^default_version = '([0-9.]+)'.*/\1/p" "$control")
case $partman_version in
  4.*) RECIPE=examples/partman/events_by_day_partman4.sql ;;
  5.*) RECIPE=examples/partman/events_by_day.sql ;;
  *) fail "pg_partman $partman_version: no recipe for it" ;;
esac
doc_shows_file docs/partitioning.md "$RECIPE" "$RECIPE" || fail "docs/partitioning.md does not show $RECIPE as it is"
pass "docs/partitioning.md shows $RECIPE as it is (pg_partman $partman_version)"

faketime_init
cluster_init pm "$(free_port)" "snowflake_id.node_id = 3"
cluster_start_faked pm || fail "the server did not start"
psql_on pm -c "CREATE EXTENSION snowflake_id"
# In a session in Kolkata (UTC+5:30): the recipe must not depend on the
# session's TimeZone (the checks below are in UTC days).
PGTZ=Asia/Kolkata psql_on pm -o /dev/null -f "$RECIPE"
span=$(sql_value pm "SELECT snowflake_id_span('1 day')")
[ "$span" = $((86400000 << 22)) ] || fail "snowflake_id_span('1 day') is $span"

# day_parts: the day partitions (events_p<first ID>), with their first ID.
psql_on pm -c "CREATE VIEW day_parts AS
  SELECT c.oid, c.relname,
         (CASE WHEN c.relname ~ '^events_p[0-9]+\$' THEN substr(c.relname, 9) END)::bigint AS start
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
  WHERE i.inhparent = 'events'::regclass AND c.relkind = 'r' AND c.relname ~ '^events_p[0-9]+\$'"
# partitions: lines "start|first ID's time" of the day partitions, by start.
partitions() {
  sql_value pm "SELECT start, snowflake_timestamp(start) FROM day_parts ORDER BY 1"
}
# Every day partition: named by its first ID, a multiple of the span,
# bounded by exactly one span, starting at midnight UTC.
check_partition_bounds() {
  local bad
  bad=$(sql_value pm "SELECT count(*) FROM day_parts
                      WHERE start % $span <> 0
                         OR pg_get_expr((SELECT relpartbound FROM pg_class WHERE oid = day_parts.oid), oid)
                            <> format('FOR VALUES FROM (''%s'') TO (''%s'')', start, start + $span)
                         OR snowflake_timestamp(start) AT TIME ZONE 'UTC'
                            <> date_trunc('day', snowflake_timestamp(start) AT TIME ZONE 'UTC')")
  [ "$bad" = 0 ] || { partitions; fail "$bad partitions are not one UTC day of IDs"; }
}

today=$(sql_value pm "SELECT snowflake_from_timestamp(now()) / $span * $span")
[ "$(partitions | cut -d'|' -f1 | paste -sd' ')" = "$today $((today + span)) $((today + 2 * span)) $((today + 3 * span))" ] ||
  { partitions; fail "create_parent did not make today's partition and 3 ahead"; }
check_partition_bounds
[ "$(sql_value pm "SELECT count(*) FROM pg_class WHERE relname = 'events_default'")" = 1 ] || fail "no default partition"
pass "create_parent: today's partition and 3 ahead, each one UTC day of IDs, and a default partition"

for d in $(seq 0 9); do
  [ "$d" -eq 0 ] || clock_set "+$((d * 86400))"
  psql_on pm -c "INSERT INTO events (payload) SELECT 'day$d' FROM generate_series(1, 200)" \
    -c "SELECT partman.run_maintenance('public.events')" >/dev/null
  [ "$(sql_value pm "SELECT count(*) FROM events_default")" = 0 ] ||
    fail "day $d: rows landed in the default partition"
  newest=$(sql_value pm "SELECT max(id) / $span * $span FROM events")
  [ "$(partitions | tail -1 | cut -d'|' -f1)" -ge $((newest + 3 * span)) ] ||
    { partitions; fail "day $d: maintenance did not keep 3 days of partitions ahead"; }
done
check_partition_bounds
misplaced=$(sql_value pm "SELECT count(*) FROM events e JOIN pg_class c ON c.oid = e.tableoid
                          WHERE c.relname <> 'events_p' || (e.id / $span * $span)")
[ "$misplaced" = 0 ] || fail "$misplaced rows are not in the partition of their ID's day"
[ "$(sql_value pm "SELECT count(DISTINCT snowflake_timestamp(id)::date) FROM events WHERE payload = 'day9'")" = 1 ] ||
  fail "the rows of one faked day carry more than one day in their IDs"
pass "10 faked days, maintenance each day: every row in its day's partition, none in the default, 3 days ahead"

[ "$(sql_value pm "SELECT string_agg(DISTINCT payload, ' ' ORDER BY payload) FROM events")" = "day2 day3 day4 day5 day6 day7 day8 day9" ] ||
  fail "retention: expected the rows of days 2 to 9, got $(sql_value pm "SELECT string_agg(DISTINCT payload, ' ' ORDER BY payload) FROM events")"
oldest=$(partitions | awk -F'|' 'NR == 1 { print $1 }')
[ "$oldest" -eq $((today + 2 * span)) ] || { partitions; fail "retention: the oldest partition is not day 2's"; }
pass "retention of 7 days of IDs: the partitions of days 0 and 1 are dropped, days 2 to 9 kept"

# One day's rows read one partition.
day5=$(sql_value pm "SELECT snowflake_timestamp($today + 5 * $span)")
day6=$(sql_value pm "SELECT snowflake_timestamp($today + 6 * $span)")
plan=$(sql_value pm "EXPLAIN (COSTS OFF) SELECT count(*) FROM events
  WHERE id >= snowflake_from_timestamp('$day5', '2025-01-01', 10, 12)
    AND id < snowflake_from_timestamp('$day6', '2025-01-01', 10, 12)")
parts_read() { echo "$plan" | grep -oE 'events_p[0-9]+' | sort -u | wc -l; }
[ "$(parts_read)" = 1 ] && ! grep -q "Subplans Removed" <<<"$plan" ||
  { echo "$plan"; fail "the IMMUTABLE bounds do not prune to one partition at plan time"; }
grep -q "on events_p$((today + 5 * span))" <<<"$plan" || { echo "$plan"; fail "the plan reads another day's partition"; }
plan=$(sql_value pm "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM events
  WHERE id >= snowflake_from_timestamp('$day5') AND id < snowflake_from_timestamp(timestamptz '$day5' + interval '1 day')")
[ "$(parts_read)" = 1 ] || { echo "$plan"; fail "the STABLE bounds do not prune to one partition at executor start"; }
grep -q "Subplans Removed" <<<"$plan" || { echo "$plan"; fail "no run-time pruning reported for the STABLE bounds"; }
[ "$(sql_value pm "SELECT count(*) FROM events WHERE id >= snowflake_from_timestamp('$day5') AND id < snowflake_from_timestamp(timestamptz '$day5' + interval '1 day')")" = 200 ] ||
  fail "day 5's query does not return its 200 rows"
pass "one day's rows: one partition read (IMMUTABLE bounds: pruned at plan time; STABLE: at executor start)"
pass "partman"
