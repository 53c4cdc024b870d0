//! TLS through files end to end: a Secret file rotated under a running `sluice serve`.

mod support;

use std::time::Duration;

use support::*;

const WAIT: Duration = Duration::from_secs(10);
const HOST: &str = "secure.test";

#[test]
fn a_rotated_secret_file_serves_new_handshakes_and_open_connections_keep_working() {
    let dir = temp_dir("rotate");
    let pod = Pod::start("pod");
    let (old_cert, old_key) = self_signed(HOST);
    let (new_cert, new_key) = self_signed(HOST);
    let app = app_yaml("web", HOST, &[pod.addr]).replace(
        "  rules:\n",
        &format!("  tls: [{{hosts: [{HOST}], secretName: web-tls}}]\n  rules:\n"),
    );
    std::fs::write(
        dir.join("class.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: sluice}\n\
         spec: {controller: sluice.dev/ingress-controller}\n",
    )
    .unwrap();
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
    let (cert, _) = self_signed(HOST);
    let (_, other_key) = self_signed(HOST);
    let app = app_yaml("web", HOST, &[pod.addr]).replace(
        "  rules:\n",
        &format!("  tls: [{{hosts: [{HOST}], secretName: web-tls}}]\n  rules:\n"),
    );
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
