//! Client certificates (mTLS): ingress-nginx's `auth-tls-*` annotations, and Sluice's
//! per-path scope (`sluice.dev/auth-tls-scope: path`). Pure data and pure checks; the proxy
//! requests the certificate in the handshake (`tls::HostTls::client_cert_request`) and asks
//! [`ClientCertPolicy::check`] once per connection and policy.
//!
//! ```text
//!  Secret ca.crt (+ ca.crl) ─ClientCa::from_pem─▶ trust anchors, CRLs, CA names (the hints)
//!  handshake: a certificate is requested, never required; whatever comes is accepted (its
//!    signature over the handshake is checked), so a bad one is answered in HTTP, not TLS
//!  request ─▶ check(chain): verified against the CA (depth, CRL, validity) ─▶
//!     on: none ─▶ 400 "No required SSL certificate was sent" (nginx 496) │
//!     on, optional: bad ─▶ 400 "The SSL certificate error" (495) │ optional_no_ca: only
//!     errors other than an unknown CA ─▶ 495 │ auth-tls-error-page: a 302 there instead
//!     match-cn: the subject DN does not match ─▶ 403 "client certificate unauthorized"
//!     ─▶ ssl-client-verify (SUCCESS │ NONE │ FAILED:<reason>), ssl-client-subject-dn,
//!        ssl-client-issuer-dn (RFC 2253), ssl-client-cert (URL-escaped PEM) upstream
//! ```

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use http::HeaderValue;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, RootCertStore};
use serde::{Serialize, Serializer};

use crate::header_text::optional_value_text;

/// `auth-tls-verify-client`: nginx's `ssl_verify_client`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyClient {
    /// A certificate is required and must verify (ingress-nginx's default).
    On,
    /// No certificate is asked for.
    Off,
    /// Asked for; a missing one passes (`NONE`), a bad one does not.
    Optional,
    /// Asked for, passed on; not verified against the CA (other errors, an expired
    /// certificate, still refuse it, as nginx does).
    OptionalNoCa,
}

impl VerifyClient {
    pub fn parse(text: &str) -> Option<VerifyClient> {
        Some(match text {
            "on" => VerifyClient::On,
            "off" => VerifyClient::Off,
            "optional" => VerifyClient::Optional,
            "optional_no_ca" => VerifyClient::OptionalNoCa,
            _ => return None,
        })
    }
}

/// Where an Ingress's certificate rules apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// ingress-nginx's: the whole host (its `server`), every Ingress's paths of it.
    Host,
    /// `sluice.dev/auth-tls-scope: path`: this Ingress's paths only.
    Path,
}

/// The trusted CAs of `auth-tls-secret`, read once per compile.
pub struct ClientCa {
    /// `namespace/name` of the Secret.
    pub secret: String,
    verifier: Arc<dyn ClientCertVerifier>,
    /// The CA certificates' subjects, DER (with the SEQUENCE): the names the handshake's
    /// CertificateRequest lists, and where a chain ends.
    subjects: Vec<Vec<u8>>,
    /// The CA certificates themselves: a new CA of the same name is another `ClientCa` (the
    /// proxy keeps TLS configurations by value).
    anchors: Vec<CertificateDer<'static>>,
    pub has_crl: bool,
}

impl fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCa")
            .field("secret", &self.secret)
            .field("cas", &self.subjects.len())
            .field("has_crl", &self.has_crl)
            .finish()
    }
}

impl PartialEq for ClientCa {
    fn eq(&self, other: &ClientCa) -> bool {
        self.secret == other.secret
            && self.subjects == other.subjects
            && self.anchors == other.anchors
            && self.has_crl == other.has_crl
    }
}

// Hashed by what `PartialEq` compares: a `HostTls` that requires a certificate keys the
// proxy's per-worker cache of TLS configurations.
impl Eq for ClientCa {}

impl std::hash::Hash for ClientCa {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.secret.hash(state);
        self.subjects.hash(state);
        self.anchors.hash(state);
        self.has_crl.hash(state);
    }
}

impl ClientCa {
    /// From a Secret's `ca.crt` (PEM, one or more CA certificates) and `ca.crl` (PEM CRLs),
    /// verified with `provider` (`tls::crypto_provider`). With CRLs every certificate of a
    /// chain must be covered by one (nginx sets OpenSSL's `CRL_CHECK_ALL`).
    pub fn from_pem(
        secret: String,
        ca: &[u8],
        crl: Option<&[u8]>,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<ClientCa, String> {
        let certs = CertificateDer::pem_slice_iter(ca)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("ca.crt: not PEM certificates: {e}"))?;
        ClientCa::from_certs(secret, certs, crl, provider)
    }

    /// From CA certificates already read (DER); `secret` names where they came from (a
    /// Secret's, or a Gateway's ConfigMaps').
    pub fn from_certs(
        secret: String,
        certs: Vec<CertificateDer<'static>>,
        crl: Option<&[u8]>,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<ClientCa, String> {
        let mut roots = RootCertStore::empty();
        let mut subjects = Vec::new();
        for cert in &certs {
            let (_, parsed) = x509_parser::parse_x509_certificate(cert)
                .map_err(|e| format!("ca.crt: not an X.509 certificate: {e}"))?;
            subjects.push(parsed.subject().as_raw().to_vec());
            roots
                .add(cert.clone())
                .map_err(|e| format!("ca.crt: cannot be a trust anchor: {e}"))?;
        }
        if subjects.is_empty() {
            return Err("ca.crt: no CERTIFICATE block found".into());
        }
        let crls = match crl {
            Some(crl) => CertificateRevocationListDer::pem_slice_iter(crl)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("ca.crl: not PEM CRLs: {e}"))?,
            None => Vec::new(),
        };
        if crl.is_some() && crls.is_empty() {
            return Err("ca.crl: no X509 CRL block found".into());
        }
        let has_crl = !crls.is_empty();
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .with_crls(crls)
            .build()
            .map_err(|e| format!("ca.crt/ca.crl cannot be used: {e}"))?;
        Ok(ClientCa {
            secret,
            verifier,
            subjects,
            anchors: certs,
            has_crl,
        })
    }

    /// The CA names a CertificateRequest lists (DER).
    pub fn names(&self) -> &[Vec<u8>] {
        &self.subjects
    }

    /// The verifier a handshake that requires a certificate of these CAs uses (Gateway API's
    /// frontend validation, `frontend_tls`): no certificate, or one that does not verify,
    /// fails the handshake itself.
    pub fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        self.verifier.clone()
    }

    /// Verifies `chain` (the client's certificate first) for client authentication, with at
    /// most `depth` intermediates between it and a CA of the Secret (OpenSSL's verify depth:
    /// neither the certificate nor the trust anchor counts).
    fn verify(&self, chain: &[CertificateDer<'_>], depth: u32) -> Result<(), Failure> {
        let (end, intermediates) = chain.split_first().ok_or(Failure::Other)?;
        self.verifier
            .verify_client_cert(end, intermediates, UnixTime::now())
            .map_err(|e| Failure::of(&e))?;
        if self.intermediates_used(chain) > depth as usize {
            return Err(Failure::TooLong);
        }
        Ok(())
    }

    /// How many of the chain's certificates lie between its first and a trust anchor, by
    /// issuer and subject names (the chain has verified, so the names lead there).
    fn intermediates_used(&self, chain: &[CertificateDer<'_>]) -> usize {
        let names: Vec<(Vec<u8>, Vec<u8>)> = chain
            .iter()
            .filter_map(|c| x509_parser::parse_x509_certificate(c).ok())
            .map(|(_, c)| (c.subject().as_raw().to_vec(), c.issuer().as_raw().to_vec()))
            .collect();
        let Some((_, mut issuer)) = names.first().cloned() else {
            return 0;
        };
        let mut used = 0;
        while !self.subjects.contains(&issuer) && used < names.len() {
            match names[1..].iter().find(|(subject, _)| *subject == issuer) {
                Some((_, next)) => {
                    issuer = next.clone();
                    used += 1;
                }
                None => break,
            }
        }
        used
    }
}

/// Why a certificate did not verify, with OpenSSL's text for `ssl-client-verify: FAILED:…`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    UnknownIssuer,
    Expired,
    NotYetValid,
    Revoked,
    UnknownRevocation,
    BadSignature,
    TooLong,
    Purpose,
    Other,
}

impl Failure {
    fn of(e: &rustls::Error) -> Failure {
        match e {
            rustls::Error::InvalidCertificate(e) => match e {
                CertificateError::UnknownIssuer => Failure::UnknownIssuer,
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    Failure::Expired
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    Failure::NotYetValid
                }
                CertificateError::Revoked => Failure::Revoked,
                CertificateError::UnknownRevocationStatus => Failure::UnknownRevocation,
                CertificateError::BadSignature => Failure::BadSignature,
                CertificateError::InvalidPurpose
                | CertificateError::InvalidPurposeContext { .. } => Failure::Purpose,
                _ => Failure::Other,
            },
            _ => Failure::Other,
        }
    }

    /// OpenSSL's `X509_verify_cert_error_string`, what nginx's `$ssl_client_verify` says.
    fn text(self) -> &'static str {
        match self {
            Failure::UnknownIssuer => "unable to get local issuer certificate",
            Failure::Expired => "certificate has expired",
            Failure::NotYetValid => "certificate is not yet valid",
            Failure::Revoked => "certificate revoked",
            Failure::UnknownRevocation => "unable to get certificate CRL",
            Failure::BadSignature => "certificate signature failure",
            Failure::TooLong => "certificate chain too long",
            Failure::Purpose => "unsupported certificate purpose",
            Failure::Other => "certificate verify failed",
        }
    }

    /// nginx's `ngx_ssl_verify_error_optional`: the errors `optional_no_ca` lets pass, those
    /// of a CA it does not know.
    fn ca_only(self) -> bool {
        self == Failure::UnknownIssuer
    }
}

/// One Ingress's (or, scope host, one host's) certificate rules.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClientCertPolicy {
    #[serde(serialize_with = "ca_secret")]
    pub ca: Arc<ClientCa>,
    pub verify: VerifyClient,
    /// `auth-tls-verify-depth` (default 1).
    pub depth: u32,
    /// `auth-tls-error-page`: where a missing or bad certificate is sent (302).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_value_text"
    )]
    pub error_page: Option<HeaderValue>,
    /// `auth-tls-pass-certificate-to-upstream`: `ssl-client-cert` upstream.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pass_certificate: bool,
    /// `auth-tls-match-cn`: an unanchored regular expression over the subject DN.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "regex_text")]
    pub match_cn: Option<regex::Regex>,
    pub scope: Scope,
    /// The Ingress whose annotations these are (`namespace/name`).
    pub ingress: String,
}

impl PartialEq for ClientCertPolicy {
    fn eq(&self, other: &ClientCertPolicy) -> bool {
        self.ca == other.ca
            && self.verify == other.verify
            && self.depth == other.depth
            && self.error_page == other.error_page
            && self.pass_certificate == other.pass_certificate
            && self.match_cn.as_ref().map(regex::Regex::as_str)
                == other.match_cn.as_ref().map(regex::Regex::as_str)
            && self.scope == other.scope
            && self.ingress == other.ingress
    }
}

fn ca_secret<S: Serializer>(ca: &Arc<ClientCa>, serializer: S) -> Result<S::Ok, S::Error> {
    let text = if ca.has_crl {
        format!("{} (ca.crt, ca.crl)", ca.secret)
    } else {
        format!("{} (ca.crt)", ca.secret)
    };
    serializer.serialize_str(&text)
}

fn regex_text<S: Serializer>(re: &Option<regex::Regex>, serializer: S) -> Result<S::Ok, S::Error> {
    re.as_ref().map(regex::Regex::as_str).serialize(serializer)
}

/// What a request's certificate decides: passed on with its headers, or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// nginx's 496 (answered 400): `on` and no certificate.
    Missing,
    /// nginx's 495 (answered 400): a certificate that did not verify.
    Invalid,
    /// `auth-tls-match-cn` did not match (403).
    Unauthorized,
}

/// A connection's certificate checked against one policy: the verdict and the headers sent
/// upstream (nginx's `$ssl_client_*` variables; `None`: empty, so not sent).
#[derive(Clone, Debug)]
pub struct Checked {
    pub verdict: Verdict,
    pub verify: HeaderValue,
    pub subject_dn: Option<HeaderValue>,
    pub issuer_dn: Option<HeaderValue>,
    /// `$ssl_client_escaped_cert`, with `auth-tls-pass-certificate-to-upstream`.
    pub escaped_cert: Option<HeaderValue>,
}

impl ClientCertPolicy {
    /// Checks the certificate chain a TLS client presented (`None`: none). `https`: false for
    /// plain HTTP, where nginx checks nothing and its variables are empty (scope host); scope
    /// path then requires what `on` requires (no plain-HTTP way around it).
    pub fn check(&self, chain: Option<&[CertificateDer<'_>]>, https: bool) -> Checked {
        let none = |verdict| Checked {
            verdict,
            verify: HeaderValue::from_static("NONE"),
            subject_dn: None,
            issuer_dn: None,
            escaped_cert: None,
        };
        let mut checked = match chain.filter(|c| !c.is_empty()) {
            _ if self.verify == VerifyClient::Off => none(Verdict::Pass),
            None if !https => {
                let missing = self.scope == Scope::Path && self.verify == VerifyClient::On;
                let mut checked = none(if missing {
                    Verdict::Missing
                } else {
                    Verdict::Pass
                });
                checked.verify = HeaderValue::from_static("");
                checked
            }
            None if self.verify == VerifyClient::On => none(Verdict::Missing),
            None => none(Verdict::Pass),
            Some(chain) => {
                let (verdict, verify) = match self.ca.verify(chain, self.depth) {
                    Ok(()) => (Verdict::Pass, HeaderValue::from_static("SUCCESS")),
                    Err(failure) => {
                        let pass = self.verify == VerifyClient::OptionalNoCa && failure.ca_only();
                        let text = format!("FAILED:{}", failure.text());
                        let verdict = if pass {
                            Verdict::Pass
                        } else {
                            Verdict::Invalid
                        };
                        (verdict, HeaderValue::try_from(text).expect("ASCII"))
                    }
                };
                let names = x509_parser::parse_x509_certificate(&chain[0])
                    .ok()
                    .map(|(_, c)| (rfc2253(c.subject()), rfc2253(c.issuer())));
                let (subject, issuer) = names.unwrap_or_default();
                Checked {
                    verdict,
                    verify,
                    subject_dn: header(subject),
                    issuer_dn: header(issuer),
                    escaped_cert: self
                        .pass_certificate
                        .then(|| header(escaped_pem(&chain[0])))
                        .flatten(),
                }
            }
        };
        if checked.verdict == Verdict::Pass {
            if let Some(re) = &self.match_cn {
                let subject = checked
                    .subject_dn
                    .as_ref()
                    .map_or("", |v| v.to_str().unwrap_or_default());
                if !re.is_match(subject) {
                    checked.verdict = Verdict::Unauthorized;
                }
            }
        }
        checked
    }
}

fn header(text: String) -> Option<HeaderValue> {
    if text.is_empty() {
        return None;
    }
    HeaderValue::try_from(text).ok()
}

/// A name as nginx's `$ssl_client_s_dn` writes it since 1.11.6: RFC 2253 (OpenSSL's
/// `XN_FLAG_RFC2253`), the last RDN first, `,` between RDNs and `+` within one.
pub fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    use x509_parser::oid_registry as oids;
    let rdns: Vec<_> = name.iter_rdn().collect();
    let mut out = String::new();
    for rdn in rdns.iter().rev() {
        if !out.is_empty() {
            out.push(',');
        }
        for (i, attribute) in rdn.iter().enumerate() {
            if i > 0 {
                out.push('+');
            }
            let oid = attribute.attr_type();
            let short = [
                (&oids::OID_X509_COMMON_NAME, "CN"),
                (&oids::OID_X509_COUNTRY_NAME, "C"),
                (&oids::OID_X509_LOCALITY_NAME, "L"),
                (&oids::OID_X509_STATE_OR_PROVINCE_NAME, "ST"),
                (&oids::OID_X509_ORGANIZATION_NAME, "O"),
                (&oids::OID_X509_ORGANIZATIONAL_UNIT, "OU"),
                (&oids::OID_X509_STREET_ADDRESS, "street"),
                (&oids::OID_DOMAIN_COMPONENT, "DC"),
                (&oids::OID_PKCS9_EMAIL_ADDRESS, "emailAddress"),
                (&oids::OID_X509_SERIALNUMBER, "serialNumber"),
            ]
            .iter()
            .find(|(known, _)| *known == oid)
            .map(|(_, short)| (*short).to_owned())
            .unwrap_or_else(|| oid.to_id_string());
            out.push_str(&short);
            out.push('=');
            match attribute.as_str() {
                Ok(value) => escape_dn_value(value, &mut out),
                Err(_) => {
                    out.push('#');
                    for byte in attribute.attr_value().data.iter() {
                        out.push_str(&format!("{byte:02X}"));
                    }
                }
            }
        }
    }
    out
}

/// RFC 2253 §2.4: `,+"\<>;` escaped, and `#` or a space first, a space last; as OpenSSL's
/// `ASN1_STRFLGS_RFC2253`, control characters and every byte of a non-ASCII character as
/// `\XX`.
fn escape_dn_value(value: &str, out: &mut String) {
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        if !c.is_ascii() || c.is_ascii_control() {
            let mut bytes = [0; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                out.push_str(&format!("\\{byte:02X}"));
            }
            continue;
        }
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
}

/// nginx's `$ssl_client_escaped_cert`: the certificate's PEM, every byte but `A-Za-z0-9-._~`
/// percent-encoded (`ngx_escape_uri`'s URI component).
pub fn escaped_pem(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    let mut out = String::with_capacity(pem.len() * 3 / 2);
    for byte in pem.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::aws_lc_rs::default_provider())
    }

    struct Ca {
        issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
        pem: String,
    }

    fn ca(name: &str) -> Ca {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    fn client(ca: &Ca, cn: &str) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CountryName, "DE");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn policy(ca: &Ca, verify: VerifyClient) -> ClientCertPolicy {
        ClientCertPolicy {
            ca: Arc::new(
                ClientCa::from_pem("ns/ca".into(), ca.pem.as_bytes(), None, provider()).unwrap(),
            ),
            verify,
            depth: 1,
            error_page: None,
            pass_certificate: true,
            match_cn: None,
            scope: Scope::Host,
            ingress: "ns/app".into(),
        }
    }

    #[test]
    fn verdicts_follow_nginx_ssl_verify_client() {
        let ours = ca("Our CA");
        let theirs = ca("Their CA");
        let good = client(&ours, "alice");
        let foreign = client(&theirs, "mallory");
        let on = policy(&ours, VerifyClient::On);
        let checked = on.check(Some(std::slice::from_ref(&good)), true);
        assert_eq!(checked.verdict, Verdict::Pass);
        assert_eq!(checked.verify, "SUCCESS");
        // rcgen writes CN, C, O: RFC 2253 lists them last first.
        assert_eq!(checked.subject_dn.unwrap(), "O=Acme\\, Inc.,C=DE,CN=alice");
        assert_eq!(checked.issuer_dn.unwrap(), "CN=Our CA");
        let pem = checked.escaped_cert.unwrap();
        assert!(pem
            .to_str()
            .unwrap()
            .starts_with("-----BEGIN%20CERTIFICATE-----%0A"));
        assert_eq!(on.check(None, true).verdict, Verdict::Missing);
        let bad = on.check(Some(std::slice::from_ref(&foreign)), true);
        assert_eq!(bad.verdict, Verdict::Invalid);
        assert_eq!(bad.verify, "FAILED:unable to get local issuer certificate");
        // Plain HTTP: nginx checks nothing (scope host); scope path refuses.
        assert_eq!(on.check(None, false).verdict, Verdict::Pass);
        let path = ClientCertPolicy {
            scope: Scope::Path,
            ..policy(&ours, VerifyClient::On)
        };
        assert_eq!(path.check(None, false).verdict, Verdict::Missing);

        let optional = policy(&ours, VerifyClient::Optional);
        assert_eq!(optional.check(None, true).verdict, Verdict::Pass);
        assert_eq!(optional.check(None, true).verify, "NONE");
        let foreign_chain = [foreign.clone()];
        assert_eq!(
            optional.check(Some(&foreign_chain), true).verdict,
            Verdict::Invalid
        );
        let no_ca = policy(&ours, VerifyClient::OptionalNoCa);
        let passed = no_ca.check(Some(&foreign_chain), true);
        assert_eq!(passed.verdict, Verdict::Pass);
        assert!(passed.verify.to_str().unwrap().starts_with("FAILED:"));
        assert_eq!(
            policy(&ours, VerifyClient::Off)
                .check(Some(&foreign_chain), true)
                .verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn dn_values_are_escaped_as_openssl_rfc2253() {
        let mut out = String::new();
        escape_dn_value(" #a,b+c\"d\\e<f>g;h é\u{1} ", &mut out);
        assert_eq!(out, "\\ #a\\,b\\+c\\\"d\\\\e\\<f\\>g\\;h \\C3\\A9\\01\\ ");
    }

    #[test]
    fn match_cn_is_an_unanchored_pattern_over_the_subject_dn() {
        let ours = ca("Our CA");
        let good = [client(&ours, "alice")];
        let mut p = policy(&ours, VerifyClient::Optional);
        p.match_cn = Some(regex::Regex::new("CN=(bob|alice)").unwrap());
        assert_eq!(p.check(Some(&good), true).verdict, Verdict::Pass);
        p.match_cn = Some(regex::Regex::new("CN=bob").unwrap());
        assert_eq!(p.check(Some(&good), true).verdict, Verdict::Unauthorized);
        // No certificate: the empty DN does not match either (nginx's `if`).
        assert_eq!(p.check(None, true).verdict, Verdict::Unauthorized);
    }

    #[test]
    fn depth_counts_intermediates() {
        let root = ca("Root");
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Intermediate");
        let inter_cert = params.signed_by(&key, &root.issuer).unwrap();
        let inter = Ca {
            pem: inter_cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        };
        let leaf = client(&inter, "carol");
        let chain = [leaf, inter_cert.der().clone()];
        let mut p = policy(&root, VerifyClient::On);
        p.depth = 1;
        assert_eq!(p.check(Some(&chain), true).verdict, Verdict::Pass);
        assert_eq!(
            p.check(Some(&chain[..1]), true).verdict,
            Verdict::Invalid,
            "the intermediate is needed"
        );
        let p0 = ClientCertPolicy {
            depth: 0,
            ..policy(&root, VerifyClient::On)
        };
        let checked = p0.check(Some(&chain), true);
        assert_eq!(checked.verify, "FAILED:certificate chain too long");
    }

    #[test]
    fn an_unusable_ca_is_an_error() {
        assert!(ClientCa::from_pem("ns/x".into(), b"", None, provider()).is_err());
        assert!(ClientCa::from_pem("ns/x".into(), b"not pem", None, provider()).is_err());
        let ours = ca("Our CA");
        let junk = Some(&b"junk"[..]);
        assert!(ClientCa::from_pem("ns/x".into(), ours.pem.as_bytes(), junk, provider()).is_err());
    }
}
