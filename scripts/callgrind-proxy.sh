#!/usr/bin/env bash
# User-space instructions per proxied request, counted by callgrind: a figure that does not move
# with the machine's load, so two builds can be compared on a shared 2-CPU VM where CPU time
# per request (scripts/bench-proxy.sh) has a spread of several percent.
#
#   sluice load -R RATE -d DURATION ──HTTP/1.1 keep-alive──▶ sluice serve (under callgrind,
#   instrumented only while the load runs) ──pooled──▶ sluice backend
#
# Each binary serves the same one-Ingress config (Prefix /, one endpoint, access log off, as
# bench-proxy's plain case). Instrumentation is switched on after a warm-up (connections pooled)
# and off when the load ends, so start-up and shut-down are not counted; what is counted is the
# requests plus the worker's timers in that window.
#
# Usage: scripts/callgrind-proxy.sh BIN [BIN ...]
#   RATE=300 DURATION=20s   open-loop rate and length (callgrind runs ~50x slower than native;
#                           300/s keeps the proxy well below saturation)
#   OUT=DIR                 keep callgrind files there (default: a temporary directory)
#   HTTP2=1                 the client speaks HTTP/2 with prior knowledge (h2c, `use-h2c` on):
#                           the proxy's HTTP/2 server instead of its HTTP/1.1 one; the upstream
#                           stays HTTP/1.1
#   HTTPS=1                 the client speaks HTTPS (TLS 1.3, a self-signed RSA-2048 certificate
#                           on the Ingress, sessions kept: the -c10 connections handshake once,
#                           in the warm-up); with HTTP2=1, HTTP/2 over TLS (ALPN h2)
#   BACKEND=nginx           Debian's nginx serving /1kb.bin from a file instead of `sluice
#                           backend`, as bench-proxy's BACKEND=nginx: its responses carry 8
#                           headers (Server, Date, Content-Type, Content-Length, Last-Modified,
#                           Connection, ETag, Accept-Ranges) against the Sluice backend's 3, so
#                           the per-header cost of the response path shows
# Prints one line per binary: requests, instructions, instructions per request, and the
# callgrind file (`callgrind_annotate --auto=no FILE` shows where they go).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/nginx.sh
. scripts/lib/nginx.sh

(($# > 0)) || { echo "usage: $0 BIN [BIN ...]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "callgrind-proxy: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
RATE=${RATE:-300}
LOAD_ARGS=()
USE_H2C=false
if [[ ${HTTP2:-} == 1 ]]; then
    LOAD_ARGS+=(--http2)
    USE_H2C=true
fi
SCHEME=http
if [[ ${HTTPS:-} == 1 ]]; then
    command -v openssl >/dev/null || { echo "callgrind-proxy: HTTPS=1 needs openssl" >&2; exit 1; }
    SCHEME=https
    LOAD_ARGS+=(--insecure)
    USE_H2C=false
fi
DURATION=${DURATION:-20s}
BACKEND=${BACKEND:-sluice}
case $BACKEND in
    sluice) TARGET_PATH=/ ;;
    nginx)
        TARGET_PATH=/1kb.bin
        NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
        [[ -x $NGINX_BIN ]] || { echo "callgrind-proxy: BACKEND=nginx needs nginx (apt-get install nginx-light)" >&2; exit 1; }
        ;;
    *) echo "callgrind-proxy: BACKEND must be sluice or nginx, not '$BACKEND'" >&2; exit 2 ;;
esac
WORK=$(mktemp -d)
OUT=${OUT:-$WORK}
mkdir -p "$OUT"
BACKEND_PORT=${BACKEND_PORT:-18180}
HTTP_PORT=${HTTP_PORT:-18190}
ADMIN_PORT=${ADMIN_PORT:-18191}
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [[ $OUT == "$WORK" ]] || rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/config"
if [[ $SCHEME == https ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=bench.test \
        -addext subjectAltName=DNS:bench.test -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
    {
        printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: app-tls, namespace: default}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n'
        sed 's/^/    /' "$WORK/tls.crt"
        printf '  tls.key: |\n'
        sed 's/^/    /' "$WORK/tls.key"
    } >"$WORK/config/tls.yaml"
fi
cat >"$WORK/config/all.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: sluice, namespace: sluice}
data: {keepalive: "100", keep-alive-requests: "100000000", ssl-redirect: "false", disable-access-log: "true", use-h2c: "${USE_H2C}"}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec:
  ports: [{name: http, port: 80, protocol: TCP, targetPort: $BACKEND_PORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: default, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: $BACKEND_PORT, protocol: TCP}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: app, namespace: default}
spec:
  ingressClassName: sluice
$([[ $SCHEME == https ]] && printf '  tls: [{hosts: [bench.test], secretName: app-tls}]\n')
  rules:
    - host: bench.test
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
EOF

wait_ready() {
    for _ in $(seq 1 240); do
        curl -fsS "$1" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    echo "callgrind-proxy: $1 never answered" >&2
    return 1
}

LOAD_BIN=$1
if [[ $BACKEND == nginx ]]; then
    dir=$WORK/backend-nginx
    mkdir -p "$dir/root" "$dir/tmp"
    head -c 1024 /dev/zero | tr '\0' b >"$dir/root/1kb.bin"
    # Started as root, the worker runs as nobody and must read the file.
    chmod 755 "$WORK" "$dir" "$dir/root" "$dir/tmp"
    chmod 644 "$dir/root/1kb.bin"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1000; }
http {
    access_log off;
$(nginx_http_common "$dir")
    server {
        listen 127.0.0.1:$BACKEND_PORT;
        root $dir/root;
        location = /healthz { return 200 "ok\n"; }
    }
}
EOF
    "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout.log" 2>&1 &
else
    "$LOAD_BIN" backend --listen "127.0.0.1:$BACKEND_PORT" --name callgrind >"$WORK/backend.log" 2>&1 &
fi
PIDS+=($!)
wait_ready "http://127.0.0.1:$BACKEND_PORT/healthz"

n=0
for bin in "$@"; do
    n=$((n + 1))
    label="$n-$(basename "$bin")"
    file="$OUT/$label.callgrind"
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$file" \
        "$bin" serve --config "$WORK/config" --http-listen "127.0.0.1:$HTTP_PORT" \
        --https-listen "127.0.0.1:$((HTTP_PORT + 2))" --admin-listen "127.0.0.1:$ADMIN_PORT" \
        --workers 1 >"$OUT/$label.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_ready "http://127.0.0.1:$ADMIN_PORT/ready" || { grep -v "^==" "$OUT/$label.log" | tail -5 >&2; exit 1; }
    port=$HTTP_PORT
    [[ $SCHEME == http ]] || port=$((HTTP_PORT + 2))
    target="$SCHEME://127.0.0.1:$port$TARGET_PATH"
    "$LOAD_BIN" load "${LOAD_ARGS[@]}" -t1 -c10 -R 100 -d 3s -H 'Host: bench.test' "$target" >/dev/null
    callgrind_control -i on "$pid" >/dev/null 2>&1
    "$LOAD_BIN" load "${LOAD_ARGS[@]}" -t1 -c10 -R "$RATE" -d "$DURATION" -H 'Host: bench.test' \
        "$target" >"$OUT/$label.load"
    callgrind_control -i off "$pid" >/dev/null 2>&1
    kill -TERM "$pid"
    wait "$pid" || true
    requests=$(awk '/ requests in / && !done {print $1; done = 1}' "$OUT/$label.load")
    failed=$(grep -ciE "non-2xx|socket errors|timeouts" "$OUT/$label.load" || true)
    instructions=$(callgrind_annotate --auto=no "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done {gsub(",", "", $1); print $1; done = 1}')
    [[ -n $requests && -n $instructions ]] || { echo "callgrind-proxy: no figures for $bin (see $WORK)" >&2; exit 1; }
    ((failed == 0)) || echo "callgrind-proxy: $bin: the load reported errors: $(grep -iE 'non-2xx|socket errors|timeouts' "$OUT/$label.load")" >&2
    printf '%s: %s requests, %s instructions, %.0f per request (%s)\n' \
        "$bin" "$requests" "$instructions" "$(echo "$instructions / $requests" | bc -l)" "$file"
done
