//! What a Gateway gets generated in Kubernetes mode (GEP-1762: a Service named
//! `<gateway>-<class>` with its labels, ports and addresses; GEP-1867's `spec.infrastructure`
//! labels and annotations on it), and `parametersRef`, which Sluice refuses on a GatewayClass
//! and on a Gateway with the spec's `InvalidParameters`.

use std::collections::BTreeMap;

use model::gateway_status::{
    GatewayService, GatewayStatuses, Generated, ServiceAddresses, ServicePort,
};
use model::streams::StreamProtocol;
use model::{Compiled, NamespacedName};
use translate::gateway::ListenPorts;
use translate::CompileOptions;

use crate::gateway_status::find;

const CLASS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
";

/// Where the tests' Sluice listens for Gateway listeners on 80 and 443.
const LISTEN: ListenPorts = ListenPorts {
    http: 8080,
    https: 8443,
};

fn compiled(text: &str, options: CompileOptions) -> Compiled {
    crate::gateway_sites::compiled_with(text, &options)
}

/// Compiled in Kubernetes mode (`--http-listen` :8080, `--https-listen` :8443).
fn in_cluster(text: &str) -> Compiled {
    let options = CompileOptions {
        gateway_services: Some(LISTEN),
        ..CompileOptions::default()
    };
    compiled(text, options)
}

fn generated<'a>(status: &'a GatewayStatuses, name: &str) -> Option<&'a Generated> {
    status.infrastructure.get(&NamespacedName::new("app", name))
}

fn service<'a>(status: &'a GatewayStatuses, name: &str) -> &'a GatewayService {
    match generated(status, name) {
        Some(Generated::Service(service)) => service,
        other => panic!("no Service for Gateway app/{name}: {other:?}"),
    }
}

fn diagnostics(c: &Compiled) -> Vec<String> {
    c.diagnostics.iter().map(ToString::to_string).collect()
}

/// Gateway `name` in `app` with `spec` below `gatewayClassName` and an HTTPRoute for
/// `<name>.test` to Service `web`.
fn gateway(name: &str, class: &str, spec: &str) -> String {
    format!(
        "\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: app, generation: 3}}
spec:
  gatewayClassName: {class}
{spec}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: app}}
spec:
  parentRefs: [{{name: {name}}}]
  hostnames: [{name}.test]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
"
    )
}

const WEB: &str = "\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec: {ports: [{name: http, port: 80}]}
---
";

const HTTP_LISTENER: &str = "  listeners: [{name: http, port: 80, protocol: HTTP}]\n";

/// Whether a request for `host` `/` finds a route on Sluice's shared listeners.
fn routed(c: &Compiled, host: &str) -> bool {
    let head = http::Request::new(()).into_parts().0;
    c.routes.route(host, "/", &head).is_some()
}

fn port(name: &str, protocol: StreamProtocol, port: u16, target: u16) -> ServicePort {
    ServicePort {
        name: name.to_owned(),
        protocol,
        port,
        target,
    }
}

#[test]
fn a_served_gateway_gets_a_service_with_its_labels_annotations_ports_and_addresses() {
    // (Its first line's indentation kept: no `\` line continuation.)
    let spec = "
  infrastructure:
    labels:
      key2: value2
      example.com/team: web
      gateway.networking.k8s.io/gateway-name: other
      kubernetes.io/service-name: other
      bad: has space
    annotations: {key1: value1, example.com/note: 'any text: here', gateway.networking.k8s.io/x: y}
  allowedListeners: {namespaces: {from: Same}}
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: again, port: 80, protocol: HTTP, hostname: again.test}
  - {name: tls, port: 443, protocol: TLS, tls: {mode: Passthrough}}
  - {name: alt, port: 9080, protocol: HTTP}
  - {name: db, port: 5432, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP}
  - {name: custom, port: 7, protocol: example.com/custom}
";
    let set = "\
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: app}
spec:
  parentRef: {name: edge}
  listeners: [{name: more, port: 9090, protocol: HTTP}]
---
";
    let c = in_cluster(&format!(
        "{CLASS}{WEB}{}{set}",
        gateway("edge", "sluice", spec)
    ));
    let service = service(&c.gateway_status, "edge");
    assert_eq!(service.name, "edge-sluice");
    let labels: BTreeMap<&str, &str> = (service.labels.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        BTreeMap::from([
            ("gateway.networking.k8s.io/gateway-name", "edge"),
            ("gateway.networking.k8s.io/gateway-class-name", "sluice"),
            ("key2", "value2"),
            ("example.com/team", "web"),
        ])
    );
    let annotations: Vec<(&str, &str)> = (service.annotations.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        annotations,
        [("example.com/note", "any text: here"), ("key1", "value1")]
    );
    // One port per accepted listener's (protocol, port), the ListenerSet's too; 80 and 443
    // reach Sluice's own listeners, any other port its own number; the custom protocol's
    // listener is not accepted and has none.
    use StreamProtocol::{Tcp, Udp};
    assert_eq!(
        service.ports,
        [
            port("tcp-80", Tcp, 80, 8080),
            port("tcp-443", Tcp, 443, 8443),
            port("tcp-5432", Tcp, 5432, 5432),
            port("tcp-9080", Tcp, 9080, 9080),
            port("tcp-9090", Tcp, 9090, 9090),
            port("udp-53", Udp, 53, 53),
        ]
    );
    assert_eq!(service.addresses, ServiceAddresses::Shared);
    assert_eq!(service.generation, 3);
    // The keys left out, each with the field and why.
    let said = diagnostics(&c);
    for key in [
        "labels[\"gateway.networking.k8s.io/gateway-name\"]: keys under gateway.networking.k8s.io/ are Gateway API's own",
        "labels[\"kubernetes.io/service-name\"]: Kubernetes reads this key",
        "labels[\"bad\"]: its value is not a label value",
        "annotations[\"gateway.networking.k8s.io/x\"]: keys under",
    ] {
        assert!(
            said.iter().any(|d| d.starts_with("Gateway app/edge: spec.infrastructure.")
                && d.contains(key)
                && d.ends_with("left out of the generated Service")),
            "{key}: {said:#?}"
        );
    }
    // The Gateway is served as before: the labels are not about traffic.
    assert!(routed(&c, "edge.test"));
    let accepted = find(
        &c.gateway_status.gateways[&NamespacedName::new("app", "edge")].conditions,
        "Accepted",
    );
    assert_eq!(
        (accepted.status, accepted.reason),
        (true, "ListenersNotValid")
    );
}

#[test]
fn a_gateway_with_its_own_address_has_it_as_the_services_endpoint() {
    let text = format!("{CLASS}{WEB}{}", gateway("edge", "sluice", HTTP_LISTENER));
    let options = CompileOptions {
        gateway_services: Some(LISTEN),
        gateway_address_pool: Some("192.0.2.10-192.0.2.11".parse().unwrap()),
        ..CompileOptions::default()
    };
    let c = compiled(&text, options);
    let service = service(&c.gateway_status, "edge");
    assert_eq!(
        service.addresses,
        ServiceAddresses::Own("192.0.2.10".parse().unwrap())
    );
    assert_eq!(
        service.ports,
        [port("tcp-80", StreamProtocol::Tcp, 80, 8080)]
    );
}

#[test]
fn from_files_nothing_is_generated_and_infrastructure_labels_are_a_notice() {
    let spec = format!("  infrastructure: {{labels: {{key2: value2}}}}\n{HTTP_LISTENER}");
    let text = format!("{CLASS}{WEB}{}", gateway("edge", "sluice", &spec));
    let c = compiled(&text, CompileOptions::default());
    assert!(c.gateway_status.infrastructure.is_empty());
    assert!(routed(&c, "edge.test"));
    assert_eq!(
        diagnostics(&c),
        ["Gateway app/edge: notice: spec.infrastructure: its labels and annotations go on the Service Sluice generates for a Gateway in Kubernetes mode (--kubernetes); from files nothing is generated"]
    );
    // Without labels or annotations there is nothing to say.
    let plain = format!("{CLASS}{WEB}{}", gateway("edge", "sluice", HTTP_LISTENER));
    assert!(compiled(&plain, CompileOptions::default())
        .diagnostics
        .is_empty());
}

#[test]
fn a_gateway_parameters_ref_refuses_the_gateway_with_invalid_parameters() {
    let spec = format!(
        "  infrastructure:\n    parametersRef: {{group: invalid.io, kind: InvalidParameters, name: invalid}}\n{HTTP_LISTENER}"
    );
    let text = format!(
        "{CLASS}{WEB}{}{}",
        gateway("refused", "sluice", &spec),
        gateway("fine", "sluice", HTTP_LISTENER)
    );
    for options in [
        CompileOptions::default(),
        CompileOptions {
            gateway_services: Some(LISTEN),
            ..CompileOptions::default()
        },
    ] {
        let c = compiled(&text, options);
        let status = &c.gateway_status.gateways[&NamespacedName::new("app", "refused")];
        let accepted = find(&status.conditions, "Accepted");
        assert_eq!(
            (
                accepted.status,
                accepted.reason,
                accepted.observed_generation
            ),
            (false, "InvalidParameters", 3)
        );
        assert!(
            accepted.message.starts_with("spec.infrastructure.parametersRef (invalid.io/InvalidParameters invalid): Sluice takes no parameters"),
            "{}",
            accepted.message
        );
        let programmed = find(&status.conditions, "Programmed");
        assert_eq!((programmed.status, programmed.reason), (false, "Invalid"));
        // Not served, nothing generated; the other Gateway is untouched.
        assert!(!routed(&c, "refused.test"));
        assert!(routed(&c, "fine.test"));
        assert_eq!(generated(&c.gateway_status, "refused"), None);
        let said = diagnostics(&c);
        assert!(
            said.iter().any(|d| d.starts_with(
                "Gateway app/refused: spec.infrastructure.parametersRef (invalid.io/InvalidParameters invalid)"
            )),
            "{said:#?}"
        );
        let fine = &c.gateway_status.gateways[&NamespacedName::new("app", "fine")];
        assert!(find(&fine.conditions, "Accepted").status);
        // Its route is not accepted there (it would say "served" when it is not); the other
        // Gateway's route is.
        let route = |name: &str| {
            let status = &c.gateway_status.http_routes[&NamespacedName::new("app", name)];
            find(&status.parents[0].conditions, "Accepted").clone()
        };
        let refused_route = route("refused");
        assert_eq!(
            (refused_route.status, refused_route.reason),
            (false, "ParentNotAccepted")
        );
        assert!(
            refused_route
                .message
                .starts_with("Gateway app/refused is not accepted (InvalidParameters"),
            "{}",
            refused_route.message
        );
        assert!(route("fine").status);
        assert!(
            said.iter().any(|d| d.starts_with(
                "HTTPRoute app/refused: spec.parentRefs[0]: Gateway app/refused is not accepted"
            )),
            "{said:#?}"
        );
    }
}

#[test]
fn a_gateway_class_parameters_ref_refuses_the_class_and_its_gateways() {
    let refused_class = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: tuned, generation: 4}
spec:
  controllerName: sluice.dev/gateway-controller
  parametersRef: {group: example.com, kind: Tuning, name: fast, namespace: ops}
---
";
    let text = format!(
        "{CLASS}{refused_class}{WEB}{}{}",
        gateway("edge", "tuned", HTTP_LISTENER),
        gateway("fine", "sluice", HTTP_LISTENER)
    );
    let c = in_cluster(&text);
    let class = find(&c.gateway_status.classes["tuned"].conditions, "Accepted");
    assert_eq!(
        (class.status, class.reason, class.observed_generation),
        (false, "InvalidParameters", 4)
    );
    assert_eq!(
        class.message,
        "spec.parametersRef (example.com/Tuning ops/fast): Sluice takes no parameters; remove it (InvalidParameters)"
    );
    assert!(find(&c.gateway_status.classes["sluice"].conditions, "Accepted").status);
    let edge = &c.gateway_status.gateways[&NamespacedName::new("app", "edge")];
    let accepted = find(&edge.conditions, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason),
        (false, "InvalidParameters")
    );
    assert!(accepted
        .message
        .contains("its GatewayClass tuned has a spec.parametersRef"));
    assert!(!routed(&c, "edge.test"));
    assert_eq!(generated(&c.gateway_status, "edge"), None);
    assert!(routed(&c, "fine.test"));
    assert_eq!(service(&c.gateway_status, "fine").name, "fine-sluice");
    let route = &c.gateway_status.http_routes[&NamespacedName::new("app", "edge")];
    let route = find(&route.parents[0].conditions, "Accepted");
    assert_eq!((route.status, route.reason), (false, "ParentNotAccepted"));
}

#[test]
fn a_gateway_whose_service_cannot_be_made_says_why() {
    let long = "g".repeat(64);
    let text = format!(
        "{CLASS}{WEB}{}{}",
        gateway(&long, "sluice", HTTP_LISTENER),
        gateway(
            "portless",
            "sluice",
            "  listeners: [{name: custom, port: 7, protocol: example.com/custom}]\n"
        )
    );
    let c = in_cluster(&text);
    let refused = |name: &str| match generated(&c.gateway_status, name) {
        Some(Generated::Refused(why)) => why.clone(),
        other => panic!("{name}: {other:?}"),
    };
    assert!(
        refused(&long).starts_with("metadata.name is longer than 63 characters"),
        "{}",
        refused(&long)
    );
    assert!(refused("portless").starts_with("no listener of the Gateway is accepted"));
    // The long-named Gateway is served all the same.
    let status = &c.gateway_status.gateways[&NamespacedName::new("app", long.as_str())];
    assert!(find(&status.conditions, "Programmed").status);
}
