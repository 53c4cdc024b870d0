//! Basic auth (`auth-type: basic`, `auth-secret`, `auth-secret-type`, `auth-realm`,
//! `satisfy`) over real sockets, with password hashes made by other implementations (glibc's
//! libxcrypt through Python's `crypt`, `openssl passwd -apr1`, Python's hashlib), so the
//! verification is checked against what htpasswd files really hold.

use base64::Engine;
use http::{header, Request, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

use crate::support::*;

/// Every user's password is `s3cret`.
const HTPASSWD: &str = "\
# made with libxcrypt, openssl and hashlib
bcrypt:$2b$05$abcdefghijklmnopqrstuuLK7U1u6pVRmL7L1BBM2aS35PSZnDXlK
bcrypty:$2y$05$abcdefghijklmnopqrstuuLK7U1u6pVRmL7L1BBM2aS35PSZnDXlK
sha256:$5$saltsalt$i1q2ZQzc.tl/BQ6CHiENAcVDvEY6nJ1OWlWXKh94b1.
sha512r:$6$rounds=1000$saltsalt$zcCvYcDM8j0aB28drG.Vwe4L4mnOkoRyg3Q.Bu7J9v6yK9aKDDPiDDlrOhF03cpnd3KFfSzTDNEBa0iVYm2H90
sha512:$6$saltsalt$As4wrv0kZlfch1du9WeH7qhskyLriQWySXrZzynnvi46nFnNxjdpl6ksRegrrKexvhIa/Iny8S8uF3fVWTMuC1
md5:$1$saltsalt$RwMqRjSWhXMKbW72DwzGd1
des:abhWCwoTZY2c6
apr1:$apr1$xyzsalt$46mF7obnb9sH9blgrPZAj0
ssha:{SSHA}rSC6FONm6jhcU0alALdYRKUMvgBOYUNsMTIzNA==
sha:{SHA}/vNB+F2HQ559kaLUZbmHHvZrXpg=
plain:{PLAIN}s3cret
";

/// An Opaque Secret of `default` (as `kubectl create secret generic` makes), `data` base64.
pub(crate) fn secret(name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    })
}

pub(crate) fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", b64(&format!("{user}:{password}")))
}

async fn send(h: &Harness, host: &str, authorization: Option<&str>) -> Reply {
    let mut request = Request::get("/echo/").header("host", host);
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    let request = request.body(Full::default()).unwrap();
    Client::connect(h.http()).await.send(request).await.unwrap()
}

fn site(name: &str, host: &str, annotations: &[(&str, &str)]) -> Value {
    annotated(
        name,
        annotations,
        json!({"rules": [rule(host, vec![path("/", "Prefix", to("web"))])]}),
    )
}

#[tokio::test]
async fn every_htpasswd_hash_nginx_accepts_lets_its_user_in() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        secret("users", json!({"auth": b64(HTPASSWD)})),
        secret(
            "map",
            json!({"ann": b64("$apr1$xyzsalt$46mF7obnb9sH9blgrPZAj0")}),
        ),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    objects.push(site(
        "file",
        "file.example",
        &[
            ("auth-type", "basic"),
            ("auth-secret", "users"),
            ("auth-realm", "Team \"A\""),
        ],
    ));
    objects.push(site(
        "map",
        "map.example",
        &[
            ("auth-type", "basic"),
            ("auth-secret", "default/map"),
            ("auth-secret-type", "auth-map"),
        ],
    ));
    h.apply(&objects);

    for user in [
        "bcrypt", "bcrypty", "sha256", "sha512", "sha512r", "md5", "des", "apr1", "ssha", "sha",
        "plain",
    ] {
        let reply = send(&h, "file.example", Some(&basic(user, "s3cret"))).await;
        assert_eq!(reply.status, StatusCode::OK, "{user}: {reply:?}");
        // The credentials stay here (ingress-nginx clears Authorization upstream).
        assert!(reply.json()["headers"].get("authorization").is_none());
        let reply = send(&h, "file.example", Some(&basic(user, "wrong"))).await;
        assert_eq!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{user} with a wrong password"
        );
    }
    // A remembered password is checked again after nothing: a second request passes too.
    let again = send(&h, "file.example", Some(&basic("bcrypt", "s3cret"))).await;
    assert_eq!(again.status, StatusCode::OK);

    // No credentials, another scheme, an unknown user: 401 with the realm and nginx's text.
    for authorization in [None, Some("Bearer x"), Some(&*basic("nobody", "s3cret"))] {
        let reply = send(&h, "file.example", authorization).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            reply.headers[header::WWW_AUTHENTICATE],
            "Basic realm=\"Team \\\"A\\\"\""
        );
        assert!(reply.text().starts_with("401 Authorization Required"));
    }
    // auth-map: a user per key; the default realm is empty, as ingress-nginx renders it.
    let reply = send(&h, "map.example", Some(&basic("ann", "s3cret"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    let reply = send(&h, "map.example", None).await;
    assert_eq!(reply.headers[header::WWW_AUTHENTICATE], "Basic realm=\"\"");
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn satisfy_any_lets_the_allow_list_or_the_password_in() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        secret("users", json!({"auth": b64(HTPASSWD)})),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    let guarded = |name: &str, host: &str, allow: &str, satisfy: &str| {
        site(
            name,
            host,
            &[
                ("auth-type", "basic"),
                ("auth-secret", "users"),
                ("allowlist-source-range", allow),
                ("satisfy", satisfy),
            ],
        )
    };
    // The tests' client is 127.0.0.1.
    objects.push(guarded("any-in", "any-in.example", "127.0.0.0/8", "any"));
    objects.push(guarded("any-out", "any-out.example", "10.0.0.0/8", "any"));
    objects.push(guarded("all-in", "all-in.example", "127.0.0.0/8", "all"));
    objects.push(guarded("all-out", "all-out.example", "10.0.0.0/8", "all"));
    h.apply(&objects);
    let good = basic("plain", "s3cret");
    // any: the allow-list suffices; outside it, the password does.
    assert_eq!(send(&h, "any-in.example", None).await.status, 200);
    assert_eq!(send(&h, "any-out.example", None).await.status, 401);
    assert_eq!(send(&h, "any-out.example", Some(&good)).await.status, 200);
    // all (the default): both.
    assert_eq!(send(&h, "all-in.example", None).await.status, 401);
    assert_eq!(send(&h, "all-in.example", Some(&good)).await.status, 200);
    assert_eq!(send(&h, "all-out.example", Some(&good)).await.status, 403);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn a_secret_that_cannot_be_used_refuses_the_routes() {
    let web = start_backend("web").await;
    let mut h = Harness::start();
    let mut objects = vec![
        service("web", &[("http", 80)]),
        secret("no-auth-key", json!({"users": b64("ann:{PLAIN}x")})),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    objects.push(site(
        "missing",
        "missing.example",
        &[("auth-type", "basic"), ("auth-secret", "nope")],
    ));
    objects.push(site(
        "keyless",
        "keyless.example",
        &[("auth-type", "basic"), ("auth-secret", "no-auth-key")],
    ));
    objects.push(site(
        "digest",
        "digest.example",
        &[("auth-type", "digest"), ("auth-secret", "no-auth-key")],
    ));
    let compiled = h.apply_allowing_diagnostics(&objects);
    assert_eq!(compiled.diagnostics.len(), 3, "{:?}", compiled.diagnostics);
    for host in ["missing.example", "keyless.example", "digest.example"] {
        let reply = send(&h, host, Some(&basic("ann", "x"))).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{host}");
    }
    shutdown(h.control.proxy).await;
}
