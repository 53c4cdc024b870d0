//! Where configuration memory goes (issue 15): the bench-kube shape (10,000 Ingresses, 5,000
//! Services with one EndpointSlice of 10 endpoints each) built in this process, with RSS read
//! from /proc after each stage. `#[ignore]`: a measurement, run by hand:
//! `cargo test --release -p translate --test translate memory -- --ignored --nocapture`.
//!
//! Objects are made and stored one at a time, as the Kubernetes provider does, so each stage's
//! RSS growth is what the Store keeps of that kind (the API object is a transient of one).
//! Nothing is freed between stages, so growth is allocation, not reuse.

use std::net::SocketAddr;

use model::EndpointSet;
use translate::{compile, CompileOptions, Object, Store};

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

/// The metadata the API server adds (uid, resourceVersion, creationTimestamp, generation);
/// managedFields and last-applied are dropped by the provider before the Store.
fn meta(ns: &str, name: &str, n: usize) -> serde_json::Value {
    serde_json::json!({
        "name": name, "namespace": ns,
        "uid": format!("6f0d2c1e-8a3b-4c5d-9e7f-{n:012}"),
        "resourceVersion": format!("{}", 100_000 + n),
        "creationTimestamp": "2026-11-24T02:58:00Z",
        "generation": 1,
    })
}

/// Service `s` as the API server returns it (defaults filled in).
fn service(s: usize) -> Object {
    let name = format!("svc-{s}");
    let mut service = serde_json::json!({
        "apiVersion": "v1", "kind": "Service", "metadata": meta("scale", &name, s),
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                 "clusterIP": format!("10.96.{}.{}", s / 250, s % 250),
                 "clusterIPs": [format!("10.96.{}.{}", s / 250, s % 250)],
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "internalTrafficPolicy": "Cluster", "sessionAffinity": "None",
                 "type": "ClusterIP", "selector": {"app": name}},
        "status": {"loadBalancer": {}},
    });
    service["metadata"]["labels"] = serde_json::json!({"app": name});
    Object::from(serde_json::from_value::<k8s_openapi::api::core::v1::Service>(service).unwrap())
}

/// The EndpointSlice of Service `s`, `per_service` ready endpoints, as the EndpointSlice
/// controller writes it (Pod references, node names, zones).
fn slice(s: usize, per_service: usize) -> Object {
    let name = format!("svc-{s}");
    let endpoints: Vec<serde_json::Value> = (0..per_service)
        .map(|e| {
            let i = s * per_service + e;
            serde_json::json!({
                "addresses": [format!("10.{}.{}.{}", i / 65_536, i / 256 % 256, i % 256)],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": format!("node-{}", i % 50), "zone": "zone-a",
                "targetRef": {"kind": "Pod", "namespace": "scale", "name": format!("{name}-{e}"),
                              "uid": format!("7a1d2c1e-8a3b-4c5d-9e7f-{i:012}")},
            })
        })
        .collect();
    let mut slice_meta = meta("scale", &format!("{name}-1"), s);
    slice_meta["labels"] = serde_json::json!({"kubernetes.io/service-name": name,
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"});
    Object::from(
        serde_json::from_value::<k8s_openapi::api::discovery::v1::EndpointSlice>(
            serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": slice_meta, "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": endpoints,
            }),
        )
        .unwrap(),
    )
}

fn ingress(i: usize, services: usize) -> Object {
    Object::from(
        serde_json::from_value::<k8s_openapi::api::networking::v1::Ingress>(serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": meta("scale", &format!("ing-{i}"), i),
            "spec": {"ingressClassName": "sluice", "rules": [{"host": format!("ing-{i}.test"), "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": format!("svc-{}", i % services), "port": {"name": "http"}}},
            }]}}]},
        }))
        .unwrap(),
    )
}

fn class() -> Object {
    Object::from(
        serde_json::from_value::<k8s_openapi::api::networking::v1::IngressClass>(
            serde_json::json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                "metadata": {"name": "sluice"}, "spec": {"controller": "sluice.dev/ingress-controller"},
            }),
        )
        .unwrap(),
    )
}

/// Grows the Store by `n` objects made by `make`; prints the RSS growth per object.
fn stage(store: &mut Store, what: &str, n: usize, make: impl Fn(usize) -> Object) -> u64 {
    let before = rss_kib();
    for i in 0..n {
        store.apply(make(i));
    }
    let grown = rss_kib().saturating_sub(before);
    println!(
        "  store += {n} {what}: {grown} KiB ({:.0} B each)",
        grown as f64 * 1024.0 / n as f64
    );
    grown
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn configuration_memory_by_stage() {
    use translate::objects;
    println!(
        "sizes: Object {} B; Ingress {}, Service {}, EndpointSlice {}, Endpoint {}; Route {}, \
         PathRoute {}, HostRoutes {}, Backend {}",
        std::mem::size_of::<Object>(),
        std::mem::size_of::<objects::Ingress>(),
        std::mem::size_of::<objects::Service>(),
        std::mem::size_of::<objects::EndpointSlice>(),
        std::mem::size_of::<objects::Endpoint>(),
        std::mem::size_of::<model::Route>(),
        std::mem::size_of::<model::routes::PathRoute>(),
        std::mem::size_of::<model::routes::HostRoutes>(),
        std::mem::size_of::<model::Backend>(),
    );
    let (ingresses, services, per_service) = (10_000, 5_000, 10);
    let endpoints = services * per_service;
    let start = rss_kib();
    let mut store = Store::default();
    store.apply(class());
    let mut stored = 0;
    stored += stage(&mut store, "Services", services, service);
    stored += stage(&mut store, "Ingresses", ingresses, |i| ingress(i, services));

    // The compiled configuration without endpoints (every backend empty): what routes cost.
    let before = rss_kib();
    let routes_only = compile(&store, &CompileOptions::default());
    let routes = rss_kib().saturating_sub(before);
    assert_eq!(routes_only.ingresses.len(), ingresses);
    println!(
        "compiled, no endpoints: {routes} KiB ({:.0} B per Ingress)",
        routes as f64 * 1024.0 / ingresses as f64
    );

    let slices = stage(&mut store, "EndpointSlices", services, |s| {
        slice(s, per_service)
    });
    stored += slices;
    println!(
        "  ({:.0} B per endpoint in the Store)",
        slices as f64 * 1024.0 / endpoints as f64
    );
    println!("store: {stored} KiB (process {} KiB)", rss_kib() - start);

    let before = rss_kib();
    let first = compile(&store, &CompileOptions::default());
    let compiled = rss_kib().saturating_sub(before);
    assert!(
        first.diagnostics.is_empty(),
        "{:?}",
        &first.diagnostics[..3]
    );
    assert_eq!(first.ingresses.len(), ingresses);
    let in_sets: usize = first
        .backends
        .values()
        .map(|b| b.with_endpoints(|set| set.ready.len()))
        .sum();
    assert_eq!(in_sets, endpoints);
    println!(
        "compiled with endpoints: {compiled} KiB; {:.0} B per endpoint above the routes \
         (an EndpointSet holds {} B per address, {} B per set)",
        compiled.saturating_sub(routes) as f64 * 1024.0 / endpoints as f64,
        std::mem::size_of::<SocketAddr>(),
        std::mem::size_of::<EndpointSet>(),
    );
    drop(routes_only);
    drop(first);
    let _second = compile(&store, &CompileOptions::default());
    println!(
        "after two recompiles: {} KiB above the start",
        rss_kib() - start
    );
}
