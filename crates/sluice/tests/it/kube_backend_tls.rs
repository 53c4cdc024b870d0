//! BackendTLSPolicy in `sluice serve --kubernetes`, as ServiceAccount sluice/sluice with the
//! deploy manifests' RBAC: the policy and the ConfigMap it names are watched, a route to its
//! Service port speaks TLS, and the leader writes `status.ancestors` (the spec's reasons,
//! observedGeneration, the older policy winning) while another controller's entry stays.

use std::time::Duration;

use serde_json::{json, Value};

use crate::kube_gateway::{backend, gateway, gateway_class, http_route, pod};
use crate::support::kube::*;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);
const CONTROLLER: &str = "sluice.dev/gateway-controller";

fn policy(ns: &str, name: &str, config_map: &str, hostname: &str) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": config_map}],
                "hostname": hostname,
            },
        },
    })
}

/// Sluice's `status.ancestors` entry of policy `name` for Gateway `edge`, once written with
/// conditions of the policy's current generation.
fn ours(cluster: &Cluster, ns: &str, name: &str) -> Option<(Value, Value)> {
    let policy = cluster.get("BackendTLSPolicy", ns, name)?;
    let generation = policy["metadata"]["generation"].clone();
    let entry = (policy["status"]["ancestors"].as_array()?.iter())
        .find(|a| a["controllerName"] == CONTROLLER && a["ancestorRef"]["name"] == "edge")?
        .clone();
    let current =
        (entry["conditions"].as_array()?.iter()).all(|c| c["observedGeneration"] == generation);
    current.then_some((entry, policy))
}

fn said(entry: &Value, type_: &str) -> (String, String) {
    let c = (entry["conditions"].as_array().unwrap().iter())
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {entry:#}"));
    (
        c["status"].as_str().unwrap().to_owned(),
        c["reason"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn policies_are_watched_applied_and_given_ancestor_status_by_the_leader() {
    let ns = "btls";
    let cluster = Cluster::start("backend-tls");
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    let a = pod(&cluster, 11);
    backend(&cluster, ns, "web", &a);
    cluster.create(&gateway_class());
    cluster.create(&gateway(ns));
    cluster.create(&http_route(ns, "web", "web.test", "web"));
    let sluice = cluster.sluice_as_deployed("sluice-btls", &[]);
    assert_eq!(sluice.get("web.test", "/").status, 200);

    // A policy whose ConfigMap does not exist yet: refused, and the share answers 500.
    cluster.create(&policy(ns, "a-first", "ca", "web.internal"));
    let (entry, _) = eventually(WAIT, "a-first's status", || ours(&cluster, ns, "a-first"));
    assert_eq!(
        said(&entry, "Accepted"),
        ("False".into(), "NoValidCACertificate".into())
    );
    assert_eq!(
        said(&entry, "ResolvedRefs"),
        ("False".into(), "InvalidCACertificateRef".into())
    );
    sluice.wait_status("web.test", 500, WAIT);
    // The ConfigMap, created: the policy is accepted and the route speaks TLS, which the
    // plain HTTP pod cannot answer (502).
    let ca = testkit::tls::TestCa::new();
    cluster.create(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ca", "namespace": ns},
        "data": {"ca.crt": ca.root_pem()},
    }));
    eventually(WAIT, "a-first accepted", || {
        let (entry, _) = ours(&cluster, ns, "a-first")?;
        (said(&entry, "Accepted").0 == "True").then_some(())
    });
    sluice.wait_status("web.test", 502, WAIT);

    // A second policy for the same Service: the first (older, then by name) keeps it.
    cluster.create(&policy(ns, "b-second", "ca", "other.internal"));
    let (entry, _) = eventually(WAIT, "b-second's status", || ours(&cluster, ns, "b-second"));
    assert_eq!(
        said(&entry, "Accepted"),
        ("False".into(), "Conflicted".into())
    );

    // Another controller's ancestor entry stays through Sluice's next write.
    let (entry, _) = ours(&cluster, ns, "a-first").unwrap();
    let foreign = json!({
        "ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                        "namespace": ns, "name": "unmanaged"},
        "controllerName": "example.com/other",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                        "message": "", "observedGeneration": 1,
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    });
    let patch = json!({"status": {"ancestors": [entry, foreign]}});
    cluster.kubectl(&[
        "patch",
        "backendtlspolicy",
        "a-first",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]);
    cluster.merge_patch(
        "BackendTLSPolicy",
        ns,
        "a-first",
        &json!({"spec": {"validation": {"hostname": "web2.internal"}}}),
    );
    let (entry, policy) = eventually(WAIT, "a-first at generation 2", || {
        ours(&cluster, ns, "a-first")
    });
    assert_eq!(policy["metadata"]["generation"], 2);
    assert_eq!(said(&entry, "Accepted").0, "True");
    let ancestors = policy["status"]["ancestors"].as_array().unwrap();
    assert!(ancestors.contains(&foreign), "{ancestors:#?}");
}
