//! Client certificates (`auth-tls-*`) over real sockets, the behaviours of ingress-nginx's
//! `test/e2e/annotations/authtls.go` and more: the handshake asks for a certificate only on
//! the host that wants one and never fails over it; a missing or bad certificate is answered
//! 400 with nginx's texts (or a 302 to `auth-tls-error-page`), `auth-tls-match-cn` 403; the
//! `ssl-client-*` headers reach the backend; `sluice.dev/auth-tls-scope: path` keeps the rules
//! to one Ingress's paths. Certificates from rcgen; rustls clients, and curl as an independent
//! one.

use std::sync::{Arc, Mutex};

use http::{Request, StatusCode};
use http_body_util::Full;
use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::ServerName;
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use serde_json::{json, Value};
use tokio::net::TcpStream;

use crate::support::*;

const HOST: &str = "mtls.example.com";
const OTHER: &str = "open.example.com";

/// The client's side of one handshake: the certificate it offers, and what the server asked.
#[derive(Debug, Default)]
struct Offer {
    key: Option<Arc<CertifiedKey>>,
    /// The CA names of the CertificateRequest; `None`: none came.
    asked: Mutex<Option<Vec<Vec<u8>>>>,
}

impl ResolvesClientCert for Offer {
    fn resolve(&self, hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        *self.asked.lock().unwrap() = Some(hints.iter().map(|h| h.to_vec()).collect());
        self.key.clone()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A client certificate with the chain it sends (intermediates after it).
fn offer(leaf: &Leaf, intermediates: &[&TestCa]) -> Arc<Offer> {
    let mut chain = leaf.cert_pem.clone();
    for ca in intermediates {
        chain.push_str(&ca.root_pem());
    }
    let key = model::tls::certified_key_from_pem(chain.as_bytes(), leaf.key_pem.as_bytes())
        .expect("a certificate and its key");
    Arc::new(Offer {
        key: Some(key),
        asked: Mutex::default(),
    })
}

fn no_offer() -> Arc<Offer> {
    Arc::new(Offer::default())
}

struct Site {
    h: Harness,
    server_ca: TestCa,
    _echo: backend::Backend,
}

/// A TLS connection to `host` with this offer (TLS 1.2 when `tls12`), offering `alpn`.
async fn connect(
    site: &Site,
    host: &str,
    offer: &Arc<Offer>,
    tls12: bool,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(site.server_ca.root().clone()).unwrap();
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let mut config =
        rustls::ClientConfig::builder_with_provider(model::tls::crypto_provider().clone())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_client_cert_resolver(offer.clone());
    config.alpn_protocols = vec![alpn.to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = bounded(TcpStream::connect(site.h.https())).await.unwrap();
    let name = ServerName::try_from(host.to_owned()).unwrap();
    bounded(connector.connect(name, stream))
        .await
        .expect("the handshake never fails over the client certificate")
}

/// HTTPS (HTTP/1.1) to `host` with this offer (TLS 1.2 when `tls12`): the echo's answer.
async fn get_with(site: &Site, host: &str, path: &str, offer: &Arc<Offer>, tls12: bool) -> Reply {
    let tls = connect(site, host, offer, tls12, b"http/1.1").await;
    let mut client = Client::over(tls).await;
    let request = Request::get(path)
        .header("host", host)
        // A client's own value never passes (nginx's proxy_set_header replaces it).
        .header("ssl-client-verify", "SUCCESS")
        .header("ssl-client-subject-dn", "CN=admin")
        .body(Full::default())
        .unwrap();
    client.send(request).await.unwrap()
}

/// A handshake for `OTHER`, a request for `HOST`.
async fn misdirected(site: &Site) -> Reply {
    let (tls, _) = site
        .server_ca
        .connect(site.h.https(), OTHER, &[b"http/1.1"])
        .await
        .unwrap();
    Client::over(tls).await.get(HOST, "/echo").await
}

async fn get(site: &Site, host: &str, offer: &Arc<Offer>) -> Reply {
    get_with(site, host, "/echo", offer, false).await
}

fn asked(offer: &Offer) -> bool {
    offer.asked.lock().unwrap().is_some()
}

/// The header the backend received.
fn seen(reply: &Reply, name: &str) -> Option<String> {
    reply.json()["headers"][name].as_str().map(str::to_owned)
}

fn ca_secret(name: &str, ca: &TestCa, crl: Option<String>) -> Value {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut data = json!({"ca.crt": b64(&ca.root_pem())});
    if let Some(crl) = crl {
        data["ca.crl"] = json!(b64(&crl));
    }
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    })
}

/// An Ingress for `host` with these paths to `echo`, TLS from `server-tls`, annotations
/// (ingress-nginx's, and `scope` as `sluice.dev/auth-tls-scope`).
fn site_ingress(
    name: &str,
    host: &str,
    paths: &[&str],
    annotations: &[(&str, &str)],
    scope: Option<&str>,
) -> Value {
    let paths = paths
        .iter()
        .map(|p| path(p, "Prefix", to("echo")))
        .collect();
    let mut object = annotated(
        name,
        annotations,
        json!({
            "tls": [{"hosts": [host], "secretName": "server-tls"}],
            "rules": [rule(host, paths)],
        }),
    );
    if let Some(scope) = scope {
        object["metadata"]["annotations"]["sluice.dev/auth-tls-scope"] = json!(scope);
    }
    object
}

/// A proxy serving `HOST` (with `ingresses`) and `OTHER` (no client certificates), both on
/// the one HTTPS listener, the client CA's Secret `client-ca`.
async fn start(client_ca: &TestCa, crl: Option<String>, ingresses: Vec<Value>) -> Site {
    let echo = start_backend("echo").await;
    let server_ca = TestCa::new();
    let server = server_ca.leaf(&[HOST, OTHER]);
    let mut objects = vec![
        service("echo", &[("http", 80)]),
        tls_secret("server-tls", &server),
        ca_secret("client-ca", client_ca, crl),
        site_ingress("open", OTHER, &["/"], &[], None),
    ];
    objects.extend(ingresses);
    objects.extend(slices("echo", &[addr_of(&echo)]));
    let mut h = Harness::start();
    h.apply_allowing_diagnostics(&objects);
    Site {
        h,
        server_ca,
        _echo: echo,
    }
}

fn mtls(annotations: &[(&str, &str)]) -> Vec<Value> {
    let mut all = vec![("auth-tls-secret", "default/client-ca")];
    all.extend_from_slice(annotations);
    vec![site_ingress("mtls", HOST, &["/"], &all, None)]
}

#[tokio::test]
async fn verify_client_on_answers_400_without_a_good_certificate_and_passes_its_names() {
    let client_ca = TestCa::new();
    let site = start(&client_ca, None, mtls(&[])).await;
    let alice = offer(&client_ca.client("alice", 1), &[]);

    for tls12 in [false, true] {
        let reply = get_with(&site, HOST, "/echo", &alice, tls12).await;
        assert_eq!(reply.status, StatusCode::OK, "TLS 1.2: {tls12}");
        assert_eq!(seen(&reply, "ssl-client-verify").unwrap(), "SUCCESS");
        assert_eq!(seen(&reply, "ssl-client-subject-dn").unwrap(), "CN=alice");
        assert_eq!(
            seen(&reply, "ssl-client-issuer-dn").unwrap(),
            "CN=Sluice test CA"
        );
        assert_eq!(
            seen(&reply, "ssl-client-cert"),
            None,
            "not asked to pass it"
        );
    }
    // The CertificateRequest names the CA of the Secret.
    let names = alice.asked.lock().unwrap().clone().unwrap();
    assert_eq!(names.len(), 1);
    assert!(names[0].windows(14).any(|w| w == b"Sluice test CA"));

    let none = no_offer();
    let reply = get(&site, HOST, &none).await;
    assert!(asked(&none), "the host's handshake asks for a certificate");
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.text(), "400 No required SSL certificate was sent\n");

    // Another CA's certificate (a CA of another name, so its issuer is unknown).
    let stranger = TestCa::new().intermediate("Another CA");
    let reply = get(&site, HOST, &offer(&stranger.client("mallory", 2), &[])).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.text(), "400 The SSL certificate error\n");

    // SNI for the other host, Host for this one (HTTP/2 connection reuse does it): nginx's
    // 421, so that a browser retries on a connection of its own.
    let reply = get_with(&site, OTHER, "/echo", &alice, false).await;
    assert_eq!(reply.status, StatusCode::OK, "other hosts are served");
    let reply = misdirected(&site).await;
    assert_eq!(reply.status, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(reply.text(), "421 Misdirected Request\n");

    // The other host on the listener: no CertificateRequest, served as before.
    let other = no_offer();
    let reply = get(&site, OTHER, &other).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(!asked(&other), "other hosts' handshakes are unchanged");
    assert_eq!(
        seen(&reply, "ssl-client-verify").unwrap(),
        "SUCCESS",
        "no policy there: the client's header passes as any header"
    );
}

#[tokio::test]
async fn optional_optional_no_ca_and_off_as_nginx() {
    let client_ca = TestCa::new();
    let stranger = TestCa::new().intermediate("Another CA");
    let alice = offer(&client_ca.client("alice", 1), &[]);
    let mallory = offer(&stranger.client("mallory", 2), &[]);

    let site = start(
        &client_ca,
        None,
        mtls(&[("auth-tls-verify-client", "optional")]),
    )
    .await;
    let reply = get(&site, HOST, &no_offer()).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(seen(&reply, "ssl-client-verify").unwrap(), "NONE");
    assert_eq!(seen(&reply, "ssl-client-subject-dn"), None);
    assert_eq!(get(&site, HOST, &alice).await.status, StatusCode::OK);
    assert_eq!(
        get(&site, HOST, &mallory).await.status,
        StatusCode::BAD_REQUEST
    );

    let site = start(
        &client_ca,
        None,
        mtls(&[("auth-tls-verify-client", "optional_no_ca")]),
    )
    .await;
    let reply = get(&site, HOST, &mallory).await;
    assert_eq!(reply.status, StatusCode::OK, "an unknown CA passes");
    assert_eq!(
        seen(&reply, "ssl-client-verify").unwrap(),
        "FAILED:unable to get local issuer certificate"
    );
    assert_eq!(seen(&reply, "ssl-client-subject-dn").unwrap(), "CN=mallory");
    assert_eq!(get(&site, HOST, &no_offer()).await.status, StatusCode::OK);

    let site = start(&client_ca, None, mtls(&[("auth-tls-verify-client", "off")])).await;
    let none = no_offer();
    let reply = get(&site, HOST, &none).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(!asked(&none), "off: no certificate is asked for");
    assert_eq!(seen(&reply, "ssl-client-verify").unwrap(), "NONE");
    assert_eq!(misdirected(&site).await.status, StatusCode::OK);
}

#[tokio::test]
async fn verify_depth_counts_the_intermediates() {
    let client_ca = TestCa::new();
    let first = client_ca.intermediate("First intermediate");
    let second = first.intermediate("Second intermediate");
    let one = offer(&first.client("one", 3), &[&first]);
    let two = offer(&second.client("two", 4), &[&second, &first]);

    // Default depth 1: one intermediate passes, two do not.
    let site = start(&client_ca, None, mtls(&[])).await;
    let reply = get(&site, HOST, &one).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        seen(&reply, "ssl-client-issuer-dn").unwrap(),
        "CN=First intermediate"
    );
    assert_eq!(get(&site, HOST, &two).await.status, StatusCode::BAD_REQUEST);

    let site = start(
        &client_ca,
        None,
        mtls(&[
            ("auth-tls-verify-depth", "2"),
            ("auth-tls-verify-client", "optional_no_ca"),
        ]),
    )
    .await;
    let reply = get(&site, HOST, &two).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(seen(&reply, "ssl-client-verify").unwrap(), "SUCCESS");
}

#[tokio::test]
async fn match_cn_answers_403_when_the_subject_does_not_match() {
    let client_ca = TestCa::new();
    let alice = offer(&client_ca.client("alice", 1), &[]);
    let site = start(
        &client_ca,
        None,
        mtls(&[("auth-tls-match-cn", "CN=notgonnamatch")]),
    )
    .await;
    let reply = get(&site, HOST, &alice).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(
        reply.text(),
        "403 Forbidden: client certificate unauthorized\n"
    );

    // One of the alternatives matching is enough (ingress-nginx's e2e case).
    let site = start(
        &client_ca,
        None,
        mtls(&[("auth-tls-match-cn", "CN=(bob|alice|carol)")]),
    )
    .await;
    assert_eq!(get(&site, HOST, &alice).await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_certificate_is_passed_url_escaped_and_the_error_page_replaces_the_400() {
    let client_ca = TestCa::new();
    let leaf = client_ca.client("alice", 1);
    let site = start(
        &client_ca,
        None,
        mtls(&[
            ("auth-tls-pass-certificate-to-upstream", "true"),
            ("auth-tls-error-page", "http://errors.example.com/cert"),
        ]),
    )
    .await;
    let reply = get(&site, HOST, &offer(&leaf, &[])).await;
    assert_eq!(reply.status, StatusCode::OK);
    let escaped = seen(&reply, "ssl-client-cert").unwrap();
    assert!(escaped.starts_with("-----BEGIN%20CERTIFICATE-----%0A"));
    let pem = escaped
        .replace("%20", " ")
        .replace("%0A", "\n")
        .replace("%2B", "+")
        .replace("%2F", "/")
        .replace("%3D", "=");
    assert!(!pem.contains('%'), "{pem}");
    assert_eq!(
        rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap(),
        leaf.der
    );

    let reply = get(&site, HOST, &no_offer()).await;
    assert_eq!(reply.status, StatusCode::FOUND);
    assert_eq!(reply.headers["location"], "http://errors.example.com/cert");
}

#[tokio::test]
async fn a_revoked_certificate_is_refused_by_the_crl() {
    let client_ca = TestCa::new();
    let crl = client_ca.crl_pem(&[7]);
    let site = start(
        &client_ca,
        Some(crl),
        mtls(&[("auth-tls-verify-client", "optional")]),
    )
    .await;
    assert_eq!(
        get(&site, HOST, &offer(&client_ca.client("kept", 6), &[]))
            .await
            .status,
        StatusCode::OK
    );
    let reply = get(&site, HOST, &offer(&client_ca.client("revoked", 7), &[])).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.text(), "400 The SSL certificate error\n");
}

/// Two Ingresses of `HOST`: `a-mtls` (`/echo/api`, the client CA, `more` annotations, `scope`)
/// and `b-public` (`/echo/public`, none).
fn api_and_public(more: &[(&str, &str)], scope: Option<&str>) -> Vec<Value> {
    let mut annotations = vec![("auth-tls-secret", "default/client-ca")];
    annotations.extend_from_slice(more);
    vec![
        site_ingress("a-mtls", HOST, &["/echo/api"], &annotations, scope),
        site_ingress("b-public", HOST, &["/echo/public"], &[], None),
    ]
}

/// ingress-nginx's trap: the first Ingress of a host that sets auth-tls-secret decides for
/// the whole host, another Ingress's paths included.
#[tokio::test]
async fn scope_host_covers_every_ingress_of_the_host() {
    let client_ca = TestCa::new();
    let no_redirect = [("ssl-redirect", "false")];
    let site = start(&client_ca, None, api_and_public(&no_redirect, None)).await;
    // Plain HTTP is not checked (nginx checks certificates of TLS connections only), and a
    // client's own ssl-client-verify does not pass.
    let request = Request::get("/echo/api")
        .header("host", HOST)
        .header("ssl-client-verify", "SUCCESS")
        .body(Full::default())
        .unwrap();
    let reply = Client::connect(site.h.http())
        .await
        .send(request)
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(seen(&reply, "ssl-client-verify"), None);
    let reply = get_with(&site, HOST, "/echo/public", &no_offer(), false).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let alice = offer(&client_ca.client("alice", 1), &[]);
    let reply = get_with(&site, HOST, "/echo/public", &alice, false).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(seen(&reply, "ssl-client-subject-dn").unwrap(), "CN=alice");
}

/// Beyond ingress-nginx: `sluice.dev/auth-tls-scope: path` keeps an Ingress's rules to its
/// own paths; the host's other paths stay public.
#[tokio::test]
async fn scope_path_keeps_the_rules_to_the_ingress_s_paths() {
    let client_ca = TestCa::new();
    let no_redirect = [("ssl-redirect", "false")];
    let site = start(&client_ca, None, api_and_public(&no_redirect, Some("path"))).await;
    let none = no_offer();
    let reply = get_with(&site, HOST, "/echo/public", &none, false).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(asked(&none), "the host's handshake asks (optionally)");
    assert_eq!(
        seen(&reply, "ssl-client-verify").unwrap(),
        "SUCCESS",
        "a public path has no policy"
    );
    let reply = get_with(&site, HOST, "/echo/api", &no_offer(), false).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let alice = offer(&client_ca.client("alice", 1), &[]);
    let reply = get_with(&site, HOST, "/echo/api", &alice, false).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(seen(&reply, "ssl-client-verify").unwrap(), "SUCCESS");
    // HTTP/2: one connection, both paths.
    let mut h2 = H2Client::over(connect(&site, HOST, &alice, false, b"h2").await).await;
    let reply = h2.get(&format!("https://{HOST}/echo/api")).await;
    assert_eq!(reply.version, http::Version::HTTP_2);
    assert_eq!(seen(&reply, "ssl-client-subject-dn").unwrap(), "CN=alice");
    let reply = h2.get(&format!("https://{HOST}/echo/public")).await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut h2 = H2Client::over(connect(&site, HOST, &none, false, b"h2").await).await;
    let reply = h2.get(&format!("https://{HOST}/echo/api")).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    // Plain HTTP has no way around it, even without the redirect to HTTPS (which the public
    // path keeps).
    let reply = crate::support::get(site.h.http(), HOST, "/echo/api").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let reply = crate::support::get(site.h.http(), HOST, "/echo/public").await;
    assert_eq!(reply.status, StatusCode::PERMANENT_REDIRECT);
}

#[tokio::test]
async fn a_secret_that_cannot_be_used_refuses_the_host() {
    let client_ca = TestCa::new();
    let mut ingresses = vec![site_ingress(
        "a-mtls",
        HOST,
        &["/echo/api"],
        &[("auth-tls-secret", "default/no-such-secret")],
        None,
    )];
    ingresses.push(site_ingress("b-public", HOST, &["/echo/public"], &[], None));
    let site = start(&client_ca, None, ingresses).await;
    let alice = offer(&client_ca.client("alice", 1), &[]);
    for path in ["/echo/api", "/echo/public"] {
        let reply = get_with(&site, HOST, path, &alice, false).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
    }
    assert_eq!(get(&site, OTHER, &no_offer()).await.status, StatusCode::OK);
}

/// ingress-nginx's auth location gets the certificate's headers too: an auth server that
/// records them and lets everyone in.
#[tokio::test]
async fn the_auth_sub_request_carries_the_certificate_s_headers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let auth = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0; 4096];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head: Vec<u8> = seen.drain(..end + 4).collect();
                        record
                            .lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&head).to_lowercase());
                        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if stream.write_all(ok).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    let client_ca = TestCa::new();
    let url = format!("http://{auth}/check");
    let site = start(
        &client_ca,
        None,
        mtls(&[("auth-tls-verify-client", "optional"), ("auth-url", &url)]),
    )
    .await;
    let reply = get(&site, HOST, &offer(&client_ca.client("alice", 1), &[])).await;
    assert_eq!(reply.status, StatusCode::OK);
    let reply = get(&site, HOST, &no_offer()).await;
    assert_eq!(reply.status, StatusCode::OK);
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(
        heads[0].contains("ssl-client-verify: success\r\n"),
        "{}",
        heads[0]
    );
    assert!(heads[0].contains("ssl-client-subject-dn: cn=alice\r\n"));
    assert!(
        heads[1].contains("ssl-client-verify: none\r\n"),
        "{}",
        heads[1]
    );
    assert!(
        !heads[1].contains("ssl-client-subject-dn"),
        "the client's own is removed"
    );
}

/// curl (OpenSSL) as an independent client: its certificate passes, none gets nginx's 400.
#[tokio::test]
async fn curl_with_and_without_a_client_certificate() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("curl not found; skipped");
        return;
    }
    let client_ca = TestCa::new();
    let site = start(&client_ca, None, mtls(&[])).await;
    let dir = tempfile::tempdir().unwrap();
    let leaf = client_ca.client("curl-client", 9);
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let cert = write("client.crt", &leaf.cert_pem);
    let key = write("client.key", &leaf.key_pem);
    let ca = write("server-ca.crt", &site.server_ca.root_pem());
    let port = site.h.https().port();
    let curl = |with_cert: bool| {
        let (cert, key, ca) = (cert.clone(), key.clone(), ca.clone());
        tokio::task::spawn_blocking(move || {
            let mut command = std::process::Command::new("curl");
            command
                .args(["-sS", "--max-time", "10", "--cacert"])
                .arg(&ca)
                .arg("--resolve")
                .arg(format!("{HOST}:{port}:127.0.0.1"));
            if with_cert {
                command.arg("--cert").arg(&cert).arg("--key").arg(&key);
            }
            let out = command
                .arg(format!("https://{HOST}:{port}/echo"))
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
    };
    let body = curl(true).await.unwrap();
    let echoed: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}"));
    assert_eq!(echoed["headers"]["ssl-client-verify"], "SUCCESS");
    assert_eq!(echoed["headers"]["ssl-client-subject-dn"], "CN=curl-client");
    assert_eq!(
        curl(false).await.unwrap(),
        "400 No required SSL certificate was sent\n"
    );
}

/// A handshake with this offer that sends `sni` (none: no SNI), accepting whatever server
/// certificate comes (the default one, for a name no certificate is for).
async fn connect_named(
    site: &Site,
    sni: Option<&str>,
    offer: &Arc<Offer>,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let provider = model::tls::crypto_provider().clone();
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(model::tls::AcceptAnyCertificate(provider)))
        .with_client_cert_resolver(offer.clone());
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.enable_sni = sni.is_some();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = bounded(TcpStream::connect(site.h.https())).await.unwrap();
    let name = ServerName::try_from(sni.unwrap_or("no-sni.invalid").to_owned()).unwrap();
    bounded(connector.connect(name, stream))
        .await
        .expect("the handshake never fails over the client certificate")
}

/// A rule without host is ingress-nginx's default server `_`, and its auth-tls-* are that
/// server's `ssl_verify_client` (controller.go gives `_` the first such Ingress's): a
/// handshake with no SNI, or one naming no host, is asked for a certificate and the rules
/// apply; a named host's handshake is not asked, and a request of the catch-all on it gets 421.
#[tokio::test]
async fn a_rule_without_host_asks_the_handshakes_the_catch_all_serves() {
    let client_ca = TestCa::new();
    let catch_all = annotated(
        "catch-all",
        &[("auth-tls-secret", "default/client-ca")],
        json!({"rules": [{"http": {"paths": [path("/", "Prefix", to("echo"))]}}]}),
    );
    let site = start(&client_ca, None, vec![catch_all]).await;
    let alice = client_ca.client("alice", 1);
    for sni in [None, Some("unknown.example.com")] {
        for (offered, status) in [(true, StatusCode::OK), (false, StatusCode::BAD_REQUEST)] {
            let offer = if offered {
                offer(&alice, &[])
            } else {
                no_offer()
            };
            let tls = connect_named(&site, sni, &offer).await;
            assert!(asked(&offer), "{sni:?}: the catch-all's handshake asks");
            let mut client = Client::over(tls).await;
            let reply = client.get("whatever.example.org", "/echo").await;
            assert_eq!(reply.status, status, "{sni:?}, certificate {offered}");
            if offered {
                assert_eq!(
                    seen(&reply, "ssl-client-verify").as_deref(),
                    Some("SUCCESS")
                );
            } else {
                assert!(reply
                    .text()
                    .contains("No required SSL certificate was sent"));
            }
        }
    }
    // A host of its own: its handshake asks nothing and its requests pass.
    let offer = no_offer();
    let tls = connect_named(&site, Some(OTHER), &offer).await;
    assert!(!asked(&offer), "a named host's handshake is its own");
    let mut client = Client::over(tls).await;
    assert_eq!(client.get(OTHER, "/echo").await.status, StatusCode::OK);
    // The catch-all's request on that connection: another server asks (nginx's 421).
    let reply = client.get("whatever.example.org", "/echo").await;
    assert_eq!(reply.status, StatusCode::MISDIRECTED_REQUEST);
}

/// `auth-tls-error-page` as a path: nginx's `error_page 495 496 = /path` is an internal
/// redirect, so the same server's location for that path answers (its status, a GET without
/// the body or the query), where a URL is a 302; a good certificate is not sent there.
#[tokio::test]
async fn an_error_page_path_is_served_from_the_same_host() {
    let client_ca = TestCa::new();
    let site = start(
        &client_ca,
        None,
        mtls(&[("auth-tls-error-page", "/echo/cert-error")]),
    )
    .await;
    let post = |path: &str| {
        Request::post(path)
            .header("host", HOST)
            .body(Full::from("some body"))
            .unwrap()
    };
    for (offered, path, method, body) in [
        (false, "/echo/cert-error", "GET", 0),
        (true, "/echo/api", "POST", 9),
    ] {
        let offer = if offered {
            offer(&client_ca.client("alice", 1), &[])
        } else {
            no_offer()
        };
        let tls = connect(&site, HOST, &offer, false, b"http/1.1").await;
        let mut client = Client::over(tls).await;
        let reply = client.send(post("/echo/api?x=1")).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "certificate {offered}");
        let seen = reply.json();
        assert_eq!(seen["path"], path);
        assert_eq!(seen["method"], method);
        assert_eq!(seen["body_bytes"], body);
        assert_eq!(seen["query"].as_str(), offered.then_some("x=1"));
        let verify = seen["headers"]["ssl-client-verify"].as_str();
        assert_eq!(verify, Some(if offered { "SUCCESS" } else { "NONE" }));
        // The connection carries on: the next request is checked as before.
        let again = client.get(HOST, "/echo/next").await;
        assert_eq!(
            again.json()["path"],
            if offered {
                "/echo/next"
            } else {
                "/echo/cert-error"
            }
        );
    }
}
