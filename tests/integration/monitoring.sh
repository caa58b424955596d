#!/usr/bin/env bash
# Monitoring: Debian's prometheus-postgres-exporter with monitoring/queries.yaml
# against a real cluster, read over HTTP; the alerting rules of
# monitoring/alerts.yml checked and unit-tested with Debian's promtool.
#
#   1. The exporter, connected as a role without any privilege, serves every
#      metric of queries.yaml under /metrics, with this server's values.
#   2. The values move: IDs issued raise snowflake_id_ids_issued; the faked
#      clock stepped back 4 s raises backward_steps, the largest step and the
#      drift; 10 s back (past max_clock_drift) raises drift_errors; a lease
#      file that cannot be written raises lease_failures (and
#      snowflake_next() fails); a hold (the copy marker) sets issuing_held
#      with its reason as a label (of that metric only: the counters keep
#      their series).
#   3. Rules: `promtool check rules`; `promtool test rules` on
#      monitoring/alerts_test.yml (every alert fires on a sample series and
#      stays quiet on a healthy one); the same test on a copy of the rules
#      with a threshold changed must fail (the test can fail); every metric
#      the rules name is one the exporter serves; and the two alerts of a
#      clock step fire on the series the exporter really served before and
#      after the step.
#
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/monitoring.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
EXPORTER=${SF_EXPORTER:-/usr/bin/prometheus-postgres-exporter}
[ -x "$EXPORTER" ] || fail "$EXPORTER not found (apt-get install prometheus-postgres-exporter; scripts/setup.sh does)"
command -v promtool >/dev/null || fail "promtool not found (apt-get install prometheus; scripts/setup.sh does)"
MON=$(cd "$(dirname "$0")/../../monitoring" && pwd)

# --- 3a. the rules, without a server
promtool check rules "$MON/alerts.yml"
(cd "$MON" && promtool test rules alerts_test.yml) || fail "promtool test rules monitoring/alerts_test.yml failed"
pass "promtool: the rules are valid and every alert fires on its sample series, none on a healthy one"
mkdir -p "$SF_WORK/mutant"
sed 's/> 0.5 \* snowflake_id_max_clock_drift_seconds/> 0.9 * snowflake_id_max_clock_drift_seconds/' "$MON/alerts.yml" > "$SF_WORK/mutant/alerts.yml"
cmp -s "$MON/alerts.yml" "$SF_WORK/mutant/alerts.yml" && fail "could not change the drift threshold in a copy of the rules"
cp "$MON/alerts_test.yml" "$SF_WORK/mutant/"
if (cd "$SF_WORK/mutant" && promtool test rules alerts_test.yml >/dev/null 2>&1); then
  fail "promtool test rules passed with the drift alert's threshold changed: the tests cannot fail"
fi
pass "the rule tests fail when a threshold changes"

# --- 1. a cluster and the exporter
faketime_init
cluster_init mon "$(free_port)" "snowflake_id.node_id = 7"
cluster_start_faked mon
psql_on mon -c "CREATE EXTENSION snowflake_id" -c "CREATE ROLE exporter LOGIN"
port=$(free_port)
DATA_SOURCE_NAME="host=127.0.0.1 port=$(cluster_port mon) user=exporter dbname=postgres sslmode=disable" \
  "$EXPORTER" --web.listen-address="127.0.0.1:$port" --extend.query-path="$MON/queries.yaml" \
  --log.level=warn > "$SF_WORK/exporter.log" 2>&1 &
exporter_pid=$!
# (set +e: a failing command in the trap must not end it before the
# clusters are stopped.)
trap 'rc=$?; set +e; kill "$exporter_pid" 2>/dev/null; wait "$exporter_pid" 2>/dev/null; (exit $rc); _sf_cleanup' EXIT

# scrape: /metrics into $SF_WORK/metrics.
scrape() {
  curl -sf --max-time 10 "http://127.0.0.1:$port/metrics" > "$SF_WORK/metrics" ||
    { cat "$SF_WORK/exporter.log"; fail "GET /metrics failed"; }
}
# in_scrape FILE NAME: the lines of metric NAME (series, value) in FILE.
in_scrape() { awk -v n="$2" '$1 == n || index($1, n "{") == 1 { print $1, $2 }' "$1"; }
# metric NAME: its value in the last scrape (one series), else fail.
metric() {
  local v
  v=$(in_scrape "$SF_WORK/metrics" "$1" | cut -d' ' -f2)
  [ "$(printf '%s\n' "$v" | sed '/^$/d' | wc -l)" = 1 ] ||
    { grep snowflake_id_ "$SF_WORK/metrics" || true; tail -5 "$SF_WORK/exporter.log"; fail "/metrics has no single series $1 (values: $v)"; }
  echo "$v"
}
# series NAME: the series (name and labels) as the last scrape named it.
series() { in_scrape "$SF_WORK/metrics" "$1" | cut -d' ' -f1; }
# compare A OP B: A and B are numbers or sums of them (the exporter's
# values), compared as floats by awk.
compare() {
  printf '%s%s' "$1" "$3" | grep -E '^[-+0-9.e ]+$' >/dev/null || fail "compare: not numbers: $1, $3"
  awk "BEGIN { exit !(($1) $2 ($3)) }"
}

for _ in $(seq 1 50); do
  curl -sf --max-time 2 "http://127.0.0.1:$port/metrics" >/dev/null 2>&1 && break
  kill -0 "$exporter_pid" 2>/dev/null || { cat "$SF_WORK/exporter.log"; fail "the exporter exited"; }
  sleep 0.2
done
psql_on mon -c "SELECT snowflake_next()" >/dev/null
scrape
# Every GAUGE and COUNTER of queries.yaml: <query name>_<column>.
names=$(awk '/^[a-z_]+:$/ { ns = $1; sub(/:$/, "", ns) }
             /^    - [a-z_]+:$/ { col = $2; sub(/:$/, "", col) }
             /usage: "(GAUGE|COUNTER)"/ { print ns "_" col }' "$MON/queries.yaml")
count=0
for name in $names; do
  metric "$name" >/dev/null
  count=$((count + 1))
done
[ "$count" -ge 20 ] || fail "only $count metrics in queries.yaml"
[ "$(metric snowflake_id_node_id)" = 7 ] || fail "snowflake_id_node_id is $(metric snowflake_id_node_id), not 7"
[ "$(metric snowflake_id_issuing_held)" = 0 ] || fail "a fresh server is reported held"
[ "$(metric snowflake_id_registry_enabled)" = 0 ] || fail "a server without a registry is reported with one"
series snowflake_id_issuing_held | grep 'reason=""' >/dev/null || fail "the hold's reason label is not empty on a server that is not held"
compare "$(metric snowflake_id_max_clock_drift_seconds)" == 5 || fail "max_clock_drift_seconds is not 5"
compare "$(metric snowflake_id_lease_age_seconds)" '<' 60 || fail "lease_age_seconds is $(metric snowflake_id_lease_age_seconds)"
for name in $(grep -o 'snowflake_id_[a-z_]*' "$MON/alerts.yml" | sort -u); do
  [ -n "$(series "$name")" ] || fail "the rules name $name, which the exporter does not serve"
done
pass "the exporter serves all $count metrics of queries.yaml to a role without privileges, and every metric the rules name"

# --- 2. the values move
before=$(metric snowflake_id_ids_issued)
psql_on mon -c "SELECT count(snowflake_next()) FROM generate_series(1, 1000)" >/dev/null
scrape
after=$(metric snowflake_id_ids_issued)
compare "$after" '>=' "$before + 1000" || fail "ids_issued went from $before to $after after 1000 IDs"
pass "snowflake_id_ids_issued: $before -> $after after 1000 IDs"

steps0=$(metric snowflake_id_backward_steps)
cp "$SF_WORK/metrics" "$SF_WORK/metrics.before_step"
# (The step the generator sees is measured from its last clock reading, at
# most about a second before the step takes effect.)
psql_on mon -c "SELECT snowflake_next()" >/dev/null
clock_set -4
psql_on mon -c "SELECT count(snowflake_next()) FROM generate_series(1, 10)" >/dev/null
scrape
steps1=$(metric snowflake_id_backward_steps)
compare "$steps1" == "$steps0 + 1" || fail "backward_steps went from $steps0 to $steps1 after one step back"
compare "$(metric snowflake_id_largest_backward_step_seconds)" '>=' 2.5 ||
  fail "largest_backward_step_seconds is $(metric snowflake_id_largest_backward_step_seconds) after a 4 s step"
drift=$(metric snowflake_id_drift_seconds)
compare "$drift" '>' 2.5 || fail "drift_seconds is $drift after a 4 s step back"
pass "clock stepped back 4 s: backward_steps $steps0 -> $steps1, largest step $(metric snowflake_id_largest_backward_step_seconds) s, drift $drift s"

# 3e. The clock-step alerts on the series the exporter served: the values
# before the step for a minute, then after it for two.
{
  echo "rule_files: [$MON/alerts.yml]"
  echo "evaluation_interval: 15s"
  echo "tests:"
  echo "  - interval: 15s"
  echo "    input_series:"
  for name in snowflake_id_backward_steps snowflake_id_drift_seconds snowflake_id_max_clock_drift_seconds; do
    v0=$(in_scrape "$SF_WORK/metrics.before_step" "$name" | cut -d' ' -f2)
    v1=$(metric "$name")
    s=$(series "$name" | sed 's/}$/,job="pg",instance="mon"}/; s/^\([a-z_]*\)$/\1{job="pg",instance="mon"}/')
    printf "      - series: '%s'\n        values: '%s'\n" "$s" "$v0 $v0 $v0 $v0 $v1 $v1 $v1 $v1 $v1 $v1 $v1 $v1 $v1"
  done
  echo "    promql_expr_test:"
  echo "      - expr: 'count(ALERTS{alertname=\"SnowflakeClockSteppedBack\", alertstate=\"firing\"})'"
  echo "        eval_time: 2m"
  echo "        exp_samples: [{labels: '{}', value: 1}]"
  echo "      - expr: 'count(ALERTS{alertname=\"SnowflakeClockDriftHigh\", alertstate=\"firing\"})'"
  echo "        eval_time: 3m"
  echo "        exp_samples: [{labels: '{}', value: 1}]"
} > "$SF_WORK/served_test.yml"
promtool test rules "$SF_WORK/served_test.yml" || { cat "$SF_WORK/served_test.yml"; fail "the clock-step alerts did not fire on the served series"; }
pass "SnowflakeClockSteppedBack and SnowflakeClockDriftHigh fire on the series the exporter served"

errors0=$(metric snowflake_id_drift_errors)
clock_set -10
sql_error mon "SELECT snowflake_next()" >/dev/null || fail "snowflake_next() issued an ID 10 s behind the last one (max_clock_drift 5 s)"
scrape
errors1=$(metric snowflake_id_drift_errors)
compare "$errors1" '>' "$errors0" || fail "drift_errors did not move ($errors0 -> $errors1) after a refused call"
pass "a call refused for drift: drift_errors $errors0 -> $errors1"
clock_set +0

failures0=$(metric snowflake_id_lease_failures)
# The lease file is written through snowflake_id.lease.tmp: a directory of
# that name makes every write fail.
as_pg mkdir "$(cluster_dir mon)/snowflake_id.lease.tmp"
sleep 1   # past the lease (200 ms of ID time ahead of the last ID)
sql_error mon "SELECT snowflake_next()" >/dev/null || fail "snowflake_next() issued an ID although the lease could not be written"
scrape
failures1=$(metric snowflake_id_lease_failures)
compare "$failures1" '>' "$failures0" || fail "lease_failures did not move ($failures0 -> $failures1) after a failed lease write"
rmdir "$(cluster_dir mon)/snowflake_id.lease.tmp"
psql_on mon -c "SELECT snowflake_next()" >/dev/null
pass "an unwritable lease file: snowflake_next() fails and lease_failures $failures0 -> $failures1"

cluster_stop mon
echo "set by the monitoring test" | as_pg tee "$(cluster_dir mon)/snowflake_id.hold" >/dev/null
cluster_start_faked mon
sql_error mon "SELECT snowflake_next()" >/dev/null || fail "a held server issued an ID"
# (The exporter's connection broke with the restart: it reconnects at a
# later scrape.)
for _ in $(seq 1 20); do
  scrape
  [ -n "$(series snowflake_id_issuing_held)" ] && break
  sleep 0.5
done
[ "$(metric snowflake_id_issuing_held)" = 1 ] || fail "a held server is not reported held"
series snowflake_id_issuing_held | grep 'reason="copied"' >/dev/null ||
  fail "the hold's reason is not a label: $(series snowflake_id_issuing_held)"
pass "a held server: $(series snowflake_id_issuing_held) 1"

pass "monitoring"
