//! `compile_reusing`: a compile that reuses the rules of Gateway routes that did not change
//! gives what a full `compile` gives, whatever changed in between (every golden case with
//! Gateway objects, built up and torn down one object at a time), and reuses exactly the routes
//! that did not change.

use std::path::Path;

use translate::{
    compile, compile_reusing, parse_documents, CompileOptions, FragmentCounts, Fragments, Object,
    Store,
};

use crate::golden::options_for;

fn view(compiled: &model::Compiled) -> String {
    serde_yaml::to_string(&compiled.view()).unwrap()
}

/// After each step, the compile through the fragments equals a full compile.
fn same_as_full(store: &Store, options: &CompileOptions, fragments: &mut Fragments, step: &str) {
    let reusing = compile_reusing(store, options, fragments);
    let full = compile(store, options);
    let (reusing_view, full_view) = (view(&reusing), view(&full));
    assert!(
        reusing_view == full_view,
        "{step}: compile_reusing differs:\n{reusing_view}\n--- full ---\n{full_view}"
    );
    // Statuses (attached routes, parents' conditions) are not in the view.
    assert_eq!(reusing.gateway_status, full.gateway_status, "{step}");
}

#[test]
fn golden_gateway_cases_built_and_torn_down_object_by_object() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".in.yaml") && name.starts_with("gateway-")
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "gateway golden cases missing");
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&case).unwrap();
        let options = options_for(&text);
        let objects = parse_documents(&name, &text).unwrap().objects;
        let refs: Vec<_> = objects.iter().map(Object::object_ref).collect();
        let mut store = Store::default();
        let mut fragments = Fragments::default();
        for object in objects {
            let step = format!("{name}: after adding {}", object.object_ref());
            store.apply(object);
            same_as_full(&store, &options, &mut fragments, &step);
        }
        // Each object taken away and put back, the others in place: every object a route's
        // rules may read changes once under routes that stay.
        let objects = parse_documents(&name, &text).unwrap().objects;
        for object in objects {
            let object_ref = object.object_ref();
            store.remove(&object_ref);
            let step = format!("{name}: without {object_ref}");
            same_as_full(&store, &options, &mut fragments, &step);
            store.apply(object);
            let step = format!("{name}: {object_ref} back");
            same_as_full(&store, &options, &mut fragments, &step);
        }
        for object_ref in refs {
            let step = format!("{name}: after removing {object_ref}");
            store.remove(&object_ref);
            same_as_full(&store, &options, &mut fragments, &step);
        }
    }
}

const BASE: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: app}
spec:
  gatewayClassName: sluice
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: app, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}}]
";

fn route(name: &str, header: &str) -> String {
    format!(
        "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: app}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{name}.example.com]
  rules:
  - filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: x-v, value: '{header}'}}]}}}}]
    backendRefs: [{{name: web, port: 80}}]
"
    )
}

fn apply(store: &mut Store, text: &str) {
    for object in parse_documents("test.yaml", text).unwrap().objects {
        store.apply(object);
    }
}

fn counts(reused: usize, compiled: usize) -> FragmentCounts {
    FragmentCounts { reused, compiled }
}

#[test]
fn only_what_changed_is_compiled_again() {
    let options = CompileOptions::default();
    let mut store = Store::default();
    apply(&mut store, BASE);
    for name in ["a", "b", "c"] {
        apply(&mut store, &route(name, "1"));
    }
    let mut fragments = Fragments::default();
    same_as_full(&store, &options, &mut fragments, "first");
    assert_eq!(fragments.counts(), counts(0, 3));
    assert_eq!(fragments.len(), 3);

    // One route changed, one added: those two compiled, the others reused.
    apply(&mut store, &route("b", "2"));
    apply(&mut store, &route("d", "1"));
    same_as_full(&store, &options, &mut fragments, "b changed, d added");
    assert_eq!(fragments.counts(), counts(2, 2));

    // A route removed: its fragment goes with it.
    store.remove(&model::ObjectRef::new(model::Kind::HTTPRoute, "app", "d"));
    same_as_full(&store, &options, &mut fragments, "d removed");
    assert_eq!(fragments.counts(), counts(3, 0));
    assert_eq!(fragments.len(), 3);

    // Endpoints only: no compile at all in the control plane; a compile that happens anyway
    // reuses every route and reads the new endpoints.
    apply(
        &mut store,
        &BASE.replace("10.0.0.1], conditions", "10.0.0.2], conditions"),
    );
    let compiled = compile_reusing(&store, &options, &mut fragments);
    assert_eq!(fragments.counts(), counts(3, 0));
    let endpoints = view(&compiled);
    assert!(endpoints.contains("10.0.0.2:8080"), "{endpoints}");
    assert!(!endpoints.contains("10.0.0.1:8080"), "{endpoints}");

    // What the rules read (a Service) changed: every route compiled again.
    apply(
        &mut store,
        &BASE.replace("targetPort: 8080", "targetPort: 8081"),
    );
    same_as_full(&store, &options, &mut fragments, "service changed");
    assert_eq!(fragments.counts(), counts(0, 3));
}

/// A kept backend's endpoints are read again when its Service's slices changed (also in the
/// same batch as a route change, which the fast path did not take), and only then.
#[test]
fn a_kept_backend_reads_its_endpoints_again_when_its_slices_changed() {
    let options = CompileOptions::default();
    let mut store = Store::default();
    apply(&mut store, BASE);
    apply(&mut store, &route("a", "1"));
    apply(&mut store, &route("b", "1"));
    let mut fragments = Fragments::default();
    same_as_full(&store, &options, &mut fragments, "first");
    let slice = &BASE[BASE.find("apiVersion: discovery.k8s.io/v1").unwrap()..];
    let moved = |address: &str| slice.replace("10.0.0.1]", &format!("{address}]"));

    // A route and the endpoints in one batch.
    apply(&mut store, &route("a", "2"));
    apply(&mut store, &moved("10.0.0.2"));
    same_as_full(
        &store,
        &options,
        &mut fragments,
        "route and endpoints together",
    );
    assert_eq!(fragments.counts(), counts(1, 1));
    let compiled = compile_reusing(&store, &options, &mut fragments);
    assert!(view(&compiled).contains("10.0.0.2:8080"));

    // Every slice gone, then one back.
    let slice_ref = model::ObjectRef::new(model::Kind::EndpointSlice, "app", "web-1");
    store.remove(&slice_ref);
    apply(&mut store, &route("b", "2"));
    same_as_full(&store, &options, &mut fragments, "slices gone");
    let compiled = compile_reusing(&store, &options, &mut fragments);
    assert!(!view(&compiled).contains(":8080"), "{}", view(&compiled));
    apply(&mut store, &moved("10.0.0.3"));
    same_as_full(&store, &options, &mut fragments, "a slice back");
    let compiled = compile_reusing(&store, &options, &mut fragments);
    assert!(view(&compiled).contains("10.0.0.3:8080"));
    assert_eq!(fragments.counts(), counts(2, 0));
}

/// An Ingress compiled before the routes resolves a Service port they share: it takes the last
/// compile's backend, so the configuration keeps one backend per Service port (the one the
/// endpoint fast path refreshes) and the routes' fragments stay usable.
#[test]
fn a_backend_shared_with_an_ingress_stays_one_backend() {
    let options = CompileOptions::default();
    let mut store = Store::default();
    apply(&mut store, BASE);
    apply(&mut store, &route("a", "1"));
    let ingress = "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: legacy, namespace: app}
spec:
  ingressClassName: sluice
  rules: [{host: legacy.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
";
    apply(&mut store, ingress);
    let mut fragments = Fragments::default();
    let first = compile_reusing(&store, &options, &mut fragments);
    let ingress_ref = model::ObjectRef::new(model::Kind::Ingress, "app", "legacy");
    let changed = ingress.replace("legacy.example.com", "old.example.com");
    apply(&mut store, &changed);
    let compiled = compile_reusing(&store, &options, &mut fragments);
    assert_eq!(fragments.counts(), counts(1, 0));
    let head = http::Request::new(()).into_parts().0;
    let backend = |host: &str| {
        let matched = compiled.routes.route(host, "/", &head).expect(host);
        matched.route.backend.clone()
    };
    let (from_route, from_ingress) = (backend("a.example.com"), backend("old.example.com"));
    assert!(std::sync::Arc::ptr_eq(&from_route, &from_ingress));
    let key = from_route.key().unwrap();
    assert!(std::sync::Arc::ptr_eq(&from_route, &first.backends[key]));
    store.remove(&ingress_ref);
    same_as_full(&store, &options, &mut fragments, "ingress removed");
}

/// A route's hosts can change with no change to it or to what its rules read: an older
/// GRPCRoute holding a listener's hostname leaves it the other listener only.
#[test]
fn a_route_whose_hosts_changed_is_compiled_again() {
    let options = CompileOptions::default();
    let mut store = Store::default();
    let base = BASE.replace(
        "listeners: [{name: http, port: 80, protocol: HTTP}]",
        "listeners: [{name: a, port: 80, protocol: HTTP, hostname: a.example.com}, {name: b, port: 80, protocol: HTTP, hostname: b.example.com}]",
    );
    apply(&mut store, &base);
    apply(
        &mut store,
        "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: app}
spec:
  parentRefs: [{name: gw, sectionName: a}, {name: gw, sectionName: b}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: app}
spec:
  parentRefs: [{name: gw, sectionName: a}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
",
    );
    let mut fragments = Fragments::default();
    same_as_full(
        &store,
        &options,
        &mut fragments,
        "the GRPCRoute holds a.example.com",
    );
    assert_eq!(fragments.counts(), counts(0, 2));
    store.remove(&model::ObjectRef::new(
        model::Kind::GRPCRoute,
        "app",
        "grpc",
    ));
    same_as_full(&store, &options, &mut fragments, "the GRPCRoute is gone");
    assert_eq!(fragments.counts(), counts(0, 1));
}

/// A replayed route still counts as using its Service port's BackendTLSPolicy: the policy's
/// ancestors (its status) are the same as after a full compile.
#[test]
fn a_replayed_route_keeps_its_backend_tls_policy_ancestors() {
    use crate::backend_tls::{objects, policy, CA};
    let options = CompileOptions::default();
    let mut store = Store::default();
    let target = "{group: '', kind: Service, name: web, sectionName: https}";
    apply(
        &mut store,
        &objects(&policy("tls", "2026-01-01T00:00:00Z", target, CA)),
    );
    let mut fragments = Fragments::default();
    same_as_full(&store, &options, &mut fragments, "first");
    let status = compile(&store, &options).gateway_status;
    assert_eq!(status.backend_tls_policies.len(), 1, "{status:?}");
    apply(&mut store, &route("unrelated", "1"));
    same_as_full(&store, &options, &mut fragments, "another route added");
    assert_eq!(fragments.counts(), counts(1, 1));
}
