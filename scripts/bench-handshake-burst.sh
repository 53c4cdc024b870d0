#!/usr/bin/env bash
# Requests on open connections while 1,000 TLS connections open at once (issue 29, item 2).
#
#   CPU 0: sluice demo --workers 1 (HTTPS :18543, its ECDSA P-256 demo certificate)
#   CPU 1: client A: sluice load -c50 -R2000 for 10 s, keep-alive: its p99 per second
#          client B, at second 4: sluice load -c1000 -R500 -d2s: 1,000 full handshakes at once
#
# The figure is client A's p99 in the second of the burst (coordinated-omission corrected): how
# long a request on a connection that is already open waits behind the handshakes. Every run's
# per-second p99 and max are in the report.
#
# Environment: SLUICE_BIN (else `cargo build --release -p sluice`), BASE_BIN (another build,
# run alternately with SLUICE_BIN: an A/B), RUNS=3 per binary, OUT=target/bench-handshake-burst.md.
# Everything listens on 127.0.0.1 and is stopped on exit, by recorded PID.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-3}
OUT=${OUT:-target/bench-handshake-burst.md}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "RUNS must be a positive integer" >&2; exit 1; }
if [[ -z ${SLUICE_BIN:-} ]]; then
    cargo build --release --locked -p sluice >&2
    SLUICE_BIN=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/sluice
fi
# One benchmark at a time on the machine (scripts/lib/bench.sh): held until this script exits.
BENCH_NAME=bench-handshake-burst
source scripts/lib/bench.sh
one_at_a_time
WORK=$(mktemp -d -t sluice-burst.XXXXXX)
DEMO_PID=
cleanup() {
    [[ -n $DEMO_PID ]] && kill "$DEMO_PID" 2>/dev/null && wait "$DEMO_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# One run of binary $1; its load outputs go to $2.{a,b}.json.
run() {
    local bin=$1 out=$2 a
    "$bin" demo --workers 1 --dir "$WORK/demo" --http-listen 127.0.0.1:18580 \
        --https-listen 127.0.0.1:18543 --admin-listen 127.0.0.1:18513 \
        --status-listen 127.0.0.1:18546 >"$WORK/demo.log" 2>&1 &
    DEMO_PID=$!
    taskset -pc 0 "$DEMO_PID" >/dev/null
    for _ in $(seq 1 100); do
        curl -sk -o /dev/null --resolve demo.example.com:18543:127.0.0.1 \
            https://demo.example.com:18543/ && break
        sleep 0.1
    done
    taskset -c 1 "$bin" load -t1 -c50 -R2000 -d10s --insecure --connect-to 127.0.0.1:18543 \
        --json "$out.a.json" https://demo.example.com/ >/dev/null 2>&1 &
    a=$!
    sleep 4
    taskset -c 1 "$bin" load -t1 -c1000 -R500 -d2s --insecure --connect-to 127.0.0.1:18543 \
        --json "$out.b.json" https://demo.example.com/ >/dev/null 2>&1
    wait "$a"
    kill "$DEMO_PID"
    wait "$DEMO_PID" 2>/dev/null || true
    DEMO_PID=
}

for i in $(seq 1 "$RUNS"); do
    if [[ -n ${BASE_BIN:-} ]]; then
        echo "[burst] base run $i" >&2
        run "$BASE_BIN" "$WORK/base-$i"
    fi
    echo "[burst] sluice run $i" >&2
    run "$SLUICE_BIN" "$WORK/sluice-$i"
done

mkdir -p "$(dirname "$OUT")"
python3 - "$WORK" "$RUNS" "${BASE_BIN:-}" "$SLUICE_BIN" >"$OUT" <<'PY'
import json, os, statistics, sys
work, runs, base, sluice = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print("# Requests on open connections during a burst of 1,000 TLS handshakes\n")
print("`scripts/bench-handshake-burst.sh`: client A keeps 50 connections at 2,000 requests/s; at second 4 "
      "client B opens 1,000 TLS connections at once (full handshakes, ECDSA P-256). The figure is A's "
      "p99 in B's second (the worst second of the run), in ms.\n")
print(f"- sluice: `{sluice}`" + (f"\n- base: `{base}`" if base else "") + "\n")
print("| binary | run | A's p99, burst second | max | A's p99 per second | B's handshakes | B's errors |")
print("|---|---:|---:|---:|---|---:|---:|")
worst = {}
for name in (["base"] if base else []) + ["sluice"]:
    for i in range(1, runs + 1):
        a = json.load(open(os.path.join(work, f"{name}-{i}.a.json")))
        b = json.load(open(os.path.join(work, f"{name}-{i}.b.json")))
        series = a["series"]
        peak = max(series, key=lambda s: s["p99_us"])
        worst.setdefault(name, []).append(peak["p99_us"] / 1000)
        errors = sum(b["errors"].values())
        per_second = " ".join(f"{s['p99_us'] / 1000:.1f}" for s in series)
        print(f"| {name} | {i} | **{peak['p99_us'] / 1000:.1f}** | {peak['max_us'] / 1000:.1f} | {per_second} | "
              f"{b['tls_handshakes']['full']} | {errors} |")
print()
for name, values in worst.items():
    print(f"- {name}: median of the burst second's p99 **{statistics.median(values):.1f} ms** over {len(values)} runs")
PY
cat "$OUT"
