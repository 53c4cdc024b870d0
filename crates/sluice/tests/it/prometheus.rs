//! The metrics as Prometheus sees them: a real Prometheus (Debian's `prometheus` package)
//! scrapes a running `sluice serve`, and after some traffic every PromQL expression of the
//! dashboards shipped in `deploy/grafana/dashboards/` and of ingress-nginx's community
//! dashboards (`tests/data/ingress-nginx-dashboard-queries.promql`) returns data.
//!
//! The scrape job adds the target labels Kubernetes service discovery adds (`namespace`,
//! `kubernetes_pod_name`), so the metrics' own `namespace` label becomes `exported_namespace`,
//! as the community dashboards expect.
//!
//! Prometheus is `$SLUICE_PROMETHEUS`, else `/usr/bin/prometheus` (scripts/test.sh installs
//! the package). Without it the test is skipped with a message, except under CI (`CI=true`),
//! where it fails.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

const HOST: &str = "shop.test";

fn prometheus_binary() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let path = std::env::var_os("SLUICE_PROMETHEUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus"));
    if path.is_file() {
        return Some(path);
    }
    assert!(
        !ci,
        "CI: {} is missing; scripts/test.sh installs Debian's prometheus package",
        path.display()
    );
    eprintln!(
        "skipped: {} not found (apt-get install prometheus, or set SLUICE_PROMETHEUS)",
        path.display()
    );
    None
}

/// A running Prometheus, killed on drop.
struct Prometheus {
    child: std::process::Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(binary: &Path, dir: &Path, target: SocketAddr) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 scrape_configs:\n\
                 - job_name: sluice\n\
                 \x20 static_configs:\n\
                 \x20 - targets: ['{target}']\n\
                 \x20   labels: {{namespace: ingress, kubernetes_pod_name: sluice-test, pod: sluice-test}}\n"
            ),
        )
        .unwrap();
        // A free port: bound and released; Prometheus binds it a moment later.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let log = dir.join("prometheus.log");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus starts");
        let prometheus = Prometheus { child, addr, log };
        eventually(Duration::from_secs(60), "Prometheus is ready", || {
            get(prometheus.addr, "prometheus", "/-/ready")
                .ok()
                .filter(|r| r.status == 200)
        });
        prometheus
    }

    /// Evaluates `expr` now: the result vector (or scalar), as JSON.
    fn query(&self, expr: &str) -> serde_json::Value {
        let path = format!("/api/v1/query?query={}", url_encode(expr));
        let response = get(self.addr, "prometheus", &path).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&response.body)
            .unwrap_or_else(|e| panic!("{expr}: not JSON ({e}): {}", response.text()));
        assert_eq!(body["status"], "success", "{expr}: {body}");
        body["data"]["result"].clone()
    }

    fn has_data(&self, expr: &str) -> bool {
        match self.query(expr) {
            serde_json::Value::Array(series) => !series.is_empty(),
            // A scalar or string result is data.
            other => !other.is_null(),
        }
    }
}

fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Grafana's template variables as its "All" value; range variables as a window.
fn instantiate(expr: &str) -> String {
    let mut out = expr.to_owned();
    for variable in [
        "$exported_namespace",
        "$controller_class",
        "$controller",
        "$namespace",
        "$ingress",
    ] {
        out = out.replace(variable, ".*");
    }
    out.replace("$__rate_interval", "2m")
        .replace("$__interval", "1m")
}

/// An expression to evaluate, where it comes from, and whether it must return data.
struct Query {
    source: String,
    expr: String,
    empty_when_healthy: bool,
}

fn dashboard_queries(dir: &Path) -> Vec<Query> {
    let mut queries = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let dashboard: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let mut exprs = Vec::new();
        collect_exprs(&dashboard, &mut exprs);
        assert!(!exprs.is_empty(), "{}: no queries", path.display());
        for variable in dashboard["templating"]["list"].as_array().unwrap() {
            // label_values(metric{selector}, label): the metric's series carry that label.
            if let Some(query) = variable["definition"].as_str() {
                let inner = query
                    .strip_prefix("label_values(")
                    .and_then(|q| q.strip_suffix(')'))
                    .and_then(|q| q.rsplit_once(','))
                    .unwrap_or_else(|| panic!("{}: unexpected variable {query}", path.display()));
                let (metric, label) = (inner.0.trim(), inner.1.trim());
                exprs.push(format!("count by ({label}) ({metric})"));
            }
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        queries.extend(exprs.into_iter().map(|expr| Query {
            source: name.clone(),
            expr,
            empty_when_healthy: false,
        }));
    }
    queries
}

fn collect_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(expr) = map.get("expr").and_then(|e| e.as_str()) {
                out.push(expr.to_owned());
            }
            map.values().for_each(|v| collect_exprs(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

fn community_queries(file: &Path) -> Vec<Query> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut queries = Vec::new();
    for block in text.split("\n----") {
        let mut empty_when_healthy = false;
        let mut expr = String::new();
        for line in block.lines() {
            if line.starts_with("# empty when healthy:") {
                empty_when_healthy = true;
            } else if !line.starts_with('#') {
                expr.push_str(line);
                expr.push('\n');
            }
        }
        if !expr.trim().is_empty() {
            queries.push(Query {
                source: "ingress-nginx community dashboards".into(),
                expr: expr.trim().to_owned(),
                empty_when_healthy,
            });
        }
    }
    queries
}

#[test]
fn prometheus_scrapes_sluice_and_every_dashboard_query_returns_data() {
    let Some(binary) = prometheus_binary() else {
        return;
    };
    let dir = temp_dir("prometheus");
    let pod = Pod::start("pod");
    let Leaf {
        cert_pem: cert,
        key_pem: key,
        ..
    } = self_signed(&[HOST]);
    std::fs::write(
        dir.join("app.yaml"),
        app_yaml("shop", HOST, &[pod.addr]).replace(
            "  rules:\n",
            &format!("  tls: [{{hosts: [{HOST}], secretName: shop-tls}}]\n  rules:\n"),
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("secret.yaml"),
        tls_secret_yaml("shop-tls", &cert, &key),
    )
    .unwrap();
    let mut command = Command::new(BIN);
    command
        .args(Serve::args(&dir, &[]))
        .env("SLUICE_LOG", "warn")
        .env("POD_NAME", "sluice-test")
        .env("POD_NAMESPACE", "ingress")
        .stderr(Stdio::inherit());
    let serve = Serve::from_process(Process::spawn(command, "sluice serve"));
    // Its own directory: Sluice reads every file under its --config.
    let prometheus = Prometheus::start(&binary, &temp_dir("prometheus-server"), serve.admin);
    eventually(Duration::from_secs(30), "a first scrape", || {
        prometheus
            .has_data("nginx_ingress_controller_config_hash")
            .then_some(())
    });

    // Traffic over TLS (the rule's host has TLS, so plain HTTP would be redirected): pages,
    // client errors and server errors from the backend.
    let ca = cert.as_bytes();
    for round in 0..3 {
        for _ in 0..20 {
            assert_eq!(get_tls(serve.https, HOST, ca, "/").unwrap().status, 200);
        }
        assert_eq!(
            get_tls(serve.https, HOST, ca, "/status/404")
                .unwrap()
                .status,
            404
        );
        assert_eq!(
            get_tls(serve.https, HOST, ca, "/status/503")
                .unwrap()
                .status,
            503
        );
        // Scrapes between rounds, so rates see counters move.
        let seen = format!(
            "sum(nginx_ingress_controller_requests) >= {}",
            (round + 1) * 22
        );
        eventually(
            Duration::from_secs(30),
            "the round's requests scraped",
            || prometheus.has_data(&seen).then_some(()),
        );
    }
    std::thread::sleep(Duration::from_secs(2));

    let dashboards = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/dashboards");
    let community = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ingress-nginx-dashboard-queries.promql");
    let queries: Vec<Query> = dashboard_queries(&dashboards)
        .into_iter()
        .chain(community_queries(&community))
        .collect();
    assert!(queries.len() > 50, "only {} queries found", queries.len());
    let mut failures = Vec::new();
    for query in &queries {
        let expr = instantiate(&query.expr);
        let has_data = prometheus.has_data(&expr);
        if has_data == query.empty_when_healthy {
            failures.push(format!(
                "{}: {}: {expr}",
                query.source,
                if has_data {
                    "data, expected none on a healthy controller"
                } else {
                    "no data"
                }
            ));
        }
    }
    let log = std::fs::read_to_string(&prometheus.log).unwrap_or_default();
    assert!(
        failures.is_empty(),
        "{} of {} queries failed:\n{}\n\n/metrics:\n{}\n\nPrometheus log:\n{log}",
        failures.len(),
        queries.len(),
        failures.join("\n"),
        serve.admin("/metrics").text()
    );
    // The values, not only their presence: the success ratio of the shop Ingress is 20/22.
    let ratio = prometheus.query(
        "sum(increase(nginx_ingress_controller_requests{ingress=\"shop\",status!~\"[4-5].*\"}[5m])) \
         / sum(increase(nginx_ingress_controller_requests{ingress=\"shop\"}[5m]))",
    );
    let value: f64 = ratio[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!((value - 20.0 / 22.0).abs() < 0.01, "success ratio {value}");
    let expiry = prometheus.query(
        "nginx_ingress_controller_ssl_expire_time_seconds{host=\"shop.test\",exported_namespace=\"default\",secret_name=\"shop-tls\"}",
    );
    assert_eq!(expiry.as_array().unwrap().len(), 1, "{expiry}");
}
