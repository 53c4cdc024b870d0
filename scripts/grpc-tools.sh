#!/usr/bin/env bash
# Builds the gRPC tools of the benchmarks and the lab's gRPC churn, cached in a folder keyed by
# their versions (as scripts/h2spec.sh does):
#   ghz            the gRPC load generator (github.com/bojand/ghz), from its Go module
#   grpc-backend   our gRPC server (scripts/grpc-backend: grpc-go's interop TestService + health +
#                  reflection), the "pod" behind the proxies; also Envoy's ext_authz Check service
#                  (authz.go), the auth server of the GRPC ExternalAuth tests
# Prints the folder holding both, and nothing else, on stdout:
#
#   GRPC_TOOLS=$(scripts/grpc-tools.sh)     # $GRPC_TOOLS/ghz, $GRPC_TOOLS/grpc-backend
#
# A second run costs nothing. Built in a temporary folder and renamed into place, so an interrupted
# build never leaves half a binary; a lock serialises concurrent callers. ~1 min cold on 2 cores.
# Needs Go (/usr/local/go/bin is added to PATH when `go` is not found) and the Go module proxy.
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube: the same cache as the other Go tools).
set -euo pipefail

GHZ_VERSION=v0.120.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source_dir=$ROOT/scripts/grpc-backend
# The backend's version is its source: a change to it builds a new folder.
backend_version=$(cat "$source_dir/go.mod" "$source_dir/go.sum" "$source_dir"/*.go | sha256sum | cut -c1-12)

cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
bin="$cache/bin-grpc-ghz-$GHZ_VERSION-backend-$backend_version-$(uname -m)"
if [[ -x $bin/ghz && -x $bin/grpc-backend ]]; then
  echo "$bin"
  exit 0
fi

log() { echo "grpc-tools: $*" >&2; }

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { log "go not found (install Go into /usr/local/go)"; exit 1; }

mkdir -p "$cache"
exec 9>"$cache/.lock-grpc-tools"
flock 9
if [[ -x $bin/ghz && -x $bin/grpc-backend ]]; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d "$cache/.build-grpc-tools.XXXXXX") # same file system as $bin: mv is an atomic rename
trap 'rm -rf "$work"' EXIT
started=$SECONDS
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" GOWORK=off
log "building ghz $GHZ_VERSION"
GOBIN="$work/out" go install -trimpath -ldflags "-s -w" "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION" \
  >"$work/ghz.log" 2>&1 || { cat "$work/ghz.log" >&2; exit 1; }
log "building grpc-backend ($backend_version)"
cp -r "$source_dir" "$work/src"
(cd "$work/src" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$work/out/grpc-backend" .) \
  >"$work/backend.log" 2>&1 || { cat "$work/backend.log" >&2; exit 1; }
chmod 0755 "$work/out/ghz" "$work/out/grpc-backend"
rm -rf "$bin"
mv -f "$work/out" "$bin"
log "ready in $((SECONDS - started)) s"
echo "$bin"
