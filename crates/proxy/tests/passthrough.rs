//! TLS passthrough (`ssl-passthrough` with `--enable-ssl-passthrough`): a passthrough host's
//! TLS connections reach its backend undecrypted (the client sees the backend's certificate),
//! other hosts are terminated by Sluice on the same port, and endpoint changes move new
//! connections while established ones stay. Real TLS on 127.0.0.1.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::PrivateKeyDer;
use serde_json::{json, Value};
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A backend that terminates TLS itself with `leaf`, greets with its name, then echoes lines.
async fn tls_backend(name: &'static str, leaf: &Leaf) -> SocketAddr {
    let key: PrivateKeyDer<'static> =
        rustls::pki_types::pem::PemObject::from_pem_slice(leaf.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(model::tls::crypto_provider().clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der.clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let (reader, mut writer) = tokio::io::split(tls);
                let _ = writer
                    .write_all(format!("hello from {name}\n").as_bytes())
                    .await;
                let mut lines = BufReader::new(reader).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if writer
                        .write_all(format!("{name}: {line}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A TLS connection to the proxy with SNI `name`: the certificate presented, and a line
/// reader/writer over it.
struct Session {
    presented: rustls::pki_types::CertificateDer<'static>,
    lines: tokio::io::Lines<
        BufReader<tokio::io::ReadHalf<tokio_rustls::client::TlsStream<TcpStream>>>,
    >,
    writer: tokio::io::WriteHalf<tokio_rustls::client::TlsStream<TcpStream>>,
}

impl Session {
    async fn open(ca: &TestCa, addr: SocketAddr, name: &str) -> Session {
        let (tls, presented) = ca.connect(addr, name, &[]).await.expect("TLS connects");
        let (reader, writer) = tokio::io::split(tls);
        Session {
            presented,
            lines: BufReader::new(reader).lines(),
            writer,
        }
    }

    async fn line(&mut self) -> String {
        bounded(self.lines.next_line())
            .await
            .expect("a line")
            .expect("not closed")
    }

    async fn ask(&mut self, text: &str) -> String {
        self.writer
            .write_all(format!("{text}\n").as_bytes())
            .await
            .unwrap();
        self.line().await
    }
}

fn passthrough_objects(endpoints: &[SocketAddr], web: &Leaf, echo: SocketAddr) -> Vec<Value> {
    let pass = annotated_site(
        "pass",
        "pass.example",
        "pass",
        json!({"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}),
    );
    let mut objects = vec![
        service("pass", &[("http", 443)]),
        pass,
        service("echo", &[("http", 80)]),
        ingress(
            "web",
            json!({
                "tls": [{"hosts": ["web.example"], "secretName": "web-tls"}],
                "rules": [rule("web.example", vec![path("/", "Prefix", to("echo"))])],
            }),
        ),
        tls_secret("web-tls", web),
    ];
    objects.extend(slices("pass", endpoints));
    objects.extend(slices("echo", &[echo]));
    objects
}

#[tokio::test]
async fn passthrough_hosts_reach_their_backend_undecrypted_and_others_are_terminated() {
    let ca = TestCa::new();
    let backend_leaf = ca.leaf(&["pass.example"]);
    let web_leaf = ca.leaf(&["web.example"]);
    let a = tls_backend("a", &backend_leaf).await;
    let b = tls_backend("b", &backend_leaf).await;
    let echo = start_backend("echo").await;
    let mut h = Harness::start();
    h.options.enable_ssl_passthrough = true;
    h.apply(&passthrough_objects(&[a], &web_leaf, addr_of(&echo)));

    // The backend's certificate, its own greeting: nothing was terminated on the way.
    let mut first = Session::open(&ca, h.https(), "pass.example").await;
    assert_eq!(first.presented, backend_leaf.der);
    assert_eq!(first.line().await, "hello from a");
    assert_eq!(first.ask("ping").await, "a: ping");

    // Another host on the same port is terminated by Sluice, with its Secret.
    let (tls, presented) = ca
        .connect(h.https(), "web.example", &[b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(presented, web_leaf.der);
    let reply = Client::over(tls).await.get("web.example", "/echo").await;
    assert_eq!(reply.status, 200);

    // A second endpoint joins: the open connection stays on a, new ones reach both.
    h.update(&passthrough_objects(&[a, b], &web_leaf, addr_of(&echo)));
    assert_eq!(first.ask("still there?").await, "a: still there?");
    let mut greeted = std::collections::BTreeSet::new();
    for _ in 0..8 {
        let mut session = Session::open(&ca, h.https(), "pass.example").await;
        greeted.insert(session.line().await);
    }
    assert_eq!(
        greeted.into_iter().collect::<Vec<_>>(),
        ["hello from a", "hello from b"]
    );

    // a leaves the set: new connections go to b only; the one on a is left alone.
    h.update(&passthrough_objects(&[b], &web_leaf, addr_of(&echo)));
    for _ in 0..3 {
        let mut session = Session::open(&ca, h.https(), "pass.example").await;
        assert_eq!(session.line().await, "hello from b");
    }
    assert_eq!(first.ask("and now?").await, "a: and now?");

    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"passed\"} 12",
    )
    .await;
}

#[tokio::test]
async fn without_the_flag_or_an_endpoint_nothing_is_passed_through() {
    let ca = TestCa::new();
    let backend_leaf = ca.leaf(&["pass.example"]);
    let web_leaf = ca.leaf(&["web.example"]);
    let a = tls_backend("a", &backend_leaf).await;
    let echo = start_backend("echo").await;

    // The annotation without --enable-ssl-passthrough: Sluice terminates (its fallback
    // certificate, which the client does not trust).
    let mut h = Harness::start();
    h.apply_allowing_diagnostics(&passthrough_objects(&[a], &web_leaf, addr_of(&echo)));
    assert!(ca.connect(h.https(), "pass.example", &[]).await.is_err());

    // With the flag but no endpoint: closed during the handshake, counted.
    let mut h = Harness::start();
    h.options.enable_ssl_passthrough = true;
    h.apply(&passthrough_objects(&[], &web_leaf, addr_of(&echo)));
    assert!(ca.connect(h.https(), "pass.example", &[]).await.is_err());
    assert_metric(
        &h,
        "sluice_ssl_passthrough_connections_total{result=\"failed\"} 1",
    )
    .await;
}
