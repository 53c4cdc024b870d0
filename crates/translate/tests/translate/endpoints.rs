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
