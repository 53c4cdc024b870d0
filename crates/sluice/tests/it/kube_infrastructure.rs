//! Each Gateway's generated Service and EndpointSlices (GEP-1762, GEP-1867's
//! `spec.infrastructure`) in a real API server: written by the leader only, as the deploy
//! manifests' ServiceAccount, following the Gateway's labels, leaving what others set, refusing
//! to take over a Service Sluice did not make, deleted when the Gateway leaves Sluice's class.
//! (Garbage collection through the ownerReference needs kube-controller-manager, which the
//! fixture does not run: not tested here.)

use std::time::Duration;

use serde_json::{json, Value};

use crate::kube_gateway::{gateway, gateway_class};
use crate::support::kube::*;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);

const CONDITION: &str = "sluice.dev/GeneratedService";

fn condition<'a>(object: &'a Value, type_: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    (object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten())
    .find(|c| c["type"] == type_)
    .unwrap_or(&NULL)
}

fn lease_holder(cluster: &Cluster) -> Option<String> {
    let lease = cluster.get("Lease", "sluice", "sluice-leader")?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

/// The object's `metadata.labels` (or annotations) without the ones the test does not look at.
fn string_map(value: &Value) -> Vec<(String, String)> {
    (value.as_object().into_iter().flatten())
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// `(name, port, targetPort)` of a Service, `(name, port)` of a slice (targetPort Null).
fn ports(object: &Value) -> Vec<(String, u64, Value)> {
    let ports = match object["kind"].as_str() {
        Some("Service") => &object["spec"]["ports"],
        _ => &object["ports"],
    };
    (ports.as_array().into_iter().flatten())
        .map(|p| {
            let name = p["name"].as_str().unwrap_or_default().to_owned();
            (
                name,
                p["port"].as_u64().unwrap_or(0),
                p["targetPort"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_gateways_service_follows_its_infrastructure_labels_written_by_the_leader_alone() {
    let ns = "infra";
    let cluster = Cluster::start("gateway-infrastructure");
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    cluster.create(&gateway_class());
    let alt = testkit::free_tcp_port();
    let mut edge = gateway(ns);
    edge["spec"]["infrastructure"] = json!({
        "labels": {"key2": "value2", "team": "web"},
        "annotations": {"key1": "value1"},
    });
    (edge["spec"]["listeners"].as_array_mut().unwrap())
        .push(json!({"name": "alt", "port": alt, "protocol": "HTTP"}));
    cluster.create(&edge);
    // Two replicas as the manifests deploy them (their RBAC), each on its own ports: the
    // generated objects carry the writer's --http-listen port, so a follower's write shows.
    let flags = [
        "--publish-status-address",
        "198.18.0.200",
        "--lease-duration",
        "4s",
    ];
    let a = cluster.sluice_as_deployed("replica-a", &flags);
    let b = cluster.sluice_as_deployed("replica-b", &flags);
    let holder = eventually(WAIT, "a Lease holder", || lease_holder(&cluster));
    let (mut leader, follower) = match holder.as_str() {
        "replica-a" => (a, b),
        "replica-b" => (b, a),
        other => panic!("Lease sluice-leader held by {other:?}"),
    };
    let leader_port = u64::from(leader.http.port());

    let service = eventually(WAIT, "Service infra/edge-sluice", || {
        cluster.get("Service", ns, "edge-sluice")
    });
    let labels = string_map(&service["metadata"]["labels"]);
    for (key, value) in [
        ("gateway.networking.k8s.io/gateway-name", "edge"),
        ("gateway.networking.k8s.io/gateway-class-name", "sluice"),
        ("key2", "value2"),
        ("team", "web"),
    ] {
        assert!(
            labels.contains(&(key.to_owned(), value.to_owned())),
            "{key}: {labels:?}"
        );
    }
    assert_eq!(
        service["metadata"]["annotations"]["key1"], "value1",
        "{service:#}"
    );
    let gateway_uid = cluster.get("Gateway", ns, "edge").unwrap()["metadata"]["uid"].clone();
    assert_eq!(
        service["metadata"]["ownerReferences"],
        json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "edge",
                "uid": gateway_uid, "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert!(service["spec"]["selector"].is_null(), "{service:#}");
    let alt_name = format!("tcp-{alt}");
    assert_eq!(
        ports(&service),
        [
            ("tcp-80".to_owned(), 80, json!(leader_port)),
            (alt_name.clone(), u64::from(alt), json!(alt)),
        ]
    );
    let slice = eventually(WAIT, "EndpointSlice infra/edge-sluice-ipv4", || {
        cluster.get("EndpointSlice", ns, "edge-sluice-ipv4")
    });
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["endpoints"],
        json!([{"addresses": ["198.18.0.200"],
                "conditions": {"ready": true, "serving": true, "terminating": false}}])
    );
    assert_eq!(
        ports(&slice),
        [
            ("tcp-80".to_owned(), leader_port, Value::Null),
            (alt_name.clone(), u64::from(alt), Value::Null),
        ]
    );
    let slice_labels = &slice["metadata"]["labels"];
    assert_eq!(slice_labels["kubernetes.io/service-name"], "edge-sluice");
    assert_eq!(
        slice_labels["endpointslice.kubernetes.io/managed-by"],
        "gateway-controller.sluice.dev"
    );
    assert_eq!(slice_labels["team"], "web");
    let generated = eventually(WAIT, "the Gateway's GeneratedService condition", || {
        let gateway = cluster.get("Gateway", ns, "edge")?;
        let found = condition(&gateway, CONDITION).clone();
        (found["status"] == "True").then_some(found)
    });
    assert_eq!(generated["reason"], "Generated");
    assert_eq!(generated["observedGeneration"], 1);
    assert!(
        (generated["message"].as_str().unwrap()).contains("Service edge-sluice"),
        "{generated:#}"
    );

    // Someone else labels the Service; the Gateway's labels change (one removed, one added)
    // and its annotation: the generated objects follow, the other label stays.
    cluster.merge_patch(
        "Service",
        ns,
        "edge-sluice",
        &json!({"metadata": {"labels": {"owner": "ops"}}}),
    );
    edge["spec"]["infrastructure"] = json!({
        "labels": {"key2": "value2", "tier": "edge"},
        "annotations": {"key1": "changed"},
    });
    cluster.replace(&edge);
    let service = eventually(WAIT, "the Service's labels following the Gateway's", || {
        let service = cluster.get("Service", ns, "edge-sluice")?;
        let labels = &service["metadata"]["labels"];
        (labels["tier"] == "edge" && labels["team"].is_null()).then_some(service)
    });
    assert_eq!(service["metadata"]["labels"]["owner"], "ops", "{service:#}");
    assert_eq!(service["metadata"]["labels"]["key2"], "value2");
    assert_eq!(service["metadata"]["annotations"]["key1"], "changed");
    let slice = eventually(WAIT, "the slice's labels following the Gateway's", || {
        let slice = cluster.get("EndpointSlice", ns, "edge-sluice-ipv4")?;
        let labels = &slice["metadata"]["labels"];
        (labels["tier"] == "edge" && labels["team"].is_null()).then_some(slice)
    });
    // The follower compiled the same change and wrote nothing: the ports are the leader's, and
    // only the leader's log has writes (each is logged at info).
    assert_eq!(ports(&service)[0].2, json!(leader_port), "{service:#}");
    assert_eq!(ports(&slice)[0].1, leader_port, "{slice:#}");
    let writes = |replica: &KubeSluice| {
        let log = replica.log_text();
        (log.lines())
            .filter(|l| l.contains("generated Service") || l.contains("generated EndpointSlice"))
            .count()
    };
    assert!(
        writes(&leader) >= 4,
        "created and updated:\n{}",
        leader.log_text()
    );
    assert_eq!(writes(&follower), 0, "{}", follower.log_text());
    eventually(WAIT, "the condition at generation 2", || {
        let gateway = cluster.get("Gateway", ns, "edge")?;
        (condition(&gateway, CONDITION)["observedGeneration"] == 2).then_some(())
    });

    // The leader stops: the follower takes over and, in its new term, finds the objects
    // pointing at the old leader's port and applies its own.
    leader.process.signal("TERM");
    assert_eq!(
        leader.process.wait_exit(WAIT),
        0,
        "the leader exits cleanly"
    );
    eventually(
        Duration::from_secs(15),
        "the follower holds the Lease",
        || (lease_holder(&cluster)? == follower.identity).then_some(()),
    );
    let follower_port = u64::from(follower.http.port());
    eventually(WAIT, "the new leader's port in the slice", || {
        let slice = cluster.get("EndpointSlice", ns, "edge-sluice-ipv4")?;
        (ports(&slice)[0].1 == follower_port).then_some(())
    });
    let service = cluster.get("Service", ns, "edge-sluice").unwrap();
    assert_eq!(ports(&service)[0].2, json!(follower_port));
    assert_eq!(service["metadata"]["labels"]["owner"], "ops");

    // A Service Sluice did not make under a Gateway's name: left as it is, no slice joins it,
    // and the Gateway says so.
    cluster.create(&crate::support::kube::service(ns, "taken-sluice"));
    let mut taken = gateway(ns);
    taken["metadata"]["name"] = json!("taken");
    cluster.create(&taken);
    let in_use = eventually(WAIT, "Gateway taken's NameInUse", || {
        let gateway = cluster.get("Gateway", ns, "taken")?;
        let found = condition(&gateway, CONDITION).clone();
        (found["reason"] == "NameInUse").then_some(found)
    });
    assert_eq!(in_use["status"], "False");
    assert!(
        (in_use["message"].as_str().unwrap()).contains("Service infra/taken-sluice exists"),
        "{in_use:#}"
    );
    let theirs = cluster.get("Service", ns, "taken-sluice").unwrap();
    assert!(theirs["metadata"]["labels"].is_null(), "{theirs:#}");
    assert!(
        theirs["metadata"]["ownerReferences"].is_null(),
        "{theirs:#}"
    );
    assert!(cluster
        .get("EndpointSlice", ns, "taken-sluice-ipv4")
        .is_none());

    // Gateway edge leaves Sluice's class: its Service and slice go.
    let mut other = gateway_class();
    other["metadata"]["name"] = json!("other");
    other["spec"]["controllerName"] = json!("example.com/other");
    cluster.create(&other);
    cluster.merge_patch(
        "Gateway",
        ns,
        "edge",
        &json!({"spec": {"gatewayClassName": "other"}}),
    );
    eventually(WAIT, "Service and EndpointSlice of edge deleted", || {
        let gone = cluster.get("Service", ns, "edge-sluice").is_none()
            && cluster
                .get("EndpointSlice", ns, "edge-sluice-ipv4")
                .is_none();
        gone.then_some(())
    });
    // Never the one it did not make.
    assert!(cluster.get("Service", ns, "taken-sluice").is_some());

    leader.assert_nothing_forbidden();
    follower.assert_nothing_forbidden();
}

/// GEP-5093 on the experimental channel's CRDs: each `spec.addresses` entry finds its own
/// address (the sentinel scope a published one, `Cluster` the generated Service's ClusterIP),
/// `status.addresses` reports each with its routability, `AddressesAssigned` says how it went,
/// and a scope Sluice does not provide leaves the Gateway unprogrammed, saying why.
#[test]
fn each_address_asked_for_is_reported_with_its_routability() {
    let ns = "scopes";
    let cluster = Cluster::start("gateway-routability");
    cluster.install_gateway_crds_of("experimental");
    cluster.create(&namespace(ns));
    cluster.create(&gateway_class());
    let mut edge = gateway(ns);
    edge["spec"]["addresses"] = json!([
        {"type": "IPAddress", "routability": "testing.x-k8s.io/sentinel"},
        {"type": "IPAddress", "routability": "Cluster"},
    ]);
    cluster.create(&edge);
    let _sluice = cluster.sluice(ns, &["--publish-status-address", "198.18.0.200"]);

    let service = eventually(WAIT, "Service scopes/edge-sluice", || {
        cluster.get("Service", ns, "edge-sluice")
    });
    let cluster_ip = service["spec"]["clusterIP"].as_str().unwrap().to_owned();
    assert!(
        cluster_ip.parse::<std::net::IpAddr>().is_ok(),
        "{service:#}"
    );
    let assigned = |gateway: &Value| condition(gateway, "AddressesAssigned").clone();
    let gateway = eventually(WAIT, "AddressesAssigned", || {
        let gateway = cluster.get("Gateway", ns, "edge")?;
        (assigned(&gateway)["status"] == "True").then_some(gateway)
    });
    assert_eq!(
        gateway["status"]["addresses"],
        json!([
            {"type": "IPAddress", "value": "198.18.0.200", "routability": "testing.x-k8s.io/sentinel"},
            {"type": "IPAddress", "value": cluster_ip, "routability": "Cluster"},
        ]),
        "{gateway:#}"
    );
    assert_eq!(assigned(&gateway)["reason"], "Assigned");
    assert_eq!(condition(&gateway, "Programmed")["status"], "True");
    assert_eq!(assigned(&gateway)["observedGeneration"], 1);

    // A ClusterIP asked for by value that is not the Service's, beside the sentinel: part.
    cluster.merge_patch(
        "Gateway",
        ns,
        "edge",
        &json!({"spec": {"addresses": [
            {"type": "IPAddress", "routability": "testing.x-k8s.io/sentinel"},
            {"type": "IPAddress", "routability": "Cluster", "value": "10.0.0.250"},
        ]}}),
    );
    let gateway = eventually(WAIT, "PartiallyAssigned", || {
        let gateway = cluster.get("Gateway", ns, "edge")?;
        (assigned(&gateway)["reason"] == "PartiallyAssigned").then_some(gateway)
    });
    let message = assigned(&gateway)["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("spec.addresses[1] 10.0.0.250: the generated Service's ClusterIPs are"),
        "{message}"
    );
    assert_eq!(
        gateway["status"]["addresses"],
        json!([{"type": "IPAddress", "value": "198.18.0.200", "routability": "testing.x-k8s.io/sentinel"}])
    );
    assert_eq!(assigned(&gateway)["observedGeneration"], 2);

    // A scope Sluice does not provide: no address, not programmed, and why.
    cluster.merge_patch(
        "Gateway",
        ns,
        "edge",
        &json!({"spec": {"addresses": [{"type": "IPAddress", "routability": "example.com/internet"}]}}),
    );
    let gateway = eventually(WAIT, "NotAssigned", || {
        let gateway = cluster.get("Gateway", ns, "edge")?;
        (assigned(&gateway)["reason"] == "NotAssigned").then_some(gateway)
    });
    let programmed = condition(&gateway, "Programmed");
    assert_eq!(
        (&programmed["status"], &programmed["reason"]),
        (&json!("False"), &json!("AddressNotAssigned")),
        "{gateway:#}"
    );
    assert!(
        programmed["message"]
            .as_str()
            .unwrap()
            .contains("routability \"example.com/internet\""),
        "{programmed:#}"
    );
    assert_eq!(gateway["status"]["addresses"], json!([]), "{gateway:#}");
}
