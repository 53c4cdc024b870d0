#!/usr/bin/env bash
# Soak: one Sluice under steady mixed traffic and constant change for a long while, its resources
# sampled, to show what does not come back (a leak) where short tests cannot see it.
#
#   scripts/soak.sh                        DURATION=20m
#   DURATION=2m SAMPLE=5s scripts/soak.sh  a quick look
#   MODE=kubernetes scripts/soak.sh        the same through a real kube-apiserver + etcd
#
# What runs, all on loopback (WORKERS workers, access log on, to /dev/null). MODE=standalone (the
# default): `sluice serve --config DIR`, the objects below written as files into DIR.
# MODE=kubernetes (root): `scripts/kube-cluster.sh run` gives the soak a network namespace with
# etcd and kube-apiserver; the deploy manifests' RBAC, IngressClass and Service are applied and
# Sluice runs as their ServiceAccount with the DaemonSet's flags (leader election, Ingress status
# through --publish-service); the pods are on 198.18.0.N, added to the namespace's loopback (the
# API server refuses loopback addresses in EndpointSlices, and Sluice ignores them); the
# objects below are server-side applied and deleted through the API, so every change is a watch
# event and every new Ingress a status write:
#   - three backend pods (`sluice backend` on 127.0.0.2-4, or 198.18.0.2-4); every ENDPOINT_EVERY the Service's
#     EndpointSlice is rewritten with two or three of them (the pods keep running);
#   - every CHURN_EVERY a new Ingress with a host never used before (TLS from a wildcard Secret,
#     a regex rewrite, a request rate limit, CORS), asked three times over HTTPS until it answers
#     (up to 10 s), and the one LIVE steps older removed: hosts, certificates, routes, limit zones
#     and metric series come and go all run long;
#   - constant load (`sluice load`, open loop) on the Ingress that stays: HTTPS keep-alive,
#     HTTP/2, new connections with full TLS handshakes, new connections resuming a session, and
#     plain HTTP to a host no rule names (404);
#   - every CHURN_EVERY a head too large (431) and a malformed head (400) on raw connections.
# Sampled every SAMPLE from /proc and the admin listener: resident memory (VmRSS, RssAnon), open
# descriptors, threads, lines and request series of /metrics.
#
# Reported in OUT (markdown) and OUT's .tsv: the samples by minute, the load's results, and the
# verdict on what grows. The first quarter is warm-up (caches, pools and zones fill); from there to
# the end:
#   - anonymous memory: growth and least-squares slope (KiB/min); "steady" below GROWTH_MIB;
#   - descriptors: at most FD_SLACK more than at the quarter mark;
#   - /metrics: the per-Ingress request family names at most LIVE+2 Ingresses (the stable one,
#     the live ones, one on its way in).
# Exit 1 when a check fails, a load saw an error (the 404 load excepted: 404 is its answer), a new
# Ingress was not served within 10 s (in Kubernetes mode: or had no status address 10 s after
# that), or a refused head got another status.
#
# MODE=kubernetes also takes APISERVER_RESTART_EVERY=N (s; 0, the default, never): the API server
# is stopped for APISERVER_DOWN (5 s) every N s and started again, between two churn steps: every
# watch breaks and resumes (or relists) while the loads go on, and the next Ingress must still be
# served within 10 s.
#
# Knobs: MODE=standalone, DURATION=20m, SAMPLE=10s, WORKERS=2, CHURN_EVERY=2 (s), ENDPOINT_EVERY=5 (s), LIVE=5,
# RATE_H1=1000, RATE_H2=500, RATE_FULL=20, RATE_RESUMED=20, RATE_404=50, GROWTH_MIB=16,
# FD_SLACK=50, SLUICE_BIN (default: cargo build --release), OUT=target/soak.md, KEEP_WORK=1.
# Everything listens on 127.0.0.0/8 and is stopped on exit, by recorded PID.
set -euo pipefail

MODE=${MODE:-standalone}
DURATION=${DURATION:-20m}
SAMPLE=${SAMPLE:-10s}
WORKERS=${WORKERS:-2}
CHURN_EVERY=${CHURN_EVERY:-2}
ENDPOINT_EVERY=${ENDPOINT_EVERY:-5}
APISERVER_RESTART_EVERY=${APISERVER_RESTART_EVERY:-0}
APISERVER_DOWN=${APISERVER_DOWN:-5}
LIVE=${LIVE:-5}
RATE_H1=${RATE_H1:-1000}
RATE_H2=${RATE_H2:-500}
RATE_FULL=${RATE_FULL:-20}
RATE_RESUMED=${RATE_RESUMED:-20}
RATE_404=${RATE_404:-50}
GROWTH_MIB=${GROWTH_MIB:-16}
FD_SLACK=${FD_SLACK:-50}
KEEP_WORK=${KEEP_WORK:-0}
BACKEND_PORT=18280
HTTP_PORT=18281
HTTPS_PORT=18643
ADMIN_PORT=19313

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-target/soak.md}

PIDS=()
WORK=""
BENCH_NAME=soak
# shellcheck source=lib/bench.sh
. "$ROOT/scripts/lib/bench.sh"
# shellcheck source=lib/pki.sh
. "$ROOT/scripts/lib/pki.sh"

case $MODE in
standalone | kubernetes) ;;
*) die "MODE=$MODE: standalone or kubernetes" ;;
esac
if [[ $MODE == kubernetes && -z ${SLUICE_KUBE_DIR:-} ]]; then
    # Into a network namespace with a cluster of its own; this script runs again inside it, with
    # KUBECONFIG and SLUICE_KUBE_DIR set. Built out here: the build may need the network.
    [[ $(id -u) == 0 ]] || die "MODE=kubernetes needs root (the cluster's network namespace)"
    if [[ -z ${SLUICE_BIN:-} ]]; then
        log "building sluice (release)"
        SLUICE_BIN=$(release_sluice)
    fi
    export MODE SLUICE_BIN
    exec "$ROOT/scripts/kube-cluster.sh" run -- "$ROOT/scripts/soak.sh"
fi

stop_everything_on_exit

seconds_of() {
    local d=$1
    case $d in
    *ms) die "DURATION/SAMPLE in whole seconds, minutes or hours: $d" ;;
    *s) echo "${d%s}" ;;
    *m) echo $((${d%m} * 60)) ;;
    *h) echo $((${d%h} * 3600)) ;;
    *[0-9]) echo "$d" ;;
    *) die "not a duration: $d (e.g. 90s, 20m, 1h)" ;;
    esac
}
duration_s=$(seconds_of "$DURATION")
sample_s=$(seconds_of "$SAMPLE")
((duration_s >= 60)) || die "DURATION=$DURATION: at least 60s (a quarter of it is warm-up)"
((sample_s >= 1)) || die "SAMPLE=$SAMPLE: at least 1s"

if [[ -n ${SLUICE_BIN:-} ]]; then
    [[ -x $SLUICE_BIN ]] || die "SLUICE_BIN=$SLUICE_BIN is not executable"
else
    log "building sluice (release)"
    SLUICE_BIN=$(release_sluice)
fi
for tool in openssl curl python3; do
    command -v "$tool" >/dev/null || die "$tool not found"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sluice-soak.XXXXXX")
chmod 755 "$WORK"
mkdir -p "$WORK/config" "$WORK/pki" "$WORK/load"
(
    cd "$WORK/pki"
    pki_ca "soak CA"
    pki_sign app "/CN=app.test" "subjectAltName=DNS:app.test"
    pki_sign churn "/CN=*.churn.test" "subjectAltName=DNS:*.churn.test"
)

# --- configuration ------------------------------------------------------------------------------

indent() { sed 's/^/    /' "$1"; }
POD_NET=127.0.0
if [[ $MODE == kubernetes ]]; then
    POD_NET=198.18.0
    for n in 2 3 4; do
        ip address add "$POD_NET.$n/32" dev lo 2>/dev/null || ip address show dev lo | grep -q "$POD_NET.$n/" ||
            die "cannot add $POD_NET.$n to the namespace's loopback"
    done
fi
if [[ $MODE == kubernetes ]]; then
    api_server=$(awk '$1 == "server:" {print $2; exit}' "$KUBECONFIG")
    # api METHOD PATH [CONTENT-TYPE]: one request as the cluster's admin, standard input as the body.
    api() {
        local body=()
        [[ -z ${3:-} ]] || body=(-H "Content-Type: $3" --data-binary @-)
        curl -sS --fail-with-body -o "$WORK/api-answer" -m 10 --cacert "$SLUICE_KUBE_DIR/pki/ca.crt" \
            --cert "$SLUICE_KUBE_DIR/pki/admin.crt" --key "$SLUICE_KUBE_DIR/pki/admin.key" \
            -X "$1" "${body[@]}" "$api_server/$2" ||
            die "$1 $2 failed: $(head -c 2000 "$WORK/api-answer" 2>/dev/null)"
    }
    # resource_path: the API path of the one object on standard input (kind, metadata's name
    # and namespace read from the YAML this script writes).
    resource_path() {
        awk '
            /^kind:/ { kind = $2 }
            /^  name:/ && !name { name = $2 }
            /^  namespace:/ && !ns { ns = $2 }
            END {
                if (kind == "Ingress") p = "apis/networking.k8s.io/v1/namespaces/" ns "/ingresses/"
                else if (kind == "IngressClass") p = "apis/networking.k8s.io/v1/ingressclasses/"
                else if (kind == "EndpointSlice") p = "apis/discovery.k8s.io/v1/namespaces/" ns "/endpointslices/"
                else if (kind == "ConfigMap") p = "api/v1/namespaces/" ns "/configmaps/"
                else if (kind == "Secret") p = "api/v1/namespaces/" ns "/secrets/"
                else if (kind == "Service") p = "api/v1/namespaces/" ns "/services/"
                else { print "soak: no API path for kind " kind > "/dev/stderr"; exit 1 }
                print p name
            }'
    }
fi
write() { # write FILE: standard input to the config folder in one rename, or applied to the API
    if [[ $MODE == kubernetes ]]; then
        local yaml path
        yaml=$(cat)
        path=$(resource_path <<<"$yaml")
        api PATCH "$path?fieldManager=soak&force=true" application/apply-patch+yaml <<<"$yaml"
        return
    fi
    cat >"$WORK/config/.$1.tmp"
    mv "$WORK/config/.$1.tmp" "$WORK/config/$1"
}
# status_written K: churn-K's status names an address (Sluice, as leader, writes the
# --publish-service Service's address into it).
status_written() {
    api GET "apis/networking.k8s.io/v1/namespaces/default/ingresses/churn-$1" &&
        python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("status", {}).get("loadBalancer", {}).get("ingress") else 1)' \
            "$WORK/api-answer"
}
remove_churn_ingress() { # remove_churn_ingress K
    if [[ $MODE == kubernetes ]]; then
        api DELETE "apis/networking.k8s.io/v1/namespaces/default/ingresses/churn-$1"
    else
        rm -f "$WORK/config/ingress-churn-$1.yaml"
    fi
}
tls_secret() { # tls_secret NAME PKI-NAME
    printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: default\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n' "$1"
    indent "$WORK/pki/$2.crt"
    printf '  tls.key: |\n'
    indent "$WORK/pki/$2.key"
}
slice() { # slice N...: the app Service's endpoints, $POD_NET.N
    printf 'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: app-soak\n  namespace: default\n  labels:\n    kubernetes.io/service-name: app\naddressType: IPv4\nports:\n  - name: http\n    port: %s\n    protocol: TCP\nendpoints:\n' "$BACKEND_PORT"
    local n
    for n in "$@"; do
        printf '  - addresses: ["%s.%s"]\n    conditions: {ready: true}\n' "$POD_NET" "$n"
    done
}
churn_ingress() { # churn_ingress K: Ingress churn-K for hK.churn.test
    cat <<YAML
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: churn-$1
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    nginx.ingress.kubernetes.io/rewrite-target: /\$1
    nginx.ingress.kubernetes.io/limit-rps: "50"
    nginx.ingress.kubernetes.io/enable-cors: "true"
spec:
  ingressClassName: sluice
  tls:
    - hosts: [h$1.churn.test]
      secretName: churn-tls
  rules:
    - host: h$1.churn.test
      http:
        paths:
          - path: /r/(.*)
            pathType: ImplementationSpecific
            backend: {service: {name: app, port: {number: 80}}}
YAML
}

if [[ $MODE == kubernetes ]]; then
    # What the deploy manifests grant and name, as a cluster that installed them has it (no
    # DaemonSet: Sluice runs here; no webhook: nothing would answer it).
    python3 - "$ROOT/deploy/manifests/sluice.yaml" >"$WORK/manifests.yaml" <<'PY'
import re, sys
keep = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
        "RoleBinding", "IngressClass", "Service"}
docs = re.split(r"^---$", open(sys.argv[1]).read(), flags=re.M)
print("\n---\n".join(d for d in docs if (m := re.search(r"^kind: (\w+)$", d, re.M)) and m[1] in keep))
PY
    kubectl apply -f "$WORK/manifests.yaml" >"$WORK/kubectl-apply.log" ||
        die "applying the deploy manifests failed: $(cat "$WORK/kubectl-apply.log")"
fi
write ingressclass.yaml <<'YAML'
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: sluice
spec:
  controller: sluice.dev/ingress-controller
YAML
write configmap.yaml <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: sluice
  namespace: sluice
data:
  ssl-redirect: "false"
  ssl-session-tickets: "true"
YAML
write service.yaml <<YAML
apiVersion: v1
kind: Service
metadata:
  name: app
  namespace: default
spec:
  ports:
    - {name: http, port: 80, protocol: TCP, targetPort: $BACKEND_PORT}
YAML
slice 2 3 4 | write endpointslice.yaml
tls_secret app-tls app | write secret-app.yaml
tls_secret churn-tls churn | write secret-churn.yaml
write ingress-app.yaml <<'YAML'
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: app
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/limit-rps: "100000"
    nginx.ingress.kubernetes.io/enable-cors: "true"
    nginx.ingress.kubernetes.io/affinity: cookie
spec:
  ingressClassName: sluice
  tls:
    - hosts: [app.test]
      secretName: app-tls
  rules:
    - host: app.test
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}
YAML

# --- processes ----------------------------------------------------------------------------------

for n in 2 3 4; do
    "$SLUICE_BIN" backend --listen "$POD_NET.$n:$BACKEND_PORT" --name "pod$n" >"$WORK/backend-$n.log" 2>&1 &
    PIDS+=("$!")
    wait_until "backend pod$n" "$!" curl -fsS -o /dev/null "http://$POD_NET.$n:$BACKEND_PORT/"
done

if [[ $MODE == kubernetes ]]; then
    # The DaemonSet's flags (deploy/manifests), on loopback.
    source_flags=(--kubernetes --kubeconfig "$SLUICE_KUBE_DIR/sluice.kubeconfig"
        --configmap sluice/sluice --publish-service sluice/sluice --election-id sluice-leader
        --ingress-class sluice --controller-class sluice.dev/ingress-controller
        --shutdown-grace-period 0)
    export POD_NAME=sluice-soak POD_NAMESPACE=sluice
else
    source_flags=(--config "$WORK/config")
fi
SLUICE_LOG=warn "$SLUICE_BIN" serve "${source_flags[@]}" --workers "$WORKERS" \
    --http-listen "127.0.0.1:$HTTP_PORT" --https-listen "127.0.0.1:$HTTPS_PORT" \
    --admin-listen "127.0.0.1:$ADMIN_PORT" --status-listen 127.0.0.1:0 \
    --default-tls-secret default/app-tls --access-log-path /dev/null >"$WORK/sluice.log" 2>&1 &
SLUICE_PID=$!
PIDS+=("$SLUICE_PID")
wait_until "sluice serve" "$SLUICE_PID" curl -fsS -o /dev/null "http://127.0.0.1:$ADMIN_PORT/ready"
wait_until "app.test" "$SLUICE_PID" curl -fsS -o /dev/null --cacert "$WORK/pki/ca.crt" \
    --resolve "app.test:$HTTPS_PORT:127.0.0.1" "https://app.test:$HTTPS_PORT/"
log "sluice $("$SLUICE_BIN" --version | awk '{print $2}') (pid $SLUICE_PID, $WORKERS workers) ready; soaking for $DURATION"

app_url="https://app.test:$HTTPS_PORT/"
# load NAME ARGS...: one open-loop load for the whole soak, its JSON in load/NAME.json.
load() {
    local name=$1
    shift
    "$SLUICE_BIN" load -t1 -d "${duration_s}s" --json "$WORK/load/$name.json" "$@" \
        >"$WORK/load/$name.log" 2>&1 &
    PIDS+=("$!")
    LOADS+=("$!")
}
LOADS=()
tls_load=(--cacert "$WORK/pki/ca.crt" --connect-to "127.0.0.1:$HTTPS_PORT")
load https-keepalive -c16 -R "$RATE_H1" "${tls_load[@]}" "$app_url"
load h2 --http2 -c4 -R "$RATE_H2" "${tls_load[@]}" "$app_url"
load full-handshakes --new-connection-per-request --tls-resumption off -c4 -R "$RATE_FULL" \
    "${tls_load[@]}" "$app_url"
load resumed-handshakes --new-connection-per-request --tls-resumption on -c4 -R "$RATE_RESUMED" \
    "${tls_load[@]}" "$app_url"
load unknown-host-404 -c4 -R "$RATE_404" -H 'Host: nobody.test' "http://127.0.0.1:$HTTP_PORT/"

# --- churn and samples --------------------------------------------------------------------------

# raw_status BYTES-FILE: the status code Sluice answers to the file's bytes on a new connection.
raw_status() {
    python3 - "$HTTP_PORT" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(open(sys.argv[2], "rb").read())
data = b""
try:
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
print(data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "none")
PY
}
{
    printf 'GET / HTTP/1.1\r\nHost: app.test\r\nX-Big: '
    head -c 40000 /dev/zero | tr '\0' 'a'
    printf '\r\n\r\n'
} >"$WORK/too-large.bin"
printf 'GET / HTTP/1.1\r\nHost: app.test\r\nBad Header\r\n\r\n' >"$WORK/malformed.bin"

# served K: hK.churn.test answers through its rewrite (/r/ → /) three times.
served() {
    local i
    for ((i = 0; i < 3; i++)); do
        curl -fsS -o /dev/null -m 2 --cacert "$WORK/pki/ca.crt" \
            --resolve "h$1.churn.test:$HTTPS_PORT:127.0.0.1" "https://h$1.churn.test:$HTTPS_PORT/r/" ||
            return 1
    done
}

sample() { # one line of samples.tsv
    local t=$1 rss anon fds threads metrics series
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SLUICE_PID/status")
    anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$SLUICE_PID/status")
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$SLUICE_PID/status")
    fds=$(find "/proc/$SLUICE_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
    curl -fsS -m 5 "http://127.0.0.1:$ADMIN_PORT/metrics" >"$WORK/metrics.txt" || : >"$WORK/metrics.txt"
    metrics=$(grep -vc '^#' "$WORK/metrics.txt" || true)
    # Ingresses the request family names (one label value each, whatever their series).
    series=$(grep '^nginx_ingress_controller_requests{' "$WORK/metrics.txt" |
        grep -o 'ingress="[^"]*"' | sort -u | wc -l || true)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$rss" "$anon" "$fds" "$threads" "$metrics" \
        "$series" "$ingresses" >>"$WORK/samples.tsv"
}

printf 't_s\trss_kib\tanon_kib\tfds\tthreads\tmetric_lines\tingresses_in_metrics\tingresses_made\n' >"$WORK/samples.tsv"
: >"$WORK/events.tsv"
start=$SECONDS
next_sample=0
next_endpoints=$ENDPOINT_EVERY
next_restart=$APISERVER_RESTART_EVERY
restarts=0
endpoint_sets=("2 3" "2 3 4" "3 4" "2 3 4" "2 4" "2 3 4")
endpoint_step=0
ingresses=0
unserved=0
unstatused=0
wrong_refusals=0
sample 0
while :; do
    now=$((SECONDS - start))
    ((now < duration_s)) || break
    kill -0 "$SLUICE_PID" 2>/dev/null || die "sluice serve exited (see $WORK/sluice.log)"

    k=$ingresses
    churn_ingress "$k" | write "ingress-churn-$k.yaml"
    ingresses=$((ingresses + 1))
    if ((k >= LIVE)); then remove_churn_ingress $((k - LIVE)); fi
    ok=0
    for ((w = 0; w < 50; w++)); do
        if served "$k" 2>/dev/null; then ok=1 && break; fi
        sleep 0.2
    done
    if ((ok == 0)); then
        unserved=$((unserved + 1))
        printf '%s\tchurn-%s not served within 10 s\n' "$now" "$k" >>"$WORK/events.tsv"
    fi
    if [[ $MODE == kubernetes ]]; then
        ok=0
        for ((w = 0; w < 50; w++)); do
            if status_written "$k"; then ok=1 && break; fi
            sleep 0.2
        done
        if ((ok == 0)); then
            unstatused=$((unstatused + 1))
            printf '%s\tchurn-%s has no status address after 10 s\n' "$now" "$k" >>"$WORK/events.tsv"
        fi
    fi

    large=$(raw_status "$WORK/too-large.bin")
    bad=$(raw_status "$WORK/malformed.bin")
    if [[ $large != 431 || $bad != 400 ]]; then
        wrong_refusals=$((wrong_refusals + 1))
        printf '%s\ttoo large: %s, malformed: %s\n' "$now" "$large" "$bad" >>"$WORK/events.tsv"
    fi

    if ((now >= next_endpoints)); then
        # shellcheck disable=SC2086 # the set is a list of words
        slice ${endpoint_sets[endpoint_step % ${#endpoint_sets[@]}]} | write endpointslice.yaml
        endpoint_step=$((endpoint_step + 1))
        next_endpoints=$((now + ENDPOINT_EVERY))
    fi
    if [[ $MODE == kubernetes ]] && ((APISERVER_RESTART_EVERY > 0 && now >= next_restart)); then
        "$ROOT/scripts/kube-cluster.sh" stop-apiserver "$SLUICE_KUBE_DIR" 2>>"$WORK/apiserver-restarts.log"
        sleep "$APISERVER_DOWN"
        "$ROOT/scripts/kube-cluster.sh" start-apiserver "$SLUICE_KUBE_DIR" 2>>"$WORK/apiserver-restarts.log" ||
            die "the API server did not start again (see $WORK/apiserver-restarts.log)"
        restarts=$((restarts + 1))
        next_restart=$((SECONDS - start + APISERVER_RESTART_EVERY))
    fi
    if ((now >= next_sample)); then
        sample "$now"
        next_sample=$((now + sample_s))
    fi
    sleep "$CHURN_EVERY"
done
sample $((SECONDS - start))
# Their exit codes say little here (the 404 load "fails" by design); the report reads their JSON.
for pid in "${LOADS[@]}"; do
    wait "$pid" || true
done
log "soak over: $ingresses Ingresses made, $endpoint_step EndpointSlice rewrites"

# --- report -------------------------------------------------------------------------------------

mkdir -p "$(dirname "$OUT")"
cp "$WORK/samples.tsv" "${OUT%.md}.tsv"
status=0
SOAK_VERSION=$("$SLUICE_BIN" --version) SOAK_MODE=$MODE SOAK_DURATION=$DURATION SOAK_WORKERS=$WORKERS \
    SOAK_LIVE=$LIVE SOAK_GROWTH_MIB=$GROWTH_MIB SOAK_FD_SLACK=$FD_SLACK \
    SOAK_UNSERVED=$unserved SOAK_UNSTATUSED=$unstatused SOAK_WRONG_REFUSALS=$wrong_refusals SOAK_INGRESSES=$ingresses \
    SOAK_ENDPOINT_STEPS=$endpoint_step SOAK_CHURN_EVERY=$CHURN_EVERY \
    SOAK_ENDPOINT_EVERY=$ENDPOINT_EVERY SOAK_APISERVER_RESTARTS=$restarts \
    SOAK_APISERVER_DOWN=$APISERVER_DOWN \
    python3 "$ROOT/scripts/lib/soak_report.py" "$WORK/samples.tsv" "$WORK/load" "$WORK/events.tsv" \
    >"$OUT" || status=$?
cat "$OUT" | sed -n '/^## Verdict/,/^## /p' | sed '$d' >&2
log "report: $OUT (samples: ${OUT%.md}.tsv)"
exit "$status"
