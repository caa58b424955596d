#!/usr/bin/env bash
# Prints the pg_config of a supported PostgreSQL installed by scripts/setup.sh:
#   scripts/pg_config.sh 17        -> /var/cache/snowflake_id/pg17-.../bin/pg_config
# so that any command can target that server, for example
#   cargo pgrx install --release --pg-config "$(scripts/pg_config.sh 17)"
set -euo pipefail
# shellcheck source=postgres.sh
. "$(dirname "$0")/postgres.sh"
[ $# -eq 1 ] || { echo "usage: scripts/pg_config.sh 15|16|17|18|19" >&2; exit 2; }
config=$(pg_config_for "$1")
[ -n "$config" ] || { echo "pg_config.sh: PostgreSQL $1 is not installed: run scripts/setup.sh --pg $1" >&2; exit 1; }
echo "$config"
