//! Certificates made on the fly: a test CA with leaves and intermediates (clients that verify
//! name and chain), or one self-signed certificate.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

use crate::bounded;

/// A test CA and the certificates it signs.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    root: CertificateDer<'static>,
}

/// A certificate and its key: PEM for Secrets and files, DER to compare with what a server
/// presented.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

/// The crypto provider every test TLS endpoint uses (the one Sluice uses).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A self-signed certificate for `names` (DNS names or IP addresses).
pub fn self_signed(names: &[&str]) -> Leaf {
    let params = rcgen::CertificateParams::new(to_strings(names)).expect("valid names");
    sign_self(params)
}

/// A self-signed certificate for `host` valid until `not_after` (in the past: expired).
pub fn self_signed_until(host: &str, not_after: SystemTime) -> Leaf {
    let mut params = rcgen::CertificateParams::new(vec![host.to_owned()]).expect("a valid name");
    params.not_after = not_after.into();
    sign_self(params)
}

fn sign_self(params: rcgen::CertificateParams) -> Leaf {
    let key = rcgen::KeyPair::generate().expect("a key pair");
    let cert = params.self_signed(&key).expect("self-signed");
    Leaf {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        der: cert.der().clone(),
    }
}

fn to_strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn ca_params(name: &str) -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("no names");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    params
}

impl Leaf {
    /// The private key, DER.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).expect("a PEM private key")
    }

    /// A TLS server configuration presenting this certificate and offering `alpn`.
    pub fn server_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("default protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![self.der.clone()], self.key())
            .expect("the key fits the certificate");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A TLS server side presenting this certificate (a test backend that speaks TLS itself).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.server_config(&[]))
    }
}

impl Default for TestCa {
    fn default() -> TestCa {
        TestCa::new()
    }
}

impl TestCa {
    pub fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let params = ca_params("Sluice test CA");
        let cert = params.self_signed(&key).expect("self-signed CA");
        TestCa {
            root: cert.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (DNS names, wildcards, or IP addresses).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let mut params = rcgen::CertificateParams::new(to_strings(names)).expect("valid names");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, names[0]);
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A certificate for `names` that also carries `uri` as a URI subjectAltName (a SPIFFE
    /// ID, say).
    pub fn leaf_with_uri(&self, names: &[&str], uri: &str) -> Leaf {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let mut params = rcgen::CertificateParams::new(to_strings(names)).expect("valid names");
        let uri = rcgen::string::Ia5String::try_from(uri).expect("an ASCII URI");
        params.subject_alt_names.push(rcgen::SanType::URI(uri));
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A client certificate (subject `CN=<cn>`, extended key usage clientAuth) with this
    /// serial number (what a CRL names).
    pub fn client(&self, cn: &str, serial: u64) -> Leaf {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("no names");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// This CA's certificate revocation list (PEM, valid from 2020 to 2100) naming these
    /// serial numbers.
    pub fn crl_pem(&self, revoked: &[u64]) -> String {
        let params = rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(2100, 1, 1),
            crl_number: rcgen::SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|serial| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from(*serial),
                    revocation_time: rcgen::date_time_ymd(2021, 1, 1),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        params
            .signed_by(&self.issuer)
            .expect("a CRL")
            .pem()
            .expect("PEM")
    }

    /// A CA this one signs (an intermediate); its `root()` is its own certificate.
    pub fn intermediate(&self, name: &str) -> TestCa {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let params = ca_params(name);
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        TestCa {
            root: cert.der().clone(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA's own certificate (DER).
    pub fn root(&self) -> &CertificateDer<'static> {
        &self.root
    }

    /// The CA's own certificate in PEM, as a Secret's `ca.crt` holds it.
    pub fn root_pem(&self) -> String {
        let text = base64::engine::general_purpose::STANDARD.encode(self.root.as_ref());
        let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
        for line in text.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
        pem
    }

    /// A client that trusts only this CA and verifies name and chain.
    pub fn connector(&self, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.root.clone()).expect("a valid root");
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// Connects with SNI `name` (no SNI for an IP address) and returns the stream and the
    /// certificate the server presented.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        name: &str,
        alpn: &[&[u8]],
    ) -> std::io::Result<(
        tokio_rustls::client::TlsStream<TcpStream>,
        CertificateDer<'static>,
    )> {
        let server_name = ServerName::try_from(name.to_owned()).expect("a valid server name");
        let stream = bounded(TcpStream::connect(addr)).await?;
        let tls = bounded(self.connector(alpn).connect(server_name, stream)).await?;
        let presented = tls
            .get_ref()
            .1
            .peer_certificates()
            .expect("a peer certificate")[0]
            .clone();
        Ok((tls, presented))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_root_survives_pem_and_keys_fit_their_certificates() {
        let ca = TestCa::new();
        let from_pem = CertificateDer::from_pem_slice(ca.root_pem().as_bytes()).unwrap();
        assert_eq!(&from_pem, ca.root());
        // `with_single_cert` refuses a key that does not belong to the certificate.
        ca.leaf(&["app.test"]).acceptor();
        ca.intermediate("Sluice test intermediate")
            .leaf(&["127.0.0.1"])
            .acceptor();
        self_signed(&["localhost"]).server_config(&[b"http/1.1"]);
    }
}
