# shellcheck shell=bash
# The Rust toolchain that builds snowflake_id: Rust 1.96 or later (pgrx
# 0.19 declares rust-version 1.96), with clippy and rustfmt.
#
# Sourced by scripts/setup.sh, scripts/test.sh, scripts/package.sh,
# scripts/demo.sh, bench/ and the tests that build: sourcing it puts
# ~/.cargo/bin (cargo-pgrx, pgxn_meta) on PATH, and Debian's toolchain before
# it when the Rust there is too old; it defines rust_ensure for set-up.
#
# Where it comes from: the first of
#   1. the rustc on PATH with ~/.cargo/bin first (rustup's, or any other),
#      when it is 1.96 or later;
#   2. Debian 12's rustc-web, cargo-web, rust-web-clippy and rustfmt-web
#      (bookworm-security, /usr/bin): the Rust that Debian keeps current for
#      its browsers, with security updates taken through the system's apt
#      as PostgreSQL 15's are. rust_ensure installs them when 1 is missing;
#      rustup's own channels are not reachable from every machine, Debian's
#      archive is.

SF_RUST_MIN=1.96

# _rust_ok RUSTC: true when RUSTC runs and is at least SF_RUST_MIN.
_rust_ok() {
  local have
  have=$("$1" --version 2>/dev/null | sed -nE 's/^rustc ([0-9]+\.[0-9]+)\..*/\1/p')
  [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$SF_RUST_MIN" "$have" | sort -V | head -1)" = "$SF_RUST_MIN" ]
}

# _rust_path: PATH with the toolchain first (see the header): Debian's
# tools come first through a directory of links to them alone (made by
# rust_ensure), not through /usr/bin, whose other programs keep their place.
SF_RUST_LINKS=/usr/lib/snowflake_id-rust
_rust_path() {
  case ":$PATH:" in *":$HOME/.cargo/bin:"*) ;; *) PATH="$HOME/.cargo/bin:$PATH" ;; esac
  case ":$PATH:" in
    *":$SF_RUST_LINKS:"*) ;;
    *) _rust_ok "$(command -v rustc || echo rustc)" || PATH="$SF_RUST_LINKS:$PATH" ;;
  esac
  export PATH
}

# rust_ensure: installs Debian's Rust when no Rust 1.96 is found, and puts
# it first on PATH. Needs root (or sudo) for apt-get.
rust_ensure() {
  _rust_path
  hash -r
  # (rustup installs its clippy and rustfmt proxies even without those
  # components: ask the tools themselves.)
  _rust_ok "$(command -v rustc || echo rustc)" && cargo clippy --version >/dev/null 2>&1 &&
    cargo fmt --version >/dev/null 2>&1 && return 0
  echo "setup: no Rust $SF_RUST_MIN or later with clippy and rustfmt on PATH (rustc: $(rustc --version 2>/dev/null || echo none)):" \
    "using Debian's rustc-web, cargo-web, rust-web-clippy and rustfmt-web" >&2
  apt_ensure rustc-web cargo-web rust-web-clippy rustfmt-web || return 1
  local tool
  _pg_as_root mkdir -p "$SF_RUST_LINKS"
  for tool in cargo rustc rustdoc cargo-clippy clippy-driver cargo-fmt rustfmt; do
    _pg_as_root ln -sfn "/usr/bin/$tool" "$SF_RUST_LINKS/$tool"
  done
  # Debian's whole toolchain first, also where only a tool was missing.
  case ":$PATH:" in *":$SF_RUST_LINKS:"*) ;; *) export PATH="$SF_RUST_LINKS:$PATH" ;; esac
  hash -r
  _rust_ok "$(command -v rustc)" || { echo "setup: $(command -v rustc) is not Rust $SF_RUST_MIN or later" >&2; return 1; }
}

_rust_path
