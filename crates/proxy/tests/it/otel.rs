//! OpenTelemetry tracing end to end, with the real OpenTelemetry Collector (built by
//! scripts/otelcol.sh: OTLP receiver, file exporter) as the receiver of Sluice's spans.
//!
//! ```text
//!  client ─traceparent T─▶ proxy (tracing on) ─traceparent T/our span─▶ backend /echo
//!                              └─ span ─OTLP/gRPC or OTLP/HTTP─▶ otelcol (127.0.0.1 ports)
//!                                                          └─ file exporter ─▶ spans.json
//! ```
//! The binary comes from `SLUICE_OTELCOL` (scripts/test.sh sets it). Without it the tests are
//! skipped with a message, except under CI (`CI=true`), where a missing Collector fails.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::*;
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

fn otelcol_binary() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var_os("SLUICE_OTELCOL").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        Some(path) => panic!(
            "SLUICE_OTELCOL={} is not a file (build it with scripts/otelcol.sh)",
            path.display()
        ),
        None if ci => panic!("CI: SLUICE_OTELCOL is not set; scripts/test.sh builds the Collector"),
        None => {
            eprintln!(
                "skipped: set SLUICE_OTELCOL=$(scripts/otelcol.sh) to run the OpenTelemetry \
                 Collector tests (needs Go)"
            );
            None
        }
    }
}

/// A running Collector: OTLP/gRPC in on `grpc`, OTLP/HTTP on `http`, every batch out as a
/// JSON line in `spans`. Killed (our own child, by its handle) when dropped.
struct Collector {
    child: Child,
    grpc: SocketAddr,
    http: SocketAddr,
    spans: PathBuf,
    _dir: tempfile::TempDir,
}

impl Collector {
    async fn start(binary: &Path) -> Collector {
        let dir = tempfile::tempdir().unwrap();
        let free = || SocketAddr::from(([127, 0, 0, 1], free_tcp_port()));
        let (grpc, http) = (free(), free());
        let spans = dir.path().join("spans.json");
        let config = dir.path().join("otelcol.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: {grpc}\n\
                 \x20     http:\n        endpoint: {http}\n\
                 exporters:\n  file:\n    path: {}\n    flush_interval: 50ms\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n\
                 \x20 pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [file]\n",
                spans.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("otelcol.log")).unwrap();
        let child = Command::new(binary)
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the collector starts");
        let collector = Collector {
            child,
            grpc,
            http,
            spans,
            _dir: dir,
        };
        eventually_async(STEP, "the collector to listen", || async {
            tokio::net::TcpStream::connect(grpc).await.is_ok()
                && tokio::net::TcpStream::connect(http).await.is_ok()
        })
        .await;
        collector
    }

    /// Every span received so far, each with its resource's `service.name` added as
    /// `"service"`.
    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.spans).unwrap_or_default();
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let batch: Value = serde_json::from_str(line).expect("the file exporter writes JSON");
            for resource in batch["resourceSpans"].as_array().unwrap() {
                let service = attribute(&resource["resource"], "service.name");
                for scope in resource["scopeSpans"].as_array().unwrap() {
                    for span in scope["spans"].as_array().unwrap() {
                        let mut span = span.clone();
                        span["service"] = service.clone();
                        out.push(span);
                    }
                }
            }
        }
        out
    }

    async fn span_of(&self, trace_id: &str) -> Value {
        eventually_async(STEP, &format!("a span of trace {trace_id}"), || async {
            self.spans().iter().any(|s| s["traceId"] == trace_id)
        })
        .await;
        let spans: Vec<Value> = self
            .spans()
            .into_iter()
            .filter(|s| s["traceId"] == trace_id)
            .collect();
        assert_eq!(spans.len(), 1, "one span per request: {spans:#?}");
        spans.into_iter().next().unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("otelcol.log")).unwrap_or_default()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An attribute's value as plain JSON (`stringValue`, `intValue` as a number, arrays of them);
/// `Value::Null` when absent.
fn attribute(holder: &Value, key: &str) -> Value {
    fn plain(value: &Value) -> Value {
        if let Some(s) = value.get("stringValue") {
            return s.clone();
        }
        if let Some(n) = value.get("intValue") {
            let n = n.as_str().map_or_else(|| n.as_i64(), |s| s.parse().ok());
            return json!(n);
        }
        if let Some(values) = value["arrayValue"]["values"].as_array() {
            return Value::Array(values.iter().map(plain).collect());
        }
        value.clone()
    }
    holder["attributes"]
        .as_array()
        .and_then(|attrs| attrs.iter().find(|a| a["key"] == key))
        .map_or(Value::Null, |a| plain(&a["value"]))
}

/// Tracing settings pointing at `collector` (gRPC, ingress-nginx's protocol, unless `more`
/// says `otlp-collector-protocol: http/protobuf`), plus `more`.
fn otel_settings(collector: &Collector, more: &[(&str, &str)]) -> Value {
    let http = more.contains(&("otlp-collector-protocol", "http/protobuf"));
    let addr = if http { collector.http } else { collector.grpc };
    let port = addr.port().to_string();
    let mut data = vec![
        ("enable-opentelemetry", "true"),
        ("otlp-collector-host", "127.0.0.1"),
        ("otlp-collector-port", port.as_str()),
        ("otel-service-name", "sluice-test"),
        ("otel-schedule-delay-millis", "50"),
    ];
    data.extend_from_slice(more);
    settings(&data)
}

/// The `web` Service on `addrs` behind `host/` (Ingress `name`, with `annotations`).
fn site(name: &str, host: &str, addrs: &[SocketAddr], annotations: Value) -> Vec<Value> {
    let mut ingress = ingress(
        name,
        json!({"rules": [rule(host, vec![path("/", "Prefix", to("web"))])]}),
    );
    ingress["metadata"]["annotations"] = annotations;
    let mut objects = vec![ingress];
    objects.extend(slices("web", addrs));
    objects
}

/// A one-worker proxy tracing `trace.test/` (one backend) to `collector`, with `more` settings.
async fn traced_site(collector: &Collector, more: &[(&str, &str)]) -> (Harness, backend::Backend) {
    let backend = start_backend("web").await;
    let mut h = Harness::with_workers(1);
    let mut objects = vec![
        otel_settings(collector, more),
        service("web", &[("http", 80)]),
    ];
    objects.extend(site("web", "trace.test", &[addr_of(&backend)], json!({})));
    h.apply(&objects);
    (h, backend)
}

fn request(host: &str, target: &str, headers: &[(&str, &str)]) -> Request<Full<Bytes>> {
    let mut builder = Request::get(target)
        .header("host", host)
        .header("user-agent", "otel-test/1.0");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Full::new(Bytes::new())).unwrap()
}

fn traceparent(trace_id: &str, span: &str, flags: &str) -> String {
    format!("00-{trace_id}-{span}-{flags}")
}

/// A request in trace `trace_id`, sampled, as a child of `PARENT_SPAN`.
async fn traced(client: &mut Client, host: &str, target: &str, trace_id: &str) -> Reply {
    let sent = traceparent(trace_id, PARENT_SPAN, "01");
    client
        .send(request(host, target, &[("traceparent", &sent)]))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_request_continues_the_clients_trace_and_its_span_reaches_the_collector() {
    let Some(binary) = otelcol_binary() else {
        return;
    };
    let collector = Collector::start(&binary).await;
    let backend = start_backend("web").await;
    let refused = closed_port();
    let mut h = Harness::with_workers(1);
    let mut objects = vec![
        otel_settings(&collector, &[]),
        service("web", &[("http", 80)]),
    ];
    // Round robin starts with either endpoint: of two requests, one is retried.
    objects.extend(site(
        "web",
        "trace.test",
        &[refused, addr_of(&backend)],
        json!({}),
    ));
    h.apply(&objects);

    let mut client = Client::connect(h.http()).await;
    let mut retried = 0;
    for n in 0..2u8 {
        let trace_id = format!("{}{n:02x}", &TRACE_ID[..30]);
        let sent = traceparent(&trace_id, PARENT_SPAN, "01");
        let reply = client
            .send(request(
                "trace.test",
                "/echo?secret=1",
                &[("traceparent", &sent), ("tracestate", "vendor=opaque")],
            ))
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        let seen = reply.json()["headers"].clone();

        let span = collector.span_of(&trace_id).await;
        let span_id = span["spanId"].as_str().unwrap();
        // The backend's parent is our span, in the client's trace; its tracestate passed on.
        assert_eq!(
            seen["traceparent"],
            json!(traceparent(&trace_id, span_id, "01"))
        );
        assert_eq!(seen["tracestate"], "vendor=opaque");
        assert_eq!(span["parentSpanId"], PARENT_SPAN);
        assert_ne!(span_id, PARENT_SPAN);
        assert_eq!(span["traceState"], "vendor=opaque");
        assert_eq!(span["kind"], 2, "SPAN_KIND_SERVER: {span:#}");
        assert_eq!(span["name"], "GET /");
        assert_eq!(span["service"], "sluice-test");
        assert!(span.get("status").is_none_or(|s| s.get("code").is_none()));
        for (key, value) in [
            ("http.request.method", json!("GET")),
            ("http.response.status_code", json!(200)),
            ("http.route", json!("/")),
            ("url.path", json!("/echo")),
            ("url.scheme", json!("http")),
            ("server.address", json!("trace.test")),
            ("server.port", json!(h.http().port())),
            ("network.protocol.version", json!("1.1")),
            ("client.address", json!("127.0.0.1")),
            ("user_agent.original", json!("otel-test/1.0")),
            ("k8s.namespace.name", json!("default")),
            ("sluice.ingress.name", json!("web")),
            ("sluice.service.name", json!("web")),
            ("sluice.upstream.name", json!("default-web-http")),
            ("sluice.request_id", seen["x-request-id"].clone()),
        ] {
            assert_eq!(attribute(&span, key), value, "{key}: {span:#}");
        }
        let upstreams = attribute(&span, "sluice.upstream.addresses");
        let retries = attribute(&span, "http.request.resend_count");
        if upstreams == json!([refused.to_string(), addr_of(&backend).to_string()]) {
            assert_eq!(retries, json!(1), "{span:#}");
            assert_eq!(
                attribute(&span, "sluice.upstream.status_codes"),
                json!([502, 200])
            );
            retried += 1;
        } else {
            assert_eq!(
                upstreams,
                json!([addr_of(&backend).to_string()]),
                "{span:#}"
            );
            assert_eq!(retries, json!(0), "{span:#}");
        }
    }
    assert_eq!(
        retried, 1,
        "round robin retried exactly one of two requests"
    );

    // A request without a route has a span too (no http.route), and a 404 is no error.
    let trace_id = format!("{}ff", &TRACE_ID[..30]);
    let reply = traced(&mut client, "nowhere.test", "/", &trace_id).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let span = collector.span_of(&trace_id).await;
    assert_eq!(attribute(&span, "http.response.status_code"), json!(404));
    assert_eq!(attribute(&span, "http.route"), Value::Null);
    assert_eq!(span["name"], "GET");

    // Nothing was dropped.
    let metrics = get(h.admin(), "a", "/metrics").await.text();
    assert!(
        metrics.contains("\nsluice_otel_spans_dropped_total 0\n"),
        "{metrics}"
    );
    shutdown(h.control.proxy).await;
    drop(collector);
}

#[tokio::test]
async fn hostile_header_bytes_and_long_values_still_make_a_span_the_collector_takes() {
    let Some(binary) = otelcol_binary() else {
        return;
    };
    let collector = Collector::start(&binary).await;
    let (h, _backend) = traced_site(&collector, &[]).await;
    let trace_id = format!("{}05", &TRACE_ID[..30]);
    let long_path = format!("/{}", "a".repeat(5000));
    let request = Request::get(long_path.as_str())
        .header("host", "trace.test")
        .header("traceparent", traceparent(&trace_id, PARENT_SPAN, "01"))
        // obs-text: bytes that are not UTF-8 (protobuf strings must be).
        .header(
            "user-agent",
            http::HeaderValue::from_bytes(b"agent\xff\xfe/\"1\"").unwrap(),
        )
        .body(Full::new(Bytes::new()))
        .unwrap();
    let mut client = Client::connect(h.http()).await;
    client.send(request).await.unwrap();
    let span = collector.span_of(&trace_id).await;
    assert_eq!(
        attribute(&span, "user_agent.original"),
        json!("agent\u{fffd}\u{fffd}/\"1\"")
    );
    let path = attribute(&span, "url.path");
    assert_eq!(path.as_str().map(str::len), Some(2048), "cut at 2 KiB");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn spans_waiting_for_their_export_go_out_at_shutdown() {
    let Some(binary) = otelcol_binary() else {
        return;
    };
    let collector = Collector::start(&binary).await;
    // A minute before an export would be due: only the shutdown flush sends this span.
    let (h, _backend) = traced_site(&collector, &[("otel-schedule-delay-millis", "60000")]).await;
    let trace_id = format!("{}04", &TRACE_ID[..30]);
    let mut client = Client::connect(h.http()).await;
    let reply = traced(&mut client, "trace.test", "/", &trace_id).await;
    assert_eq!(reply.status, StatusCode::OK);
    drop(client);
    shutdown(h.control.proxy).await;
    collector.span_of(&trace_id).await;
}

/// No Collector binary needed: nothing listens where the spans go.
#[tokio::test]
async fn spans_the_collector_does_not_take_are_dropped_and_counted() {
    let backend = start_backend("web").await;
    let mut h = Harness::with_workers(1);
    let port = closed_port().port().to_string();
    for (protocol, dropped) in [("grpc", 3), ("http/protobuf", 6)] {
        let mut objects = vec![
            settings(&[
                ("enable-opentelemetry", "true"),
                ("otlp-collector-host", "127.0.0.1"),
                ("otlp-collector-port", &port),
                ("otlp-collector-protocol", protocol),
                ("otel-schedule-delay-millis", "10"),
            ]),
            service("web", &[("http", 80)]),
        ];
        objects.extend(site("web", "trace.test", &[addr_of(&backend)], json!({})));
        h.apply(&objects);
        send_and_count_dropped(&h, dropped).await;
    }
    shutdown(h.control.proxy).await;
}

/// Sends 3 traced requests and waits until `dropped` spans in all are counted.
async fn send_and_count_dropped(h: &Harness, dropped: u32) {
    for _ in 0..3 {
        let reply = get(h.http(), "trace.test", "/echo").await;
        assert_eq!(reply.status, StatusCode::OK);
        // Tracing on: the upstream request carries a new, sampled trace.
        let sent = reply.json()["headers"]["traceparent"].clone();
        assert!(sent.as_str().is_some_and(|t| t.ends_with("-01")), "{sent}");
    }
    let admin = h.admin();
    let expected = format!("\nsluice_otel_spans_dropped_total {dropped}\n");
    eventually_async(
        STEP,
        &format!("{dropped} spans counted as dropped"),
        || async {
            let metrics = get(admin, "a", "/metrics").await.text();
            metrics.contains(&expected)
        },
    )
    .await;
}

#[tokio::test]
async fn an_untraced_route_and_the_always_off_sampler_make_no_span() {
    let Some(binary) = otelcol_binary() else {
        return;
    };
    let collector = Collector::start(&binary).await;
    let backend = start_backend("web").await;
    let mut h = Harness::with_workers(1);
    let off = json!({"nginx.ingress.kubernetes.io/enable-opentelemetry": "false"});
    // OTLP/HTTP here (the other tests use gRPC).
    const HTTP: (&str, &str) = ("otlp-collector-protocol", "http/protobuf");
    let mut objects = vec![
        otel_settings(&collector, &[HTTP]),
        service("web", &[("http", 80)]),
    ];
    objects.extend(site("quiet", "off.test", &[addr_of(&backend)], off));
    objects.extend(site("loud", "on.test", &[addr_of(&backend)], json!({})));
    h.apply(&objects);
    let mut client = Client::connect(h.http()).await;

    // enable-opentelemetry: "false": the client's traceparent goes upstream untouched.
    let untraced = format!("{}01", &TRACE_ID[..30]);
    let reply = traced(&mut client, "off.test", "/echo", &untraced).await;
    assert_eq!(
        reply.json()["headers"]["traceparent"],
        json!(traceparent(&untraced, PARENT_SPAN, "01"))
    );
    // A traced request after it: once its span is in, an earlier one would be too.
    let marker = format!("{}02", &TRACE_ID[..30]);
    traced(&mut client, "on.test", "/echo", &marker).await;
    collector.span_of(&marker).await;
    assert!(
        !collector.spans().iter().any(|s| s["traceId"] == untraced),
        "a span for a route with enable-opentelemetry: false"
    );

    // AlwaysOff: a new trace is not sampled (the upstream still gets a traceparent, flags 00);
    // a sampled parent is still followed (parent-based, the default).
    let mut objects = vec![
        otel_settings(&collector, &[("otel-sampler", "AlwaysOff"), HTTP]),
        service("web", &[("http", 80)]),
    ];
    objects.extend(site("loud", "on.test", &[addr_of(&backend)], json!({})));
    h.apply(&objects);
    let before = collector.spans().len();
    let reply = client.send(request("on.test", "/echo", &[])).await.unwrap();
    let sent_upstream = reply.json()["headers"]["traceparent"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        sent_upstream.len() == 55 && sent_upstream.ends_with("-00"),
        "{sent_upstream}"
    );
    let unsampled = sent_upstream[3..35].to_owned();
    let marker = format!("{}03", &TRACE_ID[..30]);
    traced(&mut client, "on.test", "/echo", &marker).await;
    collector.span_of(&marker).await;
    let spans = collector.spans();
    assert!(
        !spans.iter().any(|s| s["traceId"] == unsampled.as_str()),
        "AlwaysOff sampled a new trace"
    );
    assert_eq!(spans.len(), before + 1, "{:#?}\n{}", spans, collector.log());
    shutdown(h.control.proxy).await;
}
