#!/usr/bin/env bash
# TLS passthrough: Sluice (--enable-ssl-passthrough, the ssl-passthrough annotation) vs HAProxy in
# `mode tcp` routing on the ClientHello's SNI, in front of the same TLS backend. Two shapes:
#
#   SHAPE=handshake (default): a new TLS connection per request, 1 KB answer; proxy CPU time per
#     connection is the headline (issue 14: target ≤ 1.0× HAProxy's).
#   SHAPE=throughput: a few long-lived keep-alive connections fetching large bodies (SIZES, 1 MiB
#     and 16 MiB by default); MiB/s through each proxy and its CPU time per MiB.
#
#   CPU 1: sluice load, SNI app.example.com
#          ──▶ :18454 sluice  ──┐ (CPU 0: one worker / one thread; reads SNI, splices)
#          ──▶ :18455 haproxy ──┤
#   CPU 1: nginx :18450 (TLS)  ◀┘  the TLS session is end to end: client ↔ nginx
#
# Runs alternate (sluice, haproxy, sluice, ...) so drift hits both alike. For each run the proxy's
# utime+stime is read from /proc before and after and divided by the connections completed (one
# request each), or by the MiB the client received. A check first: each proxy passes the
# backend's own certificate through.
#
# Environment:
#   SHAPE=handshake|throughput
#   DURATION=10s  ROUNDS=3  CONNECTIONS=16   per run; concurrent connections of the load
#                                            (throughput: CONNECTIONS=4 unless set)
#   SIZES="1048576 16777216"                 throughput: body sizes in bytes, a run each
#   STRACE=1                                 handshake: also count each proxy's system calls
#                                            per connection (strace -c -f, one extra run each)
#   OUT=target/bench-passthrough[-throughput].md   the Markdown report
#   SLUICE_BIN=...                           else `cargo build --release -p sluice`
#   PROXY_CPU=0  LOAD_CPU=1                  CPUs for the proxies and for load + backend
#   KEEP_WORK=1                              keep the temporary directory
#
# Everything listens on 127.0.0.1 and is stopped on exit, by recorded PID.
set -euo pipefail

SHAPE=${SHAPE:-handshake}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
case $SHAPE in
handshake) CONNECTIONS=${CONNECTIONS:-16} ;;
throughput) CONNECTIONS=${CONNECTIONS:-4} ;;
*) echo "SHAPE must be handshake or throughput, not $SHAPE" >&2 && exit 2 ;;
esac
SIZES=${SIZES:-1048576 16777216}
STRACE=${STRACE:-0}
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
KEEP_WORK=${KEEP_WORK:-0}
HOST=app.example.com
BACKEND_PORT=18450
SLUICE_HTTPS=18454
SLUICE_HTTP=18084
SLUICE_ADMIN=19114
HAPROXY_PORT=18455

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
if [[ $SHAPE == throughput ]]; then
    OUT=${OUT:-target/bench-passthrough-throughput.md}
else
    OUT=${OUT:-target/bench-passthrough.md}
fi
PIDS=()
WORK=""
BENCH_NAME=bench-passthrough
# shellcheck source=lib/bench.sh
. "$ROOT/scripts/lib/bench.sh"

stop_everything_on_exit

tools=(nginx haproxy openssl curl taskset jq)
[[ $STRACE == 1 ]] && tools+=(strace)
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] ||
        die "$tool is missing (apt-get install nginx-light haproxy openssl curl util-linux jq)"
done
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY_BIN=$(command -v haproxy || echo /usr/sbin/haproxy)
if [[ -z ${SLUICE_BIN:-} ]]; then
    log "building sluice (release)"
    SLUICE_BIN=$(release_sluice)
fi
WORK=$(mktemp -d /tmp/sluice-bench-passthrough.XXXXXX)

# --- the TLS backend: nginx answering 1 KB, or the large bodies, over TLS ----------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$HOST" \
    -addext "subjectAltName=DNS:$HOST" -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
mkdir -p "$WORK/nginx" "$WORK/www/bytes"
BODY=$(head -c 1024 /dev/zero | tr '\0' 'x')
if [[ $SHAPE == throughput ]]; then
    for size in $SIZES; do
        head -c "$size" /dev/urandom >"$WORK/www/bytes/$size.bin"
    done
    # nginx's workers run unprivileged; mktemp made the directory private.
    chmod a+x "$WORK"
    chmod -R a+rX "$WORK/www"
fi
cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    server {
        listen 127.0.0.1:$BACKEND_PORT ssl;
        ssl_certificate $WORK/tls.crt;
        ssl_certificate_key $WORK/tls.key;
        location / { return 200 "$BODY"; }
        location /bytes/ { root $WORK/www; }
    }
}
EOF
taskset -c "$LOAD_CPU" "$NGINX_BIN" -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" >"$WORK/nginx.log" 2>&1 &
PIDS+=($!)
wait_until "backend nginx" "${PIDS[-1]}" curl -fsSk --resolve "$HOST:$BACKEND_PORT:127.0.0.1" \
    "https://$HOST:$BACKEND_PORT/1kb.bin"

# --- Sluice: an Ingress with ssl-passthrough to the backend ------------------------------------
mkdir -p "$WORK/sluice"
cat >"$WORK/sluice/app.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec: {ports: [{name: https, port: 443}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: default, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: https, port: $BACKEND_PORT}]
endpoints: [{addresses: ["127.0.0.1"]}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: default
  annotations: {nginx.ingress.kubernetes.io/ssl-passthrough: "true"}
spec:
  ingressClassName: sluice
  rules:
  - host: $HOST
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {name: https}}}}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: sluice, namespace: sluice}
data: {disable-access-log: "true"}
EOF
taskset -c "$PROXY_CPU" "$SLUICE_BIN" serve --config "$WORK/sluice" --enable-ssl-passthrough \
    --http-listen "127.0.0.1:$SLUICE_HTTP" --https-listen "127.0.0.1:$SLUICE_HTTPS" \
    --admin-listen "127.0.0.1:$SLUICE_ADMIN" --status-listen 127.0.0.1:0 --workers 1 \
    >"$WORK/sluice.log" 2>&1 &
SLUICE_PID=$!
PIDS+=("$SLUICE_PID")
wait_until "sluice" "$SLUICE_PID" curl -fsS "http://127.0.0.1:$SLUICE_ADMIN/ready"

# --- HAProxy: mode tcp, routed on the ClientHello's SNI ----------------------------------------
cat >"$WORK/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4000
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend tls
    bind 127.0.0.1:$HAPROXY_PORT
    tcp-request inspect-delay 5s
    tcp-request content accept if { req_ssl_hello_type 1 }
    use_backend app if { req_ssl_sni -i $HOST }
backend app
    server app 127.0.0.1:$BACKEND_PORT
EOF
taskset -c "$PROXY_CPU" "$HAPROXY_BIN" -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
HAPROXY_PID=$!
PIDS+=("$HAPROXY_PID")

port_of() { case $1 in sluice) echo "$SLUICE_HTTPS" ;; haproxy) echo "$HAPROXY_PORT" ;; esac; }
pid_of() { case $1 in sluice) echo "$SLUICE_PID" ;; haproxy) echo "$HAPROXY_PID" ;; esac; }

# Each must pass the backend's own certificate through (the handshake is with nginx).
for system in sluice haproxy; do
    port=$(port_of "$system")
    wait_until "$system" "$(pid_of "$system")" curl -fsS --cacert "$WORK/tls.crt" \
        --resolve "$HOST:$port:127.0.0.1" -o /dev/null "https://$HOST:$port/1kb.bin"
    log "$system passes $HOST through to the backend's certificate"
done

CLK_TCK=$(getconf CLK_TCK)
describe() { echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs; sluice $(git describe --always --dirty 2>/dev/null || echo '?'), $("$HAPROXY_BIN" -v | head -n1)"; }

# load SYSTEM NAME EXTRA-ARGS...: one run of the load generator against SYSTEM's port, results in
# $WORK/NAME.json; fails unless every request was answered 200 without an error. Sets TICKS (the
# proxy's CPU ticks during the run).
load() {
    local system=$1 name=$2 port pid user0 sys0 user1 sys1 requests errors ok
    shift 2
    port=$(port_of "$system")
    pid=$(pid_of "$system")
    read -r user0 sys0 < <(cpu_ticks "$pid")
    taskset -c "$LOAD_CPU" "$SLUICE_BIN" load -t 1 -c "$CONNECTIONS" -d "$DURATION" --insecure \
        -H "Host: $HOST" --json "$WORK/$name.json" "$@" >"$WORK/$name.txt" 2>&1 ||
        die "$system run $name failed: $(tail -n 3 "$WORK/$name.txt")"
    read -r user1 sys1 < <(cpu_ticks "$pid")
    requests=$(jq '.requests' "$WORK/$name.json")
    errors=$(jq '[.errors | to_entries[] | .value] | add // 0' "$WORK/$name.json")
    ok=$(jq '.status_codes["200"] // 0' "$WORK/$name.json")
    ((ok == requests && errors == 0 && requests > 0)) ||
        die "$system run $name: $ok of $requests answered 200, $errors errors"
    TICKS=$((user1 + sys1 - user0 - sys0))
}

seconds() { awk -v t="$1" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

rows=()
declare -A total_cpu total_units
mkdir -p "$(dirname "$OUT")"

if [[ $SHAPE == handshake ]]; then
    for ((round = 1; round <= ROUNDS; round++)); do
        for system in sluice haproxy; do
            load "$system" "$system-$round" --new-connection-per-request \
                "https://127.0.0.1:$(port_of "$system")/1kb.bin"
            conns=$(jq '.requests' "$WORK/$system-$round.json")
            per=$(awk -v t="$TICKS" -v hz="$CLK_TCK" -v n="$conns" 'BEGIN { printf "%.2f", t / hz / n * 1e6 }')
            rate=$(jq '.achieved_rate | floor' "$WORK/$system-$round.json")
            rows+=("| $system | $round | $rate | $conns | $(seconds "$TICKS") | $per | 0 |")
            total_cpu[$system]=$((${total_cpu[$system]:-0} + TICKS))
            total_units[$system]=$((${total_units[$system]:-0} + conns))
            log "$system round $round: $conns connections, $per µs CPU each"
        done
    done
    per_conn() { awk -v t="${total_cpu[$1]}" -v hz="$CLK_TCK" -v n="${total_units[$1]}" 'BEGIN { printf "%.2f", t / hz / n * 1e6 }'; }
    sluice_us=$(per_conn sluice)
    haproxy_us=$(per_conn haproxy)
    syscalls=()
    if [[ $STRACE == 1 ]]; then
        # One more run each under strace -c -f: system calls per connection, by name. strace
        # slows the proxy down, so these runs count calls and are left out of the CPU figures.
        declare -A counts
        for system in sluice haproxy; do
            # Every thread of the process (Sluice's workers are threads).
            attach=()
            for task in /proc/"$(pid_of "$system")"/task/*; do attach+=(-p "${task##*/}"); done
            strace -c -f -o "$WORK/$system.strace" "${attach[@]}" 2>/dev/null &
            STRACE_PID=$!
            PIDS+=("$STRACE_PID")
            sleep 1
            load "$system" "$system-strace" --new-connection-per-request \
                "https://127.0.0.1:$(port_of "$system")/1kb.bin"
            stop_pid "$STRACE_PID"
            unset 'PIDS[-1]'
            conns=$(jq '.requests' "$WORK/$system-strace.json")
            # strace -c: "% time seconds usecs/call calls [errors] syscall", then a total line.
            while read -r name calls; do
                counts[$system:$name]=$(awk -v c="$calls" -v n="$conns" 'BEGIN { printf "%.2f", c / n }')
            done < <(awk '$1 ~ /^[0-9.]+$/ && NF >= 5 { print $NF, $4 }' "$WORK/$system.strace")
            counts[$system:total]=$(awk -v n="$conns" '$NF == "total" { printf "%.2f", $4 / n }' "$WORK/$system.strace")
        done
        names=$(printf '%s\n' "${!counts[@]}" | cut -d: -f2 | sort -u | grep -vx total)
        syscalls+=("| system call | Sluice per connection | HAProxy per connection |" "|---|---:|---:|")
        for name in $names; do
            syscalls+=("| $name | ${counts[sluice:$name]:-0} | ${counts[haproxy:$name]:-0} |")
        done
        syscalls+=("| **all** | **${counts[sluice:total]:-?}** | **${counts[haproxy:total]:-?}** |")
    fi
    {
        echo "# TLS passthrough: Sluice vs HAProxy mode tcp, proxy CPU per connection"
        echo
        describe
        echo "- a new TLS connection per request (full handshake end to end with nginx, RSA-2048), 1 KB answer; $CONNECTIONS concurrent, ${DURATION} × $ROUNDS rounds each, alternating; proxies on CPU $PROXY_CPU, load and backend on CPU $LOAD_CPU"
        echo
        echo "| | Sluice | HAProxy |"
        echo "|---|---:|---:|"
        echo "| CPU µs per connection | $sluice_us | $haproxy_us |"
        echo "| **Sluice ÷ HAProxy** | **$(ratio "$sluice_us" "$haproxy_us")** | |"
        echo
        echo "| system | round | conn/s | connections | proxy CPU s | CPU µs/conn | errors |"
        echo "|---|---:|---:|---:|---:|---:|---:|"
        printf '%s\n' "${rows[@]}"
        if ((${#syscalls[@]})); then
            echo
            printf '%s\n' "${syscalls[@]}"
        fi
    } >"$OUT"
else
    summary=()
    for size in $SIZES; do
        mib=$(awk -v s="$size" 'BEGIN { printf "%g", s / 1048576 }')
        declare -A size_cpu=() size_bytes=() size_secs=()
        for ((round = 1; round <= ROUNDS; round++)); do
            for system in sluice haproxy; do
                name="$system-$size-$round"
                load "$system" "$name" --timeout 30s \
                    "https://127.0.0.1:$(port_of "$system")/bytes/$size.bin"
                bytes=$(jq '.bytes_read' "$WORK/$name.json")
                elapsed=$(jq '.elapsed_secs' "$WORK/$name.json")
                requests=$(jq '.requests' "$WORK/$name.json")
                rate=$(awk -v b="$bytes" -v s="$elapsed" 'BEGIN { printf "%.0f", b / 1048576 / s }')
                per=$(awk -v t="$TICKS" -v hz="$CLK_TCK" -v b="$bytes" 'BEGIN { printf "%.1f", t / hz / (b / 1048576) * 1e6 }')
                rows+=("| $system | $mib MiB | $round | $requests | $rate | $(seconds "$TICKS") | $per |")
                size_cpu[$system]=$((${size_cpu[$system]:-0} + TICKS))
                size_bytes[$system]=$((${size_bytes[$system]:-0} + bytes))
                size_secs[$system]=$(awk -v a="${size_secs[$system]:-0}" -v b="$elapsed" 'BEGIN { print a + b }')
                log "$system $mib MiB round $round: $rate MiB/s, $per µs CPU per MiB"
            done
        done
        per_mib() { awk -v t="${size_cpu[$1]}" -v hz="$CLK_TCK" -v b="${size_bytes[$1]}" 'BEGIN { printf "%.1f", t / hz / (b / 1048576) * 1e6 }'; }
        speed() { awk -v b="${size_bytes[$1]}" -v s="${size_secs[$1]}" 'BEGIN { printf "%.0f", b / 1048576 / s }'; }
        s_us=$(per_mib sluice)
        h_us=$(per_mib haproxy)
        summary+=("| $mib MiB | $(speed sluice) | $(speed haproxy) | $s_us | $h_us | **$(ratio "$s_us" "$h_us")** |")
    done
    {
        echo "# TLS passthrough throughput: Sluice vs HAProxy mode tcp, proxy CPU per MiB"
        echo
        describe
        echo "- $CONNECTIONS long-lived TLS connections (keep-alive, end to end with nginx), each fetching one body after another; ${DURATION} × $ROUNDS rounds per size and proxy, alternating; proxies on CPU $PROXY_CPU, load and backend on CPU $LOAD_CPU (which bounds MiB/s: TLS on both ends is there)"
        echo
        echo "| body | Sluice MiB/s | HAProxy MiB/s | Sluice CPU µs/MiB | HAProxy CPU µs/MiB | Sluice ÷ HAProxy (CPU per MiB) |"
        echo "|---|---:|---:|---:|---:|---:|"
        printf '%s\n' "${summary[@]}"
        echo
        echo "| system | body | round | requests | MiB/s | proxy CPU s | CPU µs/MiB |"
        echo "|---|---|---:|---:|---:|---:|---:|"
        printf '%s\n' "${rows[@]}"
    } >"$OUT"
fi
cat "$OUT"
