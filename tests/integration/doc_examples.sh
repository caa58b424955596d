#!/usr/bin/env bash
# The SQL the docs show, run as a reader would run it, in sessions whose
# TimeZone is not UTC, with its results checked.
#
# A ```sql block of README.md or docs/*.md that follows a line
#   <!-- example: NAME -->
# is an example: it runs in a fresh database, then tests/doc_examples/NAME.sql
# checks what it did. A check file may start with a part that runs before
# the block (the tables a query needs), up to a line "-- the example runs
# here"; after it, every row it returns must be (label, true). Each example
# runs in two sessions: America/New_York (UTC-5 or -4) and Asia/Kolkata
# (UTC+5:30, a half-hour offset), where a literal read in the session's
# zone instead of in UTC moves every time it makes (the epoch written as
# '2025-01-01' in a generated column was such a trap). An example without
# a check, or a check without its example, fails the test.
#
#   flock /tmp/snowflake_id.pg.lock bash tests/integration/doc_examples.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

require_installed_extension
CHECKS=tests/doc_examples
ZONES=(America/New_York Asia/Kolkata)

# The examples, as files NAME.example.sql in $SF_WORK/examples, from the
# pages; every problem of the marking on stderr, exit 1.
mkdir -p "$SF_WORK/examples"
python3 - "$SF_WORK/examples" "$CHECKS" README.md docs/*.md <<'PY'
import os, re, sys
out, checks, pages = sys.argv[1], sys.argv[2], sys.argv[3:]
marker = re.compile(r"^<!-- example: ([a-z0-9_]+) -->\s*$")
found, problems = {}, []
for page in pages:
    lines = open(page).read().split("\n")
    for i, line in enumerate(lines):
        m = marker.match(line)
        if not m:
            continue
        name = m.group(1)
        if i + 1 >= len(lines) or lines[i + 1] != "```sql":
            problems.append(f"{page}:{i + 1}: example {name} is not followed by a ```sql block")
            continue
        end = lines.index("```", i + 2) if "```" in lines[i + 2:] else None
        if end is None:
            problems.append(f"{page}:{i + 1}: example {name}: the block never ends")
            continue
        if name in found:
            problems.append(f"{page}:{i + 1}: example {name} also in {found[name]}")
        found[name] = f"{page}:{i + 1}"
        with open(os.path.join(out, name + ".example.sql"), "w") as f:
            f.write("\n".join(lines[i + 2:end]) + "\n")
for name in found:
    if not os.path.exists(os.path.join(checks, name + ".sql")):
        problems.append(f"{found[name]}: example {name} has no check {checks}/{name}.sql")
for f in sorted(os.listdir(checks)):
    if f.endswith(".sql") and f[:-4] not in found:
        problems.append(f"{checks}/{f}: no page shows an example {f[:-4]}")
if not found:
    problems.append("no page marks an example")
for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
pass "every example of the pages has a check, every check an example"

cluster_init docs "$(free_port)" "snowflake_id.node_id = 9" "snowflake_id.public_id_keys = 'public_id.keys'"
# Key version 1 of public IDs, for the examples of docs/api.md.
public_keys_write "$(cluster_dir docs)/public_id.keys"
cluster_start docs

n=0
for example in "$SF_WORK"/examples/*.example.sql; do
  name=$(basename "$example" .example.sql)
  check="$CHECKS/$name.sql"
  before="$SF_WORK/examples/$name.before.sql" after="$SF_WORK/examples/$name.after.sql"
  if grep -qx -- '-- the example runs here' "$check"; then
    sed '/^-- the example runs here$/,$d' "$check" >"$before"
    sed -n '/^-- the example runs here$/,$p' "$check" >"$after"
  else
    : >"$before"
    cp "$check" "$after"
  fi
  for zone in "${ZONES[@]}"; do
    db="ex_${name}_$n"; n=$((n + 1))
    sql_value docs "CREATE DATABASE $db" >/dev/null
    out=$(PGTZ=$zone psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(cluster_port docs)" -U postgres -d "$db" \
      -At -F '|' -c "CREATE EXTENSION snowflake_id" -f "$before" -f "$example" -f "$after" 2>&1) ||
      { echo "$out"; fail "example $name does not run in a session in $zone"; }
    # The check's rows: label|t. The example's own output comes first.
    results=$(grep -E '^[a-z_ ]+\|[tf]$' <<<"$out" || true)
    [ -n "$results" ] || { echo "$out"; fail "example $name: its check returned no rows in $zone"; }
    wrong=$(grep -E '\|f$' <<<"$results" || true)
    [ -z "$wrong" ] || { echo "$out"; fail "example $name in a session in $zone: $(paste -sd' ' <<<"$wrong")"; }
    pass "example $name in a session in $zone: $(cut -d'|' -f1 <<<"$results" | paste -sd',' -)"
  done
done
pass "doc_examples"
