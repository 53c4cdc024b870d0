//! `sluice serve --kubernetes` end to end against a real kube-apiserver + etcd, each test in a
//! network namespace of its own (see support/kube.rs): real objects in, real traffic out.

use std::time::Duration;

use crate::support::kube::*;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn the_fixture_runs_a_private_api_server_and_backends_on_test_addresses() {
    let cluster = Cluster::start("fixture");
    let apiserver_pid: u32 = std::fs::read_to_string(cluster.dir.join("apiserver.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let ns = "fixture";
    cluster.create(&namespace(ns));

    // A pod on a test address of this namespace answers directly.
    let ip = cluster.add_address(11);
    let pod = Pod::start_at("pod-a", &socket(ip, 8080));
    let response = get(pod.addr, "pod-a", "/").expect("GET the pod directly");
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(
        response.text().contains("Server name: pod-a"),
        "{}",
        response.text()
    );

    // The objects a cluster would make for it are accepted and read back.
    cluster.create_service(ns, "web", 8080, &[ip]);
    let slice = cluster
        .get("EndpointSlice", ns, "web-1")
        .expect("the slice");
    assert_eq!(slice["endpoints"][0]["addresses"][0], ip.to_string());

    // ...but not one pointing at loopback, which is why pods live on 198.18.0.0/15.
    let loopback = endpoint_slice(
        ns,
        "web-2",
        "web",
        8080,
        &[Endpoint::ready("127.0.0.1".parse().unwrap())],
    );
    let refused = cluster
        .try_create(&loopback)
        .expect_err("an EndpointSlice at 127.0.0.1 is refused");
    assert!(refused.contains("loopback"), "{refused}");

    // kubectl with the admin kubeconfig sees the same API.
    let names = cluster.kubectl(&["get", "endpointslices", "-n", ns, "-o", "name"]);
    assert_eq!(names.trim(), "endpointslice.discovery.k8s.io/web-1");

    // Dropping the cluster stops the API server.
    drop(pod);
    drop(cluster);
    let stat = std::fs::read_to_string(format!("/proc/{apiserver_pid}/stat"));
    assert!(
        stat.is_err() || stat.unwrap().contains(") Z "),
        "kube-apiserver (pid {apiserver_pid}) outlived its cluster"
    );
}

/// A cluster with namespace `ns` and IngressClass `sluice` (our controller).
pub(crate) fn cluster_with_class(test: &str, ns: &str) -> Cluster {
    let cluster = Cluster::start(test);
    cluster.create(&namespace(ns));
    cluster.create(&ingress_class("sluice", CONTROLLER));
    cluster
}

/// A backend "pod" on `198.18.0.n:8080`, named `pod-n`.
pub(crate) fn pod(cluster: &Cluster, n: u8) -> Pod {
    let ip = cluster.add_address(n);
    Pod::start_at(&format!("pod-{n}"), &socket(ip, 8080))
}

fn ips(pods: &[&Pod]) -> Vec<std::net::IpAddr> {
    pods.iter().map(|p| p.addr.ip()).collect()
}

#[test]
fn routes_come_from_api_objects_and_follow_their_changes() {
    let ns = "routing";
    let cluster = cluster_with_class("routing", ns);
    let (a, b) = (pod(&cluster, 11), pod(&cluster, 12));
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&a]));
    let sluice = cluster.sluice(ns, &[]);

    // Objects that existed before Sluice started are served as soon as it is ready.
    let first = sluice.get("web.test", "/");
    assert_eq!(first.status, 200, "{}", first.text());
    assert!(
        first.text().contains("Server name: pod-11"),
        "{}",
        first.text()
    );
    assert_eq!(sluice.get("nowhere.test", "/").status, 404);

    // An Ingress (and its Service and slice) created while Sluice runs.
    cluster.create_app(ns, "late", "late.test", 8080, &ips(&[&b]));
    sluice.wait_served_by("late.test", "pod-12", WAIT);

    // Deleted: 404.
    cluster.delete("Ingress", ns, "late");
    sluice.wait_status("late.test", 404, WAIT);

    // An Ingress whose Service does not exist: its path answers 503, the others keep serving,
    // and the leader says why in a Warning Event on that Ingress.
    cluster.create(&ingress(
        ns,
        "ghost",
        Some("sluice"),
        "ghost.test",
        "missing",
    ));
    sluice.wait_status("ghost.test", 503, WAIT);
    assert_eq!(sluice.get("web.test", "/").status, 200);
    let event = eventually(WAIT, "a Warning Event on Ingress ghost", || {
        cluster
            .events_about(ns, "Ingress", "ghost")
            .into_iter()
            .find(|e| e["type"] == "Warning")
    });
    assert_eq!(event["reportingController"], CONTROLLER, "{event:#}");
    assert!(
        event["note"].as_str().unwrap_or("").contains("missing"),
        "the note names the missing Service: {event:#}"
    );
    assert!(
        cluster.events_about(ns, "Ingress", "web").is_empty(),
        "no Event about the healthy Ingress"
    );
}

#[test]
fn endpoint_addresses_of_the_node_itself_are_not_used_unless_allowed() {
    let ns = "nodelocal";
    let cluster = cluster_with_class("nodelocal", ns);
    let pod = pod(&cluster, 11);
    // What such an address would reach: a service of the "node" (here: this namespace's
    // loopback), e.g. a kubelet, a database bound to localhost, or the metadata service.
    let node_service = Pod::start_at("node-local", "127.0.0.1:8080");

    // The API server refuses these addresses in new slices...
    for address in ["127.0.0.1", "169.254.169.254", "0.0.0.0"] {
        let slice = endpoint_slice(
            ns,
            "probe",
            "web",
            8080,
            &[Endpoint::ready(address.parse().unwrap())],
        );
        assert!(
            cluster.try_create(&slice).is_err(),
            "the API server accepted an EndpointSlice at {address}"
        );
    }

    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&pod]));
    let sluice = cluster.sluice(ns, &[]);
    sluice.wait_served_by("web.test", "pod-11", WAIT);

    // ...but one stored without validation (before the API server checked, or by anything
    // with etcd access) reaches the watchers all the same. It arrives on the endpoint fast path.
    let mut node_local = endpoint_slice(
        ns,
        "web-2",
        "web",
        8080,
        &[Endpoint::ready("127.0.0.1".parse().unwrap())],
    );
    node_local["endpoints"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"addresses": ["169.254.169.254"]}));
    node_local["metadata"]["uid"] = serde_json::json!("6d1c5e2a-0000-4000-8000-000000000002");
    node_local["metadata"]["creationTimestamp"] = serde_json::json!("2026-01-01T00:00:00Z");
    cluster.put_bypassing_validation("endpointslices", "EndpointSlice", &node_local);

    let backend = format!("{ns}/web:http");
    let refused = eventually(WAIT, "the node-local addresses listed as refused", || {
        let config = sluice.config_json();
        let refused = config["config"]["backends"][&backend]["refused"].clone();
        (refused.as_array().map(Vec::len) == Some(2)).then_some(refused)
    });
    assert_eq!(refused[0]["address"], "127.0.0.1:8080", "{refused:#}");
    assert_eq!(refused[1]["address"], "169.254.169.254:8080", "{refused:#}");
    assert_eq!(
        refused[0]["source"],
        format!("EndpointSlice {ns}/web-2"),
        "{refused:#}"
    );
    let config = sluice.config_json();
    assert_eq!(
        config["config"]["backends"][&backend]["ready"],
        serde_json::json!(["198.18.0.11:8080"]),
        "{config:#}"
    );
    for _ in 0..10 {
        let response = sluice.get("web.test", "/");
        assert!(
            response.text().contains("Server name: pod-11"),
            "only the Pod answers: {}",
            response.text()
        );
    }
    let metrics = sluice.admin("/metrics").text();
    let line = format!("sluice_backend_endpoints{{backend=\"{backend}\",state=\"refused\"}} 2");
    assert!(metrics.contains(&line), "{metrics}");
    let event = eventually(WAIT, "a Warning Event on Ingress web", || {
        cluster
            .events_about(ns, "Ingress", "web")
            .into_iter()
            .find(|e| e["note"].as_str().unwrap_or("").contains("127.0.0.1:8080"))
    });
    assert_eq!(event["type"], "Warning", "{event:#}");
    assert!(
        event["note"]
            .as_str()
            .unwrap()
            .contains("--allow-loopback-endpoints"),
        "{event:#}"
    );
    assert!(sluice.log_text().contains("169.254.169.254:8080"));

    // A full compile (any configuration change) applies the same policy as the fast path.
    cluster.create(&ingress(ns, "other", Some("sluice"), "other.test", "web"));
    sluice.wait_served_by("other.test", "pod-11", WAIT);
    let config = sluice.config_json();
    assert_eq!(
        config["config"]["backends"][&backend]["refused"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{config:#}"
    );

    // Allowed: the same slices send traffic to the node's own service too.
    drop(sluice);
    let allowing = cluster.sluice_with(SluiceOptions {
        identity: "sluice-1",
        namespace: ns,
        kubeconfig: None,
        extra: &["--allow-loopback-endpoints"],
        wait_ready: true,
        log: None,
        env: &[],
    });
    allowing.wait_served_by("web.test", "node-local", WAIT);
    drop(node_service);
}

#[test]
fn watch_namespace_limits_sluice_to_one_namespace() {
    let cluster = cluster_with_class("watchns", "watched");
    cluster.create(&namespace("elsewhere"));
    let p = pod(&cluster, 11);
    cluster.create_app("watched", "web", "web.test", 8080, &ips(&[&p]));
    cluster.create_app("elsewhere", "web", "elsewhere.test", 8080, &ips(&[&p]));
    let sluice = cluster.sluice("watched", &["--watch-namespace", "watched"]);

    assert_eq!(sluice.get("web.test", "/").status, 200);
    assert_eq!(
        sluice.get("elsewhere.test", "/").status,
        404,
        "an Ingress outside --watch-namespace is not ours"
    );
    // Created later in the other namespace first, then in ours: once ours is served, the other's
    // event would have arrived too, had it been watched.
    cluster.create_app(
        "elsewhere",
        "late",
        "late-elsewhere.test",
        8080,
        &ips(&[&p]),
    );
    cluster.create_app("watched", "late", "late.test", 8080, &ips(&[&p]));
    sluice.wait_status("late.test", 200, WAIT);
    assert_eq!(sluice.get("late-elsewhere.test", "/").status, 404);
}

#[test]
fn only_ingresses_of_our_class_are_served() {
    let ns = "classes";
    let cluster = cluster_with_class("classes", ns);
    cluster.create(&ingress_class("other", "example.com/other-controller"));
    let p = pod(&cluster, 11);
    cluster.create_service(ns, "web", 8080, &[p.addr.ip()]);
    cluster.create(&ingress(ns, "ours", Some("sluice"), "ours.test", "web"));
    cluster.create(&ingress(ns, "theirs", Some("other"), "theirs.test", "web"));
    let mut legacy = ingress(ns, "legacy", None, "legacy.test", "web");
    legacy["metadata"]["annotations"] =
        serde_json::json!({"kubernetes.io/ingress.class": "sluice"});
    cluster.create(&legacy);
    let mut legacy_other = ingress(ns, "legacy-other", None, "legacy-other.test", "web");
    legacy_other["metadata"]["annotations"] =
        serde_json::json!({"kubernetes.io/ingress.class": "other"});
    cluster.create(&legacy_other);
    cluster.create(&ingress(ns, "classless", None, "classless.test", "web"));
    let sluice = cluster.sluice(ns, &[]);

    // Ready means synced, so each answer below is the final one for these objects.
    let status = |host: &str| sluice.get(host, "/").status;
    assert_eq!(status("ours.test"), 200, "spec.ingressClassName: sluice");
    assert_eq!(
        status("legacy.test"),
        200,
        "kubernetes.io/ingress.class: sluice"
    );
    assert_eq!(status("theirs.test"), 404, "another controller's class");
    assert_eq!(status("legacy-other.test"), 404, "another legacy class");
    assert_eq!(
        status("classless.test"),
        404,
        "no class while ours is not the default"
    );

    // Our IngressClass becomes the default: the class-less Ingress is ours now.
    let mut default_class = ingress_class("sluice", CONTROLLER);
    default_class["metadata"]["annotations"] =
        serde_json::json!({"ingressclass.kubernetes.io/is-default-class": "true"});
    cluster.apply(&default_class);
    sluice.wait_status("classless.test", 200, WAIT);
    assert_eq!(
        status("theirs.test"),
        404,
        "a class name still wins over the default"
    );
}

#[test]
fn ready_waits_for_the_initial_sync_and_then_every_existing_route_is_served() {
    let ns = "ready";
    let cluster = cluster_with_class("ready", ns);
    let p = pod(&cluster, 11);
    cluster.create_service(ns, "web", 8080, &[p.addr.ip()]);
    let hosts: Vec<String> = (0..20).map(|i| format!("app-{i}.test")).collect();
    for (i, host) in hosts.iter().enumerate() {
        cluster.create(&ingress(
            ns,
            &format!("app-{i}"),
            Some("sluice"),
            host,
            "web",
        ));
    }

    // Started while the API server is down, Sluice cannot list anything: alive, not ready.
    cluster.stop_apiserver();
    let sluice = cluster.sluice_with(SluiceOptions {
        identity: "sluice-0",
        namespace: ns,
        kubeconfig: None,
        extra: &[],
        wait_ready: false,
        log: None,
        env: &[],
    });
    for _ in 0..10 {
        assert_eq!(sluice.admin("/healthz").status, 200);
        assert_eq!(
            sluice.ready_status(),
            Some(503),
            "/ready before the initial list"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!sluice.has_exited(), "Sluice waits for the API server");

    cluster.start_apiserver();
    sluice.wait_ready(Duration::from_secs(60));
    // The first request to each host after /ready is already routed.
    for host in &hosts {
        let response = sluice.get(host, "/");
        assert_eq!(
            response.status,
            200,
            "{host} right after /ready: {}",
            response.text()
        );
    }
}

/// Service `web` with pod `p` as its endpoint, Secret `web-tls`, and Ingress `web` serving
/// `host` over TLS with it.
fn create_tls_app(cluster: &Cluster, ns: &str, host: &str, p: &Pod, cert: &str, key: &str) {
    cluster.create_service(ns, "web", 8080, &[p.addr.ip()]);
    cluster.create(&tls_secret(ns, "web-tls", cert, key));
    let mut web = ingress(ns, "web", Some("sluice"), host, "web");
    web["spec"]["tls"] = serde_json::json!([{"hosts": [host], "secretName": "web-tls"}]);
    cluster.create(&web);
}

#[test]
fn a_replaced_tls_secret_serves_new_handshakes_and_open_connections_keep_working() {
    let ns = "tls";
    let host = "secure.test";
    let cluster = cluster_with_class("tls", ns);
    let p = pod(&cluster, 11);
    let Leaf {
        cert_pem: old_cert,
        key_pem: old_key,
        ..
    } = self_signed(&[host]);
    let Leaf {
        cert_pem: new_cert,
        key_pem: new_key,
        ..
    } = self_signed(&[host]);
    create_tls_app(&cluster, ns, host, &p, &old_cert, &old_key);
    let sluice = cluster.sluice(ns, &[]);

    let mut open = TlsConnection::open(sluice.https, host, tls_client(old_cert.as_bytes()))
        .expect("the Secret's certificate is served");
    assert_eq!(open.peer_certificate(), pem_to_der(&old_cert));
    assert_eq!(open.get("/").unwrap().status, 200);

    cluster.replace(&tls_secret(ns, "web-tls", &new_cert, &new_key));
    // Each check builds a new client: one with a cached session would resume without being
    // shown a certificate.
    let rotated = eventually(WAIT, "new handshakes get the new certificate", || {
        TlsConnection::open(sluice.https, host, tls_client(new_cert.as_bytes())).ok()
    });
    assert_eq!(rotated.peer_certificate(), pem_to_der(&new_cert));
    assert!(
        TlsConnection::open(sluice.https, host, tls_client(old_cert.as_bytes())).is_err(),
        "the old certificate is no longer served"
    );
    // The connection opened before the rotation still serves, with the old certificate.
    for _ in 0..3 {
        let response = open
            .get("/1kb.bin")
            .expect("the open connection still works");
        assert_eq!(response.status, 200);
        assert_eq!(response.body.len(), 1024);
    }
    assert_eq!(open.peer_certificate(), pem_to_der(&old_cert));
}

/// An EndpointSlice `web-1` of Service `web` with every pod ready.
fn web_slice(ns: &str, pods: &[Pod]) -> serde_json::Value {
    let endpoints: Vec<Endpoint> = pods.iter().map(|p| Endpoint::ready(p.addr.ip())).collect();
    endpoint_slice(ns, "web-1", "web", 8080, &endpoints)
}

#[test]
fn endpoint_slice_churn_under_load_fails_no_request() {
    let ns = "churn";
    let cluster = cluster_with_class("churn", ns);
    let mut next = 11;
    let mut live: Vec<Pod> = Vec::new();
    for _ in 0..3 {
        live.push(pod(&cluster, next));
        next += 1;
    }
    cluster.create(&service(ns, "web"));
    cluster.create(&web_slice(ns, &live));
    cluster.create(&ingress(ns, "web", Some("sluice"), "churn.test", "web"));
    let sluice = cluster.sluice(ns, &[]);
    assert_eq!(sluice.get("churn.test", "/").status, 200);

    let http = sluice.http.to_string();
    let load = Load::start(
        &[
            "-t",
            "1",
            "-c",
            "8",
            "-R",
            "400",
            "-d",
            "10s",
            "--connect-to",
            &http,
            "http://churn.test/",
        ],
        &cluster.dir,
        "churn",
    );
    std::thread::sleep(Duration::from_secs(1));
    // Every ~500 ms for 8 s: a new pod joins the slice, or the oldest leaves it and gets SIGTERM
    // right after the API server accepted the update, as a kubelet would.
    let mut gone = Vec::new();
    let churn = std::time::Instant::now();
    let mut step = 0;
    while churn.elapsed() < Duration::from_secs(8) {
        if step % 2 == 0 {
            live.push(pod(&cluster, next));
            next += 1;
            cluster.apply(&web_slice(ns, &live));
        } else {
            let leaving = live.remove(0);
            cluster.apply(&web_slice(ns, &live));
            leaving.process.signal("TERM");
            gone.push(leaving);
        }
        step += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    let result = load.finish(Duration::from_secs(30));
    result.assert_clean(3600);
    eprintln!(
        "churn: {step} slice updates, {} requests, all 2xx",
        result.json["requests"]
    );
    // Traffic reaches the newest pod, and the terminated ones drained and exited.
    let newest = &live.last().unwrap().name;
    sluice.wait_served_by("churn.test", newest, WAIT);
    for pod in &mut gone {
        pod.process.wait_exit(Duration::from_secs(35));
    }
}

/// `status.loadBalancer.ingress` of Ingress `ns/name` (Null when unset).
fn load_balancer(cluster: &Cluster, ns: &str, name: &str) -> serde_json::Value {
    cluster
        .get("Ingress", ns, name)
        .map(|i| i["status"]["loadBalancer"]["ingress"].clone())
        .unwrap_or_default()
}

/// Field managers that own anything under `status` of Ingress `ns/name`, sorted.
fn status_writers(cluster: &Cluster, ns: &str, name: &str) -> Vec<String> {
    let ingress = cluster.get("Ingress", ns, name).expect("the Ingress");
    let mut managers: Vec<String> = ingress["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["fieldsV1"].get("f:status").is_some())
        .filter_map(|entry| entry["manager"].as_str().map(str::to_owned))
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

fn lease_holder(cluster: &Cluster, ns: &str, name: &str) -> Option<String> {
    cluster.get("Lease", ns, name)?["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_owned)
}

#[test]
fn one_elected_replica_writes_status_and_a_successor_takes_over() {
    let ns = "leader";
    let cluster = cluster_with_class("leader", ns);
    cluster.create(&ingress_class("other", "example.com/other-controller"));
    let p = pod(&cluster, 11);
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&p]));
    let flags = [
        "--publish-status-address",
        "198.18.0.200",
        "--election-id",
        "sluice-test",
        "--lease-duration",
        "4s",
    ];
    let replica = |identity| {
        cluster.sluice_with(SluiceOptions {
            identity,
            namespace: ns,
            kubeconfig: None,
            extra: &flags,
            wait_ready: true,
            log: None,
            env: &[],
        })
    };
    let (a, b) = (replica("replica-a"), replica("replica-b"));
    let published = serde_json::json!([{"ip": "198.18.0.200"}]);

    eventually(WAIT, "status of Ingress web published", || {
        (load_balancer(&cluster, ns, "web") == published).then_some(())
    });
    let holder = eventually(WAIT, "a Lease holder", || {
        lease_holder(&cluster, ns, "sluice-test")
    });
    let (mut leader, follower) = match holder.as_str() {
        "replica-a" => (a, b),
        "replica-b" => (b, a),
        other => panic!("Lease sluice-test held by {other:?}"),
    };
    assert_eq!(
        status_writers(&cluster, ns, "web"),
        [format!("sluice-{}", leader.identity)],
        "only the leader writes status"
    );
    assert_eq!(leader.get("web.test", "/").status, 200);
    assert_eq!(follower.get("web.test", "/").status, 200);

    // The leader stops (releasing the Lease); the follower keeps serving throughout and takes over.
    let http = follower.http.to_string();
    let load = Load::start(
        &[
            "-t",
            "1",
            "-c",
            "4",
            "-R",
            "100",
            "-d",
            "8s",
            "--connect-to",
            &http,
            "http://web.test/",
        ],
        &cluster.dir,
        "handover",
    );
    std::thread::sleep(Duration::from_secs(1));
    leader.process.signal("TERM");
    assert_eq!(
        leader.process.wait_exit(WAIT),
        0,
        "the leader exits cleanly"
    );
    eventually(
        Duration::from_secs(15),
        "the follower holds the Lease",
        || (lease_holder(&cluster, ns, "sluice-test")? == follower.identity).then_some(()),
    );
    cluster.create(&ingress(ns, "web2", Some("sluice"), "web2.test", "web"));
    eventually(WAIT, "status of Ingress web2 by the new leader", || {
        (load_balancer(&cluster, ns, "web2") == published).then_some(())
    });
    assert_eq!(
        status_writers(&cluster, ns, "web2"),
        [format!("sluice-{}", follower.identity)]
    );
    follower.wait_status("web2.test", 200, WAIT);
    load.finish(Duration::from_secs(30)).assert_clean(700);

    // An Ingress handed to another class is no longer ours: status cleared, not served.
    cluster.merge_patch(
        "Ingress",
        ns,
        "web",
        &serde_json::json!({"spec": {"ingressClassName": "other"}}),
    );
    eventually(WAIT, "status of Ingress web cleared", || {
        let ingress = load_balancer(&cluster, ns, "web");
        (ingress.is_null() || ingress.as_array().is_some_and(|a| a.is_empty())).then_some(())
    });
    follower.wait_status("web.test", 404, WAIT);
}

/// A pod object as a kubelet would run it (`ready`: its status Running and Ready), on `node`.
fn controller_pod(
    cluster: &Cluster,
    ns: &str,
    (name, labels): (&str, serde_json::Value),
    node: &str,
    ready: bool,
) {
    cluster.create(&serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": node, "automountServiceAccountToken": false,
                 "containers": [{"name": "sluice", "image": "sluice"}]},
    }));
    set_pod_ready(cluster, ns, name, ready);
}

fn set_pod_ready(cluster: &Cluster, ns: &str, name: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    cluster.merge_patch_status(
        "Pod",
        ns,
        name,
        &serde_json::json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": status}]}}),
    );
}

/// The IPs in `status.loadBalancer.ingress` of Ingress `ns/name`.
fn load_balancer_ips(cluster: &Cluster, ns: &str, name: &str) -> Vec<String> {
    let ingress = load_balancer(cluster, ns, name);
    (ingress.as_array().into_iter().flatten())
        .filter_map(|entry| entry["ip"].as_str().map(str::to_owned))
        .collect()
}

/// Neither `--publish-service` nor `--publish-status-address`: as ingress-nginx, Ingress status
/// holds the addresses of the nodes that run a ready pod with the controller pod's labels (each
/// node's ExternalIPs, else its InternalIPs; with `--report-node-internal-ip-address` its
/// InternalIPs), followed as pods become ready. `--disable-leader-election` writes it without
/// a Lease.
#[test]
fn without_publish_flags_status_holds_the_nodes_of_ready_controller_pods() {
    let ns = "node-status";
    let cluster = cluster_with_class("node-status", ns);
    // No controller manager here: the ServiceAccount a pod needs is made by hand.
    cluster.create(&serde_json::json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": ns},
    }));
    for (node, addresses) in [
        (
            "node-a",
            serde_json::json!([{"type": "ExternalIP", "address": "203.0.113.10"},
                                       {"type": "InternalIP", "address": "10.0.0.10"}]),
        ),
        (
            "node-b",
            serde_json::json!([{"type": "InternalIP", "address": "10.0.0.11"},
                                       {"type": "Hostname", "address": "node-b"}]),
        ),
        (
            "node-c",
            serde_json::json!([{"type": "ExternalIP", "address": "203.0.113.12"},
                                       {"type": "InternalIP", "address": "10.0.0.12"}]),
        ),
    ] {
        cluster.create(&serde_json::json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
        }));
        cluster.merge_patch_status(
            "Node",
            "",
            node,
            &serde_json::json!({"status": {"addresses": addresses}}),
        );
    }
    let ours = serde_json::json!({"app.kubernetes.io/name": "sluice", "pod-template-hash": "7f9"});
    let other = serde_json::json!({"app.kubernetes.io/name": "other"});
    controller_pod(&cluster, ns, ("sluice-a", ours.clone()), "node-a", true);
    controller_pod(&cluster, ns, ("sluice-b", ours.clone()), "node-b", true);
    controller_pod(&cluster, ns, ("sluice-c", ours), "node-c", false);
    controller_pod(&cluster, ns, ("other-c", other), "node-c", true);
    let p = pod(&cluster, 14);
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&p]));

    const FLAGS: &[&str] = &["--lease-duration", "2s"];
    let options = |identity, extra: &'static [&'static str]| SluiceOptions {
        identity,
        namespace: ns,
        kubeconfig: None,
        extra,
        wait_ready: true,
        log: None,
        env: &[],
    };
    let mut first = cluster.sluice_with(options("sluice-a", FLAGS));
    // node-a's external address, node-b's internal one (it has no external one); node-c's pod
    // of ours is not ready and the ready one there is not ours.
    eventually(WAIT, "status from the nodes of ready pods", || {
        let ips = load_balancer_ips(&cluster, ns, "web");
        (ips == ["10.0.0.11", "203.0.113.10"]).then_some(())
    });
    // A pod becoming ready adds its node at the next pass (every two lease durations).
    set_pod_ready(&cluster, ns, "sluice-c", true);
    eventually(WAIT, "node-c added once its pod is ready", || {
        let ips = load_balancer_ips(&cluster, ns, "web");
        (ips == ["10.0.0.11", "203.0.113.10", "203.0.113.12"]).then_some(())
    });
    first.process.signal("TERM");
    assert_eq!(first.process.wait_exit(WAIT), 0);

    // The internal addresses, written without taking the Lease.
    const INTERNAL: &[&str] = &[
        "--lease-duration",
        "2s",
        "--report-node-internal-ip-address",
        "--disable-leader-election=true",
    ];
    let second = cluster.sluice_with(options("sluice-b", INTERNAL));
    eventually(WAIT, "status from the nodes' internal addresses", || {
        let ips = load_balancer_ips(&cluster, ns, "web");
        (ips == ["10.0.0.10", "10.0.0.11", "10.0.0.12"]).then_some(())
    });
    assert_ne!(
        lease_holder(&cluster, ns, "sluice-e2e").as_deref(),
        Some("sluice-b"),
        "--disable-leader-election takes no Lease"
    );
    assert!(
        second
            .log_text()
            .contains("--disable-leader-election: this replica writes"),
        "{}",
        second.log_tail(20)
    );
}

/// The RBAC of ingress-nginx's Helm chart (4.11: its ClusterRole and Role, as its templates
/// render them by default), bound to the ServiceAccount Sluice runs as here.
const INGRESS_NGINX_CHART_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ingress-nginx}
rules:
  - {apiGroups: [""], resources: [configmaps, endpoints, nodes, pods, secrets, namespaces], verbs: [list, watch]}
  - {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [list, watch]}
  - {apiGroups: [""], resources: [nodes], verbs: [get]}
  - {apiGroups: [""], resources: [services], verbs: [get, list, watch]}
  - {apiGroups: [networking.k8s.io], resources: [ingresses], verbs: [get, list, watch]}
  - {apiGroups: [""], resources: [events], verbs: [create, patch]}
  - {apiGroups: [networking.k8s.io], resources: [ingresses/status], verbs: [update]}
  - {apiGroups: [networking.k8s.io], resources: [ingressclasses], verbs: [get, list, watch]}
  - {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch, get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ingress-nginx}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ingress-nginx}
subjects: [{kind: ServiceAccount, name: sluice, namespace: sluice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ingress-nginx, namespace: sluice}
rules:
  - {apiGroups: [""], resources: [namespaces], verbs: [get]}
  - {apiGroups: [""], resources: [configmaps, pods, secrets, endpoints], verbs: [get, list, watch]}
  - {apiGroups: [""], resources: [services], verbs: [get, list, watch]}
  - {apiGroups: [networking.k8s.io], resources: [ingresses], verbs: [get, list, watch]}
  - {apiGroups: [networking.k8s.io], resources: [ingresses/status], verbs: [update]}
  - {apiGroups: [networking.k8s.io], resources: [ingressclasses], verbs: [get, list, watch]}
  - {apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [ingress-nginx-leader], verbs: [get, update]}
  - {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [create]}
  - {apiGroups: [""], resources: [events], verbs: [create, patch]}
  - {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch, get]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ingress-nginx, namespace: sluice}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ingress-nginx}
subjects: [{kind: ServiceAccount, name: sluice, namespace: sluice}]
"#;

/// Sluice under ingress-nginx's chart's RBAC, with the chart's class and election flags: it
/// serves, and where the chart grants another verb than Sluice's own manifests use it writes
/// the other way (Ingress status by update, not patch; core v1 Events, not events.k8s.io).
#[test]
fn under_ingress_nginx_charts_rbac_status_and_events_are_written() {
    let ns = "app";
    let cluster = Cluster::start("chart-rbac");
    cluster.create(&namespace("sluice"));
    cluster.create(&namespace(ns));
    cluster.create(&ingress_class("nginx", "k8s.io/ingress-nginx"));
    let rbac = cluster.dir.join("ingress-nginx-rbac.yaml");
    std::fs::write(&rbac, INGRESS_NGINX_CHART_RBAC).unwrap();
    cluster.kubectl(&["apply", "-f", rbac.to_str().unwrap()]);
    let p = pod(&cluster, 15);
    cluster.create_service(ns, "web", 8080, &[p.addr.ip()]);
    cluster.create(&ingress(ns, "web", Some("nginx"), "web.test", "web"));
    // A Service that does not exist: a diagnostic, so an Event.
    cluster.create(&ingress(
        ns,
        "broken",
        Some("nginx"),
        "broken.test",
        "missing",
    ));
    let sluice = cluster.sluice_with(SluiceOptions {
        identity: "ingress-nginx-controller-0",
        namespace: "sluice",
        kubeconfig: Some(cluster.sluice_kubeconfig()),
        extra: &[
            "--ingress-class=nginx",
            "--controller-class=k8s.io/ingress-nginx",
            "--election-id",
            "ingress-nginx-leader",
            "--configmap",
            "sluice/ingress-nginx-controller",
            "--publish-status-address=198.18.0.201",
        ],
        wait_ready: true,
        log: None,
        env: &[],
    });
    assert_eq!(sluice.get("web.test", "/").status, 200);
    let published = serde_json::json!([{"ip": "198.18.0.201"}]);
    eventually(WAIT, "status of Ingress web written by update", || {
        (load_balancer(&cluster, ns, "web") == published).then_some(())
    });
    eventually(WAIT, "an Event on Ingress broken", || {
        let events = cluster.events_about(ns, "Ingress", "broken");
        events
            .iter()
            .any(|e| e["reason"] == "ConfigurationProblem" && e["type"] == "Warning")
            .then_some(())
    });
    let log = sluice.log_text();
    for fallback in [
        "writing it by update (ingress-nginx's RBAC grants update only)",
        "writing core v1 Events (ingress-nginx's RBAC grants those only)",
    ] {
        assert!(log.contains(fallback), "{fallback:?} not in:\n{log}");
    }
    // The chart grants no Gateway API: each kind said once, and served without; nothing
    // else refused.
    let refused: Vec<&str> = (log.lines())
        .filter(|l| l.contains(" WARN ") && l.to_ascii_lowercase().contains("forbidden"))
        .collect();
    let (gateway_api, other): (Vec<&str>, Vec<&str>) = refused
        .iter()
        .partition(|l| l.contains("in API group \"gateway.networking.k8s.io\""));
    assert!(
        other.is_empty(),
        "refused by the chart's RBAC:\n{}",
        other.join("\n")
    );
    let kinds: std::collections::BTreeSet<&str> = gateway_api
        .iter()
        .filter_map(|l| l.split(" cannot be read").next()?.rsplit(' ').next())
        .collect();
    assert!(
        !kinds.is_empty(),
        "no Gateway API kind said it cannot be read:\n{log}"
    );
    assert_eq!(
        kinds.len(),
        gateway_api.len(),
        "each Gateway API kind said once:\n{}",
        gateway_api.join("\n")
    );
}

#[test]
fn traffic_flows_while_the_api_server_is_down_and_changes_apply_once_it_is_back() {
    let ns = "outage";
    let cluster = cluster_with_class("outage", ns);
    let (a, b) = (pod(&cluster, 11), pod(&cluster, 12));
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&a, &b]));
    let sluice = cluster.sluice(ns, &[]);
    let http = sluice.http.to_string();
    let load = Load::start(
        &[
            "-t",
            "1",
            "-c",
            "8",
            "-R",
            "300",
            "-d",
            "25s",
            "--connect-to",
            &http,
            "http://web.test/",
        ],
        &cluster.dir,
        "outage",
    );
    std::thread::sleep(Duration::from_secs(3));

    // (kube-apiserver takes up to ~11 s to stop while clients hold watches; it is
    // unreachable for all of that.)
    cluster.stop_apiserver();
    let down = std::time::Instant::now();
    while down.elapsed() < Duration::from_secs(4) {
        assert_eq!(
            sluice.ready_status(),
            Some(200),
            "still ready while the API server is down"
        );
        assert_eq!(sluice.get("web.test", "/").status, 200);
        std::thread::sleep(Duration::from_millis(250));
    }
    cluster.start_apiserver();
    let back = std::time::Instant::now();

    // Changes made after the outage reach Sluice once its watches are back.
    let c = pod(&cluster, 13);
    let endpoints: Vec<Endpoint> = [&a, &b, &c]
        .iter()
        .map(|p| Endpoint::ready(p.addr.ip()))
        .collect();
    cluster.apply(&endpoint_slice(ns, "web-1", "web", 8080, &endpoints));
    cluster.create(&ingress(ns, "late", Some("sluice"), "late.test", "web"));
    let resync = Duration::from_secs(60);
    sluice.wait_served_by("web.test", "pod-13", resync);
    sluice.wait_status("late.test", 200, resync);
    eprintln!(
        "outage: changes made after the restart served {:.1} s after the API server was back",
        back.elapsed().as_secs_f64()
    );

    load.finish(Duration::from_secs(60)).assert_clean(7400);

    // The outage is told once per watch and once for the status addresses, not at every
    // retry (a Gateway API kind this cluster lacks was retried, and told, every 0.25-0.5 s
    // while the API server was away: about 40 lines each), and kube-client's own line for
    // each failed request stays out.
    let log = sluice.log_text();
    let mut told: std::collections::BTreeMap<&str, usize> = Default::default();
    for line in log.lines() {
        if line.contains("watching the Kubernetes API failed") {
            let kind = line.split("kind=").nth(1).unwrap_or("?");
            *told
                .entry(kind.split_whitespace().next().unwrap_or("?"))
                .or_default() += 1;
        }
    }
    assert!(!told.is_empty(), "the outage is told:\n{log}");
    assert!(told.values().all(|&n| n <= 3), "{told:?}\n{log}");
    let addresses = log
        .lines()
        .filter(|l| l.contains("resolving the status addresses failed"))
        .count();
    assert!(addresses <= 2, "{addresses} times:\n{log}");
    assert!(!log.contains("kube_client::client::builder"), "{log}");
}

/// Sluice as ServiceAccount sluice/sluice (the deploy manifests' RBAC), with the flags the
/// DaemonSet uses and `extra`.
pub(crate) fn as_service_account(
    cluster: &Cluster,
    identity: &str,
    extra: &[&str],
    wait_ready: bool,
) -> KubeSluice {
    let mut flags = vec![
        "--configmap",
        "sluice/sluice",
        "--election-id",
        "sluice-leader",
    ];
    flags.extend_from_slice(extra);
    cluster.sluice_with(SluiceOptions {
        identity,
        namespace: "sluice",
        kubeconfig: Some(cluster.sluice_kubeconfig()),
        extra: &flags,
        wait_ready,
        log: None,
        env: &[],
    })
}

#[test]
fn the_deploy_manifests_grant_sluice_everything_it_uses() {
    let cluster = Cluster::start("rbac");
    let manifests = deploy_dir().join("manifests");
    cluster.kubectl(&["apply", "-f", manifests.to_str().unwrap()]);
    let ns = "shop";
    let host = "secure.test";
    cluster.create(&namespace(ns));
    let p = pod(&cluster, 11);
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&p]));
    cluster.create(&ingress(
        ns,
        "ghost",
        Some("sluice"),
        "ghost.test",
        "missing",
    ));
    let Leaf {
        cert_pem: cert,
        key_pem: key,
        ..
    } = self_signed(&[host]);
    cluster.create(&tls_secret(ns, "secure-tls", &cert, &key));
    let mut secure = ingress(ns, "secure", Some("sluice"), host, "web");
    secure["spec"]["tls"] = serde_json::json!([{"hosts": [host], "secretName": "secure-tls"}]);
    cluster.create(&secure);

    let sluice = as_service_account(
        &cluster,
        "sluice-rbac",
        &["--publish-status-address", "198.18.0.200"],
        true,
    );
    assert_eq!(
        sluice.get("web.test", "/").status,
        200,
        "routes from the watches"
    );
    let tls = TlsConnection::open(sluice.https, host, tls_client(cert.as_bytes()))
        .expect("the TLS Secret was read");
    assert_eq!(tls.peer_certificate(), pem_to_der(&cert));
    eventually(WAIT, "the Lease sluice/sluice-leader held", || {
        (lease_holder(&cluster, "sluice", "sluice-leader")? == "sluice-rbac").then_some(())
    });
    eventually(WAIT, "status written", || {
        (load_balancer(&cluster, ns, "web") == serde_json::json!([{"ip": "198.18.0.200"}]))
            .then_some(())
    });
    eventually(WAIT, "a Warning Event on Ingress ghost", || {
        cluster
            .events_about(ns, "Ingress", "ghost")
            .into_iter()
            .find(|e| e["type"] == "Warning")
    });
    let log = sluice.log_text();
    let denied: Vec<&str> = log
        .lines()
        .filter(|l| {
            // "403" as a number of its own, not inside a timestamp or a port.
            let status_403 = l
                .split(|c: char| !c.is_ascii_digit())
                .any(|number| number == "403");
            l.to_ascii_lowercase().contains("forbidden") || status_403
        })
        .collect();
    assert!(
        denied.is_empty(),
        "requests denied by RBAC:\n{}",
        denied.join("\n")
    );
}

#[test]
fn a_config_map_rbac_does_not_grant_is_named_while_not_ready_and_granting_it_makes_ready() {
    let cluster = Cluster::start("rbac-gap");
    let manifests = deploy_dir().join("manifests");
    cluster.kubectl(&["apply", "-f", manifests.to_str().unwrap()]);
    // The grants the Helm chart makes with watchNamespace=shop: ConfigMaps readable in `shop`,
    // not cluster-wide (the manifests' ClusterRole would grant `sluice/tcp` too).
    let mut cluster_role: serde_json::Value =
        serde_json::from_str(&cluster.kubectl(&["get", "clusterrole", "sluice", "-o", "json"]))
            .unwrap();
    cluster_role["rules"]
        .as_array_mut()
        .unwrap()
        .retain(|rule| rule["resources"] != serde_json::json!(["configmaps"]));
    let edited = cluster.dir.join("cluster-role.json");
    std::fs::write(&edited, cluster_role.to_string()).unwrap();
    cluster.kubectl(&["replace", "-f", edited.to_str().unwrap()]);
    cluster.kubectl(&["create", "namespace", "shop"]);
    cluster.kubectl(&[
        "create",
        "role",
        "configmaps",
        "-n",
        "shop",
        "--verb=list,watch",
        "--resource=configmaps",
    ]);
    cluster.kubectl(&[
        "create",
        "rolebinding",
        "configmaps",
        "-n",
        "shop",
        "--role=configmaps",
        "--serviceaccount=sluice:sluice",
    ]);
    // Watching `shop`, Sluice watches a ConfigMap named by a flag outside it by name; the
    // manifests grant the ConfigMap `sluice` by name only there: `sluice/tcp` is refused.
    let sluice = as_service_account(
        &cluster,
        "sluice-rbac-gap",
        &[
            "--watch-namespace",
            "shop",
            "--tcp-services-configmap",
            "sluice/tcp",
        ],
        false,
    );
    eventually(
        WAIT,
        "a warning naming the refused watch and the grant",
        || {
            sluice.log_text().lines().find_map(|l| {
                (l.contains("WARN")
                    && l.contains("ConfigMap sluice/tcp")
                    && l.contains("403 Forbidden")
                    && l.contains(
                        "grant Sluice's ServiceAccount get, list and watch on configmaps",
                    ))
                .then(|| l.to_owned())
            })
        },
    );
    assert_ne!(
        sluice.ready_status(),
        Some(200),
        "ready without the TCP services it was told to serve"
    );
    // The operator grants it: the watch's retry lists it, and Sluice becomes ready without a
    // restart.
    let mut role = cluster
        .get("Role", "sluice", "sluice")
        .expect("the manifests' Role");
    for rule in role["rules"].as_array_mut().unwrap() {
        if rule["resources"] == serde_json::json!(["configmaps"]) {
            rule["resourceNames"] = serde_json::json!(["sluice", "tcp"]);
        }
    }
    cluster.replace(&role);
    sluice.wait_ready(Duration::from_secs(30));
}

#[test]
fn a_certificate_near_its_expiry_is_a_warning_event_and_leadership_is_a_metric() {
    let ns = "expiring";
    let host = "soon.test";
    let cluster = cluster_with_class("expiring", ns);
    let p = pod(&cluster, 51);
    let expiry = std::time::SystemTime::now() + Duration::from_secs(3 * 24 * 3600);
    let Leaf {
        cert_pem: cert,
        key_pem: key,
        ..
    } = self_signed_until(host, expiry);
    create_tls_app(&cluster, ns, host, &p, &cert, &key);
    let sluice = cluster.sluice(ns, &[]);

    // Served all the same: expiring is a warning, not a refusal.
    let mut open = TlsConnection::open(sluice.https, host, tls_client(cert.as_bytes()))
        .expect("the expiring certificate is served");
    assert_eq!(open.get("/").unwrap().status, 200);
    let event = eventually(
        WAIT,
        "a Warning Event about the expiring certificate",
        || {
            cluster
                .events_about(ns, "Ingress", "web")
                .into_iter()
                .find(|e| e["reason"] == "CertificateExpiring")
        },
    );
    assert_eq!(event["type"], "Warning", "{event:#}");
    let note = event["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("Secret expiring/web-tls: the certificate expires at")
            && note.contains("within 14 days"),
        "{event:#}"
    );
    // The single replica leads; the metric says so under the Lease's name.
    let leader = || {
        sluice
            .admin("/metrics")
            .text()
            .lines()
            .filter(|l| l.contains("leader_election_status"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    eventually(
        WAIT,
        &format!("leader_election_status 1 ({})", leader()),
        || {
            sluice
                .admin("/metrics")
                .text()
                .lines()
                .any(|l| {
                    l.starts_with("nginx_ingress_controller_leader_election_status{")
                        && l.contains("name=\"sluice-e2e\"")
                        && l.ends_with(" 1")
                })
                .then_some(())
        },
    );
}

#[test]
fn annotations_from_the_api_shape_routes_and_unsupported_ones_are_warning_events() {
    let ns = "annotations";
    let cluster = cluster_with_class("annotations", ns);
    let a = pod(&cluster, 31);
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&a]));
    let mut rewrite = ingress(ns, "api", Some("sluice"), "api.test", "web");
    rewrite["metadata"]["annotations"] = serde_json::json!({
        "nginx.ingress.kubernetes.io/rewrite-target": "/echo/$1",
        "nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/8",
        "nginx.ingress.kubernetes.io/http2-push-preload": "true",
    });
    rewrite["spec"]["rules"][0]["http"]["paths"][0]["path"] = serde_json::json!("/v1/(.*)");
    rewrite["spec"]["rules"][0]["http"]["paths"][0]["pathType"] =
        serde_json::json!("ImplementationSpecific");
    cluster.create(&rewrite);
    let sluice = cluster.sluice(ns, &[]);

    // The allow-list (Sluice's test client is on loopback) answers 403; the rest of the
    // Ingress is read, and the unsupported annotation is a Warning Event.
    eventually(WAIT, "api.test/v1/x answers 403", || {
        (sluice.get("api.test", "/v1/x").status == 403).then_some(())
    });
    let event = eventually(
        WAIT,
        "a Warning Event about the http2-push-preload annotation",
        || {
            cluster
                .events_about(ns, "Ingress", "api")
                .into_iter()
                .find(|e| {
                    e["note"]
                        .as_str()
                        .unwrap_or("")
                        .contains("http2-push-preload")
                })
        },
    );
    assert_eq!(event["type"], "Warning", "{event:#}");
    assert_eq!(event["reason"], "UnsupportedConfiguration", "{event:#}");

    // Opened to loopback by a change of the annotation: the rewrite applies.
    rewrite["metadata"]["annotations"]["nginx.ingress.kubernetes.io/whitelist-source-range"] =
        serde_json::json!("127.0.0.0/8, 198.18.0.0/15");
    cluster.apply(&rewrite);
    eventually(WAIT, "api.test/v1/x answers 200", || {
        (sluice.get("api.test", "/v1/x").status == 200).then_some(())
    });
    let reply = sluice.get("api.test", "/V1/users?page=2");
    let echo: serde_json::Value = serde_json::from_str(&reply.text()).unwrap();
    assert_eq!(echo["path"], "/echo/users", "{echo:#}");
    assert_eq!(echo["query"], "page=2", "{echo:#}");
    assert_eq!(sluice.get("web.test", "/").status, 200);
}

/// `GET /` for `host` with `Authorization: Basic credentials` (base64 of user:password), or
/// none.
fn get_as(sluice: &KubeSluice, host: &str, credentials: Option<&str>) -> Response {
    let mut tcp = std::net::TcpStream::connect(sluice.serve.http).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let authorization = credentials.map(|c| format!("Basic {c}"));
    let headers: Vec<(&str, &str)> = (authorization.iter())
        .map(|value| ("Authorization", value.as_str()))
        .collect();
    request(&mut tcp, "GET", host, "/", &headers).unwrap()
}

/// Basic auth as ingress-nginx's docs set it up: the users in an Opaque Secret's `auth` key
/// (`kubectl create secret generic … --from-file=auth`). A change of the Secret applies to
/// the next request (a removed user is refused at once, whatever was remembered); a deleted
/// Secret refuses the Ingress's routes (503, as ingress-nginx) with a Warning Event, while the
/// other Ingresses keep serving.
#[test]
fn basic_auth_users_come_from_an_opaque_secret_and_follow_its_changes() {
    let ns = "basic-auth";
    let cluster = cluster_with_class("basic-auth", ns);
    let a = pod(&cluster, 41);
    cluster.create_app(ns, "open", "open.test", 8080, &ips(&[&a]));
    // alice:wonderland ({SHA}) and bob:hunter22 ($apr1$, as `htpasswd -m` writes it).
    let (alice, bob) = ("YWxpY2U6d29uZGVybGFuZA==", "Ym9iOmh1bnRlcjIy");
    let users = |lines: &[&str]| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "htpasswd", "namespace": ns},
            "stringData": {"auth": lines.iter().map(|l| format!("{l}\n")).collect::<String>()},
        })
    };
    let alice_line = "alice:{SHA}tiY7sUhYKUwI5L3866kDY+ENcrQ=";
    let bob_line = "bob:$apr1$s1uiceAB$KRic8gjAH1H1LhY65S/GI0";
    cluster.create(&users(&[alice_line]));
    cluster.create_service(ns, "private", 8080, &[a.addr.ip()]);
    let mut private = ingress(ns, "private", Some("sluice"), "private.test", "private");
    private["metadata"]["annotations"] = serde_json::json!({
        "nginx.ingress.kubernetes.io/auth-type": "basic",
        "nginx.ingress.kubernetes.io/auth-secret": "htpasswd",
        "nginx.ingress.kubernetes.io/auth-realm": "Staff only",
    });
    cluster.create(&private);
    let sluice = cluster.sluice(ns, &[]);

    let refused = get_as(&sluice, "private.test", None);
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(
        refused.header("www-authenticate"),
        Some("Basic realm=\"Staff only\"")
    );
    assert_eq!(get_as(&sluice, "private.test", Some(alice)).status, 200);
    assert_eq!(get_as(&sluice, "private.test", Some(bob)).status, 401);

    // bob replaces alice: refused from the next request on, though her password was just
    // verified (and remembered).
    cluster.apply(&users(&[bob_line]));
    eventually(WAIT, "bob let in", || {
        (get_as(&sluice, "private.test", Some(bob)).status == 200).then_some(())
    });
    assert_eq!(get_as(&sluice, "private.test", Some(alice)).status, 401);

    // No Secret: the Ingress is refused, not left open; the others keep serving.
    cluster.delete("Secret", ns, "htpasswd");
    eventually(WAIT, "private.test refused once its Secret is gone", || {
        (get_as(&sluice, "private.test", Some(bob)).status == 503).then_some(())
    });
    assert_eq!(get_as(&sluice, "private.test", None).status, 503);
    assert_eq!(get_as(&sluice, "open.test", None).status, 200);
    let event = eventually(WAIT, "a Warning Event naming the Secret", || {
        cluster
            .events_about(ns, "Ingress", "private")
            .into_iter()
            .find(|e| {
                e["type"] == "Warning" && e["note"].as_str().is_some_and(|n| n.contains("htpasswd"))
            })
    });
    assert_eq!(event["reason"], "ConfigurationProblem", "{event:#}");
}

#[test]
fn ingress_nginx_args_and_configmap_serve_its_class_without_a_diagnostic() {
    // The seeds' community controller: its namespace, IngressClass and ConfigMap as written.
    let ns = "ingress-nginx";
    let cluster = Cluster::start("ingress-nginx-args");
    cluster.create(&namespace(ns));
    cluster.create(&ingress_class("nginx", "k8s.io/ingress-nginx"));
    cluster.create(&config_map(
        ns,
        "ingress-nginx-controller",
        &[
            ("max-worker-connections", "10000"),
            ("max-worker-open-files", "10204"),
            ("upstream-keepalive-connections", "100"),
            ("keep-alive-requests", "100000000"),
        ],
    ));
    let p = pod(&cluster, 11);
    cluster.create_service(ns, "web", 8080, &[p.addr.ip()]);
    cluster.create(&ingress(ns, "web", Some("nginx"), "web.test", "web"));

    // The seed's DaemonSet args (the webhook's aside), plus the controller value that claims
    // IngressClass nginx.
    let sluice = cluster.sluice(
        ns,
        &[
            "--election-id",
            "ingress-controller-leader",
            "--ingress-class",
            "nginx",
            "--configmap",
            "ingress-nginx/ingress-nginx-controller",
            "--controller-class",
            "k8s.io/ingress-nginx",
        ],
    );
    sluice.wait_served_by("web.test", "pod-11", WAIT);
    let config = sluice.serve.config_json();
    assert_eq!(
        config["config"]["diagnostics"],
        serde_json::json!([]),
        "{config:#}"
    );
    assert_eq!(
        config["config"]["settings"]["max-worker-connections"],
        10000
    );
    eventually(
        WAIT,
        "Lease ingress-controller-leader held by sluice-0",
        || {
            (lease_holder(&cluster, ns, "ingress-controller-leader").as_deref() == Some("sluice-0"))
                .then_some(())
        },
    );
}

#[test]
fn redirect_regex_order_limit_and_snippet_annotations_in_kubernetes_mode() {
    let ns = "classes";
    let cluster = cluster_with_class("classes", ns);
    let (a, b) = (pod(&cluster, 41), pod(&cluster, 42));
    cluster.create(&serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "sluice", "namespace": ns},
        "data": {"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"},
    }));
    cluster.create_app(ns, "a", "regex.test", 8080, &ips(&[&a]));
    cluster.create_app(ns, "b", "b.test", 8080, &ips(&[&b]));
    let annotated =
        |name: &str, host: &str, path: &str, kind: &str, annotations: serde_json::Value| {
            let mut object = ingress(ns, name, Some("sluice"), host, "b");
            object["metadata"]["annotations"] = annotations;
            object["spec"]["rules"][0]["http"]["paths"][0]["path"] = serde_json::json!(path);
            object["spec"]["rules"][0]["http"]["paths"][0]["pathType"] = serde_json::json!(kind);
            object
        };
    cluster.create(&annotated(
        "b-regex",
        "regex.test",
        "/echo/.+",
        "ImplementationSpecific",
        serde_json::json!({"nginx.ingress.kubernetes.io/use-regex": "true"}),
    ));
    cluster.create(&annotated(
        "moved",
        "moved.test",
        "/",
        "Prefix",
        serde_json::json!({
            "nginx.ingress.kubernetes.io/permanent-redirect": "https://new.example.com/",
            "nginx.ingress.kubernetes.io/permanent-redirect-code": "308",
        }),
    ));
    cluster.create(&annotated(
        "small",
        "small.test",
        "/",
        "Prefix",
        serde_json::json!({
            "nginx.ingress.kubernetes.io/proxy-body-size": "1k",
            "nginx.ingress.kubernetes.io/configuration-snippet":
                "more_set_headers \"X-Frame-Options: DENY\";",
        }),
    ));
    let sluice = cluster.sluice(ns, &[]);

    // Regex paths, longest first; the other Ingress's `/` became `^/` on this host.
    let echo = sluice.get("regex.test", "/echo/x");
    assert!(
        echo.text().contains("\"backend\":\"pod-42\""),
        "{}",
        echo.text()
    );
    // `/echo` does not match `^/echo/.+`: the shorter `^/` of the other Ingress takes it.
    let short = sluice.get("regex.test", "/echo");
    assert!(
        short.text().contains("\"backend\":\"pod-41\""),
        "{}",
        short.text()
    );

    let moved = sluice.get("moved.test", "/anything");
    assert_eq!(moved.status, 308);
    assert_eq!(moved.header("location"), Some("https://new.example.com/"));

    let small = sluice.get("small.test", "/");
    assert_eq!(small.status, 200);
    assert_eq!(small.header("x-frame-options"), Some("DENY"));
    let mut stream = std::net::TcpStream::connect(sluice.http).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let too_big = request(
        &mut stream,
        "POST",
        "small.test",
        "/",
        &[("content-length", "2048")],
    )
    .unwrap();
    assert_eq!(too_big.status, 413);
}

/// `kubectl ARGS` with the admin kubeconfig: (success, stdout + stderr).
fn try_kubectl(cluster: &Cluster, args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(cluster.bin.join("kubectl"))
        .arg("--kubeconfig")
        .arg(cluster.admin_kubeconfig())
        .args(args)
        .output()
        .expect("run kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Sluice with its admission webhook on 127.0.0.1 (ingress-nginx's flags: the certificate and
/// key as files, which its chart mounts from a Secret): Sluice, the webhook's address and the
/// certificate (PEM) to trust.
fn sluice_with_webhook(cluster: &Cluster, ns: &str) -> (KubeSluice, String, String) {
    let Leaf {
        cert_pem, key_pem, ..
    } = self_signed(&["127.0.0.1"]);
    let (cert, key) = (
        cluster.dir.join("webhook.crt"),
        cluster.dir.join("webhook.key"),
    );
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, &key_pem).unwrap();
    // The test's own network namespace: nothing else can take the port in between.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let sluice = cluster.sluice(
        ns,
        &[
            "--validating-webhook",
            &listen,
            "--validating-webhook-certificate",
            cert.to_str().unwrap(),
            "--validating-webhook-key",
            key.to_str().unwrap(),
        ],
    );
    (sluice, listen, cert_pem)
}

#[test]
fn the_admission_webhook_refuses_what_sluice_would_and_warns_about_the_rest() {
    use base64::Engine;
    let ns = "admission";
    let cluster = cluster_with_class("admission", ns);
    let p = pod(&cluster, 11);
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&p]));
    let (_sluice, listen, cert_pem) = sluice_with_webhook(&cluster, ns);
    cluster.create(&serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "sluice-admission"},
        "webhooks": [{
            "name": "validate.sluice.dev",
            "clientConfig": {
                "url": format!("https://{listen}/networking/v1/ingresses"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&cert_pem),
            },
            "rules": [{
                "apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["ingresses"],
            }],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }],
    }));

    // The same path as Ingress web on the same host: refused, with Sluice's reason.
    let write = |name: &str, object: &serde_json::Value| {
        let path = cluster.dir.join(format!("{name}.json"));
        std::fs::write(&path, object.to_string()).unwrap();
        path
    };
    let copy = write(
        "copy",
        &ingress(ns, "copy", Some("sluice"), "web.test", "web"),
    );
    let copy = copy.to_str().unwrap();
    // The API server picks the configuration up within moments: a server-side dry run asks the
    // webhook without storing anything.
    eventually(
        WAIT,
        "the webhook to refuse the conflicting Ingress",
        || {
            let (ok, _) = try_kubectl(&cluster, &["apply", "--dry-run=server", "-f", copy]);
            (!ok).then_some(())
        },
    );
    let (ok, output) = try_kubectl(&cluster, &["apply", "-f", copy]);
    assert!(!ok, "{output}");
    assert!(
        output.contains("denied the request")
            && output.contains("Sluice refuses Ingress admission/copy")
            && output.contains("already routed by Ingress admission/web"),
        "{output}"
    );
    assert!(cluster.get("Ingress", ns, "copy").is_none());

    // A good Ingress passes; an annotation Sluice does not implement comes back as a warning.
    let mut good = ingress(ns, "good", Some("sluice"), "good.test", "web");
    good["metadata"]["annotations"] =
        serde_json::json!({"nginx.ingress.kubernetes.io/http2-push-preload": "true"});
    let good = write("good", &good);
    let (ok, output) = try_kubectl(&cluster, &["apply", "-f", good.to_str().unwrap()]);
    assert!(ok, "{output}");
    assert!(
        output.contains("Warning:") && output.contains("http2-push-preload"),
        "{output}"
    );
    assert!(cluster.get("Ingress", ns, "good").is_some());
}

/// ingress-nginx's chart's admission Jobs' RBAC (templates/admission-webhooks/job-patch, 4.11):
/// Secrets get and create in its namespace, webhook configurations get and update.
const INGRESS_NGINX_ADMISSION_RBAC: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: ingress-nginx-admission, namespace: ingress-nginx}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ingress-nginx-admission}
rules:
  - {apiGroups: [admissionregistration.k8s.io], resources: [validatingwebhookconfigurations], verbs: [get, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ingress-nginx-admission}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ingress-nginx-admission}
subjects: [{kind: ServiceAccount, name: ingress-nginx-admission, namespace: ingress-nginx}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: ingress-nginx-admission, namespace: ingress-nginx}
rules:
  - {apiGroups: [""], resources: [secrets], verbs: [get, create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ingress-nginx-admission, namespace: ingress-nginx}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ingress-nginx-admission}
subjects: [{kind: ServiceAccount, name: ingress-nginx-admission, namespace: ingress-nginx}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: ingress-nginx-admission}
webhooks:
  - name: validate.nginx.ingress.kubernetes.io
    matchPolicy: Equivalent
    rules:
      - {apiGroups: [networking.k8s.io], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [ingresses]}
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: [v1]
    clientConfig:
      service: {name: ingress-nginx-controller-admission, namespace: ingress-nginx, path: /networking/v1/ingresses}
"#;

/// The chart's certificate Jobs with Sluice's image (their args `create …` and `patch …`
/// after the image's entrypoint), as the chart's admission ServiceAccount: the Secret is made
/// once with kube-webhook-certgen's keys and a certificate for every `--host`, its CA lands in
/// the webhook configuration with the failure policy, and what would go wrong says so.
#[test]
fn ingress_nginx_charts_certificate_jobs_run_on_sluices_image() {
    use base64::Engine;
    let cluster = Cluster::start("certgen");
    cluster.create(&namespace("ingress-nginx"));
    let rbac = cluster.dir.join("admission-rbac.yaml");
    std::fs::write(&rbac, INGRESS_NGINX_ADMISSION_RBAC).unwrap();
    cluster.kubectl(&["apply", "-f", rbac.to_str().unwrap()]);
    let kubeconfig = cluster.service_account_kubeconfig("ingress-nginx", "ingress-nginx-admission");
    let job = |args: &[&str]| {
        let output = std::process::Command::new(BIN)
            .args(args)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .env("POD_NAMESPACE", "ingress-nginx")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    };
    let hosts = "ingress-nginx-controller-admission,ingress-nginx-controller-admission.ingress-nginx.svc,10.96.0.10";
    let create = [
        "create",
        &format!("--host={hosts}"),
        "--namespace=ingress-nginx",
        "--secret-name=ingress-nginx-admission",
    ];
    let (ok, out) = job(&create);
    assert!(ok, "{out}");
    assert!(
        out.contains(r#""msg":"Secret ingress-nginx/ingress-nginx-admission: created""#),
        "{out}"
    );

    let secret: serde_json::Value = serde_json::from_str(&cluster.kubectl(&[
        "get",
        "secret",
        "ingress-nginx-admission",
        "-n",
        "ingress-nginx",
        "-o",
        "json",
    ]))
    .unwrap();
    let field = |key: &str| {
        let text = secret["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("data.{key}"));
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap()
    };
    let keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["ca", "cert", "key"]);
    let (ca, cert) = (cluster.dir.join("ca.pem"), cluster.dir.join("cert.pem"));
    std::fs::write(&ca, field("ca")).unwrap();
    std::fs::write(&cert, field("cert")).unwrap();
    // What the API server checks when it calls the Service, and the IP the chart never passes
    // but kube-webhook-certgen takes.
    for check in [
        [
            "-verify_hostname",
            "ingress-nginx-controller-admission.ingress-nginx.svc",
        ],
        ["-verify_ip", "10.96.0.10"],
    ] {
        let status = std::process::Command::new("openssl")
            .args(["verify", "-purpose", "sslserver", "-CAfile"])
            .arg(&ca)
            .args(check)
            .arg(&cert)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openssl verify {check:?}");
    }

    // Again (every `helm upgrade` runs it): the Secret is left as it is.
    let (ok, out) = job(&create);
    assert!(ok, "{out}");
    assert!(
        out.contains("ingress-nginx-admission: already exists"),
        "{out}"
    );
    // For other hosts: still kept (the chart grants no update), and the log says why it will
    // not serve.
    let (ok, out) = job(&[
        "create",
        "--host=other-admission.ingress-nginx.svc",
        "--namespace=ingress-nginx",
        "--secret-name=ingress-nginx-admission",
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains(r#""level":"warn""#)
            && out.contains("not valid for other-admission.ingress-nginx.svc")
            && out.contains("Delete the Secret and run the Job again"),
        "{out}"
    );

    let patch = [
        "patch",
        "--webhook-name=ingress-nginx-admission",
        "--namespace=ingress-nginx",
        "--patch-mutating=false",
        "--secret-name=ingress-nginx-admission",
        "--patch-failure-policy=Fail",
    ];
    let (ok, out) = job(&patch);
    assert!(ok, "{out}");
    assert!(
        out.contains(
            "ValidatingWebhookConfiguration ingress-nginx-admission: caBundle set on 1 webhook(s)"
        ),
        "{out}"
    );
    let webhook: serde_json::Value = serde_json::from_str(&cluster.kubectl(&[
        "get",
        "validatingwebhookconfiguration",
        "ingress-nginx-admission",
        "-o",
        "json",
    ]))
    .unwrap();
    let bundle = webhook["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .unwrap();
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .unwrap(),
        field("ca")
    );
    assert_eq!(webhook["webhooks"][0]["failurePolicy"], "Fail");

    // kube-webhook-certgen's default patches the MutatingWebhookConfiguration too: the chart's
    // RBAC does not reach it, and the error says which object and why.
    let (ok, out) = job(&[
        "patch",
        "--webhook-name=ingress-nginx-admission",
        "--namespace=ingress-nginx",
        "--secret-name=ingress-nginx-admission",
    ]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("reading MutatingWebhookConfiguration ingress-nginx-admission")
            && out.contains("forbidden"),
        "{out}"
    );
    // No Secret yet (the create Job has not run): the patch Job fails, and retries.
    let (ok, out) = job(&[
        "patch",
        "--webhook-name=ingress-nginx-admission",
        "--namespace=ingress-nginx",
        "--patch-mutating=false",
        "--secret-name=missing",
    ]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("no secret with 'missing' in 'ingress-nginx'"),
        "{out}"
    );
}

/// POSTs an AdmissionReview about `object` to the webhook on a connection of its own; the
/// answer's `response.allowed`.
fn ask_webhook(
    listen: &str,
    tls: &std::sync::Arc<rustls::ClientConfig>,
    object: &serde_json::Value,
) -> std::io::Result<bool> {
    use std::io::{Read, Write};
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "1", "operation": "CREATE", "namespace": object["metadata"]["namespace"],
            "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "object": object,
        },
    })
    .to_string();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(tls.clone(), name).unwrap();
    let tcp = std::net::TcpStream::connect(listen)?;
    tcp.set_read_timeout(Some(WAIT))?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    write!(
        stream,
        "POST /networking/v1/ingresses HTTP/1.1\r\nhost: {listen}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let json = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let review: serde_json::Value =
        serde_json::from_str(json).map_err(|e| std::io::Error::other(format!("{e}: {answer}")))?;
    Ok(review["response"]["allowed"] == true)
}

#[test]
fn endpoint_updates_land_while_the_admission_webhook_is_flooded() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let ns = "flood";
    let cluster = cluster_with_class("flood", ns);
    let (a, b) = (pod(&cluster, 11), pod(&cluster, 12));
    cluster.create_app(ns, "web", "web.test", 8080, &ips(&[&a]));
    let (sluice, listen, cert_pem) = sluice_with_webhook(&cluster, ns);
    let tls = tls_client(cert_pem.as_bytes());
    // Checked (refused), so the webhook has the synced Store.
    let copy = ingress(ns, "copy", Some("sluice"), "web.test", "web");
    assert!(!ask_webhook(&listen, &tls, &copy).unwrap());

    // Reviews back to back on 4 connections, and 4 more that hold half a request head each
    // until the webhook closes them, over and over.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut flood = Vec::new();
    for i in 0..8 {
        let (stop, answered, tls, listen, copy) = (
            stop.clone(),
            answered.clone(),
            tls.clone(),
            listen.clone(),
            copy.clone(),
        );
        flood.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if i % 2 == 0 {
                    if let Ok(false) = ask_webhook(&listen, &tls, &copy) {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                } else if let Ok(mut tcp) = std::net::TcpStream::connect(&listen) {
                    use std::io::{Read, Write};
                    let _ = tcp.write_all(&[0x16, 0x03, 0x01]);
                    let _ = tcp.set_read_timeout(Some(Duration::from_millis(200)));
                    let _ = tcp.read(&mut [0; 16]);
                }
            }
        }));
    }
    eventually(WAIT, "the flood's reviews to be answered", || {
        (answered.load(Ordering::Relaxed) >= 10).then_some(())
    });

    // The web Service's only endpoint moves to pod b while the flood goes on.
    cluster.apply(&endpoint_slice(
        ns,
        "web-1",
        "web",
        8080,
        &[Endpoint::ready(b.addr.ip())],
    ));
    sluice.wait_served_by("web.test", "pod-12", WAIT);
    let during = answered.load(Ordering::Relaxed);
    eventually(WAIT, "reviews still answered after the update", || {
        (answered.load(Ordering::Relaxed) > during).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    for thread in flood {
        thread.join().unwrap();
    }
    drop(a);
}

#[test]
fn sluice_migrate_judges_the_ingresses_of_a_live_api() {
    let ns = "migrate";
    let cluster = Cluster::start("migrate");
    cluster.create(&namespace(ns));
    cluster.create(&ingress_class("nginx", "k8s.io/ingress-nginx"));
    cluster.create(&service(ns, "web"));
    cluster.create(&ingress(ns, "plain", Some("nginx"), "plain.test", "web"));
    let mut sticky = ingress(ns, "sticky", Some("nginx"), "sticky.test", "web");
    sticky["metadata"]["annotations"] =
        serde_json::json!({"nginx.ingress.kubernetes.io/http2-push-preload": "true"});
    cluster.create(&sticky);

    let output = std::process::Command::new(BIN)
        .args(["migrate", "--kubernetes", "--kubeconfig"])
        .arg(cluster.admin_kubeconfig())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("2 Ingresses: 1 served as ingress-nginx would, 0 served with differences, 1 not served as written."), "{stdout}");
    assert!(
        stdout.contains("| migrate/plain | served as ingress-nginx would |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| migrate/sticky | not served as written | unsupported: "),
        "{stdout}"
    );
}

#[test]
fn tcp_and_udp_services_follow_their_config_maps() {
    let ns = "streams";
    let cluster = cluster_with_class("streams", ns);
    let (a, b) = (pod(&cluster, 11), pod(&cluster, 12));
    for (name, p) in [("db", &a), ("other", &b)] {
        cluster.create(&service(ns, name));
        cluster.create(&endpoint_slice(
            ns,
            &format!("{name}-1"),
            name,
            8080,
            &[Endpoint::ready(p.addr.ip())],
        ));
    }
    // A UDP Service: its pod answers each datagram with `dns:` and the datagram.
    let dns_ip = cluster.add_address(40);
    udp_echo(std::net::SocketAddr::new(dns_ip, 5353));
    let mut dns_service = service(ns, "dns");
    dns_service["spec"]["ports"] =
        serde_json::json!([{"name": "dns", "port": 53, "protocol": "UDP"}]);
    cluster.create(&dns_service);
    let mut dns_slice = endpoint_slice(ns, "dns-1", "dns", 5353, &[Endpoint::ready(dns_ip)]);
    dns_slice["ports"] = serde_json::json!([{"name": "dns", "port": 5353, "protocol": "UDP"}]);
    cluster.create(&dns_slice);
    let config_map_name = format!("{ns}/tcp-services");
    let udp_config_map_name = format!("{ns}/udp-services");
    let sluice = cluster.sluice(
        ns,
        &[
            "--tcp-services-configmap",
            &config_map_name,
            "--udp-services-configmap",
            &udp_config_map_name,
        ],
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let key = port.to_string();

    // Created after Sluice started: its port opens and reaches the Service's endpoint.
    cluster.create(&config_map(ns, "tcp-services", &[(&key, "streams/db:80")]));
    let reply = eventually(WAIT, "the TCP service to answer", || {
        through_tcp_service(port)
    });
    assert!(reply.contains("Server name: pod-11"), "{reply}");

    // The UDP services ConfigMap, watched by name too: its port answers from the pod.
    let udp_port = free_udp_port();
    cluster.create(&config_map(
        ns,
        "udp-services",
        &[(&udp_port.to_string(), "streams/dns:dns")],
    ));
    let answer = udp_ask(udp_port, b"query");
    assert_eq!(answer, b"dns:query");

    // Updated: the port now leads to the other Service.
    cluster.replace(&config_map(
        ns,
        "tcp-services",
        &[(&key, "streams/other:http")],
    ));
    eventually(WAIT, "the port to reach the other Service", || {
        through_tcp_service(port).filter(|r| r.contains("Server name: pod-12"))
    });
    assert_eq!(
        sluice.get("tcp.test", "/").status,
        404,
        "the HTTP listener is unchanged"
    );

    // Deleted: the port closes.
    cluster.delete("ConfigMap", ns, "tcp-services");
    eventually(WAIT, "the port to close", || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .is_err()
            .then_some(())
    });
}
