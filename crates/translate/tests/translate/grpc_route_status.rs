//! GRPCRoute status as `compile()` decides it: route parents as HTTPRoute's, listeners that
//! list and admit GRPCRoute, and the spec's one-of-two rule for an HTTPRoute and a GRPCRoute
//! with a hostname in common on a listener.

use model::NamespacedName;

use crate::gateway_status::{find, statuses};

const OBJECTS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: app}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: http-only, port: 80, protocol: HTTP, hostname: web.example.com,
     allowedRoutes: {kinds: [{kind: HTTPRoute}]}}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: app}
spec: {ports: [{name: grpc, port: 8080}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: rpc, namespace: app, generation: 4, creationTimestamp: '2026-01-01T00:00:00Z'}
spec:
  parentRefs: [{name: edge, sectionName: http}]
  hostnames: [rpc.example.com]
  rules:
  - matches: [{method: {service: echo.Echo}}]
    backendRefs: [{name: echo, port: 8080}, {name: gone, port: 8080}]
  - matches: [{method: {service: 'not/valid'}}]
    backendRefs: [{name: echo, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: later, namespace: app, creationTimestamp: '2026-02-01T00:00:00Z'}
spec:
  parentRefs: [{name: edge, sectionName: http}]
  hostnames: ['*.example.com']
  rules: [{backendRefs: [{name: echo, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: refused, namespace: app}
spec:
  parentRefs: [{name: edge, sectionName: http-only}]
  rules: [{backendRefs: [{name: echo, port: 8080}]}]
";

#[test]
fn grpc_routes_get_parents_like_http_routes_and_one_kind_holds_a_hostname() {
    let status = statuses(OBJECTS);
    let gateway = &status.gateways[&NamespacedName::new("app", "edge")];
    let kinds = |l: usize| -> Vec<&str> {
        let listener = &gateway.listeners[l];
        listener.supported_kinds.iter().map(|k| k.kind).collect()
    };
    assert_eq!(kinds(0), ["HTTPRoute", "GRPCRoute"]);
    assert_eq!(kinds(1), ["HTTPRoute"]);
    assert_eq!(gateway.listeners[0].attached_routes, 1, "rpc only");

    let rpc = &status.grpc_routes[&NamespacedName::new("app", "rpc")];
    let accepted = find(&rpc.parents[0].conditions, "Accepted");
    assert_eq!((accepted.status, accepted.observed_generation), (true, 4));
    let refs = find(&rpc.parents[0].conditions, "ResolvedRefs");
    assert_eq!((refs.status, refs.reason), (false, "BackendNotFound"));
    let partial = find(&rpc.parents[0].conditions, "PartiallyInvalid");
    assert!(partial.message.contains("not/valid"), "{}", partial.message);

    // The older GRPCRoute holds rpc.example.com, which `*.example.com` covers: the HTTPRoute
    // is refused on that listener.
    let later = &status.http_routes[&NamespacedName::new("app", "later")];
    let refused = find(&later.parents[0].conditions, "Accepted");
    assert_eq!(
        (refused.status, refused.reason),
        (false, "NotAllowedByListeners")
    );
    assert!(refused.message.contains("GRPCRoute"), "{}", refused.message);

    // A listener whose kinds name HTTPRoute only does not admit a GRPCRoute.
    let refused = &status.grpc_routes[&NamespacedName::new("app", "refused")];
    let accepted = find(&refused.parents[0].conditions, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason),
        (false, "NotAllowedByListeners")
    );
}

/// A backend in another namespace needs a ReferenceGrant from GRPCRoutes: one from HTTPRoutes
/// does not let a GRPCRoute in.
#[test]
fn a_grpc_route_across_namespaces_needs_a_grant_that_names_grpc_route() {
    let with_grant = |from_kind: &str| {
        format!(
            "{OBJECTS}---
apiVersion: v1
kind: Service
metadata: {{name: far, namespace: other}}
spec: {{ports: [{{name: grpc, port: 9090}}]}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: to-far, namespace: other}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: {from_kind}, namespace: app}}]
  to: [{{group: '', kind: Service}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: across, namespace: app}}
spec:
  parentRefs: [{{name: edge, sectionName: http}}]
  hostnames: [across.example.com]
  rules: [{{backendRefs: [{{name: far, namespace: other, port: 9090}}]}}]
"
        )
    };
    let refs = |text: &str| {
        let status = statuses(text);
        let route = &status.grpc_routes[&NamespacedName::new("app", "across")];
        let refs = find(&route.parents[0].conditions, "ResolvedRefs");
        (refs.status, refs.reason)
    };
    assert_eq!(refs(&with_grant("GRPCRoute")), (true, "ResolvedRefs"));
    assert_eq!(refs(&with_grant("HTTPRoute")), (false, "RefNotPermitted"));
}

/// An HTTPRoute and a GRPCRoute created in the same second with a hostname in common: the
/// one whose namespace/name sorts first holds it, whichever its kind (the spec's tie-break;
/// each kind comes from the Store sorted by name, and the two are merged before the order by
/// age). Each route's uid goes with its status, for the writer.
#[test]
fn of_two_kinds_created_in_the_same_second_the_first_name_holds_the_hostname() {
    let objects = |http_name: &str| {
        format!(
            "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: sluice, uid: class-uid}}
spec: {{controllerName: sluice.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: app, uid: gateway-uid}}
spec:
  gatewayClassName: sluice
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: app}}
spec: {{ports: [{{name: grpc, port: 8080}}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: b-rpc, namespace: app, uid: rpc-uid, creationTimestamp: '2026-01-01T00:00:00Z'}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [shared.example.com]
  rules: [{{backendRefs: [{{name: echo, port: 8080}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {http_name}, namespace: app, uid: web-uid, creationTimestamp: '2026-01-01T00:00:00Z'}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [shared.example.com]
  rules: [{{backendRefs: [{{name: echo, port: 8080}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: elsewhere, namespace: app, uid: elsewhere-uid}}
spec:
  parentRefs: [{{name: not-ours}}]
  rules: [{{backendRefs: [{{name: echo, port: 8080}}]}}]
"
        )
    };
    let accepted = |route: &model::gateway_status::RouteStatus| {
        find(&route.parents[0].conditions, "Accepted").status
    };
    let key = |name: &str| NamespacedName::new("app", name);

    let status = statuses(&objects("a-web"));
    assert!(
        accepted(&status.http_routes[&key("a-web")]),
        "a-web sorts first"
    );
    assert!(!accepted(&status.grpc_routes[&key("b-rpc")]));

    let status = statuses(&objects("c-web"));
    assert!(
        accepted(&status.grpc_routes[&key("b-rpc")]),
        "b-rpc sorts first"
    );
    assert!(!accepted(&status.http_routes[&key("c-web")]));

    let uids: Vec<(model::Kind, String, &str)> = (status.uids.iter())
        .map(|((kind, key), uid)| (*kind, key.to_string(), &**uid))
        .collect();
    assert_eq!(
        uids,
        [
            (model::Kind::Gateway, "app/edge".to_owned(), "gateway-uid"),
            (model::Kind::HTTPRoute, "app/c-web".to_owned(), "web-uid"),
            (model::Kind::GRPCRoute, "app/b-rpc".to_owned(), "rpc-uid"),
        ],
        "every object with a status, and only those (a route of another Gateway has none)"
    );
}
