//! Gateway API listener isolation over real sockets: two listeners on one port, `*.example.com`
//! and `foo.example.com`, each with its own route. A request belongs to the most specific
//! listener its Host matches and only that listener's routes serve it; over HTTPS, a Host
//! that another listener owns than the one the handshake's server name chose is answered 421.

use crate::support::*;
use http::StatusCode;
use serde_json::{json, Value};

/// The Gateway `split`: `*.example.com` and `foo.example.com` on port 80 and on port 443 (one
/// certificate for both names).
fn gateway() -> Value {
    let listener = |name: &str, port: u16, hostname: &str| {
        let mut listener = json!({"name": name, "port": port, "hostname": hostname});
        if port == 443 {
            listener["protocol"] = json!("HTTPS");
            listener["tls"] = json!({"certificateRefs": [{"name": "split-tls"}]});
        } else {
            listener["protocol"] = json!("HTTP");
        }
        listener
    };
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "split", "namespace": "default"},
        "spec": {
            "gatewayClassName": "sluice",
            "listeners": [
                listener("wild", 80, "*.example.com"),
                listener("foo", 80, "foo.example.com"),
                listener("wild-tls", 443, "*.example.com"),
                listener("foo-tls", 443, "foo.example.com"),
            ],
        },
    })
}

/// An HTTPRoute on listeners `sections` of `split`, for `path`, to Service `to`; with
/// `hostnames` when given.
fn route(name: &str, sections: &[&str], hostnames: &[&str], path: &str, to: &str) -> Value {
    let parents: Vec<Value> = (sections.iter())
        .map(|s| json!({"name": "split", "sectionName": s}))
        .collect();
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": parents,
            "hostnames": hostnames,
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                "backendRefs": [{"name": to, "port": 80}],
            }],
        },
    })
}

/// The backend that answered `reply`, or its status when none did (the backends answer
/// every `/echo` path: a 404 is Sluice's).
fn answer(reply: &Reply) -> String {
    if reply.status == StatusCode::OK {
        reply.backend()
    } else {
        reply.status.as_u16().to_string()
    }
}

#[tokio::test]
async fn a_request_is_served_by_the_routes_of_the_most_specific_listener_only() {
    let (wild, foo) = (start_backend("wild").await, start_backend("foo").await);
    let ca = TestCa::new();
    let leaf = ca.leaf(&["*.example.com", "foo.example.com"]);
    let mut objects = vec![
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "sluice"},
            "spec": {"controllerName": "sluice.dev/gateway-controller"},
        }),
        gateway(),
        tls_secret("split-tls", &leaf),
        service("wild", &[("http", 80)]),
        service("foo", &[("http", 80)]),
        // The wildcard listener's route takes every path, and names foo.example.com too: still
        // not foo.example.com's, which the more specific listener owns.
        route(
            "wild",
            &["wild", "wild-tls"],
            &["*.example.com", "foo.example.com"],
            "/",
            "wild",
        ),
        route("foo", &["foo", "foo-tls"], &[], "/echo/foo", "foo"),
    ];
    objects.extend(slices("wild", &[addr_of(&wild)]));
    objects.extend(slices("foo", &[addr_of(&foo)]));
    let mut h = Harness::start();
    h.apply(&objects);

    // Each request on a connection of its own: Sluice closes one after a 404 or a 421.
    let http = |host: &'static str, path: &'static str| {
        let addr = h.http();
        async move { answer(&get(addr, host, path).await) }
    };
    assert_eq!(http("bar.example.com", "/echo/anything").await, "wild");
    assert_eq!(http("foo.example.com", "/echo/foo/page").await, "foo");
    // The wildcard listener's route would take this path; foo.example.com is not its.
    assert_eq!(http("foo.example.com:80", "/echo/anything").await, "404");
    assert_eq!(http("FOO.example.com", "/echo/anything").await, "404");

    let https = |sni: &'static str, host: &'static str, path: &'static str| {
        let (ca, addr) = (&ca, h.https());
        async move {
            let (tls, _) =
                (ca.connect(addr, sni, &[b"http/1.1"]).await).expect("the certificate verifies");
            answer(&Client::over(tls).await.get(host, path).await)
        }
    };
    // The handshake for bar.example.com chose the wildcard listener: its hosts are served,
    // foo.example.com belongs to the other listener (misdirected, whatever the path).
    let wild = "bar.example.com";
    assert_eq!(
        https(wild, "bar.example.com", "/echo/anything").await,
        "wild"
    );
    assert_eq!(
        https(wild, "other.example.com", "/echo/anything").await,
        "wild"
    );
    assert_eq!(https(wild, "foo.example.com", "/echo/foo").await, "421");
    assert_eq!(
        https(wild, "foo.example.com", "/echo/anything").await,
        "421"
    );
    // The handshake for foo.example.com: its own listener's route, and 421 for the others.
    let foo = "foo.example.com";
    assert_eq!(https(foo, "foo.example.com", "/echo/foo").await, "foo");
    assert_eq!(https(foo, "foo.example.com", "/echo/anything").await, "404");
    assert_eq!(https(foo, "bar.example.com", "/echo/anything").await, "421");
}
