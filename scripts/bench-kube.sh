#!/usr/bin/env bash
# Sluice in Kubernetes mode against a real kube-apiserver + etcd: how fast changes reach traffic,
# and whether that depends on how much is configured. Runs the #[ignore] benchmarks in
# crates/sluice/tests/it/kubernetes_bench.rs (release build) and writes a Markdown report:
#
#   (a) EndpointSlice replaced → first response from the new endpoint, 100 samples
#   (b) Ingress created → first 200 for its host, 100 samples
#   (c) 10 and 10,000 Ingresses / 51 and 50,001 endpoints created before Sluice starts: time to
#       /ready, RSS, and 20 EndpointSlice changes timed to traffic at each size
#
# Each benchmark runs in its own network namespace (so it needs root, like the Kubernetes tests),
# with its own API server; ~2 minutes in all after the build, most of it creating 20,000 objects.
#
# Environment: OUT=docs/results/<today>-bench-kube.md   where the report goes
#              SLUICE_KUBE_BIN=<folder>   kube-apiserver, etcd, kubectl (else scripts/kube-tools.sh
#                                         builds them: minutes, the first time)
#              SLUICE_BENCH_HOLD_SECS=N   wait N s at ready (with the pid on stderr) to look at the
#                                         process: /proc/PID/smaps, gdb's malloc_stats()
# Run it when the machine is otherwise quiet: the latencies are sub-millisecond.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-docs/results/$(date -u +%F)-bench-kube.md}
[[ $(id -u) == 0 ]] || { echo "bench-kube: needs root (a network namespace per benchmark)" >&2; exit 1; }
if [[ -z ${SLUICE_KUBE_BIN:-} ]]; then
    SLUICE_KUBE_BIN=$(scripts/kube-tools.sh)
fi
export SLUICE_KUBE_BIN

tables=$(mktemp)
trap 'rm -f "$tables"' EXIT
cargo build --release --locked -p sluice --tests >&2
# One benchmark at a time on the machine (scripts/lib/bench.sh): held until this script exits.
BENCH_NAME=bench-kube
source scripts/lib/bench.sh
one_at_a_time
# The benchmarks are the ignored tests of module kubernetes_bench in sluice's one test binary.
SLUICE_BENCH_KUBE_OUT=$tables cargo test --release --locked -p sluice --test it \
    -- --ignored --nocapture --test-threads 1 kubernetes_bench:: >&2

version() { "$1" --version 2>/dev/null | head -n1; }
mkdir -p "$(dirname "$OUT")"
{
    echo "# Sluice in Kubernetes mode: changes to traffic, and scale"
    echo
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs: $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
    echo "- $(version "$SLUICE_KUBE_BIN/kube-apiserver"), etcd $("$SLUICE_KUBE_BIN/etcd" --version 2>/dev/null | awk '/etcd Version/{print $3}') (--unsafe-no-fsync), sluice $(git describe --always --dirty 2>/dev/null || echo "?") (release build, --workers 1, SLUICE_LOG=info)"
    echo "- API server, etcd, Sluice and the backend share the machine's CPUs, on loopback in a network"
    echo "  namespace per benchmark. Clocks start when the API server has answered the write (PUT or"
    echo "  POST returned) and stop at the first response through Sluice that shows the change, polled"
    echo "  back to back over one kept-alive connection (one poll ≈ 0.02 ms)."
    echo "- Reproduce: \`scripts/bench-kube.sh\` (or \`cargo test --release -p sluice --test it -- --ignored --nocapture --test-threads 1 kubernetes_bench::\`)."
    echo
    cat "$tables"
} >"$OUT"
cat "$OUT"
echo "bench-kube: report written to $OUT" >&2
