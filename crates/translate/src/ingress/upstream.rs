//! How an Ingress's routes reach their upstream: the protocol (`backend-protocol`, the Service
//! port's `appProtocol`), TLS to the upstream (`proxy-ssl-*`) and `service-upstream`.

use std::sync::Arc;

use model::compiled::ingress_ref;
use model::policy::{RoutePolicy, UpstreamProtocol, UpstreamTls};
use model::tls::certified_key_from_pem;
use model::{Backend, EndpointSet, NamespacedName};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;

use crate::backends::{self, Problem};
use crate::compiler::Compiler;
use crate::ingress::annotations::{self, BackendProtocol, IngressAnnotations};
use crate::ingress::cross_namespace;

/// How one Ingress's routes reach their endpoints.
pub(crate) struct UpstreamChoice {
    /// `service-upstream`: the Service's cluster IP rather than its endpoints.
    pub(crate) service_upstream: bool,
    /// `backend-protocol`; wins over the Service port's `appProtocol`.
    pub(crate) annotated: Option<BackendProtocol>,
    /// What TLS routes get (`name` empty: the Service's DNS name is filled in).
    pub(crate) settings: UpstreamTls,
}

impl Compiler<'_> {
    /// The policy a route to this Service port gets: the protocol and `UpstreamTls` that
    /// `backend-protocol` says, or, without the annotation, the port's `appProtocol`: `https`
    /// and `kubernetes.io/wss` are HTTP/1.1 over TLS, `kubernetes.io/h2c` HTTP/2 in cleartext.
    /// A gRPC route's request bodies stream (nginx's `grpc_pass` never buffers them: a
    /// client-streaming call may never end on its own).
    pub(crate) fn upstream_protocol(
        &mut self,
        service: &NamespacedName,
        ingress: &NamespacedName,
        number: Option<i32>,
        written: &str,
        policy: Arc<RoutePolicy>,
        choice: &UpstreamChoice,
    ) -> Arc<RoutePolicy> {
        let chosen = match choice.annotated {
            Some(chosen) => chosen,
            None => {
                // The same port the backend resolves to (a problem there is its diagnostic).
                let app_protocol = backends::service_port(self.store, service, number, written)
                    .ok()
                    .and_then(|port| port.app_protocol.clone());
                let (protocol, tls) = match app_protocol.as_deref() {
                    Some(p) if p.eq_ignore_ascii_case("https") || p == "kubernetes.io/wss" => {
                        (UpstreamProtocol::Http1, true)
                    }
                    Some("kubernetes.io/h2c") => (UpstreamProtocol::Http2, false),
                    _ => (UpstreamProtocol::Http1, false),
                };
                BackendProtocol { protocol, tls }
            }
        };
        if (chosen.protocol.is_http1() && !chosen.tls) || policy.denied.is_some() {
            return policy;
        }
        let key = (
            ingress.clone(),
            Arc::as_ptr(&policy) as usize,
            service.clone(),
            chosen,
        );
        if let Some(found) = self.tls_policies.get(&key) {
            return found.clone();
        }
        let upstream_tls = chosen.tls.then(|| {
            let mut settings = choice.settings.clone();
            if settings.name.is_empty() {
                settings.name = format!("{}.{}.svc", service.name, service.namespace);
            }
            Arc::new(settings)
        });
        let mut changed = RoutePolicy {
            upstream_protocol: chosen.protocol,
            upstream_tls,
            ..(*policy).clone()
        };
        if chosen.protocol == UpstreamProtocol::Grpc {
            changed.body.request_buffering = false;
        }
        let changed = Arc::new(changed);
        // The key's pointer stays valid for the whole compile: the policy is held by this
        // Ingress's routes, so no other policy can take its address.
        self.tls_policies.insert(key, changed.clone());
        changed
    }

    /// The `UpstreamTls` of an Ingress's TLS routes, with `proxy-ssl-secret` read. A Secret
    /// that cannot be used refuses the Ingress's routes (503), as ingress-nginx denies them:
    /// serving without its CA or client certificate would drop a security setting.
    pub(crate) fn upstream_tls(
        &mut self,
        ingress: &NamespacedName,
        parsed: &mut IngressAnnotations,
    ) -> UpstreamTls {
        let ssl = &parsed.proxy_ssl;
        let mut tls = UpstreamTls {
            verify: ssl.verify,
            verify_depth: ssl.verify_depth,
            name: ssl.name.clone().unwrap_or_default(),
            server_name: ssl.server_name,
            versions: ssl.versions,
            secret: None,
            trusted: Vec::new(),
            client_cert: None,
            subject_alt_names: Vec::new(),
            system_roots: false,
        };
        let Some(written) = ssl.secret.clone() else {
            return tls;
        };
        tls.secret = Some(written.clone());
        let result = self
            .proxy_ssl_secret(ingress, &written)
            .and_then(|(trusted, client)| {
                if tls.verify && trusted.is_empty() {
                    return Err(Problem::invalid(
                        "proxy-ssl-verify is on but the Secret has no data.ca.crt to verify with",
                    ));
                }
                Ok((trusted, client))
            });
        match result {
            Ok((trusted, client)) => {
                tls.trusted = trusted;
                tls.client_cert = client;
            }
            Err(why) => {
                self.diagnose_with(
                    why.severity(),
                    ingress_ref(ingress),
                    format!("annotation {}proxy-ssl-secret: Secret {written}: {why}; the Ingress's routes answer 503 until it is fixed (as in ingress-nginx)", annotations::NGINX_PREFIX),
                );
                parsed.policy.denied = Some(format!("proxy-ssl-secret {written} cannot be used"));
            }
        }
        tls
    }

    /// `proxy-ssl-secret`: `ca.crt` (trusted certificates) and `tls.crt` + `tls.key` (the
    /// client certificate), either or both. Only a Secret of the Ingress's own namespace.
    pub(crate) fn proxy_ssl_secret(
        &self,
        ingress: &NamespacedName,
        written: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, Option<Arc<CertifiedKey>>), Problem> {
        let Some((namespace, name)) = written.split_once('/') else {
            return Err(Problem::invalid("expected namespace/name"));
        };
        cross_namespace::check(&self.out.settings, "Secret", namespace, &ingress.namespace)
            .map_err(Problem::invalid)?;
        let found = self
            .store
            .secret(&NamespacedName::new(namespace, name))
            .ok_or_else(|| Problem::missing("not found"))?;
        let data = found.data.as_ref();
        let field = |name: &str| {
            data.and_then(|d| d.get(name))
                .map(|b| b.0.as_slice())
                .filter(|b| !b.is_empty())
        };
        let trusted = match field("ca.crt") {
            None => Vec::new(),
            Some(pem) => {
                trust_anchors(pem).map_err(|e| Problem::invalid(format!("data.ca.crt: {e}")))?
            }
        };
        let client = match (field("tls.crt"), field("tls.key")) {
            (Some(cert), Some(key)) => {
                Some(certified_key_from_pem(cert, key).map_err(Problem::invalid)?)
            }
            (None, None) => None,
            _ => {
                return Err(Problem::invalid(
                    "data.tls.crt and data.tls.key must be given together",
                ))
            }
        };
        if trusted.is_empty() && client.is_none() {
            return Err(Problem::invalid(
                "neither data.ca.crt nor data.tls.crt and data.tls.key",
            ));
        }
        Ok((trusted, client))
    }

    /// `service-upstream`: one endpoint, the Service's cluster IP and port.
    pub(crate) fn cluster_ip_backend(
        &mut self,
        service: &NamespacedName,
        number: Option<i32>,
        written: &str,
    ) -> Result<Arc<Backend>, String> {
        let port =
            backends::service_port(self.store, service, number, written).map_err(|p| p.text)?;
        let key = backends::key_of(service, port);
        if let Some(backend) = self.out.service_upstreams.get(&key) {
            return Ok(backend.clone());
        }
        let found = self.store.service(service).ok_or("Service not found")?;
        let spec = found.spec.as_ref().ok_or("the Service has no spec")?;
        let ip: std::net::IpAddr = spec
            .cluster_ip
            .as_deref()
            .and_then(|ip| ip.parse().ok())
            .ok_or("the Service has no cluster IP (headless?)")?;
        let port = u16::try_from(port.port).map_err(|_| "no such port")?;
        let endpoints = EndpointSet {
            ready: vec![std::net::SocketAddr::new(ip, port)],
            ..EndpointSet::default()
        };
        let backend = Arc::new(Backend::new(key.clone(), endpoints));
        self.out.service_upstreams.insert(key, backend.clone());
        Ok(backend)
    }
}

/// The CA certificates of a PEM bundle (a `ca.crt`), checked the way the proxy's verifier
/// will use them, so that it cannot fail there.
pub(crate) fn trust_anchors(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE block found".to_owned());
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in &certs {
        roots
            .add(cert.clone())
            .map_err(|e| format!("a certificate that cannot be a trust anchor: {e}"))?;
    }
    Ok(certs)
}
