//! `sluice migrate` end to end: the real binary on a generated ingress-nginx configuration.

use std::fmt::Write as _;
use std::process::Command;

use crate::support::*;

const PLAIN: usize = 10_000;

fn ingress(name: &str, host: &str, path: &str, path_type: &str, annotations: &str) -> String {
    format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\n\
         metadata: {{name: {name}, namespace: shop, annotations: {{{annotations}}}}}\n\
         spec:\n  ingressClassName: nginx\n  rules: [{{host: {host}, http: {{paths: [{{path: {path}, \
         pathType: {path_type}, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}}}]\n"
    )
}

/// IngressClass nginx, the seeds' community ConfigMap, a Service, `PLAIN` plain Ingresses, and
/// `extra` more.
fn config(test: &str, extra: &str) -> std::path::PathBuf {
    let dir = temp_dir(test);
    let mut text = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\n\
         spec: {controller: k8s.io/ingress-nginx}\n---\n\
         apiVersion: v1\nkind: ConfigMap\n\
         metadata: {name: ingress-nginx-controller, namespace: ingress-nginx}\n\
         data: {max-worker-connections: '10000', max-worker-open-files: '10204', \
         upstream-keepalive-connections: '100', keep-alive-requests: '100000000'}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n\
         spec: {ports: [{name: http, port: 80}]}\n",
    );
    for i in 0..PLAIN {
        text.push_str(&ingress(
            &format!("ing-{i:05}"),
            &format!("h{i}.test"),
            "/",
            "Prefix",
            "",
        ));
    }
    text.push_str(extra);
    std::fs::write(dir.join("ingresses.yaml"), text).unwrap();
    dir
}

fn migrate(dir: &std::path::Path, json: &std::path::Path) -> (i32, String, String) {
    let output = Command::new(BIN)
        .args(["migrate", "--config", dir.to_str().unwrap(), "--json"])
        .arg(json)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn every_ingress_gets_one_verdict_and_exit_1_names_the_ones_not_served_as_written() {
    let mut extra = String::new();
    // An annotation Sluice does not implement.
    extra.push_str(&ingress(
        "sticky",
        "sticky.test",
        "/",
        "Prefix",
        "nginx.ingress.kubernetes.io/http2-push-preload: \"true\"",
    ));
    // Authentication whose Secret does not exist: refused, never served open.
    extra.push_str(&ingress(
        "basic-auth",
        "private.test",
        "/",
        "Prefix",
        "nginx.ingress.kubernetes.io/auth-type: basic, nginx.ingress.kubernetes.io/auth-secret: htpasswd",
    ));
    // ingress-nginx matched ImplementationSpecific /app as a string prefix; Sluice as Prefix.
    extra.push_str(&ingress(
        "legacy",
        "legacy.test",
        "/app",
        "ImplementationSpecific",
        "",
    ));
    // The path ing-00000 already routes: left out (files have no timestamps: by name).
    extra.push_str(&ingress("zz-copy", "h0.test", "/", "Prefix", ""));
    // Another controller's Ingress is not judged.
    let _ = write!(
        extra,
        "{}",
        ingress("elsewhere", "x.test", "/", "Prefix", "").replace("nginx\n", "other\n")
    );
    let dir = config("migrate-10k", &extra);
    let json = dir.join("verdicts.json");
    let (code, stdout, stderr) = migrate(&dir, &json);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stdout.starts_with(&format!(
            "{} Ingresses: {PLAIN} served as ingress-nginx would, 1 served with differences, 3 not served as written.\n",
            PLAIN + 4
        )),
        "{}",
        &stdout[..stdout.len().min(400)]
    );
    assert!(stdout.contains("| shop/ing-00042 | served as ingress-nginx would |  |\n"));
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("| shop/{name} |")))
            .unwrap_or_else(|| panic!("no row for {name}"))
            .to_owned()
    };
    assert!(line("sticky").contains("| not served as written | unsupported: "));
    assert!(line("sticky").contains("http2-push-preload"));
    assert!(line("basic-auth").contains("| not served as written | "));
    assert!(
        line("basic-auth").contains("error: "),
        "{}",
        line("basic-auth")
    );
    assert!(line("basic-auth").contains("Secret shop/htpasswd not found"));
    assert!(line("legacy").contains("| served with differences | difference: "));
    assert!(line("zz-copy").contains("| not served as written | error: "));
    assert!(line("zz-copy").contains("already routed by Ingress shop/ing-00000"));
    assert!(!stdout.contains("elsewhere"));
    // The seeds' ConfigMap has nothing to say.
    assert!(
        !stdout.contains("Other objects"),
        "{}",
        &stdout[stdout.len() - 400..]
    );

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let verdicts = report["ingresses"].as_array().unwrap();
    assert_eq!(verdicts.len(), PLAIN + 4);
    let verdict = |name: &str| {
        verdicts
            .iter()
            .find(|v| v["ingress"] == format!("shop/{name}"))
            .unwrap()
            .clone()
    };
    assert_eq!(verdict("ing-09999")["verdict"], "served");
    assert_eq!(verdict("legacy")["verdict"], "served-with-differences");
    assert_eq!(
        verdict("legacy")["diagnostics"][0]["severity"],
        "difference"
    );
    assert_eq!(verdict("sticky")["verdict"], "not-served-as-written");
    assert_eq!(
        verdict("sticky")["diagnostics"][0]["severity"],
        "unsupported"
    );
    assert_eq!(verdict("zz-copy")["verdict"], "not-served-as-written");
    assert_eq!(verdict("basic-auth")["verdict"], "not-served-as-written");
}

#[test]
fn a_configuration_served_as_written_exits_0() {
    let dir = config("migrate-clean", "");
    let json = dir.join("verdicts.json");
    let (code, stdout, stderr) = migrate(&dir, &json);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with(&format!(
        "{PLAIN} Ingresses: {PLAIN} served as ingress-nginx would, 0 served with differences, 0 not served as written.\n"
    )));
    let (code, _, stderr) = migrate(std::path::Path::new("/nonexistent/config"), &json);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no such file or directory"), "{stderr}");
}

#[test]
fn ingresses_of_another_class_or_none_are_counted_with_the_option_that_judges_them() {
    let dir = temp_dir("migrate-classes");
    let other = |name: &str, class: &str| {
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\n\
             metadata: {{name: {name}, namespace: shop}}\n\
             spec:\n  {class}rules: [{{host: {name}.test, http: {{paths: [{{path: /, \
             pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}}}]\n"
        )
    };
    let text = [
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n\
         spec: {ports: [{name: http, port: 80}]}\n"
            .to_owned(),
        other("a", "ingressClassName: internal\n  "),
        other("b", "ingressClassName: internal\n  "),
        other("c", ""),
    ]
    .concat();
    std::fs::write(dir.join("ingresses.yaml"), text).unwrap();
    let json = dir.join("verdicts.json");
    // Nothing of the judged class (nginx): not a pass.
    let (code, stdout, stderr) = migrate(&dir, &json);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.starts_with("0 Ingresses: "), "{stdout}");
    assert!(stdout.contains("3 Ingresses not judged"), "{stdout}");
    assert!(
        stdout.contains("- 2 of class `internal`: `--ingress-class internal` judges them"),
        "{stdout}"
    );
    assert!(
        stdout.contains("- 1 name no class: `--watch-ingress-without-class` judges them"),
        "{stdout}"
    );
    assert!(
        stderr.contains("no Ingress is of the judged class"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["skipped"].as_array().unwrap().len(), 3, "{report}");
    assert_eq!(report["skipped"][0]["class"], "internal");
    // With the flag that covers the class-less one, it is judged and the others still counted.
    let output = Command::new(BIN)
        .args(["migrate", "--watch-ingress-without-class", "--config"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("1 Ingresses: 1 served"), "{stdout}");
    assert!(stdout.contains("2 Ingresses not judged"), "{stdout}");
}

/// Services `web` and `web-canary` (one pod each), the TLS Secret of secure.test.
fn backends_yaml(web: &Pod, canary: &Pod, cert: &str, key: &str) -> String {
    let mut text = String::new();
    for (service, pod) in [("web", web), ("web-canary", canary)] {
        let _ = write!(
            text,
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {service}, namespace: shop}}\n\
             spec: {{ports: [{{name: http, port: 80}}]}}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: {service}-1, namespace: shop, labels: {{kubernetes.io/service-name: {service}}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {}}}]\n\
             endpoints: [{{addresses: [\"{}\"]}}]\n",
            pod.addr.port(),
            pod.addr.ip()
        );
    }
    let secret = tls_secret_yaml("secure-tls", cert, key).replace(
        "metadata: {name: secure-tls}",
        "metadata: {name: secure-tls, namespace: shop}",
    );
    assert!(secret.contains("namespace: shop"), "{secret}");
    text.push_str("---\n");
    text.push_str(&secret);
    text
}

/// The Ingresses the conversion is tried on: a canary by header and weight, a rewrite with the
/// `/$2` idiom, a permanent redirect, app-root, and a TLS host whose plain HTTP is redirected.
const INGRESSES: &str = "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec:
  ingressClassName: nginx
  rules: [{host: shop.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop-canary
  namespace: shop
  annotations: {nginx.ingress.kubernetes.io/canary: 'true', nginx.ingress.kubernetes.io/canary-by-header: x-canary}
spec:
  ingressClassName: nginx
  rules: [{host: shop.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web-canary, port: {name: http}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: api
  namespace: shop
  annotations: {nginx.ingress.kubernetes.io/rewrite-target: /$2}
spec:
  ingressClassName: nginx
  rules: [{host: api.test, http: {paths: [{path: '/api(/|$)(.*)', pathType: ImplementationSpecific, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: moved
  namespace: shop
  annotations: {nginx.ingress.kubernetes.io/permanent-redirect: 'https://new.test/landing'}
spec:
  ingressClassName: nginx
  rules: [{host: moved.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: rooted
  namespace: shop
  annotations: {nginx.ingress.kubernetes.io/app-root: /echo/app}
spec:
  ingressClassName: nginx
  rules: [{host: root.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: secure, namespace: shop}
spec:
  ingressClassName: nginx
  tls: [{hosts: [secure.test], secretName: secure-tls}]
  rules: [{host: secure.test, http: {paths: [{path: /echo, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
";

/// Request headers of one test request.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// What a client sees of one answer: status, Location, and which backend saw which path and
/// Host (the backend's `/echo` report).
fn seen(response: &Response) -> String {
    let mut out = format!(
        "{} {}",
        response.status,
        response.header("location").unwrap_or("-")
    );
    if let Ok(echo) = serde_json::from_slice::<serde_json::Value>(&response.body) {
        let _ = write!(
            out,
            " {} {} {}",
            echo["backend"], echo["path"], echo["host"]
        );
    }
    out
}

#[test]
fn ingresses_converted_to_gateway_api_answer_the_same_requests_the_same_way() {
    let web = Pod::start("web");
    let canary = Pod::start("canary");
    let leaf = self_signed(&["secure.test"]);
    let backends = backends_yaml(&web, &canary, &leaf.cert_pem, &leaf.key_pem);
    let ingress_dir = temp_dir("migrate-gw-ingress");
    std::fs::write(ingress_dir.join("backends.yaml"), &backends).unwrap();
    std::fs::write(ingress_dir.join("ingresses.yaml"), INGRESSES).unwrap();

    let output = Command::new(BIN)
        .args([
            "migrate",
            "--to",
            "gateway-api",
            "--gateway",
            "edge/sluice",
            "--config",
        ])
        .arg(&ingress_dir)
        .output()
        .unwrap();
    let (yaml, gaps) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert_eq!(output.status.code(), Some(0), "{gaps}");
    assert!(yaml.contains("kind: Gateway\n"), "{yaml}");
    assert!(yaml.contains("kind: HTTPRoute\n"), "{yaml}");
    // The one difference the conversion knows of is listed, and nothing else.
    assert!(gaps.contains("permanent-redirect"), "{gaps}");
    assert!(gaps.contains("matched case-sensitively"), "{gaps}");
    assert_eq!(
        gaps.lines().filter(|l| l.starts_with("- ")).count(),
        2,
        "{gaps}"
    );

    let gateway_dir = temp_dir("migrate-gw-gateway");
    std::fs::write(gateway_dir.join("backends.yaml"), &backends).unwrap();
    std::fs::write(gateway_dir.join("gateway.yaml"), &yaml).unwrap();
    let ingresses = Serve::start(
        &ingress_dir,
        &[
            "--ingress-class",
            "nginx",
            "--controller-class",
            "k8s.io/ingress-nginx",
        ],
    );
    let gateway = Serve::start(&gateway_dir, &[]);
    let requests: &[(&str, &str, Headers)] = &[
        ("shop.test", "/echo/a", &[]),
        ("shop.test", "/echo/a", &[("x-canary", "always")]),
        ("shop.test", "/echo/b", &[("x-canary", "never")]),
        ("api.test", "/api/echo/deep?q=1", &[]),
        ("api.test", "/api", &[]),
        ("moved.test", "/anything", &[]),
        ("root.test", "/", &[]),
        ("root.test", "/echo/other", &[]),
        ("secure.test", "/echo/s", &[]),
        ("unknown.test", "/echo", &[]),
    ];
    let mut answers = Vec::new();
    for (host, path, headers) in requests {
        let answer = |serve: &Serve| {
            let mut stream = std::net::TcpStream::connect(serve.http).unwrap();
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            seen(&request(&mut stream, "GET", host, path, headers).unwrap())
        };
        let (want, got) = (answer(&ingresses), answer(&gateway));
        assert_eq!(want, got, "{host}{path} {headers:?}\n{yaml}");
        answers.push(want);
    }
    // Over TLS, with the Secret's certificate on both.
    let tls = |serve: &Serve| {
        seen(
            &get_tls(
                serve.https,
                "secure.test",
                leaf.cert_pem.as_bytes(),
                "/echo/s",
            )
            .unwrap(),
        )
    };
    assert_eq!(tls(&ingresses), tls(&gateway));
    // The answers were the interesting ones, not 404s everywhere.
    let expected = [
        "200 - \"web\" \"/echo/a\" \"shop.test\"",
        "200 - \"canary\" \"/echo/a\" \"shop.test\"",
        "200 - \"web\" \"/echo/b\" \"shop.test\"",
        "200 - \"web\" \"/echo/deep\" \"api.test\"",
        "301 https://new.test/landing",
        "308 https://secure.test/echo/s",
    ];
    for answer in expected {
        assert!(
            answers.iter().any(|a| a == answer),
            "{answer:?} not in {answers:#?}"
        );
    }
    assert!(
        tls(&gateway).starts_with("200 - \"web\" \"/echo/s\""),
        "{}",
        tls(&gateway)
    );
}
