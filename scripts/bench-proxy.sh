#!/usr/bin/env bash
# Sluice vs nginx as reverse proxies in front of the same backend: proxy CPU time per request.
#
#   CPU 1: wrk -t1 -c50 ──HTTP  :18091 / HTTPS :18443──▶ nginx  ──┐ (CPU 0, one worker)
#                     └──HTTP  :18092 / HTTPS :18444──▶ sluice ──┤ (CPU 0, one worker)
#   CPU 1: sluice backend :18080 ◀──── pooled keep-alive ───────┘
#   (BACKEND=nginx: nginx serving static files on :18080 instead, and wrk -c100)
#   (h2: h2load -t1 -c10 -m10 instead of wrk, HTTP/2 over TLS on the HTTPS ports)
#   (grpc: ghz -c50 over 10 connections, TLS on the HTTPS ports, host grpc.example.com ──▶
#    nginx grpc_pass / Sluice backend-protocol GRPC ──▶ scripts/grpc-backend :18050, HTTP/2)
#
# Both proxies run for the whole benchmark (an idle one costs no CPU); wrk alternates between them
# (sluice, nginx, sluice, nginx, ...) so drift in the machine hits both alike. For each run the proxy's
# utime+stime is read from /proc before and after, and divided by the requests wrk completed. CPU per
# request is the headline: it does not depend on whether wrk or the backend saturates first.
#
# Environment:
#   DURATION=10s     length of each measured wrk run
#   ROUNDS=3         runs per system and protocol
#   WARMUP=2s        one unmeasured run per system and protocol before the rounds ("0" to skip)
#   OUT=target/bench-proxy.md   where the Markdown report goes
#   SLUICE_BIN=...   use this binary instead of `cargo build --release -p sluice`
#   SYSTEMS="sluice nginx"  PROTOCOLS="http https"   to run a subset; PROTOCOLS may add `h2`:
#                    HTTP/2 over TLS from h2load (Debian's nghttp2-client), H2_CONNECTIONS=10
#                    connections with H2_STREAMS=10 concurrent streams each; the upstream side
#                    stays HTTP/1.1 for both proxies; and `grpc`: unary gRPC calls (grpc-go's
#                    interop TestService/UnaryCall answering 1 KiB) from ghz, GRPC_CONCURRENCY=50
#                    over GRPC_CONNECTIONS=10, through nginx's grpc_pass as ingress-nginx renders
#                    backend-protocol GRPC, and Sluice's HTTP/2 upstreams (scripts/grpc-tools.sh
#                    builds ghz and the backend); `grpc-stream`: the same route with
#                    bidirectional streams (FullDuplexCall), GRPC_STREAM_MESSAGES=100 messages
#                    per stream each answered with 1 KiB; figures per message answered
#   PROXY_CPU=0  LOAD_CPU=1   CPUs for the proxies and for wrk + backend
#   WORKERS=1        worker threads (Sluice) / worker processes (nginx); with 2, give the
#                    proxies both CPUs (PROXY_CPU=0,1 LOAD_CPU=0,1) to see cross-core costs
#   SLUICE_ARGS="..."  extra flags for `sluice serve`
#   BODY=1kb         the response: 1kb, or 1mb (throughput: the report's RPS × 1 MiB)
#   ROUTE=plain      the route under test: `plain` (one Prefix path, no annotations), or `policy`:
#                    what an ingress-nginx user writes for a rewrite, a regex path /app/(.*) with
#                    rewrite-target /$1 and two header filters (a request header set, a response
#                    header added), against nginx configured as ingress-nginx renders that Ingress
#                    More routes, one policy each (issue 26's measurements), nginx configured as
#                    ingress-nginx's template renders it: `cors` (enable-cors; the load sends an
#                    Origin), `basic-auth` (auth-type basic, an apr1 htpasswd as `htpasswd -c`
#                    writes it; the load sends the credentials), `auth-url` (auth-url with
#                    auth-cache-key $http_authorization, every request a cache hit after the
#                    first; nginx: auth_request with proxy_cache), `auth-url-miss` (the same
#                    without a cache: a sub-request per request), `limit-rps` (limit-rps 100000,
#                    never reached: what counting costs), `affinity` (affinity: cookie; the load
#                    sends the cookie Sluice issued, so every request is sticky; nginx, which has
#                    no sticky cookie without ingress-nginx's Lua, hashes the same cookie:
#                    `hash $cookie_INGRESSCOOKIE consistent`)
#   ACCESS_LOG=off   `on`: both proxies write ingress-nginx's upstreaminfo line per request to a
#                    file in the work directory (nginx as ingress-nginx configures it: an
#                    unbuffered write per request; Sluice: its default, buffered per worker);
#                    `off`: neither logs (disable-access-log / access_log off)
#   OTEL=off         `on`: Sluice traces every request (enable-opentelemetry, sampler AlwaysOn) and
#                    exports the spans over OTLP/gRPC to an OpenTelemetry Collector (scripts/otelcol.sh;
#                    debug exporter at basic verbosity) on the load CPU. nginx is never traced
#                    (Debian's nginx has no OpenTelemetry module): compare runs with OTEL=off and on
#   BACKEND=sluice   what both proxies forward to: `sluice` (`sluice backend`), or `nginx`: Debian's
#                    nginx serving the bodies as static files (one worker on the load CPU, no
#                    access log; its own response headers: Last-Modified, ETag, Accept-Ranges)
#   CONNECTIONS=50   wrk's connections (-c); 100 by default with BACKEND=nginx
#   SYSCALLS=0       N > 0: instead of the timed runs, N requests per system and protocol (http,
#                    https) from h2load --h1 over CONNECTIONS connections, after a warm-up, with
#                    `perf stat` counting the proxy's system calls (syscall tracepoints; needs root)
#                    and the TCP segments the machine sent meanwhile: calls per request, a figure
#                    the machine's load does not move (issue 29)
#   KEEP_WORK=1      keep the temporary directory (configs, logs, wrk output)
#
# Everything listens on 127.0.0.1. Everything started here is stopped on exit, by recorded PID.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-2s}
SYSTEMS=${SYSTEMS:-sluice nginx}
PROTOCOLS=${PROTOCOLS:-http https}
H2_CONNECTIONS=${H2_CONNECTIONS:-10}
H2_STREAMS=${H2_STREAMS:-10}
GRPC_CONCURRENCY=${GRPC_CONCURRENCY:-50}
GRPC_CONNECTIONS=${GRPC_CONNECTIONS:-10}
GRPC_HOST=grpc.example.com
GRPC_BACKEND_PORT=18050
GRPC_CALL=grpc.testing.TestService/UnaryCall
GRPC_STREAM_CALL=grpc.testing.TestService/FullDuplexCall
GRPC_STREAM_MESSAGES=${GRPC_STREAM_MESSAGES:-100}

# PROTOCOLS names grpc or grpc-stream: the gRPC backend, routes and tools are needed.
wants_grpc() { [[ " $PROTOCOLS " == *" grpc "* || " $PROTOCOLS " == *" grpc-stream "* ]]; }
PROXY_CPU=${PROXY_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
KEEP_WORK=${KEEP_WORK:-0}
WORKERS=${WORKERS:-1}
SYSCALLS=${SYSCALLS:-0}
[[ $SYSCALLS =~ ^[0-9]+$ ]] || { echo "SYSCALLS must be a number of requests, not '$SYSCALLS'" >&2; exit 2; }
BACKEND=${BACKEND:-sluice}
case $BACKEND in
    sluice) CONNECTIONS=${CONNECTIONS:-50} ;;
    nginx) CONNECTIONS=${CONNECTIONS:-100} ;;
    *) echo "BACKEND must be sluice or nginx, not '$BACKEND'" >&2; exit 2 ;;
esac
[[ $CONNECTIONS =~ ^[1-9][0-9]*$ ]] || { echo "CONNECTIONS must be a positive integer, not '$CONNECTIONS'" >&2; exit 2; }

ROUTE=${ROUTE:-plain}
ACCESS_LOG=${ACCESS_LOG:-off}
case $ACCESS_LOG in
    on | off) ;;
    *) echo "ACCESS_LOG must be on or off, not '$ACCESS_LOG'" >&2; exit 2 ;;
esac
OTEL=${OTEL:-off}
case $OTEL in
    on | off) ;;
    *) echo "OTEL must be on or off, not '$OTEL'" >&2; exit 2 ;;
esac
HOST=app.example.com
BODY=${BODY:-1kb}
case $BODY in
    1kb) BODY_BYTES=1024 ;;
    1mb) BODY_BYTES=1048576 ;;
    *) echo "BODY must be 1kb or 1mb, not '$BODY'" >&2; exit 2 ;;
esac
# EXTRA_HEADER: what every request of the load carries besides Host (credentials, an Origin).
EXTRA_HEADER=""
case $ROUTE in
    plain | limit-rps) PATH_UNDER_TEST=/$BODY.bin ;;
    # The cookie Sluice issues is read once it runs (check_proxy) and sent to both.
    affinity) PATH_UNDER_TEST=/$BODY.bin ;;
    policy) PATH_UNDER_TEST=/app/$BODY.bin ;;
    cors) PATH_UNDER_TEST=/$BODY.bin EXTRA_HEADER="Origin: https://client.example" ;;
    basic-auth)
        PATH_UNDER_TEST=/$BODY.bin
        EXTRA_HEADER="Authorization: Basic $(printf 'bench:s3cret' | base64)"
        ;;
    auth-url | auth-url-miss) PATH_UNDER_TEST=/$BODY.bin EXTRA_HEADER="Authorization: Bearer bench" ;;
    *) echo "ROUTE must be plain, policy, cors, basic-auth, auth-url, auth-url-miss, limit-rps or affinity, not '$ROUTE'" >&2; exit 2 ;;
esac
BACKEND_PORT=18080
NGINX_HTTP=18091
NGINX_HTTPS=18443
SLUICE_HTTP=18092
SLUICE_HTTPS=18444
SLUICE_ADMIN=19113
OTLP_GRPC=14317

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-target/bench-proxy.md}

PIDS=()
WORK=""

BENCH_NAME=bench-proxy
# shellcheck source=lib/bench.sh
. "$ROOT/scripts/lib/bench.sh"
# shellcheck source=lib/nginx.sh
. "$ROOT/scripts/lib/nginx.sh"

stop_everything_on_exit

# --- tools -------------------------------------------------------------------------------------

install_packages() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || die "need root or sudo to install: $*"
        sudo=(sudo)
    fi
    log "installing $*"
    # On a host with systemd, apt also starts the distribution's nginx service on :80; it does not
    # touch the ports used here.
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2; then
        # Most often stale package lists: refresh once and retry.
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >&2 &&
            "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2
    fi
}

ensure_tools() {
    if ! command -v nginx >/dev/null && [[ ! -x /usr/sbin/nginx ]]; then
        install_packages nginx-light || install_packages nginx
    fi
    command -v wrk >/dev/null || install_packages wrk
    if [[ " $PROTOCOLS " == *" h2 "* ]] || ((SYSCALLS > 0)); then
        command -v h2load >/dev/null || install_packages nghttp2-client
    fi
    if wants_grpc; then
        GRPC_TOOLS=$(nice "$ROOT/scripts/grpc-tools.sh") || die "cannot build ghz and grpc-backend"
    fi
    command -v openssl >/dev/null || install_packages openssl
    if ((SYSCALLS > 0)); then
        command -v perf >/dev/null || install_packages linux-perf
        [[ -d /sys/kernel/tracing/events/syscalls ]] ||
            die "SYSCALLS needs the kernel's syscall tracepoints (/sys/kernel/tracing/events/syscalls)"
    fi
    command -v curl >/dev/null || install_packages curl ca-certificates
    command -v taskset >/dev/null || install_packages util-linux
    NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)
    CLK_TCK=$(getconf CLK_TCK)

    local cpus
    cpus=$(nproc)
    ((PROXY_CPU < cpus && LOAD_CPU < cpus)) ||
        die "need CPUs $PROXY_CPU and $LOAD_CPU, this machine has $cpus (set PROXY_CPU/LOAD_CPU)"
    [[ $PROXY_CPU != "$LOAD_CPU" ]] || log "warning: proxy and load share CPU $PROXY_CPU"
}

ensure_sluice() {
    if [[ -n ${SLUICE_BIN:-} ]]; then
        [[ -x $SLUICE_BIN ]] || die "SLUICE_BIN=$SLUICE_BIN is not executable"
    else
        log "building sluice (release)"
        SLUICE_BIN=$(release_sluice)
    fi
}

# --- processes ---------------------------------------------------------------------------------

start_backend() {
    if [[ $BACKEND == nginx ]]; then
        start_nginx_backend
        return
    fi
    taskset -c "$LOAD_CPU" "$SLUICE_BIN" backend --listen "127.0.0.1:$BACKEND_PORT" --name bench \
        >"$WORK/backend.log" 2>&1 &
    BACKEND_PID=$!
    PIDS+=("$BACKEND_PID")
    wait_until "backend" "$BACKEND_PID" curl -fsS "http://127.0.0.1:$BACKEND_PORT/healthz"
    log "backend pid $BACKEND_PID: $(head -n1 "$WORK/backend.log")"
}

# run_nginx DIR CPU WHAT: checks DIR/nginx.conf, then starts nginx on CPU in the background
# (its PID in $!).
run_nginx() {
    local dir=$1 cpu=$2 what=$3
    "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -t >"$dir/configtest.log" 2>&1 ||
        die "$what rejected its config: $(cat "$dir/configtest.log")"
    taskset -c "$cpu" "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
        >"$dir/stdout.log" 2>&1 &
}

# BACKEND=nginx: nginx serving the bodies from files (and /healthz, which auth-url asks), one
# worker on the load CPU; it never closes the proxies' pooled keep-alive connections.
start_nginx_backend() {
    local dir=$WORK/backend-nginx
    mkdir -p "$dir/root" "$dir/tmp"
    head -c 1024 /dev/zero | tr '\0' b >"$dir/root/1kb.bin"
    head -c 1048576 /dev/zero | tr '\0' b >"$dir/root/1mb.bin"
    # When started as root the worker runs as nobody and must read the files.
    chmod 755 "$WORK" "$dir" "$dir/root" "$dir/tmp"
    chmod 644 "$dir/root/1kb.bin" "$dir/root/1mb.bin"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;

events {
    worker_connections 10000;
}

http {
    access_log off;
$(nginx_http_common "$dir")

    server {
        listen 127.0.0.1:$BACKEND_PORT;
        root $dir/root;
        location = /healthz {
            return 200 "ok\n";
        }
    }
}
EOF
    run_nginx "$dir" "$LOAD_CPU" "the nginx backend"
    BACKEND_PID=$!
    PIDS+=("$BACKEND_PID")
    wait_until "nginx backend" "$BACKEND_PID" curl -fsS "http://127.0.0.1:$BACKEND_PORT/healthz"
    log "nginx backend pid $BACKEND_PID"
}

# PROTOCOLS=grpc: the gRPC server both proxies send calls to.
start_grpc_backend() {
    taskset -c "$LOAD_CPU" "$GRPC_TOOLS/grpc-backend" --listen "127.0.0.1:$GRPC_BACKEND_PORT" \
        --name bench >"$WORK/grpc-backend.log" 2>&1 &
    GRPC_BACKEND_PID=$!
    PIDS+=("$GRPC_BACKEND_PID")
    wait_until "grpc-backend" "$GRPC_BACKEND_PID" bash -c "exec 3<>/dev/tcp/127.0.0.1/$GRPC_BACKEND_PORT"
    log "grpc-backend pid $GRPC_BACKEND_PID"
}

# OTEL=on: the Collector Sluice sends its spans to, counting them without writing them.
start_collector() {
    local binary
    binary=$(nice "$ROOT/scripts/otelcol.sh") || die "cannot build the OpenTelemetry Collector"
    cat >"$WORK/otelcol.yaml" <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$OTLP_GRPC
exporters:
  debug:
    verbosity: basic
service:
  telemetry:
    # Every export's line (the logger samples by default), so the report can count spans.
    logs:
      sampling:
        enabled: false
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
EOF
    taskset -c "$LOAD_CPU" "$binary" --config "$WORK/otelcol.yaml" >"$WORK/otelcol.log" 2>&1 &
    COLLECTOR_PID=$!
    PIDS+=("$COLLECTOR_PID")
    wait_until "collector" "$COLLECTOR_PID" bash -c "exec 3<>/dev/tcp/127.0.0.1/$OTLP_GRPC"
    log "collector pid $COLLECTOR_PID"
}

# ROUTE=basic-auth: one user, apr1-MD5 as `htpasswd -c` writes it (readable by nginx's worker).
make_htpasswd() {
    printf 'bench:%s\n' "$(openssl passwd -apr1 -salt benchslt s3cret)" >"$WORK/htpasswd"
    chmod 644 "$WORK/htpasswd"
}

make_cert() {
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$HOST" \
        -addext "subjectAltName=DNS:$HOST" \
        -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
    chmod 600 "$WORK/tls.key"
}

# The location block: ROUTE=policy is what ingress-nginx renders for use-regex + rewrite-target +
# a configuration-snippet with add_header and proxy_set_header.
nginx_location() {
    case $ROUTE in
        plain | affinity) echo '        location / {' ;;
        cors)
            # ingress-nginx's CORS block with the defaults (origin *, credentials true).
            cat <<'LOCATION'
        location / {
            if ($request_method = 'OPTIONS') {
                add_header Access-Control-Allow-Origin "*";
                add_header Access-Control-Allow-Credentials true;
                add_header Access-Control-Allow-Methods "GET, PUT, POST, DELETE, PATCH, OPTIONS";
                add_header Access-Control-Allow-Headers "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization";
                add_header Access-Control-Max-Age 1728000;
                add_header Content-Type 'text/plain charset=UTF-8';
                add_header Content-Length 0;
                return 204;
            }
            add_header Access-Control-Allow-Origin "*" always;
            add_header Access-Control-Allow-Credentials true always;
            add_header Access-Control-Allow-Methods "GET, PUT, POST, DELETE, PATCH, OPTIONS" always;
            add_header Access-Control-Allow-Headers "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization" always;
            add_header Access-Control-Max-Age 1728000 always;
LOCATION
            ;;
        basic-auth)
            cat <<LOCATION
        location / {
            auth_basic "Authentication Required";
            auth_basic_user_file $WORK/htpasswd;
            proxy_set_header Authorization "";
LOCATION
            ;;
        auth-url | auth-url-miss)
            # ingress-nginx's auth location (with auth-cache-key: its cache), then the location
            # using it.
            local cache=""
            [[ $ROUTE == auth-url-miss ]] || cache="proxy_cache auth_cache;
            proxy_cache_valid 200 202 401 5m;
            proxy_cache_key \"$HOST/_external-auth-Lw-Prefix\$http_authorization\";"
            cat <<LOCATION
        location = /_external-auth-Lw-Prefix {
            internal;
            $cache
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Forwarded-Proto "";
            proxy_set_header X-Request-ID \$req_id;
            proxy_set_header Host 127.0.0.1;
            proxy_set_header X-Original-URL \$scheme://\$http_host\$request_uri;
            proxy_set_header X-Original-Method \$request_method;
            proxy_set_header X-Sent-From "nginx-ingress-controller";
            proxy_set_header X-Real-IP \$remote_addr;
            proxy_set_header X-Forwarded-For \$remote_addr;
            proxy_set_header X-Auth-Request-Redirect \$request_uri;
            proxy_buffering on;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://app/healthz;
        }
        location / {
            auth_request /_external-auth-Lw-Prefix;
            auth_request_set \$auth_cookie \$upstream_http_set_cookie;
            add_header Set-Cookie \$auth_cookie;
LOCATION
            ;;
        limit-rps)
            cat <<'LOCATION'
        location / {
            limit_req zone=default_app_rps burst=500000 nodelay;
LOCATION
            ;;
        policy)
            cat <<'LOCATION'
        location ~* "^/app/(.*)" {
            rewrite "(?i)/app/(.*)" /$1 break;
            add_header X-Frame-Options DENY always;
            proxy_set_header X-Team bench;
LOCATION
            ;;
    esac
}

# What a ROUTE needs at the http level: the auth cache's zone, the rate limit's.
nginx_http_extra() {
    case $ROUTE in
        auth-url) echo "    proxy_cache_path $WORK/nginx/cache levels=1:2 keys_zone=auth_cache:10m max_size=128m inactive=30m;" ;;
        limit-rps) echo '    limit_req_zone $binary_remote_addr zone=default_app_rps:5m rate=100000r/s;' ;;
    esac
}

# ACCESS_LOG=on: ingress-nginx's upstreaminfo log_format and its \$req_id and upstream-name
# variables, written as ingress-nginx writes them (no buffer= parameter).
nginx_access_log() {
    cat <<'LOG'
    map $http_x_request_id $req_id {
        default $http_x_request_id;
        "" $request_id;
    }
LOG
    if [[ $ACCESS_LOG == off ]]; then
        echo '    access_log off;'
        return
    fi
    cat <<'LOG'
    log_format upstreaminfo '$remote_addr - $remote_user [$time_local] "$request" '
        '$status $body_bytes_sent "$http_referer" "$http_user_agent" '
        '$request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] '
        '$upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id';
LOG
    echo "    access_log $WORK/nginx/access.log upstreaminfo;"
}

# ingress-nginx's request headers (the set Sluice sends too: X-Forwarded-*, X-Scheme,
# X-Original-Forwarded-*, Proxy cleared), with DIRECTIVE proxy_set_header or grpc_set_header.
nginx_request_headers() {
    local directive=$1 header
    for header in 'Host $host' 'X-Request-ID $req_id' 'X-Real-IP $remote_addr' \
        'X-Forwarded-For $proxy_add_x_forwarded_for' 'X-Forwarded-Host $host' \
        'X-Forwarded-Port $server_port' 'X-Forwarded-Proto $scheme' 'X-Forwarded-Scheme $scheme' \
        'X-Scheme $scheme' 'X-Original-Forwarded-For $http_x_forwarded_for' \
        'X-Original-Forwarded-Host $http_x_forwarded_host' 'Proxy ""'; do
        echo "            $directive $header;"
    done
}

# PROTOCOLS=grpc: what ingress-nginx renders for an Ingress with backend-protocol GRPC: grpc_pass
# with the same request headers as grpc_set_header, pooled HTTP/2 upstream connections.
nginx_grpc_server() {
    wants_grpc || return 0
    cat <<EOF
    upstream grpc_app {
        server 127.0.0.1:$GRPC_BACKEND_PORT;
        keepalive 100;
        keepalive_requests 100000000;
    }

    server {
        listen 127.0.0.1:$NGINX_HTTPS ssl http2;
        server_name $GRPC_HOST;

        ssl_certificate $WORK/tls.crt;
        ssl_certificate_key $WORK/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;

        location / {
            set \$proxy_upstream_name "default-grpc-50051";
            grpc_pass grpc://grpc_app;
$(nginx_request_headers grpc_set_header)
        }
    }
EOF
}

# The nginx an ingress controller would generate for one Ingress: ingress-nginx's request headers
# (the set Sluice sends too: X-Forwarded-*, X-Scheme, X-Original-Forwarded-*, Proxy cleared), pooled HTTP/1.1
# upstream connections, no access log, one worker.
start_nginx() {
    local dir=$WORK/nginx
    mkdir -p "$dir/tmp" "$dir/cache"
    # When started as root the worker runs as nobody and must reach its temp directories.
    chmod 755 "$WORK" "$dir" "$dir/tmp"
    chmod 777 "$dir/cache"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes $WORKERS;
pid $dir/nginx.pid;
error_log $dir/error.log warn;

events {
    worker_connections 10000;
}

http {
$(nginx_access_log)
$(nginx_http_extra)
$(nginx_http_common "$dir")

    upstream app {
$([[ $ROUTE != affinity ]] || echo '        hash $cookie_INGRESSCOOKIE consistent;')
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 100;
        keepalive_requests 100000000;
    }

    server {
        listen 127.0.0.1:$NGINX_HTTP;
        listen 127.0.0.1:$NGINX_HTTPS ssl http2;
        server_name $HOST;

        ssl_certificate $WORK/tls.crt;
        ssl_certificate_key $WORK/tls.key;
        ssl_protocols TLSv1.2 TLSv1.3;

$(nginx_location)
            set \$proxy_upstream_name "default-app-80";
            set \$proxy_alternative_upstream_name "";
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
$(nginx_request_headers proxy_set_header)
        }
    }
$(nginx_grpc_server)
}
EOF
    run_nginx "$dir" "$PROXY_CPU" "nginx"
    NGINX_PID=$!
    PIDS+=("$NGINX_PID")
    local ready=(curl -fsS -H "Host: $HOST")
    [[ -z $EXTRA_HEADER ]] || ready+=(-H "$EXTRA_HEADER")
    wait_until "nginx" "$NGINX_PID" \
        "${ready[@]}" "http://127.0.0.1:$NGINX_HTTP${PATH_UNDER_TEST%/*}/healthz"
    log "nginx master pid $NGINX_PID, workers: $(child_pids "$NGINX_PID" | tr '\n' ' ')"
}

# The same intent as Kubernetes objects, read by the file provider.
write_sluice_config() {
    local dir=$WORK/sluice
    mkdir -p "$dir"
    cat >"$dir/ingressclass.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: sluice
spec:
  controller: sluice.dev/ingress-controller
EOF
    cat >"$dir/configmap.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: sluice
  namespace: sluice
data:
  keepalive: "100"
  keep-alive-requests: "100000000"
  ssl-redirect: "false"
  allow-snippet-annotations: "true"
  disable-access-log: "$([[ $ACCESS_LOG == on ]] && echo false || echo true)"
  enable-opentelemetry: "$([[ $OTEL == on ]] && echo true || echo false)"
  otlp-collector-host: 127.0.0.1
  otlp-collector-port: "$OTLP_GRPC"
EOF
    {
        cat <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: app-tls
  namespace: default
type: kubernetes.io/tls
stringData:
  tls.crt: |
EOF
        sed 's/^/    /' "$WORK/tls.crt"
        echo "  tls.key: |"
        sed 's/^/    /' "$WORK/tls.key"
    } >"$dir/secret.yaml"
    chmod 600 "$dir/secret.yaml"
    cat >"$dir/service.yaml" <<EOF
apiVersion: v1
kind: Service
metadata:
  name: app
  namespace: default
spec:
  ports:
    - name: http
      port: 80
      protocol: TCP
      targetPort: $BACKEND_PORT
EOF
    cat >"$dir/endpointslice.yaml" <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: app-bench
  namespace: default
  labels:
    kubernetes.io/service-name: app
addressType: IPv4
ports:
  - name: http
    port: $BACKEND_PORT
    protocol: TCP
endpoints:
  - addresses:
      - 127.0.0.1
    conditions:
      ready: true
EOF
    ! wants_grpc || write_sluice_grpc_config "$dir"
    local annotations="" rule_path=/ path_type=Prefix
    if [[ $ROUTE == policy ]]; then
        rule_path='/app/(.*)'
        path_type=ImplementationSpecific
        annotations='  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    nginx.ingress.kubernetes.io/rewrite-target: /$1
    nginx.ingress.kubernetes.io/configuration-snippet: |
      add_header X-Frame-Options DENY always;
      proxy_set_header X-Team bench;'
    elif [[ $ROUTE == cors ]]; then
        annotations='  annotations:
    nginx.ingress.kubernetes.io/enable-cors: "true"'
    elif [[ $ROUTE == basic-auth ]]; then
        annotations='  annotations:
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: htpasswd
    nginx.ingress.kubernetes.io/auth-realm: "Authentication Required"'
        {
            printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: htpasswd\n  namespace: default\ntype: Opaque\nstringData:\n  auth: |\n'
            sed 's/^/    /' "$WORK/htpasswd"
        } >"$dir/htpasswd.yaml"
    elif [[ $ROUTE == auth-url ]]; then
        annotations="  annotations:
    nginx.ingress.kubernetes.io/auth-url: http://127.0.0.1:$BACKEND_PORT/healthz
    nginx.ingress.kubernetes.io/auth-cache-key: \$http_authorization"
    elif [[ $ROUTE == auth-url-miss ]]; then
        annotations="  annotations:
    nginx.ingress.kubernetes.io/auth-url: http://127.0.0.1:$BACKEND_PORT/healthz"
    elif [[ $ROUTE == limit-rps ]]; then
        annotations='  annotations:
    nginx.ingress.kubernetes.io/limit-rps: "100000"'
    elif [[ $ROUTE == affinity ]]; then
        annotations='  annotations:
    nginx.ingress.kubernetes.io/affinity: cookie'
    fi
    cat >"$dir/ingress.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: default
$annotations
spec:
  ingressClassName: sluice
  tls:
    - hosts:
        - $HOST
      secretName: app-tls
  rules:
    - host: $HOST
      http:
        paths:
          - path: $rule_path
            pathType: $path_type
            backend:
              service:
                name: app
                port:
                  number: 80
EOF
}

# PROTOCOLS=grpc: a second Ingress, on its own host, to the gRPC backend.
write_sluice_grpc_config() {
    local dir=$1
    cat >"$dir/grpc.yaml" <<EOF
apiVersion: v1
kind: Service
metadata:
  name: grpc
  namespace: default
spec:
  ports:
    - name: grpc
      port: 50051
      protocol: TCP
      targetPort: $GRPC_BACKEND_PORT
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: grpc-bench
  namespace: default
  labels:
    kubernetes.io/service-name: grpc
addressType: IPv4
ports:
  - name: grpc
    port: $GRPC_BACKEND_PORT
    protocol: TCP
endpoints:
  - addresses:
      - 127.0.0.1
    conditions:
      ready: true
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: grpc
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/backend-protocol: GRPC
spec:
  ingressClassName: sluice
  rules:
    - host: $GRPC_HOST
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: grpc
                port:
                  number: 50051
EOF
}

start_sluice() {
    local extra=()
    write_sluice_config
    # wrk sends the URL's host, 127.0.0.1, as SNI, which rustls ignores as illegal: such clients get
    # the default certificate. Make that the bench certificate, as nginx's only server block does, so
    # both proxies do the same RSA-2048 handshakes.
    if "$SLUICE_BIN" serve --help 2>/dev/null | grep -q -- '--default-tls-secret'; then
        extra+=(--default-tls-secret default/app-tls)
    fi
    [[ $ACCESS_LOG == on ]] && extra+=(--access-log-path "$WORK/sluice-access.log")
    if [[ -n ${SLUICE_ARGS:-} ]]; then
        read -r -a more <<<"$SLUICE_ARGS"
        extra+=("${more[@]}")
    fi
    taskset -c "$PROXY_CPU" "$SLUICE_BIN" serve --config "$WORK/sluice" \
        --http-listen "127.0.0.1:$SLUICE_HTTP" --https-listen "127.0.0.1:$SLUICE_HTTPS" \
        --admin-listen "127.0.0.1:$SLUICE_ADMIN" --workers "$WORKERS" "${extra[@]}" >"$WORK/sluice.log" 2>&1 &
    SLUICE_PID=$!
    PIDS+=("$SLUICE_PID")
    wait_until "sluice" "$SLUICE_PID" curl -fsS "http://127.0.0.1:$SLUICE_ADMIN/ready"
    log "sluice pid $SLUICE_PID"
}

# --- measurement -------------------------------------------------------------------------------

child_pids() {
    local parent=$1 file stat rest fields
    for file in /proc/[0-9]*/stat; do
        # The command name may hold spaces and parentheses: fields start after the last ") ".
        { read -r stat <"$file"; } 2>/dev/null || continue
        rest=${stat##*) }
        read -r -a fields <<<"$rest"
        [[ ${fields[1]} == "$parent" ]] && echo "${stat%% *}"
    done
    return 0
}

proxy_pids() {
    case $1 in
        sluice) echo "$SLUICE_PID" ;;
        nginx) echo "$NGINX_PID" && child_pids "$NGINX_PID" ;;
        *) die "unknown system '$1'" ;;
    esac
}

url_for() {
    local system=$1 protocol=$2 port
    case $system/$protocol in
        nginx/http) port=$NGINX_HTTP ;;
        nginx/https) port=$NGINX_HTTPS ;;
        sluice/http) port=$SLUICE_HTTP ;;
        sluice/https) port=$SLUICE_HTTPS ;;
        nginx/h2 | nginx/grpc | nginx/grpc-stream) port=$NGINX_HTTPS ;;
        sluice/h2 | sluice/grpc | sluice/grpc-stream) port=$SLUICE_HTTPS ;;
        *) die "no port for $system $protocol" ;;
    esac
    local scheme=$protocol
    [[ $protocol == h2 ]] && scheme=https
    if [[ $protocol == grpc* ]]; then
        echo "127.0.0.1:$port"
        return
    fi
    echo "$scheme://127.0.0.1:$port$PATH_UNDER_TEST"
}

# A proxy answering fast with errors would look efficient: check the real answer first. curl sends
# SNI for the host (wrk will send 127.0.0.1 or none), so both paths of certificate choice are seen.
check_proxy() {
    local system=$1 protocol=$2 url got port
    if [[ $ROUTE == affinity && $system == sluice && -z $EXTRA_HEADER ]]; then
        # The session cookie Sluice issues (over plain HTTP: without Secure), for every request.
        local cookie
        cookie=$(curl -sS -H "Host: $HOST" -D - -o /dev/null "http://127.0.0.1:$SLUICE_HTTP$PATH_UNDER_TEST" |
            tr -d '\r' | awk -F'[:;] *' 'tolower($1) == "set-cookie" {print $2; exit}')
        [[ $cookie == INGRESSCOOKIE=* ]] || die "sluice: no affinity cookie issued"
        EXTRA_HEADER="Cookie: $cookie"
        log "affinity: the load sends $EXTRA_HEADER"
    fi
    local CURL_EXTRA=()
    [[ -z $EXTRA_HEADER ]] || CURL_EXTRA=(-H "$EXTRA_HEADER")
    url=$(url_for "$system" "$protocol")
    port=${url#*://127.0.0.1:}
    port=${port%%/*}
    if [[ $protocol == grpc* ]]; then
        run_load "$protocol" "$url" 1s "$WORK/check-$system-$protocol.txt"
        got=$(load_errors "$WORK/check-$system-$protocol.txt")
        [[ $(load_requests "$WORK/check-$system-$protocol.txt") -gt 0 && $got == 0 ]] ||
            die "$system $protocol: calls failed: $(cat "$WORK/check-$system-$protocol.txt")"
        return
    fi
    if [[ $protocol == h2 ]]; then
        got=$(curl -sS -k --http2 -H "Host: $HOST" "${CURL_EXTRA[@]}" -o /dev/null -w '%{http_version} %{http_code} %{size_download}' "$url") ||
            die "$system h2: curl $url failed"
        [[ $got == "2 200 $BODY_BYTES" ]] || die "$system h2: want '2 200 $BODY_BYTES' (HTTP/2), got '$got'"
        return
    fi
    if [[ $protocol == https ]]; then
        got=$(curl -sS -k --resolve "$HOST:$port:127.0.0.1" "${CURL_EXTRA[@]}" -o /dev/null \
            -w '%{http_code} %{size_download}' "https://$HOST:$port$PATH_UNDER_TEST") ||
            die "$system $protocol: curl with SNI $HOST failed"
        [[ $got == "200 $BODY_BYTES" ]] ||
            die "$system $protocol with SNI $HOST: want '200 $BODY_BYTES', got '$got'"
    fi
    got=$(curl -sS -k -H "Host: $HOST" "${CURL_EXTRA[@]}" -o /dev/null -w '%{http_code} %{size_download}' "$url") ||
        die "$system $protocol: curl $url failed"
    [[ $got == "200 $BODY_BYTES" ]] || die "$system $protocol: want '200 $BODY_BYTES', got '$got'"
    if [[ $ROUTE == policy ]]; then
        curl -sS -k -H "Host: $HOST" -D - -o /dev/null "$url" | grep -qi '^x-frame-options: DENY' ||
            die "$system $protocol: the response header filter is missing"
    fi
    if [[ $ROUTE == basic-auth ]]; then
        got=$(curl -sS -k -H "Host: $HOST" -o /dev/null -w '%{http_code}' "$url")
        [[ $got == 401 ]] || die "$system $protocol: without credentials want 401, got $got"
    fi
    if [[ $ROUTE == cors ]]; then
        curl -sS -k -H "Host: $HOST" "${CURL_EXTRA[@]}" -D - -o /dev/null "$url" |
            grep -qi '^access-control-allow-origin: \*' || die "$system $protocol: no CORS headers"
    fi
    if [[ $protocol == https ]]; then
        check_certificate "$system" "$port"
    fi
}

# Handshake cost depends on the key: warn when a proxy shows wrk (SNI "127.0.0.1") another certificate.
check_certificate() {
    local system=$1 port=$2 want served
    want=$(openssl x509 -in "$WORK/tls.crt" -noout -fingerprint -sha256)
    served=$(openssl s_client -connect "127.0.0.1:$port" -servername 127.0.0.1 </dev/null 2>/dev/null |
        openssl x509 -noout -fingerprint -sha256 2>/dev/null) || served="(none)"
    if [[ $served != "$want" ]]; then
        log "warning: $system presents another certificate to wrk than the RSA-2048 bench one;" \
            "HTTPS handshake costs differ (set SLUICE_ARGS to choose its default certificate)"
    fi
}

# run_load PROTOCOL URL DURATION OUT: wrk for HTTP/1.1, h2load for h2.
run_load() {
    local protocol=$1 url=$2 duration=$3 out=$4
    local pid status=0 tolerated=0 load=(wrk -t1 -c"$CONNECTIONS" -d"$duration" -H "Host: $HOST")
    [[ -z $EXTRA_HEADER ]] || load+=(-H "$EXTRA_HEADER")
    load+=("$url")
    if [[ $protocol == grpc ]]; then
        # ghz exits 1 when calls fail: the summary is still read (errors are counted).
        load=("$GRPC_TOOLS/ghz" --skipTLS --authority "$GRPC_HOST" --call "$GRPC_CALL"
            -d '{"response_size":1024}' -z "$duration" --duration-stop wait -c "$GRPC_CONCURRENCY"
            --connections "$GRPC_CONNECTIONS" "$url")
    elif [[ $protocol == grpc-stream ]]; then
        # Bidirectional streams: each call sends GRPC_STREAM_MESSAGES messages, each answered
        # with one of 1 KiB, then closes its side.
        load=("$GRPC_TOOLS/ghz" --skipTLS --authority "$GRPC_HOST" --call "$GRPC_STREAM_CALL"
            -d '{"response_parameters":[{"size":1024}]}' --stream-call-count "$GRPC_STREAM_MESSAGES"
            -z "$duration" --duration-stop wait -c "$GRPC_CONCURRENCY"
            --connections "$GRPC_CONNECTIONS" "$url")
    elif [[ $protocol == h2 ]]; then
        load=(h2load -t1 -c"$H2_CONNECTIONS" -m"$H2_STREAMS" -D"$duration" -H ":authority: $HOST")
        [[ -z $EXTRA_HEADER ]] || load+=(-H "$EXTRA_HEADER")
        load+=("$url")
    fi
    # The load tool stops itself after DURATION; the outer timeout only guards against a hang. It
    # runs in the background so that a signal to this script interrupts `wait` instead of waiting.
    timeout --kill-after=5 120 taskset -c "$LOAD_CPU" "${load[@]}" >"$out" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait "$pid" || status=$?
    unset 'PIDS[-1]'
    [[ $protocol == grpc* ]] && tolerated=1
    ((status == 0 || status == tolerated)) || die "${load[0]##*/} failed (exit $status): $(cat "$out")"
}

# wrk's "123456 requests in 10.00s, 150.00MB read" and error lines; h2load's "finished in 10.00s,
# 12345.67 req/s, ...", "requests: N total, N started, N done, N succeeded, F failed, E errored,
# T timeout" and "status codes: N 2xx, ..."; ghz's "  Requests/sec: R" and "[Code] N responses"
# per gRPC status (requests counts the OK ones).
load_requests() {
    awk '/ requests in /{print $1} /^requests: /{print $8} /^  \[OK\] +[0-9]+ responses/{print $2}' "$1"
}
load_rps() {
    awk '/^Requests\/sec:/{print $2} /^finished in /{print $4} /^  Requests\/sec:/{print $2}' "$1"
}
load_errors() {
    awk '/Non-2xx or 3xx responses:/{n += $NF}
         /^  \[[A-Za-z]+\] +[0-9]+ responses/ && !/\[OK\]/{n += $2}
         /Socket errors:/{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) n += $i}
         /^requests: /{n += $10}
         /^status codes: /{n += $5 + $7 + $9}
         END{print n + 0}' "$1"
}

# voluntary_switches PID...: how often the processes' threads went to sleep waiting (for I/O
# when a proxy ran out of ready work), summed over every thread.
voluntary_switches() {
    local pid n=0 file value
    for pid in "$@"; do
        for file in /proc/"$pid"/task/*/status; do
            value=$(awk '/^voluntary_ctxt_switches:/{print $2}' "$file" 2>/dev/null) || continue
            n=$((n + ${value:-0}))
        done
    done
    echo "$n"
}

# per_request TICKS REQUESTS: CPU microseconds per request.
per_request() { awk -v t="$1" -v hz="$CLK_TCK" -v n="$2" 'BEGIN{printf "%.2f", t * 1e6 / hz / n}'; }

# measure SYSTEM PROTOCOL ROUND: one wrk run, one line appended to $RESULTS.
measure() {
    local system=$1 protocol=$2 round=$3 out pids requests rps errors ticks us_per_req
    local user0 sys0 user1 sys1 user_us sys_us sleeps0 sleeps1
    out=$WORK/load-$system-$protocol-$round.txt
    mapfile -t pids < <(proxy_pids "$system")
    sleeps0=$(voluntary_switches "${pids[@]}")
    read -r user0 sys0 < <(cpu_ticks "${pids[@]}")
    run_load "$protocol" "$(url_for "$system" "$protocol")" "$DURATION" "$out"
    read -r user1 sys1 < <(cpu_ticks "${pids[@]}")
    sleeps1=$(voluntary_switches "${pids[@]}")
    requests=$(load_requests "$out")
    rps=$(load_rps "$out")
    errors=$(load_errors "$out")
    [[ -n $requests && $requests -gt 0 ]] || die "no requests completed: $(cat "$out")"
    if [[ $protocol == grpc-stream ]]; then
        # The unit is a message answered: calls × the messages each sent.
        requests=$((requests * GRPC_STREAM_MESSAGES))
        rps=$(awk -v r="$rps" -v m="$GRPC_STREAM_MESSAGES" 'BEGIN{printf "%.2f", r * m}')
    fi
    ticks=$((user1 - user0 + sys1 - sys0))
    us_per_req=$(per_request "$ticks" "$requests")
    user_us=$(per_request $((user1 - user0)) "$requests")
    sys_us=$(per_request $((sys1 - sys0)) "$requests")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$system" "$protocol" "$round" "$rps" \
        "$requests" "$ticks" "$us_per_req" "$errors" "$user_us" "$sys_us" >>"$RESULTS"
    log "$(printf '%-6s %-5s round %s: %10s req/s  %9s requests  cpu %6.2f s  %7s µs/req (user %s, kernel %s)  errors %s' \
        "$system" "$protocol" "$round" "$rps" "$requests" \
        "$(awk -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN{print t / hz}')" "$us_per_req" "$user_us" "$sys_us" "$errors")"
    log "$(printf '%-6s %-5s round %s: %.3f sleeps per request' "$system" "$protocol" "$round" \
        "$(awk -v s=$((sleeps1 - sleeps0)) -v n="$requests" 'BEGIN{print s / n}')")"
    if ((errors > 0)); then
        log "warning: $system $protocol round $round had $errors errors (see $out)"
    fi
}

# SYSCALLS=N: the syscalls worth naming (those with a tracepoint here), and all of them.
syscall_events() {
    local events=raw_syscalls:sys_enter name
    for name in read readv recvfrom recvmsg write writev sendto sendmsg sendfile64 splice \
        epoll_wait epoll_pwait epoll_pwait2 epoll_ctl accept4 setsockopt getsockopt getsockname \
        close shutdown futex ioctl getpid mmap munmap madvise brk mprotect io_uring_enter; do
        [[ -d /sys/kernel/tracing/events/syscalls/sys_enter_$name ]] && events+=",syscalls:sys_enter_$name"
    done
    echo "$events"
}

tcp_segments_sent() { awk '$1 == "Tcp:" && $2 ~ /^[0-9]/ {print $12}' /proc/net/snmp; }

# count_syscalls SYSTEM PROTOCOL: SYSCALLS requests through SYSTEM with its system calls counted;
# lines "system protocol name count requests" appended to $SYSCALL_RESULTS.
count_syscalls() {
    local system=$1 protocol=$2 url pids perf_pid out segments0 segments1 requests
    url=$(url_for "$system" "$protocol")
    local load=(h2load --h1 -t1 -c"$CONNECTIONS" -H ":authority: $HOST")
    [[ -z $EXTRA_HEADER ]] || load+=(-H "$EXTRA_HEADER")
    # Every connection opened and pooled first: what is counted is keep-alive requests.
    taskset -c "$LOAD_CPU" "${load[@]}" -n$((CONNECTIONS * 100)) "$url" >"$WORK/syscalls-warmup-$system-$protocol.txt" 2>&1 ||
        die "h2load failed: $(cat "$WORK/syscalls-warmup-$system-$protocol.txt")"
    pids=$(proxy_pids "$system" | paste -sd, -)
    out=$WORK/syscalls-$system-$protocol.csv
    perf stat -x, -e "$(syscall_events)" -p "$pids" -o "$out" &
    perf_pid=$!
    PIDS+=("$perf_pid")
    sleep 1 # perf attaches to every thread
    segments0=$(tcp_segments_sent)
    taskset -c "$LOAD_CPU" "${load[@]}" -n"$SYSCALLS" "$url" >"$WORK/syscalls-load-$system-$protocol.txt" 2>&1 ||
        die "h2load failed: $(cat "$WORK/syscalls-load-$system-$protocol.txt")"
    segments1=$(tcp_segments_sent)
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    unset 'PIDS[-1]'
    requests=$(awk '/^status codes: /{print $3}' "$WORK/syscalls-load-$system-$protocol.txt")
    [[ $requests == "$SYSCALLS" ]] ||
        die "$system $protocol: $requests of $SYSCALLS requests answered 2xx: $(cat "$WORK/syscalls-load-$system-$protocol.txt")"
    awk -F, -v s="$system" -v p="$protocol" -v n="$SYSCALLS" '$1 ~ /^[0-9]+$/ && $1 > 0 {
        name = $3; sub(/^raw_syscalls:sys_enter$/, "(all)", name); sub(/^syscalls:sys_enter_/, "", name)
        print s, p, name, $1, n }' "$out" >>"$SYSCALL_RESULTS"
    echo "$system $protocol (TCP-segments) $((segments1 - segments0)) $SYSCALLS" >>"$SYSCALL_RESULTS"
    log "$system $protocol: $(awk -v s="$system" -v p="$protocol" '$1 == s && $2 == p && $3 == "(all)" {printf "%.3f", $4 / $5}' "$SYSCALL_RESULTS") system calls per request"
}

syscall_report() {
    local protocol
    {
        echo "# System calls per request: Sluice vs nginx"
        echo
        echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $("$NGINX_BIN" -v 2>&1), sluice $("$SLUICE_BIN" --version 2>/dev/null || echo '?')"
        echo "- $SYSCALLS requests per system and protocol: h2load --h1 -t1 -c$CONNECTIONS (after a warm-up that pools every connection), GET $PATH_UNDER_TEST ($BODY_BYTES B, route: $ROUTE, backend: $BACKEND); \`perf stat\` on syscall tracepoints, one worker each"
        echo "- (TCP-segments): segments the whole machine sent meanwhile (/proc/net/snmp OutSegs), per request"
        for protocol in $PROTOCOLS; do
            echo
            echo "## $protocol"
            echo
            echo "| system call | sluice / request | nginx / request |"
            echo "|---|---:|---:|"
            awk -v p="$protocol" '$2 == p {key = $3; names[key] = 1; v[$1, key] = $4 / $5}
                END {for (k in names) printf "| %s | %.3f | %.3f |\n", k, v["sluice", k], v["nginx", k]}' "$SYSCALL_RESULTS" |
                sort -t'|' -k3,3gr
        done
    } >"$REPORT_TMP"
}

# --- report ------------------------------------------------------------------------------------

median() { sort -g | awk '{v[NR] = $1} END{if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

column_for() {
    local system=$1 protocol=$2 col=$3
    awk -F'\t' -v s="$system" -v p="$protocol" -v c="$col" '$1 == s && $2 == p {print $c}' "$RESULTS"
}

report() {
    local system protocol rps cpu errors s_cpu n_cpu s_rps n_rps
    {
        echo "# Proxy CPU per request: Sluice vs nginx"
        echo
        echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs: $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
        echo "- $("$NGINX_BIN" -v 2>&1), sluice $("$SLUICE_BIN" --version 2>/dev/null || echo '(no --version)'), $(wrk -v 2>&1 | head -n1 | awk '{print $1, $2}')"
        echo "- wrk -t1 -c$CONNECTIONS -d$DURATION on CPU $LOAD_CPU with the backend ($BACKEND); proxy on CPU $PROXY_CPU, one worker; GET $PATH_UNDER_TEST ($BODY_BYTES B, route: $ROUTE, access log: $ACCESS_LOG, Sluice tracing: $OTEL), $ROUNDS rounds, alternating"
        if [[ " $PROTOCOLS " == *" h2 "* ]]; then
            echo "- h2: $(h2load --version | head -n1) -t1 -c$H2_CONNECTIONS -m$H2_STREAMS -D$DURATION (HTTP/2 over TLS, ALPN h2; HTTP/1.1 to the backend)"
        fi
        if [[ " $PROTOCOLS " == *" grpc-stream "* ]]; then
            echo "- grpc-stream: ghz -c$GRPC_CONCURRENCY --connections $GRPC_CONNECTIONS -z$DURATION, $GRPC_STREAM_CALL streams of $GRPC_STREAM_MESSAGES messages, each answered with 1 KiB; requests are messages answered (OK calls × $GRPC_STREAM_MESSAGES), so µs/req is CPU per message"
        fi
        if [[ " $PROTOCOLS " == *" grpc "* ]]; then
            echo "- grpc: ghz $("$GRPC_TOOLS/ghz" --version 2>&1 | head -n1) -c$GRPC_CONCURRENCY --connections $GRPC_CONNECTIONS -z$DURATION, $GRPC_CALL (1 KiB responses) over TLS, HTTP/2 to scripts/grpc-backend (grpc-go); requests are OK calls"
        fi
        echo
        echo "## Runs"
        echo
        echo "| system | protocol | round | RPS | requests | proxy CPU s | CPU µs/req | user µs/req | kernel µs/req | errors |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        awk -F'\t' -v hz="$CLK_TCK" '{printf "| %s | %s | %s | %.0f | %s | %.2f | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 / hz, $7, $9, $10, $8}' "$RESULTS"
        echo
        echo "## Medians"
        echo
        echo "| system | protocol | median RPS | median proxy CPU µs/req | user | kernel | errors |"
        echo "|---|---|---:|---:|---:|---:|---:|"
        for protocol in $PROTOCOLS; do
            for system in $SYSTEMS; do
                rps=$(column_for "$system" "$protocol" 4 | median)
                cpu=$(column_for "$system" "$protocol" 7 | median)
                errors=$(column_for "$system" "$protocol" 8 | awk '{n += $1} END{print n + 0}')
                printf '| %s | %s | %.0f | %.2f | %.2f | %.2f | %s |\n' "$system" "$protocol" "$rps" "$cpu" \
                    "$(column_for "$system" "$protocol" 9 | median)" \
                    "$(column_for "$system" "$protocol" 10 | median)" "$errors"
            done
        done
        if [[ " $SYSTEMS " == *" sluice "* && " $SYSTEMS " == *" nginx "* ]]; then
            echo
            echo "## Sluice ÷ nginx"
            echo
            echo "| protocol | CPU per request (target ≤ 1.0) | RPS |"
            echo "|---|---:|---:|"
            for protocol in $PROTOCOLS; do
                s_cpu=$(column_for sluice "$protocol" 7 | median)
                n_cpu=$(column_for nginx "$protocol" 7 | median)
                s_rps=$(column_for sluice "$protocol" 4 | median)
                n_rps=$(column_for nginx "$protocol" 4 | median)
                awk -v p="$protocol" -v sc="$s_cpu" -v nc="$n_cpu" -v sr="$s_rps" -v nr="$n_rps" \
                    'BEGIN{printf "| %s | %.3f%s | %.3f |\n", p, sc / nc, (sc <= nc ? "" : " ✗"), sr / nr}'
            done
        fi
        if [[ $OTEL == on ]]; then
            local exported dropped
            exported=$(grep -o '"spans": [0-9]*' "$WORK/otelcol.log" | awk '{n += $2} END{print n + 0}')
            dropped=$(curl -fsS "http://127.0.0.1:$SLUICE_ADMIN/metrics" |
                awk '$1 == "sluice_otel_spans_dropped_total" {print $2}')
            echo
            echo "Spans: $exported received by the Collector, ${dropped:-?} dropped by Sluice (\`sluice_otel_spans_dropped_total\`; the last few seconds' may still wait for export)."
        fi
    } >"$REPORT_TMP"
}

# --- main --------------------------------------------------------------------------------------

main() {
    local protocol round system
    [[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, got '$ROUNDS'"
    ensure_tools
    ensure_sluice
    WORK=$(mktemp -d -t sluice-bench-proxy.XXXXXX)
    RESULTS=$WORK/results.tsv
    REPORT_TMP=$WORK/report.md
    : >"$RESULTS"

    make_cert
    [[ $ROUTE != basic-auth ]] || make_htpasswd
    start_backend
    ! wants_grpc || start_grpc_backend
    [[ $OTEL == off ]] || start_collector
    for system in $SYSTEMS; do
        case $system in
            nginx) start_nginx ;;
            sluice) start_sluice ;;
            *) die "unknown system '$system' (want sluice and/or nginx)" ;;
        esac
        for protocol in $PROTOCOLS; do
            case $protocol in http | https | h2 | grpc | grpc-stream) ;; *) die "unknown protocol '$protocol' (want http, https, h2, grpc, grpc-stream)" ;; esac
            check_proxy "$system" "$protocol"
        done
    done

    if ((SYSCALLS > 0)); then
        SYSCALL_RESULTS=$WORK/syscalls.txt
        : >"$SYSCALL_RESULTS"
        for protocol in $PROTOCOLS; do
            [[ $protocol == http || $protocol == https ]] || die "SYSCALLS counts HTTP/1.1 only (http, https), not $protocol"
            for system in $SYSTEMS; do
                count_syscalls "$system" "$protocol"
            done
        done
        syscall_report
        mkdir -p "$(dirname "$OUT")"
        cp "$REPORT_TMP" "$OUT"
        cat "$OUT"
        log "report written to $OUT"
        return
    fi

    for protocol in $PROTOCOLS; do
        if [[ $WARMUP != 0 ]]; then
            for system in $SYSTEMS; do
                log "warm-up $system $protocol ($WARMUP)"
                run_load "$protocol" "$(url_for "$system" "$protocol")" "$WARMUP" "$WORK/load-warmup-$system-$protocol.txt"
            done
        fi
        for ((round = 1; round <= ROUNDS; round++)); do
            for system in $SYSTEMS; do
                measure "$system" "$protocol" "$round"
            done
        done
    done

    report
    mkdir -p "$(dirname "$OUT")"
    cp "$REPORT_TMP" "$OUT"
    cat "$OUT"
    log "report written to $OUT"
}

main "$@"
