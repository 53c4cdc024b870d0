//! `ssl-ciphers` / `ssl-prefer-server-ciphers`: ingress-nginx's server-level cipher settings.
//! Each is taken from the host's oldest Ingress that sets it (ingress-nginx fills its server
//! block's field only while it is empty), and becomes the host's own handshake.
//!
//! ```text
//!  Ingress (oldest first) ─host_ciphers─▶ HostExtras.ciphers[host]: suites, prefer_server
//!                                         (first set wins, each on its own)
//!  cipher_hosts (after client_cert_hosts) ─▶ HostTls.ciphers of the host, merged into the
//!      handshake its client certificates made, if any; rules without host: the catch-all's
//! ```

use model::compiled::ingress_ref;
use model::routes::HostPattern;
use model::server_tls::HostCiphers;
use model::tls::HostTls;
use model::{NamespacedName, Severity};

use crate::compiler::Compiler;
use crate::ingress::annotations::IngressAnnotations;

impl Compiler<'_> {
    /// Records an Ingress's cipher annotations for one of its hosts.
    pub(crate) fn host_ciphers(
        &mut self,
        ingress: &NamespacedName,
        host: &HostPattern,
        parsed: &IngressAnnotations,
    ) {
        let own = &parsed.host_ciphers;
        if own.suites.is_none() && own.prefer_server.is_none() {
            return;
        }
        let claims = self.hosts.ciphers.entry(host.clone()).or_default();
        let mut ignored = Vec::new();
        if let Some(suites) = &own.suites {
            match &claims.suites {
                None => claims.suites = Some((suites.clone(), ingress.clone())),
                Some((first, owner)) if owner != ingress && first != suites => {
                    ignored.push(("ssl-ciphers", owner.clone()));
                }
                Some(_) => {}
            }
        }
        if let Some(prefer) = own.prefer_server {
            match &claims.prefer_server {
                None => claims.prefer_server = Some((prefer, ingress.clone())),
                Some((first, owner)) if owner != ingress && *first != prefer => {
                    ignored.push(("ssl-prefer-server-ciphers", owner.clone()));
                }
                Some(_) => {}
            }
        }
        for (name, owner) in ignored {
            self.diagnose_with(
                Severity::Notice,
                ingress_ref(ingress),
                format!("annotation {name}: host {host} takes it from Ingress {owner}, which is older (as ingress-nginx's server block); this Ingress's is ignored"),
            );
        }
    }

    /// Once every Ingress is in (and the client certificates' handshakes are made): each
    /// host's cipher settings into its handshake.
    pub(crate) fn cipher_hosts(&mut self) {
        let hosts = std::mem::take(&mut self.hosts.ciphers);
        for (host, claims) in hosts {
            let ciphers = HostCiphers {
                suites: claims.suites.map(|(suites, _)| suites),
                prefer_server: claims.prefer_server.map(|(prefer, _)| prefer),
            };
            let certificates = &mut self.out.certificates;
            let tls = match certificates.host_tls_of(&host) {
                Some(made) => HostTls {
                    ciphers: Some(ciphers),
                    ..(**made).clone()
                },
                None => HostTls {
                    alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
                    client_cert_request: None,
                    client_cert_required: None,
                    ciphers: Some(ciphers),
                },
            };
            certificates.set_host_tls(&host, tls);
        }
    }
}
