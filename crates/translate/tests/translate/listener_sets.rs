//! ListenerSets as the spec and the conformance suite want them: a Gateway allows them by
//! namespace (None by default), their listeners join the Gateway's after its own (conflicts
//! lost by the newer), routes attach to them by a parentRef of kind ListenerSet, and each
//! gets its status; the Gateway counts the attached ones.

use model::gateway_status::{Condition, GatewayStatuses, ListenerStatus};
use model::NamespacedName;

use crate::gateway_status::{find, statuses};

const CLASS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
";

fn state(conditions: &[Condition], type_: &str) -> (bool, &'static str) {
    let c = find(conditions, type_);
    (c.status, c.reason)
}

fn set_state(status: &GatewayStatuses, set: (&str, &str), type_: &str) -> (bool, &'static str) {
    let set = &status.listener_sets[&NamespacedName::new(set.0, set.1)];
    state(&set.conditions, type_)
}

fn set_listener<'a>(
    status: &'a GatewayStatuses,
    set: (&str, &str),
    name: &str,
) -> &'a ListenerStatus {
    let set = &status.listener_sets[&NamespacedName::new(set.0, set.1)];
    set.listeners.iter().find(|l| l.name == name).unwrap()
}

fn attached_sets(status: &GatewayStatuses, gateway: &str) -> i32 {
    status.gateways[&NamespacedName::new("infra", gateway)].attached_listener_sets
}

/// A Gateway in `infra` with one HTTP listener for `<name>.test` and `allowedListeners`.
fn gateway(name: &str, allowed: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
         metadata: {{name: {name}, namespace: infra}}\nspec:\n  gatewayClassName: sluice\n{allowed}\
         \x20 listeners: [{{name: own, port: 80, protocol: HTTP, hostname: {name}.test}}]\n"
    )
}

/// A ListenerSet of Gateway infra/`parent` with `listeners` (a YAML flow list).
fn set(namespace: &str, name: &str, parent: &str, listeners: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\n\
         metadata: {{name: {name}, namespace: {namespace}}}\nspec:\n\
         \x20 parentRef: {{name: {parent}, namespace: infra}}\n  listeners: {listeners}\n"
    )
}

#[test]
fn a_gateway_allows_listener_sets_by_namespace_none_by_default() {
    let one = "[{name: extra, port: 80, protocol: HTTP, hostname: extra.test}]";
    let text = [
        CLASS.to_owned(),
        gateway("closed", ""),
        gateway("same", "  allowedListeners: {namespaces: {from: Same}}\n"),
        gateway(
            "selected",
            "  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}\n",
        ),
        set("infra", "to-closed", "closed", one),
        set("infra", "to-same", "same", one),
        set("apps", "to-same-elsewhere", "same", one),
        set("apps", "to-selected", "selected", one),
        set("web", "to-selected-unlabelled", "selected", one),
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: apps, labels: {team: a}}\n".into(),
    ]
    .concat();
    let status = statuses(&text);
    for refused in [
        ("infra", "to-closed"),
        ("apps", "to-same-elsewhere"),
        ("web", "to-selected-unlabelled"),
    ] {
        assert_eq!(
            set_state(&status, refused, "Accepted"),
            (false, "NotAllowed"),
            "{refused:?}"
        );
        assert_eq!(
            set_state(&status, refused, "Programmed"),
            (false, "NotAllowed"),
            "{refused:?}"
        );
    }
    for allowed in [("infra", "to-same"), ("apps", "to-selected")] {
        assert_eq!(
            set_state(&status, allowed, "Accepted"),
            (true, "Accepted"),
            "{allowed:?}"
        );
        assert_eq!(
            set_state(&status, allowed, "Programmed"),
            (true, "Programmed"),
            "{allowed:?}"
        );
        let listener = set_listener(&status, allowed, "extra");
        assert_eq!(state(&listener.conditions, "Accepted"), (true, "Accepted"));
        assert_eq!(
            state(&listener.conditions, "Programmed"),
            (true, "Programmed")
        );
    }
    assert_eq!(attached_sets(&status, "closed"), 0);
    assert_eq!(attached_sets(&status, "same"), 1);
    assert_eq!(attached_sets(&status, "selected"), 1);
    // The Gateway's own listeners are its status's, not the ListenerSets'.
    let same = &status.gateways[&NamespacedName::new("infra", "same")];
    let names: Vec<&str> = same.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["own"]);
}

#[test]
fn conflicts_are_lost_by_listener_sets_to_the_gateway_then_to_older_sets() {
    let all = "  allowedListeners: {namespaces: {from: All}}\n";
    let text = [
        CLASS.to_owned(),
        gateway("edge", all),
        // Sorted by name (no creation times in a file): a-first before b-second.
        set(
            "infra",
            "a-first",
            "edge",
            "[{name: fine, port: 80, protocol: HTTP, hostname: a.test},
              {name: gateway-host, port: 80, protocol: HTTP, hostname: edge.test},
              {name: tcp, port: 80, protocol: TCP},
              {name: shared, port: 80, protocol: HTTP, hostname: shared.test}]",
        ),
        set(
            "infra",
            "b-second",
            "edge",
            "[{name: shared, port: 80, protocol: HTTP, hostname: shared.test}]",
        ),
    ]
    .concat();
    let status = statuses(&text);
    let first = ("infra", "a-first");
    for (name, reason) in [
        ("gateway-host", "HostnameConflict"),
        ("tcp", "ProtocolConflict"),
    ] {
        let conditions = &set_listener(&status, first, name).conditions;
        assert_eq!(state(conditions, "Accepted"), (false, reason), "{name}");
        assert_eq!(state(conditions, "Programmed"), (false, reason), "{name}");
        assert_eq!(state(conditions, "Conflicted"), (true, reason), "{name}");
    }
    for name in ["fine", "shared"] {
        let conditions = &set_listener(&status, first, name).conditions;
        assert_eq!(state(conditions, "Accepted"), (true, "Accepted"), "{name}");
        assert_eq!(
            state(conditions, "Conflicted"),
            (false, "NoConflicts"),
            "{name}"
        );
    }
    // Some listeners valid: the set is accepted. None: ListenersNotValid.
    assert_eq!(set_state(&status, first, "Accepted"), (true, "Accepted"));
    let second = ("infra", "b-second");
    let conditions = &set_listener(&status, second, "shared").conditions;
    assert_eq!(state(conditions, "Conflicted"), (true, "HostnameConflict"));
    assert_eq!(
        set_state(&status, second, "Accepted"),
        (false, "ListenersNotValid")
    );
    assert_eq!(
        set_state(&status, second, "Programmed"),
        (false, "ListenersNotValid")
    );
    assert_eq!(attached_sets(&status, "edge"), 1);
    // The Gateway's own listener is untouched by the sets' conflicts.
    let edge = &status.gateways[&NamespacedName::new("infra", "edge")];
    assert_eq!(
        state(&edge.listeners[0].conditions, "Conflicted"),
        (false, "NoConflicts")
    );
}

#[test]
fn routes_attach_to_a_listener_set_by_its_parent_ref_and_status_is_scoped_to_it() {
    let all = "  allowedListeners: {namespaces: {from: All}}\n";
    let routes = "\
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: infra}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: both, namespace: infra}
spec:
  parentRefs:
  - {name: edge}
  - {group: gateway.networking.k8s.io, kind: ListenerSet, name: extra}
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: section, namespace: infra}
spec:
  parentRefs:
  - {kind: ListenerSet, name: extra, sectionName: one}
  # A ListenerSet's listener is not the Gateway's: not found through the Gateway.
  - {name: edge, sectionName: one}
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: outsider, namespace: infra}
spec:
  # The ListenerSet in `apps` admits routes of its own namespace only (Same).
  parentRefs: [{kind: ListenerSet, name: remote, namespace: apps}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
";
    let text = [
        CLASS.to_owned(),
        gateway("edge", all),
        set(
            "infra",
            "extra",
            "edge",
            "[{name: one, port: 80, protocol: HTTP, hostname: one.test},
              {name: two, port: 80, protocol: HTTP, hostname: two.test}]",
        ),
        set(
            "apps",
            "remote",
            "edge",
            "[{name: r, port: 80, protocol: HTTP, hostname: r.test}]",
        ),
        routes.to_owned(),
    ]
    .concat();
    let status = statuses(&text);
    let extra = ("infra", "extra");
    assert_eq!(set_listener(&status, extra, "one").attached_routes, 2);
    assert_eq!(set_listener(&status, extra, "two").attached_routes, 1);
    let edge = &status.gateways[&NamespacedName::new("infra", "edge")];
    assert_eq!(edge.listeners[0].attached_routes, 1);
    assert_eq!(attached_sets(&status, "edge"), 2);

    let parents = |route: &str| {
        let route = &status.http_routes[&NamespacedName::new("infra", route)];
        (route.parents.iter())
            .map(|p| {
                let accepted = find(&p.conditions, "Accepted");
                let kind = p.parent_ref.kind.clone().unwrap_or_default();
                (
                    kind,
                    p.parent_ref.name.clone(),
                    accepted.status,
                    accepted.reason,
                )
            })
            .collect::<Vec<_>>()
    };
    let owned = |kind: &str, name: &str, accepted, reason| {
        (kind.to_owned(), name.to_owned(), accepted, reason)
    };
    assert_eq!(
        parents("both"),
        [
            owned("", "edge", true, "Accepted"),
            owned("ListenerSet", "extra", true, "Accepted"),
        ]
    );
    assert_eq!(
        parents("section"),
        [
            owned("ListenerSet", "extra", true, "Accepted"),
            owned("", "edge", false, "NoMatchingParent"),
        ]
    );
    assert_eq!(
        parents("outsider"),
        [owned(
            "ListenerSet",
            "remote",
            false,
            "NotAllowedByListeners"
        )]
    );
}

#[test]
fn a_listener_set_certificate_across_namespaces_needs_a_grant_from_listener_sets() {
    let all = "  allowedListeners: {namespaces: {from: All}}\n";
    let https = |host: &str| {
        format!("[{{name: tls, port: 443, protocol: HTTPS, hostname: {host}, tls: {{certificateRefs: [{{name: certificate, namespace: certs}}]}}}}]")
    };
    let text = [
        CLASS.to_owned(),
        gateway("edge", all),
        set("infra", "granted", "edge", &https("g.test")),
        set("apps", "ungranted", "edge", &https("u.test")),
        // Granted to ListenerSets in `infra` only (a Gateway's grant would not do).
        "---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: sets, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: ListenerSet, namespace: infra},
         {group: gateway.networking.k8s.io, kind: Gateway, namespace: apps}]
  to: [{group: '', kind: Secret}]
---
apiVersion: v1
kind: Secret
metadata: {name: certificate, namespace: certs}
type: kubernetes.io/tls
data: {tls.crt: bm90IGEgY2VydGlmaWNhdGU=, tls.key: bm90IGEga2V5}
"
        .to_owned(),
    ]
    .concat();
    let status = statuses(&text);
    // Granted, the Secret is read (and is not a certificate): InvalidCertificateRef.
    let granted = &set_listener(&status, ("infra", "granted"), "tls").conditions;
    assert_eq!(
        state(granted, "ResolvedRefs"),
        (false, "InvalidCertificateRef")
    );
    let ungranted = &set_listener(&status, ("apps", "ungranted"), "tls").conditions;
    assert_eq!(state(ungranted, "ResolvedRefs"), (false, "RefNotPermitted"));
    let set = ("apps", "ungranted");
    assert_eq!(
        set_state(&status, set, "Accepted"),
        (false, "ListenersNotValid")
    );
}

#[test]
fn a_listener_set_of_a_refused_gateway_and_its_routes_are_not_accepted() {
    // The Gateway is refused for its parametersRef: served nowhere. Its ListenerSet and a route
    // attached through the set must not say they are accepted.
    let refused =
        "  infrastructure:\n    parametersRef: {group: example.com, kind: Tuning, name: fast}\n  \
                   allowedListeners: {namespaces: {from: Same}}\n";
    let one = "[{name: extra, port: 80, protocol: HTTP, hostname: extra.test}]";
    let route = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
                 metadata: {name: through-set, namespace: infra}\nspec:\n\
                 \x20 parentRefs: [{kind: ListenerSet, name: extra}]\n\
                 \x20 rules: [{backendRefs: [{name: web, port: 80}]}]\n";
    let text = [
        CLASS.to_owned(),
        gateway("tuned", refused),
        set("infra", "extra", "tuned", one),
        route.to_owned(),
    ]
    .concat();
    let status = statuses(&text);
    for type_ in ["Accepted", "Programmed"] {
        assert_eq!(
            set_state(&status, ("infra", "extra"), type_),
            (false, "ParentNotAccepted"),
            "{type_}"
        );
    }
    assert_eq!(attached_sets(&status, "tuned"), 0);
    let parent = &status.http_routes[&NamespacedName::new("infra", "through-set")].parents[0];
    let accepted = find(&parent.conditions, "Accepted");
    assert_eq!(
        (accepted.status, accepted.reason),
        (false, "ParentNotAccepted")
    );
    assert!(
        accepted.message.starts_with(
            "ListenerSet infra/extra belongs to Gateway infra/tuned, which is not accepted"
        ),
        "{}",
        accepted.message
    );
}
