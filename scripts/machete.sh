#!/usr/bin/env bash
# Builds cargo-machete (finds dependencies a crate declares but never names) with `cargo install
# --locked` and caches it in a folder keyed by its version, as scripts/h2spec.sh does for h2spec.
# Prints the binary's path, and nothing else, on stdout:
#
#   MACHETE=$(scripts/machete.sh)      # progress goes to stderr
#   "$MACHETE" --with-metadata         # from the repository root: nonzero when one is unused
#
# A second run costs nothing. It is built in a temporary folder and renamed into place, so an
# interrupted build never leaves half a binary; a lock serialises concurrent callers. ~4.5 min cold
# on 2 cores. scripts/test.sh runs it.
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube: the same cache as the kube tools).
set -euo pipefail

MACHETE_VERSION=0.9.2

cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
bin="$cache/bin-cargo-machete-$MACHETE_VERSION-$(uname -m)"
if [[ -x $bin/cargo-machete ]]; then
  echo "$bin/cargo-machete"
  exit 0
fi

log() { echo "cargo-machete: $*" >&2; }

mkdir -p "$cache" "$bin"
exec 9>"$cache/.lock-cargo-machete"
flock 9
if [[ -x $bin/cargo-machete ]]; then
  echo "$bin/cargo-machete"
  exit 0
fi

work=$(mktemp -d "$cache/.build-cargo-machete.XXXXXX") # same file system as $bin: mv is atomic
trap 'rm -rf "$work"' EXIT
started=$SECONDS
log "building cargo-machete $MACHETE_VERSION"
# Its own target folder (inside $work), never the workspace's: a tool build must not evict or
# invalidate the test build's artifacts.
CARGO_TARGET_DIR="$work/target" cargo install --locked --quiet --root "$work/root" \
  --version "$MACHETE_VERSION" cargo-machete >"$work/output.log" 2>&1 ||
  { cat "$work/output.log" >&2; exit 1; }
mv -f "$work/root/bin/cargo-machete" "$bin/cargo-machete"
log "ready in $((SECONDS - started)) s"
echo "$bin/cargo-machete"
