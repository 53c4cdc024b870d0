#!/usr/bin/env bash
# Fetches ingress-nginx's Helm chart, as its project published it, from the k8s.io/ingress-nginx
# Go module (the module's zip holds the repository's charts/ folder) and caches it in a folder
# keyed by the chart's version. Prints that folder, and nothing else, on stdout:
#
#   CHART=$(scripts/ingress-nginx-chart.sh)      # helm install ingress-nginx "$CHART" ...
#
# The one version of the module the Go module proxy serves is a pseudo-version of 2024-07-08:
# chart 4.11.0, controller v1.11.0. Nothing is built; `go mod download` fetches and verifies the
# zip (against the checksum database, ~4.5 MB) and only charts/ingress-nginx is copied out. A
# second run costs nothing. scripts/test-kube-node.sh installs it with Sluice's image.
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube), INGRESS_NGINX_MODULE_VERSION.
set -euo pipefail

version=${INGRESS_NGINX_MODULE_VERSION:-v0.0.0-20240708192948-52c50467d67d}
module=k8s.io/ingress-nginx
cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
out="$cache/chart-ingress-nginx-$version"

have() { [[ -f $out/Chart.yaml && -d $out/templates ]]; }
if have; then
  echo "$out"
  exit 0
fi

log() { echo "ingress-nginx-chart: $*" >&2; }
command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { log "go not found (install Go into /usr/local/go)"; exit 1; }

mkdir -p "$cache"
exec 9>"$cache/.lock-ingress-nginx-chart"
flock 9
if have; then
  echo "$out"
  exit 0
fi

# `go mod download` needs a module to run in (any will do); GOFLAGS=-mod=mod keeps a vendored
# environment from refusing.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && go mod init sluice.test/chart >/dev/null 2>&1)
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version" | jq -r '.Dir // empty')
[[ -n $dir && -f $dir/charts/ingress-nginx/Chart.yaml ]] ||
  { log "$module@$version has no charts/ingress-nginx"; exit 1; }
tmp="$out.tmp.$$"
rm -rf "$tmp"
cp -r "$dir/charts/ingress-nginx" "$tmp"
# The module cache's files are read-only; the copy need not be.
chmod -R u+w "$tmp"
mv "$tmp" "$out"
log "chart $(awk '/^version:/ {print $2}' "$out/Chart.yaml") (controller $(awk '/^appVersion:/ {print $2}' "$out/Chart.yaml")) in $out"
echo "$out"
