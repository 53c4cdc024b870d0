//! A rule's backendRefs: Service ports resolved as every source's are, one route or a
//! weighted split of several; an unusable reference keeps its share, which answers 500.
//!
//! ```text
//!  backendRefs [{ Service, port, weight, namespace (ReferenceGrant) }]
//!      ─▶ backend_or_diagnose ─▶ Route per share (policy: appProtocol h2c ─▶ HTTP/2;
//!         BackendTLSPolicy ─▶ upstream_tls; unusable ─▶ invalid_backend; its own header and
//!         URLRewrite filters on top) ─▶ the first share's
//!         Route + Traffic of the others
//! ```

use std::sync::Arc;

use model::policy::{RoutePolicy, UpstreamProtocol};
use model::routes::{Route, RouteSite, Traffic, Weighted};
use model::{Backend, NamespacedName, ObjectRef, Severity};

use super::objects::HttpBackendRef;
use crate::compiler::Compiler;

impl Compiler<'_> {
    /// A rule's backendRefs: one route, or a weighted split of several. A reference that
    /// cannot be used keeps its share, which answers 500, as Gateway API says.
    /// `prefix`: the match's path prefix, for a backendRef's URLRewrite `ReplacePrefixMatch`.
    pub(super) fn gateway_backends(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        field: &str,
        (refs, prefix): (&[HttpBackendRef], Option<&str>),
        policy: Arc<RoutePolicy>,
        site: RouteSite,
    ) -> Arc<Route> {
        let mut shares: Vec<(u32, Route)> = Vec::new();
        for (b, reference) in refs.iter().enumerate() {
            let at = format!("{field}.backendRefs[{b}]");
            let weight = match reference.weight.unwrap_or(1) {
                weight @ 0..=1_000_000 => weight as u32,
                weight => {
                    self.diagnose(
                        object.clone(),
                        format!("{at}.weight {weight}: must be 0 to 1000000; taken as 0"),
                    );
                    0
                }
            };
            if weight == 0 {
                continue;
            }
            // A TLSRoute has no status code to answer with: its connections are closed.
            let outcome = match object.kind {
                model::Kind::TLSRoute | model::Kind::TCPRoute => "its connections are closed",
                model::Kind::UDPRoute => "its datagrams are dropped",
                _ => "its share answers 500",
            };
            let (service, mut backend, port) =
                self.gateway_backend(key, object, &at, reference, outcome);
            // An unusable reference never has endpoints; its share answers 500.
            let mut policy = match backend.key() {
                Some(_) => self.app_protocol(object, &at, &backend, &policy),
                None => invalid_backend(&policy),
            };
            if policy.invalid_backend {
                // A BackendTLSPolicy that cannot be used: never a connection in cleartext.
                backend = Arc::new(Backend::unresolved());
            }
            if !reference.filters.is_empty() {
                policy = self.backend_filters(object, &at, &reference.filters, &policy, prefix);
            }
            shares.push((
                weight,
                Route {
                    ingress: key.clone(),
                    service,
                    backend,
                    policy,
                    site: RouteSite {
                        service_port: port,
                        ..site.clone()
                    },
                    traffic: None,
                    not_found: false,
                },
            ));
        }
        if shares.is_empty() {
            // No backendRefs, or every weight 0: Gateway API's 500 (unless a filter answers
            // first, as a redirect does).
            return Arc::new(Route {
                ingress: key.clone(),
                service: self.share(""),
                backend: Arc::new(Backend::unresolved()),
                policy: if policy.gateway_redirect.is_some() || policy.denied.is_some() {
                    policy
                } else {
                    invalid_backend(&policy)
                },
                site,
                traffic: None,
                not_found: false,
            });
        }
        let total = (shares.iter()).fold(0u32, |sum, (weight, _)| sum.saturating_add(*weight));
        let mut shares = shares.into_iter();
        let (_, mut first) = shares.next().expect("one share at least");
        let alternatives: Box<[Weighted]> = shares
            .map(|(weight, route)| Weighted {
                weight,
                route: Arc::new(route),
            })
            .collect();
        if !alternatives.is_empty() {
            first.traffic = Some(Box::new(Traffic {
                total,
                alternatives,
                alternative_name: None,
                primary: None,
            }));
        }
        Arc::new(first)
    }

    /// The policy for a share to `backend`, as its Service port's `appProtocol` asks:
    /// `kubernetes.io/h2c` is HTTP/2 in cleartext; TLS to the backend is a BackendTLSPolicy's
    /// (`backend_tls`): without one, an `https` port is spoken to in cleartext (a diagnostic),
    /// and a policy that cannot be used makes the share answer 500.
    pub(super) fn app_protocol(
        &mut self,
        object: &ObjectRef,
        field: &str,
        backend: &Backend,
        policy: &Arc<RoutePolicy>,
    ) -> Arc<RoutePolicy> {
        let found = backend.key().and_then(|key| {
            let spec = self.store.service(&key.service)?.spec.as_ref()?;
            let ports = spec.ports.as_deref()?;
            let port = ports
                .iter()
                .find(|p| p.name.as_deref().unwrap_or_default() == key.port_name)?;
            port.app_protocol.clone()
        });
        let tls = self.backend_tls_for(object, backend);
        // A GRPCRoute's shares speak gRPC (HTTP/2) whatever the port says.
        let grpc = policy.upstream_protocol == UpstreamProtocol::Grpc;
        let policy = match found.as_deref() {
            Some("kubernetes.io/h2c") if !grpc => Arc::new(RoutePolicy {
                upstream_protocol: UpstreamProtocol::Http2,
                ..(**policy).clone()
            }),
            Some(tls_protocol @ ("https" | "kubernetes.io/wss")) if tls.is_none() => {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("{field}: the Service port's appProtocol {tls_protocol} asks for TLS to the backend, which a BackendTLSPolicy targeting the port would configure; there is none, so {} in cleartext is spoken", if grpc { "gRPC" } else { "HTTP/1.1" }),
                );
                policy.clone()
            }
            _ => policy.clone(),
        };
        match tls {
            None => policy,
            Some(Ok(tls)) => Arc::new(RoutePolicy {
                upstream_tls: Some(tls),
                ..(*policy).clone()
            }),
            Some(Err(why)) => {
                self.diagnose(
                    object.clone(),
                    format!("{field}: {why}; its share answers 500"),
                );
                invalid_backend(&policy)
            }
        }
    }

    /// One backendRef: a Service port, resolved as every source's are (`backends.rs`).
    pub(super) fn gateway_backend(
        &mut self,
        key: &NamespacedName,
        object: &ObjectRef,
        field: &str,
        reference: &HttpBackendRef,
        outcome: &str,
    ) -> (Arc<str>, Arc<Backend>, Arc<str>) {
        let service_name = self.share(&reference.name);
        let unresolved = |this: &mut Self, why: String| {
            this.diagnose(object.clone(), format!("{field}: {why}; {outcome}"));
            (
                service_name.clone(),
                Arc::new(Backend::unresolved()),
                this.share(""),
            )
        };
        let group = reference.group.as_deref().unwrap_or("");
        let kind = reference.kind.as_deref().unwrap_or("Service");
        if !group.is_empty() || kind != "Service" {
            return unresolved(
                self,
                format!("{group}/{kind}: Sluice sends to Services only (InvalidKind)"),
            );
        }
        let Some(port) = reference.port else {
            return unresolved(self, "port: required for a Service".to_owned());
        };
        let namespace = reference.namespace.as_deref().unwrap_or(&key.namespace);
        // The grant names the kind of the route that refers (a grant from HTTPRoutes does not
        // let a GRPCRoute in).
        let from = match object.kind {
            model::Kind::TLSRoute => "TLSRoute",
            model::Kind::TCPRoute => "TCPRoute",
            model::Kind::UDPRoute => "UDPRoute",
            model::Kind::GRPCRoute => "GRPCRoute",
            _ => "HTTPRoute",
        };
        if namespace != &*key.namespace
            && !self.granted(
                (from, &key.namespace),
                ("Service", namespace, &reference.name),
            )
        {
            return unresolved(
                self,
                format!("Service {namespace}/{} is in another namespace and no ReferenceGrant there allows it (RefNotPermitted)", reference.name),
            );
        }
        let service = NamespacedName {
            namespace: if namespace == &*key.namespace {
                key.namespace.clone()
            } else {
                self.share(namespace)
            },
            name: service_name.clone(),
        };
        let written = port.to_string();
        let backend = self.refusing_external_names(|this| {
            this.backend_or_diagnose(object, field, &service, (Some(port), &written), outcome)
        });
        (service_name, backend, self.share(&written))
    }
}

/// `policy` for the share of an unusable backendRef (it answers 500).
fn invalid_backend(policy: &Arc<RoutePolicy>) -> Arc<RoutePolicy> {
    Arc::new(RoutePolicy {
        invalid_backend: true,
        ..(**policy).clone()
    })
}
