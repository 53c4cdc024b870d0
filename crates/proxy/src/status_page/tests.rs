use super::*;
use model::{Kind, ObjectRef, Severity};
use translate::{CompileOptions, Store};

fn compiled(yaml: &str) -> Compiled {
    let documents = translate::parse_documents("test.yaml", yaml).expect("objects parse");
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    let mut store = Store::default();
    store.replace_all(documents.objects);
    translate::compile(&store, &CompileOptions::default())
}

fn page(config: Option<Compiled>) -> Page {
    Page {
        now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        ready: config.is_some(),
        terminating: false,
        config: config.map(Arc::new),
        source_errors: Vec::new(),
        config_swaps_total: 0,
        endpoint_swaps_total: 0,
        config_swaps: Vec::new(),
        endpoint_swaps: Vec::new(),
        traffic: Traffic::default(),
        workers: 2,
        workers_answered: 2,
        fallback_not_after: None,
    }
}

const HOSTILE: &str = "<script>alert('x')</script>";

#[test]
fn tcp_services_are_listed_only_when_there_are_some() {
    assert!(!render(&page(Some(compiled("")))).contains("TCP services"));
    let yaml = r#"
apiVersion: v1
kind: Service
metadata: {name: db, namespace: app}
spec: {ports: [{name: pg, port: 5432}, {name: dns, port: 53, protocol: UDP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: app, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: pg, port: 15432}]
endpoints: [{addresses: [10.0.0.7]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tcp, namespace: sluice}
data: {"9000": "app/db:pg:PROXY"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: udp, namespace: sluice}
data: {"5353": "app/db:dns"}
"#;
    let documents = translate::parse_documents("test.yaml", yaml).expect("objects parse");
    let mut store = Store::default();
    store.replace_all(documents.objects);
    let options = CompileOptions {
        tcp_services_config_map: Some(model::NamespacedName::new("sluice", "tcp")),
        udp_services_config_map: Some(model::NamespacedName::new("sluice", "udp")),
        ..CompileOptions::default()
    };
    let html = render(&page(Some(translate::compile(&store, &options))));
    assert!(html.contains("<h2>TCP services</h2>"), "{html}");
    assert!(html.contains("<h2>UDP services</h2>"), "{html}");
    assert!(
        html.contains("<td class=\"num\">5353</td><td>app/db:dns</td><td></td>"),
        "{html}"
    );
    assert!(
        html.contains("<td class=\"num\">9000</td><td>app/db:pg</td><td>from clients</td>"),
        "{html}"
    );
    assert!(html.contains("<code>10.0.0.7:15432</code>"), "{html}");
}

#[test]
fn every_tenant_value_is_escaped() {
    // An annotation value and a path as a tenant may write them, a diagnostic naming an
    // object with markup in its name, a source error quoting a file.
    let yaml = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/proxy-connect-timeout: "<script>alert('x')</script>"
spec:
  ingressClassName: sluice
  rules:
  - host: web.test
    http:
      paths:
      - path: "/<script>alert('x')</script>"
        pathType: Exact
        backend: {service: {name: "<script>", port: {number: 80}}}
"#;
    let mut config = compiled(yaml);
    config.diagnostics.push(Diagnostic {
        object: ObjectRef {
            kind: Kind::Ingress,
            namespace: "default".into(),
            name: HOSTILE.into(),
        },
        reason: HOSTILE.into(),
        severity: Severity::Error,
    });
    let mut page = page(Some(config));
    page.source_errors = vec![format!("{HOSTILE}.yaml: not valid YAML")];
    page.config_swaps = vec![Swap {
        at: page.now,
        summary: HOSTILE.into(),
    }];
    page.traffic = Traffic::since(None, &[(HOSTILE.to_owned(), (1, 0))].into());
    let html = render(&page);

    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("alert('x')"), "{html}");
    let escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;";
    // The path, the annotation's diagnostic, the pushed diagnostic (object and message),
    // the source error, the swap and the traffic row.
    assert!(html.matches(escaped).count() >= 7, "{html}");
    assert!(html.contains("web.test"), "{html}");
    assert!(html.contains("proxy-connect-timeout"), "{html}");
}

#[test]
fn the_escaper_handles_every_special_character_and_leaves_the_rest() {
    assert_eq!(
        Html("a&b<c>d\"e'f — ü").to_string(),
        "a&amp;b&lt;c&gt;d&quot;e&#39;f — ü"
    );
    assert_eq!(Html("").to_string(), "");
    assert_eq!(Html("plain").to_string(), "plain");
}

#[test]
fn rates_cover_the_interval_since_the_previous_view() {
    let before: Totals = [("default/web".to_owned(), (100, 4))].into();
    let now: Totals = [
        ("default/web".to_owned(), (150, 9)),
        ("default/api".to_owned(), (500, 0)),
        // A worker that did not answer this time: its counts dip, never a negative rate.
        (String::new(), (0, 0)),
    ]
    .into();
    let traffic = Traffic::since(Some((Duration::from_secs(10), &before)), &now);
    assert_eq!(traffic.interval, Some(Duration::from_secs(10)));
    let names: Vec<&str> = traffic
        .by_ingress
        .iter()
        .map(|r| r.ingress.as_str())
        .collect();
    assert_eq!(names, ["default/api", "default/web", ""]);
    assert_eq!(traffic.by_ingress[0].rates, Some((50.0, 0.0)));
    assert_eq!(traffic.by_ingress[1].rates, Some((5.0, 0.5)));
    assert_eq!(traffic.by_ingress[1].server_errors, 9);

    let first = Traffic::since(None, &now);
    assert_eq!(first.interval, None);
    assert!(first.by_ingress.iter().all(|r| r.rates.is_none()));
}

#[test]
fn the_page_shows_routes_endpoints_and_diagnostics_of_the_configuration() {
    let yaml = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: ["10.0.0.1"]}
- {addresses: ["10.0.0.2"], conditions: {ready: false, serving: true, terminating: true}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: sluice
  rules:
  - host: web.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
  - host: broken.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: missing, port: {number: 80}}}}
"#;
    let html = render(&page(Some(compiled(yaml))));
    for expected in [
        "web.test",
        "broken.test",
        "default/web",
        "web:http",
        "<code>10.0.0.1:8080</code>",
        "<code>10.0.0.2:8080</code>",
        "unresolved: answers 503",
        "sev-missing",
        "href=\"/config\"",
    ] {
        assert!(html.contains(expected), "{expected} missing:\n{html}");
    }
    // No script, no asset fetched from anywhere.
    for forbidden in [
        "<script", "<link", "<img", "src=", "url(", "@import", "http://", "https://",
    ] {
        assert!(!html.contains(forbidden), "{forbidden} found:\n{html}");
    }
    assert!(render(&page(None)).contains("not ready: no configuration published yet"));
}

#[test]
fn certificates_show_their_secret_issuer_and_days_left() {
    use base64::Engine;
    let now = page(None).now;
    let mut params = rcgen::CertificateParams::new(vec!["shop.test".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Shop CA <b>");
    params.not_after = (now + Duration::from_secs(5 * 86_400)).into();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let base64 = |pem: String| base64::engine::general_purpose::STANDARD.encode(pem);
    let yaml = format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: shop-tls, namespace: default}}
type: kubernetes.io/tls
data: {{tls.crt: {}, tls.key: {}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: shop, namespace: default}}
spec:
  ingressClassName: sluice
  tls: [{{hosts: [shop.test], secretName: shop-tls}}]
  rules: [{{host: shop.test}}]
"#,
        base64(cert.pem()),
        base64(key.serialize_pem())
    );
    let mut page = page(Some(compiled(&yaml)));
    page.fallback_not_after = Some(unix_seconds(now) - 86_400);
    let html = render(&page);
    let row = html
        .lines()
        .find(|line| line.contains("default/shop-tls"))
        .unwrap_or_else(|| panic!("no row for the Secret:\n{html}"));
    assert!(row.contains("<td>shop.test</td>"), "{row}");
    assert!(row.contains("Shop CA &lt;b&gt;"), "{row}");
    assert!(row.contains("2027-01-20T08:00:00Z"), "{row}");
    assert!(row.contains("<td class=\"num warn\">5</td>"), "{row}");
    let fallback = html
        .lines()
        .find(|line| line.contains("Sluice's own"))
        .unwrap_or_else(|| panic!("no row for the fallback certificate:\n{html}"));
    assert!(
        fallback.contains("<td class=\"num bad\">expired</td>"),
        "{fallback}"
    );
}

#[test]
fn long_tables_stop_at_a_bound_and_point_to_config() {
    let mut config = Compiled::default();
    let diagnostic = |n: usize| Diagnostic {
        object: ObjectRef {
            kind: Kind::Ingress,
            namespace: "default".into(),
            name: format!("ingress-{n}"),
        },
        reason: "unknown annotation".into(),
        severity: Severity::Unsupported,
    };
    config.diagnostics = (0..ROWS_SHOWN + 100).map(diagnostic).collect();
    let html = render(&page(Some(config)));
    assert_eq!(html.matches("sev-unsupported\">").count(), ROWS_SHOWN);
    assert!(
        html.contains("100 more rows not shown: see <a href=\"/config\">/config</a>"),
        "{html}"
    );
}

#[test]
fn ages_read_like_a_person_says_them() {
    let ago = |s| Ago(Duration::from_secs(s)).to_string();
    assert_eq!(ago(5), "5 s ago");
    assert_eq!(ago(600), "10 min ago");
    assert_eq!(ago(3 * 3600), "3 h ago");
    assert_eq!(ago(3 * 86_400), "3 d ago");
}
