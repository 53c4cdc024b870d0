#!/usr/bin/env bash
# Builds an OpenTelemetry Collector with the OTLP receiver and the file and debug exporters from
# Go modules, with the Collector's own builder (ocb), and caches it in a folder keyed by its version,
# as scripts/h2spec.sh does for h2spec. Prints the binary's path, and nothing else, on stdout:
#
#   SLUICE_OTELCOL=$(scripts/otelcol.sh)      # progress goes to stderr
#
# A second run costs nothing. crates/proxy/tests/it/otel.rs runs it as the real receiver of Sluice's
# spans (OTLP/HTTP in, file exporter out as OTLP JSON, one line per batch).
#
# Why not plain `builder --config`: the builder runs `go mod tidy`, which also resolves the *test*
# imports of every component, and the contrib file exporter's tests import
# extension/encoding/otlpencodingextension, a module version the Go module proxy here refuses. So
# the builder only generates the sources (--skip-get-modules --skip-compilation); we pin the
# components with `go get`, let `go mod tidy -e` fill in the rest while tolerating that one test-only
# module, and `go build`, which never needs test imports. ~45 s for the builder and ~95 s for the
# Collector cold on 2 cores (~600 MB of Go module cache).
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube: the same cache as the kube tools).
set -euo pipefail

OTELCOL_VERSION=v0.165.0 # core (builder, otlpreceiver, debugexporter) and contrib (fileexporter)

cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
bin="$cache/bin-otelcol-$OTELCOL_VERSION-$(uname -m)"
if [[ -x $bin/otelcol-sluice ]]; then
  echo "$bin/otelcol-sluice"
  exit 0
fi

log() { echo "otelcol: $*" >&2; }

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { log "go not found (install Go into /usr/local/go)"; exit 1; }

mkdir -p "$cache" "$bin"
exec 9>"$cache/.lock-otelcol"
flock 9
if [[ -x $bin/otelcol-sluice ]]; then
  echo "$bin/otelcol-sluice"
  exit 0
fi

work=$(mktemp -d "$cache/.build-otelcol.XXXXXX") # same file system as $bin: mv is an atomic rename
trap 'rm -rf "$work"' EXIT
started=$SECONDS
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" GOWORK=off

# quiet CMD...: run CMD, showing its (long) output only if it fails.
quiet() {
  "$@" >"$work/output.log" 2>&1 || { cat "$work/output.log" >&2; return 1; }
}

log "building the collector builder $OTELCOL_VERSION"
GOBIN="$work/tools" quiet go install -trimpath "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION"

core=go.opentelemetry.io/collector
contrib=github.com/open-telemetry/opentelemetry-collector-contrib
cat >"$work/builder.yaml" <<YAML
dist:
  name: otelcol-sluice
  description: OTLP receiver with file and debug exporters, for Sluice's tests
  output_path: $work/src
receivers:
  - gomod: $core/receiver/otlpreceiver $OTELCOL_VERSION
exporters:
  - gomod: $core/exporter/debugexporter $OTELCOL_VERSION
  - gomod: $contrib/exporter/fileexporter $OTELCOL_VERSION
YAML
log "generating sources"
quiet "$work/tools/builder" --config "$work/builder.yaml" --skip-get-modules --skip-compilation

log "resolving modules"
cd "$work/src"
quiet go mod init sluice.dev/otelcol
quiet go get "$core/receiver/otlpreceiver@$OTELCOL_VERSION" "$core/exporter/debugexporter@$OTELCOL_VERSION" \
  "$contrib/exporter/fileexporter@$OTELCOL_VERSION" "$core/otelcol@$OTELCOL_VERSION" \
  "$core/service@$OTELCOL_VERSION"
go mod tidy -e >"$work/tidy.log" 2>&1 || true # the test-only module above is the expected error
log "building the collector"
quiet go build -trimpath -ldflags "-s -w" -o "$work/otelcol-sluice" .
chmod 0755 "$work/otelcol-sluice"
mv -f "$work/otelcol-sluice" "$bin/otelcol-sluice"
log "ready in $((SECONDS - started)) s"
echo "$bin/otelcol-sluice"
