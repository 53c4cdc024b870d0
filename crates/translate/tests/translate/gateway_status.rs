//! Gateway API status as `compile()` decides it: the conditions and reasons the Kubernetes
//! provider writes, from the same decisions the diagnostics describe.

use model::gateway_status::{Condition, GatewayStatuses};
use model::NamespacedName;
use translate::{compile, parse_documents, CompileOptions, Store};

pub(crate) fn statuses(text: &str) -> GatewayStatuses {
    let documents = parse_documents("t.yaml", text).unwrap();
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    let mut store = Store::default();
    store.replace_all(documents.objects);
    (*compile(&store, &CompileOptions::default()).gateway_status).clone()
}

pub(crate) fn find<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} in {conditions:?}"))
}

const OBJECTS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice, generation: 2}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: app, generation: 5}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: again, port: 80, protocol: HTTP}
  - {name: alt, port: 8080, protocol: HTTP}
  - {name: custom, port: 53, protocol: example.com/custom}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: good, namespace: app, generation: 7}
spec:
  parentRefs: [{name: edge, sectionName: http}, {name: edge, port: 8080}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: missing, namespace: app}
spec:
  parentRefs: [{name: edge, sectionName: http}]
  rules:
  - backendRefs: [{name: web, port: 80}, {name: gone, port: 80}]
  - matches: [{path: {value: /cors}}]
    filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Filter, name: x}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: outsider, namespace: elsewhere}
spec:
  parentRefs: [{name: edge, namespace: app}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: theirs, namespace: app}
spec:
  parentRefs: [{name: someone-elses}]
";

#[test]
fn classes_gateways_listeners_and_route_parents_get_the_specs_conditions() {
    let status = statuses(OBJECTS);
    assert_eq!(status.classes.keys().collect::<Vec<_>>(), ["sluice"]);
    let class = find(&status.classes["sluice"].conditions, "Accepted");
    assert!(class.status);
    assert_eq!(class.observed_generation, 2);

    let gateway = &status.gateways[&NamespacedName::new("app", "edge")];
    let accepted = find(&gateway.conditions, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason),
        (true, "ListenersNotValid")
    );
    assert_eq!(accepted.observed_generation, 5);
    assert!(find(&gateway.conditions, "Programmed").status);
    let names: Vec<&str> = gateway.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["http", "again", "alt", "custom"]);
    let [http, again, alt, custom] = &gateway.listeners[..] else {
        unreachable!()
    };
    // Both routes attach to `http`; `good` also to port 8080, a port Sluice binds for it.
    assert_eq!(http.attached_routes, 2);
    assert_eq!(alt.attached_routes, 1);
    assert_eq!(http.supported_kinds[0].kind, "HTTPRoute");
    assert!(find(&http.conditions, "Programmed").status);
    assert!(!find(&http.conditions, "Conflicted").status);
    let conflicted = find(&again.conditions, "Conflicted");
    assert_eq!(
        (conflicted.status, conflicted.reason),
        (true, "HostnameConflict")
    );
    let port = find(&alt.conditions, "Accepted");
    assert_eq!((port.status, port.reason), (true, "Accepted"));
    assert!(find(&alt.conditions, "Programmed").status);
    assert_eq!(alt.supported_kinds[0].kind, "HTTPRoute");
    let protocol = find(&custom.conditions, "Accepted");
    assert_eq!(
        (protocol.status, protocol.reason),
        (false, "UnsupportedProtocol")
    );

    let good = &status.http_routes[&NamespacedName::new("app", "good")];
    assert_eq!(good.parents.len(), 2);
    assert_eq!(
        good.parents[0].parent_ref.section_name.as_deref(),
        Some("http")
    );
    assert_eq!(
        good.parents[0].controller_name,
        "sluice.dev/gateway-controller"
    );
    let accepted = find(&good.parents[0].conditions, "Accepted");
    assert_eq!((accepted.status, accepted.observed_generation), (true, 7));
    assert!(find(&good.parents[1].conditions, "Accepted").status);
    assert!(find(&good.parents[0].conditions, "ResolvedRefs").status);

    let missing = &status.http_routes[&NamespacedName::new("app", "missing")];
    let refs = find(&missing.parents[0].conditions, "ResolvedRefs");
    assert_eq!((refs.status, refs.reason), (false, "BackendNotFound"));
    assert!(refs.message.contains("gone"), "{}", refs.message);
    assert!(find(&missing.parents[0].conditions, "Accepted").status);
    // A rule with a filter Sluice refuses answers 503 in place of the dropped rule.
    let partial = find(&missing.parents[0].conditions, "PartiallyInvalid");
    assert_eq!((partial.status, partial.reason), (true, "UnsupportedValue"));
    assert!(
        partial.message.starts_with("Dropped Rule"),
        "{}",
        partial.message
    );
    assert!(
        partial.message.contains("ExtensionRef"),
        "{}",
        partial.message
    );
    assert!(!good.parents[0]
        .conditions
        .iter()
        .any(|c| c.type_ == "PartiallyInvalid"));

    let outsider = &status.http_routes[&NamespacedName::new("elsewhere", "outsider")];
    let refused = find(&outsider.parents[0].conditions, "Accepted");
    assert_eq!(
        (refused.status, refused.reason),
        (false, "NotAllowedByListeners")
    );

    assert!(!status
        .http_routes
        .contains_key(&NamespacedName::new("app", "theirs")));
}

#[test]
fn an_ingress_only_configuration_has_no_gateway_status() {
    assert_eq!(statuses(""), GatewayStatuses::default());
}
