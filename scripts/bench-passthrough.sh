#!/usr/bin/env bash
# TLS passthrough: Sluice (--enable-ssl-passthrough, the ssl-passthrough annotation) vs HAProxy in
# `mode tcp` routing on the ClientHello's SNI, in front of the same TLS backend. Proxy CPU time per
# connection is the headline (issue 14: target ≤ 1.0× HAProxy's).
#
#   CPU 1: sluice load, a new TLS connection per request, SNI app.example.com
#          ──▶ :18454 sluice  ──┐ (CPU 0: one worker / one thread; reads SNI, splices)
#          ──▶ :18455 haproxy ──┤
#   CPU 1: nginx :18450 (TLS, answers 1 KB) ◀──┘  the handshake is end to end: client ↔ nginx
#
# Runs alternate (sluice, haproxy, sluice, ...) so drift hits both alike. For each run the proxy's
# utime+stime is read from /proc before and after and divided by the connections completed (one
# request each). A check first: each proxy passes the backend's own certificate through.
#
# Environment:
#   DURATION=10s  ROUNDS=3  CONNECTIONS=16   per run; concurrent connections of the load
#   OUT=target/bench-passthrough.md          the Markdown report
#   SLUICE_BIN=...                           else `cargo build --release -p sluice`
#   PROXY_CPU=0  LOAD_CPU=1                  CPUs for the proxies and for load + backend
#   KEEP_WORK=1                              keep the temporary directory
#
# Everything listens on 127.0.0.1 and is stopped on exit, by recorded PID.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-16}
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
OUT=${OUT:-target/bench-passthrough.md}
PIDS=()
WORK=""
BENCH_NAME=bench-passthrough
# shellcheck source=lib/bench.sh
. "$ROOT/scripts/lib/bench.sh"

stop_everything_on_exit

for tool in nginx haproxy openssl curl taskset jq; do
    command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] ||
        die "$tool is missing (apt-get install nginx-light haproxy openssl curl util-linux jq)"
done
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY_BIN=$(command -v haproxy || echo /usr/sbin/haproxy)
if [[ -z ${SLUICE_BIN:-} ]]; then
    log "building sluice (release)"
    cargo build --release -p sluice >&2
    SLUICE_BIN=$ROOT/target/release/sluice
fi
WORK=$(mktemp -d /tmp/sluice-bench-passthrough.XXXXXX)

# --- the TLS backend: nginx answering 1 KB over TLS --------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$HOST" \
    -addext "subjectAltName=DNS:$HOST" -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
mkdir -p "$WORK/nginx"
BODY=$(head -c 1024 /dev/zero | tr '\0' 'x')
cat >"$WORK/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$BACKEND_PORT ssl;
        ssl_certificate $WORK/tls.crt;
        ssl_certificate_key $WORK/tls.key;
        location / { return 200 "$BODY"; }
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

rows=()
declare -A total_cpu total_conns
for ((round = 1; round <= ROUNDS; round++)); do
    for system in sluice haproxy; do
        port=$(port_of "$system")
        pid=$(pid_of "$system")
        read -r user0 sys0 < <(cpu_ticks "$pid")
        taskset -c "$LOAD_CPU" "$SLUICE_BIN" load -t 1 -c "$CONNECTIONS" -d "$DURATION" \
            --new-connection-per-request --insecure -H "Host: $HOST" \
            --json "$WORK/$system-$round.json" "https://127.0.0.1:$port/1kb.bin" >"$WORK/$system-$round.txt" 2>&1 ||
            die "$system run $round failed: $(tail -n 3 "$WORK/$system-$round.txt")"
        read -r user1 sys1 < <(cpu_ticks "$pid")
        conns=$(jq '.requests' "$WORK/$system-$round.json")
        errors=$(jq '[.errors | to_entries[] | .value] | add // 0' "$WORK/$system-$round.json")
        ok=$(jq '.status_codes["200"] // 0' "$WORK/$system-$round.json")
        ((ok == conns && errors == 0)) || die "$system run $round: $ok of $conns answered 200, $errors errors"
        ticks=$((user1 + sys1 - user0 - sys0))
        per=$(awk -v t="$ticks" -v hz="$CLK_TCK" -v n="$conns" 'BEGIN { printf "%.2f", t / hz / n * 1e6 }')
        rate=$(jq '.achieved_rate | floor' "$WORK/$system-$round.json")
        rows+=("| $system | $round | $rate | $conns | $(awk -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }') | $per | $errors |")
        total_cpu[$system]=$((${total_cpu[$system]:-0} + ticks))
        total_conns[$system]=$((${total_conns[$system]:-0} + conns))
        log "$system round $round: $conns connections, $per µs CPU each"
    done
done

per_conn() { awk -v t="${total_cpu[$1]}" -v hz="$CLK_TCK" -v n="${total_conns[$1]}" 'BEGIN { printf "%.2f", t / hz / n * 1e6 }'; }
sluice_us=$(per_conn sluice)
haproxy_us=$(per_conn haproxy)
ratio=$(awk -v a="$sluice_us" -v b="$haproxy_us" 'BEGIN { printf "%.3f", a / b }')
mkdir -p "$(dirname "$OUT")"
{
    echo "# TLS passthrough: Sluice vs HAProxy mode tcp, proxy CPU per connection"
    echo
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs; sluice $(git describe --always --dirty 2>/dev/null || echo '?'), $("$HAPROXY_BIN" -v | head -n1)"
    echo "- a new TLS connection per request (full handshake end to end with nginx, RSA-2048), 1 KB answer; $CONNECTIONS concurrent, ${DURATION} × $ROUNDS rounds each, alternating; proxies on CPU $PROXY_CPU, load and backend on CPU $LOAD_CPU"
    echo
    echo "| | Sluice | HAProxy |"
    echo "|---|---:|---:|"
    echo "| CPU µs per connection | $sluice_us | $haproxy_us |"
    echo "| **Sluice ÷ HAProxy** | **$ratio** | |"
    echo
    echo "| system | round | conn/s | connections | proxy CPU s | CPU µs/conn | errors |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} >"$OUT"
cat "$OUT"
