#!/usr/bin/env bash
# A real single-node Kubernetes cluster, offline, in a network namespace of its own: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet with Debian's containerd and
# runc (cgroupfs), the CNI bridge/host-local/loopback/portmap plugins (Debian's
# containernetworking-plugins), kube-proxy (iptables) and a pause image built here. Pods run,
# Services route, `kubectl logs/exec` work. ../shared/notes/real-node.md has the why of each setting.
#
#   scripts/kube-node.sh up              build what is missing (cached by version), start it all,
#                                        return once the node is Ready (idempotent: a node that is
#                                        up and Ready is left as it is)
#   scripts/kube-node.sh down            stop and remove everything up made (idempotent)
#   scripts/kube-node.sh status          what runs; exit 0 when the node is Ready
#   scripts/kube-node.sh kubectl ARGS... kubectl as cluster-admin, inside the namespace
#   scripts/kube-node.sh exec CMD...     CMD inside the namespace with KUBECONFIG (cluster-admin)
#                                        and PATH=<kube binaries>:$PATH
#   scripts/kube-node.sh import ARCHIVE REF...
#                                        import an OCI archive into the node's containerd
#                                        (namespace k8s.io) and tag it as each REF
#   scripts/kube-node.sh import-image [REF...]
#                                        the Sluice image (scripts/image.sh) into the node, as REF
#                                        (default localhost/sluice:0.1.0; the test sets the
#                                        manifests' and the chart's image to it)
#
# Traffic never touches the host's network: the node's address (198.18.0.2/24, on a veth pair
# whose two ends are both inside the namespace), the pod bridge cni0 (10.244.0.0/24), the Service
# range (10.96.0.0/16) and every iptables rule live in the namespace `sluice-node`; reach the
# cluster through `exec` (nsenter --net, not `ip netns exec`, which remounts /sys).
#
# Needs root. Installs containerd and conntrack (and podman, buildah, gcc when missing) with apt.
# Binaries: scripts/kube-tools.sh --node (kubelet & co. built once per Kubernetes version).
# State, logs and sockets under $SLUICE_NODE_DIR (default /var/tmp/sluice-node): logs/*.log,
# pki/, kubeconfigs, containerd/, kubelet/, etcd/. `down` keeps logs/ and removes the rest.
# Env: SLUICE_NODE_DIR, SLUICE_KUBE_BIN (a folder with all eight programs; skips kube-tools.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
self="$here/$(basename "$0")"
log() { echo "kube-node: $*" >&2; }
die() { log "$*"; exit 1; }
usage() {
  sed -n '2,/^set -euo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

dir=${SLUICE_NODE_DIR:-/var/tmp/sluice-node}
netns=sluice-node
node=sluice-node
node_ip=198.18.0.2
node_gw=198.18.0.1 # assigned nowhere: the default route only makes every destination routable
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/16
api_port=6443
nsrun=(nsenter "--net=/run/netns/$netns" --)
cache=${SLUICE_KUBE_CACHE:-$HOME/.cache/sluice-kube}
# kubelet's stop order is the reverse of the start order.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

# --- processes ---------------------------------------------------------------------------------

# alive PIDFILE NAME, stop_daemon PIDFILE NAME [SECONDS], spawn NAME LOG PIDFILE CMD...
# shellcheck source=lib/daemons.sh
source "$here/lib/daemons.sh"
# pki_key FILE, pki_ca CN, pki_sign NAME SUBJECT EXTENSIONS
# shellcheck source=lib/pki.sh
source "$here/lib/pki.sh"

# running NAME: the component NAME (pid in run/NAME.pid) runs.
running() { alive "$dir/run/$1.pid" "$1"; }
# stop NAME [SECONDS]: SIGTERM, SIGKILL after SECONDS (default 10).
stop() { stop_daemon "$dir/run/$1.pid" "$1" "${2:-10}"; }

# start NAME CMD...: CMD in the node's network namespace, in its own session, logging to
# logs/NAME.log. nsenter execs CMD in place, so the pid is the daemon's.
start() {
  local name=$1
  shift
  running "$name" && return 0
  echo "--- start $(date -u +%FT%TZ)" >>"$dir/logs/$name.log"
  spawn "$name" "$dir/logs/$name.log" "$dir/run/$name.pid" "${nsrun[@]}" "$@"
  running "$name" || { tail -n 20 "$dir/logs/$name.log" >&2; die "$name exited at once"; }
}

# wait_for WHAT SECONDS NAME CMD...: CMD succeeds within SECONDS while NAME runs; else the last
# lines of NAME's log and failure.
wait_for() {
  local what=$1 limit=$2 name=$3 t0=$SECONDS
  shift 3
  until "$@" >/dev/null 2>&1; do
    if ! running "$name"; then
      tail -n 30 "$dir/logs/$name.log" >&2
      die "$name exited before $what"
    fi
    if ((SECONDS - t0 >= limit)); then
      tail -n 30 "$dir/logs/$name.log" >&2
      die "$what: not within $limit s (log: $dir/logs/$name.log)"
    fi
    sleep 0.2
  done
  log "$what ($((SECONDS - t0)) s)"
}

# --- preparation ---------------------------------------------------------------------------------

install_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v runc >/dev/null || missing+=(runc)
  command -v iptables >/dev/null || missing+=(iptables)
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/portmap ]] || missing+=(containernetworking-plugins)
  command -v podman >/dev/null || missing+=(podman)
  command -v buildah >/dev/null || missing+=(buildah)
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v curl >/dev/null || missing+=(curl)
  command -v nsenter >/dev/null || missing+=(util-linux)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
}

resolve_bin() {
  BIN=${SLUICE_KUBE_BIN:-}
  local t
  for t in "${components[@]}" kubectl; do
    [[ $t == containerd ]] && continue
    [[ -n $BIN && -x $BIN/$t ]] && continue
    BIN=$(nice "$here/kube-tools.sh" --node) || die "scripts/kube-tools.sh --node failed"
    break
  done
  for t in "${components[@]}" kubectl; do
    [[ $t == containerd || -x $BIN/$t ]] || die "$BIN/$t not found (scripts/kube-tools.sh --node builds it)"
  done
}

# The pause image: build/pause/linux/pause.c from the same k8s.io/kubernetes module, static, in a
# FROM scratch image, saved as an OCI archive (cached by version; ~2 s to make).
pause_version() { sed -n 's/^KUBE_VERSION=\([^ ]*\).*/\1/p' "$here/kube-tools.sh"; }
pause_image() {
  local version archive src ctx
  version=$(pause_version)
  archive="$cache/images-k8s-$version-$(uname -m)/pause.tar"
  pause_ref="localhost/sluice-node/pause:$version"
  if [[ ! -s $archive ]]; then
    command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
    src=$(cd /tmp && GOWORK=off GOFLAGS= go mod download -json "k8s.io/kubernetes@$version" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    [[ -f $src/build/pause/linux/pause.c ]] || die "no build/pause/linux/pause.c in $src"
    ctx=$(mktemp -d)
    gcc -Os -static -DVERSION="$version" -o "$ctx/pause" "$src/build/pause/linux/pause.c"
    strip "$ctx/pause" 2>/dev/null || true
    printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
    podman --runtime runc --cgroup-manager cgroupfs build --quiet -f "$ctx/Containerfile" -t "$pause_ref" "$ctx" >/dev/null
    mkdir -p "$(dirname "$archive")"
    podman save --quiet --format oci-archive -o "$archive.tmp" "$pause_ref" >/dev/null
    mv "$archive.tmp" "$archive"
    rm -rf "$ctx"
    log "pause image built: $archive"
  fi
  pause_archive=$archive
}

make_pki() {
  local pki="$dir/pki"
  [[ -f $pki/done ]] && return 0
  rm -rf "$pki"
  mkdir -p "$pki"
  (
    cd "$pki"
    umask 077
    pki_ca sluice-node-ca
    # sign NAME SUBJECT USAGE [SAN]: a leaf certificate for USAGE (serverAuth, clientAuth).
    sign() {
      pki_sign "$1" "$2" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=$3${4:+
subjectAltName=$4}"
    }
    sign apiserver "/CN=kube-apiserver" serverAuth \
      "IP:$node_ip,IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    # Users the default RBAC policy knows (as kubeadm makes them).
    sign admin "/O=system:masters/CN=admin" clientAuth
    sign apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
    sign kubelet "/O=system:nodes/CN=system:node:$node" clientAuth
    sign controller-manager "/CN=system:kube-controller-manager" clientAuth
    sign scheduler "/CN=system:kube-scheduler" clientAuth
    sign proxy "/CN=system:kube-proxy" clientAuth
    pki_key sa.key
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || true
  local f
  for f in ca.crt ca.key apiserver.crt admin.crt apiserver-kubelet.crt kubelet.crt \
    controller-manager.crt scheduler.crt proxy.crt sa.key sa.pub; do
    [[ -s $pki/$f ]] || die "openssl failed to make $pki/$f"
  done
  touch "$pki/done"
}

# kubeconfig NAME: NAME.kubeconfig for the client certificate pki/NAME.crt.
kubeconfig() {
  local pki="$dir/pki"
  (
    umask 077
    cat >"$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sluice-node
  cluster:
    server: https://$node_ip:$api_port
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$pki/$1.crt")
    client-key-data: $(base64 -w0 "$pki/$1.key")
contexts:
- name: $1@sluice-node
  context: {cluster: sluice-node, user: $1}
current-context: $1@sluice-node
EOF
  )
}

write_configs() {
  local k
  for k in admin kubelet controller-manager scheduler proxy; do kubeconfig "$k"; done
  mkdir -p "$dir/cni/net.d" "$dir/cni/ipam" "$dir/containerd" "$dir/kubelet" "$dir/pod-logs" \
    "$dir/flexvolume"
  cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_ref"
  # root here lacks CAP_SYS_RESOURCE: lowering a score would fail.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$dir/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
EOF
  cat >"$dir/cni/net.d/10-sluice-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "sluice-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
               "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: $dir/pod-logs
# Imported images cannot be pulled again: never collect them, and no eviction for a full disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
EOF
}

# The namespace, a veth pair with both ends in it (the node's address on one), a default route.
make_netns() {
  if [[ ! -e /run/netns/$netns ]]; then
    ip netns add "$netns"
  fi
  ip -n "$netns" link set lo up
  if ! ip -n "$netns" link show node0 >/dev/null 2>&1; then
    ip -n "$netns" link add node0 type veth peer name node1
    ip -n "$netns" addr add "$node_ip/24" dev node0
    ip -n "$netns" link set node1 up
    ip -n "$netns" link set node0 up
    ip -n "$netns" route add default via "$node_gw" dev node0 onlink
  fi
  "${nsrun[@]}" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 \
    net.bridge.bridge-nf-call-ip6tables=1
}

# --- the components ------------------------------------------------------------------------------

apiserver_ready() {
  [[ $(curl -sS -m 2 --cacert "$dir/pki/ca.crt" "https://$node_ip:$api_port/readyz" 2>/dev/null) == ok ]]
}
inns() { "${nsrun[@]}" "$@"; }
kctl() { "${nsrun[@]}" "$BIN/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }

start_all() {
  local pki="$dir/pki" client="http://127.0.0.1:2379" peer="http://127.0.0.1:2380"
  start etcd "$BIN/etcd" --name "$node" --data-dir "$dir/etcd" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "$node=$peer" --initial-cluster-state new --unsafe-no-fsync --log-level warn
  wait_for "etcd healthy" 30 etcd inns curl -fsS -m 1 "$client/health"

  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers "$client" --bind-address 0.0.0.0 --advertise-address "$node_ip" \
    --secure-port "$api_port" --cert-dir "$pki" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --authorization-mode Node,RBAC \
    --kubelet-client-certificate "$pki/apiserver-kubelet.crt" --kubelet-client-key "$pki/apiserver-kubelet.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$service_cidr" --endpoint-reconciler-type lease \
    --allow-privileged --profiling=false \
    --feature-gates ClusterTrustBundle=true \
    --runtime-config certificates.k8s.io/v1beta1/clustertrustbundles=true
  wait_for "kube-apiserver ready" 90 kube-apiserver inns bash -c "$(declare -f apiserver_ready); dir='$dir' node_ip='$node_ip' api_port='$api_port' apiserver_ready"

  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range "$service_cidr" --flex-volume-plugin-dir "$dir/flexvolume" \
    --profiling=false
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false

  start containerd containerd --config "$dir/containerd/config.toml"
  wait_for "containerd answers" 30 containerd ctr --address "$dir/containerd/containerd.sock" version
  import "$pause_archive" "$pause_ref"

  start kubelet "$BIN/kubelet" --config "$dir/kubelet/config.yaml" \
    --kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" \
    --hostname-override "$node" --node-ip "$node_ip"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig "$dir/proxy.kubeconfig" \
    --hostname-override "$node" --proxy-mode iptables --cluster-cidr "$pod_cidr" \
    --conntrack-max-per-core 0 --metrics-bind-address 127.0.0.1:10249
  wait_for "node $node Ready" 120 kubelet node_ready
}

all_running() {
  local c
  for c in "${components[@]}"; do running "$c" || return 1; done
}
node_ready() {
  [[ $(kctl get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

# import ARCHIVE REF...: the OCI archive into containerd's k8s.io namespace, tagged as each REF.
# A REF names its domain (localhost/sluice:0.1.0, as podman names local images): the kubelet reads
# a short name as a registry's, which nothing here can pull from.
import() {
  local archive=$1 ctr=(ctr --address "$dir/containerd/containerd.sock" -n k8s.io) name ref full
  shift
  name=$("${ctr[@]}" images import --all-platforms "$archive" | sed -n 's/^unpacking \([^ ]*\) .*/\1/p' | head -n 1)
  [[ -n $name ]] || die "ctr imported no named image from $archive"
  for ref in "$@"; do
    full=$ref
    [[ $full == */* && ( ${full%%/*} == *[.:]* || ${full%%/*} == localhost ) ]] ||
      die "import: $ref: give the reference with its domain, e.g. localhost/sluice:0.1.0"
    [[ $full == "$name" ]] && continue
    "${ctr[@]}" images rm "$full" >/dev/null 2>&1 || true
    "${ctr[@]}" images tag "$name" "$full" >/dev/null
  done
}

cmd_up() {
  [[ $(id -u) == 0 ]] || die "needs root (network namespace, containerd, kubelet)"
  local t0=$SECONDS
  mkdir -p "$dir/logs" "$dir/run"
  dir=$(cd "$dir" && pwd)
  if [[ -f $dir/run/up ]]; then
    resolve_bin
    if all_running && node_ready; then
      log "already up and Ready"
      return 0
    fi
    log "a node from an earlier up is not healthy: down first"
    cmd_down
    mkdir -p "$dir/logs" "$dir/run"
  fi
  install_packages
  resolve_bin
  pause_image
  log "binaries ready ($((SECONDS - t0)) s)"
  touch "$dir/run/up"
  make_pki
  write_configs
  make_netns
  start_all
  log "up in $((SECONDS - t0)) s: scripts/kube-node.sh kubectl get pods -A"
}

cmd_down() {
  local t0=$SECONDS name c ctr
  [[ -d $dir ]] || return 0
  dir=$(cd "$dir" && pwd)
  # Stop the ones that make pods first, so nothing restarts what is being removed.
  stop kubelet 20
  stop kube-proxy
  stop kube-scheduler
  stop kube-controller-manager
  # Every pod's containers: killed, deleted (their shims exit with them), then their sandboxes.
  ctr=(ctr --address "$dir/containerd/containerd.sock" -n k8s.io)
  if running containerd; then
    for c in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      "${ctr[@]}" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    for c in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
      timeout 10 "${ctr[@]}" tasks delete -f "$c" >/dev/null 2>&1 || true
    done
    for c in $("${ctr[@]}" containers ls -q 2>/dev/null); do
      "${ctr[@]}" containers delete "$c" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  # A shim whose container could not be deleted outlives containerd: ours name our socket.
  local pid
  for pid in $(grep -lzx -- "$dir/containerd/containerd.sock" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == containerd-shim* ]] && kill -KILL "$pid" 2>/dev/null
  done
  stop kube-apiserver
  stop etcd
  # Mounts under the work dir (pod volumes, overlay roots, sandbox netns files), deepest first.
  local m
  for m in $(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  [[ ! -e /run/netns/$netns ]] || ip netns del "$netns"
  # kubepods cgroups (cgroupfs driver), depth-first; they are empty once the containers are gone.
  local ctrl
  for ctrl in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice /sys/fs/cgroup/kubepods; do
    [[ -d $ctrl ]] && find "$ctrl" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  # The host paths the kubelet and libcni hard-code.
  for m in /var/log/containers/*.log; do
    if [[ -L $m && $(readlink "$m") == "$dir/"* ]]; then rm -f "$m"; fi
  done
  rm -rf /var/lib/kubelet/device-plugins
  rmdir /var/lib/kubelet /var/log/containers 2>/dev/null || true
  # libcni's cache of each pod's results (pods killed without a CNI DEL): ours name our netns files.
  if [[ -d /var/lib/cni/results ]]; then
    { grep -rlF -- "$dir/containerd/" /var/lib/cni/results || true; } | xargs -r rm -f
  fi
  rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
  # The shims' sockets (hard-coded /run/containerd/s), when no other containerd runs here.
  if ! pgrep -x containerd >/dev/null 2>&1; then
    rm -rf /run/containerd/s /run/containerd/runc
    rmdir /run/containerd 2>/dev/null || true
  fi
  rm -rf "$dir/run" "$dir/etcd" "$dir/containerd" "$dir/kubelet" "$dir/cni" "$dir/pod-logs" \
    "$dir/flexvolume" "$dir/pki" "$dir"/*.kubeconfig
  log "down in $((SECONDS - t0)) s"
}

cmd_status() {
  local c status=0
  [[ -d $dir/run ]] || { log "not up"; return 1; }
  for c in "${components[@]}"; do
    if running "$c"; then echo "$c: running (pid $(<"$dir/run/$c.pid"))"; else echo "$c: not running"; status=1; fi
  done
  resolve_bin
  if node_ready; then echo "node $node: Ready"; else echo "node $node: not Ready"; status=1; fi
  return "$status"
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  kubectl)
    shift
    resolve_bin
    kctl "$@"
    ;;
  exec)
    shift
    (($#)) || usage
    resolve_bin
    exec "${nsrun[@]}" env KUBECONFIG="$dir/admin.kubeconfig" PATH="$BIN:$PATH" "$@"
    ;;
  import)
    shift
    (($# >= 2)) || usage
    import "$@"
    ;;
  import-image)
    shift
    (($#)) || set -- localhost/sluice:0.1.0
    ref=$(cd "$here/.." && "$here/image.sh" | tail -n 1)
    archive=$(mktemp "${TMPDIR:-/tmp}/sluice-image.XXXXXX.tar")
    trap 'rm -f "$archive"' EXIT
    rm -f "$archive"
    podman save --quiet --format oci-archive -o "$archive" "$ref" >/dev/null
    import "$archive" "$@"
    log "imported $ref as $*"
    ;;
  *) usage ;;
esac
