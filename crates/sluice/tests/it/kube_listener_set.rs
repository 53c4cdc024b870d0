//! ListenerSets in `sluice serve --kubernetes`: watched, served on their Gateway's listeners when
//! it allows them, and their status (with the Gateway's `attachedListenerSets` and the route's
//! parent entry for the ListenerSet) written by the leader, with the deploy manifests' RBAC.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::kube::*;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);

fn gateway_api(kind: &str, ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
        "metadata": {"name": name, "namespace": ns}, "spec": spec,
    })
}

/// `type`'s condition (status, reason) in a status's `conditions`.
fn state(conditions: &Value, type_: &str) -> (String, String) {
    let found = (conditions.as_array().into_iter().flatten()).find(|c| c["type"] == type_);
    let field = |name: &str| {
        found
            .and_then(|c| c[name].as_str())
            .unwrap_or("")
            .to_owned()
    };
    (field("status"), field("reason"))
}

#[test]
fn a_listener_set_is_served_when_allowed_and_its_status_is_written_by_the_leader() {
    let ns = "sets";
    let cluster = Cluster::start("listener-set");
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    cluster.create(&namespace("elsewhere"));
    let ip = cluster.add_address(11);
    let _pod = Pod::start_at("pod-11", &socket(ip, 8080));
    cluster.create_service(ns, "web", 8080, &[ip]);
    cluster.create(&json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "sluice"},
        "spec": {"controllerName": "sluice.dev/gateway-controller"},
    }));
    cluster.create(&gateway_api(
        "Gateway",
        ns,
        "edge",
        json!({
            "gatewayClassName": "sluice",
            "allowedListeners": {"namespaces": {"from": "Same"}},
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP", "hostname": "gw.test"}],
        }),
    ));
    let set_spec = |host: &str| {
        json!({
            "parentRef": {"name": "edge", "namespace": ns},
            "listeners": [{"name": "extra", "port": 80, "protocol": "HTTP", "hostname": host}],
        })
    };
    cluster.create(&gateway_api(
        "ListenerSet",
        ns,
        "extra",
        set_spec("set.test"),
    ));
    // Another namespace: `from: Same` does not allow it.
    cluster.create(&gateway_api(
        "ListenerSet",
        "elsewhere",
        "refused",
        set_spec("no.test"),
    ));
    cluster.create(&gateway_api("HTTPRoute", ns, "web", json!({
        "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "name": "extra"}],
        "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
    })));
    // As deployed: the manifests' RBAC covers the reads and status writes (checked at the end).
    let sluice = cluster.sluice_as_deployed("sluice-listener-set", &[]);
    sluice.wait_served_by("set.test", "pod-11", WAIT);
    // The route is the ListenerSet's: not on the Gateway's own listener.
    assert_eq!(sluice.get("gw.test", "/").status, 404);
    assert_eq!(sluice.get("no.test", "/").status, 404);

    let set = eventually(WAIT, "the ListenerSet's status", || {
        let set = cluster.get("ListenerSet", ns, "extra")?;
        (state(&set["status"]["conditions"], "Accepted").0 == "True").then_some(set)
    });
    let status = &set["status"];
    assert_eq!(
        state(&status["conditions"], "Programmed"),
        ("True".into(), "Programmed".into())
    );
    assert_eq!(status["listeners"][0]["name"], "extra", "{status:#}");
    assert_eq!(status["listeners"][0]["attachedRoutes"], 1, "{status:#}");
    let refused = eventually(WAIT, "the refused ListenerSet's status", || {
        let set = cluster.get("ListenerSet", "elsewhere", "refused")?;
        let accepted = state(&set["status"]["conditions"], "Accepted");
        (accepted.0 == "False").then_some(accepted)
    });
    assert_eq!(refused.1, "NotAllowed");
    let gateway = eventually(WAIT, "the Gateway's attachedListenerSets", || {
        let gateway = cluster.get("Gateway", ns, "edge")?;
        (gateway["status"]["attachedListenerSets"] == 1).then_some(gateway)
    });
    assert_eq!(gateway["status"]["listeners"][0]["attachedRoutes"], 0);
    let route = eventually(WAIT, "the route's parent entry", || {
        let route = cluster.get("HTTPRoute", ns, "web")?;
        route["status"]["parents"].as_array()?.first().cloned()
    });
    assert_eq!(route["parentRef"]["kind"], "ListenerSet", "{route:#}");
    assert_eq!(
        state(&route["conditions"], "Accepted").0,
        "True",
        "{route:#}"
    );

    // The manifests' grants covered every read and status write.
    sluice.assert_nothing_forbidden();
}
