//! TLS through files end to end: a Secret file rotated under a running `sluice serve`.

use std::time::Duration;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);
const HOST: &str = "secure.test";

#[test]
fn a_rotated_secret_file_serves_new_handshakes_and_open_connections_keep_working() {
    let dir = temp_dir("rotate");
    let pod = Pod::start("pod");
    let Leaf {
        cert_pem: old_cert,
        key_pem: old_key,
        ..
    } = self_signed(&[HOST]);
    let Leaf {
        cert_pem: new_cert,
        key_pem: new_key,
        ..
    } = self_signed(&[HOST]);
    let app = tls_app_yaml("web", HOST, &[pod.addr], "web-tls");
    std::fs::write(dir.join("class.yaml"), CLASS_YAML).unwrap();
    std::fs::write(dir.join("app.yaml"), app).unwrap();
    std::fs::write(
        dir.join("secret.yaml"),
        tls_secret_yaml("web-tls", &old_cert, &old_key),
    )
    .unwrap();
    let serve = Serve::start(&dir, &[]);
    // Each handshake check below builds its client anew: a client with a cached session would
    // resume it without being shown a certificate at all.
    let mut open = TlsConnection::open(serve.https, HOST, tls_client(old_cert.as_bytes()))
        .expect("old certificate served");
    assert_eq!(open.get("/").unwrap().status, 200);
    assert!(TlsConnection::open(serve.https, HOST, tls_client(new_cert.as_bytes())).is_err());

    write_atomically(
        &dir.join("secret.yaml"),
        &tls_secret_yaml("web-tls", &new_cert, &new_key),
    );
    eventually(WAIT, "new handshakes get the rotated certificate", || {
        TlsConnection::open(serve.https, HOST, tls_client(new_cert.as_bytes())).ok()
    });
    // A fresh client (no cached session to resume) sees only the new certificate.
    assert!(
        TlsConnection::open(serve.https, HOST, tls_client(old_cert.as_bytes())).is_err(),
        "the old certificate is no longer served"
    );
    // The connection opened before the rotation is untouched and keeps serving.
    for _ in 0..3 {
        assert_eq!(open.get("/1kb.bin").unwrap().body.len(), 1024);
    }
}

#[test]
fn an_invalid_secret_falls_back_to_the_default_certificate_and_is_diagnosed() {
    let dir = temp_dir("invalid-secret");
    let pod = Pod::start("pod");
    let Leaf {
        cert_pem: cert,
        key_pem: _,
        ..
    } = self_signed(&[HOST]);
    let Leaf {
        cert_pem: _,
        key_pem: other_key,
        ..
    } = self_signed(&[HOST]);
    let app = tls_app_yaml("web", HOST, &[pod.addr], "web-tls");
    std::fs::write(dir.join("app.yaml"), app).unwrap();
    std::fs::write(
        dir.join("secret.yaml"),
        tls_secret_yaml("web-tls", &cert, &other_key),
    )
    .unwrap();
    let serve = Serve::start(&dir, &[]);
    // The mismatched pair is not served: the handshake presents the self-signed default.
    assert!(TlsConnection::open(serve.https, HOST, tls_client(cert.as_bytes())).is_err());
    let diagnostics = serve.config_json()["config"]["diagnostics"].to_string();
    assert!(
        diagnostics.contains("does not belong to data.tls.crt"),
        "{diagnostics}"
    );
    // Plain HTTP to the host still routes (ssl-redirect answers 308 for a TLS host).
    assert_eq!(serve.get(HOST, "/").status, 308);
}

#[test]
fn a_certificate_near_its_expiry_is_logged_diagnosed_and_its_expiry_is_a_metric() {
    let dir = temp_dir("expiring");
    let pod = Pod::start("pod");
    let now = std::time::SystemTime::now();
    let soon = now + Duration::from_secs(5 * 24 * 3600);
    let Leaf {
        cert_pem: expiring_cert,
        key_pem: expiring_key,
        ..
    } = self_signed_until(HOST, soon);
    let Leaf {
        cert_pem: expired_cert,
        key_pem: expired_key,
        ..
    } = self_signed_until("old.test", now - Duration::from_secs(60));
    let Leaf {
        cert_pem: fine_cert,
        key_pem: fine_key,
        ..
    } = self_signed_until("fine.test", now + Duration::from_secs(90 * 24 * 3600));
    let mut objects = String::new();
    for (name, host) in [("web", HOST), ("old", "old.test"), ("fine", "fine.test")] {
        objects.push_str(&tls_app_yaml(
            name,
            host,
            &[pod.addr],
            &format!("{name}-tls"),
        ));
        objects.push_str("---\n");
    }
    std::fs::write(dir.join("apps.yaml"), objects).unwrap();
    for (name, cert, key) in [
        ("web", &expiring_cert, &expiring_key),
        ("old", &expired_cert, &expired_key),
        ("fine", &fine_cert, &fine_key),
    ] {
        std::fs::write(
            dir.join(format!("{name}-secret.yaml")),
            tls_secret_yaml(&format!("{name}-tls"), cert, key),
        )
        .unwrap();
    }
    let log = dir.join("sluice.log");
    let mut command = std::process::Command::new(BIN);
    command
        .args(Serve::args(&dir, &[]))
        .env("SLUICE_LOG", "warn")
        .stderr(std::fs::File::create(&log).unwrap());
    let serve = Serve::from_process(Process::spawn(command, "sluice serve"));

    // Still served: an expiring certificate is a warning, not a refusal.
    let mut open = TlsConnection::open(serve.https, HOST, tls_client(expiring_cert.as_bytes()))
        .expect("the expiring certificate is served");
    assert_eq!(open.get("/").unwrap().status, 200);

    let diagnostics = serve.config_json()["config"]["diagnostics"].to_string();
    assert!(
        diagnostics.contains(
            "Ingress default/web: expiring: Secret default/web-tls: the certificate expires at"
        ) && diagnostics.contains("within 14 days: renew it"),
        "{diagnostics}"
    );
    assert!(
        diagnostics.contains(
            "Ingress default/old: expiring: Secret default/old-tls: the certificate expired at"
        ),
        "{diagnostics}"
    );
    assert!(!diagnostics.contains("fine-tls"), "{diagnostics}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("Secret default/web-tls: the certificate expires at"),
        "{logged}"
    );

    let metrics = serve.admin("/metrics").text();
    let unix =
        |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let expiry = metrics
        .lines()
        .find(|l| {
            l.starts_with("nginx_ingress_controller_ssl_expire_time_seconds{")
                && l.contains("host=\"secure.test\"")
                && l.contains("namespace=\"default\"")
                && l.contains("secret_name=\"web-tls\"")
                && l.contains("class=\"sluice.dev/ingress-controller\"")
        })
        .unwrap_or_else(|| panic!("no expiry series for secure.test:\n{metrics}"));
    assert_eq!(expiry.rsplit(' ').next().unwrap(), unix(soon).to_string());
    assert!(
        metrics.contains("sluice_config_diagnostics{kind=\"Ingress\",severity=\"expiring\"} 2"),
        "{metrics}"
    );
    assert_eq!(
        metrics
            .lines()
            .filter(|l| l.starts_with("nginx_ingress_controller_ssl_certificate_info{"))
            .count(),
        3,
        "{metrics}"
    );
}
