#!/usr/bin/env bash
# Checks deploy/ against a real API server: the chart lints and renders, the API server accepts the
# manifests and the chart, both give the same objects, the RBAC grants the controller exactly what
# it needs (and not, e.g., writing Secrets or creating Deployments), and the admission webhook
# works as installed: the certificate Job's command, run as its ServiceAccount, makes the Secret and
# the caBundle, and the API server, calling the webhook Service, gets Sluice's refusal.
#
#   scripts/kube-cluster.sh run -- scripts/check-deploy.sh
#
# Needs KUBECONFIG (cluster-admin), SLUICE_KUBE_DIR and kubectl, helm and jq on PATH, which
# kube-cluster.sh run provides (jq: apt-get install jq), openssl and curl, the sluice binary
# (SLUICE_BIN, default $CARGO_TARGET_DIR/debug/sluice, else target/debug/sluice) and a network namespace of its own (kube-cluster.sh run
# makes one: the webhook Service's cluster IP is put on its lo). Prints one line per check; exits
# non-zero if any failed, after printing what failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

: "${KUBECONFIG:?run under scripts/kube-cluster.sh run -- $0}"
: "${SLUICE_KUBE_DIR:?run under scripts/kube-cluster.sh run -- $0}"
for tool in kubectl helm jq openssl curl ip; do
  command -v "$tool" >/dev/null || { echo "check-deploy: $tool not found" >&2; exit 1; }
done

# It puts an address on lo: only in a network namespace of its own, never the machine's.
[[ $(readlink /proc/self/ns/net) != "$(readlink /proc/1/ns/net 2>/dev/null)" ]] ||
  { echo "check-deploy: run under scripts/kube-cluster.sh run (a network namespace of its own)" >&2; exit 1; }
bin=${SLUICE_BIN:-${CARGO_TARGET_DIR:-target}/debug/sluice}
[[ -x $bin ]] || { echo "check-deploy: $bin not found: cargo build -p sluice, or set SLUICE_BIN" >&2; exit 1; }

chart=deploy/helm/sluice
manifests=deploy/manifests
sa=system:serviceaccount:sluice:sluice
tmp=$(mktemp -d)
sluice_pid=""
trap '[[ -n $sluice_pid ]] && kill "$sluice_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# check NAME CMD..., checks_summary
# shellcheck source=lib/checks.sh
source scripts/lib/checks.sh

# can ALLOWED|DENIED VERB RESOURCE [kubectl auth can-i flags...]: as the sluice ServiceAccount.
can() {
  local want=$1 answer
  shift
  answer=$(kubectl auth can-i "$@" --as "$sa" 2>"$tmp/can-i.err")
  if [[ ($want == allowed && $answer == yes) || ($want == denied && $answer == no) ]]; then
    echo "ok    $want: $*"
  else
    echo "FAIL  expected $want: $* (can-i said: $answer)"
    sed 's/^/      /' "$tmp/can-i.err"
    failed+=("can-i $*")
  fi
}

# normalize < multi-document YAML: JSON array of the objects, sorted by kind/namespace/name, without
# the Namespace (Helm makes it with --create-namespace; a chart must not), without the two labels
# only Helm adds and without Helm's hook annotations (the chart runs the webhook's certificate Job
# as hooks; the plain manifests as a Job).
normalize() {
  kubectl create --dry-run=client -o json -f - |
    jq -S -s '[ .[] | if .kind == "List" then .items[] else . end ]
      | map(select(.kind != "Namespace"))
      | map(walk(if type == "object" then del(.["helm.sh/chart"], .["app.kubernetes.io/managed-by"],
          .["helm.sh/hook"], .["helm.sh/hook-delete-policy"]) else . end))
      | map(if .metadata.annotations == {} then del(.metadata.annotations) else . end)
      | sort_by(.kind, (.metadata.namespace // ""), .metadata.name)'
}
names() { jq -r '.[] | "\(.kind)/\(.metadata.namespace // "-")/\(.metadata.name)"'; }

echo "== helm chart"
check "helm lint --strict" helm lint --strict "$chart"
check "helm template (defaults)" bash -c "helm template sluice '$chart' --namespace sluice > '$tmp/chart.yaml'"
# Everything the defaults leave off: Deployment, one namespace (and a default certificate outside
# it), fixed status addresses, no host network.
variant=(--namespace edge --set kind=Deployment --set replicas=3 --set watchNamespace=team-a
  --set 'publishStatusAddresses={203.0.113.10,203.0.113.11}' --set hostNetwork=false
  --set workers=4 --set ingressClass.name=edge --set ingressClass.default=true --set electionId=edge
  --set defaultTlsSecret=certs/wildcard)
check "helm template (Deployment, watchNamespace, status addresses, no host network)" \
  bash -c 'helm template edge "$@" > "'"$tmp"'/variant.yaml"' _ "$chart" "${variant[@]}"
check "helm template (admissionWebhook.enabled=false): no webhook objects, flags or volume" \
  bash -c "! helm template sluice '$chart' --namespace sluice --set admissionWebhook.enabled=false |
    grep -E 'admission|validating-webhook|webhook-certificate'"
check "helm template (tcp.5432): the TCP services ConfigMap, its flag, its grant by name and the ports" \
  bash -c "helm template sluice '$chart' --namespace sluice --set tcp.5432=db/pg:5432 > '$tmp/tcp.yaml' &&
    grep -q -- '--tcp-services-configmap=\$(POD_NAMESPACE)/sluice-tcp' '$tmp/tcp.yaml' &&
    grep -q 'resourceNames: \[\"sluice\", \"sluice-tcp\"\]' '$tmp/tcp.yaml' &&
    grep -q '\"5432\": \"db/pg:5432\"' '$tmp/tcp.yaml' &&
    grep -q 'name: tcp-5432' '$tmp/tcp.yaml'"
check "helm template (udp.53): the UDP services ConfigMap, its flag, its grant by name and UDP ports" \
  bash -c "helm template sluice '$chart' --namespace sluice --set udp.53=kube-system/kube-dns:53 > '$tmp/udp.yaml' &&
    grep -q -- '--udp-services-configmap=\$(POD_NAMESPACE)/sluice-udp' '$tmp/udp.yaml' &&
    grep -q 'resourceNames: \[\"sluice\", \"sluice-udp\"\]' '$tmp/udp.yaml' &&
    grep -q '\"53\": \"kube-system/kube-dns:53\"' '$tmp/udp.yaml' &&
    grep -A2 'name: udp-53' '$tmp/udp.yaml' | grep -q 'protocol: UDP'"
check "helm template rejects kind=StatefulSet" \
  bash -c "! helm template x '$chart' --set kind=StatefulSet >/dev/null 2>&1"

echo "== the API server accepts them (server-side dry run)"
# A server-side dry run of namespaced objects needs their namespace to exist (it is not created by
# a dry run), so the namespaces come first; the Namespace object itself is still dry-run applied.
kubectl create namespace sluice >/dev/null
kubectl create namespace edge >/dev/null
kubectl create namespace team-a >/dev/null
kubectl create namespace certs >/dev/null
check "kubectl apply --dry-run=server -f $manifests/" \
  kubectl apply --dry-run=server -f "$manifests/"
check "helm template | kubectl apply --dry-run=server -f -" \
  kubectl apply --dry-run=server -f "$tmp/chart.yaml"
check "helm template (variant) | kubectl apply --dry-run=server -f -" \
  kubectl apply --dry-run=server -f "$tmp/variant.yaml"

echo "== the manifests and the chart's defaults give the same objects"
cat "$manifests"/*.yaml | normalize >"$tmp/manifests.json"
normalize <"$tmp/chart.yaml" >"$tmp/chart.json"
# Jobs apart: the manifests run the certificate Job once, the chart as two hooks (below).
not_jobs() { jq 'map(select(.kind != "Job"))' "$1"; }
not_jobs "$tmp/manifests.json" | names >"$tmp/manifests.names"
not_jobs "$tmp/chart.json" | names >"$tmp/chart.names"
check "same kind/namespace/name lists ($(wc -l <"$tmp/manifests.names") objects besides Jobs)" \
  diff -u --label manifests --label chart "$tmp/manifests.names" "$tmp/chart.names"
check "same objects besides Jobs (except Helm's own labels and hook annotations)" \
  diff -u --label manifests --label chart <(not_jobs "$tmp/manifests.json") <(not_jobs "$tmp/chart.json")
# job_spec FILE NAME [drop-arg-prefix]: the Job's spec, without args starting with the prefix.
job_spec() {
  jq --arg name "$2" --arg drop "${3:-}" '.[] | select(.kind == "Job" and .metadata.name == $name) | .spec
    | .template.spec.containers[].args |= map(select($drop == "" or (startswith($drop) | not)))' "$1"
}
check "chart hook Job sluice-admission-patch = the manifests' Job sluice-admission-cert" \
  diff -u --label manifests --label chart <(job_spec "$tmp/manifests.json" sluice-admission-cert) \
  <(job_spec "$tmp/chart.json" sluice-admission-patch)
check "chart hook Job sluice-admission-create = the same without --webhook-configuration" \
  diff -u --label patch --label create \
  <(job_spec "$tmp/chart.json" sluice-admission-patch --webhook-configuration=) \
  <(job_spec "$tmp/chart.json" sluice-admission-create)
check "chart hooks: create before install/upgrade, patch after; RBAC for both" \
  bash -c "helm template sluice '$chart' --namespace sluice --show-only templates/admission-webhook.yaml |
    kubectl create --dry-run=client -o json -f - | jq -s -e '
      (map(select(.kind == \"Job\") | {(.metadata.name): .metadata.annotations[\"helm.sh/hook\"]}) | add)
        == {\"sluice-admission-create\": \"pre-install,pre-upgrade\",
            \"sluice-admission-patch\": \"post-install,post-upgrade\"}
      and all(.[] | select(.kind != \"Job\" and .kind != \"Service\"
                             and .kind != \"ValidatingWebhookConfiguration\");
              .metadata.annotations[\"helm.sh/hook\"] == \"pre-install,pre-upgrade,post-install,post-upgrade\")'"

echo "== admin surface: probes and the exposed port are the admin one; /config stays on loopback"
# admin_surface FILE.json (normalized objects): for the controller container of each DaemonSet or
# Deployment, the probes hit /ready and /healthz on the --admin-listen port, no declared port is
# the --status-listen one, and --status-listen (default 127.0.0.1:10246) is a loopback address.
# Sluice refuses a non-loopback --status-listen at start-up; this catches it before a rollout.
admin_surface() {
  jq -e '
    def port_of($flag; $default): (map(select(startswith($flag + "=")))[0] // ($flag + "=" + $default))
      | sub("^[^=]*="; "") | capture("^(?<host>.*):(?<port>[0-9]+)$");
    [ .[] | select(.kind == "DaemonSet" or .kind == "Deployment")
      | .spec.template.spec.containers[] | select(.args | index("serve")) ] as $containers
    | ($containers | length) > 0
      and all($containers[];
        (.args | port_of("--admin-listen"; "127.0.0.1:9113")) as $admin
        | (.args | port_of("--status-listen"; "127.0.0.1:10246")) as $status
        | ($status.host | test("^(127\\.[0-9.]+|\\[::1\\])$"))
          and (.readinessProbe.httpGet | .path == "/ready" and (.port | tostring) == $admin.port)
          and (.livenessProbe.httpGet | .path == "/healthz" and (.port | tostring) == $admin.port)
          and ([.ports[]?.containerPort | tostring] | index($status.port) | not)
          and ([.ports[]? | select(.name == "admin") | .containerPort | tostring] == [$admin.port]))
  ' "$1"
}
normalize <"$tmp/variant.yaml" >"$tmp/variant.json"
for rendered in manifests chart variant; do
  check "$rendered: probes on the admin port, /config on loopback only, status port not declared" \
    admin_surface "$tmp/$rendered.json"
done
# The check itself must catch an exposed status listener.
jq '(.[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[0].args) |=
  map(if startswith("--status-listen=") then "--status-listen=0.0.0.0:10246" else . end)' \
  "$tmp/manifests.json" >"$tmp/exposed.json"
not_admin_surface() { ! admin_surface "$1" >/dev/null; }
check "a --status-listen on 0.0.0.0 is caught" not_admin_surface "$tmp/exposed.json"

echo "== admission webhook: on the pod's address, not every address of the node"
# webhook_on_pod_ip FILE.json (normalized objects): every controller container that has
# --validating-webhook has it as $(POD_IP):PORT, POD_IP from the downward API's status.podIP,
# and its port named webhook is PORT (the webhook Service's targetPort).
webhook_on_pod_ip() {
  jq -e '
    [ .[] | select(.kind == "DaemonSet" or .kind == "Deployment")
      | .spec.template.spec.containers[] | select(.args | index("serve"))
      | select(any(.args[]; startswith("--validating-webhook="))) ] as $containers
    | ($containers | length) > 0
      and all($containers[];
        (.args | map(select(startswith("--validating-webhook=")))[0] | sub("^[^=]*="; "")) as $listen
        | ($listen | test("^\\$\\(POD_IP\\):[0-9]+$"))
          and ([.env[]? | select(.name == "POD_IP") | .valueFrom.fieldRef.fieldPath] == ["status.podIP"])
          and ([.ports[]? | select(.name == "webhook") | .containerPort | tostring]
               == [$listen | sub("^.*:"; "")]))
  ' "$1"
}
for rendered in manifests chart variant; do
  check "$rendered: --validating-webhook=\$(POD_IP):PORT, POD_IP from status.podIP, port webhook = PORT" \
    webhook_on_pod_ip "$tmp/$rendered.json"
done
# The check itself must catch a webhook on every address.
jq '(.[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[0].args) |=
  map(if startswith("--validating-webhook=") then "--validating-webhook=:8443" else . end)' \
  "$tmp/manifests.json" >"$tmp/every-address.json"
not_on_pod_ip() { ! webhook_on_pod_ip "$1" >/dev/null; }
check "a --validating-webhook on every address (:8443) is caught" not_on_pod_ip "$tmp/every-address.json"

echo "== shutdown: terminationGracePeriodSeconds covers the grace period and the drain"
# shutdown_budget FILE (normalized JSON): every controller pod has --shutdown-grace-period of at least
# 5 s, and terminationGracePeriodSeconds >= that + the ConfigMap's worker-shutdown-timeout (default
# 10 s) + 5 s, so the kubelet's SIGKILL never cuts the drain short.
shutdown_budget() {
  jq -e '
    def secs: tostring | capture("^(?<n>[0-9]+)(?<u>ms|s|m|h)?$")
      | (.n | tonumber) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "": 1}[.u // ""];
    ([.[] | select(.kind == "ConfigMap") | .data["worker-shutdown-timeout"] // empty] | first // "10"
      | secs) as $drain
    | [.[] | select(.kind == "DaemonSet" or .kind == "Deployment") | .spec.template.spec as $pod
        | ($pod.containers[] | select(.name == "controller") | .args
            | map(select(startswith("--shutdown-grace-period="))) | first // "--shutdown-grace-period=0"
            | sub("^[^=]*="; "") | secs) as $grace
        | $grace >= 5 and $pod.terminationGracePeriodSeconds >= $grace + $drain + 5]
    | length > 0 and all' "$1"
}
check "manifests: terminationGracePeriodSeconds >= shutdown-grace-period + worker-shutdown-timeout + 5s" \
  shutdown_budget "$tmp/manifests.json"
check "chart (defaults and variant): the same" \
  bash -c "$(declare -f shutdown_budget); shutdown_budget '$tmp/chart.json' && shutdown_budget '$tmp/variant.json'"

echo "== capabilities: least privilege, and what binds 80/443 keeps NET_BIND_SERVICE"
# The image's /sluice carries NET_BIND_SERVICE as a permitted-only file capability
# (deploy/Dockerfile): every container can exec it whatever it drops (with the effective bit the
# kernel refused: a Job that dropped ALL failed with "exec /sluice: operation not permitted" on
# a real node), and only what binds ports below 1024 needs the capability in its bounding set.
# least_caps FILE.json (normalized objects): true when every DaemonSet/Deployment container of the
# image drops ALL and adds exactly NET_BIND_SERVICE, and every Job container drops ALL and adds
# nothing.
least_caps() {
  jq -e '
    def sluice: select(.image | test("(^|/)sluice(:|@|$)"));
    def containers(kinds): .[] | select(.kind | IN(kinds)) | .spec.template.spec
      | (.initContainers // []) + .containers | .[] | sluice | .securityContext.capabilities // {};
    [containers("DaemonSet", "Deployment")] as $servers | [containers("Job")] as $jobs
    | ($servers | length) > 0 and ($jobs | length) > 0
      and all($servers[]; .drop == ["ALL"] and .add == ["NET_BIND_SERVICE"])
      and all($jobs[]; .drop == ["ALL"] and (.add // []) == [])
  ' "$1"
}
for rendered in manifests chart variant; do
  check "$rendered: sluice containers drop ALL; the server adds NET_BIND_SERVICE back, the Jobs nothing" \
    least_caps "$tmp/$rendered.json"
done
# The check itself must catch a Job given the capability back, and a server without it.
jq '(.[] | select(.kind == "Job") | .spec.template.spec.containers[0].securityContext.capabilities.add)
  |= ["NET_BIND_SERVICE"]' "$tmp/manifests.json" >"$tmp/job-with-cap.json"
jq '(.[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[0].securityContext.capabilities)
  |= del(.add)' "$tmp/manifests.json" >"$tmp/server-without-cap.json"
not_least_caps() { ! least_caps "$1" >/dev/null; }
check "a Job that adds NET_BIND_SERVICE is caught" not_least_caps "$tmp/job-with-cap.json"
check "a DaemonSet without NET_BIND_SERVICE is caught" not_least_caps "$tmp/server-without-cap.json"

echo "== RBAC: applied for real, asked as $sa"
check "kubectl apply -f $manifests/" kubectl apply -f "$manifests/"
# `kubectl auth can-i` asks discovery for the resource: the Gateway API CRDs must be there.
install_gateway_crds() {
  local crds
  crds=$(scripts/gateway-crds.sh) || return 1
  local files=() kind
  for kind in gatewayclasses gateways httproutes grpcroutes tlsroutes tcproutes udproutes referencegrants backendtlspolicies; do
    files+=(-f "$crds/standard/gateway.networking.k8s.io_$kind.yaml")
  done
  kubectl apply --server-side "${files[@]}" >/dev/null &&
    kubectl wait --for condition=Established --timeout 60s \
      crd/{gatewayclasses,gateways,httproutes,grpcroutes,tlsroutes,tcproutes,udproutes,referencegrants,backendtlspolicies}.gateway.networking.k8s.io >/dev/null
}
check "the Gateway API CRDs (scripts/gateway-crds.sh) installed" install_gateway_crds
install_listenerset_crd() {
  local crds
  crds=$(scripts/gateway-crds.sh) || return 1
  kubectl apply --server-side -f "$crds/standard/gateway.networking.k8s.io_listenersets.yaml" >/dev/null &&
    kubectl wait --for condition=Established --timeout 60s \
      crd/listenersets.gateway.networking.k8s.io >/dev/null
}
check "the ListenerSet CRD installed" install_listenerset_crd
check "the test cluster's sluice.kubeconfig user is $sa" \
  bash -c "kubectl --kubeconfig '$SLUICE_KUBE_DIR/sluice.kubeconfig' auth whoami -o json |
    jq -e '.status.userInfo | .username == \"$sa\" and (.groups | index(\"system:serviceaccounts:sluice\"))'"
# What the controller does (see deploy/README.md).
can allowed list ingressclasses.networking.k8s.io
can allowed watch ingressclasses.networking.k8s.io
for verb in list watch; do
  can allowed "$verb" ingresses.networking.k8s.io -A
  can allowed "$verb" services -A
  can allowed "$verb" endpointslices.discovery.k8s.io -A
  can allowed "$verb" secrets -A
  # Every ConfigMap of the scope (custom-headers, auth-proxy-set-headers, the settings'
  # proxy-set-headers/add-headers), as ingress-nginx.
  can allowed "$verb" configmaps -A
done
# Gateway API (a cluster without its CRDs answers the same: RBAC does not check that a
# resource exists).
for verb in get list watch; do
  can allowed "$verb" gatewayclasses.gateway.networking.k8s.io
  for resource in gateways httproutes grpcroutes tlsroutes tcproutes udproutes referencegrants backendtlspolicies; do
    can allowed "$verb" "$resource.gateway.networking.k8s.io" -A
  done
done
can allowed patch gatewayclasses.gateway.networking.k8s.io --subresource status
# ClusterTrustBundles: CA sources of BackendTLSPolicies and frontend validation, read only.
for verb in get list watch; do
  can allowed "$verb" clustertrustbundles.certificates.k8s.io
done
can denied create clustertrustbundles.certificates.k8s.io
# Namespaces' labels (allowedRoutes.namespaces.selector) and the CRDs' bundle-version
# (GatewayClass SupportedVersion).
can allowed list namespaces
can allowed watch namespaces
can allowed get customresourcedefinitions.apiextensions.k8s.io
can denied update namespaces
can denied update customresourcedefinitions.apiextensions.k8s.io
for resource in gateways httproutes grpcroutes tlsroutes tcproutes udproutes backendtlspolicies; do
  can allowed patch "$resource.gateway.networking.k8s.io" --subresource status -A
  can allowed update "$resource.gateway.networking.k8s.io" --subresource status -A
done
# ListenerSets: read, and their status written by the leader; never the objects.
for verb in get list watch; do
  can allowed "$verb" listenersets.gateway.networking.k8s.io -A
done
can allowed patch listenersets.gateway.networking.k8s.io --subresource status -A
can allowed update listenersets.gateway.networking.k8s.io --subresource status -A
can denied update listenersets.gateway.networking.k8s.io -A
can allowed get services/sluice -n sluice
can allowed patch ingresses.networking.k8s.io --subresource status -A
can allowed update ingresses.networking.k8s.io --subresource status -A
for verb in create patch; do
  can allowed "$verb" events -A
  can allowed "$verb" events.events.k8s.io -A
done
can allowed create leases.coordination.k8s.io -n sluice
can allowed get leases.coordination.k8s.io/sluice-leader -n sluice
can allowed update leases.coordination.k8s.io/sluice-leader -n sluice
for verb in get list watch; do
  can allowed "$verb" configmaps/sluice -n sluice
done
# What it must not do.
can denied create deployments.apps -n sluice
can denied delete secrets -A
can denied update secrets -A
can denied create secrets -n sluice
# The Service and EndpointSlices generated for each Gateway (server-side apply: patch, which
# creates too; delete once the Gateway leaves Sluice's classes), owned by the Gateway.
for verb in get create patch delete; do
  can allowed "$verb" services -A
  can allowed "$verb" endpointslices.discovery.k8s.io -A
done
can allowed update gateways.gateway.networking.k8s.io --subresource finalizers -A
can denied update services -A
can denied update gateways.gateway.networking.k8s.io -A
can denied update ingresses.networking.k8s.io -A
can denied delete ingresses.networking.k8s.io -A
can denied create ingressclasses.networking.k8s.io
can denied update endpointslices.discovery.k8s.io -A
can denied update httproutes.gateway.networking.k8s.io -A
can denied update grpcroutes.gateway.networking.k8s.io -A
can denied update tlsroutes.gateway.networking.k8s.io -A
can denied update tcproutes.gateway.networking.k8s.io -A
can denied update udproutes.gateway.networking.k8s.io -A
can denied delete gateways.gateway.networking.k8s.io -A
can denied create gatewayclasses.gateway.networking.k8s.io
can denied update referencegrants.gateway.networking.k8s.io -A
can denied update backendtlspolicies.gateway.networking.k8s.io -A
can denied list pods -A
can allowed get nodes
can denied list nodes
can denied update nodes
can denied get configmaps/other -n sluice
can denied get configmaps -n default
can denied update configmaps/sluice -n sluice
can denied create configmaps -n sluice
can denied delete configmaps -A
can denied update leases.coordination.k8s.io/other -n sluice
can denied create leases.coordination.k8s.io -n default
can denied delete leases.coordination.k8s.io/sluice-leader -n sluice
can denied impersonate users
can denied patch validatingwebhookconfigurations.admissionregistration.k8s.io/sluice-admission
# The admission webhook's certificate Job: its Secret and its webhook's caBundle, nothing more.
sa=system:serviceaccount:sluice:sluice-admission
can allowed create secrets -n sluice
can allowed get secrets/sluice-admission -n sluice
can allowed update secrets/sluice-admission -n sluice
can allowed get validatingwebhookconfigurations.admissionregistration.k8s.io/sluice-admission
can allowed patch validatingwebhookconfigurations.admissionregistration.k8s.io/sluice-admission
can denied list secrets -n sluice
can denied get secrets/other -n sluice
can denied update secrets/other -n sluice
can denied delete secrets/sluice-admission -n sluice
can denied create secrets -n default
can denied patch validatingwebhookconfigurations.admissionregistration.k8s.io/other
can denied create validatingwebhookconfigurations.admissionregistration.k8s.io
can denied list ingresses.networking.k8s.io -A
sa=system:serviceaccount:sluice:sluice
# The token user of the test cluster (what Rust tests use) gets the same answers.
check "sluice.kubeconfig: can list secrets -A" \
  kubectl --kubeconfig "$SLUICE_KUBE_DIR/sluice.kubeconfig" auth can-i list secrets -A
check "sluice.kubeconfig: cannot update secrets -A" \
  bash -c "! kubectl --kubeconfig '$SLUICE_KUBE_DIR/sluice.kubeconfig' auth can-i update secrets -A"

echo "== admission webhook: the certificate Job's command as its ServiceAccount, then the API server calling Sluice"
# There is no kubelet here: what the Job and the DaemonSet run is run from their specs in the
# applied manifests, with the kubelet's $(VAR) expansion done by sed.
jq -r '.[] | select(.kind == "Job" and .metadata.name == "sluice-admission-cert")
  | .spec.template.spec.containers[0].args[]' "$tmp/manifests.json" >"$tmp/job.args"
mapfile -t job_args <"$tmp/job.args"
token=$(kubectl create token sluice-admission -n sluice --duration 1h)
sed "s|^    token: .*|    token: $token|" "$SLUICE_KUBE_DIR/sluice.kubeconfig" >"$tmp/admission.kubeconfig"
run_job() { POD_NAMESPACE=sluice "$bin" "${job_args[@]}" --kubeconfig "$tmp/admission.kubeconfig" --wait 10s; }
check "the Job (${job_args[*]}) creates the Secret and sets caBundle" \
  bash -c "$(declare -f run_job); bin='$bin' tmp='$tmp'; job_args=(${job_args[*]});
    out=\$(run_job) && echo \"\$out\" &&
    grep -qx 'Secret sluice/sluice-admission: created' <<<\"\$out\" &&
    grep -qx 'ValidatingWebhookConfiguration sluice-admission: caBundle set on 1 webhook(s)' <<<\"\$out\""
# secret_files: the Secret's keys as files in $tmp.
secret_files() {
  kubectl get secret sluice-admission -n sluice -o json >"$tmp/secret.json"
  for key in ca.crt tls.crt tls.key; do
    jq -r --arg key "$key" '.data[$key] // empty' "$tmp/secret.json" | base64 -d >"$tmp/$key"
  done
}
secret_files
check "caBundle = the Secret's ca.crt" \
  bash -c "[[ -s '$tmp/ca.crt' && \$(kubectl get validatingwebhookconfiguration sluice-admission \
    -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d) == \$(cat '$tmp/ca.crt') ]]"
check "tls.crt verifies against ca.crt for sluice-admission.sluice.svc" \
  openssl verify -CAfile "$tmp/ca.crt" -purpose sslserver -verify_hostname sluice-admission.sluice.svc "$tmp/tls.crt"
check "the Job again: Secret kept, caBundle unchanged" \
  bash -c "$(declare -f run_job); bin='$bin' tmp='$tmp'; job_args=(${job_args[*]});
    out=\$(run_job) && echo \"\$out\" &&
    grep -qx 'Secret sluice/sluice-admission: kept (valid)' <<<\"\$out\" &&
    grep -qx 'ValidatingWebhookConfiguration sluice-admission: caBundle set on 0 webhook(s)' <<<\"\$out\""

# A Secret that does not hold a valid pair (here: a certificate for another Service) is replaced,
# and the webhook gets the new CA.
POD_NAMESPACE=sluice "$bin" webhook-cert --kubeconfig "$tmp/admission.kubeconfig" --service other --secret sluice-admission >/dev/null 2>&1
check "the Job replaces a certificate for another name and sets the new caBundle" \
  bash -c "$(declare -f run_job); bin='$bin' tmp='$tmp'; job_args=(${job_args[*]});
    out=\$(run_job) && echo \"\$out\" &&
    grep -q '^Secret sluice/sluice-admission: replaced (tls.crt is not valid for sluice-admission.sluice.svc now' <<<\"\$out\" &&
    grep -qx 'ValidatingWebhookConfiguration sluice-admission: caBundle set on 1 webhook(s)' <<<\"\$out\""

secret_files
check "caBundle = the replacement's ca.crt" \
  bash -c "[[ -s '$tmp/ca.crt' && \$(kubectl get validatingwebhookconfiguration sluice-admission \
    -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | base64 -d) == \$(cat '$tmp/ca.crt') ]]"

# The API server reaches a webhook Service at its cluster IP, port 443, checking the certificate
# against caBundle for NAME.NAMESPACE.svc. That IP goes on this namespace's lo, and Sluice runs with
# the DaemonSet's arguments but the webhook on it and the Secret's files (and HTTPS on 127.0.0.1:443
# rather than every address, which would hold the cluster IP's port 443 too: on a node the pod's
# 8443 is what the Service targets).
cluster_ip=$(kubectl get service sluice-admission -n sluice -o jsonpath='{.spec.clusterIP}')
ip address add "$cluster_ip/32" dev lo
jq -r '.[] | select(.kind == "DaemonSet") | .spec.template.spec.containers[0].args[]' "$tmp/manifests.json" |
  sed -e 's/$(POD_NAMESPACE)/sluice/g' \
    -e "s|^--https-listen=0.0.0.0:443$|--https-listen=127.0.0.1:443|" \
    -e "s|^--validating-webhook=.*|--validating-webhook=$cluster_ip:443|" \
    -e "s|^--validating-webhook-certificate=.*|--validating-webhook-certificate=$tmp/tls.crt|" \
    -e "s|^--validating-webhook-key=.*|--validating-webhook-key=$tmp/tls.key|" >"$tmp/daemonset.args"
mapfile -t daemonset_args <"$tmp/daemonset.args"
POD_NAME=check-deploy POD_NAMESPACE=sluice "$bin" "${daemonset_args[@]}" \
  --kubeconfig "$SLUICE_KUBE_DIR/sluice.kubeconfig" >"$tmp/sluice.log" 2>&1 &
sluice_pid=$!
ready() {
  local i
  for ((i = 0; i < 300; i++)); do
    curl -fsS -m 1 http://127.0.0.1:10254/ready >/dev/null 2>&1 && return 0
    kill -0 "$sluice_pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 30 "$tmp/sluice.log"
  return 1
}
check "sluice serve with the DaemonSet's arguments is ready" ready
kubectl create namespace shop >/dev/null
# ingress_yaml NAME: an Ingress of class sluice for shop.test/ to Service web.
ingress_yaml() {
  cat <<YAML
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: $1, namespace: shop}
spec:
  ingressClassName: sluice
  rules:
    - host: shop.test
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
YAML
}
kubectl create service clusterip web -n shop --tcp=80:8080 >/dev/null
ingress_yaml web >"$tmp/web.yaml"
ingress_yaml copy >"$tmp/copy.yaml"
check "an Ingress is admitted" kubectl apply -f "$tmp/web.yaml"
# refused: the API server, through the webhook Service, gets Sluice's refusal of a second Ingress
# for the same host and path (it picks a new configuration up within moments: retried for 30 s).
refused() {
  local i out
  for ((i = 0; i < 60; i++)); do
    if ! out=$(kubectl apply --dry-run=server -f "$tmp/copy.yaml" 2>&1) &&
      grep -q 'denied the request: Sluice refuses Ingress shop/copy' <<<"$out"; then
      echo "$out"
      return 0
    fi
    sleep 0.5
  done
  echo "$out"
  tail -n 30 "$tmp/sluice.log"
  return 1
}
check "the same host and path in another Ingress is refused by the webhook" refused
kill "$sluice_pid" 2>/dev/null
wait "$sluice_pid" 2>/dev/null
sluice_pid=""
check "with Sluice down, failurePolicy Ignore lets Ingress writes through" \
  kubectl apply --dry-run=server -f "$tmp/copy.yaml"
ip address del "$cluster_ip/32" dev lo

echo "== helm install (another release next to the manifests)"
# --no-hooks: the certificate hook Jobs would wait for a kubelet that this cluster does not have
# (what they run is checked above).
check "helm install sluice-helm -n sluice-helm --create-namespace" \
  helm install sluice-helm "$chart" --namespace sluice-helm --create-namespace --no-hooks \
  --set ingressClass.name=sluice-helm --set electionId=sluice-helm-leader
sa=system:serviceaccount:sluice-helm:sluice-helm
can allowed list ingresses.networking.k8s.io -A
can allowed update leases.coordination.k8s.io/sluice-helm-leader -n sluice-helm
can allowed watch configmaps/sluice-helm -n sluice-helm
can denied update leases.coordination.k8s.io/sluice-leader -n sluice
can denied update secrets -A
check "helm uninstall sluice-helm" helm uninstall sluice-helm --namespace sluice-helm
check "helm install edge (the variant: watchNamespace=team-a)" helm install edge "$chart" --no-hooks "${variant[@]}"
sa=system:serviceaccount:edge:edge
can allowed list ingressclasses.networking.k8s.io
can allowed watch ingresses.networking.k8s.io -n team-a
can allowed list secrets -n team-a
can allowed list configmaps -n team-a
can allowed watch configmaps -n team-a
can allowed update ingresses.networking.k8s.io --subresource status -n team-a
can allowed watch httproutes.gateway.networking.k8s.io -n team-a
can allowed patch gateways.gateway.networking.k8s.io --subresource status -n team-a
can allowed watch gatewayclasses.gateway.networking.k8s.io
can allowed create events.events.k8s.io -n team-a
can allowed update leases.coordination.k8s.io/edge -n edge
can allowed watch configmaps/edge -n edge
can denied list ingresses.networking.k8s.io -A
can denied list secrets -n default
can denied list secrets -A
can denied list httproutes.gateway.networking.k8s.io -A
can denied list configmaps -n default
can denied list configmaps -A
can allowed watch secrets/wildcard -n certs
can denied list secrets -n certs
can denied get services/sluice -n sluice

checks_summary check-deploy
