//! The Store: every object a provider has seen, typed and indexed, and what each change touches.
//!
//! Providers push objects in; the control plane asks the Store what a change means: either
//! "configuration" (recompile everything from the snapshot) or "endpoints of these Services"
//! (swap only those backends' endpoint sets).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use model::{Kind, NamespacedName, ObjectRef};

use crate::gateway::backend_tls_objects::BackendTlsPolicy;
use crate::gateway::grpc_objects::GrpcRoute;
use crate::gateway::listener_set_objects::ListenerSet;
use crate::gateway::objects::{Gateway, GatewayClass, HttpRoute, ReferenceGrant};
use crate::gateway::stream_objects::{TcpRoute, UdpRoute};
use crate::gateway::tls_objects::TlsRoute;
use crate::objects::{
    ClusterTrustBundle, ConfigMap, EndpointSlice, Ingress, IngressClass, Namespace, Object, Secret,
    Service,
};

/// Every object of the kinds Sluice reads, keyed for deterministic iteration.
///
/// The numerous kinds are behind a pointer: a B-tree node has room for eleven entries and is on
/// average about two thirds full, so an object kept inline (an Ingress is 304 bytes) leaves ≈100
/// bytes of empty slot per entry, a pointer 8 bytes of one. What a compile reads is shared
/// (`Arc`, 16 bytes more than a box), so [`Store::without_endpoint_slices`] copies no object:
/// the admission webhook compiles against such a copy on its own thread.
#[derive(Clone, Debug, Default)]
pub struct Store {
    ingress_classes: BTreeMap<String, IngressClass>,
    ingresses: BTreeMap<NamespacedName, Arc<Ingress>>,
    services: BTreeMap<NamespacedName, Arc<Service>>,
    endpoint_slices: BTreeMap<NamespacedName, Box<EndpointSlice>>,
    secrets: BTreeMap<NamespacedName, Arc<Secret>>,
    config_maps: BTreeMap<NamespacedName, Arc<ConfigMap>>,
    /// Service → its EndpointSlices, so the fast path never scans every slice.
    slices_by_service: BTreeMap<NamespacedName, BTreeSet<Arc<str>>>,
    /// Gateway API: empty maps (no allocation) in an Ingress-only configuration.
    gateway_classes: BTreeMap<String, Arc<GatewayClass>>,
    gateways: BTreeMap<NamespacedName, Arc<Gateway>>,
    http_routes: BTreeMap<NamespacedName, Arc<HttpRoute>>,
    grpc_routes: BTreeMap<NamespacedName, Arc<GrpcRoute>>,
    tls_routes: BTreeMap<NamespacedName, Arc<TlsRoute>>,
    tcp_routes: BTreeMap<NamespacedName, Arc<TcpRoute>>,
    udp_routes: BTreeMap<NamespacedName, Arc<UdpRoute>>,
    reference_grants: BTreeMap<NamespacedName, Arc<ReferenceGrant>>,
    backend_tls_policies: BTreeMap<NamespacedName, Arc<BackendTlsPolicy>>,
    listener_sets: BTreeMap<NamespacedName, Arc<ListenerSet>>,
    /// Namespaces' labels, by name (Kubernetes mode: watched unless the scope is one
    /// namespace; a file: the Namespaces it describes).
    namespaces: BTreeMap<String, Arc<Namespace>>,
    /// ClusterTrustBundles by name (cluster-scoped): CA certificates that BackendTLSPolicies
    /// and Gateways' frontend validation may name.
    cluster_trust_bundles: BTreeMap<String, Arc<ClusterTrustBundle>>,
    /// Kinds the API server said it does not serve (a 404 for their resource: a CRD not
    /// installed, a built-in API not enabled), so a reference to one can say so rather than
    /// "not found". Empty for a file.
    unserved: BTreeSet<Kind>,
    /// Changes with every change to an object a route's compiled rules may read (see
    /// [`Store::context`]), to a number no other Store has had.
    context: u64,
    /// Per Service, a number that changes with each change to its EndpointSlices (see
    /// [`Store::endpoints_version`]).
    endpoints_versions: HashMap<NamespacedName, u64>,
    /// ExternalName → the addresses the resolver last found for it (see
    /// [`Store::set_resolved`]): the endpoints of ExternalName Services, as slices are of
    /// the others. Not an object: a reload of the files or a relist keeps it.
    resolved_names: BTreeMap<String, Resolved>,
    /// The zone of the node this replica runs on, when `--enable-topology-aware-routing`
    /// found it (see [`Store::set_topology_zone`]). Not an object: a fact of where it runs.
    topology_zone: Option<Arc<str>>,
    /// The node this replica runs on (`$NODE_NAME`), with `--enable-topology-aware-routing`
    /// (see [`Store::set_topology_node`]).
    topology_node: Option<Arc<str>>,
}

/// What the resolver last said of a host name (see [`Store::set_resolved`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Its addresses, sorted; none when it has none.
    pub addresses: Box<[std::net::IpAddr]>,
    /// Said when the answer was no plain one (`model::EndpointSet::resolution`).
    pub problem: Option<Box<str>>,
}

/// The next [`Store::context`] number, unique in the process: a Store cloned and then changed
/// never takes a number its original has had.
static NEXT_CONTEXT: AtomicU64 = AtomicU64::new(1);

/// Whether a change to an object of `kind` may change what a Gateway route's rules compile
/// to: everything but the routes themselves (their compiled rules are kept per object),
/// Ingresses (which share only backends with them, checked when rules are reused) and
/// EndpointSlices (endpoints are refreshed apart from the rules).
fn is_context(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::EndpointSlice | Kind::Ingress | Kind::HTTPRoute | Kind::GRPCRoute
    )
}

/// What a batch of changes requires of the control plane.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// Something other than endpoints changed: recompile from the snapshot.
    pub config: bool,
    /// Services whose EndpointSlices changed: refresh just their endpoint sets.
    pub endpoints: BTreeSet<NamespacedName>,
    /// ConfigMaps that changed: a recompile only if the last compile read one of them
    /// (`Compiled::config_maps_read`); the others are in the Store for when one is named.
    pub config_maps: BTreeSet<NamespacedName>,
    /// A Namespace's labels changed: a recompile only if the last compile selected route
    /// namespaces by label (`Compiled::namespace_selectors`).
    pub namespaces: bool,
    /// ClusterTrustBundles that changed: a recompile only if the last compile read one of
    /// them (`Compiled::cluster_trust_bundles_read`), as for ConfigMaps.
    pub cluster_trust_bundles: BTreeSet<String>,
}

impl ChangeSet {
    pub fn is_empty(&self) -> bool {
        !self.config
            && self.endpoints.is_empty()
            && self.config_maps.is_empty()
            && !self.namespaces
            && self.cluster_trust_bundles.is_empty()
    }

    pub fn merge(&mut self, other: ChangeSet) {
        self.config |= other.config;
        self.endpoints.extend(other.endpoints);
        self.config_maps.extend(other.config_maps);
        self.namespaces |= other.namespaces;
        self.cluster_trust_bundles
            .extend(other.cluster_trust_bundles);
    }

    /// Whether the configuration must be compiled again, given what the last compile read
    /// (`None`: nothing compiled yet).
    pub fn needs_compile(&self, last: Option<&model::Compiled>) -> bool {
        self.config
            || (!self.config_maps.is_empty()
                && last.is_none_or(|last| {
                    self.config_maps
                        .iter()
                        .any(|key| last.config_maps_read.contains(key))
                }))
            || (self.namespaces && last.is_none_or(|last| last.namespace_selectors))
            || (!self.cluster_trust_bundles.is_empty()
                && last.is_none_or(|last| {
                    self.cluster_trust_bundles
                        .iter()
                        .any(|name| last.cluster_trust_bundles_read.contains(name))
                }))
    }
}

fn key_of(object_ref: &ObjectRef) -> NamespacedName {
    NamespacedName::new(object_ref.namespace.as_str(), object_ref.name.as_str())
}

/// Makes `key` the map's own key when it has an equal one, else shares a neighbour's
/// namespace (see `share_namespace`).
fn share_key<V>(map: &BTreeMap<NamespacedName, V>, key: &mut NamespacedName) {
    match map.get_key_value(&*key) {
        Some((existing, _)) => *key = existing.clone(),
        None => share_namespace(map, key),
    }
}

/// The slice's Service, its namespace shared with the slice's key.
fn service_of(key: &NamespacedName, slice: &EndpointSlice) -> Option<NamespacedName> {
    Some(NamespacedName {
        namespace: key.namespace.clone(),
        name: slice.service_name.as_deref()?.into(),
    })
}

/// Makes `key` use the namespace string of a key next to it in `map`, when that is the same
/// namespace: keys sort by namespace first, so a neighbour has it if any key does, and one
/// namespace's thousands of objects then hold one string (with no table of namespaces that
/// would outlive them).
fn share_namespace<V>(map: &BTreeMap<NamespacedName, V>, key: &mut NamespacedName) {
    let neighbour = map
        .range(..=&*key)
        .next_back()
        .or_else(|| map.range(&*key..).next());
    if let Some((existing, _)) = neighbour {
        if existing.namespace == key.namespace {
            key.namespace = existing.namespace.clone();
        }
    }
}

/// Inserts `value` unless an equal one is there; true when the map changed.
fn upsert<K: Ord, V: PartialEq>(map: &mut BTreeMap<K, V>, key: K, value: V) -> bool {
    match map.get(&key) {
        Some(existing) if *existing == value => false,
        _ => {
            map.insert(key, value);
            true
        }
    }
}

impl Store {
    pub fn ingress_classes(&self) -> impl Iterator<Item = &IngressClass> {
        self.ingress_classes.values()
    }

    pub fn ingresses(&self) -> impl Iterator<Item = &Ingress> {
        self.ingresses.values().map(|ingress| &**ingress)
    }

    /// Every Ingress with its key: a clone of the key shares the Store's strings.
    pub fn ingresses_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &Ingress)> {
        self.ingresses
            .iter()
            .map(|(key, ingress)| (key, &**ingress))
    }

    pub fn ingress(&self, key: &NamespacedName) -> Option<&Ingress> {
        self.ingresses.get(key).map(|ingress| &**ingress)
    }

    pub fn service(&self, key: &NamespacedName) -> Option<&Service> {
        self.services.get(key).map(|service| &**service)
    }

    pub fn secret(&self, key: &NamespacedName) -> Option<&Secret> {
        self.secrets.get(key).map(|secret| &**secret)
    }

    pub fn config_map(&self, key: &NamespacedName) -> Option<&ConfigMap> {
        self.config_maps.get(key).map(|config_map| &**config_map)
    }

    pub fn gateway_classes(&self) -> impl Iterator<Item = &GatewayClass> {
        self.gateway_classes.values().map(|o| &**o)
    }

    pub fn gateways_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &Gateway)> {
        self.gateways.iter().map(|(key, o)| (key, &**o))
    }

    pub fn gateway(&self, key: &NamespacedName) -> Option<&Gateway> {
        self.gateways.get(key).map(|o| &**o)
    }

    pub fn http_routes_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &HttpRoute)> {
        self.http_routes.iter().map(|(key, o)| (key, &**o))
    }

    pub fn http_route(&self, key: &NamespacedName) -> Option<&HttpRoute> {
        self.http_routes.get(key).map(|o| &**o)
    }

    pub fn grpc_route(&self, key: &NamespacedName) -> Option<&GrpcRoute> {
        self.grpc_routes.get(key).map(|o| &**o)
    }

    pub fn grpc_routes_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &GrpcRoute)> {
        self.grpc_routes.iter().map(|(key, o)| (key, &**o))
    }

    /// The HTTPRoutes as the Store shares them: an unchanged route is the same `Arc` from one
    /// compile to the next.
    pub(crate) fn http_routes_shared(
        &self,
    ) -> impl Iterator<Item = (&NamespacedName, &Arc<HttpRoute>)> {
        self.http_routes.iter()
    }

    /// The GRPCRoutes as the Store shares them (see [`Store::http_routes_shared`]).
    pub(crate) fn grpc_routes_shared(
        &self,
    ) -> impl Iterator<Item = (&NamespacedName, &Arc<GrpcRoute>)> {
        self.grpc_routes.iter()
    }

    pub fn tls_routes_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &TlsRoute)> {
        self.tls_routes.iter().map(|(key, o)| (key, &**o))
    }

    pub fn tcp_routes_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &TcpRoute)> {
        self.tcp_routes.iter().map(|(key, o)| (key, &**o))
    }

    pub fn udp_routes_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &UdpRoute)> {
        self.udp_routes.iter().map(|(key, o)| (key, &**o))
    }

    pub fn listener_set(&self, key: &NamespacedName) -> Option<&ListenerSet> {
        self.listener_sets.get(key).map(|o| &**o)
    }

    pub fn listener_sets_by_name(&self) -> impl Iterator<Item = (&NamespacedName, &ListenerSet)> {
        self.listener_sets.iter().map(|(key, o)| (key, &**o))
    }

    pub fn reference_grants_by_name(
        &self,
    ) -> impl Iterator<Item = (&NamespacedName, &ReferenceGrant)> {
        self.reference_grants.iter().map(|(key, o)| (key, &**o))
    }

    pub fn backend_tls_policies_by_name(
        &self,
    ) -> impl Iterator<Item = (&NamespacedName, &BackendTlsPolicy)> {
        self.backend_tls_policies.iter().map(|(key, o)| (key, &**o))
    }

    /// A Namespace's labels, when the Store has it.
    pub fn namespace_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(name).map(|n| &n.labels)
    }

    pub fn cluster_trust_bundle(&self, name: &str) -> Option<&ClusterTrustBundle> {
        self.cluster_trust_bundles.get(name).map(|o| &**o)
    }

    /// Whether the source of these objects has `kind` at all: false once the API server
    /// answered that it does not serve its resource (see [`Store::set_served`]).
    pub fn serves(&self, kind: Kind) -> bool {
        !self.unserved.contains(&kind)
    }

    /// Records whether the API server serves `kind` (a watch's list succeeded, or was
    /// answered 404). A change is a configuration change: references to such objects say
    /// why they do not resolve.
    pub fn set_served(&mut self, kind: Kind, served: bool) -> ChangeSet {
        let changed = match served {
            true => self.unserved.remove(&kind),
            false => self.unserved.insert(kind),
        };
        let changes = ChangeSet {
            config: changed,
            ..ChangeSet::default()
        };
        self.count_context_change(kind, &changes);
        changes
    }

    /// The EndpointSlices labelled for `service`, in name order.
    pub fn endpoint_slices_of<'a>(
        &'a self,
        service: &NamespacedName,
    ) -> impl Iterator<Item = &'a EndpointSlice> + 'a {
        let namespace = service.namespace.clone();
        self.slices_by_service
            .get(service)
            .into_iter()
            .flatten()
            .filter_map(move |name| {
                self.endpoint_slices
                    .get(&NamespacedName {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    })
                    .map(|slice| &**slice)
            })
    }

    /// The Store without its EndpointSlices, sharing every object: what a compile needs for its
    /// diagnostics (they never depend on endpoints), for O(objects) reference counts and tree
    /// nodes and no copy of an object. The admission webhook reviews against one.
    pub fn without_endpoint_slices(&self) -> Store {
        Store {
            ingress_classes: self.ingress_classes.clone(),
            ingresses: self.ingresses.clone(),
            services: self.services.clone(),
            endpoint_slices: BTreeMap::new(),
            secrets: self.secrets.clone(),
            config_maps: self.config_maps.clone(),
            slices_by_service: BTreeMap::new(),
            gateway_classes: self.gateway_classes.clone(),
            gateways: self.gateways.clone(),
            http_routes: self.http_routes.clone(),
            grpc_routes: self.grpc_routes.clone(),
            tls_routes: self.tls_routes.clone(),
            tcp_routes: self.tcp_routes.clone(),
            udp_routes: self.udp_routes.clone(),
            reference_grants: self.reference_grants.clone(),
            backend_tls_policies: self.backend_tls_policies.clone(),
            listener_sets: self.listener_sets.clone(),
            namespaces: self.namespaces.clone(),
            cluster_trust_bundles: self.cluster_trust_bundles.clone(),
            unserved: self.unserved.clone(),
            // Without endpoints: no compile's rules are reused with it.
            context: NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed),
            // No slices: every Service at version 0.
            endpoints_versions: HashMap::new(),
            // Nor names' addresses, which are endpoints too.
            resolved_names: BTreeMap::new(),
            topology_zone: self.topology_zone.clone(),
            topology_node: self.topology_node.clone(),
        }
    }

    /// Number of objects of every kind, for logs and metrics.
    pub fn len(&self) -> usize {
        self.ingress_classes.len()
            + self.ingresses.len()
            + self.services.len()
            + self.endpoint_slices.len()
            + self.secrets.len()
            + self.config_maps.len()
            + self.gateway_classes.len()
            + self.gateways.len()
            + self.http_routes.len()
            + self.grpc_routes.len()
            + self.tls_routes.len()
            + self.tcp_routes.len()
            + self.udp_routes.len()
            + self.reference_grants.len()
            + self.backend_tls_policies.len()
            + self.listener_sets.len()
            + self.namespaces.len()
            + self.cluster_trust_bundles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds or replaces one object.
    pub fn apply(&mut self, object: Object) -> ChangeSet {
        let kind = object.kind();
        let changes = self.apply_object(object);
        self.count_context_change(kind, &changes);
        self.count_endpoint_changes(&changes);
        changes
    }

    /// A number that is the same at two reads exactly when `service`'s EndpointSlices did not
    /// change between them: a compile re-reads a kept backend's endpoints only when it moved.
    pub fn endpoints_version(&self, service: &NamespacedName) -> u64 {
        self.endpoints_versions.get(service).copied().unwrap_or(0)
    }

    /// A Service without slices has version 0 (no entry is kept for it: names that come and
    /// go leave nothing behind).
    fn count_endpoint_changes(&mut self, changes: &ChangeSet) {
        for service in &changes.endpoints {
            let named = model::BackendKey::named_host(service).is_some();
            if self.slices_by_service.contains_key(service)
                || self.is_external_name(service)
                || named
            {
                let version = NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed);
                self.endpoints_versions.insert(service.clone(), version);
            } else {
                self.endpoints_versions.remove(service);
            }
        }
    }

    fn is_external_name(&self, service: &NamespacedName) -> bool {
        (self.services.get(service)).is_some_and(|s| s.external_name().is_some())
    }

    /// `--enable-topology-aware-routing`: the zone of this replica's node. The endpoints of a
    /// Service that asks for it (`ServiceSpec::prefers_same_zone`) are then the ones whose
    /// hints name this zone (see `backends::endpoints_for`). Set before the first compile.
    pub fn set_topology_zone(&mut self, zone: Option<&str>) {
        self.topology_zone = zone.map(Arc::from);
    }

    pub fn topology_zone(&self) -> Option<&str> {
        self.topology_zone.as_deref()
    }

    /// `--enable-topology-aware-routing`: the node this replica runs on. The endpoints of a
    /// `PreferSameNode` Service (`ServiceSpec::prefers_same_node`) are then the ones hinted
    /// for this node, while one ready one is. Set before the first compile.
    pub fn set_topology_node(&mut self, node: Option<&str>) {
        self.topology_node = node.map(Arc::from);
    }

    pub fn topology_node(&self) -> Option<&str> {
        self.topology_node.as_deref()
    }

    /// What the resolver last said of host name `name`; `None`: it has not answered.
    pub fn resolved(&self, name: &str) -> Option<&Resolved> {
        self.resolved_names.get(name)
    }

    /// The addresses the resolver last found for host name `name`; `None`: it has not answered.
    pub fn resolved_addresses(&self, name: &str) -> Option<&[std::net::IpAddr]> {
        self.resolved(name).map(|r| &r.addresses[..])
    }

    /// Records what resolving host name `name` gave: its addresses (an empty list: it has
    /// none now) and, when the answer was no plain one, what to say of it. Returns, when that
    /// changed, the Services of that ExternalName and the key of the backends that dial the
    /// name itself (`BackendKey::named`), whose endpoints changed.
    pub fn set_resolved(
        &mut self,
        name: &str,
        mut addresses: Vec<std::net::IpAddr>,
        problem: Option<String>,
    ) -> ChangeSet {
        addresses.sort_unstable();
        addresses.dedup();
        let resolved = Resolved {
            addresses: addresses.into_boxed_slice(),
            problem: problem.map(String::into_boxed_str),
        };
        let mut changes = ChangeSet::default();
        if self.resolved(name) == Some(&resolved) {
            return changes;
        }
        self.resolved_names.insert(name.to_owned(), resolved);
        changes.endpoints = (self.services.iter())
            .filter(|(_, s)| s.external_name() == Some(name))
            .map(|(key, _)| key.clone())
            .collect();
        // And the backends that dial the name itself (URL annotations' destinations).
        let named = model::BackendKey::named(name, 0).service;
        changes.endpoints.insert(named);
        self.count_endpoint_changes(&changes);
        changes
    }

    /// Forgets what was resolved for names no longer in `wanted` (their Services went, or
    /// no route names them now), so a name that comes back is asked again before it serves.
    pub fn retain_resolved(&mut self, wanted: &BTreeSet<String>) {
        self.resolved_names.retain(|name, _| wanted.contains(name));
    }

    /// A number that is the same for two compiles exactly when no object a route's compiled
    /// rules may read (Services, Secrets, ConfigMaps, Gateways, policies, grants, ...) changed
    /// between them: what lets a compile reuse the rules of an unchanged route.
    pub fn context(&self) -> u64 {
        self.context
    }

    fn count_context_change(&mut self, kind: Kind, changes: &ChangeSet) {
        if is_context(kind) && !changes.is_empty() {
            self.context = NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn apply_object(&mut self, mut object: Object) -> ChangeSet {
        // The key is made of the metadata's strings (which the provider may share with its
        // own records), and the metadata then holds the key's: one string each.
        let mut key = object.key();
        let mut changes = ChangeSet::default();
        match &object {
            Object::EndpointSlice(_) => share_key(&self.endpoint_slices, &mut key),
            Object::Ingress(_) => share_key(&self.ingresses, &mut key),
            Object::Service(_) => share_key(&self.services, &mut key),
            _ => {}
        }
        object.share_key(&key);
        match object {
            Object::EndpointSlice(slice) => {
                let old_service = self
                    .endpoint_slices
                    .get_key_value(&key)
                    .and_then(|(key, old)| service_of(key, old));
                let new_service = service_of(&key, &slice);
                if !upsert(&mut self.endpoint_slices, key.clone(), slice) {
                    return changes;
                }
                if let Some(old) = old_service {
                    self.unindex_slice(&old, &key.name);
                    changes.endpoints.insert(old);
                }
                if let Some(new) = new_service {
                    // The index's name is the map's key (an existing key is kept on replace).
                    let name = self
                        .endpoint_slices
                        .get_key_value(&key)
                        .map_or(key.name, |(kept, _)| kept.name.clone());
                    self.slices_by_service
                        .entry(new.clone())
                        .or_default()
                        .insert(name);
                    changes.endpoints.insert(new);
                }
            }
            Object::IngressClass(o) => {
                changes.config = upsert(&mut self.ingress_classes, key.name.to_string(), *o)
            }
            Object::Ingress(o) => changes.config = upsert(&mut self.ingresses, key, o.into()),
            Object::Service(o) => {
                // An ExternalName Service's endpoints come from the object itself (its name):
                // a change to one, or to or from that type, is a change of its endpoints too.
                let was = self.is_external_name(&key);
                let is = o.external_name().is_some();
                changes.config = upsert(&mut self.services, key.clone(), o.into());
                if changes.config && (was || is) {
                    changes.endpoints.insert(key);
                }
            }
            Object::Secret(o) => changes.config = upsert(&mut self.secrets, key, o.into()),
            Object::ConfigMap(o) => {
                if upsert(&mut self.config_maps, key.clone(), o.into()) {
                    changes.config_maps.insert(key);
                }
            }
            Object::GatewayClass(o) => {
                changes.config = upsert(&mut self.gateway_classes, key.name.to_string(), o.into())
            }
            Object::Gateway(o) => changes.config = upsert(&mut self.gateways, key, o.into()),
            Object::HttpRoute(o) => changes.config = upsert(&mut self.http_routes, key, o.into()),
            Object::GrpcRoute(o) => changes.config = upsert(&mut self.grpc_routes, key, o.into()),
            Object::TlsRoute(o) => changes.config = upsert(&mut self.tls_routes, key, o.into()),
            Object::TcpRoute(o) => changes.config = upsert(&mut self.tcp_routes, key, o.into()),
            Object::UdpRoute(o) => changes.config = upsert(&mut self.udp_routes, key, o.into()),
            Object::ListenerSet(o) => {
                changes.config = upsert(&mut self.listener_sets, key, o.into())
            }
            Object::ReferenceGrant(o) => {
                changes.config = upsert(&mut self.reference_grants, key, o.into())
            }
            Object::BackendTlsPolicy(o) => {
                changes.config = upsert(&mut self.backend_tls_policies, key, o.into())
            }
            Object::Namespace(o) => {
                changes.namespaces = upsert(&mut self.namespaces, key.name.to_string(), o.into())
            }
            Object::ClusterTrustBundle(o) => {
                let name = key.name.to_string();
                if upsert(&mut self.cluster_trust_bundles, name.clone(), o.into()) {
                    changes.cluster_trust_bundles.insert(name);
                }
            }
        }
        changes
    }

    /// Removes one object, if present.
    pub fn remove(&mut self, object_ref: &ObjectRef) -> ChangeSet {
        let changes = self.remove_object(object_ref);
        self.count_context_change(object_ref.kind, &changes);
        self.count_endpoint_changes(&changes);
        changes
    }

    fn remove_object(&mut self, object_ref: &ObjectRef) -> ChangeSet {
        let key = key_of(object_ref);
        let mut changes = ChangeSet::default();
        match object_ref.kind {
            Kind::EndpointSlice => {
                if let Some((key, slice)) = self.endpoint_slices.remove_entry(&key) {
                    if let Some(service) = service_of(&key, &slice) {
                        self.unindex_slice(&service, &key.name);
                        changes.endpoints.insert(service);
                    }
                }
            }
            Kind::IngressClass => {
                changes.config = self.ingress_classes.remove(&*key.name).is_some()
            }
            Kind::Ingress => changes.config = self.ingresses.remove(&key).is_some(),
            Kind::Service => {
                let was = self.is_external_name(&key);
                changes.config = self.services.remove(&key).is_some();
                if was {
                    changes.endpoints.insert(key);
                }
            }
            Kind::Secret => changes.config = self.secrets.remove(&key).is_some(),
            Kind::ConfigMap => {
                if self.config_maps.remove(&key).is_some() {
                    changes.config_maps.insert(key);
                }
            }
            Kind::GatewayClass => {
                changes.config = self.gateway_classes.remove(&*key.name).is_some()
            }
            Kind::Gateway => changes.config = self.gateways.remove(&key).is_some(),
            Kind::HTTPRoute => changes.config = self.http_routes.remove(&key).is_some(),
            Kind::GRPCRoute => changes.config = self.grpc_routes.remove(&key).is_some(),
            Kind::TLSRoute => changes.config = self.tls_routes.remove(&key).is_some(),
            Kind::TCPRoute => changes.config = self.tcp_routes.remove(&key).is_some(),
            Kind::UDPRoute => changes.config = self.udp_routes.remove(&key).is_some(),
            Kind::ReferenceGrant => changes.config = self.reference_grants.remove(&key).is_some(),
            Kind::BackendTLSPolicy => {
                changes.config = self.backend_tls_policies.remove(&key).is_some()
            }
            Kind::ListenerSet => changes.config = self.listener_sets.remove(&key).is_some(),
            Kind::Namespace => changes.namespaces = self.namespaces.remove(&*key.name).is_some(),
            Kind::ClusterTrustBundle => {
                if self.cluster_trust_bundles.remove(&*key.name).is_some() {
                    changes.cluster_trust_bundles.insert(key.name.to_string());
                }
            }
        }
        changes
    }

    /// Makes the Store hold exactly `objects` (a provider's full view: a relist, or every file
    /// re-read), reporting only what really differs. Later duplicates of an object replace
    /// earlier ones; callers that care report duplicates themselves.
    pub fn replace_all(&mut self, objects: impl IntoIterator<Item = Object>) -> ChangeSet {
        let mut wanted: BTreeMap<ObjectRef, Object> = BTreeMap::new();
        for object in objects {
            wanted.insert(object.object_ref(), object);
        }
        let mut stale = self.object_refs();
        stale.retain(|r| !wanted.contains_key(r));
        let mut changes = ChangeSet::default();
        for object_ref in &stale {
            changes.merge(self.remove(object_ref));
        }
        for (_, object) in wanted {
            changes.merge(self.apply(object));
        }
        changes
    }

    fn object_refs(&self) -> Vec<ObjectRef> {
        fn namespaced<V>(
            kind: Kind,
            map: &BTreeMap<NamespacedName, V>,
        ) -> impl Iterator<Item = ObjectRef> + '_ {
            map.keys()
                .map(move |k| ObjectRef::new(kind, &*k.namespace, &*k.name))
        }
        self.ingress_classes
            .keys()
            .map(|name| ObjectRef::new(Kind::IngressClass, "", name.clone()))
            .chain(namespaced(Kind::Ingress, &self.ingresses))
            .chain(namespaced(Kind::Service, &self.services))
            .chain(namespaced(Kind::EndpointSlice, &self.endpoint_slices))
            .chain(namespaced(Kind::Secret, &self.secrets))
            .chain(namespaced(Kind::ConfigMap, &self.config_maps))
            .chain(
                self.gateway_classes
                    .keys()
                    .map(|name| ObjectRef::new(Kind::GatewayClass, "", name.clone())),
            )
            .chain(namespaced(Kind::Gateway, &self.gateways))
            .chain(namespaced(Kind::HTTPRoute, &self.http_routes))
            .chain(namespaced(Kind::GRPCRoute, &self.grpc_routes))
            .chain(namespaced(Kind::TLSRoute, &self.tls_routes))
            .chain(namespaced(Kind::TCPRoute, &self.tcp_routes))
            .chain(namespaced(Kind::UDPRoute, &self.udp_routes))
            .chain(namespaced(Kind::ReferenceGrant, &self.reference_grants))
            .chain(namespaced(
                Kind::BackendTLSPolicy,
                &self.backend_tls_policies,
            ))
            .chain(namespaced(Kind::ListenerSet, &self.listener_sets))
            .chain(
                self.namespaces
                    .keys()
                    .map(|name| ObjectRef::new(Kind::Namespace, "", name.clone())),
            )
            .chain(
                self.cluster_trust_bundles
                    .keys()
                    .map(|name| ObjectRef::new(Kind::ClusterTrustBundle, "", name.clone())),
            )
            .collect()
    }

    fn unindex_slice(&mut self, service: &NamespacedName, slice_name: &str) {
        if let Some(names) = self.slices_by_service.get_mut(service) {
            names.remove(slice_name);
            if names.is_empty() {
                self.slices_by_service.remove(service);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::parse_documents;

    fn objects(text: &str) -> Vec<Object> {
        parse_documents("test", text).unwrap().objects
    }

    const SLICE: &str = r#"
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: ["10.0.0.1"]}]
"#;

    #[test]
    fn endpoint_slices_are_a_fast_path_change() {
        let mut store = Store::default();
        let changes = store.replace_all(objects(SLICE));
        assert!(!changes.config);
        assert_eq!(
            changes.endpoints,
            BTreeSet::from([NamespacedName::new("default", "web")])
        );
        assert_eq!(
            store
                .endpoint_slices_of(&NamespacedName::new("default", "web"))
                .count(),
            1
        );
        // The same content again is no change at all.
        assert!(store.replace_all(objects(SLICE)).is_empty());
        // Gone from the provider's view: the Service's endpoints changed.
        let changes = store.replace_all(Vec::new());
        assert_eq!(changes.endpoints.len(), 1);
        assert!(store.is_empty());
    }

    #[test]
    fn other_kinds_are_configuration_changes() {
        let mut store = Store::default();
        let changes = store.replace_all(objects(
            "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
        ));
        assert!(changes.config);
        assert!(changes.endpoints.is_empty());
    }

    #[test]
    fn a_config_map_change_compiles_only_if_the_last_compile_read_it() {
        let mut store = Store::default();
        let config_map = |value: &str| {
            objects(&format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app, namespace: shop}}\ndata: {{k: {value}}}\n"
            ))
        };
        let changes = store.replace_all(config_map("a"));
        assert!(!changes.config);
        assert_eq!(
            changes.config_maps,
            BTreeSet::from([NamespacedName::new("shop", "app")])
        );
        // Nothing compiled yet: compile.
        assert!(changes.needs_compile(None));
        let mut last = model::Compiled::default();
        assert!(!changes.needs_compile(Some(&last)));
        last.config_maps_read
            .insert(NamespacedName::new("shop", "app"));
        assert!(changes.needs_compile(Some(&last)));
        assert!(store.replace_all(config_map("a")).is_empty(), "unchanged");
        let gone = store.replace_all(Vec::new());
        assert!(gone.needs_compile(Some(&last)), "deleted");
    }

    #[test]
    fn relabelling_a_slice_touches_both_services() {
        let mut store = Store::default();
        store.replace_all(objects(SLICE));
        let moved = SLICE.replace("service-name: web", "service-name: api");
        let changes = store.replace_all(objects(&moved));
        assert_eq!(changes.endpoints.len(), 2);
        assert_eq!(
            store
                .endpoint_slices_of(&NamespacedName::new("default", "web"))
                .count(),
            0
        );
    }

    #[test]
    fn a_copy_without_endpoint_slices_shares_the_objects() {
        let mut store = Store::default();
        store.replace_all(objects(&format!(
            "{SLICE}---\napiVersion: v1\nkind: Service\nmetadata: {{name: web}}\n"
        )));
        let copy = store.without_endpoint_slices();
        assert_eq!(copy.len(), 1);
        assert_eq!(
            copy.endpoint_slices_of(&NamespacedName::new("default", "web"))
                .count(),
            0
        );
        let key = NamespacedName::new("default", "web");
        assert!(Arc::ptr_eq(&store.services[&key], &copy.services[&key]));
    }
}
