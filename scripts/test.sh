#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need, then format, lint, tests.
# Usage: scripts/test.sh            (from anywhere; needs Rust via rustup and a C compiler)
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use (openssl for test certificates in scripts, util-linux's setpriv
# to check the privileged-port message as an unprivileged user). Installed only when missing.
missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v setpriv >/dev/null || missing+=(util-linux)
command -v cc >/dev/null || missing+=(build-essential)
# nginx and HAProxy: the lab's peers (its CI smoke runs nginx).
[[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
[[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
if ((${#missing[@]})); then
  sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

# rust-toolchain.toml pins the compiler; rustup installs it (with rustfmt and clippy) on first use.
rustup show active-toolchain >/dev/null

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --workspace --locked
