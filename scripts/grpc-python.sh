#!/usr/bin/env bash
# Installs grpcio (the gRPC project's own C-core client and server, with Python bindings) and
# hyperframe (python-hyper's HTTP/2 frame codec) from PyPI into a virtual environment cached by
# their versions, as scripts/h2spec.sh caches h2spec. Prints that environment's python, and
# nothing else, on stdout:
#
#   SLUICE_GRPC_PYTHON=$(scripts/grpc-python.sh)     # progress goes to stderr
#
# crates/proxy/tests/it/grpc.rs runs its gRPC servers and clients with it (generic handlers on raw
# bytes: no protoc); crates/wire/tests/wire/frames.rs compares wire's HTTP/2 frame parser with
# hyperframe's. A second run costs nothing; a lock serialises concurrent callers and the
# environment is built beside its final place and renamed into it, so an interrupted install
# never leaves half of one. Needs python3 with venv.
#
# Env: SLUICE_GRPC_CACHE (default ~/.cache/sluice-grpc).
set -euo pipefail

GRPCIO_VERSION=1.85.1
HYPERFRAME_VERSION=6.1.0

cache=${SLUICE_GRPC_CACHE:-$HOME/.cache/sluice-grpc}
venv="$cache/venv-grpcio-$GRPCIO_VERSION-hyperframe-$HYPERFRAME_VERSION-$(uname -m)"
if [[ -x $venv/bin/python ]]; then
  echo "$venv/bin/python"
  exit 0
fi

log() { echo "grpc-python: $*" >&2; }

mkdir -p "$cache"
exec 9>"$cache/.lock-grpcio"
flock 9
if [[ -x $venv/bin/python ]]; then
  echo "$venv/bin/python"
  exit 0
fi

work=$(mktemp -d "$cache/.build-grpcio.XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$SECONDS
log "installing grpcio $GRPCIO_VERSION, hyperframe $HYPERFRAME_VERSION"
# The venv is made in its final place's name (its scripts record their path), in the work folder
# first; pip's wheel is prebuilt for common platforms, so this takes seconds.
python3 -m venv "$work/venv" >&2
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "grpcio==$GRPCIO_VERSION" "hyperframe==$HYPERFRAME_VERSION" >"$work/output.log" 2>&1 ||
  { cat "$work/output.log" >&2; exit 1; }
"$work/venv/bin/python" -c 'import grpc, hyperframe' >&2
mv -f "$work/venv" "$venv"
log "ready in $((SECONDS - started)) s"
echo "$venv/bin/python"
