//! How long one full compile takes with thousands of routes (issue 27, item 6: a route created
//! → its first 200 in < 30 ms with 3,000 routes). Every configuration change compiles the whole
//! Store, so this time is a floor under the propagation delay. `#[ignore]`: a measurement, run by
//! hand in release:
//! `cargo test --release -p translate --test translate compile_time -- --ignored --nocapture`
//! (`SLUICE_COMPILE_ROUTES=3000 SLUICE_COMPILE_RUNS=1`: one size, one compile, for a profiler;
//! `SLUICE_COMPILE_KIND="HTTPRoute, a Service each"`: one row's shape;
//! `SLUICE_COMPILE_FULL_RUNS=1 SLUICE_COMPILE_RUNS=500`: mostly the reusing compile;
//! `SLUICE_COMPILE_COLD=1`: caches emptied before each reusing compile, as in a cluster, where
//! the API server and others run between two changes: 0.77 → 2.32 ms at 3,000 routes).

use crate::store_of;
use std::time::{Duration, Instant};

use translate::{compile, compile_reusing, parse_documents, CompileOptions, Fragments, Store};

/// The Service route `r-<i>` goes to: one for all (the shape of `gateway_bench` in
/// crates/sluice/tests/it), or a Service `s-<i>` with an EndpointSlice of its own for each (a
/// cluster's shape).
fn backend_of(i: usize, own_services: bool) -> String {
    if own_services {
        format!("s-{i}")
    } else {
        "probe".to_owned()
    }
}

/// `routes` HTTPRoutes `r-<i>` for host `r-<i>.test` on one Gateway, to `backend_of(i)`.
fn gateway_routes(routes: usize, own_services: bool) -> String {
    let mut text = String::from(
        "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: bench}
spec:
  gatewayClassName: sluice
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}}]
---
apiVersion: v1
kind: Service
metadata: {name: probe, namespace: bench}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
",
    );
    for i in 0..routes {
        let backend = backend_of(i, own_services);
        text.push_str(&format!(
            "---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r-{i}, namespace: bench}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [r-{i}.test]
  rules:
  - filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: x-version, value: '1'}}]}}}}]
    backendRefs: [{{name: {backend}, port: 80}}]
"
        ));
        if own_services {
            let (a, b) = (i / 250, i % 250 + 1);
            text.push_str(&format!(
                "---
apiVersion: v1
kind: Service
metadata: {{name: {backend}, namespace: bench}}
spec: {{ports: [{{name: http, port: 80, targetPort: 8080}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {backend}-1, namespace: bench, labels: {{kubernetes.io/service-name: {backend}}}}}
addressType: IPv4
ports: [{{name: http, port: 8080, protocol: TCP}}]
endpoints: [{{addresses: [10.1.{a}.{b}], conditions: {{ready: true}}}}, {{addresses: [10.2.{a}.{b}], conditions: {{ready: true}}}}]
"
            ));
        }
    }
    text
}

/// The same shape as Ingresses of class `sluice`.
fn ingress_routes(routes: usize) -> String {
    let mut text = String::from(
        "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: probe, namespace: bench}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
",
    );
    for i in 0..routes {
        text.push_str(&format!(
            "---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: r-{i}, namespace: bench}}
spec:
  ingressClassName: sluice
  rules: [{{host: r-{i}.test, http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: probe, port: {{number: 80}}}}}}}}]}}}}]
"
        ));
    }
    text
}

/// The medians of `runs` compiles and of freeing their results (what the proxy's reclaim
/// thread takes off the workers), and the host count as a check that every route compiled.
fn median_compile(store: &Store, runs: usize) -> (Duration, Duration, usize) {
    let options = CompileOptions::default();
    let mut times = Vec::with_capacity(runs);
    let mut frees = Vec::with_capacity(runs);
    let mut hosts = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let compiled = compile(store, &options);
        times.push(started.elapsed());
        hosts = compiled.routes.hosts().len();
        let started = Instant::now();
        drop(compiled);
        frees.push(started.elapsed());
    }
    times.sort();
    frees.sort();
    (times[runs / 2], frees[runs / 2], hosts)
}

/// The median compile after one HTTPRoute of the Store changed, through the last compile's
/// fragments (what the control plane does), and how many routes each such compile reused.
fn median_one_route_changed(
    store: &mut Store,
    runs: usize,
    own_services: bool,
) -> (Duration, usize) {
    let options = CompileOptions::default();
    let mut fragments = Fragments::default();
    compile_reusing(store, &options, &mut fragments);
    let mut times = Vec::with_capacity(runs);
    let backend = backend_of(0, own_services);
    // SLUICE_COMPILE_COLD=1: 64 MiB written between compiles, so each starts with cold caches.
    let mut thrash = std::env::var_os("SLUICE_COMPILE_COLD").map(|_| vec![0u8; 64 << 20]);
    for run in 0..runs {
        let changed = format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r-0, namespace: bench}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [r-0.test]
  rules:
  - filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: x-version, value: '{run}'}}]}}}}]
    backendRefs: [{{name: {backend}, port: 80}}]
"
        );
        for object in parse_documents("change.yaml", &changed).unwrap().objects {
            store.apply(object);
        }
        if let Some(thrash) = &mut thrash {
            // What other processes do to the caches between two changes in a cluster.
            for (i, byte) in thrash.iter_mut().enumerate().step_by(64) {
                *byte = byte.wrapping_add(i as u8);
            }
            std::hint::black_box(&thrash);
        }
        let started = Instant::now();
        let compiled = compile_reusing(store, &options, &mut fragments);
        times.push(started.elapsed());
        drop(compiled);
        assert_eq!(fragments.counts().compiled, 1, "{:?}", fragments.counts());
    }
    times.sort();
    (times[runs / 2], fragments.counts().reused)
}

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn full_compile_time_by_route_count() {
    println!("| routes | kind | median compile | one route changed (reused) | median free | hosts served |");
    println!("|---:|---|---:|---:|---:|---:|");
    // SLUICE_COMPILE_ROUTES=3000 measures one size (e.g. under callgrind).
    let sizes: Vec<usize> = match std::env::var("SLUICE_COMPILE_ROUTES") {
        Ok(sizes) => sizes
            .split(',')
            .map(|n| n.trim().parse().unwrap())
            .collect(),
        Err(_) => vec![1, 1_000, 3_000, 5_000],
    };
    let runs = std::env::var("SLUICE_COMPILE_RUNS").map_or(9, |n| n.parse().unwrap());
    for routes in sizes {
        for (kind, text) in [
            ("HTTPRoute", gateway_routes(routes, false)),
            ("HTTPRoute, a Service each", gateway_routes(routes, true)),
            ("Ingress", ingress_routes(routes)),
        ] {
            let mut store = store_of(&text);
            if std::env::var("SLUICE_COMPILE_KIND").is_ok_and(|k| k != kind) {
                continue;
            }
            let full_runs =
                std::env::var("SLUICE_COMPILE_FULL_RUNS").map_or(runs, |n| n.parse().unwrap());
            let (compile, free, hosts) = median_compile(&store, full_runs);
            assert!(hosts >= routes, "{kind}: {hosts} hosts for {routes} routes");
            let changed = match kind {
                "HTTPRoute" | "HTTPRoute, a Service each" => {
                    let own_services = kind != "HTTPRoute";
                    let (time, reused) = median_one_route_changed(&mut store, runs, own_services);
                    format!("{:.2} ms ({reused})", time.as_secs_f64() * 1e3)
                }
                _ => "-".to_owned(),
            };
            println!(
                "| {routes} | {kind} | {:.2} ms | {changed} | {:.2} ms | {hosts} |",
                compile.as_secs_f64() * 1e3,
                free.as_secs_f64() * 1e3
            );
        }
    }
}
