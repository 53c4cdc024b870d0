//! Digest auth (`auth-type: digest`, `auth-secret`, `auth-realm`) over real sockets, answered
//! by curl's own RFC 2617 implementation (`--digest`): the challenge, the response, the
//! Authentication-Info Sluice sends back, a rewritten target, and the lock-out of a guessing
//! client. The HA1 in the Secret was made by Python's hashlib, as `htdigest` makes it.

use http::{header, Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

use crate::basic_auth::{b64, secret};
use crate::support::*;

/// `htdigest` lines: MD5("ann:staff:s3cret") from hashlib; bob is of another realm.
const HTDIGEST: &str = "\
# made with hashlib.md5(b'ann:staff:s3cret')
ann:staff:e2dfd1690801fd2fb31543f17cd8cf72
bob:ops:e2dfd1690801fd2fb31543f17cd8cf72
";

struct Curl {
    status: u16,
    /// Every response's head, in order (curl --digest makes two requests).
    heads: String,
    body: String,
}

/// curl with `--digest -u USER:PASSWORD` against `path` of `digest.example` (or the host
/// `path` names, as `rewrite.example/app`).
async fn curl(h: &Harness, user_password: &str, path: &str) -> Curl {
    let port = h.http().port();
    let (host, path) = match path.split_once('/') {
        Some((host, rest)) if !host.is_empty() => (host.to_owned(), format!("/{rest}")),
        _ => ("digest.example".to_owned(), path.to_owned()),
    };
    let user_password = user_password.to_owned();
    tokio::task::spawn_blocking(move || {
        let heads = tempfile::NamedTempFile::new().unwrap();
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", "--digest", "-u", &user_password])
            .args(["-w", "\n%{http_code}", "-D"])
            .arg(heads.path())
            .arg("--resolve")
            .arg(format!("{host}:{port}:127.0.0.1"))
            .arg(format!("http://{host}:{port}{path}"))
            .output()
            .expect("curl runs (the test suite installs it)");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = stdout.rsplit_once('\n').unwrap();
        Curl {
            status: status.trim().parse().unwrap(),
            heads: std::fs::read_to_string(heads.path()).unwrap(),
            body: body.to_owned(),
        }
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn curl_logs_in_with_digest_and_a_guessing_client_is_locked_out() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        secret("users", json!({"auth": b64(HTDIGEST)})),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    let digest = [
        ("auth-type", "digest"),
        ("auth-secret", "users"),
        ("auth-realm", "staff"),
    ];
    objects.push(annotated(
        "plain",
        &digest,
        json!({"rules": [rule("digest.example", vec![path("/echo", "Prefix", to("web"))])]}),
    ));
    // A rewritten target: the client's answer names the target it sent, not the rewrite.
    let mut rewritten = digest.to_vec();
    rewritten.extend([("use-regex", "true"), ("rewrite-target", "/echo/$2")]);
    objects.push(annotated(
        "rewritten",
        &rewritten,
        json!({"rules": [rule(
            "rewrite.example",
            vec![path("/app(/|$)(.*)", "ImplementationSpecific", to("web"))],
        )]}),
    ));
    h.apply(&objects);

    // Without credentials: the challenge, as the module words it.
    let request = Request::get("/echo/x")
        .header("host", "digest.example")
        .body(Full::default())
        .unwrap();
    let reply = Client::connect(h.http()).await.send(request).await.unwrap();
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let challenge = reply.headers[header::WWW_AUTHENTICATE].to_str().unwrap();
    assert!(
        challenge.starts_with("Digest algorithm=\"MD5\", qop=\"auth\", realm=\"staff\", nonce=\""),
        "{challenge}"
    );
    assert!(reply.text().starts_with("401 Authorization Required"));

    let ok = curl(&h, "ann:s3cret", "/echo/a?b=c").await;
    assert_eq!(ok.status, 200, "{}\n{}", ok.heads, ok.body);
    let echoed: Value = serde_json::from_str(&ok.body).unwrap();
    assert_eq!(echoed["path"], "/echo/a");
    assert_eq!(echoed["query"], "b=c");
    // The credentials stay here (ingress-nginx clears Authorization upstream).
    assert!(echoed["headers"].get("authorization").is_none());
    let info = ok
        .heads
        .lines()
        .find(|line| {
            line.to_ascii_lowercase()
                .starts_with("authentication-info:")
        })
        .unwrap_or_else(|| panic!("no Authentication-Info in {}", ok.heads));
    assert!(info.contains("qop=\"auth\", rspauth=\""), "{info}");

    let rewritten = curl(&h, "ann:s3cret", "rewrite.example/app/inner?q=1").await;
    assert_eq!(rewritten.status, 200, "{}", rewritten.heads);
    let echoed: Value = serde_json::from_str(&rewritten.body).unwrap();
    assert_eq!(echoed["path"], "/echo/inner");

    // A wrong password, and a user of another realm: a new challenge each time.
    for wrong in ["ann:wrong", "bob:s3cret"] {
        let refused = curl(&h, wrong, "/echo/a").await;
        assert_eq!(refused.status, 401, "{wrong}");
        assert!(refused.heads.contains("Digest algorithm=\"MD5\""));
    }
    // Five failures in all from this address: its next answers are ignored (401 without a
    // challenge), even with the right password, for the evasion time.
    for _ in 0..3 {
        assert_eq!(curl(&h, "ann:wrong", "/echo/a").await.status, 401);
    }
    let locked = curl(&h, "ann:s3cret", "/echo/a").await;
    assert_eq!(locked.status, 401);
    assert!(
        !locked
            .heads
            .to_ascii_lowercase()
            .contains("www-authenticate"),
        "{}",
        locked.heads
    );
    shutdown(h.control.proxy).await;
}
