//! `sluice serve --kubernetes` end to end against a real kube-apiserver + etcd, each test in a
//! network namespace of its own (see support/kube.rs): real objects in, real traffic out.

mod support;

use std::time::Duration;

use support::kube::*;
use support::*;

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
    cluster.create(&service(ns, "web"));
    cluster.create(&endpoint_slice(
        ns,
        "web-1",
        "web",
        8080,
        &[Endpoint::ready(ip)],
    ));
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
