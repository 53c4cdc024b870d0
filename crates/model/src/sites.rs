//! Sites: what a connection is served with, chosen by the address it came in on.
//!
//! ```text
//!  connection ─local address─▶ Compiled::site(local) (compiled.rs)
//!      an address a Gateway owns (--gateway-address-pool) ─▶ that Gateway's Site
//!          { routes, certificates, passthrough, tls_routes }: its own routes and certificates only
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

/// What one Gateway with an address of its own serves there.
#[derive(Debug, Default)]
pub struct Site {
    pub routes: RouteTable,
    pub certificates: Certificates,
    /// TLS passthrough hosts (exact names) → their route, as [`Compiled::passthrough`].
    pub passthrough: HashMap<String, Arc<Route>>,
    /// Gateway TLS listeners' routes by port, as [`Compiled::tls_routes`].
    pub tls_routes: crate::tls_routes::TlsRoutes,
    /// Gateway TCP and UDP listeners' routes by port, as [`Compiled::gateway_streams`].
    pub streams: crate::gateway_streams::GatewayStreams,
}

/// The parts of a configuration one connection is served with.
#[derive(Clone, Copy, Debug)]
pub struct SiteRef<'c> {
    pub routes: &'c RouteTable,
    pub certificates: &'c Certificates,
    pub passthrough: &'c HashMap<String, Arc<Route>>,
    pub tls_routes: &'c crate::tls_routes::TlsRoutes,
}

/// Sites by address (sorted, so views and golden files are stable).
pub type Sites = BTreeMap<IpAddr, Site>;

/// A port a Gateway listener declares beyond 80 (`--http-listen`) and 443 (`--https-listen`):
/// the proxy binds it on `--http-listen`'s address at that number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeclaredPort {
    /// HTTPS (terminated with the site's certificates), else plain HTTP.
    pub tls: bool,
    /// The bit rules attached to it answer on.
    pub on: crate::routes::Listeners,
}

/// Declared ports by number.
pub type DeclaredPorts = BTreeMap<u16, DeclaredPort>;
