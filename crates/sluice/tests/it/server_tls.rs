//! The client-facing handshake's `ssl-*` ConfigMap keys and `ssl-ciphers` annotations, end to
//! end: a real `sluice serve`, and `openssl s_client` (OpenSSL's own client, which speaks the
//! protocols, suites and groups Sluice must refuse) or rustls clients.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);
const HOST: &str = "secure.test";
const OTHER: &str = "other.test";

/// A config folder: two TLS hosts (`secure.test`, `other.test`, one certificate), the
/// ConfigMap's `data`, and `annotations` (YAML lines) on `other.test`'s Ingress.
fn config(test: &str, data: &[(&str, &str)], annotations: &str) -> (std::path::PathBuf, Pod) {
    let dir = temp_dir(test);
    let pod = Pod::start("pod");
    let Leaf {
        cert_pem, key_pem, ..
    } = self_signed(&[HOST, OTHER]);
    let tls = |name: &str, host: &str| tls_app_yaml(name, host, &[pod.addr], "web-tls");
    std::fs::write(dir.join("class.yaml"), CLASS_YAML).unwrap();
    std::fs::write(dir.join("app.yaml"), tls("web", HOST)).unwrap();
    let other = tls("other", OTHER);
    let ingress = "kind: Ingress\nmetadata: {name: other}\n";
    assert!(other.contains(ingress));
    let other = match annotations {
        "" => other,
        lines => other.replacen(
            ingress,
            &format!("kind: Ingress\nmetadata:\n  name: other\n  annotations:\n{lines}"),
            1,
        ),
    };
    std::fs::write(dir.join("other.yaml"), other).unwrap();
    std::fs::write(
        dir.join("secret.yaml"),
        tls_secret_yaml("web-tls", &cert_pem, &key_pem),
    )
    .unwrap();
    write_config_map(&dir, data);
    (dir, pod)
}

fn write_config_map(dir: &Path, data: &[(&str, &str)]) {
    let data: String = data
        .iter()
        .map(|(k, v)| format!("  {k}: \"{v}\"\n"))
        .collect();
    write_atomically(
        &dir.join("configmap.yaml"),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: sluice, namespace: sluice}}\n\
             data:\n{data}"
        ),
    );
}

/// What `openssl s_client` made of a handshake: whether it completed, and all it printed.
struct Handshake {
    ok: bool,
    text: String,
}

/// One `openssl s_client` handshake with `args` (SNI `name`, or none for `None`), bounded in
/// time; it sends nothing and ends at its standard input's end.
fn s_client(addr: SocketAddr, name: Option<&str>, args: &[&str]) -> Handshake {
    let connect = addr.to_string();
    let mut command = Command::new("timeout");
    command.args(["10", "openssl", "s_client", "-connect", &connect]);
    match name {
        Some(name) => command.args(["-servername", name]),
        None => command.arg("-noservername"),
    };
    let output = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let ok = output.status.success() && text.contains("Cipher is ") && !text.contains("(NONE)");
    Handshake { ok, text }
}

fn diagnostics(serve: &Serve) -> String {
    serve.config_json()["config"]["diagnostics"].to_string()
}

#[test]
fn ssl_protocols_tls13_alone_refuses_tls12_clients_until_the_config_map_changes() {
    let (dir, _pod) = config("ssl-protocols", &[("ssl-protocols", "TLSv1.3")], "");
    let serve = Serve::start(&dir, &[]);
    let tls13 = s_client(serve.https, Some(HOST), &["-tls1_3"]);
    assert!(tls13.ok, "{}", tls13.text);
    let tls12 = s_client(serve.https, Some(HOST), &["-tls1_2"]);
    assert!(!tls12.ok, "{}", tls12.text);
    assert!(tls12.text.contains("protocol version"), "{}", tls12.text);
    // A connection made now outlives the change below with the keys it has.
    let mut open = TlsConnection::open(serve.https, HOST, any_certificate()).unwrap();
    assert_eq!(open.get("/").unwrap().status, 200);

    write_config_map(&dir, &[("ssl-protocols", "TLSv1.2 TLSv1.3")]);
    eventually(
        WAIT,
        "TLS 1.2 handshakes once the ConfigMap allows them",
        || {
            s_client(serve.https, Some(HOST), &["-tls1_2"])
                .ok
                .then_some(())
        },
    );
    assert_eq!(open.get("/").unwrap().status, 200);
}

/// A rustls client that takes any certificate (the handshake is what is tested).
fn any_certificate() -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    config
        .dangerous()
        .set_certificate_verifier(Arc::new(model::tls::AcceptAnyCertificate(provider)));
    Arc::new(config)
}

#[test]
fn ssl_ciphers_choose_the_tls12_suite_in_the_server_s_order_and_per_host() {
    let (dir, _pod) = config(
        "ssl-ciphers",
        &[(
            "ssl-ciphers",
            "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384:DHE-RSA-AES256-GCM-SHA384",
        )],
        "    nginx.ingress.kubernetes.io/ssl-ciphers: ECDHE-ECDSA-AES128-GCM-SHA256\n",
    );
    let serve = Serve::start(&dir, &[]);
    // Not in the list: refused.
    let refused = s_client(
        serve.https,
        Some(HOST),
        &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"],
    );
    assert!(!refused.ok, "{}", refused.text);
    // The client prefers ChaCha20; the server's order (ingress-nginx's
    // ssl_prefer_server_ciphers on) gives AES-256-GCM.
    let chosen = s_client(
        serve.https,
        Some(HOST),
        &[
            "-tls1_2",
            "-cipher",
            "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384",
        ],
    );
    assert!(
        chosen
            .text
            .contains("Cipher is ECDHE-ECDSA-AES256-GCM-SHA384"),
        "{}",
        chosen.text
    );
    // TLS 1.3's suites are not ssl-ciphers' business.
    let tls13 = s_client(
        serve.https,
        Some(HOST),
        &["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"],
    );
    assert!(tls13.ok, "{}", tls13.text);
    // other.test's Ingress has its own list: AES-128-GCM only.
    let own = s_client(
        serve.https,
        Some(OTHER),
        &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"],
    );
    assert!(own.ok, "{}", own.text);
    let not_its_own = s_client(
        serve.https,
        Some(OTHER),
        &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384"],
    );
    assert!(!not_its_own.ok, "{}", not_its_own.text);
    // The DHE suite has an ECDHE twin in the list: no diagnostic for it.
    assert!(
        !diagnostics(&serve).contains("ssl-ciphers"),
        "{}",
        diagnostics(&serve)
    );
}

#[test]
fn ssl_ecdh_curve_limits_the_key_exchange_groups() {
    let (dir, _pod) = config("ssl-ecdh-curve", &[("ssl-ecdh-curve", "secp384r1")], "");
    let serve = Serve::start(&dir, &[]);
    let x25519 = s_client(serve.https, Some(HOST), &["-groups", "X25519"]);
    assert!(!x25519.ok, "{}", x25519.text);
    let p384 = s_client(serve.https, Some(HOST), &["-groups", "X25519:P-384"]);
    assert!(p384.ok, "{}", p384.text);
    assert!(p384.text.contains("384"), "{}", p384.text);
    let tls12 = s_client(serve.https, Some(HOST), &["-tls1_2", "-groups", "P-256"]);
    assert!(!tls12.ok, "{}", tls12.text);
}

/// Base64 of 80 bytes, as `openssl rand 80 | openssl enc -A -base64` makes.
const TICKET_KEY: &str = "c2x1aWNlIHRlc3QgdGlja2V0IGtleTogZWlnaHR5IGJ5dGVzIG9mIG5vdGhpbmcgc2VjcmV0IGF0IGFsbCwgZm9yIHRlc3RzIG9ubHkuLi4=";

#[test]
fn a_ticket_from_one_replica_resumes_on_another_with_the_same_ssl_session_ticket_key() {
    let data = [
        ("ssl-session-tickets", "true"),
        ("ssl-session-ticket-key", TICKET_KEY),
    ];
    let (dir, _pod) = config("ticket-key", &data, "");
    let one = Serve::start(&dir, &[]);
    let two = Serve::start(&dir, &[]);
    assert!(
        !diagnostics(&one).contains("ssl-session"),
        "{}",
        diagnostics(&one)
    );
    let (other_dir, _other_pod) =
        config("ticket-key-other", &[("ssl-session-tickets", "true")], "");
    let stranger = Serve::start(&other_dir, &[]);

    // TLS 1.2 with OpenSSL: the ticket comes in the handshake.
    let session = dir.join("session.pem");
    let session = session.to_str().unwrap();
    let first = s_client(one.https, Some(HOST), &["-tls1_2", "-sess_out", session]);
    assert!(first.ok && first.text.contains("New, "), "{}", first.text);
    let again = s_client(two.https, Some(HOST), &["-tls1_2", "-sess_in", session]);
    assert!(again.text.contains("Reused, TLSv1.2"), "{}", again.text);
    let elsewhere = s_client(
        stranger.https,
        Some(HOST),
        &["-tls1_2", "-sess_in", session],
    );
    assert!(
        elsewhere.ok && elsewhere.text.contains("New, "),
        "{}",
        elsewhere.text
    );

    // TLS 1.3 with rustls: the tickets come after the handshake, with the first response.
    let config = any_certificate();
    let mut first = TlsConnection::open(one.https, HOST, config.clone()).unwrap();
    assert_eq!(first.get("/").unwrap().status, 200);
    assert_eq!(first.handshake_kind(), Some(rustls::HandshakeKind::Full));
    let mut resumed = TlsConnection::open(two.https, HOST, config.clone()).unwrap();
    assert_eq!(
        resumed.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed)
    );
    assert_eq!(resumed.get("/").unwrap().status, 200);
    let strange = TlsConnection::open(stranger.https, HOST, config).unwrap();
    assert_eq!(strange.handshake_kind(), Some(rustls::HandshakeKind::Full));
}

#[test]
fn a_session_resumes_by_id_on_any_worker_until_ssl_session_timeout() {
    let (dir, _pod) = config("session-timeout", &[("ssl-session-timeout", "2s")], "");
    // Two workers: of four resuming connections, some land on the worker that did not make
    // the session (one cache is shared by all, as nginx's shared:SSL).
    let serve = Serve::start(&dir, &[]);
    let session = dir.join("session.pem");
    let session = session.to_str().unwrap();
    let first = s_client(serve.https, Some(HOST), &["-tls1_2", "-sess_out", session]);
    assert!(first.ok && first.text.contains("New, "), "{}", first.text);
    for _ in 0..4 {
        let again = s_client(serve.https, Some(HOST), &["-tls1_2", "-sess_in", session]);
        assert!(again.text.contains("Reused, TLSv1.2"), "{}", again.text);
    }
    // Not a timing assertion: the session is merely left to age past its timeout.
    std::thread::sleep(Duration::from_millis(2500));
    let late = s_client(serve.https, Some(HOST), &["-tls1_2", "-sess_in", session]);
    assert!(late.ok && late.text.contains("New, "), "{}", late.text);
    let (off_dir, _off_pod) = config("session-cache-off", &[("ssl-session-cache", "false")], "");
    let off = Serve::start(&off_dir, &[]);
    let session = off_dir.join("session.pem");
    let first = s_client(
        off.https,
        Some(HOST),
        &["-tls1_2", "-sess_out", session.to_str().unwrap()],
    );
    // No session ID and no ticket: nothing to resume, so s_client keeps no session.
    assert!(
        first.ok && first.text.contains("Session-ID: \n"),
        "{}",
        first.text
    );
    assert!(!session.exists(), "{}", first.text);
}

#[test]
fn ssl_reject_handshake_answers_an_unknown_name_with_an_alert_and_serves_known_ones() {
    let (dir, _pod) = config("reject", &[("ssl-reject-handshake", "true")], "");
    let serve = Serve::start(&dir, &[]);
    let known = s_client(serve.https, Some(HOST), &[]);
    assert!(known.ok, "{}", known.text);
    let unknown = s_client(serve.https, Some("nowhere.test"), &[]);
    assert!(!unknown.ok, "{}", unknown.text);
    assert!(
        unknown.text.contains("unrecognized name"),
        "{}",
        unknown.text
    );
    let nameless = s_client(serve.https, None, &[]);
    assert!(!nameless.ok, "{}", nameless.text);
    // Off: the default certificate serves the unknown name.
    write_config_map(&dir, &[("ssl-reject-handshake", "false")]);
    eventually(WAIT, "unknown names served once the key is off", || {
        s_client(serve.https, Some("nowhere.test"), &[])
            .ok
            .then_some(())
    });
}

#[test]
fn bad_ssl_values_are_diagnosed_and_the_defaults_serve() {
    let data = [
        ("ssl-protocols", "SSLv3"),
        ("ssl-ciphers", "DHE-RSA-AES256-SHA:$$$"),
        ("ssl-ecdh-curve", "brainpoolP512r1"),
        ("ssl-session-ticket-key", "c2hvcnQ="),
        ("ssl-buffer-size", "1"),
        ("ssl-session-timeout", "soon"),
        ("enable-ocsp", "true"),
    ];
    let (dir, _pod) = config("bad-ssl", &data, "");
    let serve = Serve::start(&dir, &[]);
    let diagnostics = diagnostics(&serve);
    for key in [
        "data.ssl-protocols: invalid value",
        "data.ssl-ciphers: invalid value",
        "data.ssl-ecdh-curve: invalid value",
        "data.ssl-session-ticket-key: invalid value",
        "data.ssl-buffer-size: invalid value",
        "data.ssl-session-timeout: invalid value",
        "data.enable-ocsp: not supported",
    ] {
        assert!(diagnostics.contains(key), "{key}: {diagnostics}");
    }
    for version in ["-tls1_2", "-tls1_3"] {
        let handshake = s_client(serve.https, Some(HOST), &[version]);
        assert!(handshake.ok, "{version}: {}", handshake.text);
    }
    let served = TlsConnection::open(serve.https, HOST, any_certificate())
        .unwrap()
        .get("/")
        .unwrap();
    assert_eq!(served.status, 200);
}

/// The TLS records a server sent over `stream`'s life: the bytes read are kept.
struct Tap {
    socket: std::net::TcpStream,
    seen: Vec<u8>,
}

impl std::io::Read for Tap {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.socket.read(buf)?;
        self.seen.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

impl std::io::Write for Tap {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.socket.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.socket.flush()
    }
}

/// The largest application-data record of a 1 MB response over TLS 1.3.
fn largest_record(addr: SocketAddr) -> usize {
    use std::io::{Read, Write};
    let name = rustls::pki_types::ServerName::try_from(HOST).unwrap();
    let conn = rustls::ClientConnection::new(any_certificate(), name).unwrap();
    let socket = std::net::TcpStream::connect(addr).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(
        conn,
        Tap {
            socket,
            seen: Vec::new(),
        },
    );
    tls.write_all(
        format!("GET /1mb.bin HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut body = Vec::new();
    let mut chunk = [0u8; 65536];
    while body.len() < 1024 * 1024 {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    assert!(
        body.len() > 1024 * 1024,
        "the whole response came: {}",
        body.len()
    );
    let seen = &tls.sock.seen;
    let mut at = 0;
    let mut largest = 0;
    while at + 5 <= seen.len() {
        let length = u16::from_be_bytes([seen[at + 3], seen[at + 4]]) as usize;
        if seen[at] == 23 {
            largest = largest.max(length);
        }
        at += 5 + length;
    }
    largest
}

#[test]
fn ssl_buffer_size_bounds_the_records_sluice_sends() {
    let (dir, _pod) = config("buffer-size", &[("ssl-buffer-size", "1k")], "");
    let serve = Serve::start(&dir, &[]);
    // 1 KiB of plaintext, its content type and AEAD tag.
    let small = largest_record(serve.https);
    assert!((1024..=1024 + 17).contains(&small), "{small}");
    write_config_map(&dir, &[]);
    eventually(WAIT, "TLS's 16 KiB records once the key is gone", || {
        (largest_record(serve.https) > 16 * 1024).then_some(())
    });
}
