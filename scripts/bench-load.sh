#!/usr/bin/env bash
# `sluice load` against wrk, on the same nginx, same pinning.
#
#   CPU 0: nginx, one worker, 1 KB file on 127.0.0.1:$PORT (HTTP) and :$TLS_PORT (HTTPS, no session
#          cache, no tickets: every handshake is full whatever the client does)
#   CPU 1: the generator (wrk, then sluice load, alternating ROUNDS times)
#
# Prints, per round, requests/s and the generator's CPU seconds (user+sys) per 100k requests, then
# the medians and the ratio sluice ÷ wrk. Also a fixed-rate accuracy run and a new-connection TLS run.
#
# Environment: ROUNDS=5 DURATION=5s CONNS=50 RATE=20000 PORT=28080 TLS_PORT=28443 (run it when
#              nothing else is using CPUs 0 and 1)
#              SLUICE_BIN=target/release/sluice  KEEP_WORK=0
# Build first: cargo build --release -p sluice
# Everything started here is stopped on exit, by recorded PID.
set -euo pipefail
trap 'echo "failed at line $LINENO: $BASH_COMMAND (status $?)" >&2' ERR

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-50}
RATE=${RATE:-20000}
PORT=${PORT:-28080}
TLS_PORT=${TLS_PORT:-28443}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SLUICE_BIN=${SLUICE_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/sluice}
[[ -x "$SLUICE_BIN" ]] || { echo "no $SLUICE_BIN: cargo build --release -p sluice" >&2; exit 1; }
# The peers come from Debian's packages; installed only when missing.
missing=()
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
command -v wrk >/dev/null || missing+=(wrk)
if ((${#missing[@]})); then
    sudo=(); [[ $(id -u) == 0 ]] || sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
        { "${sudo[@]}" apt-get update >&2 && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
fi
WORK=$(mktemp -d /tmp/sluice-load-bench.XXXXXX)
NGINX_PID=""

cleanup() {
    if [[ -n "$NGINX_PID" ]]; then kill -TERM "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
    [[ "${KEEP_WORK:-0}" == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

chmod 755 "$WORK"   # nginx's worker runs as nobody
mkdir -p "$WORK/html" "$WORK/tmp" "$WORK/logs"
head -c 768 /dev/urandom | base64 -w0 > "$WORK/html/1kb.txt"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/key.pem" \
    -out "$WORK/cert.pem" -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost 2>/dev/null
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
error_log $WORK/logs/error.log warn;
pid $WORK/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/tmp; proxy_temp_path $WORK/tmp; fastcgi_temp_path $WORK/tmp;
  uwsgi_temp_path $WORK/tmp; scgi_temp_path $WORK/tmp;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  server {
    listen 127.0.0.1:$PORT;
    listen 127.0.0.1:$TLS_PORT ssl;
    ssl_certificate $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    ssl_session_cache off;
    ssl_session_tickets off;
    root $WORK/html;
  }
}
CONF
taskset -c 0 nginx -p "$WORK" -c "$WORK/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/1kb.txt" && break; sleep 0.1; done
curl -sf -o /dev/null "http://127.0.0.1:$PORT/1kb.txt" || { echo "nginx does not serve the file" >&2; exit 1; }

URL="http://127.0.0.1:$PORT/1kb.txt"
TLS_URL="https://127.0.0.1:$TLS_PORT/1kb.txt"

# run NAME CMD...: prints "rps cpu_per_100k"
run() {
    local out
    out=$( { /usr/bin/time -f 'CPU %U %S' taskset -c 1 "$@" ; } 2>&1 )
    if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
        echo "warning: errors in: $*" >&2
        grep -E 'Non-2xx|Socket errors' <<<"$out" >&2
    fi
    local rps cpu
    rps=$(grep -m1 'Requests/sec' <<<"$out" | awk '{print $2}')
    cpu=$(grep -m1 '^CPU' <<<"$out" | awk '{print $2 + $3}')
    local secs=${DURATION%s}
    awk -v r="$rps" -v c="$cpu" -v s="$secs" 'BEGIN { printf "%.0f %.3f\n", r, c / (r * s / 100000) }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "# closed loop, 1 thread, $CONNS connections, $DURATION, HTTP/1.1 keep-alive, 1 KB"
: > "$WORK/wrk" ; : > "$WORK/sluice"
for i in $(seq "$ROUNDS"); do
    w=$(run wrk -t1 -c"$CONNS" -d"$DURATION" "$URL"); echo "$w" >> "$WORK/wrk"
    s=$(run "$SLUICE_BIN" load -t1 -c"$CONNS" -d"$DURATION" "$URL"); echo "$s" >> "$WORK/sluice"
    echo "round $i: wrk $w | sluice $s   (rps, generator cpu-s per 100k requests)"
done
wrk_rps=$(cut -d' ' -f1 "$WORK/wrk" | median); sl_rps=$(cut -d' ' -f1 "$WORK/sluice" | median)
wrk_cpu=$(cut -d' ' -f2 "$WORK/wrk" | median); sl_cpu=$(cut -d' ' -f2 "$WORK/sluice" | median)
# Rounds alternate, so a per-round ratio cancels slow drift in what else the machine is doing.
pair_ratio=$(paste -d' ' "$WORK/sluice" "$WORK/wrk" | awk '{ print $1 / $3 }' | median)
awk -v a="$sl_rps" -v b="$wrk_rps" -v c="$sl_cpu" -v d="$wrk_cpu" -v p="$pair_ratio" \
    'BEGIN { printf "median rps: sluice %d, wrk %d (ratio of medians %.3f, median of round ratios %.3f); cpu per 100k: sluice %.3fs, wrk %.3fs\n", a, b, a / b, p, c, d }'

for fixed in "$CONNS $RATE" "200 50000" "200 100000"; do
    read -r c r <<<"$fixed"
    echo "# fixed rate $r/s, 1 thread, $c connections, $DURATION"
    taskset -c 1 "$SLUICE_BIN" load -t1 -c"$c" -R"$r" -d"$DURATION" -U "$URL" > "$WORK/fixed.txt" || echo "(exit code $?)"
    grep -E 'Rate:|errors|First|^ 50.000|^ 99.000' "$WORK/fixed.txt" | tr -s ' ' | tr '\n' ' '
    echo "(corrected p50 p99, uncorrected p50 p99)"
done

echo "# new connection per request over TLS (server-side resumption off), closed loop, 1 thread"
: > "$WORK/wrk-tls" ; : > "$WORK/sluice-tls"
for i in $(seq "$ROUNDS"); do
    w=$(run wrk -t1 -c"$CONNS" -d"$DURATION" -H 'Connection: close' "$TLS_URL"); echo "$w" >> "$WORK/wrk-tls"
    s=$(run "$SLUICE_BIN" load -t1 -c"$CONNS" -d"$DURATION" --insecure --new-connection-per-request "$TLS_URL"); echo "$s" >> "$WORK/sluice-tls"
    echo "round $i: wrk $w | sluice $s"
done
wrk_rps=$(cut -d' ' -f1 "$WORK/wrk-tls" | median); sl_rps=$(cut -d' ' -f1 "$WORK/sluice-tls" | median)
awk -v a="$sl_rps" -v b="$wrk_rps" 'BEGIN { printf "median TLS new-connection rate: sluice %d/s, wrk %d/s, ratio %.3f\n", a, b, a / b }'
