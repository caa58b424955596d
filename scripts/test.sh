#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. set-up (scripts/setup.sh: Debian packages, cargo-pgrx 0.18.1, cargo pgrx init);
#   2. cargo fmt --check and cargo clippy -D warnings;
#   3. cargo pgrx test: the pure unit and property tests of the core and the
#      #[pg_test] tests inside a server (run as the postgres user);
#   4. cargo pgrx install --release, then the pg_regress suite and the
#      integration tests that drive real clusters from outside.
# Any failure stops the run with a non-zero status.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$PATH"
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config

step() { printf '\n==== %s\n' "$*"; }

step "set-up"
bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --features "pg15 pg_test" -- -D warnings

step "cargo pgrx test (unit, property and #[pg_test] tests)"
PGRX_TEST_DIR=$(mktemp -d /tmp/snowflake_pgrx_test.XXXXXX)
chown postgres:postgres "$PGRX_TEST_DIR"
trap 'rm -rf "$PGRX_TEST_DIR"' EXIT
cargo pgrx test pg15 --runas postgres --pgdata "$PGRX_TEST_DIR/data"

step "cargo pgrx install --release"
cargo pgrx install --release --pg-config "$PG_CONFIG"

step "pg_regress suite"
bash tests/pg_regress/run.sh

step "integration tests"
bash tests/integration/run_all.sh
