//! The control plane in process (`controller::ControlPlane`): what a provider delivers goes
//! into its Store, `act` decides between recompiling and the endpoint fast path, and a real
//! proxy on 127.0.0.1 serves the result to real clients from real backends.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use controller::ControlPlane;
use model::{Compiled, Settings, Severity};
use proxy::{Proxy, ProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use translate::{parse_documents, CompileOptions};

/// A provider that knows one thing: the whole set of objects, delivered again on each change
/// (what the file provider does on every save).
struct Provider {
    control: ControlPlane,
}

impl Provider {
    fn start() -> Provider {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let proxy = Proxy::start(ProxyConfig {
            http_listen: any,
            https_listen: any,
            admin_listen: any,
            health: proxy::HealthCheck::default(),
            status_listen: any,
            workers: NonZeroUsize::new(2).unwrap(),
            access_log: proxy::AccessLogOutput::Stdout,
            metric_identity: proxy::MetricIdentity::default(),
            metric_options: proxy::MetricOptions::default(),
            port_retry_interval: proxy::DEFAULT_PORT_RETRY_INTERVAL,
        })
        .expect("the proxy starts");
        let control = ControlPlane::new(
            proxy,
            CompileOptions::default(),
            &Settings::default(),
            Default::default(),
        );
        Provider { control }
    }

    /// Replaces every object; what `act` returned (the configuration when it recompiled).
    fn deliver(&mut self, yaml: &str) -> Option<Arc<Compiled>> {
        let documents = parse_documents("objects.yaml", yaml).expect("the objects parse");
        assert!(documents.errors.is_empty(), "{:?}", documents.errors);
        let changes = self.control.store.replace_all(documents.objects);
        self.control.act(changes)
    }

    fn http(&self) -> SocketAddr {
        self.control.proxy.http_addr()
    }
}

/// A Service `web`, its EndpointSlice with these endpoints, and `extra` YAML documents.
fn objects(endpoints: &[SocketAddr], extra: &str) -> String {
    let port = endpoints.first().map_or(80, SocketAddr::port);
    let endpoints: Vec<String> = endpoints
        .iter()
        .map(|e| {
            assert_eq!(e.port(), port, "one port for every endpoint of the slice");
            format!("{{addresses: ['{}'], conditions: {{ready: true}}}}", e.ip())
        })
        .collect();
    format!(
        "
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {{name: sluice}}
spec: {{controller: sluice.dev/ingress-controller}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: shop}}
spec: {{ports: [{{name: http, port: 80, targetPort: {port}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, namespace: shop, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: shop, namespace: shop, creationTimestamp: '2024-01-01T00:00:00Z'}}
spec:
  ingressClassName: sluice
  rules: [{{host: shop.test, http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}}}]
{extra}",
        endpoints.join(", ")
    )
}

/// A backend (the test application) on its own loopback address, so one EndpointSlice port
/// serves them all: 127.0.0.N:port.
async fn backend_on(last_octet: u8, port: u16, name: &str) -> backend::Backend {
    backend::Backend::start(backend::BackendConfig {
        listen: vec![SocketAddr::from(([127, 0, 0, last_octet], port))],
        name: name.to_owned(),
    })
    .await
    .expect("the backend starts")
}

/// `GET path` for `host` on a fresh connection: status and body.
async fn get(addr: SocketAddr, host: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    (status, body)
}

/// The backend that answered, from the test application's `Server name:` line.
async fn served_by(addr: SocketAddr) -> String {
    let (status, body) = get(addr, "shop.test", "/").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix("Server name: "))
        .unwrap_or_else(|| panic!("the backend names itself: {body}"))
        .to_owned()
}

#[tokio::test]
async fn configuration_changes_recompile_and_endpoint_changes_patch_what_was_published() {
    // One port for both backends (the slice has one port), on two loopback addresses.
    let probe = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let a = backend_on(2, port, "a").await;
    let b = backend_on(3, port, "b").await;
    let (a_addr, b_addr) = (a.local_addrs()[0], b.local_addrs()[0]);

    let mut provider = Provider::start();
    assert!(provider.control.current().is_none());
    let first = provider
        .deliver(&objects(&[a_addr], ""))
        .expect("the first delivery compiles and publishes");
    assert!(first.diagnostics.is_empty(), "{:?}", first.diagnostics);
    assert!(Arc::ptr_eq(provider.control.current().unwrap(), &first));
    assert_eq!(served_by(provider.http()).await, "a");

    // Only the EndpointSlice changed: no compile; the published configuration's endpoint cell
    // is patched, and the next request goes to the new endpoint.
    assert!(provider.deliver(&objects(&[b_addr], "")).is_none());
    assert!(Arc::ptr_eq(provider.control.current().unwrap(), &first));
    assert_eq!(served_by(provider.http()).await, "b");

    // A broken Ingress beside it: recompiled, reported, and the good route keeps serving.
    let broken = "---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: broken, namespace: shop}
spec:
  ingressClassName: sluice
  rules: [{host: 'Not A Host', http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
";
    let second = provider
        .deliver(&objects(&[b_addr], broken))
        .expect("an Ingress change recompiles");
    assert!(!Arc::ptr_eq(&second, &first));
    let reported = provider.control.diagnostics_to_report(&second);
    assert!(
        reported
            .iter()
            .any(|d| d.severity == Severity::Error && d.to_string().contains("broken")),
        "{reported:?}"
    );
    assert_eq!(served_by(provider.http()).await, "b");
    assert_eq!(get(provider.http(), "other.test", "/").await.0, 404);

    // A provider's own error (a file it could not read) is shown beside the diagnostics, from
    // the control plane's next act (here one that changes nothing else).
    provider
        .control
        .report_source_errors(vec!["objects.yaml: not valid YAML at line 3".into()]);
    provider.control.act(translate::ChangeSet::default());
    let status = provider.control.proxy.status_addr();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, page) = get(status, "localhost", "/config").await;
        if code == 200 && page.contains("not valid YAML at line 3") {
            break;
        }
        assert!(Instant::now() < deadline, "/config never showed it: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn endpoints_before_the_first_configuration_wait_for_it() {
    // The fast path needs a published configuration to patch: before one, an endpoint change
    // is not applied anywhere, and the first compile includes it.
    let a = backend_on(4, 0, "first").await;
    let a_addr = a.local_addrs()[0];
    let mut provider = Provider::start();
    let slice_only = format!(
        "
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, namespace: shop, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: {}}}]
endpoints: [{{addresses: ['{}'], conditions: {{ready: true}}}}]
",
        a_addr.port(),
        a_addr.ip()
    );
    assert!(provider.deliver(&slice_only).is_none());
    assert!(provider.control.current().is_none());
    let compiled = provider
        .deliver(&objects(&[a_addr], ""))
        .expect("the Ingress compiles");
    assert!(
        compiled.diagnostics.is_empty(),
        "{:?}",
        compiled.diagnostics
    );
    assert_eq!(served_by(provider.http()).await, "first");
}

/// Sluice watches every ConfigMap of its scope; a change to one no compile read (an
/// application's own) costs no compile, while one a compile looked up (here the controller's,
/// read while it did not exist yet) compiles again.
#[tokio::test]
async fn only_a_change_to_a_config_map_the_compile_read_recompiles() {
    let backend = backend_on(2, 0, "a").await;
    let web = backend.local_addrs()[0];
    let app_config = |level: &str| {
        format!(
            "---
apiVersion: v1
kind: ConfigMap
metadata: {{name: app-settings, namespace: shop}}
data: {{LOG_LEVEL: {level}}}
"
        )
    };
    let mut provider = Provider::start();
    let first = provider
        .deliver(&objects(&[web], &app_config("info")))
        .expect("the first delivery compiles");
    assert!(first
        .config_maps_read
        .contains(&model::NamespacedName::new("sluice", "sluice")));
    assert!(provider
        .deliver(&objects(&[web], &app_config("debug")))
        .is_none());
    assert!(Arc::ptr_eq(provider.control.current().unwrap(), &first));
    let settings = "---
apiVersion: v1
kind: ConfigMap
metadata: {name: sluice, namespace: sluice}
data: {http-redirect-code: '301'}
";
    let second = provider
        .deliver(&objects(&[web], &(app_config("debug") + settings)))
        .expect("the controller's ConfigMap appearing recompiles");
    assert_eq!(second.settings.http_redirect_code, 301);
}
