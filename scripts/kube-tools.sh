#!/usr/bin/env bash
# Builds the Kubernetes programs the tests and the deploy check need — kube-apiserver, kubectl, etcd
# and helm — from their Go modules (no release binaries or images can be downloaded here) and caches
# them in a folder keyed by their versions. Prints that folder, and nothing else, on stdout:
#
#   BIN=$(scripts/kube-tools.sh)          # progress goes to stderr
#   BIN=$(scripts/kube-tools.sh --node)   # the same folder, also with kubelet, kube-proxy,
#                                         # kube-controller-manager and kube-scheduler
#
# --node is what scripts/kube-node.sh needs for a real node: the four node programs at the same
# k8s.io/kubernetes version, in the same folder (built only when asked: ~3.5 min more on 2 cores
# with a warm module cache, ~330 MB of binaries). Callers without --node never wait for them.
#
# A second run costs nothing (all four binaries present: print and exit). Each binary is built in a
# temporary folder and renamed into place, so an interrupted build never leaves half a binary; only
# missing binaries are built. A lock serialises concurrent callers.
#
# Needs Go >= 1.26 (for helm; /usr/local/go/bin is added to PATH when `go` is not found) and the Go
# module proxy. Measured cold on 2 cores, sharing them with a concurrent Rust build: 548 s in all
# (kubectl 144 s including module resolution, kube-apiserver 237 s with peak RSS ~1.8 GB, etcd 56 s,
# helm 111 s; 8.6 CPU-minutes, so ~5 min on 2 idle cores). It leaves ~1.2 GB of Go module cache and
# ~250 MB of binaries (kube-apiserver 103 MB, helm 62, kubectl 59, etcd 27).
#
# Env: SLUICE_KUBE_CACHE (default ~/.cache/sluice-kube).
set -euo pipefail

KUBE_VERSION=v1.35.4 # kube-apiserver and kubectl, from k8s.io/kubernetes
ETCD_VERSION=v3.6.16 # go.etcd.io/etcd/server/v3 (Debian's 3.4 is too old for kube-apiserver 1.35)
HELM_VERSION=v3.22.0 # newest helm v3 at the time of writing; needs Go >= 1.26

cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
bin="$cache/bin-k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION-$(uname -m)"
tools=(kube-apiserver kubectl etcd helm)
node_tools=(kubelet kube-proxy kube-controller-manager kube-scheduler)
case ${1:-} in
  --node) tools+=("${node_tools[@]}") ;;
  "") ;;
  *) echo "usage: $0 [--node]" >&2; exit 2 ;;
esac

have_all() {
  local t
  for t in "${tools[@]}"; do [[ -f $bin/$t && -x $bin/$t ]] || return 1; done
}
if have_all; then
  echo "$bin"
  exit 0
fi

log() { echo "kube-tools: $*" >&2; }

command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { log "go not found (install Go into /usr/local/go)"; exit 1; }

mkdir -p "$cache" "$bin"
# One builder at a time; whoever waited finds the binaries the other one built.
exec 9>"$cache/.lock"
flock 9
if have_all; then
  echo "$bin"
  exit 0
fi

rm -rf "$cache"/.build.* # an interrupted build's leftovers (we hold the lock: nobody else builds)
work=$(mktemp -d "$cache/.build.XXXXXX") # same file system as $bin: mv is an atomic rename
trap 'rm -rf "$work"' EXIT
out="$work/out"
mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -buildvcs=false" GOWORK=off
started=$SECONDS

# new_module DIR: an empty throwaway module in which `go get -tool` pins one program's dependencies.
new_module() {
  mkdir -p "$1"
  (cd "$1" && go mod init sluice.dev/kube-tools/"$(basename "$1")" >/dev/null 2>&1)
}

# install_bin NAME: move the finished $out/NAME into the cache folder (atomic rename).
install_bin() {
  chmod 0755 "$out/$1"
  [[ ! -d $bin/$1 ]] || rm -rf "${bin:?}/$1" # a leftover of an older layout
  mv -f "$out/$1" "$bin/$1"
  log "$1 ready ($((SECONDS - started)) s)"
}

need() { [[ ! -f $bin/$1 || ! -x $bin/$1 ]]; }

# quiet CMD...: run CMD, showing its (long) output only if it fails.
quiet() {
  "$@" >"$work/output.log" 2>&1 || { cat "$work/output.log" >&2; return 1; }
}

# --- kube-apiserver and kubectl ---------------------------------------------------------------
# k8s.io/kubernetes replaces its staging modules (k8s.io/api, client-go, …) with ./staging paths, so
# `go install` refuses it. A throwaway module replaces each of them with the published v0.X.Y instead.
# needs_kubernetes: one of the programs asked for comes from k8s.io/kubernetes and is missing.
needs_kubernetes() {
  local t
  for t in "${tools[@]}"; do
    case $t in etcd | helm) ;; *) need "$t" && return 0 ;; esac
  done
  return 1
}
if needs_kubernetes; then
  log "k8s.io/kubernetes $KUBE_VERSION: resolving modules"
  mod="$work/kubernetes"
  new_module "$mod"
  cd "$mod"
  kmod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  staging=$(sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9.-]*\) => \./staging/.*|\1|p' "$kmod")
  [[ -n $staging ]] || { log "no staging modules found in $kmod"; exit 1; }
  staging_version="v0.${KUBE_VERSION#v1.}"
  edits=()
  for m in $staging; do edits+=(-replace "$m=$m@$staging_version"); done
  go mod edit "${edits[@]}"
  kpkgs=()
  for t in "${tools[@]}"; do
    case $t in etcd | helm) ;; *) kpkgs+=("k8s.io/kubernetes/cmd/$t@$KUBE_VERSION") ;; esac
  done
  quiet go get -tool "${kpkgs[@]}"

  # What hack/lib/version.sh stamps in; the build date is the release's (module) time.
  minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  kdate=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes")
  kflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    kflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    kflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$kdate -X $pkg.gitCommit="
  done
  # kubectl first: the quick one. The node programs share most packages with kube-apiserver, so
  # after it each costs ~1 min (Go's build cache).
  for t in kubectl kube-apiserver "${node_tools[@]}"; do
    need "$t" || continue
    [[ " ${tools[*]} " == *" $t "* ]] || continue
    log "building $t $KUBE_VERSION$([[ $t == kube-apiserver ]] && echo " (the long one: ~4 min on 2 cores)")"
    go build -trimpath -ldflags "$kflags" -o "$out/$t" "k8s.io/kubernetes/cmd/$t"
    install_bin "$t"
  done
fi

# --- etcd ---------------------------------------------------------------------------------------
if need etcd; then
  log "building etcd $ETCD_VERSION"
  mod="$work/etcd"
  new_module "$mod"
  cd "$mod"
  quiet go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
  install_bin etcd
fi

# --- helm ---------------------------------------------------------------------------------------
if need helm; then
  log "building helm $HELM_VERSION"
  mod="$work/helm"
  new_module "$mod"
  cd "$mod"
  quiet go get -tool "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  # Like helm's Makefile: `helm template`/`lint` assume the Kubernetes version of the client-go they
  # are built with (client-go v0.M.N is Kubernetes 1.M) instead of the source's default 1.20.
  cgo=$(go list -m -f '{{.Version}}' k8s.io/client-go) # v0.M.N
  cgo=${cgo#v0.}
  hflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  hflags+=" -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    hflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=${cgo%%.*}"
  done
  go build -trimpath -ldflags "$hflags" -o "$out/helm" helm.sh/helm/v3/cmd/helm
  install_bin helm
fi

have_all || { log "some binaries are missing from $bin"; exit 1; }
log "all built in $((SECONDS - started)) s"
echo "$bin"
