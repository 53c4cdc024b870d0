#!/usr/bin/env bash
# A real Kubernetes API (etcd + kube-apiserver, no kubelet, scheduler or controller-manager) on
# 127.0.0.1 in the current network namespace, for tests and for trying the deploy/ manifests.
#
#   scripts/kube-cluster.sh start DIR [--bin BINDIR]   start etcd + kube-apiserver, wait for /readyz
#   scripts/kube-cluster.sh stop DIR                   stop both (idempotent)
#   scripts/kube-cluster.sh stop-apiserver DIR         stop only the API server
#   scripts/kube-cluster.sh start-apiserver DIR        start it again (same flags, certs and ports)
#   scripts/kube-cluster.sh run [--bin BINDIR] -- CMD [ARGS...]
#       in a new network namespace: start a cluster in a temporary folder, run CMD with
#       KUBECONFIG=DIR/admin.kubeconfig, SLUICE_KUBE_DIR=DIR and PATH=BINDIR:$PATH, stop it all
#       (also on error or Ctrl-C) and exit with CMD's status.
#
# `start` expects to own its ports: call it in a network namespace of your own (`unshare -rn`, or
# `ip netns`) with lo up, as `run` does. Ports (all on 127.0.0.1) come from ETCD_CLIENT_PORT (2379),
# ETCD_PEER_PORT (2380) and APISERVER_PORT (6443). BINDIR defaults to $SLUICE_KUBE_BIN, else to what
# scripts/kube-tools.sh builds (minutes, the first time).
#
# The API server also serves ClusterTrustBundle (certificates.k8s.io/v1beta1; off by default in
# Kubernetes 1.35, on with its feature gate and --runtime-config), a CA source Sluice reads;
# CLUSTER_TRUST_BUNDLES=0 at `start` leaves it off, as in a default cluster.
#
# DIR afterwards holds:
#   admin.kubeconfig   cluster-admin (client certificate with O=system:masters)
#   sluice.kubeconfig  token user system:serviceaccount:sluice:sluice in the groups a ServiceAccount
#                      has, so RBAC bound to ServiceAccount sluice/sluice applies to it exactly
#   pki/, tokens.csv, cluster.env (what start-apiserver reuses), etcd/ (data)
#   etcd.log, apiserver.log, etcd.pid, apiserver.pid  (each daemon leads its own process group)
#
# Cost, measured on 2 cores: `start` ~3.5–4 s on a new DIR (certificates ~0.2 s with EC P-256 keys,
# etcd healthy ~0.25 s, kube-apiserver /readyz ok ~3 s after it starts), ~2.9 s again on a DIR that
# has its certificates; `start-apiserver` ~2.3 s; `stop` ~1.2 s (the API server's graceful exit);
# `run -- true` ~5.5 s in all. Idle: ~300 MB RSS together.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
self="$here/$(basename "$0")"
log() { echo "kube-cluster: $*" >&2; }
die() { log "$*"; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# --- processes -----------------------------------------------------------------------------------

# alive PIDFILE NAME, stop_daemon PIDFILE NAME, spawn NAME LOG PIDFILE CMD...
# shellcheck source=lib/daemons.sh
source "$here/lib/daemons.sh"
# pki_key FILE, pki_ca CN, pki_sign NAME SUBJECT EXTENSIONS
# shellcheck source=lib/pki.sh
source "$here/lib/pki.sh"

# --- certificates and kubeconfigs ----------------------------------------------------------------

make_pki() {
  local pki="$dir/pki"
  [[ -f $pki/done ]] && return 0
  command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
  rm -rf "$pki"
  mkdir -p "$pki"
  (
    cd "$pki"
    umask 077
    pki_ca sluice-test-ca
    pki_sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    pki_sign admin "/O=system:masters/CN=admin" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
    # Service-account token signing (ES256).
    pki_key sa.key
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || true # (set -e does not apply in there: what counts is what got made)
  local f
  for f in ca.crt apiserver.crt apiserver.key admin.crt admin.key sa.key sa.pub; do
    [[ -s $pki/$f ]] || die "openssl failed to make $pki/$f"
  done
  touch "$pki/done"
}

# make_auth: tokens.csv and the kubeconfigs (rewritten on each start: the port may have changed).
make_auth() {
  # A static token user that RBAC sees exactly as ServiceAccount sluice/sluice.
  local token
  token=$(openssl rand -hex 24)
  printf '%s,system:serviceaccount:sluice:sluice,sluice-test-uid,"%s"\n' "$token" \
    "system:serviceaccounts,system:serviceaccounts:sluice,system:authenticated" >"$dir/tokens.csv"
  chmod 600 "$dir/tokens.csv"

  local pki="$dir/pki" server="https://127.0.0.1:$APISERVER_PORT" ca
  ca=$(base64 -w0 "$pki/ca.crt")
  kubeconfig() { # FILE USER USER-FIELDS
    umask 077
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sluice-test
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: $2
  user:
$3
contexts:
- name: $2@sluice-test
  context:
    cluster: sluice-test
    user: $2
current-context: $2@sluice-test
EOF
  }
  kubeconfig "$dir/admin.kubeconfig" admin "    client-certificate-data: $(base64 -w0 "$pki/admin.crt")
    client-key-data: $(base64 -w0 "$pki/admin.key")"
  kubeconfig "$dir/sluice.kubeconfig" sluice "    token: $token"
}

# --- daemons -------------------------------------------------------------------------------------

load_env() {
  [[ -f $dir/cluster.env ]] || die "$dir/cluster.env not found: run '$0 start $dir' first"
  # shellcheck source=/dev/null
  . "$dir/cluster.env"
}

start_etcd() {
  alive "$dir/etcd.pid" etcd && die "etcd already runs (pid $(<"$dir/etcd.pid"))"
  local client="http://127.0.0.1:$ETCD_CLIENT_PORT" peer="http://127.0.0.1:$ETCD_PEER_PORT" i
  spawn etcd "$dir/etcd.log" "$dir/etcd.pid" "$BIN/etcd" \
    --name sluice --data-dir "$dir/etcd" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "sluice=$peer" --initial-cluster-state new \
    --unsafe-no-fsync --log-level warn
  for ((i = 0; i < 300; i++)); do
    curl -fsS -m 1 "$client/health" 2>/dev/null | grep -q '"health":"true"' && return 0
    alive "$dir/etcd.pid" etcd || break
    sleep 0.1
  done
  log "etcd did not become healthy; last lines of $dir/etcd.log:"
  tail -n 30 "$dir/etcd.log" >&2 || true
  stop_daemon "$dir/etcd.pid" etcd
  return 1
}

start_apiserver() {
  alive "$dir/apiserver.pid" kube-apiserver && die "kube-apiserver already runs (pid $(<"$dir/apiserver.pid"))"
  local pki="$dir/pki" i started=$SECONDS
  local optional=()
  [[ ${CLUSTER_TRUST_BUNDLES:-1} == 0 ]] || optional+=(--feature-gates ClusterTrustBundle=true
    --runtime-config certificates.k8s.io/v1beta1/clustertrustbundles=true)
  echo "--- start $(date -u +%FT%TZ)" >>"$dir/apiserver.log"
  spawn kube-apiserver "$dir/apiserver.log" "$dir/apiserver.pid" "$BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
    --cert-dir "$pki" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --token-auth-file "$dir/tokens.csv" \
    --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
    --allow-privileged --profiling=false "${optional[@]}"
  # /readyz is open to anonymous users (system:public-info-viewer).
  local url="https://127.0.0.1:$APISERVER_PORT/readyz"
  for ((i = 0; i < 450; i++)); do
    if [[ $(curl -sS -m 2 --cacert "$pki/ca.crt" "$url" 2>/dev/null) == ok ]]; then
      log "kube-apiserver ready on https://127.0.0.1:$APISERVER_PORT after $((SECONDS - started)) s"
      return 0
    fi
    alive "$dir/apiserver.pid" kube-apiserver || { log "kube-apiserver exited"; break; }
    ((SECONDS - started < 90)) || { log "kube-apiserver not ready after 90 s"; break; }
    sleep 0.2
  done
  log "last lines of $dir/apiserver.log:"
  tail -n 30 "$dir/apiserver.log" >&2 || true
  stop_daemon "$dir/apiserver.pid" kube-apiserver
  return 1
}

# --- commands ------------------------------------------------------------------------------------

# set_dir DIR: the cluster folder, made absolute.
set_dir() {
  [[ -n ${1:-} ]] || usage
  mkdir -p "$1"
  dir=$(cd "$1" && pwd)
}

# resolve_bin [BINDIR]: $BIN with the four programs in it.
resolve_bin() {
  BIN=${1:-${SLUICE_KUBE_BIN:-}}
  if [[ -z $BIN ]]; then
    BIN=$("$here/kube-tools.sh") || die "scripts/kube-tools.sh failed"
  fi
  BIN=$(cd "$BIN" && pwd) || die "no such folder: $BIN"
  local t
  for t in etcd kube-apiserver kubectl; do
    [[ -x $BIN/$t ]] || die "$BIN/$t not found (scripts/kube-tools.sh builds it)"
  done
}

cmd_start() {
  local bindir=""
  set_dir "${1:-}"
  shift
  while (($#)); do
    case $1 in
      --bin) bindir=${2:?--bin needs a folder}; shift 2 ;;
      *) usage ;;
    esac
  done
  command -v curl >/dev/null || die "curl not found (apt-get install curl)"
  resolve_bin "$bindir"
  ETCD_CLIENT_PORT=${ETCD_CLIENT_PORT:-2379}
  ETCD_PEER_PORT=${ETCD_PEER_PORT:-2380}
  APISERVER_PORT=${APISERVER_PORT:-6443}
  CLUSTER_TRUST_BUNDLES=${CLUSTER_TRUST_BUNDLES:-1}
  local t0=$SECONDS
  alive "$dir/apiserver.pid" kube-apiserver && die "a cluster already runs in $dir"
  # Certificates are made once per DIR; ports and binaries are remembered for start-apiserver.
  printf 'BIN=%q\nETCD_CLIENT_PORT=%q\nETCD_PEER_PORT=%q\nAPISERVER_PORT=%q\nCLUSTER_TRUST_BUNDLES=%q\n' \
    "$BIN" "$ETCD_CLIENT_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$CLUSTER_TRUST_BUNDLES" >"$dir/cluster.env"
  make_pki
  make_auth
  start_etcd || exit 1
  start_apiserver || { stop_daemon "$dir/etcd.pid" etcd; exit 1; }
  log "cluster up in $((SECONDS - t0)) s: KUBECONFIG=$dir/admin.kubeconfig"
}

cmd_stop() {
  [[ -n ${1:-} ]] || usage
  [[ -d $1 ]] || exit 0 # nothing was started there
  set_dir "$1"
  stop_daemon "$dir/apiserver.pid" kube-apiserver
  stop_daemon "$dir/etcd.pid" etcd
}

cmd_stop_apiserver() {
  [[ -n ${1:-} ]] || usage
  [[ -d $1 ]] || exit 0
  set_dir "$1"
  stop_daemon "$dir/apiserver.pid" kube-apiserver
}

cmd_start_apiserver() {
  [[ -d ${1:-} ]] || die "no such cluster folder: ${1:-}"
  set_dir "$1"
  load_env
  alive "$dir/etcd.pid" etcd || die "etcd is not running in $dir"
  start_apiserver || exit 1
}

# After `run`: nothing left running, nothing left on disk (SLUICE_KUBE_KEEP=1 keeps the folder).
run_cleanup() {
  "$self" stop "$dir" || true
  if [[ -n ${SLUICE_KUBE_KEEP:-} ]]; then log "kept $dir"; else rm -rf "$dir"; fi
}

cmd_run() {
  local bindir=""
  while (($#)); do
    case $1 in
      --bin) bindir=${2:?--bin needs a folder}; shift 2 ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  (($#)) || usage
  if [[ -z ${SLUICE_KUBE_IN_NETNS:-} ]]; then
    # Build (needs the network) before leaving it.
    resolve_bin "$bindir"
    command -v unshare >/dev/null || die "unshare not found (apt-get install util-linux)"
    command -v ip >/dev/null || die "ip not found (apt-get install iproute2)"
    local flags=(--net)
    [[ $(id -u) == 0 ]] || flags=(--map-root-user --net)
    SLUICE_KUBE_IN_NETNS=1 exec unshare "${flags[@]}" -- "$self" run --bin "$BIN" -- "$@"
  fi
  unset SLUICE_KUBE_IN_NETNS
  resolve_bin "$bindir"
  ip link set lo up
  dir=$(mktemp -d "${TMPDIR:-/tmp}/sluice-kube.XXXXXX")
  trap run_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # In this shell, not a child: the daemons stay our children, so we reap them when they stop.
  cmd_start "$dir" --bin "$BIN"
  local status=0
  KUBECONFIG="$dir/admin.kubeconfig" SLUICE_KUBE_DIR="$dir" PATH="$BIN:$PATH" "$@" || status=$?
  exit "$status"
}

case ${1:-} in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  stop-apiserver) shift; cmd_stop_apiserver "$@" ;;
  start-apiserver) shift; cmd_start_apiserver "$@" ;;
  run) shift; cmd_run "$@" ;;
  *) usage ;;
esac
