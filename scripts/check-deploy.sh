#!/usr/bin/env bash
# Checks deploy/ against a real API server: the chart lints and renders, the API server accepts the
# manifests and the chart, both give the same objects, and the RBAC grants the controller exactly
# what it needs (and not, e.g., writing Secrets or creating Deployments).
#
#   scripts/kube-cluster.sh run -- scripts/check-deploy.sh
#
# Needs KUBECONFIG (cluster-admin), SLUICE_KUBE_DIR and kubectl, helm and jq on PATH, which
# kube-cluster.sh run provides (jq: apt-get install jq). Prints one line per check; exits non-zero
# if any failed, after printing what failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

: "${KUBECONFIG:?run under scripts/kube-cluster.sh run -- $0}"
: "${SLUICE_KUBE_DIR:?run under scripts/kube-cluster.sh run -- $0}"
for tool in kubectl helm jq; do
  command -v "$tool" >/dev/null || { echo "check-deploy: $tool not found" >&2; exit 1; }
done

chart=deploy/helm/sluice
manifests=deploy/manifests
sa=system:serviceaccount:sluice:sluice
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=()

# check NAME CMD...: run CMD; on failure print its output and remember NAME.
check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "ok    $name"
  else
    echo "FAIL  $name"
    printf '%s\n' "$out" | sed 's/^/      /'
    failed+=("$name")
  fi
}

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
# the Namespace (Helm makes it with --create-namespace; a chart must not) and without the two labels
# only Helm adds.
normalize() {
  kubectl create --dry-run=client -o json -f - |
    jq -S -s '[ .[] | if .kind == "List" then .items[] else . end ]
      | map(select(.kind != "Namespace"))
      | map(walk(if type == "object" then del(.["helm.sh/chart"], .["app.kubernetes.io/managed-by"]) else . end))
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
names <"$tmp/manifests.json" >"$tmp/manifests.names"
names <"$tmp/chart.json" >"$tmp/chart.names"
check "same kind/namespace/name lists ($(wc -l <"$tmp/manifests.names") objects)" \
  diff -u --label manifests --label chart "$tmp/manifests.names" "$tmp/chart.names"
check "same objects (except Helm's own labels)" \
  diff -u --label manifests --label chart "$tmp/manifests.json" "$tmp/chart.json"

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

echo "== RBAC: applied for real, asked as $sa"
check "kubectl apply -f $manifests/" kubectl apply -f "$manifests/"
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
done
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
can denied patch services -A
can denied update ingresses.networking.k8s.io -A
can denied delete ingresses.networking.k8s.io -A
can denied create ingressclasses.networking.k8s.io
can denied update endpointslices.discovery.k8s.io -A
can denied list pods -A
can denied get nodes
can denied list configmaps -n sluice
can denied get configmaps/other -n sluice
can denied list configmaps -n default
can denied update leases.coordination.k8s.io/other -n sluice
can denied create leases.coordination.k8s.io -n default
can denied delete leases.coordination.k8s.io/sluice-leader -n sluice
can denied impersonate users
# The token user of the test cluster (what Rust tests use) gets the same answers.
check "sluice.kubeconfig: can list secrets -A" \
  kubectl --kubeconfig "$SLUICE_KUBE_DIR/sluice.kubeconfig" auth can-i list secrets -A
check "sluice.kubeconfig: cannot update secrets -A" \
  bash -c "! kubectl --kubeconfig '$SLUICE_KUBE_DIR/sluice.kubeconfig' auth can-i update secrets -A"

echo "== helm install (another release next to the manifests)"
check "helm install sluice-helm -n sluice-helm --create-namespace" \
  helm install sluice-helm "$chart" --namespace sluice-helm --create-namespace \
  --set ingressClass.name=sluice-helm --set electionId=sluice-helm-leader
sa=system:serviceaccount:sluice-helm:sluice-helm
can allowed list ingresses.networking.k8s.io -A
can allowed update leases.coordination.k8s.io/sluice-helm-leader -n sluice-helm
can allowed watch configmaps/sluice-helm -n sluice-helm
can denied update leases.coordination.k8s.io/sluice-leader -n sluice
can denied update secrets -A
check "helm uninstall sluice-helm" helm uninstall sluice-helm --namespace sluice-helm
check "helm install edge (the variant: watchNamespace=team-a)" helm install edge "$chart" "${variant[@]}"
sa=system:serviceaccount:edge:edge
can allowed list ingressclasses.networking.k8s.io
can allowed watch ingresses.networking.k8s.io -n team-a
can allowed list secrets -n team-a
can allowed update ingresses.networking.k8s.io --subresource status -n team-a
can allowed create events.events.k8s.io -n team-a
can allowed update leases.coordination.k8s.io/edge -n edge
can allowed watch configmaps/edge -n edge
can denied list ingresses.networking.k8s.io -A
can denied list secrets -n default
can denied list secrets -A
can allowed watch secrets/wildcard -n certs
can denied list secrets -n certs
can denied get services/sluice -n sluice

echo
if ((${#failed[@]})); then
  echo "check-deploy: ${#failed[@]} check(s) failed:"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "check-deploy: all checks passed"
