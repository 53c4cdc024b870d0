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
        "nginx.ingress.kubernetes.io/ssl-ciphers: HIGH",
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
    assert!(line("sticky").contains("ssl-ciphers"));
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
