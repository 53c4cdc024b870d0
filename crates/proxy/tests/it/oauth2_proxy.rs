//! The real oauth2-proxy behind `auth-url` / `auth-signin`, as most ingress-nginx clusters run
//! it, with an OpenID Connect provider (mockoidc) that signs everyone in as one user:
//!
//! ```text
//!  browser ─▶ Sluice app.example/echo/x ─auth sub-request─▶ oauth2-proxy /oauth2/auth ─▶ 401
//!          ◀─ 302 app.example/oauth2/start?rd=%2Fecho%2Fx (auth-signin)
//!          ─▶ Sluice /oauth2/start (the oauth2 Ingress) ─▶ oauth2-proxy ─▶ 302 to the provider
//!          ─▶ mockoidc /authorize ─▶ 302 app.example/oauth2/callback?code=…
//!          ─▶ Sluice /oauth2/callback ─▶ oauth2-proxy (code ─▶ token at mockoidc) ─▶ cookie, 302 /echo/x
//!          ─▶ Sluice /echo/x + cookie ─auth─▶ 202 + X-Auth-Request-User/-Email ─▶ the backend
//! ```
//! The binaries come from `SLUICE_OAUTH2_TOOLS` (scripts/test.sh sets it). Without it the test
//! is skipped with a message, except under CI (`CI=true`), where it fails.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use bytes::Bytes;
use http::{header, Request, StatusCode, Uri};
use http_body_util::Full;
use serde_json::json;

use crate::support::*;

fn tools() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var_os("SLUICE_OAUTH2_TOOLS").map(PathBuf::from) {
        Some(path) if path.join("oauth2-proxy").is_file() => Some(path),
        Some(path) => panic!(
            "SLUICE_OAUTH2_TOOLS={} has no oauth2-proxy (build it with scripts/oauth2-proxy.sh)",
            path.display()
        ),
        None if ci => panic!("CI: SLUICE_OAUTH2_TOOLS is not set; scripts/test.sh builds it"),
        None => {
            eprintln!(
                "skipped: set SLUICE_OAUTH2_TOOLS=$(scripts/oauth2-proxy.sh) to run the \
                 oauth2-proxy test (needs Go)"
            );
            None
        }
    }
}

/// A child process of this test, killed (by its handle) when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts on `addr` (bounded).
async fn listening(addr: SocketAddr) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("nothing listens on {addr}");
}

/// A browser's cookie jar, enough for one host.
#[derive(Default)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn take(&mut self, reply: &Reply) {
        for cookie in reply.headers.get_all(header::SET_COOKIE) {
            let text = cookie.to_str().unwrap();
            let pair = text.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() {
                self.0.remove(name);
            } else {
                self.0.insert(name.to_owned(), value.to_owned());
            }
        }
    }

    fn header(&self) -> String {
        let pairs: Vec<String> = self.0.iter().map(|(n, v)| format!("{n}={v}")).collect();
        pairs.join("; ")
    }
}

/// A GET as a browser sends it: to `addr`, with `host` and the jar's cookies.
async fn browse(addr: SocketAddr, host: &str, target: &str, jar: &mut Jar) -> Reply {
    let mut request = Request::get(target).header("host", host);
    if !jar.0.is_empty() {
        request = request.header(header::COOKIE, jar.header());
    }
    let reply = Client::connect(addr)
        .await
        .send(request.body(Full::<Bytes>::default()).unwrap())
        .await
        .expect("an answer");
    jar.take(&reply);
    reply
}

fn location(reply: &Reply) -> Uri {
    assert_eq!(reply.status, StatusCode::FOUND, "{reply:?}");
    reply.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn target(uri: &Uri) -> &str {
    uri.path_and_query().unwrap().as_str()
}

#[tokio::test]
async fn a_browser_signs_in_through_oauth2_proxy_and_reaches_the_backend_as_that_user() {
    let Some(tools) = tools() else {
        return;
    };
    let mut provider = Command::new(tools.join("mockoidc-serve"))
        .args([
            "-listen",
            "127.0.0.1:0",
            "-client-id",
            "sluice",
            "-client-secret",
            "s3cret",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("mockoidc-serve starts");
    let mut issuer = String::new();
    BufReader::new(provider.stdout.take().unwrap())
        .read_line(&mut issuer)
        .unwrap();
    let _provider = Running(provider);
    let issuer = issuer.trim().to_owned();
    let issuer_addr: SocketAddr = issuer
        .parse::<Uri>()
        .unwrap()
        .authority()
        .unwrap()
        .as_str()
        .parse()
        .unwrap();

    let web = start_backend("web").await;
    let mut h = Harness::start();
    let sluice = h.http();
    let app = format!("app.example:{}", sluice.port());
    let oauth2_port = free_port();
    let oauth2_addr = SocketAddr::from((LOCALHOST, oauth2_port));
    let oauth2 = Command::new(tools.join("oauth2-proxy"))
        .args([
            "--provider=oidc",
            &format!("--oidc-issuer-url={issuer}"),
            "--client-id=sluice",
            "--client-secret=s3cret",
            "--cookie-secret=0123456789abcdef0123456789abcdef",
            "--cookie-secure=false",
            "--email-domain=*",
            &format!("--http-address=127.0.0.1:{oauth2_port}"),
            "--upstream=static://202",
            "--reverse-proxy",
            "--set-xauthrequest",
            "--skip-provider-button",
            &format!("--redirect-url=http://{app}/oauth2/callback"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("oauth2-proxy starts");
    let _oauth2 = Running(oauth2);
    listening(oauth2_addr).await;

    // As oauth2-proxy's documentation sets up ingress-nginx: the app's Ingress asks
    // oauth2-proxy, a second Ingress serves oauth2-proxy's own paths on the same host.
    let mut objects = vec![
        service("web", &[("http", 80)]),
        service("oauth2-proxy", &[("http", 4180)]),
    ];
    objects.extend(slices("web", &[addr_of(&web)]));
    objects.extend(slices("oauth2-proxy", &[oauth2_addr]));
    // oauth2-proxy's documented form: the auth URL names the request's own host, which
    // Sluice routes by its own rules (to the oauth2 Ingress below), without DNS.
    objects.push(annotated(
        "app",
        &[
            ("auth-url", "https://$host/oauth2/auth"),
            (
                "auth-signin",
                "http://$http_host/oauth2/start?rd=$escaped_request_uri",
            ),
            (
                "auth-response-headers",
                "X-Auth-Request-User, X-Auth-Request-Email",
            ),
        ],
        json!({"rules": [rule("app.example", vec![path("/", "Prefix", to("web"))])]}),
    ));
    objects.push(annotated(
        "oauth2",
        &[],
        json!({"rules": [rule("app.example", vec![path("/oauth2", "Prefix", to("oauth2-proxy"))])]}),
    ));
    h.apply(&objects);

    let mut jar = Jar::default();
    // Not signed in: to the sign-in page, the request to come back to in rd.
    let reply = browse(sluice, &app, "/echo/x?y=1", &mut jar).await;
    let start = location(&reply);
    assert_eq!(start.host(), Some("app.example"));
    assert_eq!(target(&start), "/oauth2/start?rd=%2Fecho%2Fx%3Fy%3D1");
    // oauth2-proxy's start, through Sluice: to the provider, with a CSRF cookie.
    let reply = browse(sluice, &app, target(&start), &mut jar).await;
    let authorize = location(&reply);
    assert!(!jar.0.is_empty(), "oauth2-proxy sets its CSRF cookie");
    // The provider signs the user in and sends the browser back with a code.
    let reply = browse(
        issuer_addr,
        authorize.authority().unwrap().as_ref(),
        target(&authorize),
        &mut Jar::default(),
    )
    .await;
    let callback = location(&reply);
    assert_eq!(callback.path(), "/oauth2/callback");
    // The callback, through Sluice: oauth2-proxy trades the code, sets its session cookie and
    // sends the browser back where it started.
    let reply = browse(sluice, &app, target(&callback), &mut jar).await;
    let back = location(&reply);
    assert_eq!(target(&back), "/echo/x?y=1");
    assert!(jar.0.contains_key("_oauth2_proxy"), "{:?}", jar.0.keys());
    // Signed in: the backend gets the request with the user oauth2-proxy vouched for.
    let reply = browse(sluice, &app, "/echo/x?y=1", &mut jar).await;
    assert_eq!(reply.status, StatusCode::OK, "{reply:?}");
    let echo = reply.json();
    assert_eq!(echo["path"], "/echo/x");
    assert_eq!(
        echo["headers"]["x-auth-request-email"],
        "jane.doe@example.com"
    );
    assert!(
        echo["headers"]["x-auth-request-user"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{echo}"
    );
    // Without the cookie: back to sign in.
    let reply = browse(sluice, &app, "/echo/x", &mut Jar::default()).await;
    assert_eq!(reply.status, StatusCode::FOUND);
    shutdown(h.control.proxy).await;
}
