//! The compile's decisions about Gateway API objects as status conditions, with the spec's
//! reasons: what a diagnostic says in words, a condition says as data for the API server.
//!
//! ```text
//!  listener served? ─▶ ListenerStatus (Accepted, Programmed, ResolvedRefs, Conflicted, attachedRoutes)
//!  listeners ─▶ GatewayStatus (Accepted, Programmed)
//!  parentRef attached? backendRefs resolved? ─▶ RouteParentStatus (Accepted, ResolvedRefs)
//! ```

use model::gateway_status::{Condition, ListenerStatus, ParentRef, RouteKind};
use model::{Diagnostic, Severity};

use super::objects::{self, ParentReference, GROUP};

/// What the compile found about one listener of a Gateway.
pub(super) struct ListenerOutcome {
    pub(super) name: String,
    /// Index into the served slots; `None`: not served.
    pub(super) slot: Option<usize>,
    /// What the compile said about this listener, for the conditions' messages.
    pub(super) said: Vec<String>,
    pub(super) conflicted: bool,
}

/// The conditions and counts of one listener.
pub(super) fn listener_status(
    listener: &objects::Listener,
    outcome: &ListenerOutcome,
    (http_routes, attached): (bool, i32),
    generation: i64,
) -> ListenerStatus {
    let said = outcome.said.join("; ");
    let condition = |type_, status, reason, message: &str| {
        Condition::new(type_, status, reason, message, generation)
    };
    let mut conditions = Vec::new();
    let accepted = match (listener.protocol.as_str(), listener.port) {
        ("HTTP", 80) | ("HTTPS", 443) => None,
        ("HTTP" | "HTTPS", _) if outcome.slot.is_some() => None,
        ("HTTP" | "HTTPS", _) => Some("PortUnavailable"),
        _ => Some("UnsupportedProtocol"),
    };
    match accepted {
        Some(reason) => conditions.push(condition("Accepted", false, reason, &said)),
        None => conditions.push(condition("Accepted", true, "Accepted", "served by Sluice")),
    }
    let refs = if said.contains("ReferenceGrant") {
        Some("RefNotPermitted")
    } else if said.contains("certificate") || said.contains(".tls") {
        Some("InvalidCertificateRef")
    } else if said.contains("allowedRoutes.kinds") {
        Some("InvalidRouteKinds")
    } else {
        None
    };
    match refs {
        Some(reason) => conditions.push(condition("ResolvedRefs", false, reason, &said)),
        None => conditions.push(condition("ResolvedRefs", true, "ResolvedRefs", "")),
    }
    conditions.push(if said.contains("(ProtocolConflict)") {
        condition("Conflicted", true, "ProtocolConflict", &said)
    } else if outcome.conflicted {
        condition(
            "Conflicted",
            true,
            "HostnameConflict",
            "another listener of this Gateway has the same port and hostname",
        )
    } else {
        condition("Conflicted", false, "NoConflicts", "")
    });
    conditions.push(match outcome.slot {
        Some(_) => condition("Programmed", true, "Programmed", ""),
        None => condition("Programmed", false, "Invalid", &said),
    });
    ListenerStatus {
        name: outcome.name.clone(),
        supported_kinds: if http_routes && outcome.slot.is_some() {
            vec![RouteKind {
                group: GROUP,
                kind: "HTTPRoute",
            }]
        } else {
            Vec::new()
        },
        attached_routes: attached,
        conditions,
    }
}

/// A Gateway's own conditions, from how many of its listeners are served.
pub(super) fn gateway_conditions(
    served: usize,
    listeners: usize,
    generation: i64,
) -> Vec<Condition> {
    let all = served == listeners;
    vec![
        if all {
            Condition::new("Accepted", true, "Accepted", "served by Sluice", generation)
        } else {
            Condition::new(
                "Accepted",
                served > 0,
                "ListenersNotValid",
                format!(
                    "{} of {listeners} listeners are not served; see their conditions",
                    listeners - served
                ),
                generation,
            )
        },
        if served > 0 {
            Condition::new("Programmed", true, "Programmed", "", generation)
        } else {
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "no listener is served",
                generation,
            )
        },
    ]
}

/// A parentRef as the route wrote it.
pub(super) fn parent_ref(parent: &ParentReference) -> ParentRef {
    ParentRef {
        group: parent.group.clone(),
        kind: parent.kind.clone(),
        namespace: parent.namespace.clone(),
        name: parent.name.clone(),
        section_name: parent.section_name.clone(),
        port: parent.port,
    }
}

/// `ResolvedRefs` of a route from what the compile said about its backendRefs: the first
/// problem names the reason.
pub(super) fn resolved_refs(said: &[&Diagnostic], generation: i64) -> Condition {
    let problem = said.iter().find(|d| {
        d.reason.contains(".backendRefs[")
            && !matches!(d.severity, Severity::Unsupported | Severity::Notice)
    });
    match problem {
        None => Condition::new("ResolvedRefs", true, "ResolvedRefs", "", generation),
        Some(d) => {
            let reason = if d.reason.contains("(RefNotPermitted)") {
                "RefNotPermitted"
            } else if d.reason.contains("(InvalidKind)") {
                "InvalidKind"
            } else {
                "BackendNotFound"
            };
            Condition::new("ResolvedRefs", false, reason, d.reason.clone(), generation)
        }
    }
}

/// `PartiallyInvalid` when some of a route's rules are not served as written: a filter Sluice
/// refuses (that rule answers 503, in place of the dropped rule) or a match left out. The spec's
/// "drop the rule" approach, so `Accepted` stays True; the message starts "Dropped Rule" as the
/// spec asks.
pub(super) fn partially_invalid(said: &[&Diagnostic], generation: i64) -> Option<Condition> {
    let dropped: Vec<&str> = said
        .iter()
        .filter(|d| {
            d.reason.ends_with("; the rule answers 503") || d.reason.ends_with("; match ignored")
        })
        .map(|d| d.reason.as_str())
        .collect();
    (!dropped.is_empty()).then(|| {
        let message = format!("Dropped Rule(s) or matches: {}", dropped.join("; "));
        Condition::new(
            "PartiallyInvalid",
            true,
            "UnsupportedValue",
            message,
            generation,
        )
    })
}
