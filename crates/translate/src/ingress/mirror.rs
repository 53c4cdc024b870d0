//! The mirror of an Ingress's routes (`mirror-target`, `mirror-host`, `mirror-request-body`):
//! where the copies go, resolved here so the proxy never resolves a name.
//!
//! ```text
//!  target host ─▶ IP address ─▶ a backend of that one endpoint, among the configuration's
//!                               backends (`/mirror-target:ADDR:PORT`) so its connections are
//!                               pooled (refused in Kubernetes mode when it is the node
//!                               itself, as EndpointSlice addresses are)
//!              ─▶ <name>.<namespace>.svc[.cluster.local] ─▶ that Service port's backend (the
//!                               port written in the URL, else 80/443), endpoints kept current
//!                               by the fast path like any route's
//!              ─▶ any other name ─▶ a backend of the addresses the control plane's resolver
//!                               finds for it (`BackendKey::named`; ingress-nginx asks its
//!                               DNS resolver per request, Sluice never on the request path);
//!                               no DNS-1123 name ─▶ not mirrored, a diagnostic
//! ```
//! As in ingress-nginx the mirror covers every path of the Ingress (its canary-routed
//! requests too: a canary takes the main Ingress's policy).

use std::net::SocketAddr;
use std::sync::Arc;

use model::mirror::{Mirror, MirrorHost, MirrorTarget, MirrorUri};
use model::policy::{TlsVersions, UpstreamTls};
use model::{
    node_local_reason, Backend, BackendKey, EndpointSet, NamespacedName, NodeLocalEndpoints,
    ObjectRef, Severity,
};

use crate::compiler::Compiler;
use crate::ingress::annotations::IngressAnnotations;

impl Compiler<'_> {
    /// Fills `parsed.policy.mirror` from the mirror annotations, or leaves a diagnostic.
    pub(crate) fn mirror_phase(&mut self, object: &ObjectRef, parsed: &mut IngressAnnotations) {
        let Some(read) = parsed.mirror.take() else {
            return;
        };
        let (key, written, target) = (&read.key, &read.written, &read.target);
        let Some((backend, upstream_name)) = self.url_backend(
            object,
            &format!("annotation {key}"),
            written,
            target,
            UrlUse {
                kind: "mirror-target",
                outcome: "not mirrored",
                name_severity: Severity::Unsupported,
            },
        ) else {
            return;
        };
        let uri = match &target.uri {
            Some(uri) => uri.clone(),
            None => {
                self.diagnose_with(
                    Severity::Difference,
                    object.clone(),
                    format!("annotation {key}: {written:?} has no path: ingress-nginx sends its internal path /_mirror-<Ingress UID> (with the client's query), Sluice sends / with it; add $request_uri to send the client's"),
                );
                MirrorUri::Fixed("/".to_owned())
            }
        };
        // nginx's `proxy_pass https://` defaults: no verification, no SNI.
        let tls = target.https.then(|| {
            Arc::new(UpstreamTls {
                verify: false,
                verify_depth: 1,
                name: target.host.clone(),
                server_name: false,
                versions: TlsVersions::ALL,
                secret: None,
                trusted: Vec::new(),
                client_cert: None,
                subject_alt_names: Vec::new(),
                system_roots: false,
            })
        });
        parsed.policy.mirror = Some(Arc::new(Mirror {
            target: written.clone(),
            host: read.host.clone(),
            uri,
            request_body: read.request_body,
            upstream_name,
            backend,
            tls,
            http2: false,
            share: None,
            also: None,
        }));
    }

    /// Where a URL annotation (`mirror-target`, `auth-url`) sends requests: an address (a
    /// backend of that one endpoint, `/<kind>:ADDR:PORT`) or a Service port; `None` after a
    /// diagnostic ending in `outcome`. `key` names the source (`annotation …`, `data.…`).
    pub(crate) fn url_backend(
        &mut self,
        object: &ObjectRef,
        key: &str,
        written: &str,
        target: &MirrorTarget,
        how: UrlUse<'_>,
    ) -> Option<(Arc<Backend>, Arc<str>)> {
        let UrlUse {
            kind,
            outcome,
            name_severity,
        } = how;
        match target.host_kind() {
            MirrorHost::Address(ip) => {
                let addr = SocketAddr::new(ip, target.port);
                let refused = self.out.node_local_endpoints == NodeLocalEndpoints::Refuse;
                if let Some(why) = node_local_reason(ip).filter(|_| refused) {
                    self.diagnose(
                        object.clone(),
                        format!("{key}: {written:?}: {why}, refused in Kubernetes mode as an endpoint would be; {outcome}"),
                    );
                    return None;
                }
                let endpoints = EndpointSet {
                    ready: vec![addr],
                    ..EndpointSet::default()
                };
                // Kept with the configuration's backends, so that the worker's pool keeps
                // connections to it (it pools only endpoints of those). No Service has an
                // empty namespace: the key meets no other.
                let key = BackendKey {
                    service: NamespacedName::new("", kind),
                    port_name: addr.to_string(),
                };
                let backend = self
                    .out
                    .backends
                    .entry(key.clone())
                    .or_insert_with(|| Arc::new(Backend::new(key, endpoints)))
                    .clone();
                Some((backend, Arc::from(addr.to_string())))
            }
            MirrorHost::Service { namespace, name } => {
                let service = NamespacedName::new(namespace, name);
                let port = i32::from(target.port);
                match self.resolve_backend(&service, Some(port), &port.to_string()) {
                    Ok(backend) => {
                        let name = backend
                            .key()
                            .map_or_else(|| service.to_string(), ToString::to_string);
                        Some((backend, Arc::from(name)))
                    }
                    Err(why) => {
                        self.diagnose_with(
                            why.severity(),
                            object.clone(),
                            format!("{key}: {written:?}: {why}; {outcome}"),
                        );
                        None
                    }
                }
            }
            MirrorHost::Name => {
                // A URL's host is case-insensitive; names are asked and keyed in lower case.
                let host = target.host.to_ascii_lowercase();
                if let Err(why) = crate::backends::check_external_name(&host) {
                    self.diagnose_with(
                        name_severity,
                        object.clone(),
                        format!(
                            "{key}: {written:?}: the host {:?} {why}; {outcome}",
                            target.host
                        ),
                    );
                    return None;
                }
                // Dialled at the addresses the control plane's resolver finds for it (none
                // until it has answered), never resolved on the request path.
                let key = BackendKey::named(&host, target.port);
                let policy = self.out.node_local_endpoints;
                let backend =
                    crate::backends::backend(self.store, &key, policy, &mut self.out.backends);
                Some((backend, Arc::from(format!("{host}:{}", target.port))))
            }
        }
    }
}

/// What a URL annotation's destination is for, in `Compiler::url_backend`.
pub(crate) struct UrlUse<'a> {
    /// The annotation, naming an address's backend (`/<kind>:ADDR:PORT`).
    pub(crate) kind: &'a str,
    /// How a diagnostic ends: what happens instead.
    pub(crate) outcome: &'a str,
    /// A host that is no name to resolve: Unsupported when the annotation is dropped, Error
    /// when the routes are refused.
    pub(crate) name_severity: Severity,
}
