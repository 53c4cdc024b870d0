//! Where configuration memory goes (issue 15): the bench-kube shape (10,000 Ingresses, 5,000
//! Services with one EndpointSlice of 10 endpoints each) built in this process, with RSS read
//! from /proc after each stage. `#[ignore]`: a measurement, run by hand:
//! `cargo test --release -p model --test memory -- --ignored --nocapture`.

use model::{compile, CompileOptions, Object, Store};

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

fn objects(ingresses: usize, services: usize, per_service: usize) -> Vec<Object> {
    let ns = "scale";
    let mut objects = Vec::new();
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    let mut slices = Vec::new();
    for s in 0..services {
        let name = format!("svc-{s}");
        let mut service = serde_json::json!({
            "apiVersion": "v1", "kind": "Service", "metadata": meta(ns, &name, next()),
            "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                     "clusterIP": format!("10.96.{}.{}", s / 250, s % 250), "type": "ClusterIP",
                     "selector": {"app": name}},
        });
        service["metadata"]["labels"] = serde_json::json!({"app": name});
        objects.push(Object::Service(serde_json::from_value(service).unwrap()));
        let endpoints: Vec<serde_json::Value> = (0..per_service)
            .map(|e| {
                let i = s * per_service + e;
                serde_json::json!({
                    "addresses": [format!("10.{}.{}.{}", i / 65_536, i / 256 % 256, i % 256)],
                    "conditions": {"ready": true, "serving": true, "terminating": false},
                })
            })
            .collect();
        let mut slice_meta = meta(ns, &format!("{name}-1"), next());
        slice_meta["labels"] = serde_json::json!({"kubernetes.io/service-name": name});
        slices.push(Object::EndpointSlice(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": slice_meta, "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": endpoints,
            }))
            .unwrap(),
        ));
    }
    objects.extend(slices);
    for i in 0..ingresses {
        objects.push(Object::Ingress(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": meta(ns, &format!("ing-{i}"), next()),
                "spec": {"ingressClassName": "sluice", "rules": [{"host": format!("ing-{i}.test"), "http": {"paths": [{
                    "path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": format!("svc-{}", i % services), "port": {"name": "http"}}},
                }]}}]},
            }))
            .unwrap(),
        ));
    }
    objects.push(Object::IngressClass(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "sluice"}, "spec": {"controller": "sluice.dev/ingress-controller"},
        }))
        .unwrap(),
    ));
    objects
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn configuration_memory_by_stage() {
    let (ingresses, services, per_service) = (10_000, 5_000, 10);
    let start = rss_kib();
    let all = objects(ingresses, services, per_service);
    let parsed = rss_kib();
    println!(
        "{} objects parsed (held in one Vec: the transient a list costs): {} KiB",
        all.len(),
        parsed - start
    );
    // Stored kind by kind (the Vec is in Service, EndpointSlice, Ingress order), the RSS
    // growth of each: the Store's own cost, as the Vec's memory is released only at its end.
    let mut store = Store::default();
    let mut last = parsed;
    let mut counted = 0;
    let mut kind = None;
    let report = |name: &str, n: usize, now: u64, last: &mut u64| {
        println!(
            "  store += {n} {name}: {} KiB ({:.0} B each)",
            now.saturating_sub(*last),
            now.saturating_sub(*last) as f64 * 1024.0 / n as f64
        );
        *last = now;
    };
    let name = |object: &Object| match object {
        Object::Service(_) => "Services",
        Object::EndpointSlice(_) => "EndpointSlices",
        Object::Ingress(_) => "Ingresses",
        _ => "others",
    };
    for object in all {
        let this = name(&object);
        if kind.is_some_and(|k| k != this) {
            report(kind.unwrap(), counted, rss_kib(), &mut last);
            counted = 0;
        }
        kind = Some(this);
        counted += 1;
        store.apply(object);
    }
    let stored = rss_kib();
    let first = compile(&store, &CompileOptions::default());
    assert!(
        first.diagnostics.is_empty(),
        "{:?}",
        &first.diagnostics[..3]
    );
    assert_eq!(first.ingresses.len(), ingresses);
    let compiled = rss_kib();
    println!(
        "compiled: {} KiB ({:.0} B per Ingress; {} endpoints)",
        compiled - stored,
        (compiled - stored) as f64 * 1024.0 / ingresses as f64,
        services * per_service
    );
    drop(first);
    let _second = compile(&store, &CompileOptions::default());
    println!(
        "after a recompile: {} KiB above the store",
        rss_kib() - stored
    );
}
