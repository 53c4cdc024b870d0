#!/usr/bin/env bash
# Sluice against nginx (and HAProxy where it runs) on every path, in one page (issue 29, item 6):
# each benchmark below runs once, one after another, on one release build, and the page puts
# their ratios side by side with the command that produced each.
#
#   scripts/bench-summary.sh                 everything, ~18 minutes on 2 CPUs
#   ONLY="proxy idle" scripts/bench-summary.sh   a subset (names below)
#
#   proxy        scripts/bench-proxy.sh PROTOCOLS="http https h2 grpc grpc-stream"   CPU per request,
#                                                                        call or streamed message
#   nginx-backend  BACKEND=nginx PROTOCOLS=http scripts/bench-proxy.sh   100 connections, nginx
#                                                                        static-file backend
#   two-workers  WORKERS=2 PROXY_CPU=0,1 LOAD_CPU=0,1 scripts/bench-proxy.sh   both proxies with two
#                                                                        workers on both CPUs
#   idle         scripts/bench-idle.sh                                   memory per idle connection
#   passthrough  scripts/bench-passthrough.sh                            CPU per TLS connection
#                                                                        routed by SNI (HAProxy)
#   tps          sluice lab tps --workers 1                              handshakes per CPU-second
#                                                                        (nginx and HAProxy)
#
# Environment: OUT (default docs/results/<UTC date>-bench-summary.md; each benchmark's own report
# goes beside it, in <OUT without .md>/), SLUICE_BIN (else `cargo build --release -p sluice`),
# ONLY (names, space separated), LAB_ARGS (more `sluice lab tps` flags, e.g. --quick for a smoke
# run). The other benchmarks' own knobs (DURATION, ROUNDS, …) pass through.
# Every benchmark sends traffic to 127.0.0.1 only and stops what it started.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ALL="proxy nginx-backend two-workers idle passthrough tps"
ONLY=${ONLY:-$ALL}
OUT=${OUT:-docs/results/$(date -u +%F)-bench-summary.md}
DETAILS=${OUT%.md}

die() {
    echo "bench-summary: $*" >&2
    exit 1
}

for name in $ONLY; do
    [[ " $ALL " == *" $name "* ]] || die "ONLY: unknown benchmark '$name' (one of: $ALL)"
done
BINARY="built from this revision (cargo build --release)"
if [[ -n ${SLUICE_BIN:-} ]]; then
    BINARY="given: $SLUICE_BIN, modified $(date -u -r "$SLUICE_BIN" '+%F %H:%M UTC' 2>/dev/null || echo '?')"
else
    cargo build --release --locked -p sluice >&2
    SLUICE_BIN=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/sluice
fi
[[ -x $SLUICE_BIN ]] || die "SLUICE_BIN $SLUICE_BIN is not an executable"
export SLUICE_BIN
mkdir -p "$DETAILS"

# name → the command line shown on the page (what a reader runs to get that figure again).
declare -A COMMAND=(
    [proxy]='PROTOCOLS="http https h2 grpc grpc-stream" scripts/bench-proxy.sh'
    [nginx-backend]='BACKEND=nginx PROTOCOLS=http scripts/bench-proxy.sh'
    [two-workers]='WORKERS=2 PROXY_CPU=0,1 LOAD_CPU=0,1 scripts/bench-proxy.sh'
    [idle]='scripts/bench-idle.sh'
    [passthrough]='scripts/bench-passthrough.sh'
    [tps]='sluice lab tps --workers 1'
)

run() {
    local name=$1 started
    started=$(date +%s)
    echo "bench-summary: $name: ${COMMAND[$name]}" >&2
    case $name in
        proxy) PROTOCOLS="http https h2 grpc grpc-stream" OUT="$DETAILS/proxy.md" scripts/bench-proxy.sh >&2 ;;
        nginx-backend) BACKEND=nginx PROTOCOLS=http OUT="$DETAILS/nginx-backend.md" scripts/bench-proxy.sh >&2 ;;
        two-workers)
            WORKERS=2 PROXY_CPU=0,1 LOAD_CPU=0,1 OUT="$DETAILS/two-workers.md" \
                scripts/bench-proxy.sh >&2
            ;;
        idle) OUT="$DETAILS/idle.md" scripts/bench-idle.sh >&2 ;;
        passthrough) OUT="$DETAILS/passthrough.md" scripts/bench-passthrough.sh >&2 ;;
        tps)
            # shellcheck disable=SC2086 # LAB_ARGS: flags, split on purpose
            "$SLUICE_BIN" lab tps --workers 1 ${LAB_ARGS:-} --out "$DETAILS/tps" >&2
            # The report and its numbers; not every run's raw load output.
            cp "$DETAILS/tps/report.md" "$DETAILS/tps.md"
            cp "$DETAILS/tps/results.json" "$DETAILS/tps-results.json"
            rm -rf "$DETAILS/tps"
            ;;
    esac
    echo "$name $(($(date +%s) - started))" >>"$DETAILS/seconds.txt"
}

: >"$DETAILS/seconds.txt"
for name in $ONLY; do
    run "$name"
done

# The page: every ratio the reports hold, read from their tables.
python3 - "$DETAILS" "$OUT" "$(git describe --always --dirty 2>/dev/null || echo '?'); Sluice $BINARY" \
    "${COMMAND[proxy]}" "${COMMAND[nginx-backend]}" "${COMMAND[two-workers]}" \
    "${COMMAND[idle]}" "${COMMAND[passthrough]}" "${COMMAND[tps]}" <<'PY'
import os, re, sys, datetime

details, out, revision = sys.argv[1:4]
commands = dict(zip(["proxy", "nginx-backend", "two-workers", "idle", "passthrough", "tps"],
                    sys.argv[4:10]))
folder = os.path.basename(details)

def read(name):
    path = os.path.join(details, f"{name}.md")
    return open(path).read() if os.path.exists(path) else None

def table_after(text, heading):
    """The rows (cells) of the first table after a line starting with `heading`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(heading):
            rows = []
            for row in lines[i + 1:]:
                if row.startswith("|"):
                    rows.append([c.strip().strip("*") for c in row.strip("|").split("|")])
                elif rows:
                    break
            return rows[2:]  # past the header and its rule
    return []

def number(cell):
    match = re.search(r"-?[0-9][0-9,]*\.?[0-9]*", cell)
    return float(match.group(0).replace(",", "")) if match else None

rows = []  # (path, figure, vs nginx, vs haproxy, better, target, source)

if (text := read("proxy")):
    names = {"http": "HTTP/1.1 keep-alive, 1 KiB, wrk -c50", "https": "HTTPS (HTTP/1.1 over TLS), keep-alive, 1 KiB",
             "h2": "HTTP/2 over TLS, h2load -c10 -m10, 1 KiB", "grpc": "gRPC unary calls, ghz -c50 over 10 connections",
             "grpc-stream": "gRPC bidirectional streams, 100 messages a call each answered with 1 KiB"}
    targets = {"http": "≤ 0.8", "grpc": "≤ 0.7"}
    figures = {"grpc": "CPU per call", "grpc-stream": "CPU per message"}
    for cells in table_after(text, "## Sluice ÷ nginx"):
        protocol = cells[0]
        figure = figures.get(protocol, "CPU per request")
        rows.append((names.get(protocol, protocol), figure, number(cells[1]), None,
                     "lower", targets.get(protocol, "≤ 1.0"), "proxy"))
if (text := read("nginx-backend")):
    for cells in table_after(text, "## Sluice ÷ nginx"):
        rows.append(("HTTP/1.1 keep-alive, 1 KiB, 100 connections, nginx static-file backend",
                     "CPU per request", number(cells[1]), None, "lower", "≤ 0.8", "nginx-backend"))
if (text := read("two-workers")):
    for cells in table_after(text, "## Sluice ÷ nginx"):
        protocol = cells[0]
        rows.append((f"{protocol.upper()} keep-alive, 1 KiB, two workers on both CPUs (load on them too)",
                     "CPU per request", number(cells[1]), None, "lower",
                     "≤ 0.8" if protocol == "http" else "≤ 1.0", "two-workers"))
if (text := read("idle")):
    for cells in table_after(text, "## Sluice ÷ nginx, user KiB per idle connection"):
        sluice_kib, nginx_kib = number(cells[1]), number(cells[2])
        # Plain HTTP's target is absolute (nginx keeps almost nothing per idle connection).
        target = (f"within 2 KiB ({sluice_kib - nginx_kib:+.1f} KiB)" if cells[0] == "http"
                  else "≤ 1.0")
        rows.append((f"idle {cells[0]} connection ({sluice_kib} KiB vs {nginx_kib})",
                     "user memory per connection", number(cells[3]), None, "lower", target, "idle"))
if (text := read("passthrough")):
    for cells in table_after(text, "| | Sluice | HAProxy |"):
        if cells and cells[0] == "Sluice ÷ HAProxy":
            rows.append(("TLS passthrough by SNI, a connection per 1 KB request", "CPU per connection",
                         None, number(cells[1]), "lower", "≤ 1.0", "passthrough"))
if (text := read("tps")):
    for cells in table_after(text, "## Sluice ÷ nginx"):
        figure = cells[0]
        vs_haproxy = None
        heading = {"Full TLS handshakes per CPU-second, RSA-2048": "## TLS TPS, 0 KB, RSA-2048, full",
                   "Full TLS handshakes per CPU-second, ECDSA P-256": "## TLS TPS, 0 KB, ECDSA P-256, full",
                   "Resumed TLS handshakes per CPU-second, RSA-2048": "## TLS TPS, 0 KB, RSA-2048, with",
                   "Resumed TLS handshakes per CPU-second, ECDSA P-256": "## TLS TPS, 0 KB, ECDSA P-256, with"}.get(figure)
        if heading:
            per_system = {c[1]: number(c[4]) for c in table_after(text, heading) if len(c) > 4}
            if per_system.get("sluice") and per_system.get("haproxy"):
                vs_haproxy = per_system["sluice"] / per_system["haproxy"]
        target = "≥ 1.3" if figure.startswith("Full") else "—"
        rows.append((figure.replace(" per CPU-second", ""), "handshakes per CPU-second", number(cells[4]),
                     vs_haproxy, "higher", target, "tps"))

seconds = {}
if os.path.exists(os.path.join(details, "seconds.txt")):
    for line in open(os.path.join(details, "seconds.txt")):
        name, value = line.split()
        seconds[name] = int(value)

def ratio(value):
    return "—" if value is None else f"{value:.3f}"

def met(value, better, target):
    within = re.match(r"within ([0-9.]+) KiB \(([-+0-9.]+) KiB\)", target)
    if within:
        return "yes" if float(within.group(2)) <= float(within.group(1)) else "**no**"
    match = re.match(r"([≤≥]) ([0-9.]+)", target)
    if value is None or not match:
        return "—"
    bound = float(match.group(2))
    ok = value <= bound if match.group(1) == "≤" else value >= bound
    return "yes" if ok else "**no**"

with open(out, "w") as page:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page.write("# Sluice against nginx and HAProxy, every path in one page\n\n")
    page.write(f"Made by `scripts/bench-summary.sh` at {now} on {revision} ({os.cpu_count()} CPUs); "
               "each row's figure comes from the report linked in its last column, produced by the command "
               "under the table. Ratios are Sluice ÷ the peer measured in the same run; for CPU and memory "
               "lower is better, for handshakes per CPU-second higher is. Targets are issue 29's (and the "
               "earlier issues' ≤ 1.0 where it names none).\n\n")
    page.write("| path | figure | Sluice ÷ nginx | Sluice ÷ HAProxy | better | target | met | report |\n")
    page.write("|---|---|---:|---:|---|---|---|---|\n")
    for path, figure, vs_nginx, vs_haproxy, better, target, source in rows:
        judged = vs_nginx if vs_nginx is not None else vs_haproxy
        page.write(f"| {path} | {figure} | {ratio(vs_nginx)} | {ratio(vs_haproxy)} | {better} | {target} | "
                   f"{met(judged, better, target)} | [{source}]({folder}/{source}.md) |\n")
    page.write("\n## Commands\n\n")
    for name, command in commands.items():
        if name in seconds:
            page.write(f"- `{command}` ({seconds[name]} s): [{name}]({folder}/{name}.md)\n")
print(out)
PY
