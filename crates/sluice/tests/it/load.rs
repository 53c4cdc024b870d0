//! `sluice load` through `sluice serve` to backend pods: the path every lab experiment takes.

use std::process::Command;
use std::time::Duration;

use crate::support::*;

#[test]
fn sluice_load_drives_sluice_serve_over_tls_at_a_constant_rate_without_errors() {
    let dir = temp_dir("load");
    let pods = [Pod::start("p1"), Pod::start("p2")];
    let host = "app.example.com";
    let Leaf {
        cert_pem: cert,
        key_pem: key,
        ..
    } = self_signed(&[host]);
    let app = app_yaml("app", host, &[pods[0].addr, pods[1].addr]).replace(
        "  rules:\n",
        &format!("  tls: [{{hosts: [{host}], secretName: app-tls}}]\n  rules:\n"),
    );
    std::fs::write(dir.join("app.yaml"), app).unwrap();
    std::fs::write(
        dir.join("secret.yaml"),
        tls_secret_yaml("app-tls", &cert, &key),
    )
    .unwrap();
    std::fs::write(dir.join("ca.pem"), &cert).unwrap();
    let serve = Serve::start(&dir, &[]);

    let json = dir.join("results.json");
    let output = Command::new(BIN)
        .args(["load", "-t", "1", "-c", "8", "-d", "2s", "-R", "400", "-L"])
        .arg("--cacert")
        .arg(dir.join("ca.pem"))
        .arg("--connect-to")
        .arg(serve.https.to_string())
        .arg("--json")
        .arg(&json)
        .arg(format!("https://{host}/"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("99.9999%"), "{stdout}");

    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let errors = &results["errors"];
    for class in ["connect", "read", "write", "timeout", "status"] {
        assert_eq!(errors[class], 0, "{class} errors: {results}");
    }
    // 400/s for 2 s: every request sent completed with 200, and the proxy counted them. On a
    // busy machine a connection can still be waiting for its previous answer when the run
    // ends: its last due request is `unsent`, not lost (a late client, not a proxy error).
    let completed = results["requests"].as_u64().unwrap();
    let unsent = results["unsent"].as_u64().unwrap();
    assert_eq!(completed + unsent, 800, "{results}");
    assert!(unsent <= 8, "more than 1% unsent: {results}");
    assert_eq!(results["status_codes"]["200"], completed, "{results}");
    eventually(Duration::from_secs(5), "200s counted in /metrics", || {
        let metrics = serve.admin("/metrics").text();
        metrics.contains("status=\"200\"").then_some(())
    });
}
