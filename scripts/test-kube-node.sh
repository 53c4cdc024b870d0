#!/usr/bin/env bash
# Sluice on a real node (scripts/kube-node.sh): a fresh install of deploy/manifests/sluice.yaml,
# then of the Helm chart, each with the image built here (scripts/image.sh, imported into the
# node's containerd as localhost/sluice:0.1.0, the manifests' and the chart's image set to it), and
# on each:
#   - every pod Ready: the admission certificate Job completes (the check that would have caught
#     the Job that dropped NET_BIND_SERVICE and could not exec the binary), the DaemonSet's pod
#     becomes Ready through its probes;
#   - an Ingress routes to a Deployment of backend pods (`sluice backend`, the same image) through
#     Sluice on the node's host network, every backend pod answering; requests from inside the
#     node's namespace;
#   - the API server calls the admission webhook through its Service (a duplicate Ingress is
#     refused);
#   - `kubectl logs` shows the access log;
#   - (manifests) the backend scaled 5 <-> 7 under 200 requests/s through Sluice, 0 failed
#     requests; a rolling update of the DaemonSet loses no request the grace period covers.
# Then ingress-nginx's own chart (4.11, scripts/ingress-nginx-chart.sh) with Sluice's image as its
# controller's and its certificate Jobs' image and nothing else changed but the Service type: the
# Jobs complete, the controller is probed Ready on /healthz, Ingresses of class nginx route (with
# ingress-nginx's regex rewrite, and the chart's addHeaders), status is written, the webhook
# refuses, the chart's metrics Service (metrics.enabled) serves the request family, a helm upgrade (Jobs again, the Deployment rolled) under 200 requests/s through its
# Service fails no request, the chart's DaemonSet on the host network serves the node's :80,
# and helm uninstall ends the pod through its preStop /wait-shutdown with exit 0.
# Then uninstalls and tears the node down (SLUICE_NODE_KEEP=1 leaves it up to look around:
# scripts/kube-node.sh kubectl get pods -A; scripts/kube-node.sh down).
#
#   scripts/test-kube-node.sh          (root; SLUICE_IMAGE_PROFILE: dev, the default, or release)
#
# scripts/test.sh runs it after the image check. Measured on 2 shared cores with the binaries and
# the debug build there: ~200 s in all (node up ~6 s, image ~5 s, manifests ~60 s of which the
# scaling ~40 s and the rolling update ~10 s, chart ~15 s, ingress-nginx's chart ~80 s of which
# the rollout under load ~50 s, and ~30 s more as a DaemonSet, down ~3-5 s). With every capability dropped in the certificate Job (the old bug) the first check
# fails: the Job's pod never completes and the DaemonSet's pod waits for its Secret.
set -euo pipefail
cd "$(dirname "$0")/.."

# The debug binary's image by default, as scripts/test.sh builds it (a cold release build costs a
# quarter of an hour); SLUICE_IMAGE_PROFILE=release for the image users get.
export SLUICE_IMAGE_PROFILE=${SLUICE_IMAGE_PROFILE:-dev}
node=scripts/kube-node.sh
node_ip=198.18.0.2
k() { "$node" kubectl "$@"; }
# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh

# One node per machine (its namespace and folder have fixed names): a second run waits its turn.
exec 8>"${SLUICE_NODE_DIR:-/var/tmp/sluice-node}.lock"
flock -w 1200 8 || { echo "test-kube-node: another run holds the node for 20 min" >&2; exit 1; }
t0=$SECONDS
tmp=$(mktemp -d)
cleanup() {
  rm -rf "$tmp"
  if [[ -z ${SLUICE_NODE_KEEP:-} ]]; then "$node" down || true; fi
}
trap cleanup EXIT

"$node" up
echo "== node up ($((SECONDS - t0)) s)"
"$node" import-image localhost/sluice:0.1.0
echo "== image imported ($((SECONDS - t0)) s)"

# until_ok (scripts/lib/checks.sh) every 0.5 s: each try runs kubectl.
UNTIL_OK_INTERVAL=0.5
# in_node CMD...: CMD in the node's network namespace (where its address and Services are).
in_node() { "$node" exec "$@"; }

# all_ready NAMESPACE: every pod of NAMESPACE is Ready or has Succeeded (a Job's), and there is one.
all_ready() {
  local out
  out=$(k get pods -n "$1" -o 'jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ -n $out ]] || { echo "no pods in $1"; return 1; }
  ! grep -Ev ' (Succeeded [A-Za-z]*|Running True)$' <<<"$out" | grep -q . && return 0
  echo "$out"
  # Why: a container's last exit (a refused exec shows as StartError with the kernel's message).
  k get pods -n "$1" -o 'jsonpath={range .items[*]}{range .status.containerStatuses[*]}{.name}: {.state.waiting.reason} {.lastState.terminated.reason} {.lastState.terminated.message}{"\n"}{end}{end}' |
    grep -v ':  *$' || true
  return 1
}

# The backend: a Deployment of 3 pods running `sluice backend`, each naming itself, behind a
# Service, and an Ingress of class sluice for app.test.
backend_yaml() {
  cat <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: app}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: backend, namespace: app}
spec:
  replicas: 3
  selector: {matchLabels: {app: backend}}
  template:
    metadata: {labels: {app: backend}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532}
      containers:
        - name: backend
          image: localhost/sluice:0.1.0
          imagePullPolicy: Never
          args: [backend, --listen, "0.0.0.0:8080", --name, "\$(POD_NAME)"]
          env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
          ports: [{name: http, containerPort: 8080}]
          readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
---
apiVersion: v1
kind: Service
metadata: {name: backend, namespace: app}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: $1, namespace: app}
spec:
  ingressClassName: sluice
  rules:
    - host: app.test
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: backend, port: {number: 80}}}}
YAML
}
backend_yaml backend >"$tmp/backend.yaml"
# The same host and path again: the webhook refuses it.
backend_yaml copy | awk '/^kind: Ingress/ {p = 1} p' | sed '1i apiVersion: networking.k8s.io/v1' >"$tmp/copy.yaml"

# seen_all [N]: requests through Sluice on the node's port 80 reach each of the N (3) backend pods.
seen_all() {
  local i names="" want=${1:-3}
  for ((i = 0; i < 10 * want; i++)); do
    names+=$(in_node curl -sS -m 2 -H 'Host: app.test' "http://$node_ip/" | grep -o 'backend-[a-z0-9]*-[a-z0-9]*' | head -n 1)$'\n'
  done
  sort -u <<<"$names" | grep .
  [[ $(sort -u <<<"$names" | grep -c .) == "$want" ]]
}
refused() {
  local out
  out=$(k apply --dry-run=server -f "$tmp/copy.yaml" 2>&1) && { echo "admitted: $out"; return 1; }
  echo "$out"
  grep -q 'denied the request: Sluice refuses Ingress app/copy' <<<"$out"
}
# access_logged NAMESPACE: the controller pod's log has an access log line for app.test's
# requests (the default format names the upstream, namespace-service-port).
access_logged() {
  k logs -n "$1" -l app.kubernetes.io/component=controller --tail=500 | grep -E 'app-backend-80|app\.test' |
    tail -n 2 | grep .
}

# on_install NAMESPACE WHAT: the checks every install gets.
on_install() {
  local ns=$1 what=$2
  check "$what: every pod in $ns Ready (the certificate Job completed, the DaemonSet's pod probed Ready)" \
    until_ok 180 all_ready "$ns"
  check "$what: the backend Deployment's 3 pods Ready" \
    k rollout status -n app deployment/backend --timeout=120s
  check "$what: the Ingress routes app.test through Sluice on $node_ip:80 to each backend pod" \
    until_ok 60 seen_all
  check "$what: the API server calls the webhook through its Service (duplicate Ingress refused)" \
    until_ok 30 refused
  check "$what: kubectl logs shows the access log" until_ok 20 access_logged "$ns"
}

echo "== kubectl apply -f deploy/manifests/sluice.yaml ($((SECONDS - t0)) s)"
# The manifests as a user applies them, the image set to the one imported here (a short name
# would be a registry's to the kubelet).
sed 's#image: sluice:0.1.0#image: localhost/sluice:0.1.0#' deploy/manifests/sluice.yaml >"$tmp/sluice.yaml"
grep -q 'image: localhost/sluice:0.1.0' "$tmp/sluice.yaml" || { echo "test-kube-node: the manifests name no sluice:0.1.0 image to replace" >&2; exit 1; }
k apply -f "$tmp/sluice.yaml" >/dev/null
k apply -f "$tmp/backend.yaml" >/dev/null
on_install sluice manifests
if ((${#failed[@]})); then
  k get pods -A -o wide || true
  k get events -n sluice --sort-by=.lastTimestamp | tail -n 15 || true
fi
# The seeds' experiment on real pods: the backend scaled 5 -> 7 -> 5 -> 7 -> 5 while `sluice
# load` sends 200 requests/s through Sluice (inside the node's namespace); not one may fail.
case $SLUICE_IMAGE_PROFILE in
  dev) sluice_bin=${CARGO_TARGET_DIR:-target}/debug/sluice ;;
  *) sluice_bin=${CARGO_TARGET_DIR:-target}/release/sluice ;;
esac
sluice_bin=$(realpath "$sluice_bin")
# start_load NAME SECONDS: `sluice load` at 200 requests/s for app.test to http://$node_ip/ inside
# the node's namespace, in the background (its pid in $load_pid; $tmp/NAME.json, .out).
start_load() {
  in_node "$sluice_bin" load -R 200 -c 10 -d "$2s" --timeout 2s -H 'Host: app.test' \
    --json "$tmp/$1.json" "http://$node_ip/" >"$tmp/$1.out" 2>&1 &
  load_pid=$!
}
# load_lost_nothing NAME WHAT: the load started as NAME outlasted WHAT, and not one request
# failed (more than 5000 sent, every answer 200).
load_lost_nothing() {
  kill -0 "$load_pid" 2>/dev/null || { echo "the load ended before the $2 did"; return 1; }
  wait "$load_pid" || { cat "$tmp/$1.out"; return 1; }
  jq -c '{requests, errors, status_codes}' "$tmp/$1.json"
  jq -e '.requests > 5000 and ([.errors[]] | add) == 0 and (.status_codes | keys) == ["200"]' \
    "$tmp/$1.json" >/dev/null
}
scale_under_load() {
  local n load_pid
  k scale -n app deployment/backend --replicas 5 >/dev/null
  k rollout status -n app deployment/backend --timeout 120s >/dev/null || return 1
  start_load load 40
  sleep 3
  for n in 7 5 7 5; do
    k scale -n app deployment/backend --replicas "$n" >/dev/null
    k rollout status -n app deployment/backend --timeout 60s >/dev/null || echo "scale to $n: not rolled out in 60 s"
    # Until the pods that go have gone. No preStop delay in the backend: it is Sluice, following
    # the EndpointSlice updates, that must lose no request (a run with a 2 s preStop sleep and a
    # run without both had 0 failures in 8000 requests).
    until_ok 30 bash -c "[[ \$('$node' kubectl get pods -n app -o name | grep -c .) == $n ]]" >/dev/null ||
      echo "scale to $n: still $(k get pods -n app -o name | grep -c .) pods"
    echo "$(date +%T) $n pods" >>"$tmp/scale.log"
    sleep 2
  done
  load_lost_nothing load scaling
}
check "manifests: backend scaled 5 <-> 7 under 200 requests/s through Sluice: 0 failed requests" \
  scale_under_load
[[ ! -f $tmp/load.json ]] || jq -c '{requests, errors, status_codes}' "$tmp/load.json" | sed 's/^/      /'
[[ ! -f $tmp/scale.log ]] || sed 's/^/      /' "$tmp/scale.log"

# A rolling update of the DaemonSet (maxUnavailable 1; one node, so the old pod goes before the new
# one can take the host's ports): what the grace period covers is not lost. Requests in flight
# when the old pod gets SIGTERM finish, and new requests during --shutdown-grace-period (5 s) are
# still served; then the new pod comes Ready and serves. (Between the old pod's exit and the new
# one's start nothing listens on this single node: that gap is not the grace period's.)
rolling_update() {
  local old new i codes="" slow
  old=$(k get pods -n sluice -l app.kubernetes.io/component=controller -o name)
  for i in 1 2 3; do
    in_node curl -sS -m 30 -o /dev/null -w '%{http_code}' -H 'Host: app.test' \
      "http://$node_ip/slow?ms=6000" >"$tmp/slow.$i" 2>&1 &
  done
  sleep 0.5
  k rollout restart -n sluice daemonset/sluice >/dev/null
  terminating() { [[ -n $(k get -n sluice "$old" -o 'jsonpath={.metadata.deletionTimestamp}') ]]; }
  until_ok 10 terminating || { echo "$old is not terminating"; return 1; }
  for ((i = 0; i < 12; i++)); do
    codes+="$(in_node curl -sS -m 2 -o /dev/null -w '%{http_code}' -H 'Host: app.test' "http://$node_ip/" 2>/dev/null) "
    sleep 0.25
  done
  wait
  slow=$(cat "$tmp"/slow.*)
  echo "during the grace period: $codes; in flight at SIGTERM: $slow"
  [[ $codes == "$(printf '200 %.0s' {1..12})" && $slow == 200200200 ]] || return 1
  k rollout status -n sluice daemonset/sluice --timeout 120s || return 1
  new=$(k get pods -n sluice -l app.kubernetes.io/component=controller -o name)
  echo "$old -> $new"
  [[ -n $new && $new != "$old" ]] && until_ok 30 seen_all 5
}
check "manifests: rolling update of the DaemonSet: requests in flight and during the grace period served, then the new pod serves" \
  rolling_update

echo "== uninstall ($((SECONDS - t0)) s)"
check "manifests: kubectl delete removes everything" \
  k delete --wait --timeout=120s -f "$tmp/sluice.yaml" -f "$tmp/backend.yaml"

echo "== helm install deploy/helm/sluice ($((SECONDS - t0)) s)"
# service.type NodePort: the chart's default LoadBalancer never gets an address without a load
# balancer controller, and --wait would wait for one.
check "chart: helm install --wait (its hook Jobs complete)" \
  in_node helm install sluice deploy/helm/sluice --namespace sluice --create-namespace \
  --set image.repository=localhost/sluice --set image.tag=0.1.0 --set service.type=NodePort \
  --wait --timeout 180s
k apply -f "$tmp/backend.yaml" >/dev/null
on_install sluice chart
if ((${#failed[@]})); then
  k get pods -A -o wide || true
fi
check "chart: helm uninstall" in_node helm uninstall sluice --namespace sluice --wait --timeout 120s

# ingress-nginx's own chart, as its project published it (4.11: scripts/ingress-nginx-chart.sh),
# with Sluice's image in place of its controller's and of its certificate Jobs' (kube-webhook-
# certgen's): what a cluster that ran ingress-nginx changes to switch. Every other value is the
# chart's default (its args, RBAC, security context as uid 101, LD_PRELOAD of a mimalloc the image
# does not have, probes of /healthz, preStop /wait-shutdown, a ValidatingWebhookConfiguration that
# fails closed) except the Service type (no load balancer here: NodePort, as with Sluice's chart).
# The chart refuses controller tags below 0.27.0 (isControllerTagValid), so the image gets a tag
# that names the ingress-nginx release it stands in for and Sluice's version.
echo "== helm install ingress-nginx's chart with Sluice's image ($((SECONDS - t0)) s)"
inx_chart=$(scripts/ingress-nginx-chart.sh)
inx_tag=1.11.0-sluice.0.1.0
"$node" import-image "localhost/sluice:$inx_tag" >/dev/null
# inx_install ARGS...: helm install of ingress-nginx's chart with Sluice's two images, plus ARGS.
inx_install() {
  in_node helm install ingress-nginx "$inx_chart" --namespace ingress-nginx --create-namespace \
    --set controller.image.repository=localhost/sluice --set controller.image.tag="$inx_tag" \
    --set controller.image.digest= \
    --set controller.admissionWebhooks.patch.image.repository=localhost/sluice \
    --set controller.admissionWebhooks.patch.image.tag="$inx_tag" \
    --set controller.admissionWebhooks.patch.image.digest= \
    --set controller.service.type=NodePort "$@" --wait --timeout 180s
}
check "ingress-nginx chart: helm install --wait (certificate Jobs on Sluice's image complete, the controller probed Ready)" \
  inx_install --set controller.addHeaders.X-Served-By=sluice-under-ingress-nginx-chart \
  --set controller.metrics.enabled=true
# The backend behind two Ingresses of class nginx: the plain one, and one with ingress-nginx's
# regex rewrite.
{
  backend_yaml backend | sed 's/ingressClassName: sluice/ingressClassName: nginx/'
  cat <<'YAML'
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: rewrite
  namespace: app
  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    nginx.ingress.kubernetes.io/rewrite-target: /$2
spec:
  ingressClassName: nginx
  rules:
    - host: rewrite.test
      http:
        paths:
          - {path: /app(/|$)(.*), pathType: ImplementationSpecific, backend: {service: {name: backend, port: {number: 80}}}}
YAML
} >"$tmp/inx-backend.yaml"
backend_yaml copy | awk '/^kind: Ingress/ {p = 1} p' | sed '1i apiVersion: networking.k8s.io/v1' |
  sed 's/ingressClassName: sluice/ingressClassName: nginx/' >"$tmp/copy.yaml"
k apply -f "$tmp/inx-backend.yaml" >/dev/null
inx_ip=$(k get service ingress-nginx-controller -n ingress-nginx -o jsonpath='{.spec.clusterIP}' || true)
node_ip_saved=$node_ip
# seen_all and the checks below ask $node_ip:80: here the controller Service's cluster IP.
node_ip=$inx_ip
inx_ready() { all_ready ingress-nginx && k rollout status -n app deployment/backend --timeout=120s; }
check "ingress-nginx chart: every pod in ingress-nginx Ready, the backend's 3 pods Ready" inx_ready
check "ingress-nginx chart: an Ingress of class nginx routes app.test through Sluice to each backend pod" \
  until_ok 60 seen_all
rewritten() {
  local out
  out=$(in_node curl -sS -m 2 -D - -H 'Host: rewrite.test' "http://$inx_ip/app/echo/x?q=1") || return 1
  grep -iE '^x-served-by' <<<"$out"
  grep -oE '"path":"[^"]*","query":[^,]*' <<<"$out"
  # The backend's echo: /app/echo/x came in, /echo/x went out (the second capture), query kept.
  grep -qi '^x-served-by: sluice-under-ingress-nginx-chart' <<<"$out" &&
    grep -q '"path":"/echo/x","query":"q=1"' <<<"$out"
}
check "ingress-nginx chart: rewrite-target /\$2 under use-regex rewrites, and the chart's addHeaders ConfigMap adds its header" \
  until_ok 30 rewritten
status_is_the_service() {
  local got
  got=$(k get ingress backend -n app -o jsonpath='{.status.loadBalancer.ingress[*].ip}')
  echo "status: ${got:-none}; the controller Service's cluster IP: $inx_ip"
  [[ $got == "$inx_ip" ]]
}
check "ingress-nginx chart: Ingress status holds --publish-service's address (a NodePort Service: its cluster IP)" \
  until_ok 30 status_is_the_service
check "ingress-nginx chart: the API server calls the webhook through its Service (duplicate Ingress refused)" \
  until_ok 30 refused
check "ingress-nginx chart: kubectl logs shows the access log" until_ok 20 access_logged ingress-nginx
# controller.metrics.enabled: the chart's metrics Service (port 10254, targetPort by the name
# `metrics`) is what Prometheus scrapes; through it, ingress-nginx's request family counts the
# requests above under the Ingress's name and namespace.
scraped_through_the_metrics_service() {
  local ip out
  ip=$(k get service ingress-nginx-controller-metrics -n ingress-nginx -o jsonpath='{.spec.clusterIP}') ||
    return 1
  out=$(in_node curl -sS -m 3 "http://$ip:10254/metrics") || return 1
  grep -E '^nginx_ingress_controller_requests\{' <<<"$out" | grep 'ingress="backend"' |
    grep 'namespace="app"' | grep 'status="200"' | head -n 1 |
    awk '{ print "      " $0 } $NF + 0 > 0 { found = 1 } END { exit !found }'
}
check "ingress-nginx chart: metrics.enabled: its metrics Service serves nginx_ingress_controller_requests for the Ingress" \
  until_ok 20 scraped_through_the_metrics_service
# The switch itself is a `helm upgrade` (README's migration step): the certificate Jobs run again
# (the Secret exists: kept), and the Deployment rolls (surge 1, unavailable 0): a new pod comes
# Ready, the old one gets its preStop hook. Clients reach the controller through its Service
# (kube-proxy); not one request may fail meanwhile.
rollout_under_load() {
  local old
  old=$(k get pods -n ingress-nginx -l app.kubernetes.io/component=controller -o name)
  start_load inx-load 45
  sleep 3
  in_node helm upgrade ingress-nginx "$inx_chart" --namespace ingress-nginx --reuse-values \
    --set-string controller.podAnnotations.rolled=again --wait --timeout 60s >/dev/null ||
    { echo "helm upgrade did not finish in 60 s"; return 1; }
  until_ok 30 bash -c "! '$node' kubectl get -n ingress-nginx $old >/dev/null 2>&1" >/dev/null ||
    { echo "$old still there: the Deployment did not roll"; return 1; }
  echo "$(date +%T) $old gone"
  load_lost_nothing inx-load rollout
}
check "ingress-nginx chart: helm upgrade (Jobs again, the Deployment rolled) under 200 requests/s through its Service: 0 failed requests" \
  rollout_under_load
[[ ! -f $tmp/inx-load.json ]] || jq -c '{requests, errors, status_codes}' "$tmp/inx-load.json" | sed 's/^/      /'
node_ip=$node_ip_saved
if ((${#failed[@]})); then
  k get pods -A -o wide || true
  k get events -n ingress-nginx --sort-by=.lastTimestamp | tail -n 15 || true
  k logs -n ingress-nginx -l app.kubernetes.io/component=controller --tail=30 || true
fi
# helm uninstall deletes the Deployment: the pod's preStop hook (/wait-shutdown) stops Sluice
# and waits for it. The chart gives it terminationGracePeriodSeconds 300; an idle Sluice exits
# at once, so the uninstall takes seconds, not the grace period.
uninstall_quickly() {
  local start=$SECONDS
  in_node helm uninstall ingress-nginx --namespace ingress-nginx --wait --timeout 120s || return 1
  until_ok 60 bash -c "[[ -z \$('$node' kubectl get pods -n ingress-nginx -o name) ]]" || return 1
  echo "uninstalled, pods gone in $((SECONDS - start)) s"
  ((SECONDS - start < 60)) || return 1
  # The hook returned 0: not killed with the container's end (exit 137, which the kubelet
  # reports as a FailedPreStopHook Warning Event).
  local failed_hooks
  failed_hooks=$(k get events -n ingress-nginx --field-selector reason=FailedPreStopHook -o name)
  [[ -z $failed_hooks ]] || { echo "FailedPreStopHook: $failed_hooks"; return 1; }
}
check "ingress-nginx chart: helm uninstall; the controller pod exits through /wait-shutdown (hook exit 0) well inside its 300 s grace" \
  uninstall_quickly

# The seeds' shape: the chart's DaemonSet on the host network, serving the node's :80. (The Secret
# the first install's Job made is still there: this install's Job keeps it, and its patch Job
# sets its CA on the new webhook configuration.)
echo "== ingress-nginx's chart as a DaemonSet on the host network ($((SECONDS - t0)) s)"
check "ingress-nginx chart, DaemonSet + hostNetwork: helm install --wait" \
  inx_install --set controller.kind=DaemonSet --set controller.hostNetwork=true
check "ingress-nginx chart, DaemonSet + hostNetwork: the controller pod probed Ready" \
  until_ok 60 all_ready ingress-nginx
check "ingress-nginx chart, DaemonSet + hostNetwork: app.test through Sluice on $node_ip:80 to each backend pod" \
  until_ok 60 seen_all
check "ingress-nginx chart, DaemonSet + hostNetwork: the webhook refuses a duplicate Ingress" \
  until_ok 30 refused
check "ingress-nginx chart, DaemonSet + hostNetwork: helm uninstall; the hook exits 0" uninstall_quickly
k delete --wait --timeout=120s -f "$tmp/inx-backend.yaml" >/dev/null || true

echo "== $((SECONDS - t0)) s in all (before down)"
checks_summary test-kube-node
