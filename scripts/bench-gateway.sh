#!/usr/bin/env bash
# Gateway API in Sluice's Kubernetes mode against a real kube-apiserver + etcd (issue 27, item 6):
# runs the #[ignore] benchmarks in crates/sluice/tests/it/gateway_bench.rs (release build) and
# writes a Markdown report:
#
#   (a) HTTPRoute created → first 200 for its host, 100 samples, with 1 and 3,000 HTTPRoutes
#       configured, quiet and while 50 existing routes a second are edited
#   (b) 1,000 route changes (edits, creations, deletions) while `sluice load` sends 2,000
#       requests/s to a route no change touches: failed requests
#   (c) memory with 1 and 5,000 HTTPRoutes
#
# Each benchmark runs in its own network namespace with its own API server (root needed, as for
# the Kubernetes tests); a few minutes in all after the build.
#
# Environment: OUT=docs/results/<today>-bench-gateway.md   where the report goes
#              SLUICE_KUBE_BIN, SLUICE_GATEWAY_CRDS   (else scripts/kube-tools.sh and
#                                         scripts/gateway-crds.sh provide them)
# Run it when the machine is otherwise quiet.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/$(date -u +%F)-bench-gateway.md}
[[ $(id -u) == 0 ]] || { echo "bench-gateway: needs root (a network namespace per benchmark)" >&2; exit 1; }
SLUICE_KUBE_BIN=${SLUICE_KUBE_BIN:-$(scripts/kube-tools.sh)}
SLUICE_GATEWAY_CRDS=${SLUICE_GATEWAY_CRDS:-$(scripts/gateway-crds.sh)}
export SLUICE_KUBE_BIN SLUICE_GATEWAY_CRDS

tables=$(mktemp)
trap 'rm -f "$tables"' EXIT
cargo build --release --locked -p sluice --tests >&2
# One benchmark at a time on the machine (scripts/lib/bench.sh): held until this script exits.
BENCH_NAME=bench-gateway
source scripts/lib/bench.sh
one_at_a_time
SLUICE_BENCH_KUBE_OUT=$tables cargo test --release --locked -p sluice --test it \
    -- --ignored --nocapture --test-threads 1 gateway_bench:: >&2

mkdir -p "$(dirname "$OUT")"
{
    echo "# Gateway API in Kubernetes mode: routes to traffic, churn, memory"
    echo
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs: $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
    echo "- $("$SLUICE_KUBE_BIN/kube-apiserver" --version 2>/dev/null | head -n1), Gateway API CRDs $(basename "$SLUICE_GATEWAY_CRDS"), sluice $(git describe --always --dirty 2>/dev/null || echo "?") (release build, SLUICE_LOG=info)"
    echo "- API server, etcd, Sluice, the backend and the client share the machine's CPUs, on loopback"
    echo "  in a network namespace per benchmark."
    echo "- Reproduce: \`scripts/bench-gateway.sh\` (or \`cargo test --release -p sluice --test it -- --ignored --nocapture --test-threads 1 gateway_bench::\`)."
    echo
    cat "$tables"
} >"$OUT"
cat "$OUT"
echo "bench-gateway: report written to $OUT" >&2
