#!/usr/bin/env bash
# Regenerates docs/status-page.png, the README's picture of the status page: `sluice demo` with a
# broken Ingress added to its folder, some traffic, then headless Chromium's screenshot of the
# status listener's `/`.
#
#   scripts/status-screenshot.sh [OUTPUT.png]      (default docs/status-page.png)
#
# Needs Debian's chromium (scripts/test.sh installs it) and curl. Everything listens on 127.0.0.1
# ports 1818x (the demo's backends keep their own 18081 and 18082); all is stopped at the end.
# Env: SLUICE_CHROMIUM (default: chromium on PATH), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/status-page.png}
browser=${SLUICE_CHROMIUM:-$(command -v chromium || true)}
[[ -x $browser ]] || { echo "chromium not found: apt-get install chromium" >&2; exit 1; }

http=127.0.0.1:18180 https=127.0.0.1:18543 admin=127.0.0.1:18113 status=127.0.0.1:18246
cargo build --quiet -p sluice --bin sluice
sluice=${CARGO_TARGET_DIR:-target}/debug/sluice

work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$sluice" demo --dir "$work/config" --http-listen $http --https-listen $https \
  --admin-listen $admin --status-listen $status >"$work/demo.log" 2>&1 &
pid=$!

# Waits (bounded) until `curl ARGS` prints something containing $1.
wait_for() {
  local expected=$1; shift
  for _ in $(seq 100); do
    curl -fsS "$@" 2>/dev/null | grep -qF -- "$expected" && return 0
    sleep 0.1
  done
  echo "timed out waiting for '$expected' from curl $*; demo log:" >&2
  cat "$work/demo.log" >&2
  exit 1
}
wait_for '"ready": true' "http://$status/config"

# A broken Ingress: its Service port does not exist (its path answers 503) and an annotation
# value is invalid. Both become diagnostics; everything else keeps serving.
cat >"$work/config/shop.yaml" <<'EOF'
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  annotations:
    nginx.ingress.kubernetes.io/proxy-read-timeout: "soon"
spec:
  rules:
  - host: shop.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: hello, port: {name: grpc}}}
EOF
wait_for 'has no port grpc' "http://$status/config"

# A rollout under way for "echo": a second slice with a pod that is terminating but still
# serving. An EndpointSlice alone is an endpoint swap (the fast path), not a recompile.
cat >"$work/config/echo-rollout.yaml" <<'EOF'
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-rollout
  labels:
    kubernetes.io/service-name: echo
addressType: IPv4
ports:
- name: http
  port: 18082
endpoints:
- addresses: ["127.0.0.2"]
  conditions: {ready: false, serving: true, terminating: true}
EOF
wait_for '127.0.0.2:18082' "http://$status/config"

# Traffic, viewed twice so the page shows rates over the interval between the views.
traffic() {
  for _ in $(seq "$1"); do
    curl -s -o /dev/null -H 'Host: demo.example.com' "http://$http/"
    curl -s -o /dev/null -H 'Host: demo.example.com' "http://$http/echo"
  done
  curl -s -o /dev/null -H 'Host: shop.example.com' "http://$http/"
  curl -s -o /dev/null -H 'Host: nowhere.example.com' "http://$http/"
}
traffic 20
curl -fsS -o /dev/null "http://$status/"
traffic 60
sleep 1

"$browser" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=1280,1600 --screenshot="$work/page.png" \
  "http://$status/" >"$work/chromium.log" 2>&1 \
  || { cat "$work/chromium.log" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
mv "$work/page.png" "$out"
echo "wrote $out" >&2
