//! Gateway API in `sluice serve --kubernetes`: the release's CRDs installed in the test's own
//! kube-apiserver (scripts/gateway-crds.sh), GatewayClass, Gateway and HTTPRoute objects written
//! there, traffic through Sluice; and a cluster without the CRDs, which Sluice serves anyway.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::kube::*;
use crate::support::*;

/// Long enough for a watch that saw 404 to ask again (its backoff is capped at 8 s).
const WAIT: Duration = Duration::from_secs(30);

pub(crate) fn gateway_class() -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "sluice"},
        "spec": {"controllerName": "sluice.dev/gateway-controller"},
    })
}

/// Gateway `edge` of class `sluice`: one HTTP listener on port 80 (Sluice's --http-listen).
pub(crate) fn gateway(ns: &str) -> Value {
    let mut objects = testkit::objects::gateway_edge(ns);
    objects.pop().expect("the Gateway comes last")
}

/// HTTPRoute `name` attached to Gateway `edge`: `host` to Service `service` port 80.
pub(crate) fn http_route(ns: &str, name: &str, host: &str, service: &str) -> Value {
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
pub(crate) fn backend(cluster: &Cluster, ns: &str, name: &str, pod: &Pod) {
    cluster.create(&service(ns, name));
    cluster.create(&endpoint_slice(
        ns,
        &format!("{name}-1"),
        name,
        8080,
        &[Endpoint::ready(pod.addr.ip())],
    ));
}

pub(crate) fn pod(cluster: &Cluster, n: u8) -> Pod {
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
    sluice.wait_served_by("web.test", "pod-11", Duration::ZERO);
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

    // Ready although its Gateway API watches answer 404, and serving the Ingress.
    let sluice = cluster.sluice_with(SluiceOptions {
        identity: "sluice-0",
        namespace: ns,
        kubeconfig: None,
        extra: &[],
        wait_ready: true,
        log: Some("info,providers::kubernetes::watch=debug"),
        env: &[],
    });
    assert_eq!(sluice.get("web.test", "/").status, 200);
    let log = sluice.log_text();
    let not_installed = log
        .lines()
        .filter(|l| l.contains("is not installed in this cluster"))
        .count();
    // GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant, BackendTLSPolicy, TLSRoute,
    // TCPRoute, UDPRoute, ListenerSet.
    assert_eq!(not_installed, 10, "one line per Gateway API kind:\n{log}");
    assert!(!sluice.has_exited());

    // Each kind is asked again with a backoff that grows (0.5 s doubling, 30 s at most): at
    // most 7 lists in the first 10 s, where kube-rs's StreamBackoff, which started over at the
    // `Init` event before every list, asked every 0.25–0.5 s (20 to 40 lists).
    std::thread::sleep(Duration::from_secs(10));
    let log = sluice.log_text();
    let asked = log
        .lines()
        .filter(|l| l.contains("HTTPRoute is still not installed"))
        .count();
    assert!(
        (2..=8).contains(&asked),
        "{asked} lists of HTTPRoutes in about 10 s:\n{log}"
    );

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
        10,
        "{log}"
    );
}

/// `type`'s condition in a status's `conditions`, or Null.
fn condition<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .unwrap_or(&NULL)
}

/// Sluice's entry in an HTTPRoute's `status.parents`, once written.
fn route_parent(cluster: &Cluster, ns: &str, name: &str) -> Option<Value> {
    kind_route_parent(cluster, "HTTPRoute", ns, name)
}

/// Sluice's entry in a route's `status.parents`, once written.
fn kind_route_parent(cluster: &Cluster, kind: &str, ns: &str, name: &str) -> Option<Value> {
    let route = cluster.get(kind, ns, name)?;
    route["status"]["parents"]
        .as_array()?
        .iter()
        .find(|p| p["controllerName"] == "sluice.dev/gateway-controller")
        .cloned()
}

#[test]
fn the_leader_writes_gateway_api_status_with_the_specs_reasons_and_observed_generation() {
    let ns = "status";
    let cluster = Cluster::start("gateway-status");
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    cluster.create(&namespace("elsewhere"));
    let a = pod(&cluster, 11);
    backend(&cluster, ns, "web", &a);
    cluster.create(&gateway_class());
    // And a TLS Passthrough listener on 443, for a TLSRoute.
    let mut edge = gateway(ns);
    edge["spec"]["listeners"]
        .as_array_mut()
        .unwrap()
        .push(json!(
            {"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}}
        ));
    // And a TCP listener, for a TCPRoute (its status needs the tcproutes/status grant).
    let tcp_port = testkit::free_tcp_port();
    edge["spec"]["listeners"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "tcp", "port": tcp_port, "protocol": "TCP"}));
    cluster.create(&edge);
    cluster.create(&json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
        "metadata": {"name": "raw", "namespace": ns},
        "spec": {
            "parentRefs": [{"name": "edge", "sectionName": "tcp"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    }));
    cluster.create(&http_route(ns, "web", "web.test", "web"));
    // To a Service that does not exist: ResolvedRefs False, and its share answers 500.
    cluster.create(&http_route(ns, "ghost", "ghost.test", "nothing"));
    // From another namespace: the listener admits its own namespace's routes only.
    let mut outsider = http_route("elsewhere", "outsider", "outsider.test", "web");
    outsider["spec"]["parentRefs"] = json!([{"name": "edge", "namespace": ns}]);
    cluster.create(&outsider);
    // A GRPCRoute on the same listener, another hostname (its status needs the manifests'
    // grpcroutes/status grant).
    let mut rpc = http_route(ns, "rpc", "rpc.test", "web");
    rpc["kind"] = json!("GRPCRoute");
    rpc["spec"]["rules"][0]["matches"] = json!([{"method": {"service": "echo.Echo"}}]);
    cluster.create(&rpc);
    // A TLSRoute, on the TLS listener only (its status needs the tlsroutes/status grant).
    let mut pass = http_route(ns, "pass", "pass.test", "web");
    pass["kind"] = json!("TLSRoute");
    cluster.create(&pass);
    // As ServiceAccount sluice/sluice with the deploy manifests' RBAC: their grants cover the
    // Gateway API reads and status writes (checked at the end: nothing refused).
    let extra = ["--publish-status-address", "198.18.0.200"];
    let sluice = cluster.sluice_as_deployed("sluice-gateway", &extra);
    assert_eq!(sluice.get("web.test", "/").status, 200);
    assert_eq!(sluice.get("ghost.test", "/").status, 500);
    assert_eq!(sluice.get("outsider.test", "/").status, 404);

    let class = eventually(WAIT, "GatewayClass status", || {
        let class = cluster.get("GatewayClass", "", "sluice")?;
        (condition(&class["status"]["conditions"], "Accepted")["status"] == "True").then_some(class)
    });
    let accepted = condition(&class["status"]["conditions"], "Accepted");
    assert_eq!(accepted["observedGeneration"], 1, "{class:#}");

    let gateway = eventually(WAIT, "Gateway status", || {
        let gateway = cluster.get("Gateway", ns, "edge")?;
        (condition(&gateway["status"]["conditions"], "Programmed")["status"] == "True")
            .then_some(gateway)
    });
    let status = &gateway["status"];
    assert_eq!(
        condition(&status["conditions"], "Accepted")["status"],
        "True",
        "{status:#}"
    );
    assert_eq!(
        status["addresses"],
        json!([{"type": "IPAddress", "value": "198.18.0.200"}])
    );
    let listener = &status["listeners"][0];
    assert_eq!(listener["name"], "http");
    assert_eq!(listener["attachedRoutes"], 3, "web, ghost, rpc: {status:#}");
    assert_eq!(listener["supportedKinds"][0]["kind"], "HTTPRoute");
    assert_eq!(listener["supportedKinds"][1]["kind"], "GRPCRoute");
    for (type_, value) in [
        ("Accepted", "True"),
        ("Programmed", "True"),
        ("ResolvedRefs", "True"),
        ("Conflicted", "False"),
    ] {
        assert_eq!(
            condition(&listener["conditions"], type_)["status"],
            value,
            "{type_}"
        );
    }

    let web = eventually(WAIT, "HTTPRoute web status", || {
        route_parent(&cluster, ns, "web")
    });
    // The parentRef as the route has it (the API server filled in group and kind).
    assert_eq!(
        web["parentRef"],
        json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"})
    );
    let web_accepted = condition(&web["conditions"], "Accepted").clone();
    assert_eq!(web_accepted["status"], "True");
    assert_eq!(web_accepted["observedGeneration"], 1);
    assert_eq!(
        condition(&web["conditions"], "ResolvedRefs")["status"],
        "True"
    );

    let ghost = eventually(WAIT, "HTTPRoute ghost status", || {
        route_parent(&cluster, ns, "ghost")
    });
    let refs = condition(&ghost["conditions"], "ResolvedRefs");
    assert_eq!(
        (&refs["status"], &refs["reason"]),
        (&json!("False"), &json!("BackendNotFound"))
    );
    assert!(
        refs["message"].as_str().unwrap().contains("nothing"),
        "{refs:#}"
    );

    let rpc = eventually(WAIT, "GRPCRoute rpc status", || {
        kind_route_parent(&cluster, "GRPCRoute", ns, "rpc")
    });
    for type_ in ["Accepted", "ResolvedRefs"] {
        let found = condition(&rpc["conditions"], type_);
        assert_eq!(found["status"], "True", "{rpc:#}");
        assert_eq!(found["observedGeneration"], 1, "{rpc:#}");
    }

    let pass = eventually(WAIT, "TLSRoute pass status", || {
        kind_route_parent(&cluster, "TLSRoute", ns, "pass")
    });
    for type_ in ["Accepted", "ResolvedRefs"] {
        let found = condition(&pass["conditions"], type_);
        assert_eq!(found["status"], "True", "{pass:#}");
    }
    let tls = &status["listeners"][1];
    assert_eq!(tls["attachedRoutes"], 1, "pass: {status:#}");
    assert_eq!(
        tls["supportedKinds"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "TLSRoute"}])
    );

    let raw = eventually(WAIT, "TCPRoute raw status", || {
        kind_route_parent(&cluster, "TCPRoute", ns, "raw")
    });
    for type_ in ["Accepted", "ResolvedRefs"] {
        let found = condition(&raw["conditions"], type_);
        assert_eq!(found["status"], "True", "{raw:#}");
    }
    let tcp = &status["listeners"][2];
    assert_eq!(tcp["attachedRoutes"], 1, "raw: {status:#}");
    assert_eq!(
        tcp["supportedKinds"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "TCPRoute"}])
    );

    let outsider = eventually(WAIT, "HTTPRoute outsider status", || {
        route_parent(&cluster, "elsewhere", "outsider")
    });
    let refused = condition(&outsider["conditions"], "Accepted");
    assert_eq!(
        (&refused["status"], &refused["reason"]),
        (&json!("False"), &json!("NotAllowedByListeners"))
    );

    // An edit bumps the generation: the status follows it, and a condition that did not
    // change keeps its transition time.
    cluster.apply(&http_route(ns, "web", "web2.test", "web"));
    sluice.wait_served_by("web2.test", "pod-11", WAIT);
    let edited = eventually(WAIT, "HTTPRoute web status at generation 2", || {
        let parent = route_parent(&cluster, ns, "web")?;
        (condition(&parent["conditions"], "Accepted")["observedGeneration"] == 2).then_some(parent)
    });
    assert_eq!(
        condition(&edited["conditions"], "Accepted")["lastTransitionTime"],
        web_accepted["lastTransitionTime"]
    );
    // A route that stops naming Sluice's Gateway loses Sluice's parent entry.
    let mut moved = http_route(ns, "ghost", "ghost.test", "nothing");
    moved["spec"]["parentRefs"] = json!([{"name": "someone-elses"}]);
    cluster.apply(&moved);
    eventually(
        WAIT,
        "Sluice's parent entry gone from HTTPRoute ghost",
        || {
            let route = cluster.get("HTTPRoute", ns, "ghost")?;
            let parents = route["status"]["parents"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            parents
                .iter()
                .all(|p| p["controllerName"] != "sluice.dev/gateway-controller")
                .then_some(())
        },
    );
    sluice.assert_nothing_forbidden();
}

#[test]
fn a_listener_selecting_namespaces_by_label_follows_the_labels_and_a_new_leader_clears_stale_parents(
) {
    let cluster = Cluster::start("gateway-selector");
    cluster.install_gateway_crds();
    cluster.create(&namespace("infra"));
    cluster.create(&namespace("team"));
    let a = pod(&cluster, 11);
    backend(&cluster, "team", "web", &a);
    cluster.create(&gateway_class());
    let mut edge = gateway("infra");
    edge["spec"]["listeners"][0]["allowedRoutes"] = json!({"namespaces": {
        "from": "Selector", "selector": {"matchLabels": {"gateway-access": "yes"}}}});
    cluster.create(&edge);
    let mut route = http_route("team", "web", "web.test", "web");
    route["spec"]["parentRefs"] = json!([{"name": "edge", "namespace": "infra"}]);
    cluster.create(&route);
    let sluice = cluster.sluice("infra", &[]);
    assert_eq!(sluice.get("web.test", "/").status, 404, "not labelled yet");

    let accepted = |want: &'static str| {
        eventually(WAIT, &format!("HTTPRoute team/web Accepted {want}"), || {
            let parent = route_parent(&cluster, "team", "web")?;
            let accepted = condition(&parent["conditions"], "Accepted").clone();
            (accepted["status"] == want).then_some(accepted)
        })
    };
    assert_eq!(accepted("False")["reason"], "NotAllowedByListeners");
    // The Namespace's labels change: the route attaches, then detaches again.
    let mut labelled = namespace("team");
    labelled["metadata"]["labels"] = json!({"gateway-access": "yes"});
    cluster.apply(&labelled);
    sluice.wait_served_by("web.test", "pod-11", WAIT);
    accepted("True");
    cluster.apply(&namespace("team"));
    sluice.wait_status("web.test", 404, WAIT);
    accepted("False");

    // The class says which CRD bundle it found.
    let class = eventually(WAIT, "GatewayClass SupportedVersion", || {
        let class = cluster.get("GatewayClass", "", "sluice")?;
        let version = condition(&class["status"]["conditions"], "SupportedVersion").clone();
        (!version.is_null()).then_some(version)
    });
    assert_eq!(
        (&class["status"], &class["reason"]),
        (&json!("True"), &json!("SupportedVersion")),
        "{class:#}"
    );

    // The route moves to another controller's Gateway while no Sluice runs: the next leader
    // finds Sluice's stale entry (it never wrote it) and clears it.
    drop(sluice);
    route["spec"]["parentRefs"] = json!([{"name": "someone-elses", "namespace": "infra"}]);
    cluster.apply(&route);
    assert!(route_parent(&cluster, "team", "web").is_some());
    let _next = cluster.sluice("infra", &[]);
    eventually(WAIT, "Sluice's stale parent entry cleared", || {
        route_parent(&cluster, "team", "web")
            .is_none()
            .then_some(())
    });
}

/// Gateway `name` of class `sluice` with one HTTP listener.
fn named_gateway(ns: &str, name: &str) -> Value {
    let mut gateway = gateway(ns);
    gateway["metadata"]["name"] = json!(name);
    gateway
}

fn status_addresses(cluster: &Cluster, ns: &str, name: &str) -> Option<Value> {
    let gateway = cluster.get("Gateway", ns, name)?;
    let addresses = gateway["status"]["addresses"].clone();
    addresses.is_array().then_some(addresses)
}

#[test]
fn with_an_address_pool_each_gateway_gets_its_own_and_keeps_it_across_restarts() {
    let ns = "pool";
    let cluster = Cluster::start("gateway-pool");
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    cluster.create(&gateway_class());
    cluster.create(&named_gateway(ns, "a"));
    // Created one second later at least: the pool is handed out oldest first.
    std::thread::sleep(Duration::from_millis(1100));
    cluster.create(&named_gateway(ns, "b"));
    let pool = ["--gateway-address-pool", "198.18.0.210-198.18.0.212"];
    let own = |ip: &str| json!([{"type": "IPAddress", "value": ip}]);
    {
        let _sluice = cluster.sluice(ns, &pool);
        for (name, ip) in [("a", "198.18.0.210"), ("b", "198.18.0.211")] {
            let found = eventually(WAIT, "a Gateway's own address", || {
                status_addresses(&cluster, ns, name).filter(|a| *a == own(ip))
            });
            assert_eq!(found, own(ip), "{name}");
        }
    }
    // A restart (or a new leader) reads the addresses from status: b keeps .211, although
    // .210 is free now and first in the pool, and a newer Gateway gets what is left.
    cluster.delete("Gateway", ns, "a");
    cluster.create(&named_gateway(ns, "c"));
    let _sluice = cluster.sluice(ns, &pool);
    let c = eventually(WAIT, "the new Gateway's address", || {
        status_addresses(&cluster, ns, "c")
    });
    assert_eq!(c, own("198.18.0.210"));
    assert_eq!(
        status_addresses(&cluster, ns, "b"),
        Some(own("198.18.0.211"))
    );
}
