#!/usr/bin/env bash
# Builds h2spec (the HTTP/2 conformance checker, github.com/summerwind/h2spec) from its Go module
# and caches it in a folder keyed by its version, as scripts/kube-tools.sh does for the kube tools.
# Prints the binary's path, and nothing else, on stdout:
#
#   H2SPEC=$(scripts/h2spec.sh)      # progress goes to stderr
#
# A second run costs nothing. The binary is built in a temporary folder and renamed into place, so
# an interrupted build never leaves half a binary; a lock serialises concurrent callers. ~20 s cold
# on 2 cores. Needs Go (/usr/local/go/bin is added to PATH when `go` is not found) and the Go module
# proxy. crates/proxy/tests/it/h2spec.rs runs it against Sluice's TLS listener.
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube: the same cache as the kube tools).
set -euo pipefail

# The newest release; its module has no go.mod, hence "+incompatible".
H2SPEC_VERSION=v2.2.1+incompatible

cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
bin="$cache/bin-h2spec-$H2SPEC_VERSION-$(uname -m)"
if [[ -x $bin/h2spec ]]; then
  echo "$bin/h2spec"
  exit 0
fi

log() { echo "h2spec: $*" >&2; }

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { log "go not found (install Go into /usr/local/go)"; exit 1; }

mkdir -p "$cache" "$bin"
exec 9>"$cache/.lock-h2spec"
flock 9
if [[ -x $bin/h2spec ]]; then
  echo "$bin/h2spec"
  exit 0
fi

work=$(mktemp -d "$cache/.build-h2spec.XXXXXX") # same file system as $bin: mv is an atomic rename
trap 'rm -rf "$work"' EXIT
started=$SECONDS
log "building h2spec $H2SPEC_VERSION"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" GOWORK=off GOBIN="$work"
go install -trimpath -ldflags "-s -w" "github.com/summerwind/h2spec/cmd/h2spec@$H2SPEC_VERSION" \
  >"$work/output.log" 2>&1 || { cat "$work/output.log" >&2; exit 1; }
chmod 0755 "$work/h2spec"
mv -f "$work/h2spec" "$bin/h2spec"
log "ready in $((SECONDS - started)) s"
echo "$bin/h2spec"
