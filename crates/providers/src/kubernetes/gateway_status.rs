//! Gateway API status writes, the leader's: what the compile decided ([`GatewayStatuses`])
//! merged into each object's current status and patched into its status subresource.
//!
//! ```text
//!  Published.gateway ──▶ desired status (no times) ──changed since last written?──▶ GET object
//!     ──▶ lastTransitionTime kept where a condition's status did not change, other controllers'
//!         route parents kept ──▶ merge patch of status (with resourceVersion) unless equal
//! ```
//! What was last written is remembered per object, so a pass costs nothing for objects whose
//! decisions did not change; a new leader starts with an empty memory and reads every object
//! once. The resourceVersion in the patch makes a concurrent write (another controller's parent
//! entry) a conflict, retried at the next pass, instead of a lost update.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::networking::v1::IngressLoadBalancerIngress;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::{Api, Client};
use model::gateway_status::{AddressPlan, AddressSource, Condition, GatewayStatuses, RouteStatus};
use model::{Kind, NamespacedName};
use serde_json::{json, Value};

use super::gateway::{
    ApiObject, BackendTlsPolicies, GatewayClasses, Gateways, GrpcRoutes, HttpRoutes, ListenerSets,
    TcpRoutes, TlsRoutes, UdpRoutes,
};

/// Objects read and written at once during a pass (as many as Ingress status writes).
const WRITES_IN_FLIGHT: usize = 8;

/// What this replica wrote last, per object, while leading.
#[derive(Debug, Default)]
pub(super) struct GatewayWrites {
    written: BTreeMap<(Kind, NamespacedName), Value>,
    /// The uid of the object each status in `written` went to.
    written_uids: BTreeMap<(Kind, NamespacedName), Arc<str>>,
    /// This term looked for routes whose status still has Sluice's parents from an earlier
    /// term (or replica) although Sluice no longer serves them.
    swept: bool,
    /// GatewayClass' `SupportedVersion`, from the CRDs' bundle-version annotations, and the
    /// Gateway CRD's channel (read once a term, with the sweep).
    versions: Option<CrdVersions>,
    /// The route statuses of the last pass whose decision `written` holds: one the compile
    /// kept (the same `Arc`, as a route unchanged since is) needs no JSON and no comparison, so
    /// a pass after one route changed costs one route, not thousands.
    routes_passed: BTreeMap<(Kind, NamespacedName), Arc<RouteStatus>>,
}

impl GatewayWrites {
    /// A new term as leader: read and compare every object again.
    pub(super) fn forget(&mut self) {
        self.written.clear();
        self.written_uids.clear();
        self.swept = false;
        self.versions = None;
        self.routes_passed.clear();
    }

    /// Writes every status that differs from what was written last. `found`: what the
    /// provider knows of the Gateways' addresses and generated Services. True when everything
    /// was written; `leads` is asked before each write.
    pub(super) async fn reconcile(
        &mut self,
        client: &Client,
        field_manager: &str,
        statuses: &GatewayStatuses,
        found: Found<'_>,
        leads: impl Fn() -> bool,
    ) -> bool {
        let planning = std::time::Instant::now();
        // The route statuses that differ from the last pass's (a compile keeps an unchanged
        // route's `Arc`): a pass after one route changed costs that route, not thousands (it
        // was as long as the compile, on the same thread, with thousands of routes).
        let diff = RouteDiff::of(statuses, &self.routes_passed);
        // Deleted and created again under its name between two passes: another object, which
        // has no status yet even when the decision reads the same. A route created again is a
        // new object to the compile, so its status is a changed one.
        let candidates = (diff.changed.iter().map(|(key, _)| key.clone()))
            .chain(statuses.gateways.keys().map(|k| (Kind::Gateway, k.clone())))
            .chain((statuses.listener_sets.keys()).map(|k| (Kind::ListenerSet, k.clone())));
        let recreated = recreated(&self.written_uids, &statuses.uids, candidates);
        if !self.swept {
            // Before the first `desired` of a term: it needs the CRDs' channel.
            self.versions = Some(crd_versions(client).await);
        }
        let routability = (self.versions.as_ref()).is_some_and(|v| v.experimental_gateways);
        let mut wanted = desired(statuses, &found, routability, &diff.changed);
        if !self.swept {
            // What this term never wrote it cannot remember: once per term, every route
            // whose status names Sluice's controller is read from one list.
            // Tried once a term: a namespace-scoped deployment may not list across namespaces.
            self.swept = true;
            match routes_with_our_parents(client).await {
                Ok(routes) => {
                    for key in routes {
                        let key = (Kind::HTTPRoute, key);
                        // (A term's first pass finds every current route changed, so wanted.)
                        if !wanted.contains_key(&key) && diff.current.binary_search(&key).is_err() {
                            self.written.insert(key, Value::Null);
                        }
                    }
                }
                Err(error) => {
                    tracing::debug!(
                        "listing HTTPRoutes for Sluice's stale parents failed: {error}"
                    );
                }
            }
        }
        // One walk over what was written, beside this compile's routes (both sorted):
        // - a route Sluice wrote parents into and no longer serves (it names another Gateway
        //   now): its entries go, the other controllers' stay; likewise a BackendTLSPolicy no
        //   route of Sluice's Gateways sends through any more;
        // - a Gateway (or ListenerSet) Sluice wrote and no longer serves (its class now another
        //   controller's or gone; the ListenerSet's parent likewise): its status goes back to
        //   the API's "not reconciled yet" (Pending), only while it is still what Sluice wrote
        //   (its new controller may have written its own already); it and any other object
        //   neither wanted nor a current route are forgotten.
        let mut cleared = Vec::new();
        let mut released = Vec::new();
        let mut forgotten = Vec::new();
        let mut routes_now = diff.current.iter().peekable();
        for (key, written) in &self.written {
            while routes_now.next_if(|route| *route < key).is_some() {}
            let a_current_route = routes_now.peek() == Some(&key);
            if a_current_route || wanted.contains_key(key) {
                continue;
            }
            if let Some((field, _)) = entries(key.0) {
                cleared.push((key.clone(), json!({ field: [] })));
            } else {
                if matches!(key.0, Kind::Gateway | Kind::ListenerSet) {
                    released.push((key.clone(), written.clone()));
                }
                forgotten.push(key.clone());
            }
        }
        wanted.extend(cleared);
        if let Some(versions) = &self.versions {
            supported_version(&mut wanted, versions);
        }
        for ((kind, key), written) in released {
            if !leads() {
                break;
            }
            if let Err(error) = release(client, field_manager, (kind, &key), &written).await {
                tracing::warn!(%kind, object = %key, "clearing Gateway API status failed: {error}");
            }
        }
        for key in forgotten.iter().chain(&recreated) {
            self.written.remove(key);
            self.written_uids.remove(key);
        }
        wanted.retain(|key, want| self.written.get(key) != Some(want));
        // On the control plane's thread, between a compile and the next watch event.
        tracing::debug!(
            planned_us = planning.elapsed().as_micros() as u64,
            writes = wanted.len(),
            "Gateway API status pass planned"
        );
        // A few at a time, as Ingress status: a new leader may have thousands to read and write.
        let leads = &leads;
        let mut results = futures_util::stream::iter(wanted)
            .map(|((kind, key), want)| async move {
                if !leads() {
                    // Lost the Lease mid-pass: the new leader takes it from here.
                    return ((kind, key), Outcome::Failed);
                }
                let outcome = match write(client, field_manager, kind, &key, &want).await {
                    Ok(()) => Outcome::Written(want),
                    // Deleted meanwhile: nothing to write, nothing to remember.
                    Err(kube::Error::Api(status)) if status.code == 404 => Outcome::Gone,
                    Err(error) => {
                        tracing::warn!(%kind, object = %key, "writing Gateway API status failed: {error}");
                        Outcome::Failed
                    }
                };
                ((kind, key), outcome)
            })
            .buffer_unordered(WRITES_IN_FLIGHT);
        // The routes this pass decided, for the next: a route kept there is one whose status
        // `written` holds (so one written and then found gone, or not written, is left out).
        for key in &diff.dropped {
            self.routes_passed.remove(key);
        }
        for (key, status) in &diff.changed {
            self.routes_passed.insert(key.clone(), (*status).clone());
        }
        let mut complete = true;
        while let Some((key, outcome)) = results.next().await {
            match outcome {
                Outcome::Written(want) => {
                    match statuses.uids.get(&key) {
                        Some(uid) => self.written_uids.insert(key.clone(), uid.clone()),
                        None => self.written_uids.remove(&key),
                    };
                    self.written.insert(key, want);
                }
                Outcome::Gone => {
                    self.written.remove(&key);
                    self.written_uids.remove(&key);
                    self.routes_passed.remove(&key);
                }
                Outcome::Failed => {
                    complete = false;
                    self.routes_passed.remove(&key);
                }
            }
        }
        complete
    }
}

/// Of `candidates`, the objects whose uid differs from the one their status was written to.
fn recreated(
    written: &BTreeMap<(Kind, NamespacedName), Arc<str>>,
    now: &BTreeMap<(Kind, NamespacedName), Arc<str>>,
    candidates: impl Iterator<Item = (Kind, NamespacedName)>,
) -> BTreeSet<(Kind, NamespacedName)> {
    candidates
        .filter(|key| {
            let now = now.get(key);
            (written.get(key)).is_some_and(|was| now.is_some_and(|now| now != was))
        })
        .collect()
}

/// This compile's route statuses against the last pass's, by one walk over both (sorted the
/// same way: by kind, then name).
struct RouteDiff<'a> {
    /// Every route with a status now.
    current: Vec<(Kind, NamespacedName)>,
    /// Those whose status is not the last pass's (new, or decided again).
    changed: Vec<((Kind, NamespacedName), &'a Arc<RouteStatus>)>,
    /// The last pass's routes that have no status now.
    dropped: Vec<(Kind, NamespacedName)>,
}

impl<'a> RouteDiff<'a> {
    fn of(
        statuses: &'a GatewayStatuses,
        passed: &BTreeMap<(Kind, NamespacedName), Arc<RouteStatus>>,
    ) -> RouteDiff<'a> {
        let mut diff = RouteDiff {
            current: Vec::new(),
            changed: Vec::new(),
            dropped: Vec::new(),
        };
        let mut last = passed.iter().peekable();
        for ((kind, name), status) in route_statuses(statuses) {
            let key = (kind, name.clone());
            while let Some((gone, _)) = last.next_if(|(was, _)| **was < key) {
                diff.dropped.push(gone.clone());
            }
            let kept = last.next_if(|(was, _)| **was == key);
            if !kept.is_some_and(|(_, was)| Arc::ptr_eq(was, status)) {
                diff.changed.push((key.clone(), status));
            }
            diff.current.push(key);
        }
        diff.dropped.extend(last.map(|(gone, _)| gone.clone()));
        diff
    }
}

/// The Gateway API releases whose CRDs Sluice reads (its types follow v1.6; v1.7 adds fields
/// only, which are diagnostics until read).
const SUPPORTED_BUNDLES: [&str; 2] = ["v1.6.", "v1.7."];

/// The kinds Sluice reads, by CRD name (one not installed is passed over).
const CRDS: [&str; 9] = [
    "gatewayclasses.gateway.networking.k8s.io",
    "gateways.gateway.networking.k8s.io",
    "httproutes.gateway.networking.k8s.io",
    "grpcroutes.gateway.networking.k8s.io",
    "tlsroutes.gateway.networking.k8s.io",
    "tcproutes.gateway.networking.k8s.io",
    "udproutes.gateway.networking.k8s.io",
    "referencegrants.gateway.networking.k8s.io",
    "backendtlspolicies.gateway.networking.k8s.io",
];

/// What the Gateway API CRDs of the cluster are.
#[derive(Debug)]
struct CrdVersions {
    /// Every CRD Sluice reads has a bundle version Sluice supports.
    supported: bool,
    /// What was found, for the message.
    found: String,
    /// The Gateway CRD is the experimental channel's: `status.addresses[].routability` is a
    /// field of it (the standard channel's would drop it, and every pass would find the
    /// status changed).
    experimental_gateways: bool,
}

/// Whether every CRD Sluice reads has a bundle version Sluice supports, and what was found.
async fn crd_versions(client: &Client) -> CrdVersions {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut found = Vec::new();
    let mut supported = true;
    let mut experimental_gateways = false;
    for crd in CRDS {
        let version = match api.get_metadata_opt(crd).await {
            Ok(Some(meta)) => {
                let annotations = meta.metadata.annotations.unwrap_or_default();
                if crd == "gateways.gateway.networking.k8s.io" {
                    experimental_gateways = annotations
                        .get("gateway.networking.k8s.io/channel")
                        .is_some_and(|c| c == "experimental");
                }
                annotations
                    .get("gateway.networking.k8s.io/bundle-version")
                    .cloned()
            }
            Ok(None) => continue,
            Err(error) => {
                supported = false;
                found.push(format!("{crd}: not readable ({error})"));
                continue;
            }
        };
        let ok = version
            .as_deref()
            .is_some_and(|v| SUPPORTED_BUNDLES.iter().any(|s| v.starts_with(s)));
        supported &= ok;
        found.push(format!(
            "{crd} {}",
            version.as_deref().unwrap_or("without bundle-version")
        ));
    }
    CrdVersions {
        supported,
        found: found.join(", "),
        experimental_gateways,
    }
}

/// Adds `SupportedVersion` to each GatewayClass' conditions (the spec asks for it wherever a
/// class is Accepted), with the class' observedGeneration.
fn supported_version(wanted: &mut BTreeMap<(Kind, NamespacedName), Value>, versions: &CrdVersions) {
    for ((kind, _), status) in wanted.iter_mut() {
        let Some(conditions) = status["conditions"]
            .as_array_mut()
            .filter(|_| *kind == Kind::GatewayClass)
        else {
            continue;
        };
        let generation = conditions
            .first()
            .map_or(Value::Null, |c| c["observedGeneration"].clone());
        let CrdVersions {
            supported: ok,
            found,
            ..
        } = versions;
        let (reason, message) = if *ok {
            ("SupportedVersion", format!("Gateway API CRDs: {found}"))
        } else {
            ("UnsupportedVersion", format!("Gateway API CRDs: {found}; Sluice supports bundle versions {} (best effort otherwise)", SUPPORTED_BUNDLES.map(|v| format!("{v}x")).join(", ")))
        };
        conditions.push(json!({
            "type": "SupportedVersion",
            "status": if *ok { "True" } else { "False" },
            "reason": reason,
            "message": message,
            "observedGeneration": generation,
        }));
    }
}

/// Puts a Gateway Sluice stopped serving back to the API's initial status (Accepted and
/// Programmed Unknown, Pending; no listeners, no addresses), if its conditions are still the
/// ones Sluice wrote.
async fn release(
    client: &Client,
    field_manager: &str,
    (kind, key): (Kind, &NamespacedName),
    written: &Value,
) -> Result<(), kube::Error> {
    let api = api_for(client, kind, key);
    let Some(current) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    let status = current.data.get("status").cloned().unwrap_or(Value::Null);
    if !still_ours(&status["conditions"], &written["conditions"]) {
        return Ok(());
    }
    let now = Timestamp::now().to_string();
    let pending = |type_: &str| {
        json!({"type": type_, "status": "Unknown", "reason": "Pending",
               "message": "Waiting for controller", "lastTransitionTime": now})
    };
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "status": {"conditions": [pending("Accepted"), pending("Programmed")],
                   "listeners": null, "addresses": null, "attachedListenerSets": null},
    });
    patch_status(&api, field_manager, &key.name, &patch).await?;
    tracing::debug!(%kind, object = %key, "no longer Sluice's: status cleared");
    Ok(())
}

/// Whether `current` conditions are `written` ones with their transition times.
fn still_ours(current: &Value, written: &Value) -> bool {
    let without_times = |conditions: &Value| -> Vec<Value> {
        let mut conditions = conditions.as_array().cloned().unwrap_or_default();
        for condition in &mut conditions {
            if let Some(fields) = condition.as_object_mut() {
                fields.remove("lastTransitionTime");
            }
        }
        conditions
    };
    !without_times(written).is_empty() && without_times(current) == without_times(written)
}

/// Routes whose `status.parents` has an entry of Sluice's controller.
async fn routes_with_our_parents(client: &Client) -> Result<Vec<NamespacedName>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<ApiObject<HttpRoutes>>(&()),
    );
    let controller = translate::gateway::GATEWAY_CONTROLLER;
    let list = api.list(&kube::api::ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|route| {
            route.data["status"]["parents"]
                .as_array()
                .is_some_and(|parents| parents.iter().any(|p| p["controllerName"] == controller))
        })
        .map(|route| {
            let namespace = route.metadata.namespace.as_deref().unwrap_or_default();
            NamespacedName::new(
                namespace,
                route.metadata.name.as_deref().unwrap_or_default(),
            )
        })
        .collect())
}

enum Outcome {
    Written(Value),
    Gone,
    Failed,
}

/// Each object's status as the compile decided it, without transition times.
/// Every route status the compile decided, in the order `written` keeps them (by kind in
/// `Kind`'s order, then name).
fn route_statuses(
    statuses: &GatewayStatuses,
) -> impl Iterator<Item = ((Kind, &NamespacedName), &Arc<RouteStatus>)> {
    [
        (Kind::HTTPRoute, &statuses.http_routes),
        (Kind::GRPCRoute, &statuses.grpc_routes),
        (Kind::TLSRoute, &statuses.tls_routes),
        (Kind::TCPRoute, &statuses.tcp_routes),
        (Kind::UDPRoute, &statuses.udp_routes),
    ]
    .into_iter()
    .flat_map(|(kind, map)| (map.iter()).map(move |(key, status)| ((kind, key), status)))
}

/// What the provider knows that the compile does not, for the Gateways' status.
pub(super) struct Found<'a> {
    /// The addresses every Gateway without one of its own shares (Ingress status's; `None`
    /// when neither publish flag is given).
    pub(super) shared: Option<&'a [IngressLoadBalancerIngress]>,
    /// A condition more per Gateway (what became of its generated Service).
    pub(super) conditions: &'a BTreeMap<NamespacedName, Condition>,
    /// The ClusterIPs of each Gateway's generated Service, once it is there.
    pub(super) cluster_ips: &'a BTreeMap<NamespacedName, Vec<IpAddr>>,
}

/// The status each object should have, of the routes only the `changed` ones (see
/// `routes_passed`). `routability`: the Gateway CRD has `status.addresses[].routability`.
fn desired(
    statuses: &GatewayStatuses,
    found: &Found<'_>,
    routability: bool,
    changed: &[((Kind, NamespacedName), &Arc<RouteStatus>)],
) -> BTreeMap<(Kind, NamespacedName), Value> {
    let mut wanted = BTreeMap::new();
    for (name, status) in &statuses.classes {
        let key = NamespacedName::new("", name.as_str());
        wanted.insert((Kind::GatewayClass, key), to_json(status));
    }
    for (key, status) in &statuses.gateways {
        let generation = status
            .conditions
            .first()
            .map_or(0, |c| c.observed_generation);
        let cluster_ips = found.cluster_ips.get(key).map(Vec::as_slice);
        let assigned = assigned(&status.addresses, found.shared, cluster_ips);
        let mut status = to_json(status);
        status["addresses"] = (assigned.addresses.iter())
            .map(|(address, scope)| {
                let mut address = address.clone();
                if routability {
                    address["routability"] = json!(scope);
                }
                address
            })
            .collect();
        if let Some(conditions) = status["conditions"].as_array_mut() {
            if let Some(why) = &assigned.none {
                // GEP-5093: a Gateway none of whose addresses can be had is not programmed.
                let programmed = conditions.iter_mut().find(|c| c["type"] == "Programmed");
                if let Some(programmed) = programmed.filter(|c| c["status"] == "True") {
                    let reason = "AddressNotAssigned";
                    *programmed = to_json(&Condition::new(
                        "Programmed",
                        false,
                        reason,
                        why.clone(),
                        generation,
                    ));
                }
            }
            if let Some((ok, reason, message)) = assigned.condition {
                let condition =
                    Condition::new("AddressesAssigned", ok, reason, message, generation);
                conditions.push(to_json(&condition));
            }
            if let Some(condition) = found.conditions.get(key) {
                conditions.push(to_json(condition));
            }
        }
        wanted.insert((Kind::Gateway, key.clone()), status);
    }
    for (key, status) in changed {
        wanted.insert(key.clone(), to_json(&***status));
    }
    for (key, status) in &statuses.backend_tls_policies {
        wanted.insert((Kind::BackendTLSPolicy, key.clone()), to_json(status));
    }
    for (key, status) in &statuses.listener_sets {
        wanted.insert((Kind::ListenerSet, key.clone()), to_json(status));
    }
    wanted
}

/// A kind whose status is a list of entries per controller (routes' `parents`, a policy's
/// `ancestors`): the list's field and the field naming each entry's object.
fn entries(kind: Kind) -> Option<(&'static str, &'static str)> {
    match kind {
        Kind::HTTPRoute | Kind::GRPCRoute | Kind::TLSRoute | Kind::TCPRoute | Kind::UDPRoute => {
            Some(("parents", "parentRef"))
        }
        Kind::BackendTLSPolicy => Some(("ancestors", "ancestorRef")),
        _ => None,
    }
}

fn to_json(status: &impl serde::Serialize) -> Value {
    serde_json::to_value(status).unwrap_or_default()
}

/// The most `status.addresses` the API accepts.
const MAX_STATUS_ADDRESSES: usize = 16;

/// A Gateway's addresses as they can be had now (GEP-5093).
#[derive(Debug, Default, PartialEq)]
struct Assigned {
    /// `status.addresses` entries (type and value), each with its routability.
    addresses: Vec<(Value, &'static str)>,
    /// `AddressesAssigned`: (status, reason, message); `None` until there is something to
    /// say (no address known yet for a Gateway that asked for none).
    condition: Option<(bool, &'static str, String)>,
    /// It asked for addresses and none can be had: why (it is not programmed).
    none: Option<String>,
}

/// Resolves `plan` against what the provider knows: `shared` (Ingress status's addresses,
/// `None` when not published) and `cluster_ips` (its generated Service's, `None` while there
/// is none). Each spec entry takes an address of its own (no two entries one address).
fn assigned(
    plan: &AddressPlan,
    shared: Option<&[IngressLoadBalancerIngress]>,
    cluster_ips: Option<&[IpAddr]>,
) -> Assigned {
    if let Some(why) = &plan.refused {
        return Assigned {
            condition: Some((false, "NotAssigned", why.clone())),
            ..Assigned::default()
        };
    }
    let shared_ips: Vec<IpAddr> = (shared.into_iter().flatten())
        .filter_map(|a| a.ip.as_deref().or(a.hostname.as_deref()))
        .filter_map(|text| text.parse().ok())
        .collect();
    let ip = |ip: IpAddr| json!({"type": "IPAddress", "value": ip.to_string()});
    let mut out = Assigned::default();
    if !plan.requested {
        for entry in &plan.entries {
            match entry.source {
                AddressSource::Own(own) => out.addresses.push((ip(own), entry.routability)),
                // Every shared address, hostnames too, as Ingress status has them.
                _ => out.addresses.extend(
                    (shared.into_iter().flatten())
                        .filter_map(gateway_address)
                        .map(|address| (address, entry.routability))
                        .take(MAX_STATUS_ADDRESSES),
                ),
            }
        }
        if !out.addresses.is_empty() {
            let message = "the Gateway's addresses are assigned (none was asked for)";
            out.condition = Some((true, "Assigned", message.to_owned()));
        }
        return out;
    }
    let published = || match shared_ips.is_empty() {
        true => "none is published (--publish-service, --publish-status-address)".to_owned(),
        false => format!("published: {}", list(&shared_ips)),
    };
    let cluster = || {
        match cluster_ips {
        Some([]) => "the generated Service has no ClusterIP".to_owned(),
        Some(ips) => format!("the generated Service's ClusterIPs are {}, allocated by the API server", list(ips)),
        None => "the Gateway has no generated Service yet (see its sluice.dev/GeneratedService condition)".to_owned(),
    }
    };
    let mut used = BTreeSet::new();
    let mut unsatisfied = Vec::new();
    for entry in &plan.entries {
        let at = entry
            .entry
            .map_or(String::new(), |i| format!("spec.addresses[{i}]"));
        let had = match entry.source {
            AddressSource::Own(own) => Ok(own),
            AddressSource::Shared(Some(want)) => {
                (shared_ips.contains(&want)).then_some(want).ok_or_else(|| {
                    format!(
                        "{at} {want}: not an address Sluice publishes; {}",
                        published()
                    )
                })
            }
            AddressSource::Shared(None) => (shared_ips.iter())
                .find(|a| !used.contains(*a))
                .copied()
                .ok_or_else(|| format!("{at}: no published address left for it; {}", published())),
            AddressSource::ClusterIp(Some(want)) => {
                (cluster_ips.unwrap_or_default().contains(&want))
                    .then_some(want)
                    .ok_or_else(|| format!("{at} {want}: {}", cluster()))
            }
            AddressSource::ClusterIp(None) => (cluster_ips.unwrap_or_default().iter())
                .find(|a| !used.contains(*a))
                .copied()
                .ok_or_else(|| format!("{at}: {}", cluster())),
        };
        match had {
            Ok(address) if used.insert(address) => {
                out.addresses.push((ip(address), entry.routability));
            }
            Ok(address) => unsatisfied.push(format!("{at} {address}: another entry has it")),
            Err(why) => unsatisfied.push(why),
        }
    }
    let why = unsatisfied.join("; ");
    out.condition = Some(match (unsatisfied.is_empty(), out.addresses.is_empty()) {
        (true, _) => (
            true,
            "Assigned",
            "every address asked for is assigned".to_owned(),
        ),
        (false, false) => (false, "PartiallyAssigned", format!("not assigned: {why}")),
        (false, true) => {
            out.none = Some(format!("no address asked for can be had: {why}"));
            (false, "NotAssigned", format!("not assigned: {why}"))
        }
    });
    out
}

fn list(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A Gateway's `status.addresses` entry for one of the addresses Ingress status gets.
fn gateway_address(address: &IngressLoadBalancerIngress) -> Option<Value> {
    if let Some(ip) = address.ip.as_deref() {
        return Some(json!({"type": "IPAddress", "value": ip}));
    }
    let name = address.hostname.as_deref()?;
    Some(match name.parse::<IpAddr>() {
        Ok(_) => json!({"type": "IPAddress", "value": name}),
        Err(_) => json!({"type": "Hostname", "value": name}),
    })
}

/// Reads the object, merges `want` into its status and patches it when that differs.
async fn write(
    client: &Client,
    field_manager: &str,
    kind: Kind,
    key: &NamespacedName,
    want: &Value,
) -> Result<(), kube::Error> {
    let api = api_for(client, kind, key);
    let current = api.get(&key.name).await?;
    let now = Timestamp::now().to_string();
    let current_status = current.data.get("status").cloned().unwrap_or(Value::Null);
    let status = merged(kind, want, &current_status, &now);
    if status == current_status {
        return Ok(());
    }
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "status": status,
    });
    patch_status(&api, field_manager, &key.name, &patch).await?;
    tracing::debug!(%kind, object = %key, "Gateway API status written");
    Ok(())
}

/// A merge patch of an object's status subresource, as `field_manager`.
async fn patch_status(
    api: &Api<DynamicObject>,
    field_manager: &str,
    name: &str,
    patch: &Value,
) -> Result<(), kube::Error> {
    let params = PatchParams {
        field_manager: Some(field_manager.to_owned()),
        ..PatchParams::default()
    };
    api.patch_status(name, &params, &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// The API of `kind`'s objects (in `key`'s namespace for a namespaced kind).
fn api_for(client: &Client, kind: Kind, key: &NamespacedName) -> Api<DynamicObject> {
    match kind {
        Kind::GatewayClass => Api::all_with(
            client.clone(),
            &ApiResource::erase::<ApiObject<GatewayClasses>>(&()),
        ),
        Kind::Gateway => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<Gateways>>(&()),
        ),
        Kind::GRPCRoute => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<GrpcRoutes>>(&()),
        ),
        Kind::BackendTLSPolicy => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<BackendTlsPolicies>>(&()),
        ),
        Kind::TLSRoute => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<TlsRoutes>>(&()),
        ),
        Kind::TCPRoute => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<TcpRoutes>>(&()),
        ),
        Kind::UDPRoute => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<UdpRoutes>>(&()),
        ),
        Kind::ListenerSet => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<ListenerSets>>(&()),
        ),
        _ => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<HttpRoutes>>(&()),
        ),
    }
}

/// The condition types Gateway API defines for GatewayClasses, Gateways and their listeners,
/// and Sluice's own: Sluice's to write (and to drop when it no longer says them). Any other
/// type on those objects is another controller's (a policy controller, an operator's tooling)
/// and is kept as it is.
const SPEC_CONDITIONS: &[&str] = &[
    super::infrastructure::CONDITION,
    "Accepted",
    "Programmed",
    "Ready",
    "ResolvedRefs",
    "Conflicted",
    "SupportedVersion",
    "AttachedListenerSets",
    "OverlappingTLSConfig",
    "InsecureFrontendValidationMode",
    "AddressesAssigned",
];

/// `want` with transition times (kept from `current` where a condition's status is the same),
/// the conditions of types Gateway API does not define kept from `current` (a class, a
/// Gateway and each listener), and, for a route, the other controllers' parent entries from
/// `current` in front of ours.
fn merged(kind: Kind, want: &Value, current: &Value, now: &str) -> Value {
    let mut status = want.clone();
    stamp(&mut status["conditions"], &current["conditions"], now);
    if entries(kind).is_none() {
        keep_foreign(&mut status["conditions"], &current["conditions"]);
    }
    if let Some(listeners) = status.get_mut("listeners").and_then(Value::as_array_mut) {
        for listener in listeners {
            let before = same_named(&current["listeners"], &listener["name"]);
            stamp(&mut listener["conditions"], &before["conditions"], now);
            keep_foreign(&mut listener["conditions"], &before["conditions"]);
        }
    }
    if let Some((field, names)) = entries(kind) {
        let ours = status[field].as_array().cloned().unwrap_or_default();
        let controller = translate::gateway::GATEWAY_CONTROLLER;
        let mut parents: Vec<Value> = current[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["controllerName"] != controller)
            .cloned()
            .collect();
        for mut parent in ours {
            let before = current[field]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["controllerName"] == controller && p[names] == parent[names])
                .cloned()
                .unwrap_or(Value::Null);
            stamp(&mut parent["conditions"], &before["conditions"], now);
            parents.push(parent);
        }
        status[field] = Value::Array(parents);
    }
    status
}

/// Sets each condition's `lastTransitionTime`: the current one's when the status is the same.
fn stamp(conditions: &mut Value, current: &Value, now: &str) {
    let Some(conditions) = conditions.as_array_mut() else {
        return;
    };
    for condition in conditions {
        let before = current
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == condition["type"]);
        let time = match before {
            Some(before) if before["status"] == condition["status"] => {
                before["lastTransitionTime"].clone()
            }
            _ => Value::String(now.to_owned()),
        };
        condition["lastTransitionTime"] = time;
    }
}

/// Appends the conditions of `current` whose type is not one Gateway API defines, as they are.
/// (Never one of a type `conditions` has: the API refuses two of a type.)
fn keep_foreign(conditions: &mut Value, current: &Value) {
    let ours: Vec<Value> = (conditions.as_array().into_iter().flatten())
        .map(|c| c["type"].clone())
        .collect();
    let foreign: Vec<Value> = current
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| !SPEC_CONDITIONS.contains(&t))
                && !ours.contains(&c["type"])
        })
        .cloned()
        .collect();
    if foreign.is_empty() {
        return;
    }
    match conditions.as_array_mut() {
        Some(ours) => ours.extend(foreign),
        None => *conditions = Value::Array(foreign),
    }
}

fn same_named<'a>(list: &'a Value, name: &Value) -> &'a Value {
    static NULL: Value = Value::Null;
    list.as_array()
        .into_iter()
        .flatten()
        .find(|item| item["name"] == *name)
        .unwrap_or(&NULL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::gateway_status::{PlannedAddress, ROUTABILITY_CLUSTER, ROUTABILITY_SENTINEL};

    fn plan(requested: bool, entries: &[(AddressSource, &'static str)]) -> AddressPlan {
        AddressPlan {
            requested,
            own: None,
            entries: (entries.iter().enumerate())
                .map(|(i, (source, routability))| PlannedAddress {
                    entry: requested.then_some(i),
                    source: *source,
                    routability,
                })
                .collect(),
            refused: None,
        }
    }

    fn published(addresses: &[&str]) -> Vec<IngressLoadBalancerIngress> {
        (addresses.iter())
            .map(|a| match a.parse::<IpAddr>() {
                Ok(_) => IngressLoadBalancerIngress {
                    ip: Some(a.to_string()),
                    ..Default::default()
                },
                Err(_) => IngressLoadBalancerIngress {
                    hostname: Some(a.to_string()),
                    ..Default::default()
                },
            })
            .collect()
    }

    fn values(assigned: &Assigned) -> Vec<String> {
        (assigned.addresses.iter())
            .map(|(a, r)| {
                format!(
                    "{} {}{r}",
                    a["type"].as_str().unwrap(),
                    a["value"].as_str().unwrap()
                )
            })
            .collect()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn addresses_asked_for_none_are_every_published_one_or_its_own() {
        let shared = published(&["198.18.0.200", "lb.example.com"]);
        let default = plan(false, &[(AddressSource::Shared(None), "")]);
        let found = assigned(&default, Some(&shared), None);
        assert_eq!(
            values(&found),
            ["IPAddress 198.18.0.200", "Hostname lb.example.com"]
        );
        assert_eq!(
            found.condition.as_ref().map(|c| (c.0, c.1)),
            Some((true, "Assigned"))
        );
        // Nothing published yet: nothing to say.
        assert_eq!(assigned(&default, None, None), Assigned::default());
        let own = plan(false, &[(AddressSource::Own(ip("192.0.2.10")), "")]);
        assert_eq!(
            values(&assigned(&own, Some(&shared), None)),
            ["IPAddress 192.0.2.10"]
        );
        let many: Vec<String> = (0..20).map(|i| format!("198.18.1.{i}")).collect();
        let many = published(&many.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(assigned(&default, Some(&many), None).addresses.len(), 16);
    }

    #[test]
    fn each_address_asked_for_is_had_once_or_said_unassigned() {
        let shared = published(&["198.18.0.200"]);
        let cluster = [ip("10.96.0.20")];
        // The sentinel, a ClusterIP: every entry its own address.
        let both = plan(
            true,
            &[
                (AddressSource::Shared(None), ROUTABILITY_SENTINEL),
                (AddressSource::ClusterIp(None), ROUTABILITY_CLUSTER),
            ],
        );
        let found = assigned(&both, Some(&shared), Some(&cluster));
        assert_eq!(
            values(&found),
            [
                "IPAddress 198.18.0.200testing.x-k8s.io/sentinel",
                "IPAddress 10.96.0.20Cluster"
            ]
        );
        assert_eq!(
            found.condition.as_ref().map(|c| (c.0, c.1)),
            Some((true, "Assigned"))
        );
        assert_eq!(found.none, None);
        // The Service not there yet: partly assigned, and says where to look.
        let found = assigned(&both, Some(&shared), None);
        assert_eq!(
            values(&found),
            ["IPAddress 198.18.0.200testing.x-k8s.io/sentinel"]
        );
        let (ok, reason, message) = found.condition.unwrap();
        assert_eq!((ok, reason), (false, "PartiallyAssigned"));
        assert!(
            message.contains("spec.addresses[1]: the Gateway has no generated Service yet"),
            "{message}"
        );
        // Two entries, one published address: the second is not had.
        let two = plan(
            true,
            &[
                (AddressSource::Shared(None), ""),
                (AddressSource::Shared(None), ""),
            ],
        );
        let found = assigned(&two, Some(&shared), None);
        assert_eq!(values(&found), ["IPAddress 198.18.0.200"]);
        assert!(found
            .condition
            .unwrap()
            .2
            .contains("spec.addresses[1]: no published address left"));
        // Asked by value: had when published (or the Service's), else nothing: not programmed.
        let valued = plan(
            true,
            &[
                (AddressSource::Shared(Some(ip("203.0.113.9"))), ""),
                (
                    AddressSource::ClusterIp(Some(ip("10.96.0.99"))),
                    ROUTABILITY_CLUSTER,
                ),
            ],
        );
        let found = assigned(&valued, Some(&shared), Some(&cluster));
        assert!(found.addresses.is_empty());
        let (ok, reason, message) = found.condition.unwrap();
        assert_eq!((ok, reason), (false, "NotAssigned"));
        assert!(message.contains("spec.addresses[0] 203.0.113.9: not an address Sluice publishes; published: 198.18.0.200"), "{message}");
        assert!(
            message.contains(
                "spec.addresses[1] 10.96.0.99: the generated Service's ClusterIPs are 10.96.0.20"
            ),
            "{message}"
        );
        assert!(found.none.is_some());
        // Refused by the compile: said, nothing reported.
        let refused = AddressPlan {
            refused: Some("every address of the pool is taken".into()),
            ..AddressPlan::default()
        };
        let found = assigned(&refused, Some(&shared), None);
        assert!(found.addresses.is_empty());
        assert_eq!(
            found.condition,
            Some((
                false,
                "NotAssigned",
                "every address of the pool is taken".into()
            ))
        );
    }

    #[test]
    fn a_route_created_again_under_its_name_is_written_again() {
        let key = |name: &str| (Kind::HTTPRoute, NamespacedName::new("app", name));
        let uids = |pairs: &[(&str, &str)]| -> BTreeMap<_, Arc<str>> {
            pairs.iter().map(|(n, u)| (key(n), Arc::from(*u))).collect()
        };
        let written = uids(&[("same", "u-1"), ("again", "u-2")]);
        let now = uids(&[("same", "u-1"), ("again", "u-3"), ("new", "u-4")]);
        let all = || ["same", "again", "new"].map(key).into_iter();
        // Only the one whose uid changed: a route never written is written anyway.
        assert_eq!(
            recreated(&written, &now, all()),
            BTreeSet::from([key("again")])
        );
        assert!(recreated(&written, &written, all()).is_empty());
        // Only candidates are looked at (a route whose status the compile kept is none).
        assert!(recreated(&written, &now, [key("same")].into_iter()).is_empty());
    }

    #[test]
    fn a_pass_plans_the_routes_whose_status_the_compile_decided_again_and_those_gone() {
        let key = |kind: Kind, name: &str| (kind, NamespacedName::new("app", name));
        let status = |_: &str| {
            Arc::new(RouteStatus {
                parents: Vec::new(),
            })
        };
        let (kept, again) = (status("kept"), status("again"));
        let mut statuses = GatewayStatuses::default();
        let name = |n: &str| NamespacedName::new("app", n);
        statuses.http_routes.insert(name("kept"), kept.clone());
        statuses.http_routes.insert(name("again"), again.clone());
        statuses.http_routes.insert(name("new"), status("new"));
        statuses.grpc_routes.insert(name("kept"), status("grpc"));
        statuses.tcp_routes.insert(name("tcp"), status("tcp"));
        let passed = BTreeMap::from([
            (key(Kind::HTTPRoute, "again"), status("before")),
            (key(Kind::HTTPRoute, "gone"), status("gone")),
            (key(Kind::HTTPRoute, "kept"), kept),
            (key(Kind::GRPCRoute, "kept"), status("grpc before")),
            (key(Kind::UDPRoute, "gone"), status("udp")),
        ]);
        let diff = RouteDiff::of(&statuses, &passed);
        let changed: Vec<_> = diff.changed.iter().map(|(key, _)| key.clone()).collect();
        assert_eq!(
            changed,
            [
                key(Kind::HTTPRoute, "again"),
                key(Kind::HTTPRoute, "new"),
                key(Kind::GRPCRoute, "kept"),
                key(Kind::TCPRoute, "tcp"),
            ],
            "the same Arc is the same decision; another Arc, even of equal content, is decided again"
        );
        assert!(Arc::ptr_eq(diff.changed[0].1, &again));
        assert_eq!(
            diff.dropped,
            [key(Kind::HTTPRoute, "gone"), key(Kind::UDPRoute, "gone")]
        );
        let mut sorted = diff.current.clone();
        sorted.sort();
        assert_eq!(diff.current, sorted, "in the order `written` keeps");
        assert_eq!(diff.current.len(), 5);
    }

    #[test]
    fn transition_times_stay_while_a_status_holds_and_other_controllers_parents_stay() {
        let want = json!({"parents": [{
            "parentRef": {"name": "edge"},
            "controllerName": "sluice.dev/gateway-controller",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "observedGeneration": 2},
                {"type": "ResolvedRefs", "status": "False", "reason": "BackendNotFound",
                 "message": "gone", "observedGeneration": 2},
            ],
        }]});
        let theirs = json!({"parentRef": {"name": "other"}, "controllerName": "example.com/x",
                            "conditions": []});
        let current = json!({"parents": [theirs.clone(), {
            "parentRef": {"name": "edge"},
            "controllerName": "sluice.dev/gateway-controller",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs",
                 "message": "", "observedGeneration": 1,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ],
        }]});
        let now = "2026-11-27T16:00:00Z";
        let status = merged(Kind::HTTPRoute, &want, &current, now);
        assert_eq!(status["parents"][0], theirs);
        let ours = &status["parents"][1]["conditions"];
        assert_eq!(ours[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(ours[0]["observedGeneration"], 2);
        assert_eq!(ours[1]["lastTransitionTime"], now);
        // Written again unchanged: the same status, so no write.
        let again = merged(Kind::HTTPRoute, &want, &status, "2026-11-27T17:00:00Z");
        assert_eq!(again, status);
    }

    #[test]
    fn conditions_of_types_gateway_api_does_not_define_are_kept_as_they_are() {
        let want = json!({
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "message": "", "observedGeneration": 3}],
            "listeners": [{"name": "http", "conditions": [
                {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "",
                 "observedGeneration": 3}]}],
        });
        let foreign = json!({"type": "example.com/Audited", "status": "True", "reason": "Seeded",
                             "message": "", "observedGeneration": 2,
                             "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let current = json!({
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "observedGeneration": 2, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                // Sluice's own types, no longer said: dropped (the spec removes
                // InsecureFrontendValidationMode when the mode is AllowValidOnly again).
                {"type": "ResolvedRefs", "status": "False", "reason": "InvalidCertificateRef",
                 "message": "", "observedGeneration": 2,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "InsecureFrontendValidationMode", "status": "True",
                 "reason": "ConfigurationChanged", "message": "", "observedGeneration": 2,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
                foreign.clone(),
            ],
            "listeners": [{"name": "http", "conditions": [foreign.clone()]}],
        });
        let status = merged(Kind::Gateway, &want, &current, "2026-11-27T16:00:00Z");
        let types: Vec<&str> = (status["conditions"].as_array().unwrap().iter())
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Accepted", "example.com/Audited"]);
        assert_eq!(status["conditions"][1], foreign);
        assert_eq!(status["listeners"][0]["conditions"][1], foreign);
        // Nothing changes on the next pass: no write.
        assert_eq!(
            merged(Kind::Gateway, &want, &status, "2026-11-27T17:00:00Z"),
            status
        );
    }

    #[test]
    fn a_policy_s_ancestors_of_other_controllers_stay_as_they_are() {
        let edge = json!({"group": "gateway.networking.k8s.io", "kind": "Gateway",
                          "namespace": "app", "name": "edge"});
        let want = json!({"ancestors": [{
            "ancestorRef": edge, "controllerName": "sluice.dev/gateway-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "message": "", "observedGeneration": 2}],
        }]});
        let theirs = json!({
            "ancestorRef": {"name": "unmanaged"}, "controllerName": "example.com/other",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        });
        let current = json!({"ancestors": [theirs.clone(), {
            "ancestorRef": edge, "controllerName": "sluice.dev/gateway-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                            "observedGeneration": 1,
                            "lastTransitionTime": "2026-11-27T15:00:00Z"}],
        }]});
        let status = merged(
            Kind::BackendTLSPolicy,
            &want,
            &current,
            "2026-11-27T16:00:00Z",
        );
        assert_eq!(status["ancestors"][0], theirs);
        let ours = &status["ancestors"][1]["conditions"][0];
        assert_eq!(ours["observedGeneration"], 2);
        assert_eq!(ours["lastTransitionTime"], "2026-11-27T15:00:00Z");
    }

    #[test]
    fn a_gateway_status_is_cleared_only_while_it_is_what_sluice_wrote() {
        let written = json!({"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "served by Sluice",
             "observedGeneration": 3},
        ]});
        let mut current = written["conditions"].clone();
        current[0]["lastTransitionTime"] = json!("2026-11-27T16:00:00Z");
        assert!(still_ours(&current, &written["conditions"]));
        // Another controller wrote its own conditions since.
        current[0]["message"] = json!("accepted by example.com/other");
        assert!(!still_ours(&current, &written["conditions"]));
        assert!(!still_ours(&Value::Null, &Value::Null));
    }

    #[test]
    fn supported_version_follows_the_classes_accepted_generation() {
        let mut wanted = BTreeMap::from([
            (
                (Kind::GatewayClass, NamespacedName::new("", "sluice")),
                json!({"conditions": [{"type": "Accepted", "observedGeneration": 4}]}),
            ),
            (
                (Kind::Gateway, NamespacedName::new("app", "edge")),
                json!({"conditions": [{"type": "Accepted", "observedGeneration": 1}]}),
            ),
        ]);
        let versions = CrdVersions {
            supported: false,
            found: "gateways v1.5.0".to_owned(),
            experimental_gateways: false,
        };
        supported_version(&mut wanted, &versions);
        let class = &wanted[&(Kind::GatewayClass, NamespacedName::new("", "sluice"))];
        let version = &class["conditions"][1];
        assert_eq!(version["type"], "SupportedVersion");
        assert_eq!(version["reason"], "UnsupportedVersion");
        assert_eq!(version["observedGeneration"], 4);
        let gateway = &wanted[&(Kind::Gateway, NamespacedName::new("app", "edge"))];
        assert_eq!(gateway["conditions"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn gateway_addresses_say_whether_they_are_ips_or_names() {
        let ip = IngressLoadBalancerIngress {
            ip: Some("198.18.0.200".into()),
            ..Default::default()
        };
        let name = IngressLoadBalancerIngress {
            hostname: Some("lb.example.com".into()),
            ..Default::default()
        };
        assert_eq!(
            gateway_address(&ip),
            Some(json!({"type": "IPAddress", "value": "198.18.0.200"}))
        );
        assert_eq!(
            gateway_address(&name),
            Some(json!({"type": "Hostname", "value": "lb.example.com"}))
        );
    }
}
