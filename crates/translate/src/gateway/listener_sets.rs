//! ListenerSets: listeners written outside a Gateway that join it when the Gateway allows them
//! (`spec.allowedListeners.namespaces.from`: None by default, Same, All, Selector).
//!
//! ```text
//!  ListenerSet ─parentRef─▶ one of our Gateways ─allowedListeners admits its namespace?─┐
//!     no  ─▶ Accepted/Programmed False NotAllowed, nothing served                       │
//!     yes ─▶ each listener, in order: the Gateway's own and older ListenerSets' first  ◀┘
//!            same port, other protocol ─▶ ProtocolConflict   same port and hostname ─▶
//!            HostnameConflict (not accepted, not served) ─ else ─▶ listeners.rs, as a
//!            Gateway's listener (owner: the ListenerSet) ─▶ a ListenerSlot with `set`
//!  ─▶ ListenerSetStatus (Accepted while a listener is valid, else ListenersNotValid) and the
//!     Gateway's attachedListenerSets
//! ```
//! ListenerSets are taken oldest first, then by namespace/name (objects from files have no
//! creation time and count as oldest), as the spec orders them for conflicts.

use std::collections::{BTreeMap, BTreeSet};

use model::gateway_status::{Condition, GatewayStatuses, ListenerSetStatus};
use model::{Kind, NamespacedName, ObjectRef};

use super::listener_set_objects::ListenerSet;
use super::namespaces::AllowedFrom;
use super::objects::Gateway;
use super::{status, ListenerSlot, Place, GROUP};
use crate::compiler::Compiler;
use crate::store::Store;

/// What the compile decided about one ListenerSet, for its status after routes attached.
pub(super) struct SetOutcome<'a> {
    key: &'a NamespacedName,
    set: &'a ListenerSet,
    gateway: NamespacedName,
    /// The Gateway's `allowedListeners` admits it.
    allowed: bool,
    found: Vec<status::ListenerOutcome>,
}

type Sets<'a> = Vec<(&'a NamespacedName, &'a ListenerSet)>;

impl<'s> Compiler<'s> {
    /// The ListenerSets whose parentRef names one of `gateways`, by Gateway, in the spec's order.
    pub(super) fn listener_sets_by_gateway(
        &self,
        gateways: &[(&NamespacedName, &Gateway)],
    ) -> BTreeMap<NamespacedName, Sets<'s>> {
        let store: &'s Store = self.store;
        let mut by_gateway: BTreeMap<NamespacedName, Sets<'s>> = BTreeMap::new();
        for (key, set) in store.listener_sets_by_name() {
            let parent = &set.spec.parent_ref;
            let group = parent.group.as_deref().unwrap_or(GROUP);
            let kind = parent.kind.as_deref().unwrap_or("Gateway");
            let namespace = parent.namespace.as_deref().unwrap_or(&key.namespace);
            let gateway = NamespacedName::new(namespace, parent.name.as_str());
            if group == GROUP && kind == "Gateway" && gateways.iter().any(|(g, _)| **g == gateway) {
                by_gateway.entry(gateway).or_default().push((key, set));
            }
        }
        for sets in by_gateway.values_mut() {
            let created = |set: &ListenerSet| set.metadata.creation_timestamp.clone();
            sets.sort_by(|(a_key, a), (b_key, b)| {
                (created(a).cmp(&created(b))).then_with(|| a_key.cmp(b_key))
            });
        }
        by_gateway
    }

    /// The listeners of a Gateway's ListenerSets, after its own: each allowed one's listeners
    /// join `listeners` (with `set`), except those that conflict with an earlier listener.
    pub(super) fn listener_sets(
        &mut self,
        (gateway_key, gateway, place): (&NamespacedName, &Gateway, Place),
        sets: Sets<'s>,
        listeners: &mut Vec<ListenerSlot>,
    ) -> Vec<SetOutcome<'s>> {
        let from = self.allowed_listeners(gateway_key, gateway);
        // (port, protocol, hostname) of the listeners already there: the Gateway's own win.
        let mut taken: Vec<(i32, String, Option<String>)> = (gateway.spec.listeners.iter())
            .map(|l| (l.port, l.protocol.clone(), l.hostname.clone()))
            .collect();
        let mut outcomes = Vec::new();
        for (key, set) in sets {
            let owner = (Kind::ListenerSet, key);
            let object = ObjectRef::new(Kind::ListenerSet, &*key.namespace, &*key.name);
            self.unsupported_fields(&object, &set.unsupported);
            let allowed = from.admits(self.store, &gateway_key.namespace, &key.namespace);
            let mut found = Vec::new();
            if !allowed {
                self.diagnose(
                    object.clone(),
                    format!("spec.parentRef: Gateway {gateway_key} does not allow ListenerSets from namespace {} (its spec.allowedListeners; NotAllowed); listeners not served", key.namespace),
                );
            }
            for (i, listener) in set.spec.listeners.iter().enumerate().filter(|_| allowed) {
                let mark = self.out.diagnostics.len();
                let lost = taken.iter().find_map(|(port, protocol, hostname)| {
                    if *port != listener.port {
                        None
                    } else if *protocol != listener.protocol {
                        Some("ProtocolConflict")
                    } else {
                        (*hostname == listener.hostname).then_some("HostnameConflict")
                    }
                });
                let slot = match lost {
                    Some(reason) => {
                        self.diagnose(
                            object.clone(),
                            format!("spec.listeners[{i}]: port {} ({}) is taken by a listener of Gateway {gateway_key} or of an older ListenerSet ({reason}); listener not served", listener.port, listener.protocol),
                        );
                        None
                    }
                    None => self.listener((gateway_key, place), owner, i, listener),
                };
                let slot = slot.map(|slot| {
                    let hostname = listener.hostname.clone();
                    taken.push((listener.port, listener.protocol.clone(), hostname));
                    listeners.push(slot);
                    listeners.len() - 1
                });
                found.push(status::ListenerOutcome {
                    name: listener.name.clone(),
                    slot,
                    said: self.said_since(mark, i),
                    conflicted: false,
                    lost,
                    ca: None,
                });
            }
            outcomes.push(SetOutcome {
                key,
                set,
                gateway: gateway_key.clone(),
                allowed,
                found,
            });
        }
        outcomes
    }

    /// A Gateway's `allowedListeners.namespaces`: None (the default) admits no ListenerSet.
    fn allowed_listeners(&mut self, key: &NamespacedName, gateway: &Gateway) -> AllowedFrom {
        let namespaces =
            (gateway.spec.allowed_listeners.as_ref()).and_then(|a| a.namespaces.as_ref());
        let from = namespaces.and_then(|n| n.from.as_deref()).unwrap_or("None");
        let object = super::gateway_ref(key);
        let at = "spec.allowedListeners.namespaces";
        match from {
            "Same" => AllowedFrom::Same,
            "All" => AllowedFrom::All,
            "Selector" => {
                let refused = "no ListenerSet is allowed";
                self.namespace_selector(&object, at, namespaces, refused)
            }
            "None" => AllowedFrom::Nobody,
            other => {
                self.diagnose(
                    object,
                    format!("{at}.from {other:?}: must be None, Same, All or Selector; no ListenerSet is allowed"),
                );
                AllowedFrom::Nobody
            }
        }
    }

    /// Each ListenerSet's status into `out`; returns how many are attached to each Gateway.
    pub(super) fn listener_set_statuses(
        &self,
        outcomes: Vec<SetOutcome>,
        listeners: &[ListenerSlot],
        refused_gateways: &BTreeSet<NamespacedName>,
        out: &mut GatewayStatuses,
    ) -> BTreeMap<NamespacedName, i32> {
        let mut attached = BTreeMap::new();
        for outcome in outcomes {
            let generation = outcome.set.generation;
            let condition = |type_, status, reason, message: &str| {
                Condition::new(type_, status, reason, message, generation)
            };
            let listener_status: Vec<_> = (outcome.set.spec.listeners.iter())
                .zip(&outcome.found)
                .map(|(listener, found)| {
                    let slot = found.slot.map(|s| listeners[s].accepted());
                    status::listener_status(listener, found, slot, generation)
                })
                .collect();
            let valid = (outcome.found.iter())
                .filter_map(|o| o.slot)
                .filter(|s| listeners[*s].programmed && listeners[*s].filter_fault.is_none())
                .count();
            let total = outcome.found.len();
            let conditions = if refused_gateways.contains(&outcome.gateway) {
                let why = format!(
                    "Gateway {} is not accepted (InvalidParameters: see its status); nothing is served through it",
                    outcome.gateway
                );
                vec![
                    condition("Accepted", false, "ParentNotAccepted", &why),
                    condition("Programmed", false, "ParentNotAccepted", &why),
                ]
            } else if !outcome.allowed {
                let why = format!(
                    "Gateway {} does not allow ListenerSets from this namespace (allowedListeners)",
                    outcome.gateway
                );
                vec![
                    condition("Accepted", false, "NotAllowed", &why),
                    condition("Programmed", false, "NotAllowed", &why),
                ]
            } else if valid == 0 {
                let why = "no listener is valid; see their conditions";
                vec![
                    condition("Accepted", false, "ListenersNotValid", why),
                    condition("Programmed", false, "ListenersNotValid", why),
                ]
            } else {
                *attached.entry(outcome.gateway.clone()).or_insert(0) += 1;
                let why = match valid == total {
                    true => String::new(),
                    false => format!(
                        "{} of {total} listeners are not valid; see their conditions",
                        total - valid
                    ),
                };
                vec![
                    condition("Accepted", true, "Accepted", &why),
                    condition("Programmed", true, "Programmed", &why),
                ]
            };
            out.listener_sets.insert(
                outcome.key.clone(),
                ListenerSetStatus {
                    conditions,
                    listeners: listener_status,
                },
            );
        }
        attached
    }
}
