#!/usr/bin/env bash
# snowflake_convert_column must keep new IDs above the column's values
# whatever the clock does after the conversion. The column here holds IDs of
# this node id from the last few seconds (as a client-side generator or an
# import would leave them); its largest value lies behind the clock, so a
# check against the clock passes. Then the clock steps back by 2 s (within
# snowflake_id.max_clock_drift): a generator bounded only by the clock issues
# IDs of those milliseconds again, and the first insert fails on a duplicate
# key. The conversion raises the generator past the column's largest value
# and extends the lease over it, so inserts after the step, and after a
# restart with the clock still behind, are all above it.
#
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/convert_clock_step.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
faketime_init

cluster_init conv "$(free_port)" "snowflake_id.node_id = 3"
cluster_start_faked conv
psql_on conv -c "CREATE EXTENSION snowflake_id"
# The generator's last ID: now.
t0=$(sql_value conv "SELECT (extract(epoch FROM snowflake_timestamp(snowflake_next())) * 1000)::bigint")
sleep 3
t1=$(now_ms)
# IDs of node 3, sequence 0..3, for every millisecond from t0 + 100 ms to
# t1 - 100 ms (epoch 2025-01-01, 10 node bits, 12 sequence bits).
psql_on conv <<SQL
CREATE TABLE legacy (id bigserial PRIMARY KEY, v text);
INSERT INTO legacy (id, v)
SELECT ((ms - 1735689600000) << 22) | (3 << 12) | seq, 'legacy'
FROM generate_series($t0 + 100, $t1 - 100) AS ms, generate_series(0, 3) AS seq;
SQL
legacy_max=$(sql_value conv "SELECT max(id) FROM legacy")
echo "legacy rows: $(sql_value conv "SELECT count(*) FROM legacy"), largest $legacy_max"
psql_on conv -c "SELECT snowflake_convert_column('legacy', 'id', false)" >/dev/null
pass "legacy.id converted to DEFAULT snowflake_next()"

clock_set -2
server_ms=$(sql_value conv "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
[ "$server_ms" -le $((t1 - 100)) ] || fail "the faked clock ($server_ms) is not back inside the legacy rows' milliseconds"
echo "the server's clock stepped back to $server_ms, inside the legacy rows' milliseconds"
psql_on conv -c "INSERT INTO legacy (v) SELECT 'new' FROM generate_series(1, 20000)" ||
  fail "inserting after the clock stepped back failed (a duplicate key: the generator issued the column's IDs again)"
new_min=$(sql_value conv "SELECT min(id) FROM legacy WHERE v = 'new'")
[ "$new_min" -gt "$legacy_max" ] || fail "a new ID ($new_min) is not above the column's largest value ($legacy_max)"
pass "after the clock stepped back 2 s: 20000 new rows, all above the column's values"

cluster_stop conv immediate
cluster_start_faked conv
psql_on conv -c "INSERT INTO legacy (v) SELECT 'after restart' FROM generate_series(1, 20000)" ||
  fail "inserting after a crash restart with the clock behind failed"
pass "after a crash restart with the clock still behind: 20000 more rows, no duplicate"
