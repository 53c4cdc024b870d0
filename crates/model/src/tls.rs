//! Server certificates: ready-to-serve keys (made from TLS Secrets by `translate`), chosen by SNI.
//!
//! Parsing happens at compile time, once per Secret, so a handshake only does a hash lookup;
//! and a bad Secret is a diagnostic at compile time instead of a failed handshake later.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::frontend_tls::PortTls;
use crate::routes::{HostPattern, RouteTable};

/// Certificates by host name, plus the default for clients without (matching) SNI.
#[derive(Clone, Default)]
pub struct Certificates {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by the suffix after `*.`; matches exactly one more label.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
    /// Which Secret serves which host pattern, for `/config` and golden files.
    sources: BTreeMap<String, String>,
    /// What each served Secret's certificate says (`namespace/name` → info).
    details: BTreeMap<String, Arc<CertificateInfo>>,
    /// Hosts whose handshake differs from the listener's, by exact name and by wildcard
    /// suffix. Empty for almost every configuration: the proxy then never reads the
    /// ClientHello before the handshake.
    host_tls_exact: HashMap<String, Arc<HostTls>>,
    host_tls_wildcard: HashMap<String, Arc<HostTls>>,
    /// The handshake of the rules without host (ingress-nginx's default server `_`): the
    /// handshakes that name no host the routes serve, or none.
    host_tls_catch_all: Option<Arc<HostTls>>,
    /// Listener ports whose every handshake differs (Gateway API's frontend validation,
    /// `frontend_tls`), whatever the host. Empty unless a Gateway asks for it.
    ports: BTreeMap<u16, PortTls>,
}

/// nginx's name of ingress-nginx's default server, where the rules without host live; never
/// a host name (`_` is no DNS label character).
pub const CATCH_ALL_SERVER: &str = "_";

/// The server a handshake or a request belongs to, as nginx picks its `server` by name.
#[derive(Clone, Copy, Debug)]
pub struct TlsServer<'c, 'n> {
    /// The name (the catch-all's: [`CATCH_ALL_SERVER`]).
    pub name: &'n str,
    /// How its handshake differs from the listener's, if it does.
    pub tls: Option<&'c Arc<HostTls>>,
}

pub use crate::frontend_tls::HostTls;

/// The entry for `name` in an exact map, else in a wildcard map (one more label).
fn by_host<'m, T>(
    exact: &'m HashMap<String, T>,
    wildcard: &'m HashMap<String, T>,
    name: &str,
) -> Option<&'m T> {
    let lower;
    let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
        lower = name.to_ascii_lowercase();
        lower.as_str()
    } else {
        name
    };
    exact.get(name).or_else(|| {
        let (_, parent) = name.split_once('.')?;
        wildcard.get(parent)
    })
}

/// How long before a served certificate's expiry it is reported (diagnostic, Event, log).
pub const EXPIRY_WARNING: std::time::Duration = std::time::Duration::from_secs(14 * 24 * 3600);

/// What a served certificate says about itself, read once when its Secret is loaded: its
/// validity for `nginx_ingress_controller_ssl_expire_time_seconds`, the status page and the
/// expiry warning; the rest for `nginx_ingress_controller_ssl_certificate_info`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CertificateInfo {
    /// Unix seconds.
    pub not_before: i64,
    pub not_after: i64,
    pub subject_common_name: String,
    /// DNS names of the subjectAltName extension.
    pub dns_names: Vec<String>,
    pub issuer_common_name: String,
    pub issuer_organization: String,
    /// The issuer name's serialNumber attribute (rarely set; ingress-nginx's `identifier`
    /// label starts with it).
    pub issuer_serial_number: String,
    /// The certificate's serial number, in decimal.
    pub serial_number: String,
    /// `RSA`, `ECDSA`, `Ed25519`, `DSA` (Go's names, as ingress-nginx's label has them).
    pub public_key_algorithm: String,
}

impl CertificateInfo {
    /// ingress-nginx's certificate `identifier` label: issuer serialNumber `-` serial.
    pub fn identifier(&self) -> String {
        format!("{}-{}", self.issuer_serial_number, self.serial_number)
    }
}

/// Reads what [`CertificateInfo`] holds from a DER certificate.
pub fn certificate_info(der: &[u8]) -> Result<CertificateInfo, String> {
    use x509_parser::oid_registry as oids;
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    fn first<'a>(
        mut values: impl Iterator<Item = &'a x509_parser::x509::AttributeTypeAndValue<'a>>,
    ) -> String {
        values
            .next()
            .and_then(|v| v.as_str().ok())
            .unwrap_or_default()
            .to_owned()
    }
    let issuer = cert.issuer();
    let algorithm = &cert.public_key().algorithm.algorithm;
    let public_key_algorithm = if *algorithm == oids::OID_PKCS1_RSAENCRYPTION {
        "RSA"
    } else if *algorithm == oids::OID_KEY_TYPE_EC_PUBLIC_KEY {
        "ECDSA"
    } else if *algorithm == oids::OID_SIG_ED25519 {
        "Ed25519"
    } else if *algorithm == oids::OID_KEY_TYPE_DSA {
        "DSA"
    } else {
        "Unknown"
    };
    let dns_names = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(CertificateInfo {
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        subject_common_name: first(cert.subject().iter_common_name()),
        dns_names,
        issuer_common_name: first(issuer.iter_common_name()),
        issuer_organization: first(issuer.iter_organization()),
        issuer_serial_number: first(issuer.iter_by_oid(&oids::OID_X509_SERIALNUMBER)),
        serial_number: decimal(cert.tbs_certificate.raw_serial()),
        public_key_algorithm: public_key_algorithm.into(),
    })
}

/// A big-endian unsigned integer in decimal (serial numbers are up to 20 bytes).
fn decimal(bytes: &[u8]) -> String {
    let mut digits: Vec<u8> = Vec::new(); // little-endian base 10
    for &byte in bytes {
        let mut carry = u32::from(byte);
        for digit in digits.iter_mut() {
            let value = u32::from(*digit) * 256 + carry;
            *digit = (value % 10) as u8;
            carry = value / 10;
        }
        while carry > 0 {
            digits.push((carry % 10) as u8);
            carry /= 10;
        }
    }
    if digits.is_empty() {
        return "0".into();
    }
    digits.iter().rev().map(|d| char::from(b'0' + d)).collect()
}

/// `2026-12-01T12:00:00Z` for Unix seconds (UTC).
pub fn utc_text(unix: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(unix) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => format!("@{unix}"),
    }
}

/// The crypto provider Sluice uses everywhere: aws-lc-rs.
pub fn crypto_provider() -> &'static Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// A certificate chain and private key in PEM, checked to match.
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<CertifiedKey>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("data.tls.crt: not PEM certificates: {e}"))?;
    if chain.is_empty() {
        return Err("data.tls.crt: no CERTIFICATE block found".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("data.tls.key: not a PEM private key: {e}"))?;
    let signing_key = crypto_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("data.tls.key: unusable private key: {e}"))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified
        .keys_match()
        .map_err(|e| format!("data.tls.key does not belong to data.tls.crt: {e}"))?;
    Ok(Arc::new(certified))
}

impl Certificates {
    /// The certificate for a client's SNI: exact host, then wildcard, then the default.
    /// `None` when there is no default either; the proxy then uses its own.
    pub fn resolve(&self, server_name: Option<&str>) -> Option<Arc<CertifiedKey>> {
        server_name
            .and_then(|name| by_host(&self.exact, &self.wildcard, name))
            .or(self.default.as_ref())
            .cloned()
    }

    /// Some host's handshake differs from the listener's (see [`HostTls`]).
    pub fn has_host_tls(&self) -> bool {
        !self.host_tls_exact.is_empty()
            || !self.host_tls_wildcard.is_empty()
            || self.host_tls_catch_all.is_some()
    }

    /// The server `name` (a ClientHello's SNI, a request's host) belongs to, as nginx picks
    /// it: a host with its own handshake; else, when the rules without host have one, the
    /// catch-all for a name `routes` serves no host for, and for no name at all (nginx's
    /// default server); else the listener's.
    pub fn server<'c, 'n>(
        &'c self,
        routes: &RouteTable,
        name: Option<&'n str>,
    ) -> TlsServer<'c, 'n> {
        if let Some(name) = name {
            if let Some(tls) = self.host_tls(Some(name)) {
                return TlsServer {
                    name,
                    tls: Some(tls),
                };
            }
            if self.host_tls_catch_all.is_none() || routes.serves_host(name) {
                return TlsServer { name, tls: None };
            }
        }
        TlsServer {
            name: CATCH_ALL_SERVER,
            tls: self.host_tls_catch_all.as_ref(),
        }
    }

    /// How the handshake for a client's SNI differs, if it does.
    pub fn host_tls(&self, server_name: Option<&str>) -> Option<&Arc<HostTls>> {
        by_host(&self.host_tls_exact, &self.host_tls_wildcard, server_name?)
    }

    /// The handshake set for `host` (as [`Certificates::set_host_tls`] was given it).
    pub fn host_tls_of(&self, host: &HostPattern) -> Option<&Arc<HostTls>> {
        match host {
            HostPattern::Exact(h) => self.host_tls_exact.get(&**h),
            HostPattern::Wildcard(suffix) => self.host_tls_wildcard.get(&**suffix),
            HostPattern::Any => self.host_tls_catch_all.as_ref(),
        }
    }

    /// Makes `host`'s handshakes differ as `tls` says (`Any`: the catch-all's, see
    /// [`Certificates::server`]).
    pub fn set_host_tls(&mut self, host: &HostPattern, tls: HostTls) {
        let tls = Arc::new(tls);
        match host {
            HostPattern::Exact(h) => {
                self.host_tls_exact.insert(h.to_string(), tls);
            }
            HostPattern::Wildcard(suffix) => {
                self.host_tls_wildcard.insert(suffix.to_string(), tls);
            }
            HostPattern::Any => self.host_tls_catch_all = Some(tls),
        }
    }

    /// How every handshake on listener port `port` goes, if the port says (see
    /// [`crate::frontend_tls`]).
    pub fn port_tls(&self, port: u16) -> Option<&PortTls> {
        self.ports.get(&port)
    }

    /// Some listener port has handshakes of its own.
    pub fn has_port_tls(&self) -> bool {
        !self.ports.is_empty()
    }

    /// Makes every handshake on `port` go as `tls` says; `false` (nothing changed) when the
    /// port already has a setting (the first one stays).
    pub fn set_port_tls(&mut self, port: u16, tls: PortTls) -> bool {
        match self.ports.entry(port) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(tls);
                true
            }
        }
    }

    /// Port → what its handshakes do, for `/config` and golden files.
    pub fn port_tls_view(&self) -> BTreeMap<u16, String> {
        (self.ports.iter())
            .map(|(p, t)| (*p, t.describe()))
            .collect()
    }

    /// The hosts whose handshake asks for a client certificate (`*.suffix` for a wildcard) →
    /// how many CA names it lists, for `/config` and golden files.
    pub fn client_cert_requests(&self) -> BTreeMap<String, usize> {
        (self.host_tls_views())
            .filter_map(|(host, tls)| Some((host, tls.client_cert_request.as_ref()?.len())))
            .collect()
    }

    /// The hosts with cipher settings of their own (`ssl-ciphers` annotations) → what they
    /// are, for `/config` and golden files.
    pub fn host_ciphers(&self) -> BTreeMap<String, String> {
        (self.host_tls_views())
            .filter_map(|(host, tls)| Some((host, tls.ciphers.as_ref()?.describe())))
            .collect()
    }

    /// Every host's own handshake, by the name views show (`*.suffix`, `*` the catch-all).
    fn host_tls_views(&self) -> impl Iterator<Item = (String, &Arc<HostTls>)> {
        let exact = self.host_tls_exact.iter().map(|(h, t)| (h.clone(), t));
        let wildcard = (self.host_tls_wildcard.iter()).map(|(s, t)| (format!("*.{s}"), t));
        let catch_all = (self.host_tls_catch_all.iter()).map(|t| ("*".to_owned(), t));
        exact.chain(wildcard).chain(catch_all)
    }

    /// Host pattern → `namespace/name` of the Secret serving it.
    pub fn sources(&self) -> &BTreeMap<String, String> {
        &self.sources
    }

    /// Served Secret (`namespace/name`) → what its certificate says.
    pub fn details(&self) -> &BTreeMap<String, Arc<CertificateInfo>> {
        &self.details
    }

    /// When the next served certificate crosses [`EXPIRY_WARNING`] or expires, after `now`
    /// (Unix seconds): a compile then reports it.
    pub fn next_expiry_event(&self, now: i64) -> Option<i64> {
        let warning = EXPIRY_WARNING.as_secs() as i64;
        self.details
            .values()
            .flat_map(|info| [info.not_after - warning, info.not_after])
            .filter(|at| *at > now)
            .min()
    }

    /// Serves `key` for `host`; `source` names the Secret it came from (`namespace/name`).
    pub fn insert(
        &mut self,
        host: &HostPattern,
        key: Arc<CertifiedKey>,
        source: String,
        info: Option<Arc<CertificateInfo>>,
    ) {
        match host {
            HostPattern::Exact(h) => {
                self.exact.insert(h.to_string(), key);
            }
            HostPattern::Wildcard(suffix) => {
                self.wildcard.insert(suffix.to_string(), key);
            }
            HostPattern::Any => self.default = Some(key),
        }
        if let Some(info) = info {
            self.details.insert(source.clone(), info);
        }
        self.sources.insert(host.to_string(), source);
    }
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates")
            .field("sources", &self.sources)
            .field("details", &self.details)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    /// ingress-nginx's default server `_` serves the handshakes that name no server (or none);
    /// a name with rules has its own server, whatever its TLS.
    #[test]
    fn the_catch_all_s_handshake_is_for_names_without_a_host() {
        let mut routes = RouteTable::default();
        routes.host_mut(&HostPattern::Exact("plain.example.com".into()));
        routes.host_mut(&HostPattern::Wildcard("wild.example.com".into()));
        let mut certificates = Certificates::default();
        let server = |c: &Certificates, name| {
            let server = c.server(&routes, name);
            (server.name.to_owned(), server.tls.is_some())
        };
        // No catch-all handshake: every name keeps the listener's.
        assert_eq!(server(&certificates, None), ("_".to_owned(), false));
        assert_eq!(
            server(&certificates, Some("x.org")),
            ("x.org".to_owned(), false)
        );
        let asks = HostTls {
            alpn: vec![b"h2".to_vec()],
            client_cert_request: Some(vec![]),
            client_cert_required: None,
            ciphers: None,
        };
        certificates.set_host_tls(&HostPattern::Any, asks.clone());
        certificates.set_host_tls(&HostPattern::Exact("mtls.example.com".into()), asks);
        assert!(certificates.has_host_tls());
        assert_eq!(server(&certificates, None), ("_".to_owned(), true));
        assert_eq!(server(&certificates, Some("x.org")), ("_".to_owned(), true));
        assert_eq!(server(&certificates, Some("*")), ("_".to_owned(), true));
        for named in [
            "plain.example.com",
            "PLAIN.example.com.",
            "a.wild.example.com",
        ] {
            assert_eq!(
                server(&certificates, Some(named)),
                (named.to_owned(), false)
            );
        }
        let own = server(&certificates, Some("mtls.example.com"));
        assert_eq!(own, ("mtls.example.com".to_owned(), true));
        assert_eq!(certificates.client_cert_requests().len(), 2);
    }

    #[test]
    fn a_host_s_own_tls_is_found_by_exact_name_then_wildcard() {
        let mut certificates = Certificates::default();
        assert!(!certificates.has_host_tls());
        let h1 = HostTls {
            alpn: vec![b"http/1.1".to_vec()],
            client_cert_request: None,
            client_cert_required: None,
            ciphers: None,
        };
        certificates.set_host_tls(&HostPattern::Wildcard("example.com".into()), h1.clone());
        certificates.set_host_tls(
            &HostPattern::Exact("api.example.com".into()),
            HostTls {
                alpn: vec![b"h2".to_vec()],
                client_cert_request: None,
                client_cert_required: None,
                ciphers: None,
            },
        );
        assert!(certificates.has_host_tls());
        let alpn = |name| certificates.host_tls(name).map(|t| t.alpn.clone());
        assert_eq!(alpn(Some("API.example.com")), Some(vec![b"h2".to_vec()]));
        assert_eq!(alpn(Some("www.example.com")), Some(h1.alpn.clone()));
        assert_eq!(alpn(Some("a.b.example.com")), None);
        assert_eq!(alpn(None), None);
    }

    fn issued(not_after: SystemTime) -> (rcgen::Certificate, rcgen::KeyPair) {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "Test CA");
        ca.distinguished_name
            .push(rcgen::DnType::OrganizationName, "Sluice tests");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let mut leaf = rcgen::CertificateParams::new(vec!["shop.example".to_owned()]).unwrap();
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "shop.example");
        leaf.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x01, 0x00, 0x00]));
        leaf.not_after = not_after.into();
        let key = rcgen::KeyPair::generate().unwrap();
        (leaf.signed_by(&key, &issuer).unwrap(), key)
    }

    #[test]
    fn a_certificate_says_when_it_expires_who_issued_it_and_its_serial() {
        let not_after = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let (cert, _) = issued(not_after);
        let info = certificate_info(cert.der()).unwrap();
        assert_eq!(info.not_after, 1_900_000_000);
        assert_eq!(info.subject_common_name, "shop.example");
        assert_eq!(info.dns_names, ["shop.example"]);
        assert_eq!(info.issuer_common_name, "Test CA");
        assert_eq!(info.issuer_organization, "Sluice tests");
        assert_eq!(info.serial_number, "65536");
        assert_eq!(info.identifier(), "-65536");
        assert_eq!(info.public_key_algorithm, "ECDSA");
        assert!(certificate_info(b"not DER").is_err());
    }

    #[test]
    fn serials_are_decimal_and_times_are_utc_text() {
        assert_eq!(decimal(&[]), "0");
        assert_eq!(decimal(&[0xff]), "255");
        assert_eq!(decimal(&[0x01, 0x00]), "256");
        assert_eq!(decimal(&[0xff; 9]), "4722366482869645213695");
        assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_text(1_900_000_000), "2030-03-17T17:46:40Z");
        assert_eq!(utc_text(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn the_next_expiry_event_is_the_warning_then_the_expiry() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let in_30_days = SystemTime::now() + Duration::from_secs(30 * 86_400);
        let (cert, key) = issued(in_30_days);
        let certified =
            certified_key_from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).unwrap();
        let info = Arc::new(certificate_info(cert.der()).unwrap());
        let mut certificates = Certificates::default();
        assert_eq!(certificates.next_expiry_event(now), None);
        certificates.insert(
            &HostPattern::Exact("shop.example".into()),
            certified,
            "default/shop".into(),
            Some(info.clone()),
        );
        let warning = EXPIRY_WARNING.as_secs() as i64;
        assert_eq!(
            certificates.next_expiry_event(now),
            Some(info.not_after - warning)
        );
        assert_eq!(
            certificates.next_expiry_event(info.not_after - warning),
            Some(info.not_after)
        );
        assert_eq!(certificates.next_expiry_event(info.not_after), None);
        assert_eq!(certificates.details()["default/shop"], info);
    }
}

/// Accepts any server certificate for any name, still checking the handshake's signatures
/// (that is TLS itself, not verification): nginx's `proxy_ssl_verify off`, and tests that look
/// at a certificate not meant to verify.
#[derive(Debug)]
pub struct AcceptAnyCertificate(pub Arc<CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
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
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
