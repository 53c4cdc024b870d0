//! Which endpoints and Ingresses a replica serves, by where it runs and what it is told,
//! against a real API server: `--enable-topology-aware-routing` (the replica's zone is its
//! node's label, the node `$NODE_NAME` names; a Service that asks for it sends its requests to
//! the endpoints hinted for that zone, while the hints allow it; a `PreferSameNode` one, to
//! those hinted for its node) and `--watch-namespace-selector`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::kubernetes::{cluster_with_class, pod};
use crate::support::kube::{ingress, KubeSluice, SluiceOptions};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(20);

/// The EndpointSlice of `web` with one endpoint per (pod address, its hinted zone).
fn slice(ns: &str, endpoints: &[(std::net::IpAddr, Option<&str>)]) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(ip, zone)| {
            let mut endpoint =
                json!({"addresses": [ip.to_string()], "conditions": {"ready": true}});
            if let Some(zone) = zone {
                endpoint["hints"] = json!({"forZones": [{"name": zone}]});
            }
            endpoint
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": ns,
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
}

/// Which pods answered `n` requests for `host`.
fn answered(serve: &Serve, host: &str, n: usize) -> std::collections::BTreeSet<String> {
    (0..n)
        .filter_map(|_| {
            let text = serve.get(host, "/").text();
            let line = text.lines().find(|l| l.starts_with("Server name: "))?;
            Some(line.trim_start_matches("Server name: ").to_owned())
        })
        .collect()
}

/// Waits until web.test is answered by `pod`, then sends `n` more requests: all are its.
fn served_only_by(sluice: &KubeSluice, pod: &str, n: usize, what: &str) {
    sluice.wait_served_by("web.test", pod, WAIT);
    assert_eq!(
        answered(&sluice.serve, "web.test", n),
        [pod.to_owned()].into(),
        "{what}"
    );
}

/// Service `web` (`service`: its metadata and spec), its slice with `a` hinted for zone-a and
/// `b` for zone-b, an Ingress for web.test, and Sluice with `flag` on node `node`.
fn zoned_web(
    cluster: &crate::support::kube::Cluster,
    ns: &str,
    service: Value,
    (a, b): (std::net::IpAddr, std::net::IpAddr),
    (flag, node): (&str, &str),
) -> crate::support::kube::KubeSluice {
    let mut service = service;
    service["apiVersion"] = json!("v1");
    service["kind"] = json!("Service");
    service["metadata"]["name"] = json!("web");
    service["metadata"]["namespace"] = json!(ns);
    cluster.create(&service);
    cluster.create(&slice(ns, &[(a, Some("zone-a")), (b, Some("zone-b"))]));
    cluster.create(&ingress(ns, "web", Some("sluice"), "web.test", "web"));
    cluster.sluice_with(SluiceOptions {
        identity: "sluice-0",
        namespace: ns,
        kubeconfig: None,
        extra: &[flag],
        wait_ready: true,
        log: None,
        env: &[("NODE_NAME", node)],
    })
}

#[test]
fn a_prefer_close_service_is_served_from_the_replicas_zone() {
    let ns = "topology";
    let cluster = cluster_with_class("kube-topology", ns);
    let (here, there) = (pod(&cluster, 71), pod(&cluster, 72));
    cluster.create(&json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"topology.kubernetes.io/zone": "zone-a"}},
    }));
    let (a, b) = (here.addr.ip(), there.addr.ip());
    let service = json!({
        "metadata": {},
        "spec": {"ports": [{"name": "http", "port": 80}], "trafficDistribution": "PreferClose"},
    });
    let flag = ("--enable-topology-aware-routing", "node-a");
    let sluice = zoned_web(&cluster, ns, service, (a, b), flag);
    served_only_by(&sluice, &here.name, 12, "only zone-a's endpoint");
    let config = sluice.serve.config_json();
    let backend = &config["config"]["backends"]["topology/web:http"];
    assert_eq!(backend["zone"], "zone-a", "{backend:#}");

    // An endpoint without hints: the hints are not used, every zone's endpoints serve.
    cluster.apply(&slice(ns, &[(a, Some("zone-a")), (b, None)]));
    sluice.wait_served_by("web.test", &there.name, WAIT);

    // Only other zones' endpoints are ready: they serve (ingress-nginx would serve none).
    cluster.apply(&slice(ns, &[(b, Some("zone-b"))]));
    served_only_by(&sluice, &there.name, 6, "only the other zone's endpoint");
}

#[test]
fn without_its_node_every_zone_serves_and_the_log_says_why() {
    let ns = "topology-unknown";
    let cluster = cluster_with_class("kube-topology-unknown", ns);
    let (one, two) = (pod(&cluster, 73), pod(&cluster, 74));
    let service = json!({
        "metadata": {"annotations": {"service.kubernetes.io/topology-mode": "Auto"}},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    });
    // NODE_NAME names a node that does not exist.
    let flag = ("--enable-topology-aware-routing=true", "node-gone");
    let sluice = zoned_web(&cluster, ns, service, (one.addr.ip(), two.addr.ip()), flag);
    sluice.wait_served_by("web.test", &one.name, WAIT);
    sluice.wait_served_by("web.test", &two.name, WAIT);
    let log = sluice.log_text();
    assert!(
        log.contains("--enable-topology-aware-routing: node node-gone could not be read"),
        "{log}"
    );
}

/// `trafficDistribution: PreferSameNode` (Kubernetes 1.33+, which ingress-nginx does not
/// read): the endpoint hinted for this replica's node ($NODE_NAME) takes its requests; when it
/// is not ready, the zone's do.
#[test]
fn a_prefer_same_node_service_is_served_from_the_replicas_node() {
    let ns = "topology-node";
    let cluster = cluster_with_class("kube-topology-node", ns);
    let (here, there) = (pod(&cluster, 76), pod(&cluster, 77));
    cluster.create(&json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"topology.kubernetes.io/zone": "zone-a"}},
    }));
    cluster.create(&json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": 80}], "trafficDistribution": "PreferSameNode"},
    }));
    // As the EndpointSlice controller hints a PreferSameNode Service: its node and its zone.
    let slice = |here_ready: bool| {
        let endpoint = |ip: std::net::IpAddr, node: &str, ready: bool| {
            json!({"addresses": [ip.to_string()], "conditions": {"ready": ready},
                   "hints": {"forNodes": [{"name": node}], "forZones": [{"name": "zone-a"}]}})
        };
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-1", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [endpoint(here.addr.ip(), "node-a", here_ready),
                          endpoint(there.addr.ip(), "node-b", true)],
        })
    };
    cluster.create(&slice(true));
    cluster.create(&ingress(ns, "web", Some("sluice"), "web.test", "web"));
    let sluice = cluster.sluice_with(SluiceOptions {
        identity: "sluice-0",
        namespace: ns,
        kubeconfig: None,
        extra: &["--enable-topology-aware-routing"],
        wait_ready: true,
        log: None,
        env: &[("NODE_NAME", "node-a")],
    });
    served_only_by(&sluice, &here.name, 12, "only node-a's endpoint");
    let config = sluice.serve.config_json();
    let backend = &config["config"]["backends"]["topology-node/web:http"];
    assert_eq!(backend["node"], "node-a", "{backend:#}");

    // Its node's endpoint not ready: the zone's ready ones serve.
    cluster.apply(&slice(false));
    served_only_by(
        &sluice,
        &there.name,
        6,
        "the zone's endpoint, once the node's is not ready",
    );
}

/// `--watch-namespace-selector`: the Ingresses of the namespaces whose labels it selects are
/// served, the others are another controller's; a relabelled namespace is followed.
#[test]
fn a_namespace_selector_chooses_whose_ingresses_are_served() {
    use crate::support::kube::{endpoint_slice, ingress_class, service, Cluster, Endpoint};
    let cluster = Cluster::start("kube-namespace-selector");
    cluster.create(&ingress_class("sluice", crate::support::kube::CONTROLLER));
    let p = pod(&cluster, 75);
    for (ns, team) in [("shop", "shop"), ("lab", "lab")] {
        cluster.create(&json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"team": team}},
        }));
        cluster.create(&service(ns, "web"));
        let ready = [Endpoint::ready(p.addr.ip())];
        cluster.create(&endpoint_slice(ns, "web-1", "web", 8080, &ready));
        let host = format!("{ns}.test");
        cluster.create(&ingress(ns, "web", Some("sluice"), &host, "web"));
    }
    let sluice = cluster.sluice("shop", &["--watch-namespace-selector", "team in (shop)"]);
    assert_eq!(sluice.get("shop.test", "/").status, 200);
    assert_eq!(
        sluice.get("lab.test", "/").status,
        404,
        "lab's Ingress is not ours"
    );

    cluster.apply(&json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "lab", "labels": {"team": "shop"}},
    }));
    sluice.wait_status("lab.test", 200, WAIT);
}
