//! TLSRoute: attached as HTTPRoutes are (`attach_route`), to TLS listeners only; its rule's
//! backendRefs resolved as every route's (`backend_refs`); served from its listener's
//! (site, port) table by server name (`model::tls_routes`), the way `ssl-passthrough` hosts are.
//!
//! ```text
//!  TLS listener (Passthrough │ Terminate), programmed ─▶ a table for its (site, port), empty
//!      until routes attach: a name no route has is refused there (unless HTTPS listeners
//!      share the port: then they take it)
//!  TLSRoute ─attach_route─▶ (listener, route hostname ∩ listener hostname) pairs
//!           ─rules[0].backendRefs─▶ one Route (weighted shares as HTTPRoute's)
//!  every route's pairs, sorted: the more specific route hostname first (exact, longer
//!      wildcard, shorter, none), then the older route ─▶ SniTable::insert (the first keeps
//!      a name; a later one is told with a notice)
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use model::gateway_status::RouteStatus;
use model::routes::{Route, RouteSite};
use model::tls_routes::{SniName, TlsRoutes, TlsTarget};
use model::{Kind, NamespacedName, ObjectRef, Severity};

use super::objects::HttpBackendRef;
use super::pool::Place;
use super::tls_objects::{TlsMode, TlsRoute, TlsRouteSpec};
use super::{route_ref, GatewayHost, ListenerSlot, Parents, RouteHead};
use crate::compiler::Compiler;

/// A name one route wants on one listener's table.
struct Claim {
    place: Place,
    port: u16,
    host: GatewayHost,
    /// The route's own hostname that gave `host`, most specific first: (0 exact, 1 wildcard,
    /// 2 none; then the longer wildcard suffix first).
    rank: (u8, i64),
    /// The route's place in the oldest-first order.
    order: usize,
    target: TlsTarget,
    object: ObjectRef,
}

impl Compiler<'_> {
    /// Every TLSRoute naming one of our Gateways (`ours`), into the TLS tables of the
    /// listeners it attaches to; their statuses into `status`.
    pub(super) fn tls_routes(
        &mut self,
        listeners: &mut [ListenerSlot],
        ours: &Parents,
        status: &mut BTreeMap<NamespacedName, Arc<RouteStatus>>,
    ) {
        self.open_tls_ports(listeners);
        let store = self.store;
        let mut routes: Vec<(&NamespacedName, &TlsRoute)> = store.tls_routes_by_name().collect();
        // Gateway API's tie-break, as for HTTPRoutes: the oldest, then namespace/name.
        routes.sort_by(|(a_key, a), (b_key, b)| {
            let created = |r: &TlsRoute| r.metadata.creation_timestamp.clone();
            (created(a).cmp(&created(b))).then_with(|| a_key.cmp(b_key))
        });
        let mut claims = Vec::new();
        for (order, (key, route)) in routes.into_iter().enumerate() {
            let found = self.tls_route(key, route, listeners, ours, order, &mut claims);
            if let Some(found) = found {
                status.insert(key.clone(), Arc::new(found));
            }
        }
        claims.sort_by_key(|c| (c.rank, c.order));
        for claim in claims {
            let shown = shown(&claim.host);
            let name = match &claim.host {
                GatewayHost::Exact(h) => SniName::Exact(h),
                GatewayHost::Suffix(s) => SniName::Suffix(s),
                GatewayHost::Any => SniName::Any,
            };
            let table = (self.tls_routes_at(claim.place)).and_then(|t| t.get_mut(&claim.port));
            let Some(table) = table else {
                continue;
            };
            if !table.insert(name, claim.target) {
                self.diagnose_with(
                    Severity::Notice,
                    claim.object,
                    format!("{shown} on port {}: a route with a more specific hostname (or an older one) has this name on the listener; not served for this route there", claim.port),
                );
            }
        }
    }

    /// Each programmed TLS listener's (site, port) gets its table, so that a name no route
    /// has is refused rather than terminated for HTTP; `https` when HTTPS listeners (or, on
    /// the shared site's 443, the Ingresses) also take connections there.
    fn open_tls_ports(&mut self, listeners: &[ListenerSlot]) {
        for slot in listeners.iter().filter(|l| l.tls.is_some() && l.programmed) {
            let Ok(port) = u16::try_from(slot.port) else {
                continue;
            };
            let https = (slot.place == Place::Shared && port == 443)
                || (listeners.iter())
                    .any(|l| l.place == slot.place && l.port == slot.port && l.tls.is_none());
            if let Some(routes) = self.tls_routes_at(slot.place) {
                routes.entry(port).or_default().https |= https;
            }
        }
    }

    /// Where a Gateway's TLS routes go.
    fn tls_routes_at(&mut self, place: Place) -> Option<&mut TlsRoutes> {
        match place {
            Place::Shared => Some(&mut self.out.tls_routes),
            Place::Own(ip) => Some(&mut self.out.sites.entry(ip).or_default().tls_routes),
            Place::Nowhere => None,
        }
    }

    /// One TLSRoute: where it attaches (its status entry per parentRef naming one of our
    /// Gateways) and the names it claims there. `None`: another controller's route.
    fn tls_route(
        &mut self,
        key: &NamespacedName,
        route: &TlsRoute,
        listeners: &mut [ListenerSlot],
        ours: &Parents,
        order: usize,
        claims: &mut Vec<Claim>,
    ) -> Option<RouteStatus> {
        let spec = &route.spec;
        let head = RouteHead {
            key,
            kind: Kind::TLSRoute,
            parent_refs: &spec.parent_refs,
            hostnames: &spec.hostnames,
            unsupported: &route.unsupported,
            generation: route.generation,
        };
        let super::Attached { parents, pairs, .. } =
            self.attach_route(&head, listeners, (ours, false))?;
        let object = route_ref(Kind::TLSRoute, key);
        let mark = self.out.diagnostics.len();
        let target = self.tls_route_backends(key, &object, spec);
        let route_hosts: Vec<GatewayHost> = (spec.hostnames.iter())
            .filter_map(|h| GatewayHost::parse(Some(h)).ok())
            .collect();
        for (s, host) in pairs {
            let slot = &listeners[s];
            let (Some(mode), true) = (slot.tls, slot.programmed) else {
                continue;
            };
            let Ok(port) = u16::try_from(slot.port) else {
                continue;
            };
            // The most specific of the route's hostnames that gives this name here.
            let rank = (route_hosts.iter())
                .filter(|h| slot.host.intersect(h).as_ref() == Some(&host))
                .map(rank)
                .min()
                .unwrap_or((2, 0));
            claims.push(Claim {
                place: slot.place,
                port,
                host,
                rank,
                order,
                target: TlsTarget {
                    route: target.clone(),
                    terminate: mode == TlsMode::Terminate,
                },
                object: object.clone(),
            });
        }
        Some(self.route_status(&object, parents, (mark, spec.rules.len()), route.generation))
    }

    /// The route its connections go to: its first rule's backendRefs (the API allows one
    /// rule), resolved as every route's; none, or none usable, refuses its connections.
    fn tls_route_backends(
        &mut self,
        key: &NamespacedName,
        object: &ObjectRef,
        spec: &TlsRouteSpec,
    ) -> Arc<Route> {
        let refs = spec.rules.first().map_or(&[][..], |r| &r.backend_refs[..]);
        let host = spec.hostnames.first().map_or("", String::as_str);
        self.first_rule_backends((key, object), (spec.rules.len(), refs), host)
    }

    /// A route kind with one rule's backendRefs (TLSRoute, TCPRoute, UDPRoute): its first
    /// rule's (of `rules`), resolved as every route's, shown under `host`; more rules are a
    /// diagnostic.
    pub(super) fn first_rule_backends(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        (rules, refs): (usize, &[HttpBackendRef]),
        host: &str,
    ) -> Arc<Route> {
        if rules > 1 {
            self.diagnose_with(
                Severity::Unsupported,
                object.clone(),
                format!(
                    "spec.rules: Sluice serves a {}'s first rule only; the others are ignored",
                    object.kind.as_str()
                ),
            );
        }
        let site = RouteSite {
            host: self.share(host),
            path: self.share(""),
            service_port: self.share(""),
        };
        let policy = self.default_policy.clone();
        let field = "spec.rules[0]";
        self.gateway_backends((key, object), field, (refs, None), policy, site)
    }
}

/// How specific a route's own hostname is (smaller: more).
fn rank(host: &GatewayHost) -> (u8, i64) {
    match host {
        GatewayHost::Exact(_) => (0, 0),
        GatewayHost::Suffix(s) => (1, -(s.len() as i64)),
        GatewayHost::Any => (2, 0),
    }
}

fn shown(host: &GatewayHost) -> String {
    match host {
        GatewayHost::Exact(h) => h.clone(),
        GatewayHost::Suffix(s) => format!("*.{s}"),
        GatewayHost::Any => "every name".to_owned(),
    }
}
