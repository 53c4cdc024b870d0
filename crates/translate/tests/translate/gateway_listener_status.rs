//! Listener status as the spec and the conformance suite want it: a listener with an unusable
//! certificate is kept (supportedKinds, attached routes counted) with ResolvedRefs False and the
//! spec's reason, not programmed; its Gateway stays Accepted and Programmed. Listeners that
//! admit routes by namespace label; rule timeouts refused with the field named.

use model::gateway_status::{Condition, GatewayStatuses, ListenerStatus};
use model::NamespacedName;
use translate::{compile, parse_documents, CompileOptions, Compiled, Store};

use crate::gateway_status::find;

pub(crate) fn compiled(text: &str) -> Compiled {
    let documents = parse_documents("t.yaml", text).unwrap();
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    let mut store = Store::default();
    store.replace_all(documents.objects);
    compile(&store, &CompileOptions::default())
}

fn state(conditions: &[Condition], type_: &str) -> (bool, &'static str) {
    let c = find(conditions, type_);
    (c.status, c.reason)
}

fn listener<'a>(status: &'a GatewayStatuses, gateway: &str, name: &str) -> &'a ListenerStatus {
    let gateway = &status.gateways[&NamespacedName::new("infra", gateway)];
    gateway.listeners.iter().find(|l| l.name == name).unwrap()
}

const CERTIFICATES: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: missing, namespace: infra}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: nowhere}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: kinds, namespace: infra}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: group, port: 443, protocol: HTTPS, hostname: g.test,
     tls: {certificateRefs: [{group: wrong.example.com, kind: Secret, name: x}]}}
  - {name: kind, port: 443, protocol: HTTPS, hostname: k.test,
     tls: {certificateRefs: [{group: '', kind: WrongKind, name: x}]}}
  - {name: malformed, port: 443, protocol: HTTPS, hostname: m.test,
     tls: {certificateRefs: [{name: malformed}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: foreign, namespace: infra}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: https, port: 443, protocol: HTTPS, hostname: f.test,
     tls: {certificateRefs: [{name: certificate, namespace: certs}]}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: wrong-kind, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: infra}]
  to: [{group: '', kind: Secret}]
---
apiVersion: v1
kind: Secret
metadata: {name: malformed, namespace: infra}
type: kubernetes.io/tls
data: {tls.crt: bm90IGEgY2VydGlmaWNhdGU=, tls.key: bm90IGEga2V5}
---
apiVersion: v1
kind: Secret
metadata: {name: certificate, namespace: certs}
type: kubernetes.io/tls
data: {tls.crt: bm90IGEgY2VydGlmaWNhdGU=, tls.key: bm90IGEga2V5}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: infra}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: unresolved, namespace: infra}
spec:
  parentRefs: [{name: missing, sectionName: https}]
  rules: [{backendRefs: [{name: does-not-exist, port: 8080}]}]
";

#[test]
fn a_listener_without_a_usable_certificate_is_kept_not_programmed_with_the_specs_reason() {
    let compiled = compiled(CERTIFICATES);
    let status = &compiled.gateway_status;
    let cases = [
        ("missing", "https", "InvalidCertificateRef"),
        ("kinds", "group", "InvalidCertificateRef"),
        ("kinds", "kind", "InvalidCertificateRef"),
        ("kinds", "malformed", "InvalidCertificateRef"),
        ("foreign", "https", "RefNotPermitted"),
    ];
    for (gateway, name, reason) in cases {
        let at = format!("{gateway}/{name}");
        let listener = listener(status, gateway, name);
        let conditions = &listener.conditions;
        assert_eq!(state(conditions, "Accepted"), (true, "Accepted"), "{at}");
        assert_eq!(state(conditions, "ResolvedRefs"), (false, reason), "{at}");
        assert_eq!(state(conditions, "Programmed"), (false, "Invalid"), "{at}");
        let kinds: Vec<&str> = listener.supported_kinds.iter().map(|k| k.kind).collect();
        assert_eq!(kinds, ["HTTPRoute", "GRPCRoute"], "{at}");
        let gateway = &status.gateways[&NamespacedName::new("infra", gateway)];
        // The suite waits for these Gateways to be Accepted and Programmed before it looks at
        // their listeners.
        assert!(find(&gateway.conditions, "Accepted").status, "{at}");
        assert!(find(&gateway.conditions, "Programmed").status, "{at}");
    }
    // No certificate was taken from any of them.
    assert!(compiled.certificates.sources().is_empty());

    // A route on the listener is attached and counted, its own refs judged, nothing served.
    assert_eq!(listener(status, "missing", "https").attached_routes, 1);
    let route = &status.http_routes[&NamespacedName::new("infra", "unresolved")];
    let conditions = &route.parents[0].conditions;
    assert_eq!(state(conditions, "Accepted"), (true, "Accepted"));
    assert_eq!(
        state(conditions, "ResolvedRefs"),
        (false, "BackendNotFound")
    );
}

#[test]
fn listeners_admit_routes_by_namespace_label_and_timeouts_are_checked() {
    let text = include_str!("../golden/gateway-namespaces-timeouts.in.yaml");
    let compiled = compiled(text);
    assert!(compiled.namespace_selectors);
    let status = &compiled.gateway_status;
    let route = |namespace: &str, name: &str| {
        &status.http_routes[&NamespacedName::new(namespace, name)].parents
    };
    let accepted = |namespace: &str, name: &str, parent: usize| {
        state(&route(namespace, name)[parent].conditions, "Accepted")
    };
    assert_eq!(accepted("web-prod", "app", 0), (true, "Accepted"));
    assert_eq!(accepted("undescribed", "app", 0), (true, "Accepted"));
    let refused = (false, "NotAllowedByListeners");
    assert_eq!(accepted("web-dev", "app", 0), refused, "env NotIn [dev]");
    assert_eq!(accepted("web-prod", "named", 0), refused, "another name");
    assert_eq!(
        accepted("web-prod", "named", 1),
        refused,
        "a malformed selector"
    );
    assert_eq!(listener(status, "edge", "by-label").attached_routes, 1);
    assert_eq!(listener(status, "edge", "by-name").attached_routes, 1);
    assert_eq!(listener(status, "edge", "secure").attached_routes, 1);

    // Both refused timeouts name their field; the rules answer 503, said as PartiallyInvalid.
    let partial = find(
        &route("infra", "timeouts")[0].conditions,
        "PartiallyInvalid",
    );
    assert!(partial.status);
    for field in [
        "spec.rules[2].timeouts.backendRequest \"5s\": must not exceed timeouts.request \"1s\"",
        "spec.rules[3].timeouts.request \"1d\": not a duration",
    ] {
        assert!(partial.message.contains(field), "{}", partial.message);
    }
    assert!(compiled.diagnostics.iter().any(|d| d
        .reason
        .contains("selector.matchExpressions[0]: In needs values")));
}

#[test]
fn a_change_of_namespace_labels_compiles_again_only_while_a_listener_selects_by_label() {
    let namespace = |env: &str| {
        let text = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: web-prod, labels: {{team: web, env: {env}}}}}\n"
        );
        parse_documents("ns.yaml", &text).unwrap().objects.remove(0)
    };
    let mut store = Store::default();
    store.apply(namespace("prod"));
    let changes = store.apply(namespace("dev"));
    assert!(changes.namespaces && !changes.config);
    let selecting = compiled(include_str!(
        "../golden/gateway-namespaces-timeouts.in.yaml"
    ));
    let not_selecting = compiled("");
    assert!(changes.needs_compile(Some(&selecting)));
    assert!(!changes.needs_compile(Some(&not_selecting)));
    assert!(changes.needs_compile(None));
    // The same labels again: no change at all.
    assert!(store.apply(namespace("dev")).is_empty());
    assert_eq!(
        store.namespace_labels("web-prod").unwrap()["kubernetes.io/metadata.name"],
        "web-prod",
        "the API server's label, added to a file's Namespace"
    );
}
