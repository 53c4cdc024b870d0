//! Gateway API: GatewayClasses of Sluice's controller, their Gateways' listeners and the
//! HTTPRoutes and GRPCRoutes attached to them, compiled into the same rule model as Ingresses.
//!
//! ```text
//!  GatewayClass (controllerName sluice.dev/gateway-controller)
//!    └▶ Gateway ─▶ address (`addresses`: --gateway-address-pool ─▶ a site of its own)
//!               ─▶ listeners: HTTP :80 ─▶ Listeners::HTTP   (served on --http-listen)
//!                             HTTPS :443 ─▶ Listeners::HTTPS (--https-listen; certificateRefs
//!                                           ─▶ Certificates, ReferenceGrant across namespaces)
//!                             HTTP/HTTPS :other ─▶ a declared port's bit (`ports`)
//!  HTTPRoute ─parentRefs (name, sectionName, port)─▶ listeners that allow it
//!            ─hostnames ∩ listener hostname─▶ hosts (exact, *.suffix of any depth, any)
//!            ─rules × matches─▶ PathRoute { path, when: [method, headers, query], listeners }
//!                      filters ─▶ RoutePolicy blocks (header edits, upstream Host, redirect)
//!                      backendRefs ─▶ Route, weighted split as Traffic (backends.rs resolves)
//!  GRPCRoute ─the same attachment (attach_route)─▶ hosts
//!            ─rules × matches─▶ method as the path /<service>/<method>, headers as conditions;
//!                      the same filters and backendRefs, every share gRPC (HTTP/2)
//! ```
//! Files: `objects` and `grpc_objects` (the types), `addresses` (a Gateway's site),
//! `listeners` (what a Gateway serves), `ports` (ports beyond 80 and 443), this file (attaching
//! routes of either kind, hostnames, HTTPRoute rules), `grpc_route`, `matches`, `filters`,
//! `backend_refs`, `backend_tls` (BackendTLSPolicy: TLS to a Service port's endpoints; its types
//! and the compile's decisions in `backend_tls_objects`), `frontend_tls` (`spec.tls.frontend`:
//! client certificates on the HTTPS listeners' ports).
//! HTTPRoutes and GRPCRoutes are attached in one order; of the two kinds, the route attached
//! first keeps a hostname on a listener (the spec accepts exactly one of them).
//! Routes (both kinds) are read oldest first, then by namespace/name, rules and matches in order: the
//! RouteTable's stable sort then gives Gateway API's precedence (see `model::routes`).
//! Nothing here is reached in an Ingress-only configuration beyond three empty-map checks.
//! Also: `namespaces` (which namespaces' routes a listener admits, label selectors over the
//! Store's Namespace labels), `timeouts` (a rule's `timeouts` on its upstream policy), `retry`
//! (its `retry` on the same policy), `status`, `listener_sets` (ListenerSets' listeners joining
//! their Gateway's, after its own; a route's parentRef of kind ListenerSet attaches to those only),
//! `tls_route` (TLSRoutes), `stream_route` and `stream_objects` (TCP and UDP listeners,
//! TCPRoutes and UDPRoutes into the stream services model), `isolation` (which listener a rule
//! came through, and its route's hostname's precedence), `infrastructure` and
//! `infrastructure_objects` (the Service generated for a Gateway in Kubernetes mode, and
//! `parametersRef`, which refuses a class or Gateway), `listener_filters` (a listener's pre-routing
//! `filters.requests`, GEP-5224: ExternalAuth stages run before routing, failing closed).

mod addresses;
pub mod api;
mod backend_refs;
mod backend_tls;
pub mod backend_tls_objects;
mod cors;
mod filters;
pub(crate) mod fragments;
mod frontend_tls;
pub mod grpc_objects;
mod grpc_route;
mod hosts;
mod infrastructure;
mod infrastructure_objects;
mod isolation;
mod listener_filters;
pub mod listener_set_objects;
mod listener_sets;
mod listeners;
mod matches;
mod namespaces;
pub mod objects;
mod pool;
mod ports;
mod replay;
mod retry;
mod session;
mod status;
pub mod stream_objects;
mod stream_route;
mod timeouts;
pub mod tls_objects;
mod tls_route;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use model::gateway_status::{
    AddressPlan, ClassStatus, Condition, GatewayStatus, GatewayStatuses, RouteParentStatus,
    RouteStatus,
};
use model::policy::{RoutePolicy, SslRedirect};
use model::routes::{HostPattern, Listeners, PathKind, PathRoute, RouteSite};
use model::{Kind, NamespacedName, ObjectRef, Severity};
use regex::Regex;

use crate::compiler::Compiler;
use grpc_objects::GrpcRoute;
use namespaces::AllowedFrom;
use objects::{HttpRoute, HttpRouteMatch};

/// The `controllerName` of the GatewayClasses Sluice serves.
pub const GATEWAY_CONTROLLER: &str = "sluice.dev/gateway-controller";
pub use fragments::{FragmentCounts, Fragments};
use fragments::{RouteOutcome, Source};
pub use infrastructure_objects::{GATEWAY_CLASS_NAME_LABEL, GATEWAY_NAME_LABEL};
pub use model::gateway_status::ListenPorts;
pub use namespaces::{NamespaceSelector, NAMESPACE_NAME_LABEL};
pub use objects::GROUP;
pub use pool::{AddressPool, PoolError, MAX_POOL_ADDRESSES};

use hosts::{GatewayHost, PlacedHost, RouteHosts};
use pool::{Assignment, Place};

/// Where a route attached.
struct Attached {
    /// Its parents' statuses (Accepted and why not).
    parents: Vec<RouteParentStatus>,
    /// The hosts it answers for, with the listeners it answers on there.
    hosts: RouteHosts,
    /// Each (listener slot, host) it attached to (TLSRoutes' tables are per listener port).
    pairs: Vec<(usize, GatewayHost)>,
    /// A parentRef was refused because a route of the other kind holds a hostname there:
    /// the outcome depends on other routes, not only on this one and the context.
    contested: bool,
}

/// One listener Sluice serves.
struct ListenerSlot {
    gateway: NamespacedName,
    /// The ListenerSet the listener is written in; `None`: the Gateway's own.
    set: Option<NamespacedName>,
    /// The Gateway's site (`addresses`).
    place: Place,
    name: String,
    port: i32,
    on: Listeners,
    host: GatewayHost,
    from: AllowedFrom,
    http_routes: bool,
    /// `allowedRoutes.kinds` admits GRPCRoutes (as it does when it names no kind).
    grpc_routes: bool,
    /// A TLS listener admitting TLSRoutes (as it does when it names no kind).
    tls_routes: bool,
    /// A TLS listener's mode (`None`: HTTP or HTTPS).
    tls: Option<tls_objects::TlsMode>,
    /// A TCP or UDP listener admitting TCPRoutes or UDPRoutes (`stream_route`).
    tcp_routes: bool,
    udp_routes: bool,
    /// A TCP or UDP listener's protocol (`None`: HTTP, HTTPS or TLS).
    stream: Option<model::streams::StreamProtocol>,
    /// Routes attached here (a listener status's `attachedRoutes`).
    attached: i32,
    /// The hostnames routes of each kind hold here, kept only when both HTTPRoutes and
    /// GRPCRoutes exist: the spec lets one kind, the older route's, have a hostname.
    claims: Vec<(GatewayHost, Kind)>,
    /// Served: false when its certificate is unusable. Routes still attach (and are counted);
    /// their rules are compiled for their conditions but not served here.
    programmed: bool,
    /// Why `ResolvedRefs` is False (the spec's reason), if it is.
    refs: Option<&'static str>,
    /// Its index in its Gateway's or ListenerSet's `spec.listeners`.
    index: usize,
    /// `filters.requests` when it has some (`listener_filters`).
    filters: Option<objects::ListenerFilters>,
    /// Why its filters cannot all run, if they cannot (its requests then answer 500).
    filter_fault: Option<status::FilterFault>,
}

impl ListenerSlot {
    /// What the compile decided about the listener, for its status.
    fn accepted(&self) -> status::Accepted {
        status::Accepted {
            http_routes: self.http_routes,
            grpc_routes: self.grpc_routes,
            tls_routes: self.tls_routes,
            tcp_routes: self.tcp_routes,
            udp_routes: self.udp_routes,
            attached: self.attached,
            programmed: self.programmed,
            refs: self.refs,
            filter_fault: self.filter_fault.clone(),
        }
    }
}

/// What a route's parentRefs may name: our Gateways, and ListenerSets naming one of them
/// (with that Gateway).
#[derive(Default)]
struct Parents {
    gateways: BTreeSet<NamespacedName>,
    sets: BTreeMap<NamespacedName, NamespacedName>,
    /// Gateways refused for a `parametersRef` (not accepted, served nowhere): a route or
    /// ListenerSet naming one is not accepted there either (ParentNotAccepted).
    refused: BTreeSet<NamespacedName>,
}

/// What HTTPRoute and GRPCRoute share: where a route attaches.
struct RouteHead<'a> {
    key: &'a NamespacedName,
    kind: Kind,
    parent_refs: &'a [objects::ParentReference],
    hostnames: &'a [String],
    unsupported: &'a [String],
    generation: i64,
}

/// A route of either kind, for the one order both are attached in.
#[derive(Clone, Copy)]
enum AnyRoute<'a> {
    Http(&'a Arc<HttpRoute>),
    Grpc(&'a Arc<GrpcRoute>),
}

impl<'a> AnyRoute<'a> {
    fn created(&self) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
        match self {
            AnyRoute::Http(r) => r.metadata.creation_timestamp.as_ref(),
            AnyRoute::Grpc(r) => r.metadata.creation_timestamp.as_ref(),
        }
    }

    fn uid(self) -> Option<&'a Arc<str>> {
        match self {
            AnyRoute::Http(r) => r.uid.as_ref(),
            AnyRoute::Grpc(r) => r.uid.as_ref(),
        }
    }
}

/// A route's status as the compile found it, with where its name sorts among all routes
/// (so the status maps are built from sorted input, without comparing names again).
struct FoundStatus<'a> {
    rank: usize,
    key: &'a NamespacedName,
    status: Arc<RouteStatus>,
    uid: Option<&'a Arc<str>>,
}

fn gateway_ref(key: &NamespacedName) -> ObjectRef {
    ObjectRef::new(Kind::Gateway, &*key.namespace, &*key.name)
}

fn route_ref(kind: Kind, key: &NamespacedName) -> ObjectRef {
    ObjectRef::new(kind, &*key.namespace, &*key.name)
}

impl Compiler<'_> {
    /// Every Gateway API object of Sluice's classes, into the route table and certificates.
    /// Runs after the Ingresses' passes, so their host-wide annotations stay on their routes.
    /// `listen`: Kubernetes mode's listening ports, for the Services generated for Gateways
    /// (`infrastructure`); `None` from files.
    pub(crate) fn gateway_api(&mut self, pool: Option<&AddressPool>, listen: Option<ListenPorts>) {
        let mut status = GatewayStatuses::default();
        let route_uids = self.gateway_api_into(&mut status, (pool, listen));
        status.uids = uids(self.store, &status, route_uids);
        self.finish_sites();
        self.out.gateway_status = Arc::new(status);
    }

    /// Returns the uids of the HTTPRoutes and GRPCRoutes with a status, as `uids` wants them.
    fn gateway_api_into(
        &mut self,
        status: &mut GatewayStatuses,
        (pool, listen): (Option<&AddressPool>, Option<ListenPorts>),
    ) -> Vec<((Kind, NamespacedName), Arc<str>)> {
        let store = self.store;
        let mut classes = BTreeSet::new();
        // Classes with a parametersRef: not accepted, their Gateways not served.
        let mut refused_classes = BTreeSet::new();
        for class in store.gateway_classes() {
            if class.spec.controller_name != GATEWAY_CONTROLLER {
                continue;
            }
            let name = class.metadata.name.as_deref().unwrap_or_default();
            classes.insert(name.to_owned());
            let object = ObjectRef::new(Kind::GatewayClass, "", name);
            self.unsupported_fields(&object, &class.unsupported);
            let accepted = match infrastructure_objects::class_parameters(class) {
                Some(why) => {
                    self.diagnose(object, why.clone());
                    refused_classes.insert(name.to_owned());
                    let reason = "InvalidParameters";
                    Condition::new("Accepted", false, reason, why, class.generation)
                }
                None => {
                    let why = "served by Sluice";
                    Condition::new("Accepted", true, "Accepted", why, class.generation)
                }
            };
            status.classes.insert(
                name.to_owned(),
                ClassStatus {
                    conditions: vec![accepted],
                },
            );
        }
        if classes.is_empty() {
            return Vec::new();
        }
        for (key, grant) in store.reference_grants_by_name() {
            let object = ObjectRef::new(Kind::ReferenceGrant, &*key.namespace, &*key.name);
            self.unsupported_fields(&object, &grant.unsupported);
        }
        let mut listeners = Vec::new();
        let mut ours = Parents::default();
        let mut outcomes = Vec::new();
        let mut set_outcomes = Vec::new();
        let gateways: Vec<_> = (store.gateways_by_name())
            .filter(|(_, g)| classes.contains(&g.spec.gateway_class_name))
            .collect();
        let mut sets = self.listener_sets_by_gateway(&gateways);
        // A parametersRef (the Gateway's or its class's) refuses the Gateway: served nowhere,
        // and no address of the pool held for it.
        let refused: BTreeMap<&NamespacedName, String> = (gateways.iter())
            .filter_map(|(key, gateway)| {
                let class_refused = refused_classes.contains(&gateway.spec.gateway_class_name);
                infrastructure_objects::gateway_parameters(gateway, class_refused)
                    .map(|why| (*key, why))
            })
            .collect();
        let placed: Vec<_> = (gateways.iter())
            .filter(|(key, _)| !refused.contains_key(key))
            .copied()
            .collect();
        let no_addresses = BTreeMap::new();
        let given = self.fragments.as_deref().map(Fragments::gateway_addresses);
        let given = given.unwrap_or(&no_addresses);
        let mut assignments = pool::assign(pool, &placed, given, listen.is_some());
        for (key, why) in &refused {
            self.diagnose(gateway_ref(key), why.clone());
            let nowhere = Assignment {
                place: Place::Nowhere,
                problem: None,
                plan: AddressPlan::default(),
            };
            assignments.insert((*key).clone(), nowhere);
        }
        self.unpooled_addresses(pool, &gateways);
        self.refused_addresses(&assignments);
        self.open_sites(&assignments);
        for (key, gateway) in gateways {
            let place = assignments[key].place;
            ours.gateways.insert(key.clone());
            if refused.contains_key(key) {
                ours.refused.insert(key.clone());
            }
            let object = gateway_ref(key);
            self.unsupported_fields(&object, &gateway.unsupported);
            self.gateway_client_certificate(key, gateway);
            let frontend = self.gateway_frontend(key, gateway);
            let mut seen = BTreeSet::new();
            let mut found = Vec::new();
            let owner = (Kind::Gateway, key);
            for (i, listener) in gateway.spec.listeners.iter().enumerate() {
                let mark = self.out.diagnostics.len();
                let ca = self.listener_frontend(&frontend, (key, place), listener);
                // No usable CA for its port: not accepted, nothing of it served or bound.
                let refused = ca.as_ref().is_some_and(|c| c.none_valid);
                let slot = (!refused)
                    .then(|| self.listener((key, place), owner, i, listener))
                    .flatten()
                    .map(|slot| {
                        listeners.push(slot);
                        listeners.len() - 1
                    });
                // TCP and UDP listeners on one port are two sockets: no conflict.
                let udp = listener.protocol == "UDP";
                let conflicted = !seen.insert((listener.port, listener.hostname.clone(), udp));
                found.push(status::ListenerOutcome {
                    name: listener.name.clone(),
                    slot,
                    said: self.said_since(mark, i),
                    conflicted,
                    lost: None,
                    ca,
                });
            }
            let mine = sets.remove(key).unwrap_or_default();
            for (set, _) in &mine {
                ours.sets.insert((*set).clone(), key.clone());
            }
            let gateway_at = (key, gateway, place);
            set_outcomes.extend(self.listener_sets(gateway_at, mine, &mut listeners));
            outcomes.push((key, gateway, found));
        }
        self.shared_collisions(&listeners);
        self.index_listener_hosts(&listeners);
        let plain = |l: &ListenerSlot| {
            l.on == Listeners::HTTP
                || (self.out.declared_ports.values()).any(|d| d.on == l.on && !d.tls)
        };
        if listeners.iter().any(plain) {
            // A Gateway's HTTP listener also speaks HTTP/2 with prior knowledge (h2c), as
            // GRPCRoute requires of HTTP listeners and HTTPRoute's h2c clients expect: the
            // plain socket takes the preface as `use-h2c` has it.
            self.out.settings.use_h2c = true;
        }
        let both_kinds = store.http_routes_by_name().next().is_some()
            && store.grpc_routes_by_name().next().is_some();
        let mut routes: Vec<(&NamespacedName, AnyRoute)> = (store.http_routes_shared())
            .map(|(key, r)| (key, AnyRoute::Http(r)))
            .chain(
                store
                    .grpc_routes_shared()
                    .map(|(k, r)| (k, AnyRoute::Grpc(r))),
            )
            .collect();
        // Gateway API's tie-break: the oldest route, then namespace/name (objects from files
        // have no creation time and count as oldest). Both kinds in one order: of an HTTPRoute
        // and a GRPCRoute with a hostname in common on a listener, the first keeps it.
        // Each kind comes sorted by name: by name across kinds only when there are two, then
        // stably by age (comparing names again for thousands of routes at every compile was a
        // tenth of a compile that reused them all).
        if both_kinds {
            routes.sort_by_key(|(key, _)| *key);
        }
        let mut routes: Vec<(usize, &NamespacedName, AnyRoute)> = (routes.into_iter())
            .enumerate()
            .map(|(rank, (key, route))| (rank, key, route))
            .collect();
        routes.sort_by(|(_, _, a), (_, _, b)| a.created().cmp(&b.created()));
        self.backend_tls_policies();
        let ours = &ours;
        // Gateway routes start from the ConfigMap's policy without ingress-nginx's ssl-redirect:
        // Gateway API has none (an HTTP listener serves plain HTTP; a redirect is a filter).
        let ingress_default = self.default_policy.clone();
        self.default_policy = Arc::new(RoutePolicy {
            ssl_redirect: SslRedirect {
                enabled: false,
                force: false,
                ..ingress_default.ssl_redirect
            },
            ..(*ingress_default).clone()
        });
        self.listener_filters(&mut listeners);
        // Collected, then built into maps at once (sorted, in bulk: cheaper than thousands of
        // inserts in creation-time order).
        let (mut http_statuses, mut grpc_statuses) = (Vec::new(), Vec::new());
        for (rank, key, route) in routes {
            let listeners = (&mut listeners[..], both_kinds);
            let (found, into) = match route {
                AnyRoute::Http(route) => (
                    self.gateway_route(Source::Http(route), listeners, |compiler, slots| {
                        compiler.http_route(key, route, slots, (ours, both_kinds))
                    }),
                    &mut http_statuses,
                ),
                AnyRoute::Grpc(route) => (
                    self.gateway_route(Source::Grpc(route), listeners, |compiler, slots| {
                        compiler.grpc_route(key, route, slots, (ours, both_kinds))
                    }),
                    &mut grpc_statuses,
                ),
            };
            if let Some(status) = found {
                let uid = route.uid();
                into.push(FoundStatus {
                    rank,
                    key,
                    status,
                    uid,
                });
            }
        }
        let mut route_uids = Vec::new();
        for (kind, mut found, into) in [
            (Kind::HTTPRoute, http_statuses, &mut status.http_routes),
            (Kind::GRPCRoute, grpc_statuses, &mut status.grpc_routes),
        ] {
            found.sort_unstable_by_key(|f| f.rank);
            let uids = (found.iter()).filter_map(|f| Some(((kind, f.key.clone()), f.uid?.clone())));
            route_uids.extend(uids);
            *into = found
                .into_iter()
                .map(|f| (f.key.clone(), f.status))
                .collect();
        }
        self.tls_routes(&mut listeners, ours, &mut status.tls_routes);
        let streams = (&mut status.tcp_routes, &mut status.udp_routes);
        self.stream_routes(&mut listeners, ours, streams);
        self.default_policy = ingress_default;
        let attached_sets =
            self.listener_set_statuses(set_outcomes, &listeners, &ours.refused, status);
        for (key, gateway, found) in outcomes {
            let generation = gateway.generation;
            let listener_status = gateway
                .spec
                .listeners
                .iter()
                .zip(&found)
                .map(|(listener, outcome)| {
                    let slot = outcome.slot.map(|s| listeners[s].accepted());
                    status::listener_status(listener, outcome, slot, generation)
                })
                .collect();
            let slots = found.iter().filter_map(|o| o.slot.map(|s| &listeners[s]));
            let slots =
                slots.filter(|s| s.filter_fault.as_ref().is_none_or(|f| f.accepted.is_none()));
            let accepted = slots.clone().count();
            let programmed = slots
                .filter(|s| s.programmed && s.filter_fault.is_none())
                .count();
            let mut conditions =
                status::gateway_conditions(accepted, programmed, found.len(), generation);
            let assignment = &assignments[key];
            assignment.overrule(&mut conditions, generation);
            if let Some(why) = refused.get(key) {
                infrastructure_objects::refuse_for_parameters(&mut conditions, why, generation);
            }
            conditions.extend(self.backend_tls.gateway_refs.get(key).cloned());
            conditions.extend(frontend_tls::insecure_mode(gateway, generation));
            status.gateways.insert(
                key.clone(),
                GatewayStatus {
                    addresses: assignment.plan.clone(),
                    conditions,
                    listeners: listener_status,
                    attached_listener_sets: attached_sets.get(key).copied().unwrap_or(0),
                },
            );
            let gateway_at = (key, gateway);
            if let Some(generated) =
                self.gateway_service(gateway_at, assignment.place, &listeners, listen)
            {
                status.infrastructure.insert(key.clone(), generated);
            }
        }
        self.backend_tls_status(status);
        route_uids
    }

    /// What the compile said since `mark` about listener `i` (of the object it was said of),
    /// for its conditions' messages.
    fn said_since(&self, mark: usize, i: usize) -> Vec<String> {
        let field = format!("spec.listeners[{i}]");
        self.out.diagnostics[mark..]
            .iter()
            .filter(|d| d.reason.starts_with(&field))
            .map(|d| d.reason.clone())
            .collect()
    }

    fn unsupported_fields(&mut self, object: &ObjectRef, fields: &[String]) {
        for field in fields {
            self.diagnose_with(
                Severity::Unsupported,
                object.clone(),
                format!("{field}: not supported by Sluice (yet); ignored"),
            );
        }
    }

    /// One HTTPRoute: the listeners it attaches to, the hosts it answers for there, then its
    /// rules; its status entry for each parentRef naming one of our Gateways. A route naming
    /// none of them is another controller's: not a word (no status).
    fn http_route(
        &mut self,
        key: &NamespacedName,
        route: &HttpRoute,
        listeners: &mut [ListenerSlot],
        ours: (&Parents, bool),
    ) -> RouteOutcome {
        let spec = &route.spec;
        let head = RouteHead {
            key,
            kind: Kind::HTTPRoute,
            parent_refs: &spec.parent_refs,
            hostnames: &spec.hostnames,
            unsupported: &route.unsupported,
            generation: route.generation,
        };
        let Some(attached) = self.attach_route(&head, listeners, ours) else {
            return RouteOutcome::default();
        };
        let object = route_ref(Kind::HTTPRoute, key);
        let mark = self.out.diagnostics.len();
        let rules = match attached.hosts.is_empty() {
            true => Vec::new(),
            false => self.http_route_rules(key, &object, spec, &attached.hosts),
        };
        let count = spec.rules.len();
        self.route_outcome(&object, attached, rules, (mark, count), route.generation)
    }

    /// A route's rules on its hosts, and its status (see [`Compiler::route_status`]).
    fn route_outcome(
        &mut self,
        object: &ObjectRef,
        attached: Attached,
        rules: Vec<PathRoute>,
        (mark, count): (usize, usize),
        generation: i64,
    ) -> RouteOutcome {
        let placed = self.placed_hosts(&attached.hosts);
        for rule in &rules {
            self.add_placed(rule, &placed);
        }
        let status = self.route_status(object, attached.parents, (mark, count), generation);
        RouteOutcome {
            status: Some(Arc::new(status)),
            placed,
            pairs: attached.pairs,
            contested: attached.contested,
            rules,
        }
    }

    /// Where a route of either kind attaches: each parentRef naming one of our Gateways gets a
    /// status entry (Accepted and why not), and the hosts the route answers for, with the
    /// listeners it answers on there. `None`: no parentRef names one of our Gateways.
    fn attach_route(
        &mut self,
        head: &RouteHead,
        listeners: &mut [ListenerSlot],
        (ours, both_kinds): (&Parents, bool),
    ) -> Option<Attached> {
        let key = head.key;
        // The Gateway a parentRef attaches under, and the ListenerSet when it names one.
        let parent_of = |parent: &objects::ParentReference| {
            let group = parent.group.as_deref().unwrap_or(GROUP);
            let kind = parent.kind.as_deref().unwrap_or("Gateway");
            let namespace = parent.namespace.as_deref().unwrap_or(&key.namespace);
            let named = NamespacedName::new(namespace, parent.name.as_str());
            match kind {
                _ if group != GROUP => None,
                "Gateway" => ours.gateways.contains(&named).then_some((named, None)),
                "ListenerSet" => {
                    (ours.sets.get(&named)).map(|gateway| (gateway.clone(), Some(named)))
                }
                _ => None,
            }
        };
        if !head.parent_refs.iter().any(|p| parent_of(p).is_some()) {
            return None;
        }
        let generation = head.generation;
        let mut parents: Vec<RouteParentStatus> = Vec::new();
        let mut attached_to = BTreeSet::new();
        let object = route_ref(head.kind, key);
        self.unsupported_fields(&object, head.unsupported);
        let mut route_hosts = Vec::new();
        for (h, hostname) in head.hostnames.iter().enumerate() {
            match GatewayHost::parse(Some(hostname)) {
                Ok(GatewayHost::Any) | Err(_) => self.diagnose(
                    object.clone(),
                    format!("spec.hostnames[{h}] {hostname:?}: must be a lower-case DNS name, optionally starting with `*.`; ignored"),
                ),
                Ok(host) => route_hosts.push(host),
            }
        }
        let mut hosts: RouteHosts = BTreeMap::new();
        // Every (listener, host) the route attached to, for TLSRoutes' per-port tables.
        let mut pairs = Vec::new();
        let mut contested = false;
        for (p, parent) in head.parent_refs.iter().enumerate() {
            let field = format!("spec.parentRefs[{p}]");
            let Some((gateway, set)) = parent_of(parent) else {
                continue;
            };
            let shown = match &set {
                Some(set) => format!("ListenerSet {set}"),
                None => format!("Gateway {gateway}"),
            };
            if ours.refused.contains(&gateway) {
                // Its listeners exist (for the Gateway's own status) but serve nothing: saying
                // Accepted here would tell the route's owner it is served when it is not.
                let why = match &set {
                    Some(_) => format!("{shown} belongs to Gateway {gateway}, which is not accepted (InvalidParameters: see its status); nothing is served through it (ParentNotAccepted)"),
                    None => format!("{shown} is not accepted (InvalidParameters: see its status); nothing is served through it (ParentNotAccepted)"),
                };
                let accepted = Condition::new(
                    "Accepted",
                    false,
                    "ParentNotAccepted",
                    why.clone(),
                    generation,
                );
                parents.push(parent_status(parent, accepted));
                self.diagnose(
                    object.clone(),
                    format!("{field}: {why}; not attached there"),
                );
                continue;
            }
            let (mut named, mut allowed) = (false, false);
            // (listener, host) pairs this parentRef attaches the route to.
            let mut found = Vec::new();
            for (s, slot) in listeners
                .iter()
                .enumerate()
                .filter(|(_, l)| l.gateway == gateway && l.set == set)
            {
                if parent
                    .section_name
                    .as_ref()
                    .is_some_and(|s| *s != slot.name)
                    || parent.port.is_some_and(|port| port != slot.port)
                {
                    continue;
                }
                named = true;
                // `Same` is the namespace the listener is written in.
                let home = slot.set.as_ref().unwrap_or(&slot.gateway);
                let admits = (slot.from).admits(self.store, &home.namespace, &key.namespace);
                let kind_allowed = match head.kind {
                    Kind::GRPCRoute => slot.grpc_routes,
                    Kind::TLSRoute => slot.tls_routes,
                    Kind::TCPRoute => slot.tcp_routes,
                    Kind::UDPRoute => slot.udp_routes,
                    _ => slot.http_routes,
                };
                if !admits || !kind_allowed {
                    continue;
                }
                allowed = true;
                let named_hosts = (!head.hostnames.is_empty()).then_some(&route_hosts[..]);
                let through = slot.host.through(named_hosts);
                found.extend(through.into_iter().map(|(host, via)| (s, host, via)));
            }
            // The spec accepts one of an HTTPRoute and a GRPCRoute with a hostname in common
            // on a listener: the one attached first (the older).
            let taken = found.iter().find_map(|(s, host, _)| {
                let claims = listeners[*s].claims.iter();
                claims
                    .filter(|(held, kind)| *kind != head.kind && held.overlaps(host))
                    .map(|(_, kind)| *kind)
                    .next()
            });
            let by_host = !found.is_empty();
            contested |= taken.is_some();
            if taken.is_none() {
                for (s, host, via) in found {
                    if both_kinds {
                        listeners[s].claims.push((host.clone(), head.kind));
                    }
                    attached_to.insert(s);
                    pairs.push((s, host.clone()));
                    // A listener that is not programmed serves nothing: its routes' rules
                    // are compiled (for their conditions) but not added for it.
                    let slot = &listeners[s];
                    let on = (hosts.entry((slot.place, host, via))).or_insert(Listeners::NONE);
                    if slot.programmed {
                        *on = on.union(slot.on);
                    }
                }
            }
            let (reason, why) = if !named {
                let section = parent
                    .section_name
                    .as_ref()
                    .map(|s| format!(" named {s}"))
                    .unwrap_or_default();
                let port = parent
                    .port
                    .map(|p| format!(" on port {p}"))
                    .unwrap_or_default();
                ("NoMatchingParent", format!("{shown} has no listener{section}{port} that Sluice serves (NoMatchingParent)"))
            } else if !allowed {
                ("NotAllowedByListeners", format!("the listeners of {shown} do not allow this route (allowedRoutes: its namespace or kind; NotAllowedByListeners)"))
            } else if !by_host {
                ("NoMatchingListenerHostname", format!("none of the route's hostnames matches a listener hostname of {shown} (NoMatchingListenerHostname)"))
            } else if let Some(kind) = taken {
                ("NotAllowedByListeners", format!("an older {kind} has a hostname of this route on a listener of {shown}, and an HTTPRoute and a GRPCRoute may not share one (NotAllowedByListeners)"))
            } else {
                let accepted = Condition::new("Accepted", true, "Accepted", "", generation);
                parents.push(parent_status(parent, accepted));
                continue;
            };
            let accepted = Condition::new("Accepted", false, reason, why.clone(), generation);
            parents.push(parent_status(parent, accepted));
            self.diagnose(
                object.clone(),
                format!("{field}: {why}; not attached there"),
            );
        }
        for s in attached_to {
            listeners[s].attached += 1;
        }
        Some(Attached {
            parents,
            hosts,
            pairs,
            contested,
        })
    }

    /// A route's status from its parents' acceptance and what the compile said about its
    /// `rules` since `mark`: ResolvedRefs and PartiallyInvalid on every parent, or
    /// Accepted=False UnsupportedValue when every rule was refused.
    fn route_status(
        &mut self,
        object: &ObjectRef,
        mut parents: Vec<RouteParentStatus>,
        (mark, rules): (usize, usize),
        generation: i64,
    ) -> RouteStatus {
        let said: Vec<&model::Diagnostic> = self.out.diagnostics[mark..]
            .iter()
            .filter(|d| d.object == *object)
            .collect();
        let resolved = status::resolved_refs(&said, generation);
        let partial = status::partially_invalid(&said, generation);
        let refused = status::all_rules_refused(&said, rules);
        for parent in &mut parents {
            if let Some(why) = refused.as_ref().filter(|_| parent.conditions[0].status) {
                let refused =
                    Condition::new("Accepted", false, "UnsupportedValue", why, generation);
                parent.conditions[0] = refused;
            }
            parent.conditions.push(resolved.clone());
            if refused.is_none() {
                parent.conditions.extend(partial.clone());
            }
        }
        RouteStatus { parents }
    }

    fn http_route_rules(
        &mut self,
        key: &NamespacedName,
        object: &ObjectRef,
        spec: &objects::HttpRouteSpec,
        hosts: &RouteHosts,
    ) -> Vec<PathRoute> {
        let site_host = self.site_host(hosts);
        let mut rules = Vec::new();
        for (r, rule) in spec.rules.iter().enumerate() {
            self.http_route_rule((key, object), r, rule, &site_host, &mut rules);
        }
        rules
    }

    /// One rule's PathRoutes (one per match), added to `rules`.
    fn http_route_rule(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        r: usize,
        rule: &objects::HttpRouteRule,
        site_host: &Arc<str>,
        rules: &mut Vec<PathRoute>,
    ) {
        let field = format!("spec.rules[{r}]");
        let default_match = [HttpRouteMatch::default()];
        let matches = if rule.matches.is_empty() {
            &default_match[..]
        } else {
            &rule.matches[..]
        };
        let first_path = matches[0]
            .path
            .as_ref()
            .and_then(|p| p.value.as_deref())
            .unwrap_or("/");
        let site = RouteSite {
            host: site_host.clone(),
            path: self.share(first_path),
            service_port: self.share(""),
        };
        // A filter that replaces the matched prefix needs each match's own prefix: then one
        // route per match, else one for the rule.
        let backend_prefix =
            (rule.backend_refs.iter()).any(|b| b.filters.iter().any(filters::replaces_prefix));
        let per_match = backend_prefix || rule.filters.iter().any(filters::replaces_prefix);
        let timeouts = self.rule_timeouts(object, &field, rule.timeouts.as_ref());
        let retry = self.rule_retry(object, &field, rule.retry.as_ref());
        let persistence = rule.session_persistence.as_ref();
        let session = self.rule_session((object, &field), r, persistence);
        let shared = (!per_match).then(|| {
            let policy = self.gateway_filters((key, object), &field, &rule.filters, None);
            let policy = session.apply(retry.apply(timeouts.apply(policy)));
            let refs = (&rule.backend_refs[..], None);
            self.gateway_backends((key, object), &field, refs, policy, site.clone())
        });
        for (m, spec_match) in matches.iter().enumerate() {
            let at = format!("{field}.matches[{m}]");
            let route = match &shared {
                Some(route) => route.clone(),
                None => {
                    let path = spec_match.path.as_ref();
                    let prefix = match path.and_then(|p| p.type_.as_deref()) {
                        None | Some("PathPrefix") => {
                            path.and_then(|p| p.value.as_deref()).or(Some("/"))
                        }
                        Some(_) => None,
                    };
                    let filters = &rule.filters;
                    let policy = self.gateway_filters((key, object), &field, filters, prefix);
                    let policy = session.apply(retry.apply(timeouts.apply(policy)));
                    let refs = (&rule.backend_refs[..], prefix);
                    self.gateway_backends((key, object), &field, refs, policy, site.clone())
                }
            };
            let Some(mut path_rule) = self.gateway_match(object, &at, spec_match, route) else {
                continue;
            };
            let rewrites = path_rule.route.policy.rewrite.is_some() || backend_prefix;
            if path_rule.kind == PathKind::Prefix && rewrites {
                // URLRewrite's ReplacePrefixMatch: the rewrite takes what follows the prefix
                // as capture 1 of this pattern, which matches exactly what the prefix does.
                let prefix = path_rule.written.trim_end_matches('/');
                let pattern = format!("^{}(/.*)?$", regex::escape(prefix));
                path_rule.pattern = Some(Regex::new(&pattern).expect("an escaped prefix"));
            }
            rules.push(path_rule);
        }
    }

    /// A route's hosts as the table keys them (names shared), leaving out those it answers on
    /// no listener (every listener it attached to there is not programmed: its rules are
    /// compiled for their conditions only).
    fn placed_hosts(&mut self, hosts: &RouteHosts) -> Vec<PlacedHost> {
        let on_some = hosts.iter().filter(|(_, on)| **on != Listeners::NONE);
        on_some
            .map(|((place, host, via), on)| {
                let pattern = match host {
                    GatewayHost::Exact(h) => HostPattern::Exact(self.share(h)),
                    GatewayHost::Suffix(s) => HostPattern::Wildcard(self.share(s)),
                    GatewayHost::Any => HostPattern::Any,
                };
                (*place, pattern, *on, *via)
            })
            .collect()
    }

    /// One rule of a route, on each host it answers for, on that host's listeners at its
    /// Gateway's site (a Gateway whose address could not be given serves nowhere).
    fn add_placed(&mut self, path_rule: &PathRoute, hosts: &[PlacedHost]) {
        for (place, pattern, on, via) in hosts {
            let mut rule = path_rule.clone();
            rule.listeners = *on;
            rule.via = *via;
            let Some(table) = self.routes_at(*place) else {
                continue;
            };
            match pattern {
                HostPattern::Wildcard(suffix) => table.add_suffix_rule(suffix, rule),
                exact_or_any => table.host_mut(exact_or_any).add(rule),
            }
        }
    }

    /// The site a route's rules are shown under: its first host.
    fn site_host(&mut self, hosts: &RouteHosts) -> Arc<str> {
        match hosts.keys().next().map(|(_, host, _)| host) {
            Some(GatewayHost::Exact(h)) => self.share(h),
            Some(GatewayHost::Suffix(s)) => self.share(&format!("*.{s}")),
            _ => self.share(""),
        }
    }
}

/// The uid of every Gateway and route that has a status (see `GatewayStatuses::uids`).
/// `route_uids`: the HTTPRoutes' and GRPCRoutes', found while compiling them, sorted.
fn uids(
    store: &crate::store::Store,
    status: &GatewayStatuses,
    route_uids: Vec<((Kind, NamespacedName), Arc<str>)>,
) -> BTreeMap<(Kind, NamespacedName), Arc<str>> {
    // Runs of sorted entries, built into the map at once (thousands of inserts one by one
    // were a fifth of a compile that reused every route).
    let mut uids = route_uids;
    let mut add = |kind: Kind, key: &NamespacedName, uid: Option<&Arc<str>>| {
        if let Some(uid) = uid {
            uids.push(((kind, key.clone()), uid.clone()));
        }
    };
    for key in status.gateways.keys() {
        add(
            Kind::Gateway,
            key,
            store.gateway(key).and_then(|o| o.uid.as_ref()),
        );
    }
    for (key, route) in store.tls_routes_by_name() {
        if status.tls_routes.contains_key(key) {
            add(Kind::TLSRoute, key, route.uid.as_ref());
        }
    }
    let streams = (store.tcp_routes_by_name().map(|r| (Kind::TCPRoute, r)))
        .chain(store.udp_routes_by_name().map(|r| (Kind::UDPRoute, r)));
    for (kind, (key, route)) in streams {
        let statuses = match kind {
            Kind::TCPRoute => &status.tcp_routes,
            _ => &status.udp_routes,
        };
        if statuses.contains_key(key) {
            add(kind, key, route.uid.as_ref());
        }
    }
    for (key, set) in store.listener_sets_by_name() {
        if status.listener_sets.contains_key(key) {
            add(Kind::ListenerSet, key, set.uid.as_ref());
        }
    }
    uids.into_iter().collect()
}

fn parent_status(parent: &objects::ParentReference, accepted: Condition) -> RouteParentStatus {
    RouteParentStatus {
        parent_ref: status::parent_ref(parent),
        controller_name: GATEWAY_CONTROLLER,
        conditions: vec![accepted],
    }
}
