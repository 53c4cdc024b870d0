#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what the tests need, then format, lint, tests.
# Usage: scripts/test.sh            (from anywhere; needs Rust via rustup and a C compiler)
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use (openssl for test certificates in scripts, util-linux's setpriv
# to check the privileged-port message as an unprivileged user and its prlimit to start Sluice
# under a small open-files limit; for the Kubernetes tests and the
# deploy check: util-linux's unshare and iproute2's ip for a network namespace of their own, curl to
# wait for the API server, jq to compare manifests). Installed only when missing.
missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v setpriv >/dev/null || missing+=(util-linux)
command -v prlimit >/dev/null || missing+=(util-linux)
command -v unshare >/dev/null || missing+=(util-linux)
command -v ip >/dev/null || missing+=(iproute2)
command -v curl >/dev/null || missing+=(curl)
command -v jq >/dev/null || missing+=(jq)
command -v cc >/dev/null || missing+=(build-essential)
# Python with venv: scripts/grpc-python.sh installs grpcio into a virtual environment.
command -v python3 >/dev/null || missing+=(python3)
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
# Prometheus scrapes Sluice in crates/sluice/tests/it/prometheus.rs (the dashboards' queries).
[[ -x /usr/bin/prometheus ]] || missing+=(prometheus)
# nginx and HAProxy: the lab's peers (its CI smoke runs nginx).
[[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
[[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
# dnsmasq: crates/sluice/tests/it/external_name.rs resolves ExternalName Services with it.
[[ -x /usr/sbin/dnsmasq ]] || missing+=(dnsmasq-base)
# Chromium: crates/sluice/tests/it/status_page.rs renders the status page in it, headless.
command -v chromium >/dev/null || missing+=(chromium)
# Podman, buildah and runc: scripts/test-image.sh builds the image from scratch and runs it as the
# DaemonSet runs it (libcap2-bin's setcap gives the binary its file capability).
command -v podman >/dev/null || missing+=(podman)
command -v buildah >/dev/null || missing+=(buildah)
command -v runc >/dev/null || missing+=(runc)
command -v setcap >/dev/null || missing+=(libcap2-bin)
# containerd (Debian's, started by scripts/kube-node.sh with its own config) and conntrack for
# kube-proxy: scripts/test-kube-node.sh runs Sluice on a real node.
command -v containerd >/dev/null || missing+=(containerd)
command -v conntrack >/dev/null || missing+=(conntrack)
if ((${#missing[@]})); then
  sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

# rust-toolchain.toml pins the compiler; rustup installs it (with rustfmt and clippy) on first use.
rustup show active-toolchain >/dev/null

echo "== cargo fmt --check"
cargo fmt --all -- --check
# No import circle between the modules of a crate (two known knots are listed in the script,
# each with the step that removes it); prints each crate's layers when one is found.
echo "== layers"
python3 scripts/check-layers.py
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
# cargo-machete, built once and cached by version (~4.5 min the first time): fails on a dependency
# a crate declares and never uses.
echo "== cargo machete"
MACHETE=$(nice scripts/machete.sh)
"$MACHETE"
# kube-apiserver, kubectl, etcd and helm, built from Go modules (needs Go) once and cached by
# version (5–10 min the first time, nothing after), and with --node the real node's kubelet,
# kube-proxy, kube-controller-manager and kube-scheduler (~3.5 min more the first time). Kubernetes tests find them through SLUICE_KUBE_BIN.
echo "== kube tools"
SLUICE_KUBE_BIN=$(nice scripts/kube-tools.sh --node)
export SLUICE_KUBE_BIN
echo "$SLUICE_KUBE_BIN"
# The Gateway API CRDs (YAML from the sigs.k8s.io/gateway-api module, cached by version; a second
# or so the first time). The Kubernetes tests of Gateway API install them into their API server.
echo "== Gateway API CRDs"
SLUICE_GATEWAY_CRDS=$(nice scripts/gateway-crds.sh)
export SLUICE_GATEWAY_CRDS
echo "$SLUICE_GATEWAY_CRDS"
# h2spec (HTTP/2 conformance), built from its Go module once and cached by version (~20 s the
# first time). crates/proxy/tests/it/h2spec.rs runs it; under CI a missing SLUICE_H2SPEC fails.
echo "== h2spec"
SLUICE_H2SPEC=$(nice scripts/h2spec.sh)
export SLUICE_H2SPEC
echo "$SLUICE_H2SPEC"
# grpcio (the gRPC project's C-core with Python bindings) and hyperframe (an HTTP/2 frame codec),
# from PyPI, in a virtual environment cached by version (seconds the first time).
# crates/proxy/tests/it/grpc.rs runs gRPC servers and clients with it, crates/wire/tests/wire/
# compares frames with hyperframe; under CI a missing SLUICE_GRPC_PYTHON fails.
echo "== grpcio, hyperframe"
SLUICE_GRPC_PYTHON=$(nice scripts/grpc-python.sh)
export SLUICE_GRPC_PYTHON
echo "$SLUICE_GRPC_PYTHON"
# Chromium (Debian's package, installed above): under CI a missing SLUICE_CHROMIUM fails the
# status page test.
SLUICE_CHROMIUM=$(command -v chromium)
export SLUICE_CHROMIUM
# The OpenTelemetry Collector (OTLP receiver, file exporter), built from Go modules once and
# cached by version (~2.5 min the first time). crates/proxy/tests/it/otel.rs sends it Sluice's spans;
# under CI a missing SLUICE_OTELCOL fails.
echo "== otelcol"
SLUICE_OTELCOL=$(nice scripts/otelcol.sh)
export SLUICE_OTELCOL
echo "$SLUICE_OTELCOL"
# ghz and the gRPC pods (scripts/grpc-backend), built from Go modules once and cached by version
# (~1 min the first time). The lab's gRPC smoke test runs them; under CI a missing
# SLUICE_GRPC_TOOLS fails.
echo "== grpc tools"
SLUICE_GRPC_TOOLS=$(nice scripts/grpc-tools.sh)
export SLUICE_GRPC_TOOLS
echo "$SLUICE_GRPC_TOOLS"
# oauth2-proxy and an OpenID Connect provider (scripts/mockoidc), built from Go modules once and
# cached by version (~40 s the first time). crates/proxy/tests/it/oauth2_proxy.rs signs in
# through Sluice's auth-url / auth-signin; under CI a missing SLUICE_OAUTH2_TOOLS fails.
echo "== oauth2-proxy"
SLUICE_OAUTH2_TOOLS=$(nice scripts/oauth2-proxy.sh)
export SLUICE_OAUTH2_TOOLS
echo "$SLUICE_OAUTH2_TOOLS"
echo "== cargo test"
cargo test --workspace --locked
echo "== deploy check (deploy/ against a real API server)"
scripts/kube-cluster.sh run --bin "$SLUICE_KUBE_BIN" -- scripts/check-deploy.sh
# The image built from scratch with podman (scripts/image.sh), from the debug binary the tests
# built (a cold release build would cost CI a quarter of an hour; the layout, user, capability
# and entrypoint are the release image's), its layout checked against deploy/Dockerfile, then run
# as the DaemonSet runs it (~10 s). Under CI a missing podman fails.
echo "== image (scripts/image.sh, run as the DaemonSet runs it)"
SLUICE_IMAGE_PROFILE=dev scripts/test-image.sh
# A real single-node cluster (scripts/kube-node.sh: kubelet with containerd and runc, kube-proxy,
# controller-manager, scheduler, in a network namespace of its own; the node programs built from
# Go modules once and cached by version, ~3.5 min the first time), and on it a fresh install of
# deploy/manifests, then of the chart, with the image above: every pod Ready, an Ingress routed to
# backend pods, the webhook called through its Service, the backend scaled 5 <-> 7 under load
# with 0 failed requests, a rolling update of the DaemonSet (~1.7 min).
echo "== real node (scripts/test-kube-node.sh)"
SLUICE_IMAGE_PROFILE=dev scripts/test-kube-node.sh
# The official Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance v1.7.0, built
# from Go modules once and cached by version with its echo-basic image, ~2-4 min the first time)
# on the same real node, Sluice as its DaemonSet: the profiles and features
# docs/conformance/claims.env claims, and every test in docs/conformance/expected-pass.txt must
# pass (~5 min). Under CI a missing tool fails, as above.
echo "== Gateway API conformance (scripts/gateway-conformance.sh check)"
SLUICE_IMAGE_PROFILE=dev scripts/gateway-conformance.sh check
