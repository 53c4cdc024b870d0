#!/usr/bin/env bash
# Builds the external-auth test pair, cached in a folder keyed by their versions (as
# scripts/grpc-tools.sh does):
#   oauth2-proxy     the real oauth2-proxy (github.com/oauth2-proxy/oauth2-proxy/v7), the auth
#                    server most ingress-nginx clusters put behind `auth-url` / `auth-signin`
#   mockoidc-serve   an OpenID Connect provider (scripts/mockoidc, on
#                    github.com/oauth2-proxy/mockoidc) that signs everyone in as one test user
# Prints the folder holding both, and nothing else, on stdout:
#
#   OAUTH2_TOOLS=$(scripts/oauth2-proxy.sh)   # $OAUTH2_TOOLS/oauth2-proxy, $OAUTH2_TOOLS/mockoidc-serve
#
# A second run costs nothing. Built in a temporary folder and renamed into place, so an interrupted
# build never leaves half a binary; a lock serialises concurrent callers. ~2 min cold on 2 cores.
# Needs Go (/usr/local/go/bin is added to PATH when `go` is not found) and the Go module proxy.
# crates/proxy/tests/it/external_auth.rs runs them.
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube: the same cache as the other Go tools).
set -euo pipefail

OAUTH2_PROXY_VERSION=v7.15.6

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source_dir=$ROOT/scripts/mockoidc
# The provider's version is its source: a change to it builds a new folder.
provider_version=$(cat "$source_dir/go.mod" "$source_dir/go.sum" "$source_dir/main.go" | sha256sum | cut -c1-12)
cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
bin="$cache/bin-oauth2-proxy-$OAUTH2_PROXY_VERSION-mockoidc-$provider_version-$(uname -m)"
if [[ -x $bin/oauth2-proxy && -x $bin/mockoidc-serve ]]; then
  echo "$bin"
  exit 0
fi

log() { echo "oauth2-proxy: $*" >&2; }

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { log "go not found (install Go into /usr/local/go)"; exit 1; }

mkdir -p "$cache"
exec 9>"$cache/.lock-oauth2-proxy"
flock 9
if [[ -x $bin/oauth2-proxy && -x $bin/mockoidc-serve ]]; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d "$cache/.build-oauth2-proxy.XXXXXX") # same file system as $bin: mv is an atomic rename
trap 'rm -rf "$work"' EXIT
started=$SECONDS
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" GOWORK=off
mkdir -p "$work/out"

# quiet CMD...: run CMD, showing its (long) output only if it fails.
quiet() {
  "$@" >"$work/output.log" 2>&1 || { cat "$work/output.log" >&2; return 1; }
}

log "building oauth2-proxy $OAUTH2_PROXY_VERSION"
GOBIN="$work/out" quiet go install -trimpath -ldflags "-s -w" \
  "github.com/oauth2-proxy/oauth2-proxy/v7@$OAUTH2_PROXY_VERSION"
log "building mockoidc-serve ($provider_version)"
cp -r "$source_dir" "$work/src"
(cd "$work/src" && quiet go build -mod=mod -trimpath -ldflags "-s -w" -o "$work/out/mockoidc-serve" .)
chmod 0755 "$work/out/oauth2-proxy" "$work/out/mockoidc-serve"
rm -rf "$bin"
mv "$work/out" "$bin"
log "ready in $((SECONDS - started)) s"
echo "$bin"
