#!/usr/bin/env bash
# Builds the image (scripts/image.sh), checks its layout against deploy/Dockerfile
# (scripts/check-image.py), and runs it as deploy/manifests' DaemonSet runs it: host network, user
# 65532, read-only root file system, every capability dropped but NET_BIND_SERVICE, no new
# privileges (allowPrivilegeEscalation: false), a /tmp volume (the DaemonSet's emptyDir). On
# loopback only: Sluice serves a standalone config from a read-only volume on 127.0.0.N:80 and
# :443 (privileged ports: the binary's file capability at work for uid 65532), proxies to a
# backend started outside the container, answers /ready and /metrics, writes nothing outside its
# volumes, and on SIGTERM keeps serving for --shutdown-grace-period while /ready fails, finishes
# the request in flight, and exits 0. Then `sluice demo` from the image, and the certificate
# Job's security context (every capability dropped: the binary still execs).
#
#   scripts/test-image.sh            (scripts/test.sh runs it; root, podman from Debian)
#
# Without podman it compares the two files only, says so and exits 0, unless CI=true: then it
# fails. Every container is named sluice-test-image-<pid>-*, bounded in time and removed on exit.
# SLUICE_IMAGE_PROFILE (release or dev) is image.sh's. Measured on 2 shared cores: ~10 s with the binary built (image.sh ~2 s; most of the rest
# is the SIGTERM drain it waits for).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v podman >/dev/null; then
  if [[ ${CI:-} == true ]]; then
    echo "test-image: podman not found and CI=true: scripts/test.sh installs podman, buildah and runc" >&2
    exit 1
  fi
  echo "== image layout: deploy/Dockerfile and deploy/Containerfile.scratch"
  python3 scripts/check-image.py
  echo "test-image: podman not found: the image is not built or run (scripts/image.sh installs it)" >&2
  exit 0
fi

ref=$(scripts/image.sh | tail -n 1)
echo "== image layout: $ref"
python3 scripts/check-image.py "$ref"

# The backend outside the container: the binary the image was built from.
case ${SLUICE_IMAGE_PROFILE:-release} in
  dev) bin=${CARGO_TARGET_DIR:-target}/debug/sluice ;;
  *) bin=${CARGO_TARGET_DIR:-target}/release/sluice ;;
esac
podman=(podman --runtime runc --cgroup-manager cgroupfs)
# podman's default rlimits ask for more than these VMs allow: the hard limits, capped.
nofile=$(ulimit -Hn); [[ $nofile == unlimited || $nofile -gt 65536 ]] && nofile=65536
nproc=$(ulimit -Hu); [[ $nproc == unlimited || $nproc -gt 4096 ]] && nproc=4096
# The DaemonSet's container: deploy/manifests/sluice.yaml's securityContext, as podman flags.
# --read-only-tmpfs=false: podman would otherwise put tmpfs on /tmp, /run and /var/tmp; the pod
# gets only its declared volumes.
as_daemonset=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" --network host
  --user 65532:65532 --read-only --read-only-tmpfs=false --cap-drop all --cap-add NET_BIND_SERVICE
  --security-opt no-new-privileges)

name=sluice-test-image-$$
tmp=$(mktemp -d)
backend_pid=""
containers=()
cleanup() {
  local c
  for c in "${containers[@]}"; do "${podman[@]}" rm -f -t 0 "$c" >/dev/null 2>&1 || true; done
  [[ -n $backend_pid ]] && kill "$backend_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
# check NAME CMD..., checks_summary
# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh
free_on() { ! ss -Htln | awk '{print $4}' | grep -Eq "^(0\.0\.0\.0|\*|\[::\]|$1):($2)\$"; }

# A loopback address of our own whose ports are free.
for ((try = 0; ; try++)); do
  ip=127.0.0.$((100 + RANDOM % 150))
  free_on "${ip//./\\.}" '80|443|10254|10246|18080' && break
  ((try < 20)) || { echo "test-image: no free 127.0.0.N found" >&2; exit 1; }
done
echo "== as the DaemonSet runs it, on $ip"

"$bin" backend --listen "$ip:18080" --name image-test-backend >"$tmp/backend.log" 2>&1 &
backend_pid=$!
check "the backend (outside the container) answers" until_ok 10 curl -fsS -m 1 "http://$ip:18080/healthz"
mkdir -p "$tmp/config" "$tmp/tmp"
# The emptyDir the DaemonSet mounts on /tmp is world-writable, as here.
chmod 0777 "$tmp/tmp"
cat >"$tmp/config/app.yaml" <<YAML
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec:
  ports: [{name: http, port: 80, targetPort: 18080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: app-1
  namespace: default
  labels: {kubernetes.io/service-name: app}
addressType: IPv4
ports: [{name: http, port: 18080}]
endpoints: [{addresses: ["$ip"], conditions: {ready: true}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: app, namespace: default}
spec:
  ingressClassName: sluice
  rules:
    - host: app.test
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
YAML
chmod -R a+rX "$tmp/config"
grace=3
containers+=("$name-serve") # before run: a failed start can leave it created
"${podman[@]}" run -d --name "$name-serve" "${as_daemonset[@]}" \
  -v "$tmp/config:/config:ro" -v "$tmp/tmp:/tmp" "$ref" \
  serve --config /config --shutdown-grace-period=${grace}s \
  --http-listen="$ip:80" --https-listen="$ip:443" \
  --admin-listen="$ip:10254" --status-listen="$ip:10246" >/dev/null

ready() { curl -fsS -m 1 "http://$ip:10254/ready"; }
check "/ready answers 200 on the admin port" until_ok 30 ready
if [[ ${#failed[@]} -gt 0 ]]; then "${podman[@]}" logs "$name-serve" 2>&1 | tail -n 30; exit 1; fi

pid=$("${podman[@]}" inspect --format '{{.State.Pid}}' "$name-serve")
# status FIELD: the container process's /proc status line.
status() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$pid/status"; }
check "the process runs as 65532:65532" \
  bash -c "[[ '$(status Uid)' == 65532 && '$(status Gid)' == 65532 ]]"
# 0x400: bit 10, CAP_NET_BIND_SERVICE, and nothing else.
check "its capabilities: NET_BIND_SERVICE only (effective $(status CapEff), bounding $(status CapBnd))" \
  bash -c "[[ '$(status CapEff)' == 0000000000000400 && '$(status CapBnd)' == 0000000000000400 ]]"
# podman, unlike a kubelet, also puts an added capability in the ambient set of a non-root
# process; exec of a binary with file capabilities clears that set. So an empty ambient set with
# NET_BIND_SERVICE effective means the binary's file capability granted it, as on a node.
check "the capability comes from the binary's file capability (ambient $(status CapAmb))" \
  bash -c "[[ '$(status CapAmb)' == 0000000000000000 ]]"
check "no new privileges" bash -c "[[ '$(status NoNewPrivs)' == 1 ]]"
check "it listens on $ip:80 and :443 (privileged ports, as 65532)" \
  bash -c "ss -Htln | grep -q ' $ip:80 ' && ss -Htln | grep -q ' $ip:443 '"

get() { curl -sS -m 5 -o "$tmp/body" -w '%{http_code}' -H 'Host: app.test' "$@"; }
check "HTTP :80 proxies to the backend" \
  bash -c "[[ \$(curl -sS -m 5 -H 'Host: app.test' http://$ip/) == *image-test-backend* ]]"
check "HTTPS :443 proxies to the backend (default certificate)" \
  bash -c "[[ \$(curl -ksS -m 5 --resolve app.test:443:$ip https://app.test/) == *image-test-backend* ]]"
# Larger than client-body-buffer-size (and within proxy-body-size, 1m): with request buffering on,
# the body waits in an unnamed file in /tmp, the volume (the root file system refuses writes).
head -c 900000 /dev/urandom >"$tmp/upload"
upload() {
  local code
  code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H 'Host: app.test' \
    --data-binary @"$tmp/upload" "http://$ip/echo")
  echo "HTTP $code"
  [[ $code == 200 ]]
}
check "a 900 KB upload is buffered to a file (in /tmp, the volume) and proxied" \
  bash -c "$(declare -f upload); tmp='$tmp' ip='$ip' upload &&
    curl -fsS -m 5 http://$ip:10254/metrics | grep -qx 'sluice_request_bodies_buffered_total{to=\"file\"} 1'"
check "/metrics on the admin port counts the requests" \
  bash -c "curl -fsS -m 5 http://$ip:10254/metrics | grep -q '^nginx_ingress_controller_requests{.*host=\"app.test\"'"
# Nothing written in the container's own layer (the root is read-only; podman's own mount points
# for /etc/hosts, /etc/resolv.conf and the like are not writes of Sluice), nothing left in /tmp.
check "nothing written outside the volumes, nothing left in /tmp" \
  bash -c "changes=\$('${podman[0]}' diff --format '{{.Path}}' '$name-serve' |
      grep -Ev '^/(etc|etc/hosts|etc/hostname|etc/resolv.conf|run|run/.containerenv|dev|proc|sys|config|tmp)\$');
    [[ -z \$changes ]] || { echo \"written: \$changes\"; exit 1; }
    [[ -z \$(ls -A '$tmp/tmp') ]] || { ls -la '$tmp/tmp'; exit 1; }"

# SIGTERM with a request in flight, sent as ingress-nginx's chart does it (its preStop hook,
# /wait-shutdown, run in the container): /ready fails at once, new requests are still served
# during the grace period, the request in flight finishes, and the process exits 0 once it has.
curl -sS -m 20 -o "$tmp/slow" -w '%{http_code}' -H 'Host: app.test' "http://$ip/slow?ms=$(((grace + 2) * 1000))" \
  >"$tmp/slow.code" 2>&1 &
slow_pid=$!
sleep 0.5
start=$(date +%s%3N)
# It waits for the server to exit; the container's end then ends it too (as a preStop hook's).
"${podman[@]}" exec "$name-serve" /wait-shutdown >"$tmp/wait-shutdown.out" 2>&1 &
not_ready() { [[ $(curl -sS -m 1 -o /dev/null -w '%{http_code}' "http://$ip:10254/ready") == 503 ]]; }
check "after SIGTERM /ready answers 503" until_ok 2 not_ready
check "during the grace period new requests are still served" \
  bash -c "[[ \$(curl -sS -m 2 -H 'Host: app.test' http://$ip/) == *image-test-backend* ]]"
code=$(timeout 30 "${podman[@]}" wait "$name-serve" || echo timeout)
took=$(($(date +%s%3N) - start))
wait "$slow_pid" || true
check "the request in flight finished (200, $(cat "$tmp/slow" 2>/dev/null | tr -d '\n'))" \
  bash -c "[[ \$(cat '$tmp/slow.code') == 200 ]]"
check "exit code 0 (got $code) after $took ms: >= grace ${grace}s, within grace + the request + 5s" \
  bash -c "[[ '$code' == 0 ]] && (($took >= $grace * 1000 && $took < ($grace + 2 + 5) * 1000))"
echo "-- its log (last lines):"
"${podman[@]}" logs "$name-serve" 2>&1 | tail -n 4 | sed 's/^/   /'

# The same without the /tmp volume: the file cannot be made, so the upload fails. This shows the
# volume is where the buffered body went, and why the DaemonSet mounts one.
containers+=("$name-notmp") # before run: a failed start can leave it created
"${podman[@]}" run -d --name "$name-notmp" "${as_daemonset[@]}" -v "$tmp/config:/config:ro" "$ref" \
  serve --config /config --http-listen="$ip:80" --https-listen="$ip:443" \
  --admin-listen="$ip:10254" --status-listen="$ip:10246" >/dev/null
if until_ok 30 ready >/dev/null; then
  check "without the /tmp volume the same upload fails (the read-only root takes no file)" \
    bash -c "$(declare -f upload); tmp='$tmp' ip='$ip'; ! upload"
else
  check "without the /tmp volume it starts" false
fi
"${podman[@]}" rm -f -t 0 "$name-notmp" >/dev/null

echo "== sluice demo from the image (its own network namespace)"
containers+=("$name-demo") # before run: a failed start can leave it created
"${podman[@]}" run -d --name "$name-demo" --network none \
  --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" "$ref" demo >/dev/null
demo_pid=$("${podman[@]}" inspect --format '{{.State.Pid}}' "$name-demo")
demo_get() {
  [[ $(nsenter -t "$demo_pid" -n curl -sS -m 1 -H 'Host: demo.example.com' http://127.0.0.1:8080/) == *hello* ]]
}
check "podman run IMAGE demo answers on its :8080" until_ok 30 demo_get
# -t 5: SIGTERM, then SIGKILL after 5 s, which would show as exit code 137.
check "podman stop (SIGTERM) ends it with exit code 0" \
  bash -c "timeout 20 ${podman[*]} stop -t 5 $name-demo >/dev/null &&
    [[ \$(${podman[*]} inspect --format '{{.State.ExitCode}}' $name-demo) == 0 ]]"

echo "== the admission certificate Job's security context"
containers+=("$name-job0" "$name-job1") # --rm, but removed on exit should a run hang
job=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" --network none
  --user 65532:65532 --read-only --cap-drop all --security-opt no-new-privileges)
# The binary's file capability is permitted-only: with every capability dropped it still execs (an
# effective one made the kernel refuse: what a Job dropping ALL got on a real node, and what
# ingress-nginx's chart's certificate Jobs, run on this image, do), and serving a port below 1024
# then fails with a message that names the capability.
check "with every capability dropped, as the certificate Jobs run, the binary execs" \
  bash -c "timeout 30 ${podman[*]} run --rm --name $name-job0 ${job[*]} $ref --version"
check "with every capability dropped, serving :80 fails naming CAP_NET_BIND_SERVICE" \
  bash -c "out=\$(timeout 30 ${podman[*]} run --rm --name $name-job1 ${job[*]} $ref demo --http-listen 127.0.0.1:80 2>&1);
    [[ \$? != 0 && \$out == *'CAP_NET_BIND_SERVICE'* ]] || { echo \"\$out\"; exit 1; }"

checks_summary test-image
