//! The node-local endpoint policy holds on both paths that read EndpointSlices: `compile()` and
//! the endpoint fast path (`translate::refresh_endpoints`), which bypasses compile.

use model::NodeLocalEndpoints;
use translate::{compile, parse_documents, refresh_endpoints, CompileOptions, Store};

const SERVICE_AND_INGRESS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: sluice
  defaultBackend: {service: {name: web, port: {name: http}}}
"#;

fn slice(addresses: &str) -> String {
    format!(
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: web-a, namespace: default, labels: {{kubernetes.io/service-name: web}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: 8080}}]\n\
         endpoints: [{{addresses: [{addresses}]}}]\n"
    )
}

fn objects(text: &str) -> Vec<translate::Object> {
    let documents = parse_documents("t.yaml", text).unwrap();
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    documents.objects
}

fn addresses(list: &[std::net::SocketAddr]) -> Vec<String> {
    list.iter().map(ToString::to_string).collect()
}

#[test]
fn the_endpoint_fast_path_applies_the_policy_compile_used() {
    for (policy, ready_after, refused_after) in [
        (
            NodeLocalEndpoints::Refuse,
            vec!["10.0.0.2:8080"],
            vec!["127.0.0.1:8080", "169.254.169.254:8080"],
        ),
        (
            NodeLocalEndpoints::Allow,
            vec!["10.0.0.2:8080", "127.0.0.1:8080", "169.254.169.254:8080"],
            vec![],
        ),
    ] {
        let options = CompileOptions {
            node_local_endpoints: policy,
            ..CompileOptions::default()
        };
        let mut store = Store::default();
        store.replace_all(objects(&format!(
            "{SERVICE_AND_INGRESS}{}",
            slice("10.0.0.1")
        )));
        let compiled = compile(&store, &options);
        assert!(
            compiled.diagnostics.is_empty(),
            "{:?}",
            compiled.diagnostics
        );
        let backend = compiled.backends.values().next().unwrap().clone();
        assert_eq!(addresses(&backend.endpoints().ready), ["10.0.0.1:8080"]);

        // Only the slice changes: the fast path, no compile.
        let changes = store.replace_all(objects(&format!(
            "{SERVICE_AND_INGRESS}{}",
            slice("10.0.0.2, 127.0.0.1, 169.254.169.254")
        )));
        assert!(!changes.config, "an endpoint-only change");
        let changed = refresh_endpoints(&compiled, &store, &changes.endpoints);
        assert_eq!(changed.len(), 1, "{policy:?}");
        let now = backend.endpoints();
        assert_eq!(addresses(&now.ready), ready_after, "{policy:?}");
        let refused: Vec<String> = now.refused.iter().map(|r| r.address.to_string()).collect();
        assert_eq!(refused, refused_after, "{policy:?}");

        // A full compile of the same Store agrees with the fast path.
        let recompiled = compile(&store, &options);
        let again = recompiled.backends.values().next().unwrap().endpoints();
        assert_eq!(*again, *now, "{policy:?}");
    }
}

const EXTERNAL_NAME: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: api, namespace: default}
spec: {type: ExternalName, externalName: api.example.com, ports: [{name: https, port: 443, targetPort: 8443}]}
---
apiVersion: v1
kind: Service
metadata: {name: unused, namespace: default}
spec: {type: ExternalName, externalName: unused.example.com}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: api, namespace: default}
spec:
  ingressClassName: sluice
  defaultBackend: {service: {name: api, port: {number: 443}}}
"#;

#[test]
fn an_external_names_addresses_reach_its_backends_on_the_fast_path() {
    let options = CompileOptions {
        node_local_endpoints: NodeLocalEndpoints::Refuse,
        ..CompileOptions::default()
    };
    let mut store = Store::default();
    store.replace_all(objects(EXTERNAL_NAME));
    let compiled = compile(&store, &options);
    assert!(
        compiled.diagnostics.is_empty(),
        "{:?}",
        compiled.diagnostics
    );
    // Only the name a backend needs is asked for.
    let wanted = translate::names_to_resolve(&store, &compiled);
    assert_eq!(wanted.into_iter().collect::<Vec<_>>(), ["api.example.com"]);
    let backend = compiled.backends.values().next().unwrap().clone();
    assert!(backend.endpoints().ready.is_empty(), "nothing resolved yet");

    // The resolver answers: the Service's endpoints change, at the port's targetPort; a
    // node-local address is refused there as in a slice.
    let ip = |s: &str| -> std::net::IpAddr { s.parse().unwrap() };
    let changes = store.set_resolved(
        "api.example.com",
        vec![
            ip("192.0.2.2"),
            ip("192.0.2.1"),
            ip("127.0.0.1"),
            ip("192.0.2.1"),
        ],
        None,
    );
    assert!(!changes.config);
    // The Service of that name, and the key of backends that dial the name itself (a URL
    // annotation's host; none here).
    let services: Vec<String> = changes.endpoints.iter().map(ToString::to_string).collect();
    assert_eq!(services, ["/dns:api.example.com", "default/api"]);
    let changed = refresh_endpoints(&compiled, &store, &changes.endpoints);
    assert_eq!(changed.len(), 1);
    let now = backend.endpoints();
    assert_eq!(addresses(&now.ready), ["192.0.2.1:8443", "192.0.2.2:8443"]);
    assert_eq!(addresses(&[now.refused[0].address]), ["127.0.0.1:8443"]);
    assert!(now.refused[0]
        .source
        .contains("ExternalName api.example.com"));

    // The same answer again is no change; no address at all empties the backend.
    let same = vec![ip("192.0.2.1"), ip("192.0.2.2"), ip("127.0.0.1")];
    assert!(store.set_resolved("api.example.com", same, None).is_empty());
    let why = "host name api.example.com has no address".to_owned();
    let changes = store.set_resolved("api.example.com", Vec::new(), Some(why.clone()));
    refresh_endpoints(&compiled, &store, &changes.endpoints);
    assert!(backend.endpoints().ready.is_empty());
    // What the resolver said is the backend's, and a diagnostic on the Ingress that uses it.
    assert_eq!(
        backend.endpoints().resolution.as_deref(),
        Some(why.as_str())
    );
    let said: Vec<String> = (compiled.endpoint_diagnostics().iter())
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        said,
        [format!(
            "Ingress default/api: backend default/api:https: {why}"
        )]
    );

    // The Service moves to another name: a compile reads that name's addresses, not the
    // old name's (its endpoints version moved with the object).
    store.set_resolved("api.example.com", vec![ip("192.0.2.1")], None);
    store.set_resolved("other.example.com", vec![ip("198.51.100.7")], None);
    let before = store.endpoints_version(&model::NamespacedName::new("default", "api"));
    let moved = EXTERNAL_NAME.replace(
        "externalName: api.example.com",
        "externalName: other.example.com",
    );
    let changes = store.replace_all(objects(&moved));
    assert!(changes.config);
    assert_ne!(
        store.endpoints_version(&model::NamespacedName::new("default", "api")),
        before
    );
    let recompiled = compile(&store, &options);
    let backend = recompiled.backends.values().next().unwrap();
    assert_eq!(addresses(&backend.endpoints().ready), ["198.51.100.7:8443"]);
    // Names no backend needs are forgotten, so one that comes back is asked first.
    store.retain_resolved(&translate::names_to_resolve(&store, &recompiled));
    assert!(store.resolved_addresses("api.example.com").is_none());
    assert!(store.resolved_addresses("other.example.com").is_some());
}
