//! TLSRoute status as `compile()` decides it, on the objects of the `gateway-tls` golden case:
//! TLS listeners list and admit TLSRoute only (an HTTP listener naming it: InvalidRouteKinds),
//! route parents get the spec's reasons (NoMatchingListenerHostname; ResolvedRefs False with
//! BackendNotFound, InvalidKind, RefNotPermitted as the first bad reference says).

use model::NamespacedName;

use crate::gateway_status::{find, statuses};

const OBJECTS: &str = include_str!("../golden/gateway-tls.in.yaml");

#[test]
fn tls_listeners_admit_tls_routes_and_routes_get_the_specs_reasons() {
    let status = statuses(OBJECTS);
    let gateway = &status.gateways[&NamespacedName::new("app", "edge")];
    let listener = |name: &str| {
        let found = gateway.listeners.iter().find(|l| l.name == name);
        found.unwrap_or_else(|| panic!("no listener {name}"))
    };
    for name in ["pass", "term", "mixed-pass"] {
        let kinds: Vec<&str> = (listener(name).supported_kinds.iter())
            .map(|k| k.kind)
            .collect();
        assert_eq!(kinds, ["TLSRoute"], "{name}");
        let accepted = find(&listener(name).conditions, "Accepted");
        assert_eq!(
            (accepted.status, accepted.reason),
            (true, "Accepted"),
            "{name}"
        );
        let programmed = find(&listener(name).conditions, "Programmed");
        assert!(programmed.status, "{name}");
    }
    // `wide` attaches everywhere (no sectionName); `exact` to both passthrough listeners;
    // `bad-refs` to `pass`; `nowhere` matches no hostname.
    assert_eq!(listener("pass").attached_routes, 3);
    assert_eq!(listener("term").attached_routes, 2);
    assert_eq!(listener("mixed-pass").attached_routes, 2);
    let web = listener("web");
    let refs = find(&web.conditions, "ResolvedRefs");
    assert_eq!((refs.status, refs.reason), (false, "InvalidRouteKinds"));
    assert!(web.supported_kinds.is_empty(), "{:?}", web.supported_kinds);

    let route = |name: &str| &status.tls_routes[&NamespacedName::new("app", name)];
    for name in ["wide", "exact", "terminated"] {
        let parent = &route(name).parents[0];
        let accepted = find(&parent.conditions, "Accepted");
        assert!(accepted.status, "{name}: {accepted:?}");
        let refs = find(&parent.conditions, "ResolvedRefs");
        assert!(refs.status, "{name}: {refs:?}");
    }
    let bad = &route("bad-refs").parents[0];
    assert!(find(&bad.conditions, "Accepted").status);
    let refs = find(&bad.conditions, "ResolvedRefs");
    assert_eq!((refs.status, refs.reason), (false, "BackendNotFound"));
    let nowhere = find(&route("nowhere").parents[0].conditions, "Accepted");
    assert_eq!(
        (nowhere.status, nowhere.reason),
        (false, "NoMatchingListenerHostname")
    );
}

#[test]
fn a_route_s_first_bad_reference_names_the_reason() {
    let with = |reference: &str| {
        let objects = OBJECTS.replace(
            "    - {name: missing, port: 8443}\n",
            &format!("    - {reference}\n"),
        );
        let status = statuses(&objects);
        let route = &status.tls_routes[&NamespacedName::new("app", "bad-refs")];
        let refs = find(&route.parents[0].conditions, "ResolvedRefs");
        (refs.status, refs.reason)
    };
    assert_eq!(
        with("{group: example.com, kind: Thing, name: tcp, port: 8443}"),
        (false, "InvalidKind")
    );
    assert_eq!(
        with("{name: tcp, namespace: elsewhere, port: 8443}"),
        (false, "RefNotPermitted")
    );
    let granted = format!(
        "{OBJECTS}---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: let-in, namespace: elsewhere}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: TLSRoute, namespace: app}}]\n  to: [{{group: '', kind: Service}}]\n"
    );
    let status = statuses(&granted.replace(
        "    - {name: missing, port: 8443}\n    - {group: example.com, kind: Thing, name: tcp, port: 8443}\n",
        "",
    ));
    let route = &status.tls_routes[&NamespacedName::new("app", "bad-refs")];
    let refs = find(&route.parents[0].conditions, "ResolvedRefs");
    // Granted, but the Service is not in the Store: found missing, not refused.
    assert_eq!((refs.status, refs.reason), (false, "BackendNotFound"));
    assert!(
        !refs.message.contains("RefNotPermitted"),
        "{}",
        refs.message
    );
}
