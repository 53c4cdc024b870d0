//! TCPRoute and UDPRoute: attached as every route is (`attach_route`), to TCP (UDP) listeners
//! only; their rule's backendRefs resolved as every route's (`backend_refs`, weights and
//! all); served as a stream service of the listener's port at its Gateway's site
//! (`model::gateway_streams`), by the same stream proxy as `--tcp-services-configmap` entries.
//!
//! ```text
//!  TCP/UDP listener (any port) ─claim_stream_port─▶ the port at the Gateway's site, unless
//!      Sluice's own listeners, an HTTP/HTTPS/TLS listener's port (TCP), a services ConfigMap
//!      entry (on the shared site) or another Gateway listener there have it: then the
//!      listener is not accepted (PortUnavailable; ProtocolConflict against HTTP ports)
//!  TCPRoute ─attach_route─▶ listeners ─rules[0].backendRefs─▶ one Route (weighted shares)
//!      ─▶ StreamService { route } at (site, port); routes oldest first: the first keeps the
//!         port, a later one is Accepted and counted (attachedRoutes) but gets no traffic
//!         there (a notice), as the spec's multiple-routes tests expect
//!  no usable backendRef ─▶ the route's connections are closed (UDP: datagrams dropped)
//! ```

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use model::gateway_status::RouteStatus;
use model::gateway_streams::GatewayStreams;
use model::routes::Route;
use model::streams::{StreamProtocol, StreamService};
use model::{Kind, NamespacedName, ObjectRef, Severity};

use super::pool::Place;
use super::{route_ref, ListenerSlot, Parents, RouteHead};
use crate::compiler::Compiler;

/// The stream protocol of a listener's `protocol`, if it is TCP or UDP.
pub(super) fn stream_protocol(protocol: &str) -> Option<StreamProtocol> {
    match protocol {
        "TCP" => Some(StreamProtocol::Tcp),
        "UDP" => Some(StreamProtocol::Udp),
        _ => None,
    }
}

fn route_kind(protocol: StreamProtocol) -> Kind {
    match protocol {
        StreamProtocol::Tcp => Kind::TCPRoute,
        StreamProtocol::Udp => Kind::UDPRoute,
    }
}

/// Each route's status, by name (one map per kind).
type RouteStatuses = BTreeMap<NamespacedName, Arc<RouteStatus>>;

impl Compiler<'_> {
    /// A TCP (UDP) listener's port at its Gateway's site, for `holder` (how the listener is
    /// named in a message), or why it cannot have it.
    pub(super) fn claim_stream_port(
        &mut self,
        place: Place,
        protocol: StreamProtocol,
        port: i32,
        holder: String,
    ) -> Result<(), String> {
        let name = protocol.name();
        let Some(port) = u16::try_from(port).ok().filter(|p| *p != 0) else {
            return Err(format!("port {port} is not a {name} port"));
        };
        let taken = |what: &str| Err(format!("port {port} is {what} (PortUnavailable)"));
        if protocol == StreamProtocol::Tcp {
            if let Some(what) = self.stream_ports.reserved.get(&port) {
                return taken(&format!("{what}'s"));
            }
            if port == 80 || port == 443 || self.out.declared_ports.contains_key(&port) {
                return Err(format!("port {port} is served as HTTP, HTTPS or TLS by a Gateway listener or Sluice's own (ProtocolConflict)"));
            }
        }
        let services = match protocol {
            StreamProtocol::Tcp => &self.out.tcp_services,
            StreamProtocol::Udp => &self.out.udp_services,
        };
        // A ConfigMap entry's port answers on every address; a Gateway's own address
        // (a site) is looked up first, so only the shared site collides with it.
        if place == Place::Shared && services.contains_key(&port) {
            return taken(&format!("a {name} service's ({})", protocol.flag()));
        }
        if place == Place::Nowhere {
            return Ok(());
        }
        match self.stream_ports.held_mut().entry((name, port, place)) {
            Entry::Occupied(first) => taken(&format!("{}'s at this address", first.get())),
            Entry::Vacant(slot) => {
                slot.insert(holder);
                Ok(())
            }
        }
    }

    /// Every TCPRoute and UDPRoute naming one of our Gateways (`ours`), into the stream
    /// services of the listeners they attach to; their statuses into `tcp` and `udp`.
    pub(super) fn stream_routes(
        &mut self,
        listeners: &mut [ListenerSlot],
        ours: &Parents,
        (tcp, udp): (&mut RouteStatuses, &mut RouteStatuses),
    ) {
        let store = self.store;
        for (protocol, status) in [(StreamProtocol::Tcp, tcp), (StreamProtocol::Udp, udp)] {
            let mut routes: Vec<_> = match protocol {
                StreamProtocol::Tcp => store.tcp_routes_by_name().collect(),
                StreamProtocol::Udp => store.udp_routes_by_name().collect(),
            };
            // Gateway API's tie-break: the oldest, then namespace/name. The first route on a
            // listener keeps its port.
            routes.sort_by(|(a_key, a), (b_key, b)| {
                let (a_at, b_at) = (
                    &a.metadata.creation_timestamp,
                    &b.metadata.creation_timestamp,
                );
                a_at.cmp(b_at).then_with(|| a_key.cmp(b_key))
            });
            for (key, route) in routes {
                let head = RouteHead {
                    key,
                    kind: route_kind(protocol),
                    parent_refs: &route.spec.parent_refs,
                    hostnames: &[],
                    unsupported: &route.unsupported,
                    generation: route.generation,
                };
                let Some(super::Attached { parents, pairs, .. }) =
                    self.attach_route(&head, listeners, (ours, false))
                else {
                    continue;
                };
                let object = route_ref(head.kind, key);
                let mark = self.out.diagnostics.len();
                // Its first rule's backendRefs (the API allows one rule); none usable closes
                // its connections.
                let spec = &route.spec;
                let refs = spec.rules.first().map_or(&[][..], |r| &r.backend_refs[..]);
                let target = self.first_rule_backends((key, &object), (spec.rules.len(), refs), "");
                let slots: BTreeSet<usize> = pairs.into_iter().map(|(s, _)| s).collect();
                for s in slots {
                    self.serve_stream(&listeners[s], protocol, (key, &object), &target);
                }
                let rules = route.spec.rules.len();
                let found = self.route_status(&object, parents, (mark, rules), route.generation);
                status.insert(key.clone(), Arc::new(found));
            }
        }
    }

    /// The route's connections on listener `slot`'s port, unless an older route has it.
    fn serve_stream(
        &mut self,
        slot: &ListenerSlot,
        protocol: StreamProtocol,
        (key, object): (&NamespacedName, &ObjectRef),
        target: &Arc<Route>,
    ) {
        let (Some(served), true) = (slot.stream, slot.programmed) else {
            return;
        };
        let Ok(port) = u16::try_from(slot.port) else {
            return;
        };
        if served != protocol {
            return;
        }
        let service = NamespacedName::new(&*key.namespace, &*target.service);
        let service = target.backend.key().map_or(service, |k| k.service.clone());
        let kind = object.kind.as_str().to_ascii_lowercase();
        let stream = StreamService {
            port,
            service,
            service_port: target.site.service_port.to_string(),
            backend: target.backend.clone(),
            decode_proxy_protocol: false,
            encode_proxy_protocol: false,
            upstream_name: format!("{kind}-{}-{}", key.namespace, key.name),
            route: Some(target.clone()),
        };
        let Some(streams) = self.streams_at(slot.place) else {
            return;
        };
        match streams.of_mut(protocol).entry(port) {
            Entry::Vacant(free) => {
                free.insert(Arc::new(stream));
            }
            Entry::Occupied(held) => {
                let first = held.get().upstream_name.clone();
                self.diagnose_with(
                    Severity::Notice,
                    object.clone(),
                    format!("listener {} (port {port}): an older route ({first}) has its connections; attached, but not served there", slot.name),
                );
            }
        }
    }

    /// Where a Gateway's TCP and UDP listeners' routes go.
    fn streams_at(&mut self, place: Place) -> Option<&mut GatewayStreams> {
        match place {
            Place::Shared => Some(&mut self.out.gateway_streams),
            Place::Own(ip) => Some(&mut self.out.sites.entry(ip).or_default().streams),
            Place::Nowhere => None,
        }
    }
}
