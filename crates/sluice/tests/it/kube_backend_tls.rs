//! BackendTLSPolicy in `sluice serve --kubernetes`, as ServiceAccount sluice/sluice with the
//! deploy manifests' RBAC: the policy and the ConfigMap it names are watched, a route to its
//! Service port speaks TLS, and the leader writes `status.ancestors` (the spec's reasons,
//! observedGeneration, the older policy winning) while another controller's entry stays. A
//! policy naming a ClusterTrustBundle verifies a TLS pod with it, and a replaced or deleted
//! bundle reaches the data plane and the status without a restart.

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

/// A TLS-only "pod" at `addr` presenting `leaf`: answers every request 200 `tls pod` and closes
/// the connection. Runs on a thread of its own (spawned from the test thread, so in the test's
/// network namespace) until dropped.
struct TlsPod {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TlsPod {
    fn start(addr: std::net::SocketAddr, leaf: &testkit::tls::Leaf) -> TlsPod {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let acceptor = leaf.acceptor();
        let listener = std::net::TcpListener::bind(addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let serve = async {
                    loop {
                        let Ok((tcp, _)) = listener.accept().await else {
                            continue;
                        };
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            // A client that does not trust the certificate ends here.
                            let Ok(mut tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let mut head = Vec::new();
                            let mut buffer = [0u8; 4096];
                            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                                match tls.read(&mut buffer).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => head.extend_from_slice(&buffer[..n]),
                                }
                            }
                            let answer = "HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\ntls pod";
                            let _ = tls.write_all(answer.as_bytes()).await;
                            let _ = tls.shutdown().await;
                        });
                    }
                };
                tokio::select! {
                    _ = serve => {}
                    _ = stopped => {}
                }
            });
        });
        TlsPod {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for TlsPod {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Policy `web`'s (Accepted, ResolvedRefs) as (status, reason), read back from the API
/// server once written for its current generation.
fn conditions_now(cluster: &Cluster, ns: &str) -> Option<[(String, String); 2]> {
    let (entry, _) = ours(cluster, ns, "web")?;
    Some([said(&entry, "Accepted"), said(&entry, "ResolvedRefs")])
}

#[test]
fn a_cluster_trust_bundle_verifies_the_backend_and_its_replacement_reaches_the_data_plane() {
    let ns = "ctb";
    let cluster = Cluster::start("trust-bundle");
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    let (signer, stranger) = (testkit::tls::TestCa::new(), testkit::tls::TestCa::new());
    let ip = cluster.add_address(21);
    let _pod = TlsPod::start(
        std::net::SocketAddr::new(ip, 8080),
        &signer.leaf(&["web.internal"]),
    );
    cluster.create_service(ns, "web", 8080, &[ip]);
    cluster.create(&gateway_class());
    cluster.create(&gateway(ns));
    cluster.create(&http_route(ns, "web", "web.test", "web"));
    let bundle = |ca: &testkit::tls::TestCa| {
        json!({
            "apiVersion": "certificates.k8s.io/v1beta1", "kind": "ClusterTrustBundle",
            "metadata": {"name": "backends"},
            "spec": {"trustBundle": ca.root_pem()},
        })
    };
    cluster.create(&bundle(&signer));
    let mut policy = policy(ns, "web", "unused", "web.internal");
    policy["spec"]["validation"]["caCertificateRefs"] = json!([
        {"group": "certificates.k8s.io", "kind": "ClusterTrustBundle", "name": "backends"}
    ]);
    cluster.create(&policy);
    // As deployed: the manifests' RBAC lets ServiceAccount sluice/sluice watch the bundles.
    let sluice = cluster.sluice_as_deployed("sluice-ctb", &[]);

    // The bundle's CA signed the pod's certificate: verified, served.
    sluice.wait_status("web.test", 200, WAIT);
    assert_eq!(sluice.get("web.test", "/").text(), "tls pod");
    let accepted = [
        ("True".to_owned(), "Accepted".to_owned()),
        ("True".to_owned(), "ResolvedRefs".to_owned()),
    ];
    eventually(WAIT, "the policy accepted", || {
        (conditions_now(&cluster, ns)? == accepted).then_some(())
    });

    // The bundle replaced by one of a CA that did not sign the pod: the handshake fails, as
    // with a wrong ConfigMap CA (502), with no restart; the policy is still valid.
    cluster.replace(&bundle(&stranger));
    sluice.wait_status("web.test", 502, WAIT);
    assert_eq!(conditions_now(&cluster, ns).unwrap(), accepted);

    // Deleted: the reference resolves to nothing, the share answers 500, and the status says
    // why (the spec's reasons), as for a missing ConfigMap.
    cluster.delete("ClusterTrustBundle", "", "backends");
    sluice.wait_status("web.test", 500, WAIT);
    let refused = [
        ("False".to_owned(), "NoValidCACertificate".to_owned()),
        ("False".to_owned(), "InvalidCACertificateRef".to_owned()),
    ];
    eventually(WAIT, "the policy refused", || {
        (conditions_now(&cluster, ns)? == refused).then_some(())
    });
    let (entry, _) = ours(&cluster, ns, "web").unwrap();
    let resolved = (entry["conditions"].as_array().unwrap().iter())
        .find(|c| c["type"] == "ResolvedRefs")
        .unwrap();
    assert_eq!(
        resolved["message"],
        "spec.validation.caCertificateRefs[0]: ClusterTrustBundle backends not found"
    );

    // Created again with the signer: served again.
    cluster.create(&bundle(&signer));
    sluice.wait_status("web.test", 200, WAIT);
}

#[test]
fn without_the_cluster_trust_bundle_api_sluice_is_ready_and_a_reference_says_why() {
    let ns = "noctb";
    // Kubernetes 1.35's default: the API server does not serve ClusterTrustBundle (404).
    let cluster = Cluster::start_with("no-trust-bundles", &[("CLUSTER_TRUST_BUNDLES", "0")]);
    cluster.install_gateway_crds();
    cluster.create(&namespace(ns));
    let a = pod(&cluster, 11);
    backend(&cluster, ns, "web", &a);
    backend(&cluster, ns, "other", &a);
    cluster.create(&gateway_class());
    cluster.create(&gateway(ns));
    cluster.create(&http_route(ns, "web", "web.test", "web"));
    cluster.create(&http_route(ns, "other", "other.test", "other"));
    let mut policy = policy(ns, "web", "unused", "web.internal");
    policy["spec"]["validation"]["caCertificateRefs"] = json!([
        {"group": "certificates.k8s.io", "kind": "ClusterTrustBundle", "name": "backends"}
    ]);
    cluster.create(&policy);
    // Ready (the 404 counts as an empty list), the other route served.
    let sluice = cluster.sluice_as_deployed("sluice-noctb", &[]);
    assert_eq!(sluice.get("other.test", "/").status, 200);
    sluice.wait_status("web.test", 500, WAIT);
    let (entry, _) = eventually(WAIT, "web's status", || ours(&cluster, ns, "web"));
    assert_eq!(
        said(&entry, "ResolvedRefs"),
        ("False".into(), "InvalidCACertificateRef".into())
    );
    let resolved = (entry["conditions"].as_array().unwrap().iter())
        .find(|c| c["type"] == "ResolvedRefs")
        .unwrap();
    let message = resolved["message"].as_str().unwrap();
    assert!(
        message
            .contains("ClusterTrustBundle backends: the cluster does not serve ClusterTrustBundle")
            && message.contains("--feature-gates=ClusterTrustBundle=true"),
        "{message}"
    );
    // Said once, not at every retry (the watch asks again every few seconds).
    std::thread::sleep(Duration::from_secs(10));
    let log = sluice.log_text();
    let said_404 = log
        .lines()
        .filter(|l| l.contains("clustertrustbundles is not installed in this cluster (404)"))
        .count();
    assert_eq!(said_404, 1, "{log}");
    assert!(!log.contains("watching the Kubernetes API failed"), "{log}");
}
