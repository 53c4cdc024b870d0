#!/usr/bin/env bash
# The official Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance) against Sluice
# on the real one-node cluster (scripts/kube-node.sh). `run` keeps the suite's report and log;
# `check` (the test command's step) judges them against what Sluice claims to pass.
#
#   scripts/gateway-conformance.sh build   build (once per version) the suite's test binary, the
#                                          echo-basic and CoreDNS binaries and their images; prints
#                                          the cache folder
#   scripts/gateway-conformance.sh run     build, node up, images imported, standard CRDs, Sluice's
#                                          manifests and a GatewayClass `sluice`, then the suite;
#                                          report and log into $OUT (default docs/conformance/<run>)
#   scripts/gateway-conformance.sh check   `run` with the profiles, features and timeouts of
#                                          docs/conformance/claims.env, then every test named in
#                                          docs/conformance/expected-pass.txt must pass; a failing
#                                          one fails the check, one passing beyond the list is
#                                          named (add it). Files in $OUT (default a temporary folder).
#
# What `build` makes (cached in $SLUICE_KUBE_CACHE/gateway-conformance-<version>-<arch>/, nothing
# from anywhere but the Go module proxy):
#   - gw-conformance.test: the conformance module has `replace sigs.k8s.io/gateway-api => ../`, so
#     its module download is placed at conformance/ inside a writable copy of the gateway-api module
#     download and built there with GOWORK=off (../shared/notes/go-tools.md);
#   - echo-basic (up to v1.6 conformance/echo-basic of the same module; from v1.7 the module
#     sigs.k8s.io/gateway-api-conformance-images, v0.1.0 where the required version is not served:
#     substitutions.txt says so) and, where the base manifests name it (v1.6), CoreDNS
#     (github.com/coredns/coredns at that version), each static (CGO_ENABLED=0) in a FROM scratch
#     image saved as an OCI archive;
#   - images.txt: every image reference the suite's manifests (base/ and tests/) name. `run` imports
#     the echo-basic archive under each `.../echo-basic:*` reference and the CoreDNS archive under the
#     coredns one, exactly as the manifests spell them, so the kubelet (IfNotPresent) finds them in
#     containerd and pulls nothing. The GRPCRoute tests' backends (grpc-infra-backend-v1..3) are the
#     same echo-basic image with GRPC_ECHO_SERVER set: GATEWAY-GRPC needs nothing more, nor does
#     GATEWAY-TLS (its tls-backend and tcp-backend are echo-basic with TLS_SERVER_CERT or
#     TCP_ECHO_SERVER), nor GATEWAY-TCP and GATEWAY-UDP (echo-basic with TCP_ECHO_SERVER or
#     UDP_ECHO_SERVER; v0.1.0's has both). Other references (echo-advanced, used by mesh tests)
#     are not provided: those tests are outside the profiles Sluice claims.
#
# Env: GATEWAY_API_VERSION (default v1.7.0, the newest release that builds here; it needs
# GOTOOLCHAIN=go1.27.3, exported here, which the go command fetches once as a module; v1.6.3
# builds with the machine's Go), SLUICE_KUBE_CACHE, OUT, SUITE_TIMEOUT (the
# test binary's -test.timeout, default 40m), SUITE_ARGS (more suite flags, e.g. --run-test=NAME),
# SUPPORTED_FEATURES (default Gateway,HTTPRoute), PROFILES (default GATEWAY-HTTP), SLUICE_NODE_KEEP=1
# (leave the node up afterwards; scripts/kube-node.sh down), TIMEOUT_OVERRIDES (the suite's
# --timeout-config-overrides, `Name:seconds;...`, e.g. `HTTPRouteMustHaveCondition:15`: a failing
# test waits out each of its timeouts, 60-180 s by default, so a first run shortens them),
# GATEWAY_ADDRESS_POOL (default 198.18.0.64/26; empty: every Gateway on the node's address): Sluice's
# --gateway-address-pool, each Gateway an address of its own, made local in the node's namespace
# (`ip route add local POOL dev lo`: every address of the pool is the node's, gone with the node).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

version=${GATEWAY_API_VERSION:-v1.7.0}
coredns_module=github.com/coredns/coredns
cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
out_dir="$cache/gateway-conformance-$version-$(uname -m)"
log() { echo "gateway-conformance: $*" >&2; }
die() { log "$*"; exit 1; }
command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
case $version in v1.[0-6].*) ;; *) export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3} ;; esac
# Versions of sigs.k8s.io/gateway-api-conformance-images to try when the one required is not served.
CONFORMANCE_IMAGES_FALLBACK=${CONFORMANCE_IMAGES_FALLBACK:-v0.1.0}

built() {
  [[ -x $out_dir/gw-conformance.test && -f $out_dir/echo-basic.tar && -s $out_dir/images.txt ]] &&
    { [[ -f $out_dir/coredns.tar ]] || ! grep -q '/coredns/coredns:' "$out_dir/images.txt"; }
}

# image NAME BINARY ARCHIVE [USER]: a FROM scratch image with BINARY as /NAME, saved as ARCHIVE.
image() {
  local name=$1 bin=$2 archive=$3 user=${4:-} ctx
  ctx=$(mktemp -d)
  cp "$bin" "$ctx/$name"
  {
    echo 'FROM scratch'
    echo "COPY $name /$name"
    [[ -z $user ]] || echo "USER $user"
    echo "ENTRYPOINT [\"/$name\"]"
  } >"$ctx/Containerfile"
  podman --runtime runc --cgroup-manager cgroupfs build --quiet -f "$ctx/Containerfile" \
    -t "localhost/gateway-conformance/$name:$version" "$ctx" >/dev/null
  rm -f "$archive"
  podman save --quiet --format oci-archive -o "$archive" "localhost/gateway-conformance/$name:$version" >/dev/null
  rm -rf "$ctx"
}

cmd_build() {
  if built; then
    echo "$out_dir"
    return 0
  fi
  command -v go >/dev/null || die "go not found (install Go into /usr/local/go)"
  command -v podman >/dev/null || die "podman not found (scripts/kube-node.sh up installs it)"
  mkdir -p "$cache"
  exec 9>"$cache/.lock-gateway-conformance"
  flock 9
  if built; then
    echo "$out_dir"
    return 0
  fi
  local work json gw conf coredns_version t0=$SECONDS
  work=$(mktemp -d "$cache/.gateway-conformance.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  log "downloading sigs.k8s.io/gateway-api@$version and its conformance module"
  json=$(cd "$work" && GOWORK=off GOFLAGS=-mod=mod go mod download -json \
    "sigs.k8s.io/gateway-api@$version" "sigs.k8s.io/gateway-api/conformance@$version")
  gw=$(sed -n 's/^[[:space:]]*"Dir": "\(.*gateway-api@.*\)",\{0,1\}$/\1/p' <<<"$json")
  conf=$(sed -n 's/^[[:space:]]*"Dir": "\(.*conformance@.*\)",\{0,1\}$/\1/p' <<<"$json")
  [[ -d $gw && -d $conf ]] || { echo "$json" >&2; die "no module folders for $version"; }
  cp -r "$gw" "$work/src"
  chmod -R u+w "$work/src"
  rm -rf "$work/src/conformance"
  cp -r "$conf" "$work/src/conformance"
  chmod -R u+w "$work/src/conformance"
  mkdir -p "$work/out"
  # From v1.7 the conformance module takes echo-basic (and its gRPC/TCP/UDP echo servers) from the
  # module sigs.k8s.io/gateway-api-conformance-images. The version v1.7.0 requires (v0.2.0) is not
  # served by the module proxy here; v0.1.0 is, builds the same suite (the packages the tests use
  # are the same) and its echo-basic serves everything the base manifests ask (HTTP, h2c, HTTPS,
  # gRPC, TCP and UDP echo). Take the required version when it downloads, else the newest that does.
  local images_dir="" wanted
  wanted=$(sed -n 's#^[[:space:]]*sigs.k8s.io/gateway-api-conformance-images[[:space:]]\(v[^[:space:]]*\).*#\1#p' \
    "$work/src/conformance/go.mod" | head -n 1)
  if [[ -n $wanted ]]; then
    local v
    for v in "$wanted" $CONFORMANCE_IMAGES_FALLBACK; do
      json=$(cd "$work" && GOWORK=off GOFLAGS=-mod=mod go mod download -json \
        "sigs.k8s.io/gateway-api-conformance-images@$v" 2>/dev/null) || true
      images_dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
      [[ -d $images_dir ]] && break
      log "sigs.k8s.io/gateway-api-conformance-images@$v is not served here"
    done
    [[ -d $images_dir ]] || die "no version of sigs.k8s.io/gateway-api-conformance-images downloads (tried $wanted $CONFORMANCE_IMAGES_FALLBACK)"
    if [[ $v != "$wanted" ]]; then
      log "building with sigs.k8s.io/gateway-api-conformance-images@$v in place of $wanted"
      (cd "$work/src/conformance" && GOWORK=off go mod edit \
        -replace "sigs.k8s.io/gateway-api-conformance-images=sigs.k8s.io/gateway-api-conformance-images@$v")
      echo "sigs.k8s.io/gateway-api-conformance-images@$v (required: $wanted)" >"$work/out/substitutions.txt"
    fi
  fi
  log "building the suite (go test -c)"
  (cd "$work/src/conformance" && GOWORK=off GOFLAGS=-mod=mod go test -c -o "$work/out/gw-conformance.test" .)
  log "building echo-basic"
  if [[ -f $work/src/conformance/echo-basic/echo-basic.go ]]; then
    (cd "$work/src/conformance/echo-basic" && CGO_ENABLED=0 GOWORK=off go build -o "$work/echo-basic" .)
  else
    [[ -d $images_dir ]] || die "the conformance module has no echo-basic and names no images module"
    cp -r "$images_dir" "$work/images"
    chmod -R u+w "$work/images"
    (cd "$work/images/echo-basic" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod go build -o "$work/echo-basic" .)
  fi
  # Every image the suite's manifests name, as they spell it.
  cat "$work/src/conformance/base/manifests.yaml" "$work/src/conformance/tests/"*.yaml |
    sed -n 's/^[[:space:]]*image:[[:space:]]*\([^[:space:]#]*\).*/\1/p' | sort -u >"$work/out/images.txt"
  cp "$work/src/conformance/base/manifests.yaml" "$work/out/base-manifests.yaml"
  # CoreDNS: only versions whose manifests name it (v1.6 does, v1.7 does not).
  coredns_version=$(sed -n 's#.*/coredns/coredns:\(v[0-9.]*\)$#\1#p' "$work/out/images.txt" | head -n 1)
  if [[ -n $coredns_version ]]; then
    log "building $coredns_module@$coredns_version"
    (cd "$work" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod GOBIN="$work/bin" go install "$coredns_module@$coredns_version")
    image coredns "$work/bin/coredns" "$work/out/coredns.tar"
  fi
  image echo-basic "$work/echo-basic" "$work/out/echo-basic.tar"
  rm -rf "$out_dir"
  mv "$work/out" "$out_dir"
  log "built in $((SECONDS - t0)) s: $out_dir"
  echo "$out_dir"
}

cmd_run() {
  local dir node=scripts/kube-node.sh node_ip=198.18.0.2 out tmp ref t0=$SECONDS crds rc
  dir=$(cmd_build)
  out=${OUT:-docs/conformance/$(date -u +%Y-%m-%d)-$version-gateway-http}
  mkdir -p "$out"
  out=$(realpath "$out")
  export SLUICE_IMAGE_PROFILE=${SLUICE_IMAGE_PROFILE:-dev}
  exec 8>"${SLUICE_NODE_DIR:-/var/tmp/sluice-node}.lock"
  flock -w 1200 8 || die "another run holds the node for 20 min"
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'; [[ -n \${SLUICE_NODE_KEEP:-} ]] || '$node' down || true" EXIT
  k() { "$node" kubectl "$@"; }

  "$node" up
  log "node up ($((SECONDS - t0)) s)"
  local pool=${GATEWAY_ADDRESS_POOL-198.18.0.64/26}
  if [[ -n $pool ]]; then
    # Every address of the pool local to the node: Sluice's wildcard sockets get connections to
    # them and tell the Gateways apart by the local address.
    "$node" exec ip route replace local "$pool" dev lo
  fi
  "$node" import-image localhost/sluice:0.1.0
  while read -r ref; do
    case $ref in
      */echo-basic:*) "$node" import "$dir/echo-basic.tar" "$ref" ;;
      */coredns/coredns:*) "$node" import "$dir/coredns.tar" "$ref" ;;
      *) log "not provided (outside GATEWAY-HTTP and GATEWAY-GRPC): $ref" ;;
    esac
  done <"$dir/images.txt"
  log "images imported ($((SECONDS - t0)) s)"

  crds=$(GATEWAY_API_VERSION=$version scripts/gateway-crds.sh)
  # The CRDs only, not the release's ValidatingAdmissionPolicy (*vap*, scripts/gateway-crds.sh).
  find "$crds/standard" -name 'gateway.networking.k8s.io_*.yaml' ! -name '*vap*' \
    -exec sh -c 'for f; do echo ---; cat "$f"; done' sh {} + >"$tmp/crds.yaml"
  k apply --server-side -f "$tmp/crds.yaml" >/dev/null
  k wait --for condition=Established --timeout 60s -f "$tmp/crds.yaml" >/dev/null

  # The manifests as a user applies them; the image is the one imported, and the Gateway's address
  # is the node's (host network): --publish-status-address instead of --publish-service.
  sed -e 's#image: sluice:0.1.0#image: localhost/sluice:0.1.0#' \
    -e "s#- --publish-service=\$(POD_NAMESPACE)/sluice#- --publish-status-address=$node_ip#" \
    deploy/manifests/sluice.yaml >"$tmp/sluice.yaml"
  grep -q "publish-status-address=$node_ip" "$tmp/sluice.yaml" || die "no --publish-service line to replace"
  if [[ -n $pool ]]; then
    sed -i "s@# - --gateway-address-pool=.*@- --gateway-address-pool=$pool@" "$tmp/sluice.yaml"
    grep -q -- "- --gateway-address-pool=$pool" "$tmp/sluice.yaml" || die "no --gateway-address-pool line to enable"
  fi
  cat >"$tmp/class.yaml" <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec:
  controllerName: sluice.dev/gateway-controller
YAML
  k apply -f "$tmp/sluice.yaml" >/dev/null
  # Right after the CRDs, kubectl's discovery may not know the kind yet: try again for a while.
  local i
  for ((i = 0; i < 30; i++)); do
    k apply -f "$tmp/class.yaml" >/dev/null 2>&1 && break
    sleep 1
  done
  k apply -f "$tmp/class.yaml" >/dev/null
  k rollout status -n sluice daemonset/sluice --timeout 180s
  log "Sluice ready ($((SECONDS - t0)) s)"

  # The suite inside the node's namespace (the Gateway's address, Services and pods are there).
  log "suite: profiles ${PROFILES:-GATEWAY-HTTP}, features ${SUPPORTED_FEATURES:-Gateway,HTTPRoute}, log $out/suite.log"
  rc=0
  # shellcheck disable=SC2086
  "$node" exec "$dir/gw-conformance.test" -test.run 'TestConformance$' -test.v \
    -test.timeout "${SUITE_TIMEOUT:-40m}" \
    --gateway-class=sluice \
    --supported-features="${SUPPORTED_FEATURES:-Gateway,HTTPRoute}" \
    --conformance-profiles="${PROFILES:-GATEWAY-HTTP}" \
    --organization=sluice --project=sluice --url=https://sluice.dev --version=0.1.0 \
    --contact=sluice-maintainers \
    --timeout-config-overrides="${TIMEOUT_OVERRIDES:-}" \
    --report-output="$out/report.yaml" ${SUITE_ARGS:-} >"$out/suite.log" 2>&1 || rc=$?
  log "suite exited $rc after $((SECONDS - t0)) s"
  k logs -n sluice -l app.kubernetes.io/component=controller --tail=400 >"$out/sluice.log" 2>&1 || true
  # What the cluster looked like at the end: pods that never got Ready explain a setup timeout.
  { k get pods -A -o wide; echo; k get events -A --sort-by=.lastTimestamp | tail -n 150; } >"$out/cluster.txt" 2>&1 || true
  # The verdicts (each test and its first level of subtests), why each skipped test was skipped,
  # and the full log compressed (a failing test polls every 100 ms: megabytes of the same line).
  grep -E '^(--- |    --- )(PASS|FAIL|SKIP)' "$out/suite.log" >"$out/results.txt" || true
  grep -oE 'Skipping [A-Za-z0-9]+: .*' "$out/suite.log" | sort -u >"$out/skipped.txt" || true
  grep -E '^    --- (PASS|FAIL)' "$out/results.txt" | awk '{print $2}' | sort | uniq -c >&2 || true
  gzip -9f "$out/suite.log"
  return "$rc"
}

cmd_check() {
  local claims=docs/conformance/claims.env expected=docs/conformance/expected-pass.txt
  local passed missing extra rc=0 t0=$SECONDS
  [[ -f $claims && -f $expected ]] || die "$claims or $expected missing"
  # shellcheck source=/dev/null
  source "$claims"
  export PROFILES SUPPORTED_FEATURES TIMEOUT_OVERRIDES
  OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/sluice-conformance.XXXXXX")}
  export OUT
  # The suite exits 1 when any test fails: the verdicts below decide.
  cmd_run || rc=$?
  passed=$(grep -E '^    --- PASS' "$OUT/results.txt" | awk '{sub("TestConformance/", "", $3); print $3}' | sort -u)
  [[ -n $passed ]] || die "no test passed (suite exit $rc): see $OUT/suite.log.gz and $OUT/cluster.txt"
  missing=$(comm -23 <(grep -v '^#' "$expected" | sed '/^$/d' | sort -u) <(echo "$passed"))
  extra=$(comm -13 <(grep -v '^#' "$expected" | sed '/^$/d' | sort -u) <(echo "$passed"))
  log "$(wc -l <<<"$passed") tests passed in $((SECONDS - t0)) s; $(grep -c '^    --- FAIL' "$OUT/results.txt" || true) failed (report: $OUT)"
  [[ -z $extra ]] || log "passing, not yet in $expected (add them): $(echo $extra)"
  if [[ -n $missing ]]; then
    log "FAILED: expected to pass, did not: $(echo $missing)"
    log "see $OUT/results.txt, $OUT/suite.log.gz, $OUT/sluice.log, $OUT/cluster.txt"
    exit 1
  fi
  log "all checks passed"
}

case ${1:-} in
  build) cmd_build ;;
  run) cmd_run ;;
  check) cmd_check ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
