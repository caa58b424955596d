#!/usr/bin/env bash
# Installs what building and testing snowflake_id needs, and nothing that is
# already there: Debian packages, cargo-pgrx 0.18.1, and `cargo pgrx init`
# against the system PostgreSQL 15. Safe to run again; the demo and test
# commands call it first.
set -euo pipefail

PG_MAJOR=15
PG_CONFIG=/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config
PGRX_VERSION=0.18.1
APT_PACKAGES=(
  "postgresql-${PG_MAJOR}" "postgresql-server-dev-${PG_MAJOR}" "postgresql-contrib"
  "postgresql-${PG_MAJOR}-plproxy" libclang-dev clang sudo faketime
  build-essential pkg-config
)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The client examples (tests/integration/client_examples.sh) need Node.js
# with npm and Python with venv; install Debian's only when missing (the
# machine image may bring its own Node.js).
extra=()
command -v node >/dev/null 2>&1 || extra+=(nodejs)
command -v npm >/dev/null 2>&1 || extra+=(npm)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || extra+=(python3-venv)
if [ ${#extra[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${extra[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${extra[@]}"
fi

# (Debian's postgresql package may have created and started a cluster on
# port 5432. The tests never use it, and it does not load snowflake_id.)
export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo pgrx --version 2>/dev/null | grep -q " ${PGRX_VERSION}\$"; then
  echo "setup: installing cargo-pgrx ${PGRX_VERSION} (about 10 minutes)"
  cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked
fi

if ! grep -qs "^pg${PG_MAJOR} *= *\"${PG_CONFIG}\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
  echo "setup: cargo pgrx init --pg${PG_MAJOR} ${PG_CONFIG}"
  cargo pgrx init --pg${PG_MAJOR} "${PG_CONFIG}"
fi

# `cargo pgrx install` writes into the system PostgreSQL's lib and share
# directories; the test clusters run as postgres and only read them.
echo "setup: ok (cargo-pgrx ${PGRX_VERSION}, PostgreSQL ${PG_MAJOR} at ${PG_CONFIG})"
