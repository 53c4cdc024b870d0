#!/usr/bin/env bash
# How many requests an auth server gets behind Sluice's auth cache and behind nginx's, for the
# same clients: 200 concurrent connections whose requests carry one of 10 Authorization values.
#
#   wrk -t1 -c200 (keys.lua: Authorization "Bearer k1".."k10" at random)
#      ├──▶ nginx  :18291 ─auth_request─▶ location /_auth: proxy_cache auth_cache, key host +
#      │                                   location + $http_authorization, proxy_cache_valid
#      │                                   200 202 401 $PERIOD (ingress-nginx's template)
#      └──▶ sluice :18292 ─auth-url─▶ auth-cache-key $http_authorization, auth-cache-duration
#                                     "200 202 401 $PERIOD" (single flight, one cache per process)
#   both ──▶ the auth server :18281 (python3: answers 200 after AUTH_DELAY, counts requests)
#        ──▶ sluice backend :18280 (the proxied requests)
#
# Reported per system: client requests, auth-server requests, auth requests per 1,000 client
# requests, and per key and cache period (the ideal is 1: one question per key per period).
# A slow auth server (AUTH_DELAY) is where caches differ: while the first question for a key is
# out, nginx's proxy_cache (no proxy_cache_lock in ingress-nginx's template) sends every other
# request with that key too; Sluice's waiters share the one in flight.
#
# Environment: DURATION=20s, PERIOD=5s (the cache duration), AUTH_DELAY=0.05 (seconds),
#   CONNECTIONS=200, KEYS=10, SLUICE_BIN (default: cargo build --release), OUT (Markdown report,
#   default target/bench-auth-cache.md), KEEP_WORK=1.
# Everything listens on 127.0.0.1; everything started here is stopped on exit, by recorded PID.
set -euo pipefail
DURATION=${DURATION:-20s}
PERIOD=${PERIOD:-5s}
AUTH_DELAY=${AUTH_DELAY:-0.05}
CONNECTIONS=${CONNECTIONS:-200}
KEYS=${KEYS:-10}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/target/bench-auth-cache.md}
BENCH_NAME=bench-auth-cache
# shellcheck source=lib/bench.sh
source "$ROOT/scripts/lib/bench.sh"

HOST=app.example.com
BACKEND_PORT=18280
AUTH_PORT=18281
NGINX_PORT=18291
SLUICE_PORT=18292
SLUICE_ADMIN=18293
SLUICE_HTTPS=18294
PIDS=()
WORK=$(mktemp -d)
stop_everything_on_exit

for tool in wrk python3 curl; do
    command -v "$tool" >/dev/null || die "$tool is needed (Debian: wrk, python3, curl)"
done
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX_BIN ]] || die "nginx is needed (Debian: nginx-light)"
if [[ -z ${SLUICE_BIN:-} ]]; then
    SLUICE_BIN=$(release_sluice)
fi

# The auth server: 200 to every question after AUTH_DELAY; GET /count answers how many it got
# (and starts again from 0).
cat >"$WORK/auth.py" <<'PY'
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
delay = float(sys.argv[2])
lock = threading.Lock()
count = 0
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        global count
        if self.path == "/count":
            with lock:
                body, count = str(count).encode(), 0
        else:
            time.sleep(delay)
            with lock:
                count += 1
            body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer.request_queue_size = 1024
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
python3 "$WORK/auth.py" "$AUTH_PORT" "$AUTH_DELAY" >"$WORK/auth.log" 2>&1 &
AUTH_PID=$!
PIDS+=("$AUTH_PID")
wait_until "auth server" "$AUTH_PID" curl -fsS "http://127.0.0.1:$AUTH_PORT/count"

"$SLUICE_BIN" backend --listen "127.0.0.1:$BACKEND_PORT" --name bench >"$WORK/backend.log" 2>&1 &
BACKEND_PID=$!
PIDS+=("$BACKEND_PID")
wait_until "backend" "$BACKEND_PID" curl -fsS "http://127.0.0.1:$BACKEND_PORT/healthz"

mkdir -p "$WORK/nginx/tmp" "$WORK/nginx/cache"
chmod 755 "$WORK" "$WORK/nginx" "$WORK/nginx/tmp"
chmod 777 "$WORK/nginx/cache"
cat >"$WORK/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 10000; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    # ingress-nginx's auth cache zone.
    proxy_cache_path $WORK/nginx/cache levels=1:2 keys_zone=auth_cache:10m max_size=128m inactive=30m;
    upstream app {
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 100;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        server_name $HOST;
        # ingress-nginx's auth location with auth-cache-key (its Lua makes the key an md5 of
        # the server name, the location and the expanded key: the same partition).
        location = /_external-auth-Lw-Prefix {
            internal;
            proxy_cache auth_cache;
            proxy_cache_valid 200 202 401 $PERIOD;
            proxy_cache_key "$HOST/_external-auth-Lw-Prefix\$http_authorization";
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Forwarded-Proto "";
            proxy_set_header Host 127.0.0.1;
            proxy_set_header X-Original-URL \$scheme://\$http_host\$request_uri;
            proxy_set_header X-Original-Method \$request_method;
            proxy_set_header X-Sent-From "nginx-ingress-controller";
            proxy_set_header X-Real-IP \$remote_addr;
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_set_header X-Auth-Request-Redirect \$request_uri;
            proxy_buffering on;
            proxy_http_version 1.1;
            proxy_pass http://127.0.0.1:$AUTH_PORT/auth;
        }
        location / {
            auth_request /_external-auth-Lw-Prefix;
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
"$NGINX_BIN" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -t >"$WORK/nginx/configtest.log" 2>&1 ||
    die "nginx rejected its config: $(cat "$WORK/nginx/configtest.log")"
"$NGINX_BIN" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" >"$WORK/nginx/stdout.log" 2>&1 &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
wait_until "nginx" "$NGINX_PID" curl -fsS -H "Host: $HOST" "http://127.0.0.1:$NGINX_PORT/healthz"

mkdir -p "$WORK/sluice"
cat >"$WORK/sluice/objects.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: sluice, namespace: sluice}
data: {disable-access-log: "true", ssl-redirect: "false"}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-1, namespace: default, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: http, port: $BACKEND_PORT}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-url: http://127.0.0.1:$AUTH_PORT/auth
    nginx.ingress.kubernetes.io/auth-cache-key: \$http_authorization
    nginx.ingress.kubernetes.io/auth-cache-duration: "200 202 401 $PERIOD"
spec:
  ingressClassName: sluice
  rules:
    - host: $HOST
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
EOF
"$SLUICE_BIN" serve --config "$WORK/sluice" --http-listen "127.0.0.1:$SLUICE_PORT" \
    --https-listen "127.0.0.1:$SLUICE_HTTPS" --admin-listen "127.0.0.1:$SLUICE_ADMIN" \
    --workers 1 >"$WORK/sluice.log" 2>&1 &
SLUICE_PID=$!
PIDS+=("$SLUICE_PID")
wait_until "sluice" "$SLUICE_PID" curl -fsS "http://127.0.0.1:$SLUICE_ADMIN/ready"

cat >"$WORK/keys.lua" <<EOF
local keys = $KEYS
request = function()
    local key = "Bearer k" .. math.random(keys)
    return wrk.format("GET", "/1kb.bin", { ["Host"] = "$HOST", ["Authorization"] = key })
end
EOF

seconds() { local d=$1; case $d in *ms) echo "0.${d%ms}" ;; *s) echo "${d%s}" ;; *m) echo $((${d%m} * 60)) ;; esac; }
RESULTS=()
for system in sluice nginx; do
    port=$([[ $system == sluice ]] && echo "$SLUICE_PORT" || echo "$NGINX_PORT")
    # Each system starts with an empty cache: a new key space per run.
    sed -i "s/\"Bearer k[a-z]*\"/\"Bearer k$system\"/" "$WORK/keys.lua"
    curl -fsS "http://127.0.0.1:$AUTH_PORT/count" >/dev/null
    log "$system: wrk -t1 -c$CONNECTIONS -d$DURATION, $KEYS keys, cache $PERIOD, auth server $AUTH_DELAY s"
    wrk -t1 -c"$CONNECTIONS" -d"$DURATION" -s "$WORK/keys.lua" "http://127.0.0.1:$port/" >"$WORK/wrk-$system.txt" 2>&1
    asked=$(curl -fsS "http://127.0.0.1:$AUTH_PORT/count")
    requests=$(awk '/requests in/ {print $1}' "$WORK/wrk-$system.txt")
    non2xx=$(awk '/Non-2xx/ {print $4}' "$WORK/wrk-$system.txt")
    periods=$(awk -v d="$(seconds "$DURATION")" -v p="$(seconds "$PERIOD")" 'BEGIN {printf "%.1f", d / p}')
    per_thousand=$(awk -v a="$asked" -v r="$requests" 'BEGIN {printf "%.2f", 1000 * a / r}')
    per_key_period=$(awk -v a="$asked" -v k="$KEYS" -v p="$periods" 'BEGIN {printf "%.1f", a / k / p}')
    log "$system: $requests client requests (${non2xx:-0} not 2xx), $asked auth requests, $per_thousand per 1,000, $per_key_period per key and period"
    RESULTS+=("| $system | $requests | ${non2xx:-0} | $asked | $per_thousand | $per_key_period |")
done

mkdir -p "$(dirname "$OUT")"
{
    echo "# Auth-server requests behind the auth cache: Sluice and nginx"
    echo
    echo "- $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r); Sluice $("$SLUICE_BIN" --version 2>/dev/null | head -n1), $("$NGINX_BIN" -v 2>&1)"
    echo "- wrk -t1 -c$CONNECTIONS -d$DURATION, Authorization one of $KEYS values at random per request;"
    echo "  cache duration $PERIOD ($(seconds "$DURATION")/$(seconds "$PERIOD") periods), auth server answering 200 after $AUTH_DELAY s;"
    echo "  one worker each; nginx configured as ingress-nginx's template renders auth-url with auth-cache-key"
    echo "- Command: \`DURATION=$DURATION PERIOD=$PERIOD AUTH_DELAY=$AUTH_DELAY CONNECTIONS=$CONNECTIONS KEYS=$KEYS scripts/bench-auth-cache.sh\`"
    echo
    echo "| system | client requests | not 2xx | auth requests | per 1,000 client requests | per key and period |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${RESULTS[@]}"
} >"$OUT"
log "report: $OUT"
cat "$OUT"
