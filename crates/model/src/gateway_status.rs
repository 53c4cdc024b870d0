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
//!
//! Beside the statuses, what each Gateway wants generated in its namespace
//! ([`GatewayStatuses::infrastructure`]: a Service and EndpointSlices, GEP-1762), decided by the
//! compile like a condition and written by the same leader.

use std::collections::BTreeMap;
use std::net::IpAddr;
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
    /// What each served Gateway gets generated in its namespace (Kubernetes mode only; empty
    /// for a configuration from files). A Gateway not here has nothing generated: whatever
    /// Sluice generated for it before is deleted.
    pub infrastructure: BTreeMap<NamespacedName, Generated>,
}

/// A Gateway's generated infrastructure, as the compile decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Generated {
    Service(GatewayService),
    /// Nothing can be generated for this Gateway: why (for its condition's message).
    Refused(String),
}

/// The Service that reaches a Gateway from inside the cluster (Sluice's data plane is the node
/// itself, so there is no Deployment): selector-less, with the Gateway's listener ports, and
/// EndpointSlices whose endpoints are the Gateway's addresses. The provider adds what only it
/// knows: the shared addresses, the owner's uid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayService {
    /// The Service's name (its EndpointSlices': this and the address family).
    pub name: String,
    /// On the Service and its EndpointSlices: GEP-1762's `gateway-name` and
    /// `gateway-class-name`, then the Gateway's `spec.infrastructure.labels`.
    pub labels: BTreeMap<String, String>,
    /// The Gateway's `spec.infrastructure.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// One per (protocol, port) of the Gateway's accepted listeners (its ListenerSets' too),
    /// TCP first, by port.
    pub ports: Vec<ServicePort>,
    pub addresses: ServiceAddresses,
    /// The Gateway's `metadata.generation`, for the condition saying what became of it.
    pub generation: i64,
}

/// One port of a generated Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    /// `tcp-80`, `udp-53`: unique in the Service, as Kubernetes wants when it has several.
    pub name: String,
    pub protocol: crate::streams::StreamProtocol,
    /// The listener's port: the Service's.
    pub port: u16,
    /// Where Sluice serves it on the node (the EndpointSlices' port): `--http-listen`'s port
    /// for a listener on 80, `--https-listen`'s for 443, the listener's own otherwise.
    pub target: u16,
}

/// Where `--http-listen` and `--https-listen` are bound: the ports a generated Service's
/// listeners on 80 and 443 are reached at on the node (the compile's input in Kubernetes mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenPorts {
    pub http: u16,
    pub https: u16,
}

/// The endpoints of a generated Service: the addresses the Gateway's status carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceAddresses {
    /// Its own (`--gateway-address-pool`).
    Own(IpAddr),
    /// The ones Sluice publishes for every Gateway (`--publish-service`,
    /// `--publish-status-address`), which the provider resolves.
    Shared,
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
    /// What `status.addresses` and the `AddressesAssigned` condition will say, planned: the
    /// provider resolves the addresses only it knows (the shared ones, the generated Service's
    /// ClusterIP) and writes both.
    #[serde(skip)]
    pub addresses: AddressPlan,
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

/// A Gateway's addresses as the compile decided them (GEP-5093, address routability): one
/// entry per `spec.addresses` entry it satisfies, or the default selection when it asks for
/// none.
///
/// ```text
///  spec.addresses empty ─▶ default: its own (pool) │ every shared address (the provider's)
///  { value?, routability: "" }      ─▶ Own(ip) with a pool │ Shared(value?) without
///  { routability: testing.x-k8s.io/sentinel } ─▶ as "", reported with the sentinel
///  { value?, routability: Cluster } ─▶ ClusterIp(value?): the generated Service's ClusterIP
///  anything else ─▶ `refused` (the Gateway is served nowhere: Sluice rejects partial
///                   assignment, as GatewayStaticAddresses expects)
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressPlan {
    /// `spec.addresses` asked for some: each entry must find its own address, and nothing but
    /// those may be reported.
    pub requested: bool,
    /// The address of its own it is served on (`--gateway-address-pool`), reported or not (a
    /// Gateway asking only for a ClusterIP is still served on one; its Service leads there).
    pub own: Option<IpAddr>,
    /// The satisfied (or still to be resolved) entries.
    pub entries: Vec<PlannedAddress>,
    /// Why the compile gave the Gateway no address (`AddressesAssigned=False NotAssigned`);
    /// `None` also when the Gateway is refused for another reason than its addresses.
    pub refused: Option<String>,
}

/// One address `status.addresses` will report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedAddress {
    /// The `spec.addresses` index it answers (`None`: the default selection).
    pub entry: Option<usize>,
    pub source: AddressSource,
    /// `routability` as reported: `""`, `Cluster` or `testing.x-k8s.io/sentinel`.
    pub routability: &'static str,
}

/// Where a planned address comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressSource {
    /// The Gateway's own (`--gateway-address-pool`).
    Own(IpAddr),
    /// One of the addresses every Gateway shares (Ingress status's: `--publish-*`); `Some`:
    /// that one, asked for by value. The default selection reports them all.
    Shared(Option<IpAddr>),
    /// The ClusterIP of the Service generated for the Gateway; `Some`: that one, asked for.
    ClusterIp(Option<IpAddr>),
}

/// `routability` meaning no scope (the implementation's default).
pub const ROUTABILITY_DEFAULT: &str = "";
/// `routability: Cluster`: a ClusterIP of the cluster's ServiceCIDR.
pub const ROUTABILITY_CLUSTER: &str = "Cluster";
/// The value GEP-5093 reserves for conformance: supported and reported, no guarantee.
pub const ROUTABILITY_SENTINEL: &str = "testing.x-k8s.io/sentinel";

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
