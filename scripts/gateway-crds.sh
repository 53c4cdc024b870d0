#!/usr/bin/env bash
# Fetches the Gateway API CRDs (the release's config/crd/standard and config/crd/experimental) from
# the sigs.k8s.io/gateway-api Go module and caches them in a folder keyed by the version. Prints
# that folder, and nothing else, on stdout:
#
#   CRDS=$(scripts/gateway-crds.sh)              # $CRDS/standard/*.yaml, $CRDS/experimental/*.yaml
#   kubectl apply -f "$CRDS/standard"            # then: Gateway API in that cluster
#
# The CRDs are YAML: nothing is built, so v1.7.0 needs no newer Go toolchain. `go mod download`
# fetches and verifies the module's zip (against the checksum database) and then refuses to use
# it on Go < 1.27 ("requires go >= 1.27.0"); the verified zip is in the module cache by then, and
# only its config/crd folder is taken out of it. A second run costs nothing.
#
# Each folder holds the release's CRDs and, in v1.7, a ValidatingAdmissionPolicy
# (`*_vap_safeupgrades.yaml`, which refuses channel downgrades); tests apply the CRDs only
# (`gateway.networking.k8s.io_*.yaml` without `vap`).
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube), GATEWAY_API_VERSION (default v1.7.0;
# v1.6.3 works the same).
set -euo pipefail

version=${GATEWAY_API_VERSION:-v1.7.0}
module=sigs.k8s.io/gateway-api
cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
out="$cache/crds-gateway-api-$version"

have() { [[ -f $out/standard/gateway.networking.k8s.io_httproutes.yaml && -d $out/experimental ]]; }
if have; then
  echo "$out"
  exit 0
fi

log() { echo "gateway-crds: $*" >&2; }
command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { log "go not found (install Go into /usr/local/go)"; exit 1; }
command -v unzip >/dev/null || { log "unzip not found"; exit 1; }

mkdir -p "$cache"
exec 9>"$cache/.lock-gateway-crds"
flock 9
if have; then
  echo "$out"
  exit 0
fi

work=$(mktemp -d "$cache/.crds.XXXXXX") # same file system as $out: mv is an atomic rename
trap 'rm -rf "$work"' EXIT
log "downloading $module@$version"
# Outside any module (GOWORK=off, an empty folder): only the download is wanted.
json=$(cd "$work" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "$module@$version" || true)
zip=$(sed -n 's/^[[:space:]]*"Zip": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
if [[ -z $zip || ! -f $zip ]]; then
  log "no module zip for $module@$version:"
  echo "$json" >&2
  exit 1
fi
prefix="$module@$version/config/crd"
unzip -q "$zip" "$prefix/standard/*" "$prefix/experimental/*" -d "$work/unzipped"
mkdir -p "$work/crds"
mv "$work/unzipped/$prefix/standard" "$work/unzipped/$prefix/experimental" "$work/crds/"
chmod -R u+w,a+rX "$work/crds"
rm -rf "$out"
mv "$work/crds" "$out"
log "$(ls "$out/standard" | wc -l) standard and $(ls "$out/experimental" | wc -l) experimental files in $out"
echo "$out"
