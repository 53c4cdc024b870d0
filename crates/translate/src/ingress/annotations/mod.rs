//! ingress-nginx's annotations (`nginx.ingress.kubernetes.io/*`, also read under `sluice.dev/`)
//! turned into the route policy model, with ingress-nginx's value rules.
//!
//! ```text
//!  metadata.annotations ─▶ ours? (either prefix) ─▶ REGISTRY: implemented / accepted /
//!      unsupported / unknown ─▶ its entry's Parser, in Parser order ─▶ IngressAnnotations
//!                                 │ bad value ─▶ Error diagnostic, default kept
//!                                 │            (allow/deny lists, snippets: route refused, 503)
//!                                 ├ not implemented but restricts access (modsecurity-snippet,
//!                                 │  …) ─▶ Error diagnostic, route refused, 503
//!                                 └ unsupported / unknown ─▶ Unsupported diagnostic
//! ```
//! An annotation with no effect in Sluice is never silent: it is a diagnostic on its Ingress.
//!
//! Files: `registry.rs` (the entries), `reader.rs` (prefixes, the parser order), one
//! `read_*.rs` per group of parsers (upstream, routing, canary, mirror, cors, access, affinity,
//! limits, response: the redirect and cookie rewrites and custom-headers' reference, auth:
//! external and basic auth, client_cert: auth-tls-*),
//! `snippet.rs` (nginx snippets → header edits), `parsed.rs` (what the reader leaves).

mod parsed;
mod read_access;
mod read_affinity;
mod read_auth;
mod read_canary;
mod read_client_cert;
mod read_cors;
mod read_limits;
mod read_mirror;
mod read_response;
mod read_routing;
mod read_upstream;
mod reader;
mod registry;
mod snippet;
#[cfg(test)]
mod tests;

pub(crate) use read_auth::{read_spec, AuthSource};

pub use parsed::{
    AuthSpec, BackendProtocol, Canary, ClientCertSpec, IngressAnnotations, MirrorAnnotations,
    ProxySsl, UserAuthSpec,
};
pub use reader::parse;
pub(crate) use reader::{go_bool, screen};
pub use registry::{entry, Annotation, Parser, Support, NGINX_PREFIX, REGISTRY, SLUICE_PREFIX};
pub use snippet::translate_snippet;
