//! TCPRoute and UDPRoute status as `compile()` decides it, on the objects of the
//! `gateway-streams` golden case: TCP and UDP listeners list and admit their kind only, a port
//! Sluice's HTTP listener has is a ProtocolConflict, two routes on one listener are both
//! attached (and counted), and route parents get the spec's reasons (NotAllowedByListeners on
//! an HTTP listener; ResolvedRefs False with BackendNotFound or RefNotPermitted).

use model::NamespacedName;
use translate::{compile, parse_documents, CompileOptions, Store};

use crate::gateway_status::{find, statuses};

const OBJECTS: &str = include_str!("../golden/gateway-streams.in.yaml");

#[test]
fn tcp_and_udp_listeners_admit_their_routes_and_routes_get_the_specs_reasons() {
    let status = statuses(OBJECTS);
    let gateway = &status.gateways[&NamespacedName::new("app", "edge")];
    let listener = |name: &str| {
        let found = gateway.listeners.iter().find(|l| l.name == name);
        found.unwrap_or_else(|| panic!("no listener {name}"))
    };
    for (name, kind, attached) in [
        ("tcp", "TCPRoute", 2),
        ("udp", "UDPRoute", 2),
        ("tcp-5353", "TCPRoute", 1),
    ] {
        let kinds: Vec<&str> = (listener(name).supported_kinds.iter())
            .map(|k| k.kind)
            .collect();
        assert_eq!(kinds, [kind], "{name}");
        let accepted = find(&listener(name).conditions, "Accepted");
        assert_eq!(
            (accepted.status, accepted.reason),
            (true, "Accepted"),
            "{name}"
        );
        assert!(
            find(&listener(name).conditions, "Programmed").status,
            "{name}"
        );
        let conflicted = find(&listener(name).conditions, "Conflicted");
        assert!(!conflicted.status, "{name}: {conflicted:?}");
        assert_eq!(listener(name).attached_routes, attached, "{name}");
    }
    let on_80 = &listener("tcp-on-80").conditions;
    let accepted = find(on_80, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason),
        (false, "PortUnavailable")
    );
    let conflicted = find(on_80, "Conflicted");
    assert_eq!(
        (conflicted.status, conflicted.reason),
        (true, "ProtocolConflict")
    );
    let kinds = find(&listener("tcp-kinds").conditions, "ResolvedRefs");
    assert_eq!((kinds.status, kinds.reason), (false, "InvalidRouteKinds"));
    assert_eq!(listener("web").attached_routes, 0);

    let tcp = |name: &str| &status.tcp_routes[&NamespacedName::new("app", name)].parents[0];
    let udp = |name: &str| &status.udp_routes[&NamespacedName::new("app", name)].parents[0];
    for parent in [tcp("db"), tcp("newer"), udp("dns")] {
        assert!(find(&parent.conditions, "Accepted").status, "{parent:?}");
        assert!(
            find(&parent.conditions, "ResolvedRefs").status,
            "{parent:?}"
        );
    }
    let on_http = find(&tcp("on-http").conditions, "Accepted");
    assert_eq!(
        (on_http.status, on_http.reason),
        (false, "NotAllowedByListeners")
    );
    let bad = tcp("bad-refs");
    assert!(find(&bad.conditions, "Accepted").status);
    let refs = find(&bad.conditions, "ResolvedRefs");
    assert_eq!((refs.status, refs.reason), (false, "BackendNotFound"));
    let refs = find(&udp("xns").conditions, "ResolvedRefs");
    assert_eq!((refs.status, refs.reason), (false, "RefNotPermitted"));
}

#[test]
fn a_reference_grant_from_tcp_routes_lets_a_tcp_route_in_not_a_udp_route() {
    let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: let-in, namespace: elsewhere}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: TCPRoute, namespace: app}]\n  to: [{group: '', kind: Service}]\n";
    let refused = |text: &str| -> Vec<String> {
        let documents = parse_documents("t.yaml", text).unwrap();
        let mut store = Store::default();
        store.replace_all(documents.objects);
        let compiled = compile(&store, &CompileOptions::default());
        (compiled.diagnostics.iter())
            .map(ToString::to_string)
            .filter(|d| d.contains("(RefNotPermitted)"))
            .collect()
    };
    let before = refused(OBJECTS);
    assert_eq!(before.len(), 2, "{before:?}");
    let after = refused(&format!("{OBJECTS}{grant}"));
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(after[0].starts_with("UDPRoute app/xns: "), "{after:?}");
    let status = statuses(&format!("{OBJECTS}{grant}"));
    let xns = &status.udp_routes[&NamespacedName::new("app", "xns")].parents[0];
    let refs = find(&xns.conditions, "ResolvedRefs");
    assert_eq!((refs.status, refs.reason), (false, "RefNotPermitted"));
}
