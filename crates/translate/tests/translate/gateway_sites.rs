//! `--gateway-address-pool`: each Gateway of Sluice's class gets an address of its own, a site
//! with only its own routes and certificates; the status says which address, or why none.

use std::net::IpAddr;

use model::gateway_status::{AddressSource, Condition};
use model::{Compiled, NamespacedName};
use translate::gateway::AddressPool;
use translate::gateway::Fragments;
use translate::{compile, compile_reusing, parse_documents, CompileOptions, Store};

fn compiled(text: &str, pool: Option<&str>) -> Compiled {
    let options = CompileOptions {
        gateway_address_pool: pool.map(|p| p.parse::<AddressPool>().unwrap()),
        ..CompileOptions::default()
    };
    compiled_with(text, &options)
}

/// `text` (objects that parse) compiled with `options`.
pub(crate) fn compiled_with(text: &str, options: &CompileOptions) -> Compiled {
    let documents = parse_documents("t.yaml", text).unwrap();
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    let mut store = Store::default();
    store.replace_all(documents.objects);
    compile(&store, options)
}

fn gateway(name: &str, extra: &str) -> String {
    format!(
        "\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: app}}
spec:
  gatewayClassName: sluice
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
{extra}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}-route, namespace: app}}
spec:
  parentRefs: [{{name: {name}}}]
  rules: [{{backendRefs: [{{name: {name}-web, port: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: {name}-web, namespace: app}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
"
    )
}

const CLASS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: legacy, namespace: app}
spec:
  ingressClassName: sluice
  rules: [{host: legacy.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: legacy, port: {number: 80}}}}]}}]
---
";

/// The Gateway's planned `status.addresses`: an address of its own as itself, the ones the
/// provider resolves by where they come from, each with a routability other than "".
fn address(c: &Compiled, name: &str) -> Vec<String> {
    let status = &c.gateway_status.gateways[&NamespacedName::new("app", name)];
    (status.addresses.entries.iter())
        .map(|a| {
            let from = match a.source {
                AddressSource::Own(ip) => ip.to_string(),
                AddressSource::Shared(None) => "shared".to_owned(),
                AddressSource::Shared(Some(ip)) => format!("shared {ip}"),
                AddressSource::ClusterIp(None) => "ClusterIP".to_owned(),
                AddressSource::ClusterIp(Some(ip)) => format!("ClusterIP {ip}"),
            };
            match a.routability {
                "" => from,
                routability => format!("{from} ({routability})"),
            }
        })
        .collect()
}

fn condition(c: &Compiled, name: &str, type_: &str) -> Condition {
    let status = &c.gateway_status.gateways[&NamespacedName::new("app", name)];
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
        .unwrap()
}

/// Which Service serves `/` for `host` on a connection to `local`.
fn served(c: &Compiled, local: &str, host: &str) -> Option<String> {
    let head = http::Request::new(()).into_parts().0;
    let local: IpAddr = local.parse().unwrap();
    let site = c.site(Some(local));
    let found = site.routes.route(host, "/", &head);
    found.map(|m| m.route.service.to_string())
}

#[test]
fn each_gateway_is_a_site_of_its_own_and_ingresses_stay_on_the_shared_one() {
    let text = format!("{CLASS}{}{}", gateway("a", ""), gateway("b", ""));
    let c = compiled(&text, Some("192.0.2.10-192.0.2.11"));
    assert_eq!(address(&c, "a"), ["192.0.2.10"]);
    assert_eq!(address(&c, "b"), ["192.0.2.11"]);
    assert_eq!(served(&c, "192.0.2.10", "x.com").as_deref(), Some("a-web"));
    assert_eq!(served(&c, "192.0.2.11", "x.com").as_deref(), Some("b-web"));
    // The Ingress's host is not served on a Gateway's address; on others it is, and the
    // Gateways' routes are not.
    assert_eq!(
        served(&c, "192.0.2.10", "legacy.example.com").as_deref(),
        Some("a-web")
    );
    assert_eq!(
        served(&c, "127.0.0.1", "legacy.example.com").as_deref(),
        Some("legacy")
    );
    assert_eq!(served(&c, "127.0.0.1", "x.com"), None);
    assert!(c
        .routes
        .hosts()
        .iter()
        .all(|(h, _)| h.to_string() == "legacy.example.com"));
    assert_eq!(condition(&c, "a", "Programmed").reason, "Programmed");
    let view = serde_json::to_value(c.view()).unwrap();
    assert!(
        view["sites"]["192.0.2.11"]["hosts"]["*"].is_object(),
        "{view:#}"
    );
}

#[test]
fn without_a_pool_gateways_share_the_site_and_a_collision_is_said() {
    let text = format!("{CLASS}{}{}", gateway("a", ""), gateway("b", ""));
    let c = compiled(&text, None);
    assert!(c.sites.is_empty());
    assert_eq!(address(&c, "a"), ["shared"]);
    let said: Vec<String> = c.diagnostics.iter().map(ToString::to_string).collect();
    assert!(
        said.iter().any(|d| d.contains("Gateway app/b")
            && d.contains("shares Sluice's listeners with Gateway app/a's listener http")),
        "{said:?}"
    );
}

#[test]
fn addresses_asked_for_kept_from_status_or_refused() {
    let asked = "  addresses: [{type: IPAddress, value: 192.0.2.11}]\n";
    let kept = "status: {addresses: [{type: IPAddress, value: 192.0.2.12}]}\n";
    let text = format!(
        "{CLASS}{}{}{}",
        gateway("a", ""),
        gateway("b", asked),
        gateway("c", kept)
    );
    let c = compiled(&text, Some("192.0.2.10-192.0.2.12"));
    assert_eq!(address(&c, "b"), ["192.0.2.11"]);
    assert_eq!(address(&c, "c"), ["192.0.2.12"]);
    assert_eq!(address(&c, "a"), ["192.0.2.10"]);
    // The pool is exhausted for a fourth.
    let text = format!("{text}{}", gateway("d", ""));
    let c = compiled(&text, Some("192.0.2.10-192.0.2.12"));
    let programmed = condition(&c, "d", "Programmed");
    assert_eq!(
        (programmed.status, programmed.reason),
        (false, "AddressNotAssigned")
    );
    assert!(address(&c, "d").is_empty());
    assert_eq!(
        served(&c, "127.0.0.1", "x.com"),
        None,
        "not on the shared site"
    );
    // Outside the pool, taken, or not an IP.
    let outside = "  addresses: [{value: 10.9.9.9}]\n";
    let taken = "  addresses: [{value: 192.0.2.11}]\n";
    let named = "  addresses: [{type: Hostname, value: gw.example.com}]\n";
    let text = format!(
        "{CLASS}{}{}{}{}",
        gateway("b", asked),
        gateway("e", outside),
        gateway("f", taken),
        gateway("g", named)
    );
    let c = compiled(&text, Some("192.0.2.10-192.0.2.12"));
    for (name, type_, reason) in [
        ("e", "Programmed", "AddressNotUsable"),
        ("f", "Programmed", "AddressNotUsable"),
        ("g", "Accepted", "UnsupportedAddress"),
    ] {
        let found = condition(&c, name, type_);
        assert_eq!(
            (found.status, found.reason),
            (false, reason),
            "{name}: {found:?}"
        );
    }
    assert_eq!(address(&c, "b"), ["192.0.2.11"]);
    assert!(condition(&c, "e", "Programmed")
        .message
        .contains("not in --gateway-address-pool"));
}

/// The conformance suite's flake, replayed: a Gateway reads its address as soon as its status
/// shows one, so the address must not move when a Gateway created in the same second, with a
/// name that sorts first, arrives before the first one's status write has come back.
#[test]
fn an_address_given_stays_given_before_the_status_shows_it() {
    let created = "  creationTimestamp: '2026-11-28T02:06:51Z'\n";
    let stamped = |name: &str| {
        gateway(name, "").replacen(
            &format!("metadata: {{name: {name}, namespace: app}}\n"),
            &format!("metadata:\n  name: {name}\n  namespace: app\n{created}"),
            1,
        )
    };
    assert!(
        stamped("b").contains("creationTimestamp"),
        "{}",
        stamped("b")
    );
    let options = CompileOptions {
        gateway_address_pool: Some("192.0.2.10-192.0.2.12".parse().unwrap()),
        ..CompileOptions::default()
    };
    let mut store = Store::default();
    let mut fragments = Fragments::default();
    let mut compile_text = |text: &str| {
        let documents = parse_documents("t.yaml", text).unwrap();
        assert!(documents.errors.is_empty(), "{:?}", documents.errors);
        store.replace_all(documents.objects);
        compile_reusing(&store, &options, &mut fragments)
    };
    let c = compile_text(&format!("{CLASS}{}", stamped("b")));
    assert_eq!(address(&c, "b"), ["192.0.2.10"]);
    // "a" sorts first and has no status either; b keeps what it was given.
    let c = compile_text(&format!("{CLASS}{}{}", stamped("b"), stamped("a")));
    assert_eq!(address(&c, "b"), ["192.0.2.10"]);
    assert_eq!(address(&c, "a"), ["192.0.2.11"]);
    assert_eq!(served(&c, "192.0.2.10", "x.com").as_deref(), Some("b-web"));
    // A status another process (the leader) wrote wins over what this one gave.
    let leader = "status: {addresses: [{type: IPAddress, value: 192.0.2.12}]}\n";
    let text = format!(
        "{CLASS}{}{}",
        stamped("b"),
        gateway_with_status(&stamped("a"), leader)
    );
    let c = compile_text(&text);
    assert_eq!(address(&c, "a"), ["192.0.2.12"]);
    assert_eq!(address(&c, "b"), ["192.0.2.10"]);
    // Without the last compile's memory (a new process), the order decides: a is first.
    let c = compiled(
        &format!("{CLASS}{}{}", stamped("b"), stamped("a")),
        Some("192.0.2.10-192.0.2.12"),
    );
    assert_eq!(address(&c, "a"), ["192.0.2.10"]);
}

/// `gateway`'s text with `status` appended to its Gateway document (the first).
fn gateway_with_status(text: &str, status: &str) -> String {
    let (first, rest) = text.split_once("---\n").unwrap();
    format!("{first}{status}---\n{rest}")
}

#[test]
fn other_ports_get_a_listener_bit_and_a_protocol_conflict_is_refused() {
    let text = format!(
        "{CLASS}\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: ports, namespace: app}}
spec:
  gatewayClassName: sluice
  listeners:
  - {{name: alt, port: 8080, protocol: HTTP}}
  - {{name: alt-again, port: 8080, protocol: HTTP, hostname: a.example.com}}
  - {{name: clash, port: 8080, protocol: HTTPS, hostname: b.example.com, tls: {{certificateRefs: [{{name: nope}}]}}}}
  - {{name: tls-on-80, port: 80, protocol: HTTPS, hostname: c.example.com, tls: {{certificateRefs: [{{name: nope}}]}}}}
---
"
    );
    let c = compiled(&text, None);
    let declared: Vec<(u16, bool)> = c.declared_ports.iter().map(|(p, d)| (*p, d.tls)).collect();
    assert_eq!(declared, [(8080, false)]);
    let status = &c.gateway_status.gateways[&NamespacedName::new("app", "ports")];
    let conflicted = |i: usize| {
        let found = status.listeners[i]
            .conditions
            .iter()
            .find(|c| c.type_ == "Conflicted");
        found.map(|c| (c.status, c.reason)).unwrap()
    };
    assert_eq!(conflicted(0), (false, "NoConflicts"));
    assert_eq!(conflicted(2), (true, "ProtocolConflict"));
    assert_eq!(conflicted(3), (true, "ProtocolConflict"));
    let accepted = status.listeners[0]
        .conditions
        .iter()
        .find(|c| c.type_ == "Accepted")
        .unwrap();
    assert!(accepted.status, "{accepted:?}");
}

/// GEP-5093: each `spec.addresses` entry is planned on its own, with the routability status
/// will report; one Sluice cannot satisfy refuses the Gateway with the reason.
#[test]
fn address_routability_is_planned_entry_by_entry() {
    let in_cluster = |text: &str, pool: Option<&str>| {
        let options = CompileOptions {
            gateway_address_pool: pool.map(|p| p.parse::<AddressPool>().unwrap()),
            gateway_services: Some(translate::gateway::ListenPorts {
                http: 8080,
                https: 8443,
            }),
            ..CompileOptions::default()
        };
        compiled_with(text, &options)
    };
    let sentinel = "  addresses: [{routability: testing.x-k8s.io/sentinel}]\n";
    let cluster = "  addresses: [{routability: Cluster}, {value: 192.0.2.11}]\n";
    let cluster_only = "  addresses: [{routability: Cluster, value: 10.96.0.20}]\n";
    let plain = "  addresses: [{}]\n";
    let text = format!(
        "{CLASS}{}{}{}{}{}",
        gateway("a", ""),
        gateway("b", sentinel),
        gateway("c", cluster),
        gateway("d", cluster_only),
        gateway("e", plain),
    );
    let c = in_cluster(&text, Some("192.0.2.10-192.0.2.14"));
    assert_eq!(address(&c, "a"), ["192.0.2.10"]);
    assert_eq!(address(&c, "b"), ["192.0.2.12 (testing.x-k8s.io/sentinel)"]);
    assert_eq!(address(&c, "c"), ["ClusterIP (Cluster)", "192.0.2.11"]);
    // Served on an address of the pool (its Service leads there), which status does not
    // report: only what was asked for is.
    assert_eq!(address(&c, "d"), ["ClusterIP 10.96.0.20 (Cluster)"]);
    let d = &c.gateway_status.gateways[&NamespacedName::new("app", "d")].addresses;
    assert_eq!(d.own, Some("192.0.2.13".parse().unwrap()));
    assert!(d.requested);
    assert_eq!(address(&c, "e"), ["192.0.2.14"]);
    for name in ["a", "b", "c", "d", "e"] {
        assert_eq!(condition(&c, name, "Programmed").reason, "Programmed");
    }
    assert_eq!(served(&c, "192.0.2.13", "x.com").as_deref(), Some("d-web"));

    // Without a pool, the shared addresses (the provider resolves them).
    let valued = "  addresses: [{value: 198.18.0.200}, {routability: Cluster}]\n";
    let text = format!("{CLASS}{}{}", gateway("a", sentinel), gateway("b", valued));
    let c = in_cluster(&text, None);
    assert_eq!(address(&c, "a"), ["shared (testing.x-k8s.io/sentinel)"]);
    assert_eq!(
        address(&c, "b"),
        ["shared 198.18.0.200", "ClusterIP (Cluster)"]
    );
    let said: Vec<String> = c.diagnostics.iter().map(ToString::to_string).collect();
    assert!(
        said.iter().any(|d| d.contains("Gateway app/b")
            && d.contains("spec.addresses[0] 198.18.0.200: without --gateway-address-pool")),
        "{said:?}"
    );

    // What Sluice cannot satisfy: an unknown scope, a second address of its own, a ClusterIP
    // from files; each refuses the Gateway (served nowhere), with the reason.
    let scoped = "  addresses: [{routability: example.com/internet}]\n";
    let two = "  addresses: [{value: 192.0.2.10}, {}]\n";
    let text = format!(
        "{CLASS}{}{}{}",
        gateway("f", scoped),
        gateway("g", two),
        gateway("h", "  addresses: [{routability: Cluster}]\n"),
    );
    let c = in_cluster(&text, Some("192.0.2.10-192.0.2.14"));
    for (name, reason, says) in [
        ("f", "AddressNotAssigned", "routability \"example.com/internet\": Sluice provides"),
        ("g", "AddressNotUsable", "spec.addresses[1]: Sluice gives a Gateway one address of its own, which spec.addresses[0] asks for"),
    ] {
        let programmed = condition(&c, name, "Programmed");
        assert_eq!((programmed.status, programmed.reason), (false, reason));
        assert!(programmed.message.contains(says), "{programmed:?}");
        let plan = &c.gateway_status.gateways[&NamespacedName::new("app", name)].addresses;
        assert_eq!(plan.refused.as_deref(), Some(&*programmed.message));
        assert!(plan.entries.is_empty());
    }
    assert_eq!(served(&c, "192.0.2.10", "x.com").as_deref(), Some("h-web"));
    let c = compiled(&text, Some("192.0.2.10-192.0.2.14"));
    let programmed = condition(&c, "h", "Programmed");
    assert_eq!(
        (programmed.status, programmed.reason),
        (false, "AddressNotAssigned")
    );
    assert!(
        programmed
            .message
            .contains("a configuration from files has none"),
        "{programmed:?}"
    );
}
