//! Client certificates (`auth-tls-*`): the Secret read into CAs, and ingress-nginx's rule that
//! the first Ingress of a host that sets them decides for the whole host (its `server`), other
//! Ingresses' paths included; or, with `sluice.dev/auth-tls-scope: path`, the Ingress's own
//! paths only.
//!
//! ```text
//!  ClientCertSpec ─Secret ca.crt (+ ca.crl)─▶ ClientCertPolicy │ missing, no ca.crt, bad PEM ─▶
//!     the routes refused (503; scope host: every route of the host)
//!  scope host: the route policy of every path of the host (the oldest Ingress's; a newer
//!     one's rules are ignored, a diagnostic each) │ scope path: the Ingress's paths only
//!  any rule asking for a certificate ─▶ HostTls.client_cert_request for the host (its
//!     handshake alone asks for a certificate, naming the CAs); rules without host: the
//!     catch-all's handshake (no SNI, or one naming no host: nginx's default server `_`)
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;

use model::client_cert::{ClientCa, ClientCertPolicy, Scope, VerifyClient};
use model::compiled::ingress_ref;
use model::routes::HostPattern;
use model::tls::HostTls;
use model::{Diagnostic, NamespacedName, ObjectRef, Severity};

use super::annotations::IngressAnnotations;
use crate::compiler::Compiler;
use crate::ingress::roots::routes_of_server;

impl Compiler<'_> {
    /// Reads the Secret of `auth-tls-secret` into the Ingress's policy, or refuses the
    /// routes (scope host: every route of its hosts, as ingress-nginx denies the server).
    pub(crate) fn client_cert_phase(
        &mut self,
        name: &NamespacedName,
        object: &ObjectRef,
        parsed: &mut IngressAnnotations,
    ) {
        let Some(spec) = parsed.client_cert.take() else {
            return;
        };
        let (ns, secret_name) = &spec.secret;
        let key = &spec.key;
        let ca = match self
            .store
            .secret(&NamespacedName::new(ns.as_str(), secret_name.as_str()))
        {
            None => Err((
                Severity::Missing,
                format!("Secret {ns}/{secret_name} not found"),
            )),
            Some(secret) => {
                let data = secret.data.clone().unwrap_or_default();
                match data.get("ca.crt") {
                    None => Err((Severity::Error, format!("Secret {ns}/{secret_name} has no key ca.crt (ingress-nginx would serve the host without client certificates)"))),
                    Some(ca) => ClientCa::from_pem(
                        format!("{ns}/{secret_name}"),
                        &ca.0,
                        data.get("ca.crl").map(|crl| crl.0.as_slice()),
                        model::tls::crypto_provider().clone(),
                    )
                    .map_err(|why| (Severity::Error, format!("Secret {ns}/{secret_name}: {why}"))),
                }
            }
        };
        let ca = match ca {
            Ok(ca) => ca,
            Err((severity, why)) => {
                let whom = match spec.scope {
                    Scope::Host => "every route of the Ingress's hosts, other Ingresses' too,",
                    Scope::Path => "the Ingress's routes",
                };
                self.diagnose_with(
                    severity,
                    object.clone(),
                    format!(
                        "{key}: {why}; {whom} answer 503 (client certificates are never dropped)"
                    ),
                );
                let reason = format!("{key} cannot be used");
                if spec.scope == Scope::Host {
                    parsed.hosts_refused = Some(reason.clone());
                }
                parsed.policy.denied = Some(reason);
                return;
            }
        };
        parsed.policy.client_cert = Some(Arc::new(ClientCertPolicy {
            ca: Arc::new(ca),
            verify: spec.verify,
            depth: spec.depth,
            error_page: spec.error_page,
            pass_certificate: spec.pass_certificate,
            match_cn: spec.match_cn,
            scope: spec.scope,
            ingress: name.to_string(),
        }));
    }

    /// Records an Ingress's client certificate rules for one of its hosts.
    pub(crate) fn host_client_cert(
        &mut self,
        ingress: &NamespacedName,
        host: &HostPattern,
        parsed: &IngressAnnotations,
    ) {
        let Some(policy) = &parsed.policy.client_cert else {
            return;
        };
        let entry = self.hosts.client_certs.entry(host.clone()).or_default();
        if policy.scope == Scope::Host {
            match &entry.host {
                None => entry.host = Some((policy.clone(), ingress.clone())),
                Some((_, first)) if first != ingress => {
                    entry.ignored.push(ingress.clone());
                    return;
                }
                Some(_) => {}
            }
        }
        if policy.verify != VerifyClient::Off {
            entry.names.extend(policy.ca.names().iter().cloned());
        }
    }

    /// Once every Ingress is in: the host's rules on every path of the host, and the hosts'
    /// handshakes.
    pub(crate) fn client_cert_hosts(&mut self) {
        let hosts = std::mem::take(&mut self.hosts.client_certs);
        let host_default = self.host_default.clone();
        let mut diagnostics = Vec::new();
        for (host, certs) in hosts {
            if let Some((policy, owner)) = &certs.host {
                for ignored in &certs.ignored {
                    diagnostics.push(Diagnostic::new(
                        ingress_ref(ignored),
                        format!("host {host}: auth-tls-* ignored: Ingress {owner} is older and its client certificate rules apply to the whole host (as in ingress-nginx; sluice.dev/auth-tls-scope: path limits an Ingress's rules to its own paths)"),
                    ));
                }
                if self.out.routes.host(&host).is_some() {
                    let routes = self.out.routes.host_mut(&host);
                    let mut told = BTreeSet::new();
                    // The root too: nginx asks at the server, for every request of the host.
                    let every = routes_of_server(routes, &host_default);
                    for route in every {
                        let own = route.policy.client_cert.as_ref();
                        if own.is_some_and(|p| p.scope == Scope::Path || Arc::ptr_eq(p, policy)) {
                            continue;
                        }
                        let ingress = &route.ingress;
                        let told_already = ingress == owner || certs.ignored.contains(ingress);
                        if !told_already && told.insert(ingress.clone()) {
                            diagnostics.push(Diagnostic::with_severity(
                                Severity::Notice,
                                ingress_ref(ingress),
                                format!("host {host}: this Ingress's paths require the client certificates of Ingress {owner} (its auth-tls-secret applies to the whole host, as in ingress-nginx; sluice.dev/auth-tls-scope: path on it would keep them to its own paths)"),
                            ));
                        }
                        let mut changed = (*route.policy).clone();
                        changed.client_cert = Some(policy.clone());
                        *route = Arc::new(route.with_policy(Arc::new(changed)));
                    }
                }
            }
            if certs.names.is_empty() {
                continue;
            }
            // Rules without host: the catch-all's handshake (ingress-nginx's default server
            // `_`, whose ssl_verify_client the first such Ingress sets), the one a client
            // gets when its SNI names no host, or when it sends none.
            self.out.certificates.set_host_tls(
                &host,
                HostTls {
                    alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
                    client_cert_request: Some(certs.names.into_iter().collect()),
                    client_cert_required: None,
                    ciphers: None,
                },
            );
        }
        self.out.diagnostics.extend(diagnostics);
    }
}
