//! Sluice's model: the configuration the proxy serves, as plain data. No Kubernetes types, no
//! sockets, no runtime, no clock: `translate` makes a [`Compiled`] from the Store, the proxy
//! swaps it in whole and reads it per request.
//!
//! ```text
//!  translate::compile(&Store) ──▶ Compiled { routes: RouteTable, backends, certificates,
//!                                            settings, access_log, tcp/udp services,
//!                                            diagnostics, gateway_status }
//!                                      │ gateway_status (gateway_status.rs): Gateway API
//!                                      │ conditions, written back by the provider's leader
//!                                      │ Arc, swapped whole by the proxy
//!  request on a Gateway listener with `filters` ──▶ its ListenerStage first (pre_routing.rs)
//!  request ──▶ validate_host, normalize_path ──▶ Compiled.routes.route_on(listener, host,
//!                                                 path, head)
//!          ──▶ the first rule on that listener whose path and conditions (matches.rs) hold
//!              (Ingress and Gateway API rules alike; a Gateway rule only for requests of
//!              the listener it came through: listener_hosts.rs) ──▶ Route
//!          ──▶ Route::pick (a weighted split: canary-weight)
//!          ──▶ route.policy (client certificates: client_cert.rs, cors, access, user
//!                            auth: basic_auth.rs and digest_auth.rs, external auth: auth.rs,
//!                            redirect (Gateway API's: gateway_redirect.rs),
//!                            rewrite, headers, body, upstream, session
//!                            affinity: affinity.rs, mirror, response rewrites:
//!                            response_rewrite.rs)
//!          ──▶ Backend::endpoints()  (ArcSwap per backend: the endpoint fast path swaps it
//!                                     without a compile)
//!  connection to a Gateway's own address (--gateway-address-pool) ──▶ Compiled.sites[addr]
//!      (sites.rs): that Gateway's routes and certificates instead of the shared ones
//!  TLS connection to a port with a Gateway's frontend validation ──▶ Certificates.ports
//!      (frontend_tls.rs): its handshake requires (or asks for) a client certificate
//!  connection to a TCP/UDP service port ──▶ Compiled.tcp_services[port] ──▶ StreamService
//!      (a Gateway TCP/UDP listener's first: gateway_streams[port] of the address's site,
//!      gateway_streams.rs; TCPRoute/UDPRoute weighted shares drawn per connection)
//!  TLS connection on a Gateway TLS listener's port ──▶ tls_routes[port] by server name
//!      (tls_routes.rs) ──▶ Route, passed through or terminated
//! ```
//!
//! Diagnostics carry a [`Severity`]: `Error` (left out or refused), `Unsupported` (input Sluice
//! does not implement), `Missing` (a Service or Secret that does not exist yet), `Difference`
//! (served unlike ingress-nginx), `Notice` (an ingress-nginx trap, reproduced). Nothing an
//! operator wrote is ignored without one.

pub mod access_log;
pub mod affinity;
pub mod auth;
pub mod basic_auth;
pub mod client_cert;
pub mod compiled;
pub mod compression;
pub mod cors;
pub mod custom_headers;
pub mod digest_auth;
pub mod edge;
pub mod endpoints;
pub mod frontend_tls;
pub mod gateway_redirect;
pub mod gateway_status;
pub mod gateway_streams;
mod header_text;
pub mod limits;
pub mod listener_hosts;
pub mod listeners;
pub mod matches;
pub mod mirror;
pub mod names;
pub mod policy;
pub mod pre_routing;
pub mod response_rewrite;
pub mod retry;
pub mod routes;
pub mod server_tls;
pub mod settings;
pub mod sites;
pub mod streams;
pub mod target;
pub mod tls;
pub mod tls_routes;
pub mod upstream_tls;

pub use compiled::{Compiled, Diagnostic, Severity};
pub use endpoints::{
    node_local_reason, Backend, BackendKey, EndpointSet, NodeLocalEndpoints, RefusedEndpoint,
};
pub use matches::{RequestMatch, ValueMatch};
pub use names::{Kind, NamespacedName, ObjectRef};
pub use policy::{
    Access, BodyPolicy, HashBy, HeaderAction, HeaderEdit, ProxyProtocolVersion, Redirect, Rewrite,
    RewriteError, Rewritten, RoutePolicy, SslRedirect, TlsVersions, UpstreamPolicy,
    UpstreamProtocol, UpstreamTls,
};
pub use routes::{Matched, Route, RouteSite, RouteTable, Traffic, Weighted};
pub use settings::{LoadBalance, NextUpstream, Settings};
pub use streams::StreamService;
pub use target::{normalize_path, validate_host, NormalPath, TargetError};
pub use tls::Certificates;
