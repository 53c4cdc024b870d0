//! Sluice's model: the Kubernetes objects it reads, the Store that holds them, and the pure
//! `compile()` that turns them into what the proxy serves. No sockets, no runtime, no clock.
//!
//! ```text
//!  YAML/JSON text ──parse_documents──▶ Object ──Store::apply/replace_all──▶ Store ──▶ ChangeSet
//!                                                                             │
//!            ChangeSet.config ──▶ compile(&Store, &CompileOptions) ──▶ Compiled { routes,
//!                                                                     backends, certificates,
//!                                                                     settings, diagnostics }
//!                 ConfigMap ──▶ Settings ──▶ RoutePolicy (the default, shared)
//!                 Ingress annotations ──annotations::parse──▶ RoutePolicy per Ingress
//!                 every Route = { match (path, regex), policy, backend }
//!            ChangeSet.endpoints ──▶ Compiled::refresh_endpoints ──▶ Backend endpoint swap
//!            TCP/UDP services ConfigMaps ──streams──▶ Compiled.tcp_services, udp_services
//!                                                     (port ─▶ Backend)
//!
//!  request ──▶ validate_host, normalize_path ──▶ Compiled.routes.route(host, path) ──▶ Route
//!          ──▶ route.policy (access, redirect, rewrite, headers, body, upstream)
//!          ──▶ Backend::endpoints()
//! ```
//!
//! Diagnostics carry a [`Severity`]: `Error` (left out or refused), `Unsupported` (input Sluice
//! does not implement), `Missing` (a Service or Secret that does not exist yet), `Difference`
//! (served unlike ingress-nginx), `Notice` (an ingress-nginx trap, reproduced). Nothing an operator wrote is ignored without one.

pub mod access_log;
pub mod annotations;
pub mod compile;
pub mod endpoints;
pub mod objects;
pub mod policy;
pub mod routes;
pub mod settings;
pub mod store;
pub mod streams;
pub mod target;
pub mod tls;

pub use compile::{compile, CompileOptions, Compiled, Diagnostic, Severity};
pub use endpoints::{
    node_local_reason, Backend, BackendKey, EndpointSet, NodeLocalEndpoints, RefusedEndpoint,
};
pub use objects::{parse_documents, Documents, Kind, Object, ObjectRef, ParseError};
pub use policy::{
    Access, BodyPolicy, HashBy, HeaderAction, HeaderEdit, ProxyProtocolVersion, Redirect, Rewrite,
    RewriteError, Rewritten, RoutePolicy, SslRedirect, TlsVersions, UpstreamPolicy,
    UpstreamProtocol, UpstreamTls,
};
pub use routes::{Matched, Route, RouteSite, RouteTable};
pub use settings::{LoadBalance, NextUpstream, Settings};
pub use store::{ChangeSet, NamespacedName, Store};
pub use streams::StreamService;
pub use target::{normalize_path, validate_host, NormalPath, TargetError};
pub use tls::Certificates;
