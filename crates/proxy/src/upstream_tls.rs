//! TLS towards endpoints (`backend-protocol: HTTPS`): one rustls client configuration per
//! distinct `UpstreamTls` of the route policies, per worker.
//!
//! ```text
//!  route.policy.upstream_tls (Arc, rebuilt by every compile)
//!    ─▶ by pointer: the worker's TlsClient for it (a hash lookup per request)
//!       └ unknown pointer ─▶ by value: the TlsClient of an equal UpstreamTls (a recompile
//!         that changed nothing keeps its sessions) ─▶ else a new ClientConfig
//!  TlsClient { id, config (its session cache: resumption across pooled connections),
//!              config_h2 (the same offering ALPN h2, for HTTP/2 and gRPC routes), name }
//!    ─▶ the pool keys idle connections by (endpoint, id): a connection made with one TLS
//!       setting (or none) is never reused for a route with another
//! ```
//!
//! Verification follows nginx: off by default (any certificate is accepted, as
//! `proxy_ssl_verify off`, but the handshake's signatures are still checked); on, the chain
//! must lead to the Secret's `ca.crt` through at most `proxy-ssl-verify-depth` intermediates
//! and name `proxy-ssl-name` (else `<service>.<namespace>.svc`). A BackendTLSPolicy's settings
//! are the same with verification on, SNI on, no depth limit, its `wellKnownCACertificates:
//! System` as Mozilla's roots (compiled in), and its `subjectAltNames`, when any, in place of
//! the name: the certificate must carry one of them (a DNS name, or a URI compared whole).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Weak};

use model::upstream_tls::SubjectAltName;
use model::UpstreamTls;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How many route TLS settings a worker remembers before it forgets the ones no route holds.
const MAX_REMEMBERED: usize = 256;

/// One worker's TLS client configurations. Only that worker's thread touches it.
#[derive(Default)]
pub(crate) struct TlsClients {
    /// `Arc<UpstreamTls>` address → its client. The `Weak` keeps the allocation (not the
    /// value) alive, so an address is never reused for another value while it is here.
    by_address: HashMap<usize, (Weak<UpstreamTls>, Rc<TlsClient>)>,
    /// Distinct values, for settings a recompile made again.
    by_value: Vec<Rc<TlsClient>>,
    /// Never reused, so an idle connection of a forgotten client matches no later one.
    last_id: u64,
}

/// What a TLS connection to an endpoint is made with.
pub(crate) struct TlsClient {
    /// Part of the pool key (0 is plain TCP).
    pub(crate) id: u64,
    pub(crate) settings: Arc<UpstreamTls>,
    pub(crate) config: Arc<ClientConfig>,
    /// The same, offering ALPN `h2`, for HTTP/2 and gRPC routes (`config` offers no ALPN:
    /// an HTTP/1.1 route must not be answered in HTTP/2).
    pub(crate) config_h2: Arc<ClientConfig>,
    /// Verified in the certificate; sent as SNI when `proxy-ssl-server-name` is on.
    pub(crate) name: ServerName<'static>,
}

/// A configuration that rustls refuses (a CA certificate webpki cannot use, say).
#[derive(Debug, thiserror::Error)]
#[error("upstream TLS settings cannot be used")]
pub(crate) struct TlsSetupError(#[source] pub(crate) rustls::Error);

impl TlsClients {
    /// The client for a route's TLS settings.
    pub(crate) fn get(&mut self, tls: &Arc<UpstreamTls>) -> Result<Rc<TlsClient>, TlsSetupError> {
        let address = Arc::as_ptr(tls) as usize;
        if let Some((_, client)) = self.by_address.get(&address) {
            return Ok(client.clone());
        }
        let client = match self.by_value.iter().find(|c| *c.settings == **tls) {
            Some(client) => client.clone(),
            None => {
                self.last_id += 1;
                // Its own copy: holding the route's `Arc` would keep that entry from ever
                // being forgotten.
                let settings = Arc::new(UpstreamTls::clone(tls));
                let client = Rc::new(TlsClient::new(self.last_id, settings)?);
                self.by_value.push(client.clone());
                client
            }
        };
        if self.by_address.len() >= MAX_REMEMBERED {
            self.forget_unused();
        }
        self.by_address
            .insert(address, (Arc::downgrade(tls), client.clone()));
        Ok(client)
    }

    /// Drops the entries of settings no route holds any more, and the clients only they used.
    fn forget_unused(&mut self) {
        self.by_address
            .retain(|_, (settings, _)| settings.strong_count() > 0);
        let used: std::collections::HashSet<u64> =
            self.by_address.values().map(|(_, c)| c.id).collect();
        self.by_value.retain(|c| used.contains(&c.id));
    }
}

impl TlsClient {
    fn new(id: u64, settings: Arc<UpstreamTls>) -> Result<TlsClient, TlsSetupError> {
        let provider = model::tls::crypto_provider().clone();
        let mut versions = Vec::new();
        if settings.versions.tls13 {
            versions.push(&rustls::version::TLS13);
        }
        if settings.versions.tls12 {
            versions.push(&rustls::version::TLS12);
        }
        let verifier: Arc<dyn ServerCertVerifier> = if settings.verify {
            let mut roots = RootCertStore::empty();
            for cert in &settings.trusted {
                roots.add(cert.clone()).map_err(TlsSetupError)?;
            }
            if settings.system_roots {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            }
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| TlsSetupError(rustls::Error::General(e.to_string())))?;
            Arc::new(Verified {
                webpki,
                depth: settings.verify_depth,
                trusted: settings.trusted.clone(),
                subject_alt_names: settings.subject_alt_names.clone(),
            })
        } else {
            // nginx's `proxy_ssl_verify off`.
            Arc::new(model::tls::AcceptAnyCertificate(provider.clone()))
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(TlsSetupError)?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match &settings.client_cert {
            Some(key) => builder.with_client_cert_resolver(Arc::new(
                rustls::sign::SingleCertAndKey::from(key.clone()),
            )),
            None => builder.with_no_client_auth(),
        };
        config.enable_sni = settings.server_name;
        let name = ServerName::try_from(settings.name.clone())
            .map_err(|e| TlsSetupError(rustls::Error::General(e.to_string())))?;
        let mut config_h2 = config.clone();
        config_h2.alpn_protocols = vec![b"h2".to_vec()];
        Ok(TlsClient {
            id,
            settings,
            config: Arc::new(config),
            config_h2: Arc::new(config_h2),
            name,
        })
    }
}

/// `proxy-ssl-verify on`: webpki against the Secret's CA, then nginx's depth limit.
#[derive(Debug)]
struct Verified {
    webpki: Arc<WebPkiServerVerifier>,
    depth: u32,
    trusted: Vec<CertificateDer<'static>>,
    /// BackendTLSPolicy's: when any, one of them authenticates the endpoint, not the name.
    subject_alt_names: Vec<SubjectAltName>,
}

impl Verified {
    /// The chain verified and one of `subject_alt_names` found in the certificate.
    fn verify_alt_names(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut last = None;
        for wanted in &self.subject_alt_names {
            let SubjectAltName::Hostname(name) = wanted else {
                continue;
            };
            let Ok(name) = ServerName::try_from(name.as_str()) else {
                continue;
            };
            match (self.webpki).verify_server_cert(
                end_entity,
                intermediates,
                &name,
                ocsp_response,
                now,
            ) {
                Ok(verified) => return Ok(verified),
                Err(error) => last = Some(error),
            }
        }
        let uris: Vec<&str> = (self.subject_alt_names.iter())
            .filter_map(|san| match san {
                SubjectAltName::Uri(uri) => Some(uri.as_str()),
                SubjectAltName::Hostname(_) => None,
            })
            .collect();
        if !uris.is_empty() {
            // webpki checks the chain before the name: a name error says the chain is good,
            // and the URI is then looked for in the certificate itself.
            let chain = (self.webpki).verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            );
            let chain_ok = match chain {
                Ok(verified) => Some(verified),
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                )) => Some(ServerCertVerified::assertion()),
                Err(error) => {
                    last = Some(error);
                    None
                }
            };
            if let Some(verified) = chain_ok {
                let names = model::upstream_tls::uri_names(end_entity.as_ref());
                if names.iter().any(|n| uris.contains(&n.as_str())) {
                    return Ok(verified);
                }
                last = Some(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName,
                ));
            }
        }
        Err(last.unwrap_or(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName,
        )))
    }
}

impl ServerCertVerifier for Verified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = if self.subject_alt_names.is_empty() {
            (self.webpki).verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            )?
        } else {
            self.verify_alt_names(end_entity, intermediates, server_name, ocsp_response, now)?
        };
        // OpenSSL's depth: how many CA certificates may stand between the endpoint's
        // certificate and the trust anchor. A server that also sends the anchor is not
        // counted for it.
        let untrusted = intermediates
            .iter()
            .filter(|cert| !self.trusted.iter().any(|t| t.as_ref() == cert.as_ref()))
            .count();
        if untrusted > self.depth as usize {
            return Err(rustls::Error::General(format!(
                "the certificate chain has {untrusted} intermediate certificates, more than proxy-ssl-verify-depth {}",
                self.depth
            )));
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(server_name: bool) -> Arc<UpstreamTls> {
        Arc::new(UpstreamTls {
            verify: false,
            verify_depth: 1,
            name: "web.default.svc".into(),
            server_name,
            versions: model::TlsVersions::ALL,
            secret: None,
            trusted: Vec::new(),
            client_cert: None,
            subject_alt_names: Vec::new(),
            system_roots: false,
        })
    }

    #[test]
    fn equal_settings_share_a_client_and_forgotten_ids_are_not_reused() {
        let mut clients = TlsClients::default();
        let first = settings(false);
        let client = clients.get(&first).unwrap();
        assert!(Rc::ptr_eq(&client, &clients.get(&first).unwrap()));
        // A recompile makes an equal value in a new allocation: the same client (and sessions).
        let recompiled = settings(false);
        assert!(Rc::ptr_eq(&client, &clients.get(&recompiled).unwrap()));
        let other = settings(true);
        let other_id = clients.get(&other).unwrap().id;
        assert_ne!(other_id, client.id);
        assert!(clients.get(&other).unwrap().config.enable_sni);

        drop((first, recompiled, other, client));
        clients.forget_unused();
        assert!(clients.by_address.is_empty());
        assert!(clients.by_value.is_empty());
        let later = settings(false);
        assert!(clients.get(&later).unwrap().id > other_id);
    }
}
