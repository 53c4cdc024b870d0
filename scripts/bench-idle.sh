#!/usr/bin/env bash
# Memory per idle client connection: Sluice vs nginx, same workers, same machine (issue 15).
#
#   scripts/bench-idle.sh                  N=10000 idle connections of each kind
#   N=2000 KINDS="http https" scripts/bench-idle.sh
#
# For each system and kind (http: plain HTTP/1.1; https: HTTP/1.1 over TLS; h2: HTTP/2 over TLS),
# a fresh proxy is started, `sluice load --hold-idle` opens N keep-alive connections through it
# to the backend, each completes one GET of a 1 KB file, and all are then held open and idle.
# Reported, from /proc:
#   - the proxy's resident memory (VmRSS; nginx: master + workers) before and while holding,
#     divided by the connections held: user-space bytes per idle connection;
#   - the kernel's TCP memory (/proc/net/sockstat "mem", pages, this network namespace) before
#     and while holding, divided by the connections: socket buffers per idle connection, both
#     ends together (client and proxy sockets are on this machine).
# Knobs: N, KINDS="http https h2", SYSTEMS="sluice nginx", WORKERS=1, HOLD=5s,
# SLUICE_BIN (default: cargo build --release), OUT=target/bench-idle.md, KEEP_WORK=1.
#
# N is bounded by the open-files hard limit (each side needs N descriptors): the script says
# so and stops if it is lower. Everything listens on 127.0.0.1; everything started here is
# stopped on exit, by recorded PID.
set -euo pipefail

N=${N:-10000}
KINDS=${KINDS:-http https h2}
SYSTEMS=${SYSTEMS:-sluice nginx}
WORKERS=${WORKERS:-1}
HOLD=${HOLD:-5s}
KEEP_WORK=${KEEP_WORK:-0}
BACKEND_PORT=18180
NGINX_HTTP=18181
NGINX_HTTPS=18543
SLUICE_HTTP=18182
SLUICE_HTTPS=18544
SLUICE_ADMIN=19213
HOST=app.example.com

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-target/bench-idle.md}

PIDS=()
WORK=""
BENCH_NAME=bench-idle
# shellcheck source=lib/bench.sh
. "$ROOT/scripts/lib/bench.sh"
# shellcheck source=lib/nginx.sh
. "$ROOT/scripts/lib/nginx.sh"

stop_everything_on_exit

hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < N + 1000)); then
    die "N=$N needs an open-files hard limit of at least $((N + 1000)); this shell's is $hard (set N lower)"
fi
ulimit -Sn "$hard"

if [[ -n ${SLUICE_BIN:-} ]]; then
    [[ -x $SLUICE_BIN ]] || die "SLUICE_BIN=$SLUICE_BIN is not executable"
else
    log "building sluice (release)"
    SLUICE_BIN=$(release_sluice)
fi
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX_BIN ]] || die "nginx not found (apt-get install nginx-light)"
command -v openssl >/dev/null || die "openssl not found"
command -v curl >/dev/null || die "curl not found"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench-idle.XXXXXX")
chmod 755 "$WORK"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$HOST" -addext "subjectAltName=DNS:$HOST" \
    -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
head -c 1024 /dev/zero >"$WORK/1kb.bin"

"$SLUICE_BIN" backend --listen "127.0.0.1:$BACKEND_PORT" --name bench >"$WORK/backend.log" 2>&1 &
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
wait_until backend "$BACKEND_PID" curl -fsS "http://127.0.0.1:$BACKEND_PORT/1kb.bin"

# RSS (KiB) of a process and its children (nginx's workers).
rss_kib() {
    local pid=$1 total=0 child
    for child in $pid $(pgrep -P "$pid" || true); do
        total=$((total + $(awk '/^VmRSS:/ {print $2}' "/proc/$child/status" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
tcp_mem_pages() { awk '/^TCP:/ {for (i = 1; i < NF; i++) if ($i == "mem") print $(i + 1)}' /proc/net/sockstat; }

start_nginx() {
    local dir=$WORK/nginx
    rm -rf "$dir"
    mkdir -p "$dir/tmp"
    chmod 755 "$dir" "$dir/tmp"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes $WORKERS;
worker_rlimit_nofile $((N * 2 + 1000));
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections $((N * 2 + 1000)); }
http {
    access_log off;
$(nginx_http_common "$dir")
    upstream app { server 127.0.0.1:$BACKEND_PORT; keepalive 100; }
    server {
        listen 127.0.0.1:$NGINX_HTTP;
        listen 127.0.0.1:$NGINX_HTTPS ssl http2;
        server_name $HOST;
        ssl_certificate $WORK/tls.crt;
        ssl_certificate_key $WORK/tls.key;
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
    "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    wait_until nginx "$PROXY_PID" curl -fsS -H "Host: $HOST" "http://127.0.0.1:$NGINX_HTTP/1kb.bin"
    HTTP_PORT=$NGINX_HTTP HTTPS_PORT=$NGINX_HTTPS
}

start_sluice() {
    local dir=$WORK/sluice b64
    rm -rf "$dir"
    mkdir -p "$dir"
    b64() { base64 -w0 <"$1"; }
    cat >"$dir/objects.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: sluice, namespace: sluice}
data:
  ssl-redirect: "false"
  disable-access-log: "true"
  max-worker-connections: "$((N * 2 + 1000))"
  keep-alive-requests: "100000000"
---
apiVersion: v1
kind: Secret
metadata: {name: app-tls, namespace: default}
type: kubernetes.io/tls
data: {tls.crt: $(b64 "$WORK/tls.crt"), tls.key: $(b64 "$WORK/tls.key")}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec: {ports: [{name: http, port: 80, targetPort: $BACKEND_PORT}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: default, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: $BACKEND_PORT}]
endpoints: [{addresses: [127.0.0.1]}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: app, namespace: default}
spec:
  ingressClassName: sluice
  tls: [{hosts: [$HOST], secretName: app-tls}]
  rules:
    - host: $HOST
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {name: http}}}}]}
EOF
    "$SLUICE_BIN" serve --config "$dir" --workers "$WORKERS" \
        --http-listen "127.0.0.1:$SLUICE_HTTP" --https-listen "127.0.0.1:$SLUICE_HTTPS" \
        --admin-listen "127.0.0.1:$SLUICE_ADMIN" --status-listen 127.0.0.1:0 \
        >"$WORK/sluice.log" 2>&1 &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    wait_until sluice "$PROXY_PID" curl -fsS "http://127.0.0.1:$SLUICE_ADMIN/ready"
    HTTP_PORT=$SLUICE_HTTP HTTPS_PORT=$SLUICE_HTTPS
}

# measure SYSTEM KIND: one fresh proxy, N idle connections; appends a row to $WORK/rows.
measure() {
    local system=$1 kind=$2 url flags=() before tcp_before after tcp_after line open
    "start_$system"
    case $kind in
        http) url="http://127.0.0.1:$HTTP_PORT/1kb.bin" ;;
        https) url="https://127.0.0.1:$HTTPS_PORT/1kb.bin" ;;
        h2) url="https://127.0.0.1:$HTTPS_PORT/1kb.bin" flags=(--http2) ;;
    esac
    # One request first, so lazily built state (TLS contexts, upstream pool) is in "before".
    curl -fsS -k -H "Host: $HOST" --resolve "$HOST:$HTTPS_PORT:127.0.0.1" "https://$HOST:$HTTPS_PORT/1kb.bin" -o /dev/null
    sleep 1
    before=$(rss_kib "$PROXY_PID")
    tcp_before=$(tcp_mem_pages)
    local fifo=$WORK/load-$system-$kind.out
    "$SLUICE_BIN" load --hold-idle -c "$N" -t 2 -d "$HOLD" --timeout 30s -H "Host: $HOST" \
        --insecure "${flags[@]}" "$url" >"$fifo" 2>"$WORK/load-$system-$kind.err" &
    local load_pid=$!
    PIDS+=("$load_pid")
    local i
    for ((i = 0; i < 600; i++)); do
        grep -q '^idle: ' "$fifo" 2>/dev/null && break
        kill -0 "$load_pid" 2>/dev/null || die "sluice load exited early: $(cat "$WORK/load-$system-$kind.err")"
        sleep 0.1
    done
    line=$(grep '^idle: ' "$fifo") || die "no idle line from sluice load after 60 s"
    sleep 1
    after=$(rss_kib "$PROXY_PID")
    tcp_after=$(tcp_mem_pages)
    open=$(awk '{print $2}' <<<"$line")
    wait "$load_pid" || true
    stop_pid "$PROXY_PID"
    ((open > 0)) || die "$system $kind: no connection held ($line)"
    log "$system $kind: $line; RSS ${before} → ${after} KiB; TCP mem ${tcp_before} → ${tcp_after} pages"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$system" "$kind" "$open" "$before" "$after" \
        "$tcp_before" "$tcp_after" >>"$WORK/rows"
}

: >"$WORK/rows"
for kind in $KINDS; do
    for system in $SYSTEMS; do
        measure "$system" "$kind"
    done
done

mkdir -p "$(dirname "$OUT")"
{
    echo "# Memory per idle client connection: Sluice vs nginx"
    echo
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $("$NGINX_BIN" -v 2>&1), $("$SLUICE_BIN" --version)"
    echo "- N=$N connections per run, each after one GET of 1 KB, held idle $HOLD; $WORKERS worker(s); a fresh proxy per run"
    echo "- user space: the proxy's VmRSS while holding minus before, per connection; kernel: TCP socket memory"
    echo "  (/proc/net/sockstat, both ends of each connection) while holding minus before, per connection"
    echo
    echo "| system | kind | held | RSS before KiB | RSS holding KiB | **user KiB/conn** | kernel KiB/conn |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    awk -F'\t' '{
        user = ($5 - $4) / $3; kernel = ($7 - $6) * 4 / $3;
        printf "| %s | %s | %d | %d | %d | **%.1f** | %.1f |\n", $1, $2, $3, $4, $5, user, kernel
    }' "$WORK/rows"
    echo
    echo "## Sluice ÷ nginx, user KiB per idle connection"
    echo
    echo "| kind | Sluice | nginx | ratio (TLS target ≤ 1.0; plain: within 2 KiB) |"
    echo "|---|---:|---:|---:|"
    awk -F'\t' '{ user[$1 "\t" $2] = ($5 - $4) / $3; kinds[$2] = 1 }
        END { for (k in kinds) { s = user["sluice\t" k]; n = user["nginx\t" k];
              if (s != "" && n != "" && n > 0) printf "| %s | %.1f | %.1f | %.2f |\n", k, s, n, s / n } }' "$WORK/rows"
} >"$OUT"
cat "$OUT"
