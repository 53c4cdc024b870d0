//! Gateway API in `sluice serve --kubernetes`: the release's CRDs installed in the test's own
//! kube-apiserver (scripts/gateway-crds.sh), GatewayClass, Gateway and HTTPRoute objects written
//! there, traffic through Sluice; and a cluster without the CRDs, which Sluice serves anyway.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::kube::*;
use crate::support::*;

/// Long enough for a watch that saw 404 to ask again (its backoff is capped at 8 s).
const WAIT: Duration = Duration::from_secs(30);

fn gateway_class() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "sluice"},
        "spec": {"controllerName": "sluice.dev/gateway-controller"},
    })
}

/// Gateway `edge` of class `sluice`: one HTTP listener on port 80 (Sluice's --http-listen).
fn gateway(ns: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": ns},
        "spec": {
            "gatewayClassName": "sluice",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    })
}

/// HTTPRoute `name` attached to Gateway `edge`: `host` to Service `service` port 80.
fn http_route(ns: &str, name: &str, host: &str, service: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "parentRefs": [{"name": "edge"}],
            "hostnames": [host],
            "rules": [{"backendRefs": [{"name": service, "port": 80}]}],
        },
    })
}

/// Service `name` with one EndpointSlice pointing at `pod` (port 8080), no Ingress.
fn backend(cluster: &Cluster, ns: &str, name: &str, pod: &Pod) {
    cluster.create(&service(ns, name));
    cluster.create(&endpoint_slice(
        ns,
        &format!("{name}-1"),
        name,
        8080,
        &[Endpoint::ready(pod.addr.ip())],
    ));
}

fn pod(cluster: &Cluster, n: u8) -> Pod {
    let ip = cluster.add_address(n);
    Pod::start_at(&format!("pod-{n}"), &socket(ip, 8080))
}

#[test]
fn gateway_api_objects_route_through_sluice_and_follow_their_changes() {
    let ns = "gw";
    let cluster = Cluster::start("gateway-api");
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    let (a, b) = (pod(&cluster, 11), pod(&cluster, 12));
    backend(&cluster, ns, "web", &a);
    backend(&cluster, ns, "api", &b);
    cluster.create(&gateway_class());
    cluster.create(&gateway(ns));
    cluster.create(&http_route(ns, "web", "web.test", "web"));
    let sluice = cluster.sluice(ns, &[]);

    // Objects that existed before Sluice started are served once it is ready.
    let reply = sluice.get("web.test", "/");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(
        reply.text().contains("Server name: pod-11"),
        "{}",
        reply.text()
    );
    assert_eq!(sluice.get("api.test", "/").status, 404);

    // A route created while Sluice runs, then edited to another backend, then deleted.
    cluster.create(&http_route(ns, "api", "api.test", "web"));
    sluice.wait_served_by("api.test", "pod-11", WAIT);
    cluster.apply(&http_route(ns, "api", "api.test", "api"));
    sluice.wait_served_by("api.test", "pod-12", WAIT);
    cluster.delete("HTTPRoute", ns, "api");
    sluice.wait_status("api.test", 404, WAIT);

    // A Gateway of another controller's class serves nothing.
    let mut other = gateway_class();
    other["metadata"]["name"] = json!("other");
    other["spec"]["controllerName"] = json!("example.com/other");
    cluster.create(&other);
    let mut foreign = gateway(ns);
    foreign["metadata"]["name"] = json!("foreign");
    foreign["spec"]["gatewayClassName"] = json!("other");
    cluster.create(&foreign);
    let mut foreign_route = http_route(ns, "foreign", "foreign.test", "web");
    foreign_route["spec"]["parentRefs"] = json!([{"name": "foreign"}]);
    cluster.create(&foreign_route);
    // Sluice has seen the foreign objects once a route created after them is served.
    cluster.create(&http_route(ns, "later", "later.test", "api"));
    sluice.wait_served_by("later.test", "pod-12", WAIT);
    assert_eq!(sluice.get("foreign.test", "/").status, 404);
    assert_eq!(sluice.get("web.test", "/").status, 200);
}

#[test]
fn without_the_gateway_crds_ingresses_are_served_and_installing_them_later_adds_routes() {
    let ns = "plain";
    let cluster = Cluster::start("no-gateway-crds");
    cluster.create(&namespace(ns));
    cluster.create(&ingress_class("sluice", CONTROLLER));
    let a = pod(&cluster, 11);
    cluster.create_app(ns, "web", "web.test", 8080, &[a.addr.ip()]);

    // Ready although four of its watches answer 404, and serving the Ingress.
    let sluice = cluster.sluice(ns, &[]);
    assert_eq!(sluice.get("web.test", "/").status, 200);
    let log = sluice.log_text();
    let not_installed = log
        .lines()
        .filter(|l| l.contains("is not installed in this cluster"))
        .count();
    assert_eq!(not_installed, 4, "one line per Gateway API kind:\n{log}");
    assert!(!sluice.has_exited());

    // The CRDs installed while Sluice runs: the watches find them on their next attempt.
    cluster.install_gateway_crds();
    cluster.create(&gateway_class());
    cluster.create(&gateway(ns));
    cluster.create(&http_route(ns, "gw", "gw.test", "web"));
    sluice.wait_served_by("gw.test", "pod-11", WAIT);
    assert_eq!(sluice.get("web.test", "/").status, 200);
    // Said once per kind, not once per retry.
    let log = sluice.log_text();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("is not installed in this cluster"))
            .count(),
        4,
        "{log}"
    );
}
