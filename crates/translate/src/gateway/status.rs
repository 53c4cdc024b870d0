//! The compile's decisions about Gateway API objects as status conditions, with the spec's
//! reasons: what a diagnostic says in words, a condition says as data for the API server.
//!
//! ```text
//!  listener served? ─▶ ListenerStatus (Accepted, Programmed, ResolvedRefs, Conflicted, attachedRoutes;
//!      a bad CA of its port's client certificate validation: ResolvedRefs, Accepted)
//!  listeners ─▶ GatewayStatus (Accepted, Programmed)
//!  parentRef attached? backendRefs resolved? ─▶ RouteParentStatus (Accepted, ResolvedRefs)
//! ```

use model::gateway_status::{Condition, ListenerStatus, ParentRef, RouteKind};
use model::{Diagnostic, Severity};

use super::objects::{self, ParentReference, GROUP};

/// What the compile found about one listener of a Gateway.
pub(super) struct ListenerOutcome {
    pub(super) name: String,
    /// Index into the accepted listeners' slots; `None`: not accepted.
    pub(super) slot: Option<usize>,
    /// What the compile said about this listener, for the conditions' messages.
    pub(super) said: Vec<String>,
    pub(super) conflicted: bool,
    /// A ListenerSet's listener that lost a conflict with the Gateway's or an older
    /// ListenerSet's (HostnameConflict, ProtocolConflict): not accepted, for that reason.
    pub(super) lost: Option<&'static str>,
    /// Its port's client certificate validation has a bad CA reference (`frontend_tls`).
    pub(super) ca: Option<super::frontend_tls::CaProblem>,
}

/// Why a listener's filters cannot all run, as its conditions say it.
#[derive(Clone, Debug, Default)]
pub(super) struct FilterFault {
    /// `Accepted` False with this reason.
    pub(super) accepted: Option<&'static str>,
    /// `ResolvedRefs` False with this reason.
    pub(super) refs: Option<&'static str>,
    /// Every problem, each naming its filter.
    pub(super) message: String,
}

/// What the compile decided about an accepted listener (from its slot).
#[derive(Clone)]
pub(super) struct Accepted {
    pub(super) http_routes: bool,
    pub(super) grpc_routes: bool,
    pub(super) tls_routes: bool,
    pub(super) tcp_routes: bool,
    pub(super) udp_routes: bool,
    pub(super) attached: i32,
    pub(super) programmed: bool,
    /// Why `ResolvedRefs` is False, if it is.
    pub(super) refs: Option<&'static str>,
    /// Why its pre-routing filters cannot all run (`listener_filters`), if they cannot.
    pub(super) filter_fault: Option<FilterFault>,
}

/// The conditions and counts of one listener: Accepted (its protocol and port are served),
/// ResolvedRefs (its certificate and route kinds), Conflicted, Programmed (served now).
pub(super) fn listener_status(
    listener: &objects::Listener,
    outcome: &ListenerOutcome,
    slot: Option<Accepted>,
    generation: i64,
) -> ListenerStatus {
    let said = outcome.said.join("; ");
    let condition = |type_, status, reason, message: &str| {
        Condition::new(type_, status, reason, message, generation)
    };
    let mut conditions = Vec::new();
    let filters = slot.as_ref().and_then(|s| s.filter_fault.as_ref());
    let accepted = match (listener.protocol.as_str(), listener.port, &slot) {
        _ if outcome.lost.is_some() => outcome.lost,
        _ if outcome.ca.as_ref().is_some_and(|c| c.none_valid) => Some("NoValidCACertificate"),
        _ if filters.is_some_and(|f| f.accepted.is_some()) => filters.and_then(|f| f.accepted),
        (_, _, Some(_)) => None,
        ("HTTP", 80, None) | ("HTTPS", 443, None) => Some("UnsupportedValue"),
        ("HTTP" | "HTTPS" | "TCP" | "UDP", _, None) => Some("PortUnavailable"),
        _ => Some("UnsupportedProtocol"),
    };
    let filter_message = filters.map_or("", |f| f.message.as_str());
    match accepted {
        Some(reason) if filters.is_some_and(|f| f.accepted == Some(reason)) => {
            conditions.push(condition("Accepted", false, reason, filter_message))
        }
        Some(reason) => conditions.push(condition("Accepted", false, reason, &said)),
        None => conditions.push(condition("Accepted", true, "Accepted", "served by Sluice")),
    }
    let filter_refs = filters.and_then(|f| f.refs);
    match (&outcome.ca, slot.as_ref().and_then(|s| s.refs), filter_refs) {
        (Some(ca), _, _) => {
            conditions.push(condition("ResolvedRefs", false, ca.reason, &ca.message))
        }
        (None, Some(reason), _) => conditions.push(condition("ResolvedRefs", false, reason, &said)),
        (None, None, Some(reason)) => {
            conditions.push(condition("ResolvedRefs", false, reason, filter_message))
        }
        (None, None, None) => conditions.push(condition("ResolvedRefs", true, "ResolvedRefs", "")),
    }
    conditions.push(if let Some(reason) = outcome.lost {
        condition("Conflicted", true, reason, &said)
    } else if said.contains("(ProtocolConflict)") {
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
    conditions.push(match &slot {
        Some(s) if s.programmed && filters.is_some() => {
            condition("Programmed", false, "Invalid", filter_message)
        }
        Some(s) if s.programmed => condition("Programmed", true, "Programmed", ""),
        _ => condition(
            "Programmed",
            false,
            outcome.lost.unwrap_or("Invalid"),
            &said,
        ),
    });
    ListenerStatus {
        name: outcome.name.clone(),
        // An accepted listener lists the kinds it admits even while not programmed (the
        // spec's supportedKinds is about the listener's configuration, not its certificate).
        supported_kinds: slot
            .as_ref()
            .map(|s| {
                [
                    (s.http_routes, "HTTPRoute"),
                    (s.grpc_routes, "GRPCRoute"),
                    (s.tls_routes, "TLSRoute"),
                    (s.tcp_routes, "TCPRoute"),
                    (s.udp_routes, "UDPRoute"),
                ]
            })
            .into_iter()
            .flatten()
            .filter(|(admitted, _)| *admitted)
            .map(|(_, kind)| RouteKind { group: GROUP, kind })
            .collect(),
        attached_routes: slot.as_ref().map_or(0, |s| s.attached),
        conditions,
    }
}

/// A Gateway's own conditions from its listeners: Accepted while some listener is
/// (ListenersNotValid when not all are), Programmed while an accepted listener makes data
/// plane configuration (a listener without its certificate is accepted, not programmed, and
/// says so itself, so the Gateway stays Programmed as the conformance suite expects).
pub(super) fn gateway_conditions(
    accepted: usize,
    programmed: usize,
    listeners: usize,
    generation: i64,
) -> Vec<Condition> {
    let all = accepted == listeners;
    vec![
        if all {
            Condition::new("Accepted", true, "Accepted", "served by Sluice", generation)
        } else {
            Condition::new(
                "Accepted",
                accepted > 0,
                "ListenersNotValid",
                format!(
                    "{} of {listeners} listeners are not accepted; see their conditions",
                    listeners - accepted
                ),
                generation,
            )
        },
        if accepted > 0 {
            let message = if programmed == listeners {
                String::new()
            } else {
                format!(
                    "{programmed} of {listeners} listeners are programmed; see their conditions"
                )
            };
            Condition::new("Programmed", true, "Programmed", message, generation)
        } else {
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "no listener is accepted",
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

/// When every rule of a route is refused (each answers 503): why, for `Accepted=False` with
/// reason `UnsupportedValue`. Such a route is fully invalid, so it gets no `PartiallyInvalid`
/// (the spec sets that on a partly valid route only).
pub(super) fn all_rules_refused(said: &[&Diagnostic], rules: usize) -> Option<String> {
    let refused: Vec<&str> = said
        .iter()
        .filter(|d| d.reason.ends_with("; the rule answers 503"))
        .map(|d| d.reason.as_str())
        .collect();
    let rule_of = |reason: &str| {
        let index = reason.strip_prefix("spec.rules[")?.split(']').next()?;
        index.parse::<usize>().ok()
    };
    let distinct: std::collections::BTreeSet<usize> =
        refused.iter().filter_map(|r| rule_of(r)).collect();
    (rules > 0 && distinct.len() == rules)
        .then(|| format!("every rule is refused: {}", refused.join("; ")))
}
