//! Translation: the Kubernetes objects Sluice reads, the Store that holds them, and the pure
//! `compile()` that turns one snapshot of them into the model the proxy serves. No sockets, no
//! runtime, no clock it is not given.
//!
//! ```text
//!  YAML/JSON text ──parse_documents──▶ Object ──Store::apply/replace_all──▶ Store ──▶ ChangeSet
//!  kube watcher ─────────────────────▶ Object ──┘                             │
//!                                                                             ▼
//!   ChangeSet.config ──▶ compile(&Store, &CompileOptions) ──▶ model::Compiled { routes,
//!                           │                                 backends, certificates,
//!                           │                                 settings, diagnostics }
//!        compiler:   the state a compile builds (options, output, shared strings), below
//!                    every source's translation
//!        configmap:  ConfigMap ──▶ Settings ──▶ RoutePolicy (the default, shared)
//!        config_headers: proxy-set-headers / add-headers ConfigMaps ──▶ the default
//!                    policy's header edits, first in every route's
//!        ingress/:   Ingress spec + annotations (one registry) ──▶ RoutePolicy, Routes
//!        gateway/:   GatewayClass, Gateway listeners, HTTPRoutes, GRPCRoutes ──▶ the same model (rules
//!                    per listener and host, weighted backends, filters as policy blocks),
//!                    and their status as data (Compiled.gateway_status)
//!        backends:   Service + port ──▶ BackendKey ──▶ Backend with its EndpointSlices, or
//!                    an ExternalName Service's resolved addresses (one function for every
//!                    source)
//!        streams:    TCP/UDP services ConfigMaps ──▶ Compiled.tcp_services, udp_services
//!                    (Gateway TCPRoutes/UDPRoutes ──▶ the same StreamService per site and
//!                    port, gateway/stream_route.rs ──▶ Compiled.gateway_streams)
//!        tls:        Secrets ──▶ certificates
//!        to_gateway: served Ingresses ──▶ Gateway API objects + gaps (`sluice migrate
//!                    --to gateway-api`; not part of a compile)
//!   ChangeSet.endpoints ──▶ backends::refresh_endpoints ──▶ Backend endpoint swap (no compile)
//!   Compiled ──backends::names_to_resolve──▶ ExternalNames ──(a resolver, elsewhere)──▶
//!     Store::set_resolved(name, addresses) ──▶ ChangeSet.endpoints (the same fast path)
//! ```
//!
//! Bad input never fails a compile: it becomes a [`Diagnostic`] on the object (see
//! [`model::Severity`]) and is left out, so one broken Ingress never takes the others down.

pub mod backends;
pub mod compile;
mod compiler;
mod config_headers;
pub mod configmap;
pub mod gateway;
pub mod ingress;
mod meta;
pub mod objects;
mod openssl_ciphers;
pub mod store;
pub mod streams;
pub mod tls;
pub mod to_gateway;

pub use backends::{names_to_resolve, refresh_endpoints};
pub use compile::{compile, compile_reusing, CompileOptions};
pub use gateway::{FragmentCounts, Fragments};
pub use model::{Compiled, Diagnostic, Severity};
pub use objects::{parse_documents, Documents, Object, ParseError};
pub use store::{ChangeSet, Store};
