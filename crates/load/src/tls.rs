//! The rustls client configuration for a run: trust, ALPN and, above all, session resumption.
//!
//! One `ClientConfig` is shared by every connection of every thread, so with resumption on there is
//! one session cache for the run (as a browser or a pooled client would have), and with it off the
//! cache is disabled outright, so each new connection is provably a full handshake.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// What a run asks of TLS (`--tls-*`, `--cacert`, `--insecure`, `--ciphers`).
#[derive(Clone, Debug)]
pub struct TlsOptions {
    pub resumption: bool,
    pub trust: Trust,
    /// `None`: rustls' defaults.
    pub cipher_suites: Option<Vec<rustls::SupportedCipherSuite>>,
}

/// Which server certificates to accept.
#[derive(Clone, Debug)]
pub enum Trust {
    /// The Mozilla roots built in (webpki-roots).
    WebRoots,
    /// The CA certificates from `--cacert`.
    Roots(Vec<CertificateDer<'static>>),
    /// Anything (`--insecure`); signatures on the handshake are still checked.
    Insecure,
}

/// The cipher suite called `name`: its IANA name as rustls spells it
/// (`TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`, `TLS13_AES_256_GCM_SHA384`) or the OpenSSL name of a
/// TLS 1.2 suite (`ECDHE-RSA-AES256-GCM-SHA384`).
pub(crate) fn cipher_suite(name: &str) -> Option<rustls::SupportedCipherSuite> {
    const OPENSSL: &[(&str, &str)] = &[
        (
            "ECDHE-RSA-AES256-GCM-SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ),
        (
            "ECDHE-RSA-AES128-GCM-SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        ),
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        ),
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        ),
    ];
    let iana = OPENSSL
        .iter()
        .find(|(openssl, _)| *openssl == name)
        .map_or(name, |(_, iana)| iana);
    rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES
        .iter()
        .find(|s| format!("{:?}", s.suite()) == iana)
        .copied()
}

/// Builds the client config. `sessions` sizes the shared cache when resumption is on.
pub(crate) fn client_config(
    options: &TlsOptions,
    http2: bool,
    sessions: usize,
) -> Result<Arc<ClientConfig>, rustls::Error> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    let builder = match &options.cipher_suites {
        None => ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()?,
        Some(suites) => {
            // Offer exactly the versions the chosen suites belong to.
            let mut versions = Vec::new();
            if suites
                .iter()
                .any(|s| s.version() == &rustls::version::TLS12)
            {
                versions.push(&rustls::version::TLS12);
            }
            if suites
                .iter()
                .any(|s| s.version() == &rustls::version::TLS13)
            {
                versions.push(&rustls::version::TLS13);
            }
            provider.cipher_suites = suites.clone();
            ClientConfig::builder_with_provider(Arc::new(provider))
                .with_protocol_versions(&versions)?
        }
    };
    let provider = builder.crypto_provider().clone();
    let mut config = match &options.trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth(),
        Trust::WebRoots => {
            let roots = RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::Roots(certs) => {
            let mut roots = RootCertStore::empty();
            for cert in certs {
                roots.add(cert.clone())?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.resumption = if options.resumption {
        Resumption::in_memory_sessions(sessions.max(256))
    } else {
        Resumption::disabled()
    };
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}

/// `--insecure`: any certificate for any name, but the handshake signatures must still verify, so
/// the cost of a handshake is the real one.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod cipher_tests {
    use super::*;

    #[test]
    fn suites_are_found_by_openssl_and_iana_names() {
        let seeds = cipher_suite("ECDHE-RSA-AES256-GCM-SHA384").expect("the seeds' suite");
        assert_eq!(
            format!("{:?}", seeds.suite()),
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
        );
        assert_eq!(
            cipher_suite("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384").map(|s| s.suite()),
            Some(seeds.suite())
        );
        assert!(cipher_suite("TLS13_AES_256_GCM_SHA384").is_some());
        assert!(cipher_suite("RC4-MD5").is_none());
    }

    #[test]
    fn the_config_offers_exactly_the_chosen_suite() {
        let options = TlsOptions {
            resumption: false,
            trust: Trust::Insecure,
            cipher_suites: Some(vec![cipher_suite("ECDHE-RSA-AES256-GCM-SHA384").unwrap()]),
        };
        let config = client_config(&options, false, 0).unwrap();
        let suites = &config.crypto_provider().cipher_suites;
        assert_eq!(suites.len(), 1);
        assert_eq!(suites[0].version(), &rustls::version::TLS12);
    }
}
