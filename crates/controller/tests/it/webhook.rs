//! The admission webhook's decision (`controller::webhook::review`): the Store Sluice serves,
//! plus the candidate Ingress, compiled; the candidate's errors refuse it, the rest are warnings.
//! And the webhook as an edge (`controller::webhook::Webhook`, real TLS on 127.0.0.1): every
//! limit holds against a client that tries to outlast or outnumber it.

use std::sync::Arc;
use std::time::Duration;

use controller::webhook::{respond, review, Verdict, Webhook};
use controller::{WebhookLimits, WebhookOptions};
use rustls::pki_types::ServerName;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use translate::{parse_documents, CompileOptions, Store};

const EXISTING: &str = "
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: first, namespace: shop, creationTimestamp: '2024-01-01T00:00:00Z'}
spec:
  ingressClassName: sluice
  rules: [{host: shop.test, http: {paths: [{path: /cart, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
";

fn store() -> Store {
    let documents = parse_documents("existing.yaml", EXISTING).unwrap();
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    let mut store = Store::default();
    store.replace_all(documents.objects);
    store
}

/// An Ingress `name` in `shop` routing `path` on shop.test to `service`, with `annotations`.
fn ingress(name: &str, path: &str, service: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {
            "ingressClassName": "sluice",
            "rules": [{"host": "shop.test", "http": {"paths": [{
                "path": path, "pathType": "Prefix",
                "backend": {"service": {"name": service, "port": {"number": 80}}},
            }]}}],
        },
    })
}

fn request(operation: &str, object: Value) -> Value {
    json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
        "operation": operation,
        "namespace": "shop",
        "object": object,
    })
}

fn decide(operation: &str, object: Value) -> Verdict {
    review(
        &store(),
        &CompileOptions::default(),
        &request(operation, object),
    )
}

#[test]
fn a_good_ingress_is_allowed_without_warnings() {
    let verdict = decide("CREATE", ingress("second", "/account", "web", json!({})));
    assert_eq!(
        verdict,
        Verdict {
            allowed: true,
            ..Verdict::default()
        }
    );
}

#[test]
fn a_path_an_older_ingress_routes_is_refused_on_the_new_one() {
    // On CREATE the object has no creationTimestamp yet: it is the newest.
    let verdict = decide("CREATE", ingress("second", "/cart", "web", json!({})));
    assert!(!verdict.allowed);
    assert!(
        verdict
            .message
            .starts_with("Sluice refuses Ingress shop/second: ")
            && verdict
                .message
                .contains("already routed by Ingress shop/first"),
        "{}",
        verdict.message
    );
    // The older Ingress itself may still be updated.
    let mut first = ingress("first", "/cart", "web", json!({}));
    first["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    assert!(decide("UPDATE", first).allowed);
}

#[test]
fn regex_characters_in_a_prefix_path_are_refused_as_ingress_nginx_refuses_them() {
    // strict-validate-path-type, on by default: `Prefix` and `Exact` paths are plain text.
    let verdict = decide(
        "CREATE",
        ingress("second", "/api/(v1|v2)", "web", json!({})),
    );
    assert!(!verdict.allowed, "{verdict:?}");
    assert!(
        verdict
            .message
            .contains("path /api/(v1|v2) cannot be used with pathType Exact or Prefix"),
        "{}",
        verdict.message
    );
    assert!(
        decide(
            "CREATE",
            ingress("second", "/api/v1.2_x-y", "web", json!({}))
        )
        .allowed
    );
    // ImplementationSpecific is where regular expressions go.
    let mut regex = ingress("second", "/api/(v1|v2)", "web", json!({}));
    regex["spec"]["rules"][0]["http"]["paths"][0]["pathType"] = json!("ImplementationSpecific");
    assert!(decide("CREATE", regex).allowed);
    // Off: a warning only.
    let mut store = store();
    let config_map =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sluice, namespace: sluice}\n\
                      data: {strict-validate-path-type: \"false\"}\n";
    store.replace_all(
        parse_documents("existing.yaml", &format!("{EXISTING}---\n{config_map}"))
            .unwrap()
            .objects,
    );
    let options = CompileOptions::default();
    let object = ingress("second", "/api/(v1|v2)", "web", json!({}));
    let verdict = review(&store, &options, &request("CREATE", object));
    assert!(verdict.allowed, "{verdict:?}");
    assert!(
        verdict
            .warnings
            .iter()
            .any(|w| w.contains("path /api/(v1|v2)")),
        "{verdict:?}"
    );
}

#[test]
fn an_invalid_annotation_is_refused_and_an_unsupported_one_is_a_warning() {
    let verdict = decide(
        "CREATE",
        ingress(
            "second",
            "/account",
            "web",
            json!({"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/33"}),
        ),
    );
    assert!(!verdict.allowed, "{verdict:?}");
    assert!(
        verdict.message.contains("whitelist-source-range"),
        "{}",
        verdict.message
    );

    let verdict = decide(
        "CREATE",
        ingress(
            "second",
            "/account",
            "web",
            json!({"nginx.ingress.kubernetes.io/http2-push-preload": "true"}),
        ),
    );
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(verdict.warnings.len(), 1, "{verdict:?}");
    assert!(
        verdict.warnings[0].contains("http2-push-preload")
            && verdict.warnings[0].contains("unsupported"),
        "{:?}",
        verdict.warnings
    );
}

/// A new Ingress with these annotations, as the API server would send it for review.
fn create_annotated(annotations: Value) -> Verdict {
    decide("CREATE", ingress("second", "/account", "web", annotations))
}

#[test]
fn authentication_that_cannot_be_used_is_refused() {
    for (annotations, why) in [
        // ingress-nginx's unanchored check takes it, and serves digest authentication.
        (
            json!({"nginx.ingress.kubernetes.io/auth-type": "basic-auth",
                   "nginx.ingress.kubernetes.io/auth-secret": "basic-auth"}),
            "expected basic or digest",
        ),
        (
            json!({"nginx.ingress.kubernetes.io/auth-url": "http://auth_server.example.com/check",
                   "nginx.ingress.kubernetes.io/auth-signin": "https://auth.example.com/start"}),
            "invalid host",
        ),
        (
            json!({"nginx.ingress.kubernetes.io/auth-tls-secret": "default/client-ca",
                   "nginx.ingress.kubernetes.io/auth-tls-verify-client": "on"}),
            "a Secret of another namespace",
        ),
        (
            json!({"nginx.ingress.kubernetes.io/auth-tls-secret": "client-ca",
                   "nginx.ingress.kubernetes.io/auth-tls-match-cn": "admin"}),
            "expected CN= and a regular expression",
        ),
    ] {
        let verdict = create_annotated(annotations);
        assert!(!verdict.allowed, "{verdict:?}");
        assert!(verdict.message.contains(why), "{}", verdict.message);
    }
    // A Secret that does not exist yet is a warning, as a missing Service is: the routes
    // answer 503 until it does.
    let verdict = create_annotated(json!({"nginx.ingress.kubernetes.io/auth-type": "basic",
                                          "nginx.ingress.kubernetes.io/auth-secret": "later"}));
    assert!(verdict.allowed, "{verdict:?}");
    assert!(
        verdict
            .warnings
            .iter()
            .any(|w| w.contains("Secret shop/later not found")),
        "{verdict:?}"
    );
    let verdict =
        create_annotated(json!({"nginx.ingress.kubernetes.io/auth-tls-secret": "client-ca"}));
    assert!(verdict.allowed, "{verdict:?}");
    assert!(
        verdict
            .warnings
            .iter()
            .any(|w| w.contains("Secret shop/client-ca not found")),
        "{verdict:?}"
    );
    // A companion alone does nothing in ingress-nginx either: a warning.
    let verdict =
        create_annotated(json!({"nginx.ingress.kubernetes.io/auth-secret": "basic-auth"}));
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(verdict.warnings.len(), 1, "{verdict:?}");
}

#[test]
fn a_service_that_does_not_exist_yet_is_a_warning_not_a_refusal() {
    let verdict = decide("CREATE", ingress("second", "/account", "later", json!({})));
    assert!(verdict.allowed, "{verdict:?}");
    assert!(
        verdict.warnings[0].contains("Service shop/later not found"),
        "{:?}",
        verdict.warnings
    );
}

#[test]
fn deletes_and_other_classes_are_allowed_unchecked() {
    assert!(decide("DELETE", Value::Null).allowed);
    let mut other = ingress("second", "/cart", "web", json!({}));
    other["spec"]["ingressClassName"] = json!("nginx-other");
    assert!(decide("CREATE", other).allowed);
}

#[test]
fn the_answer_is_an_admission_review_for_the_same_uid() {
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": request("CREATE", ingress("second", "/cart", "web", json!({}))),
    }))
    .unwrap();
    let answer: Value = serde_json::from_slice(&respond(&body, |request| {
        review(&store(), &CompileOptions::default(), request)
    }))
    .unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    let response = &answer["response"];
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    assert!(response["status"]["message"]
        .as_str()
        .unwrap()
        .contains("already routed"));
    // Not a review at all.
    let answer: Value = serde_json::from_slice(&respond(b"{}", |_| unreachable!())).unwrap();
    assert_eq!(answer["response"]["allowed"], false);
}

// The server: real TLS on 127.0.0.1, each limit shortened or shrunk where a test needs it.

/// How long a test waits for what must happen (a close, an answer); never a measurement.
const BOUND: Duration = Duration::from_secs(10);

/// Long enough never to fire during a test.
const NEVER: Duration = Duration::from_secs(600);

struct Fixture {
    webhook: Webhook,
    connector: TlsConnector,
    _dir: tempfile::TempDir,
}

/// The webhook on 127.0.0.1:0 with `limits` and a self-signed certificate for localhost.
fn start(limits: WebhookLimits) -> Fixture {
    let leaf = testkit::tls::self_signed(&["localhost"]);
    let dir = tempfile::tempdir().unwrap();
    let (certificate, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&certificate, &leaf.cert_pem).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    let options = WebhookOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        certificate,
        key,
        limits,
    };
    let webhook = Webhook::start(&options, CompileOptions::default()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(leaf.der.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(model::tls::crypto_provider().clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Fixture {
        webhook,
        connector: TlsConnector::from(Arc::new(config)),
        _dir: dir,
    }
}

/// Limits that never interfere, for a test to shorten one of.
fn lenient() -> WebhookLimits {
    WebhookLimits {
        request_head_timeout: NEVER,
        body_timeout: NEVER,
        keep_alive_timeout: NEVER,
        ..WebhookLimits::default()
    }
}

impl Fixture {
    async fn tcp(&self) -> TcpStream {
        TcpStream::connect(self.webhook.addr()).await.unwrap()
    }

    async fn try_tls(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let name = ServerName::try_from("localhost").unwrap();
        self.connector.connect(name, self.tcp().await).await
    }

    async fn tls(&self) -> TlsStream<TcpStream> {
        self.try_tls().await.expect("TLS handshake")
    }

    /// POSTs `body` on a connection of its own; the status and the body of the answer.
    async fn try_post(&self, body: &[u8]) -> std::io::Result<(u16, String)> {
        let mut tls = self.try_tls().await?;
        tls.write_all(&head("POST", body.len())).await?;
        tls.write_all(body).await?;
        let mut answer = Vec::new();
        tls.read_to_end(&mut answer).await?;
        Ok(parse_answer(&answer))
    }

    async fn post(&self, body: &[u8]) -> (u16, String) {
        timeout(BOUND, self.try_post(body))
            .await
            .expect("an answer in time")
            .expect("an answer")
    }

    /// POSTs `body` again and again until `done` says yes (the server frees what a closed
    /// connection held as it notices the close).
    async fn post_until(&self, body: &[u8], done: impl Fn(u16, &str) -> bool) -> (u16, String) {
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            if let Ok(Ok((status, text))) = timeout(BOUND, self.try_post(body)).await {
                if done(status, &text) {
                    return (status, text);
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no such answer in time"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A request head with Content-Length `length` that closes the connection after the answer.
fn head(method: &str, length: usize) -> Vec<u8> {
    format!(
        "{method} /networking/v1/ingresses HTTP/1.1\r\nhost: localhost\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

fn parse_answer(answer: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(answer);
    let status = text
        .get(9..12)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, body.to_owned())
}

/// Sends `bytes` on `tls` and reads until the server closes it: the answer's status.
async fn status_of(mut tls: TlsStream<TcpStream>, bytes: &[u8]) -> u16 {
    tls.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    timeout(BOUND, tls.read_to_end(&mut answer))
        .await
        .expect("answered and closed in time")
        .unwrap();
    parse_answer(&answer).0
}

/// Whether the server closes `stream` (EOF or reset) within BOUND, reading what it sends.
async fn closed_by_server(mut stream: impl AsyncRead + Unpin) -> bool {
    let mut buffer = [0; 4096];
    let read_to_end = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    timeout(BOUND, read_to_end).await.is_ok()
}

/// An AdmissionReview asking about `object` (CREATE).
fn review_body(object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": request("CREATE", object),
    }))
    .unwrap()
}

fn allowed(text: &str) -> bool {
    let answer: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    answer["response"]["allowed"] == true
}

#[tokio::test]
async fn reviews_are_answered_from_the_published_store_on_the_webhooks_own_threads() {
    // Nothing here plays the control loop: the webhook needs nothing from it but the Store.
    let fixture = start(lenient());
    let copy = review_body(ingress("second", "/cart", "web", json!({})));
    let (status, text) = fixture.post(&copy).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        allowed(&text) && text.contains("not finished its first sync"),
        "{text}"
    );

    fixture.webhook.publish(&store());
    let (status, text) = fixture.post(&copy).await;
    assert_eq!(status, 200, "{text}");
    assert!(!allowed(&text), "{text}");
    assert!(
        text.contains("already routed by Ingress shop/first"),
        "{text}"
    );
    let good = review_body(ingress("second", "/account", "web", json!({})));
    assert!(allowed(&fixture.post(&good).await.1));
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_tls_handshake_is_closed() {
    let fixture = start(WebhookLimits {
        request_head_timeout: Duration::from_millis(300),
        ..lenient()
    });
    let silent = fixture.tcp().await;
    // Half a ClientHello record header.
    let mut half = fixture.tcp().await;
    half.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    assert!(
        closed_by_server(silent).await,
        "a silent connection stays open"
    );
    assert!(closed_by_server(half).await, "half a handshake stays open");
}

#[tokio::test]
async fn half_a_request_head_is_closed_by_the_deadline_that_began_at_the_accept() {
    let fixture = start(WebhookLimits {
        request_head_timeout: Duration::from_millis(500),
        ..lenient()
    });
    let mut tls = fixture.tls().await;
    tls.write_all(b"POST /networking/v1/ingresses HTTP/1.1\r\nhost: local")
        .await
        .unwrap();
    assert!(closed_by_server(tls).await, "half a head stays open");
    // A connection that says nothing after its handshake: the same.
    assert!(closed_by_server(fixture.tls().await).await);
}

#[tokio::test]
async fn a_review_over_the_body_limit_is_answered_413_without_being_read() {
    let fixture = start(WebhookLimits {
        max_review_bytes: 1024,
        ..lenient()
    });
    // Only the head is sent: the answer cannot have waited for the body.
    assert_eq!(
        status_of(fixture.tls().await, &head("POST", 1025)).await,
        413
    );

    // Chunked, so no length to judge by: refused once past the limit, the body unfinished.
    let chunked = format!(
        "POST /networking/v1/ingresses HTTP/1.1\r\nhost: localhost\r\n\
         transfer-encoding: chunked\r\n\r\n800\r\n{}\r\n",
        "x".repeat(0x800)
    );
    assert_eq!(
        status_of(fixture.tls().await, chunked.as_bytes()).await,
        413
    );

    // At the limit: a review (not one, so refused as such, but read and answered).
    let (status, text) = fixture.post(&[b' '; 1024]).await;
    assert_eq!(status, 200, "{text}");
}

#[tokio::test]
async fn a_body_that_stops_coming_is_answered_408_and_closed() {
    let fixture = start(WebhookLimits {
        body_timeout: Duration::from_millis(300),
        ..lenient()
    });
    let mut sent = head("POST", 100);
    sent.extend_from_slice(b"{\"apiVersion\":");
    assert_eq!(status_of(fixture.tls().await, &sent).await, 408);
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let fixture = start(WebhookLimits {
        keep_alive_timeout: Duration::from_millis(300),
        ..lenient()
    });
    let mut tls = fixture.tls().await;
    tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = vec![0; 4096];
    let n = timeout(BOUND, tls.read(&mut answer))
        .await
        .expect("an answer")
        .unwrap();
    assert_eq!(parse_answer(&answer[..n]).0, 405);
    assert!(closed_by_server(tls).await, "an idle connection stays open");
}

#[tokio::test]
async fn connections_past_the_cap_are_closed_at_once_while_the_first_are_held() {
    let fixture = start(WebhookLimits {
        max_connections: 3,
        ..lenient()
    });
    // Handshakes done: the server has accepted and counted each.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(fixture.tls().await);
    }
    let refused = timeout(BOUND, fixture.try_tls())
        .await
        .expect("refused at once, not kept waiting");
    assert!(refused.is_err(), "a fourth connection got a TLS handshake");
    // The held ones still work.
    let get = b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
    assert_eq!(status_of(held.remove(0), get).await, 405);
    // Its place is free again once it has closed.
    let good = review_body(ingress("second", "/account", "web", json!({})));
    fixture.post_until(&good, |status, _| status == 200).await;
}

#[tokio::test]
async fn idle_connections_holding_the_cap_are_closed_by_the_head_timeout_and_a_review_gets_in() {
    let fixture = start(WebhookLimits {
        max_connections: 2,
        request_head_timeout: Duration::from_millis(300),
        ..lenient()
    });
    let _idle = (fixture.tcp().await, fixture.tls().await);
    let good = review_body(ingress("second", "/account", "web", json!({})));
    let (_, text) = fixture.post_until(&good, |status, _| status == 200).await;
    assert!(allowed(&text), "{text}");
}

#[tokio::test]
async fn reviews_past_the_queue_are_answered_503_before_their_body_is_read() {
    let fixture = start(WebhookLimits {
        max_reviews: 2,
        ..lenient()
    });
    // Two reviews whose bodies never come hold both places.
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let mut tls = fixture.tls().await;
        tls.write_all(&head("POST", 100)).await.unwrap();
        waiting.push(tls);
    }
    let good = review_body(ingress("second", "/account", "web", json!({})));
    // The server may not have read both heads yet: asked until it has.
    let (_, text) = fixture.post_until(&good, |status, _| status == 503).await;
    assert!(text.contains("busy"), "{text}");
    drop(waiting);
    let (_, text) = fixture.post_until(&good, |status, _| status == 200).await;
    assert!(allowed(&text), "{text}");
}
