//! Listener isolation and route hostname precedence, the compile's side (the model's is
//! `model::listener_hosts`).
//!
//! ```text
//!  listeners (HTTP/HTTPS, programmed) ─▶ their site's RouteTable::listener_hosts (hostname, ports)
//!  route hostnames ∩ listener hostname ─▶ (host, Via { listener rank, host gap }) per listener
//!      ─▶ RouteHosts key ─▶ add_to_hosts: each rule's PathRoute.via
//! ```
//! So a request is served only by the rules of the most specific listener its Host matches on
//! its port, and on one host a route that named it outranks one that got it by intersection.

use model::listener_hosts::Via;
use model::routes::HostPattern;

use super::{GatewayHost, ListenerSlot};
use crate::compiler::Compiler;

impl GatewayHost {
    /// The model's pattern for this hostname (a `Wildcard` is a Gateway suffix here).
    pub(super) fn pattern(&self) -> HostPattern {
        match self {
            GatewayHost::Exact(name) => HostPattern::Exact(name.as_str().into()),
            GatewayHost::Suffix(suffix) => HostPattern::Wildcard(suffix.as_str().into()),
            GatewayHost::Any => HostPattern::Any,
        }
    }
}

impl GatewayHost {
    /// The hosts a route answers for through a listener with this hostname, each with how it
    /// came: `route_hosts` are the route's valid hostnames (`None`: it has none, so it takes
    /// the listener's). Of several route hostnames giving one host, the closest counts.
    pub(super) fn through(&self, route_hosts: Option<&[GatewayHost]>) -> Vec<(GatewayHost, Via)> {
        let listener = self.pattern().rank();
        let Some(route_hosts) = route_hosts else {
            return vec![(self.clone(), Via::gateway(listener, 0, listener))];
        };
        let mut found: Vec<(GatewayHost, Via)> = Vec::new();
        for route_host in route_hosts {
            let Some(host) = self.intersect(route_host) else {
                continue;
            };
            let ranks = (route_host.pattern().rank(), host.pattern().rank());
            let via = Via::gateway(listener, ranks.0, ranks.1);
            match found.iter_mut().find(|(h, _)| *h == host) {
                Some((_, held)) => held.host_gap = held.host_gap.min(via.host_gap),
                None => found.push((host, via)),
            }
        }
        found
    }
}

impl Compiler<'_> {
    /// Every served HTTP and HTTPS listener's hostname, on its ports, into its site's index
    /// (TLS listeners route by server name in their own tables).
    pub(super) fn index_listener_hosts(&mut self, listeners: &[ListenerSlot]) {
        for slot in listeners.iter().filter(|l| l.programmed && l.tls.is_none()) {
            let host = slot.host.pattern();
            if let Some(table) = self.routes_at(slot.place) {
                table.add_listener_host(&host, slot.on);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> GatewayHost {
        GatewayHost::parse(Some(text)).unwrap()
    }

    #[test]
    fn a_host_remembers_its_listener_and_how_far_the_route_s_hostname_was() {
        let listener = host("abc.example.com");
        let named = [
            host("*.example.com"),
            host("abc.example.com"),
            host("x.org"),
        ];
        let found = listener.through(Some(&named));
        // Both hostnames give abc.example.com; the route's own exact one counts.
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, host("abc.example.com"));
        assert_eq!(found[0].1.listener, u8::MAX);
        assert_eq!(found[0].1.host_gap, 0);

        let wider = listener.through(Some(&[host("*.example.com")]));
        assert_eq!(wider[0].1.host_gap, u8::MAX - 3);
        let none = listener.through(None);
        assert_eq!(none[0].1.host_gap, u8::MAX);

        let wildcard = host("*.example.com").through(Some(&[host("*.com")]));
        assert_eq!(wildcard[0].0, host("*.example.com"));
        assert_eq!((wildcard[0].1.listener, wildcard[0].1.host_gap), (3, 1));
        let any = GatewayHost::Any.through(Some(&[host("bar.com")]));
        assert_eq!((any[0].1.listener, any[0].1.host_gap), (0, 0));
    }
}
