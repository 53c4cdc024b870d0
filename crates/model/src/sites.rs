//! Sites: what a connection is served with, chosen by the address it came in on.
//!
//! ```text
//!  connection ─local address─▶ Compiled::site(local)
//!      an address a Gateway owns (--gateway-address-pool) ─▶ that Gateway's Site
//!          { routes, certificates, passthrough }: its own routes and certificates only
//!      any other address, or no Gateway with an address ─▶ the shared site: Compiled's own
//!          routes, certificates and passthrough (Ingresses, Gateways without an address)
//! ```
//! Addresses are data here (no sockets): the proxy reads a connection's local address only when
//! the configuration has sites, so a configuration without them pays nothing.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use crate::routes::{Route, RouteTable};
use crate::tls::Certificates;
use crate::Compiled;

/// What one Gateway with an address of its own serves there.
#[derive(Debug, Default)]
pub struct Site {
    pub routes: RouteTable,
    pub certificates: Certificates,
    /// TLS passthrough hosts (exact names) → their route, as [`Compiled::passthrough`].
    pub passthrough: HashMap<String, Arc<Route>>,
}

/// The parts of a configuration one connection is served with.
#[derive(Clone, Copy, Debug)]
pub struct SiteRef<'c> {
    pub routes: &'c RouteTable,
    pub certificates: &'c Certificates,
    pub passthrough: &'c HashMap<String, Arc<Route>>,
}

/// Sites by address (sorted, so views and golden files are stable).
pub type Sites = BTreeMap<IpAddr, Site>;

impl Compiled {
    /// Some Gateway has an address of its own: connections must say which address they came
    /// in on.
    pub fn has_sites(&self) -> bool {
        !self.sites.is_empty()
    }

    /// What a connection to `local` (its local address; `None`: not read, as without sites)
    /// is served with: the site of the Gateway that owns the address, else the shared one.
    pub fn site(&self, local: Option<IpAddr>) -> SiteRef<'_> {
        match local.and_then(|ip| self.sites.get(&ip.to_canonical())) {
            Some(site) => SiteRef {
                routes: &site.routes,
                certificates: &site.certificates,
                passthrough: &site.passthrough,
            },
            None => SiteRef {
                routes: &self.routes,
                certificates: &self.certificates,
                passthrough: &self.passthrough,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::{HostPattern, PathKind, PathRoute, RouteSite};
    use crate::Backend;

    fn route(name: &str) -> Arc<Route> {
        Arc::new(Route {
            ingress: crate::NamespacedName::new("default", name),
            service: Arc::from(name),
            backend: Arc::new(Backend::unresolved()),
            policy: Arc::default(),
            site: RouteSite::default(),
            traffic: None,
            not_found: false,
        })
    }

    #[test]
    fn a_connection_gets_the_site_of_its_address_else_the_shared_one() {
        let mut compiled = Compiled::default();
        let own: IpAddr = "192.0.2.7".parse().unwrap();
        let mut site = Site::default();
        site.routes.host_mut(&HostPattern::Any).add(PathRoute::new(
            PathKind::Prefix,
            "/",
            route("gateway"),
        ));
        site.routes.finish();
        compiled.sites.insert(own, site);
        compiled
            .routes
            .host_mut(&HostPattern::Any)
            .add(PathRoute::new(PathKind::Prefix, "/", route("ingress")));
        compiled.routes.finish();
        assert!(compiled.has_sites());
        let head = http::Request::new(()).into_parts().0;
        let served_by = |local: Option<IpAddr>| {
            let found = compiled.site(local).routes.route("x.com", "/", &head);
            found.map(|m| m.route.ingress.name.to_string())
        };
        assert_eq!(served_by(Some(own)).as_deref(), Some("gateway"));
        // A dual-stack socket reports an IPv4 client's address mapped into IPv6.
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(served_by(Some(mapped)).as_deref(), Some("gateway"));
        assert_eq!(
            served_by(Some("192.0.2.8".parse().unwrap())).as_deref(),
            Some("ingress")
        );
        assert_eq!(served_by(None).as_deref(), Some("ingress"));
    }
}
