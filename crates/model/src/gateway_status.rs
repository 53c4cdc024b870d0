//! Gateway API status as the compile decided it: plain data in [`crate::Compiled`], written to
//! the API server by the Kubernetes provider's leader (which adds `lastTransitionTime` and keeps
//! it while a condition does not change).
//!
//! ```text
//!  compile ──decisions (attached? refs resolved? listener served?)──▶ GatewayStatuses
//!     ──▶ provider (leader): serde_json of each object's status + times ──▶ status subresource
//! ```
//! The shapes serialize as the API's (`camelCase`, `"True"`/`"False"`), so the provider writes
//! them without a mapping of its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::{Kind, NamespacedName};

/// Every status the compile decided, by object (each object's status serializes; the map
/// itself is the provider's to walk).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewayStatuses {
    /// GatewayClasses of Sluice's controller, by name.
    pub classes: BTreeMap<String, ClassStatus>,
    /// Gateways of those classes.
    pub gateways: BTreeMap<NamespacedName, GatewayStatus>,
    /// HTTPRoutes naming one of those Gateways: Sluice's entries of `status.parents`. Shared:
    /// a route unchanged since the last compile has the same `Arc` (a writer can skip it).
    pub http_routes: BTreeMap<NamespacedName, Arc<RouteStatus>>,
    /// GRPCRoutes naming one of those Gateways, likewise.
    pub grpc_routes: BTreeMap<NamespacedName, Arc<RouteStatus>>,
    /// BackendTLSPolicies that a route of those Gateways sends through: Sluice's entries of
    /// `status.ancestors`, one per Gateway.
    pub backend_tls_policies: BTreeMap<NamespacedName, PolicyStatus>,
    /// TLSRoutes naming one of those Gateways, likewise.
    pub tls_routes: BTreeMap<NamespacedName, Arc<RouteStatus>>,
    /// TCPRoutes and UDPRoutes naming one of those Gateways, likewise.
    pub tcp_routes: BTreeMap<NamespacedName, Arc<RouteStatus>>,
    pub udp_routes: BTreeMap<NamespacedName, Arc<RouteStatus>>,
    /// The `metadata.uid` of each Gateway, route and ListenerSet above (objects from the API server): the
    /// writer tells an object deleted and created again under its name from the one it wrote.
    pub uids: BTreeMap<(Kind, NamespacedName), Arc<str>>,
    /// ListenerSets naming one of those Gateways (allowed or not).
    pub listener_sets: BTreeMap<NamespacedName, ListenerSetStatus>,
}

/// One condition, without its transition time (the writer keeps or sets that).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: &'static str,
    #[serde(serialize_with = "true_false")]
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
    pub observed_generation: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassStatus {
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GatewayStatus {
    /// The Gateway's own address (`--gateway-address-pool`); empty: the provider writes the
    /// addresses every Gateway shares (`--publish-*`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayAddress>,
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerStatus>,
    /// ListenerSets attached (allowed, accepted). Always written, so a count that drops to 0
    /// replaces the one before (a merge patch keeps a field it does not name).
    #[serde(rename = "attachedListenerSets")]
    pub attached_listener_sets: i32,
}

/// A ListenerSet's status: its conditions and its listeners', as a Gateway's.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ListenerSetStatus {
    pub conditions: Vec<Condition>,
    pub listeners: Vec<ListenerStatus>,
}

/// One `status.addresses` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GatewayAddress {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub value: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    pub name: String,
    pub supported_kinds: Vec<RouteKind>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteKind {
    pub group: &'static str,
    pub kind: &'static str,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RouteStatus {
    pub parents: Vec<RouteParentStatus>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    /// The parentRef as the route wrote it.
    pub parent_ref: ParentRef,
    pub controller_name: &'static str,
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// A policy's status (GEP-713): one entry per ancestor (Gateway) it takes effect under.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PolicyStatus {
    pub ancestors: Vec<PolicyAncestorStatus>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyAncestorStatus {
    pub ancestor_ref: ParentRef,
    pub controller_name: &'static str,
    pub conditions: Vec<Condition>,
}

impl Condition {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
        observed_generation: i64,
    ) -> Condition {
        Condition {
            type_,
            status,
            reason,
            message: message.into(),
            observed_generation,
        }
    }
}

fn true_false<S: serde::Serializer>(status: &bool, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(if *status { "True" } else { "False" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_serialize_as_the_api_writes_them() {
        let condition = Condition::new("Accepted", false, "NotAllowedByListeners", "no", 3);
        assert_eq!(
            serde_json::to_value(&condition).unwrap(),
            serde_json::json!({"type": "Accepted", "status": "False",
                "reason": "NotAllowedByListeners", "message": "no", "observedGeneration": 3})
        );
    }
}
