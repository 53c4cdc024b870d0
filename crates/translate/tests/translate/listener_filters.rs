//! A listener's pre-routing filters (GEP-5224) as the compile decides them: each status outcome
//! with the spec's reason and a message naming the filter, a stage in the route table for every
//! listener with filters (failing closed when they cannot all run), and none of this on
//! listeners without filters.

use model::auth::AuthProtocol;
use model::gateway_status::{Condition, GatewayStatuses, ListenerStatus};
use model::pre_routing::PreRoutingFilter;
use model::routes::Listeners;
use model::NamespacedName;

use crate::gateway_listener_status::compiled;
use crate::gateway_status::find;

fn state(conditions: &[Condition], type_: &str) -> (bool, &'static str) {
    let c = find(conditions, type_);
    (c.status, c.reason)
}

fn listener<'a>(status: &'a GatewayStatuses, name: &str) -> &'a ListenerStatus {
    let gateway = &status.gateways[&NamespacedName::new("infra", "edge")];
    gateway.listeners.iter().find(|l| l.name == name).unwrap()
}

const OBJECTS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: v1
kind: Service
metadata: {name: auth, namespace: infra}
spec: {ports: [{name: http, port: 9000}]}
---
apiVersion: v1
kind: Service
metadata: {name: auth, namespace: security}
spec: {ports: [{name: http, port: 9000}]}
---
apiVersion: v1
kind: Service
metadata: {name: auth, namespace: granted}
spec: {ports: [{name: http, port: 9000}]}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: gateways, namespace: granted}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}]
  to: [{group: '', kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: sluice
  listeners:
  - name: plain
    port: 80
    protocol: HTTP
    hostname: plain.test
  - name: good
    port: 80
    protocol: HTTP
    hostname: good.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth:
          protocol: HTTP
          backendRef: {name: auth, port: 9000}
          http: {path: /check, allowedHeaders: [x-trace], allowedResponseHeaders: [x-user]}
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, namespace: granted, port: 9000}}
  - name: missing
    port: 80
    protocol: HTTP
    hostname: missing.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: nowhere, port: 9000}}
  - name: foreign
    port: 80
    protocol: HTTP
    hostname: foreign.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, namespace: security, port: 9000}}
  - name: extension
    port: 80
    protocol: HTTP
    hostname: extension.test
    filters:
      requests:
      - type: ExtensionRef
        extensionRef: {group: example.com, kind: JWTClaimToHeader, name: tenant}
  - name: grpc
    port: 80
    protocol: HTTP
    hostname: grpc.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 9000}}
      - type: ExternalAuth
        externalAuth: {protocol: GRPC, backendRef: {name: auth, port: 9000}, grpc: {}}
  - name: body
    port: 80
    protocol: HTTP
    hostname: body.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 9000}, forwardBody: {maxSize: 10}}
  - name: mixed
    port: 80
    protocol: HTTP
    hostname: mixed.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: GRPC, backendRef: {name: auth, port: 9000}, http: {path: /x}}
  - name: big
    port: 80
    protocol: HTTP
    hostname: big.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth:
          protocol: GRPC
          backendRef: {name: auth, port: 9000}
          grpc: {allowedHeaders: [x-user]}
          forwardBody: {maxSize: 8388608}
  - name: host
    port: 80
    protocol: HTTP
    hostname: host.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth:
          protocol: HTTP
          backendRef: {name: auth, port: 9000}
          http: {allowedResponseHeaders: [Host]}
  - name: path
    port: 80
    protocol: HTTP
    hostname: path.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 9000}, http: {path: 'no-slash'}}
  - name: tcp
    port: 9100
    protocol: TCP
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 9000}}
";

#[test]
fn each_filter_problem_has_the_specs_condition_and_names_the_filter() {
    let compiled = compiled(OBJECTS);
    let status = &compiled.gateway_status;
    // (listener, Accepted, ResolvedRefs, what the message names)
    let cases = [
        ("good", (true, "Accepted"), (true, "ResolvedRefs"), ""),
        ("plain", (true, "Accepted"), (true, "ResolvedRefs"), ""),
        (
            "missing",
            (true, "Accepted"),
            (false, "InvalidListenerFilterRef"),
            "filters.requests[0]",
        ),
        (
            "foreign",
            (true, "Accepted"),
            (false, "RefNotPermitted"),
            "filters.requests[0]",
        ),
        (
            "extension",
            (true, "Accepted"),
            (false, "InvalidListenerFilterRef"),
            "filters.requests[0]: ExtensionRef example.com/JWTClaimToHeader tenant",
        ),
        ("grpc", (true, "Accepted"), (true, "ResolvedRefs"), ""),
        ("body", (true, "Accepted"), (true, "ResolvedRefs"), ""),
        (
            "mixed",
            (false, "InvalidListenerFilter"),
            (true, "ResolvedRefs"),
            "filters.requests[0]: ExternalAuth http: set, but protocol is GRPC",
        ),
        (
            "big",
            (false, "UnsupportedValue"),
            (true, "ResolvedRefs"),
            "filters.requests[0]: ExternalAuth forwardBody.maxSize 8388608",
        ),
        (
            "host",
            (false, "InvalidListenerFilter"),
            (true, "ResolvedRefs"),
            "never changes Host",
        ),
        (
            "path",
            (false, "InvalidListenerFilter"),
            (true, "ResolvedRefs"),
            "must start with /",
        ),
        (
            "tcp",
            (false, "InvalidListenerFilter"),
            (true, "ResolvedRefs"),
            "only HTTP and HTTPS listeners",
        ),
    ];
    for (name, accepted, refs, names) in cases {
        let conditions = &listener(status, name).conditions;
        assert_eq!(state(conditions, "Accepted"), accepted, "{name}");
        assert_eq!(state(conditions, "ResolvedRefs"), refs, "{name}");
        let fine = accepted.0 && refs.0;
        let programmed = state(conditions, "Programmed");
        assert_eq!(programmed.0, fine, "{name}: {programmed:?}");
        if !fine {
            let condition = if accepted.0 {
                "ResolvedRefs"
            } else {
                "Accepted"
            };
            let message = &find(conditions, condition).message;
            assert!(message.contains(names), "{name}: {message}");
            assert!(
                (compiled.diagnostics.iter()).any(|d| d.reason.contains(names)),
                "{name}: no diagnostic"
            );
        }
        // The reasons of filters never appear on a True condition or a listener without them.
        for c in conditions.iter().filter(|c| c.status || name == "plain") {
            assert!(!c.reason.contains("ListenerFilter"), "{name}: {c:?}");
        }
    }
    let gateway = &status.gateways[&NamespacedName::new("infra", "edge")];
    assert_eq!(
        state(&gateway.conditions, "Accepted"),
        (true, "ListenersNotValid")
    );
}

#[test]
fn each_listener_with_filters_gets_a_stage_that_fails_closed_when_they_cannot_all_run() {
    let compiled = compiled(OBJECTS);
    let routes = &compiled.routes;
    let stage = |host: &str| routes.listener_stage(Listeners::HTTP, None, host);
    let good = stage("good.test").expect("a stage");
    let filters = good.filters.as_ref().expect("runs");
    assert_eq!(filters.len(), 2);
    let PreRoutingFilter::ExternalAuth(first) = &filters[0];
    let rules = first.gateway.as_deref().unwrap();
    assert_eq!(rules.path_prefix, "/check");
    assert_eq!(rules.allowed_response_headers[0].as_str(), "x-user");
    assert_eq!(rules.allowed_request_headers[0].as_str(), "x-trace");
    assert!(first.url.contains("infra/auth:9000"), "{}", first.url);
    let PreRoutingFilter::ExternalAuth(second) = &filters[1];
    assert!(second.url.contains("granted/auth:9000"), "{}", second.url);
    for (host, protocol, body) in [
        ("grpc.test", AuthProtocol::Grpc, 0),
        ("body.test", AuthProtocol::Http, 10),
    ] {
        let filters = stage(host).expect(host).filters.as_ref().expect(host);
        let PreRoutingFilter::ExternalAuth(last) = filters.last().unwrap();
        let rules = last.gateway.as_deref().unwrap();
        assert_eq!(
            (rules.protocol, rules.forward_body),
            (protocol, body),
            "{host}"
        );
    }
    // A port in the Host does not change the listener.
    assert!(stage("GOOD.test:80").is_some());
    for failing in [
        "missing.test",
        "foreign.test",
        "extension.test",
        "mixed.test",
        "big.test",
        "host.test",
        "path.test",
    ] {
        let stage = stage(failing).expect(failing);
        assert!(stage.filters.is_err(), "{failing}");
    }
    assert!(stage("plain.test").is_none());
    assert!(stage("elsewhere.test").is_none());
    assert!(routes
        .listener_stage(Listeners::HTTPS, None, "good.test")
        .is_none());
}

#[test]
fn a_configuration_without_filters_has_no_stage() {
    let text = OBJECTS.split("  - name: good").next().unwrap();
    let compiled = compiled(text);
    assert!(!compiled.routes.listener_hosts().has_stages());
    let listener = listener(&compiled.gateway_status, "plain");
    assert_eq!(
        state(&listener.conditions, "Programmed"),
        (true, "Programmed")
    );
}

#[test]
fn listeners_sharing_a_hostname_and_port_with_different_filters_fail_closed() {
    let other = "\
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: other, namespace: infra}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: same, port: 80, protocol: HTTP, hostname: good.test}
";
    let compiled = compiled(&format!("{OBJECTS}{other}"));
    let stage = compiled
        .routes
        .listener_stage(Listeners::HTTP, None, "good.test")
        .expect("a stage");
    let why = stage.filters.as_ref().expect_err("fails closed");
    assert!(why.contains("different filters"), "{why}");
    let good = listener(&compiled.gateway_status, "good");
    assert_eq!(
        state(&good.conditions, "Accepted"),
        (false, "InvalidListenerFilter")
    );
    // The listener without filters gets none of their reasons.
    let other = &compiled.gateway_status.gateways[&NamespacedName::new("infra", "other")];
    for c in &other.listeners[0].conditions {
        assert!(!c.reason.contains("ListenerFilter"), "{c:?}");
    }
}

#[test]
fn a_listener_set_s_listener_has_filters_granted_from_the_listener_set() {
    let text = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: v1
kind: Service
metadata: {name: auth, namespace: granted}
spec: {ports: [{name: http, port: 9000}]}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: sets, namespace: granted}
spec:
  from: [{group: gateway.networking.k8s.io, kind: ListenerSet, namespace: team}]
  to: [{group: '', kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: sluice
  allowedListeners: {namespaces: {from: All}}
  listeners: [{name: own, port: 80, protocol: HTTP, hostname: own.test}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: team}
spec:
  parentRef: {name: edge, namespace: infra}
  listeners:
  - name: guarded
    port: 80
    protocol: HTTP
    hostname: guarded.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, namespace: granted, port: 9000}}
  - name: missing
    port: 80
    protocol: HTTP
    hostname: missing.test
    filters:
      requests:
      - type: ExternalAuth
        externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 9000}}
";
    let compiled = compiled(text);
    let set = &compiled.gateway_status.listener_sets[&NamespacedName::new("team", "extra")];
    let guarded = set.listeners.iter().find(|l| l.name == "guarded").unwrap();
    assert_eq!(
        state(&guarded.conditions, "ResolvedRefs"),
        (true, "ResolvedRefs")
    );
    let missing = set.listeners.iter().find(|l| l.name == "missing").unwrap();
    assert_eq!(
        state(&missing.conditions, "ResolvedRefs"),
        (false, "InvalidListenerFilterRef")
    );
    let routes = &compiled.routes;
    let stage = routes.listener_stage(Listeners::HTTP, None, "guarded.test");
    assert!(stage.expect("a stage").filters.is_ok());
    let stage = routes.listener_stage(Listeners::HTTP, None, "missing.test");
    assert!(stage.expect("a stage").filters.is_err());
}

#[test]
fn an_httproute_rule_s_external_auth_is_built_as_a_listener_s_or_refuses_the_rule() {
    let routes = "\
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: guarded, namespace: infra}
spec:
  parentRefs: [{name: edge, sectionName: plain}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /ok}}]
    filters:
    - type: ExternalAuth
      externalAuth:
        protocol: HTTP
        backendRef: {name: auth, port: 9000}
        http: {path: /verify, allowedResponseHeaders: [x-user]}
    backendRefs: [{name: auth, port: 9000}]
  - matches: [{path: {type: PathPrefix, value: /missing}}]
    filters:
    - type: ExternalAuth
      externalAuth: {protocol: HTTP, backendRef: {name: nowhere, port: 9000}}
    backendRefs: [{name: auth, port: 9000}]
  - matches: [{path: {type: PathPrefix, value: /grpc}}]
    filters:
    - type: ExternalAuth
      externalAuth:
        protocol: GRPC
        backendRef: {name: auth, port: 9000}
        grpc: {allowedHeaders: [x-user]}
        forwardBody: {maxSize: 1024}
    backendRefs: [{name: auth, port: 9000}]
  - matches: [{path: {type: PathPrefix, value: /negative}}]
    filters:
    - type: ExternalAuth
      externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 9000}, forwardBody: {maxSize: -1}}
    backendRefs: [{name: auth, port: 9000}]
";
    let compiled = compiled(&format!("{OBJECTS}{routes}"));
    let head = http::Request::new(()).into_parts().0;
    let policy = |path: &str| {
        let found = compiled.routes.route("plain.test", path, &head).unwrap();
        found.route.policy.clone()
    };
    let ok = policy("/ok");
    assert!(ok.denied.is_none(), "{:?}", ok.denied);
    let auth = ok.external_auth.as_deref().expect("an auth phase");
    let rules = auth.gateway.as_deref().expect("Gateway API's semantics");
    assert_eq!(rules.path_prefix, "/verify");
    assert_eq!(rules.allowed_response_headers[0].as_str(), "x-user");
    assert_eq!(
        (rules.protocol, rules.forward_body),
        (AuthProtocol::Http, 0)
    );
    let grpc = policy("/grpc");
    let rules = grpc.external_auth.as_deref().unwrap().gateway.as_deref();
    let rules = rules.expect("Gateway API's semantics");
    assert_eq!(
        (rules.protocol, rules.forward_body),
        (AuthProtocol::Grpc, 1024)
    );
    assert_eq!(rules.allowed_request_headers[0].as_str(), "x-user");
    for refused in ["/missing", "/negative"] {
        let policy = policy(refused);
        let why = policy.denied.as_deref().expect(refused);
        assert!(why.contains("filters[0]"), "{refused}: {why}");
        assert!(policy.external_auth.is_none(), "{refused}");
    }
}

#[test]
fn a_backend_tls_policy_on_a_filters_auth_server_names_the_gateway_among_its_ancestors() {
    let policy = "\
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: auth-tls, namespace: infra}
spec:
  targetRefs: [{group: '', kind: Service, name: auth}]
  validation: {wellKnownCACertificates: System, hostname: auth.infra.example}
";
    let compiled = compiled(&format!("{OBJECTS}{policy}"));
    let status =
        &compiled.gateway_status.backend_tls_policies[&NamespacedName::new("infra", "auth-tls")];
    let ancestors: Vec<_> = (status.ancestors.iter())
        .map(|a| (a.ancestor_ref.kind.as_deref(), a.ancestor_ref.name.as_str()))
        .collect();
    assert_eq!(ancestors, [(Some("Gateway"), "edge")], "{status:?}");
    let accepted = find(&status.ancestors[0].conditions, "Accepted");
    assert!(accepted.status, "{accepted:?}");
}
