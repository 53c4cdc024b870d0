//! Canary Ingresses over real sockets: the rule model's header and cookie conditions and its
//! weighted split, with ingress-nginx's order (header, then cookie, then weight), labels
//! (`canary` on the request metrics, `$proxy_alternative_upstream_name` in the log) and trap
//! (the canary belongs to the Service port, so another host routing there gets it too).

use crate::support::*;
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::{json, Value};

const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// The `web` and `web-v2` Services with one backend each, `web` on shop.example and
/// other.example, and a canary Ingress for shop.example `/` with these annotations.
fn objects(
    web: &backend::Backend,
    v2: &backend::Backend,
    canary_annotations: &[(&str, &str)],
) -> Vec<Value> {
    let mut objects = web_and_v2(web, v2);
    objects.push(annotated_site("web", "shop.example", "web", json!({})));
    objects.push(annotated_site("other", "other.example", "web", json!({})));
    let annotations: serde_json::Map<String, Value> = [("canary", "true")]
        .iter()
        .chain(canary_annotations)
        .map(|(k, v)| (format!("{NGINX}{k}"), json!(v)))
        .collect();
    objects.push(annotated_site(
        "web-canary",
        "shop.example",
        "web-v2",
        Value::Object(annotations),
    ));
    objects
}

/// Which backend answers `/echo` on `host` with these request headers.
async fn backend_for(client: &mut Client, host: &str, headers: &[(&str, &str)]) -> String {
    let mut request = Request::get("/echo").header("host", host);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let reply = client
        .send(request.body(Full::<Bytes>::default()).unwrap())
        .await
        .expect("answered");
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.backend()
}

#[tokio::test]
async fn header_then_cookie_then_weight_decide_with_ingress_nginx_s_precedence() {
    let (web, v2) = (start_backend("web").await, start_backend("web-v2").await);
    let mut h = Harness::start();
    let compiled = h.apply_allowing_diagnostics(&objects(
        &web,
        &v2,
        &[
            ("canary-by-header", "X-Canary"),
            ("canary-by-cookie", "canary"),
        ],
    ));
    let reasons: Vec<String> = compiled.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains("canary also applies to host other.example"),
        "{reasons:?}"
    );
    let mut client = Client::connect(h.http()).await;
    let cases: [(&[(&str, &str)], &str); 7] = [
        (&[], "web"),
        (&[("x-canary", "always")], "web-v2"),
        (&[("x-canary", "never"), ("cookie", "canary=always")], "web"),
        (&[("cookie", "a=1; canary=always")], "web-v2"),
        (
            &[("x-canary", "maybe"), ("cookie", "canary=always")],
            "web-v2",
        ),
        (&[("x-canary", "maybe"), ("cookie", "canary=never")], "web"),
        (&[("x-canary", "Always")], "web"),
    ];
    for (headers, expected) in cases {
        for _ in 0..3 {
            assert_eq!(
                backend_for(&mut client, "shop.example", headers).await,
                expected,
                "{headers:?}"
            );
        }
    }
    // ingress-nginx's trap: the canary joined the Service port, and other.example routes there.
    let other = backend_for(&mut client, "other.example", &[("x-canary", "always")]).await;
    assert_eq!(other, "web-v2");
    // Labelled as ingress-nginx labels it: the main rule's names, the canary's upstream.
    assert_metric(
        &h,
        "nginx_ingress_controller_requests{canary=\"default-web-v2-http\",controller_class=\"\",controller_namespace=\"\",controller_pod=\"\",host=\"other.example\",ingress=\"other\",method=\"GET\",namespace=\"default\",path=\"/\",service=\"web\",status=\"200\"} 1",
    )
    .await;
    eventually_async(STEP, "the canary's access log line", || async {
        h.access_lines()
            .iter()
            .any(|l| l.contains("[default-web-http] [default-web-v2-http]"))
    })
    .await;
    let lines = h.access_lines();
    assert!(
        lines.iter().any(|l| l.contains("[default-web-http] [] ")),
        "a request to the main backend names no alternative: {lines:#?}"
    );
}

#[tokio::test]
async fn a_weight_sends_its_share_and_a_header_value_or_pattern_replaces_always() {
    let (web, v2) = (start_backend("web").await, start_backend("web-v2").await);
    let mut h = Harness::start();
    h.apply_allowing_diagnostics(&objects(
        &web,
        &v2,
        &[
            ("canary-weight", "30"),
            ("canary-by-header", "x-user"),
            ("canary-by-header-value", "alice"),
        ],
    ));
    let mut client = Client::connect(h.http()).await;
    assert_eq!(
        backend_for(&mut client, "shop.example", &[("x-user", "alice")]).await,
        "web-v2"
    );
    // With a value, "always" is an ordinary value: it goes on to the weight.
    let mut to_canary = 0;
    let rounds = 400;
    for _ in 0..rounds {
        if backend_for(&mut client, "shop.example", &[("x-user", "always")]).await == "web-v2" {
            to_canary += 1;
        }
    }
    // 30 % of 400 is 120, the standard deviation 9.2: 70..170 is more than five of them.
    assert!(
        (70..=170).contains(&to_canary),
        "{to_canary} of {rounds} went to the canary at weight 30"
    );

    // A pattern (unanchored, as ingress-nginx's), and weight 100 of a total of 200.
    h.update(&objects(
        &web,
        &v2,
        &[
            ("canary-weight", "200"),
            ("canary-weight-total", "200"),
            ("canary-by-header", "x-tier"),
            ("canary-by-header-pattern", "^(beta|gamma)$"),
        ],
    ));
    let mut client = Client::connect(h.http()).await;
    for _ in 0..5 {
        assert_eq!(
            backend_for(&mut client, "shop.example", &[("x-tier", "gamma")]).await,
            "web-v2"
        );
        // Not the pattern: the weight (all of 200) decides.
        assert_eq!(
            backend_for(&mut client, "shop.example", &[("x-tier", "alpha")]).await,
            "web-v2"
        );
    }

    // Weight 0 and no header: the canary takes nothing.
    h.update(&objects(&web, &v2, &[("canary-weight", "0")]));
    let mut client = Client::connect(h.http()).await;
    for _ in 0..50 {
        assert_eq!(backend_for(&mut client, "shop.example", &[]).await, "web");
    }
}
