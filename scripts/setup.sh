#!/usr/bin/env bash
# Installs what building and testing snowflake_id needs, and nothing that is
# already there: Debian packages, the PostgreSQL servers asked for (and
# Citus in PostgreSQL 18, for the Citus test), Rust 1.96 (scripts/rust.sh),
# cargo-pgrx 0.19.4, and `cargo pgrx init` against every installed server's
# pg_config (pgrx never downloads PostgreSQL). Safe to run again; the demo
# and test commands call it first.
#
#   scripts/setup.sh                 PostgreSQL 15 (Debian's packages) only
#   scripts/setup.sh --pg 17         15 and 17
#   scripts/setup.sh --pg all        15, 16, 17, 18 and 19
#   scripts/setup.sh --demo          only what building and running the
#                                    extension needs (scripts/demo.sh): none
#                                    of the tools that only the tests use
#
# Where 16 to 19 come from, and where they are cached: scripts/postgres.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=postgres.sh
. "$ROOT/scripts/postgres.sh"
# shellcheck source=rust.sh
. "$ROOT/scripts/rust.sh"

versions=(15)
demo=0
while [ $# -gt 0 ]; do
  case $1 in
    --demo) demo=1; shift ;;
    --pg)
      [ $# -ge 2 ] || { echo "setup: --pg needs a version (${SF_PG_VERSIONS[*]} or all)" >&2; exit 2; }
      if [ "$2" = all ]; then versions=("${SF_PG_VERSIONS[@]}"); else versions+=("$2"); fi
      shift 2
      ;;
    *) echo "setup: unknown argument '$1' (usage: scripts/setup.sh [--demo] [--pg 15|16|17|18|19|all]...)" >&2; exit 2 ;;
  esac
done

PG_MAJOR=15
PGRX_VERSION=0.19.4
# Building and running the extension (the demo needs these alone).
APT_PACKAGES=(
  "postgresql-${PG_MAJOR}" "postgresql-server-dev-${PG_MAJOR}"
  libclang-dev clang sudo build-essential pkg-config
  # scripts/sources.sh: pinned files come through pip (a virtual
  # environment) and apt-get download; dpkg-deb unpacks the 17 headers.
  ca-certificates dpkg
)
# The tests' own tools.
APT_TEST_PACKAGES=(
  "postgresql-contrib"
  "postgresql-${PG_MAJOR}-plproxy" "postgresql-${PG_MAJOR}-auto-failover" "postgresql-${PG_MAJOR}-partman"
  # A failover under Patroni 3.0 with etcd 3.4
  # (tests/integration/failover_patroni.sh, which starts its own; their
  # services are stopped and disabled below).
  patroni etcd-server
  # The portable edition's renewal by a pg_cron job (tests/integration/portable_registry.sh).
  "postgresql-${PG_MAJOR}-cron"
  faketime
  # Instruction counts (tests/integration/instructions.sh, bench/).
  valgrind
  # Monitoring (tests/integration/monitoring.sh): the exporter the queries
  # of monitoring/ are for, and promtool (in Debian's prometheus package)
  # for the alerting rules. Neither service is used or needed running.
  prometheus-postgres-exporter prometheus
  # A test authority and the registry's certificate
  # (tests/integration/registry_tls.sh).
  openssl
  # The JDBC client of the snowflake type (tests/integration/type_clients.sh),
  # and Bouncy Castle's FF1, the independent check of public IDs
  # (tests/integration/public_ids.sh).
  libpostgresql-jdbc-java libbcprov-java
)
[ $demo -eq 1 ] || APT_PACKAGES+=("${APT_TEST_PACKAGES[@]}")

apt_ensure "${APT_PACKAGES[@]}"
# The packages enable etcd's and Patroni's services, and start etcd where
# services run (on its default port 2379; Patroni's waits for a
# configuration): the test runs its own on ports of its own, so the
# packaged ones are stopped and disabled.
if [ $demo -eq 0 ] && [ -d /run/systemd/system ]; then
  for unit in etcd.service patroni.service; do
    if systemctl is-enabled --quiet "$unit" 2>/dev/null || systemctl is-active --quiet "$unit" 2>/dev/null; then
      _pg_as_root systemctl disable --now "$unit" >/dev/null 2>&1 || true
    fi
  done
elif [ $demo -eq 0 ] && [ -x /etc/init.d/etcd ] && _pg_as_root /etc/init.d/etcd status >/dev/null 2>&1; then
  _pg_as_root /etc/init.d/etcd stop >/dev/null 2>&1 || true
fi

# The client examples (tests/integration/client_examples.sh and
# type_clients.sh) need Node.js with npm and a Java runtime, and they and
# the wheels of PostgreSQL 16 and 18 need Python with venv
# (scripts/postgres.sh installs wheels with a virtual environment's pip);
# install Debian's only when missing (the machine image may bring its own
# Node.js, Java and Python).
extra=()
if [ $demo -eq 0 ]; then
  command -v node >/dev/null 2>&1 || extra+=(nodejs)
  command -v npm >/dev/null 2>&1 || extra+=(npm)
  command -v java >/dev/null 2>&1 || extra+=(default-jdk-headless)
fi
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || extra+=(python3-venv)
apt_ensure "${extra[@]}"   # (nothing when none is missing)

# (Debian's postgresql package may have created and started a cluster on
# port 5432. The tests never use it, and it does not load snowflake_id.)
rust_ensure

# The two Rust tools set-up builds, cargo-pgrx and pgxn_meta, are built in
# the background while the rest of set-up (apt, the servers' downloads, the
# sid root, Citus) goes on in the foreground, which waits mostly on the
# network and dpkg: one after the other they took 527 s of a bare
# machine's set-up (the builds 216 s and 111 s of it), and only
# `cargo pgrx init`, at the end, needs either. Each build's output goes to
# a log, printed when it fails; set-up fails when either does.
TOOL_BUILD_LOG=$(mktemp /tmp/snowflake_setup_tools.XXXXXX)
tool_build_pid=
stop_tool_build() {
  [ -z "$tool_build_pid" ] || kill -- "-$tool_build_pid" 2>/dev/null || true
  rm -f "$TOOL_BUILD_LOG"
}
trap stop_tool_build EXIT
tool_builds() {
  local meta_pid="" rc=0
  # PGXN's validator of META.json (tests/integration/pgxn.sh): the pgxn_meta
  # crate of the PGXN project, a debug build (it validates one small file; its
  # release build took 2 min 22 s on a bare machine). Beside cargo-pgrx's
  # build: each ends in minutes of one crate on one core.
  if [ $demo -eq 0 ] && ! pgxn_meta --version 2>/dev/null | grep " ${PGXN_META_VERSION}\$" >/dev/null; then
    echo "setup: installing pgxn_meta ${PGXN_META_VERSION} (PGXN's META.json validator)"
    cargo install pgxn_meta --version "${PGXN_META_VERSION}" --locked --debug &
    meta_pid=$!
  fi
  # A debug build: cargo-pgrx only drives cargo, bindgen and the servers, so
  # its own speed hardly matters, and a debug build takes about 3 minutes on
  # 2 cores where a release build takes about 7 (measured: 3 min 3 s and 6 min 45 s).
  if ! cargo pgrx --version 2>/dev/null | grep " ${PGRX_VERSION}\$" >/dev/null; then
    echo "setup: installing cargo-pgrx ${PGRX_VERSION} (a debug build: about 3 minutes)"
    cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked --debug || rc=$?
  fi
  [ -z "$meta_pid" ] || wait "$meta_pid" || rc=$?
  return "$rc"
}
PGXN_META_VERSION=0.7.0
# (Job control on for the fork: its own process group, stopped whole by
# the exit trap.)
set -m
tool_builds >"$TOOL_BUILD_LOG" 2>&1 </dev/null &
tool_build_pid=$!
set +m

# The arm64 build and its emulated server (tests/integration/arm64.sh,
# scripts/package.sh --arch arm64): the cross toolchain with Rust's
# standard library for arm64, qemu-user-static registered with binfmt_misc
# (scripts/cross.sh). The arm64 root itself is made when first needed.
if [ $demo -eq 0 ]; then
  # shellcheck source=cross.sh
  . "$ROOT/scripts/cross.sh"
  cross_ensure
  arm64_emulation_ensure
fi

# The servers asked for (15 is Debian's, installed above).
declare -A seen=()
for v in "${versions[@]}"; do
  [ -n "${seen[$v]:-}" ] && continue
  seen[$v]=1
  install_postgres "$v" >/dev/null
  # Citus, for the scale-out test (tests/integration/citus.sh). Without its
  # sources the other tests still run; that test then fails and says why.
  if [ $demo -eq 0 ] && [ "$v" = "$CITUS_PG" ] && ! install_citus "$v"; then
    echo "setup: WARNING: Citus $CITUS_VERSION is not installed into PostgreSQL $v: tests/integration/citus.sh will fail" >&2
  fi
  # pg_partman 5, for the partitioning recipe's test (tests/integration/partman.sh).
  if [ $demo -eq 0 ] && [ "$v" = "$PARTMAN5_PG" ] && ! install_partman5 "$v"; then
    echo "setup: WARNING: pg_partman $PARTMAN5_VERSION is not installed into PostgreSQL $v: tests/integration/partman.sh will fail there" >&2
  fi
done

# The tool builds started above.
tool_build_rc=0
wait "$tool_build_pid" || tool_build_rc=$?
tool_build_pid=
grep '^setup: ' "$TOOL_BUILD_LOG" || true
if [ "$tool_build_rc" -ne 0 ]; then
  echo "setup: building cargo-pgrx or pgxn_meta failed (status $tool_build_rc); its log:" >&2
  cat "$TOOL_BUILD_LOG" >&2
  exit 1
fi

# `cargo pgrx init` with every installed server, so that asking for one
# version never drops another from pgrx's configuration.
init_args=()
for v in "${SF_PG_VERSIONS[@]}"; do
  config=$(pg_config_for "$v")
  [ -n "$config" ] && init_args+=("--pg$v" "$config")
done
config_toml="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
stale=0
for ((i = 0; i < ${#init_args[@]}; i += 2)); do
  grep -qs "^${init_args[i]#--} *= *\"${init_args[i + 1]}\"" "$config_toml" || stale=1
done
if [ $stale -eq 1 ]; then
  echo "setup: cargo pgrx init ${init_args[*]}"
  cargo pgrx init "${init_args[@]}"
fi

# `cargo pgrx install` writes into each server's lib and share directories;
# the test clusters run as postgres and only read them.
for ((i = 0; i < ${#init_args[@]}; i += 2)); do
  echo "setup: PostgreSQL ${init_args[i]#--pg}: ${init_args[i + 1]}"
done
echo "setup: ok (cargo-pgrx ${PGRX_VERSION})"
