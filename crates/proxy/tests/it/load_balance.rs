//! `load-balance` per Ingress over real sockets: `ewma` (ingress-nginx's response-time
//! balancer) sends a client's requests to the fast endpoint once it has seen both, where
//! round robin splits them evenly.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

/// Requests each endpoint got out of 20 on one keep-alive connection (so one worker, whose
/// averages they are), with `annotations` on the Ingress.
async fn split(annotations: &[(&str, &str)]) -> (usize, usize) {
    let (fast, fast_counts) = start_fixed_backend(ANSWER).await;
    let (slow, slow_counts) = start_delayed_backend(ANSWER, Duration::from_millis(200)).await;
    let mut h = Harness::start();
    let mut objects = vec![service("web", &[("http", 80)])];
    objects.extend(slices("web", &[fast, slow]));
    objects.push(annotated(
        "balanced",
        annotations,
        json!({"rules": [rule("lb.example", vec![path("/", "Prefix", to("web"))])]}),
    ));
    h.apply(&objects);
    let mut client = Client::connect(h.http()).await;
    for _ in 0..20 {
        assert_eq!(client.get("lb.example", "/").await.status, 200);
    }
    shutdown(h.control.proxy).await;
    (fast_counts.requests(), slow_counts.requests())
}

#[tokio::test]
async fn ewma_sends_requests_to_the_faster_endpoint() {
    let (fast, slow) = split(&[("load-balance", "ewma")]).await;
    assert_eq!(fast + slow, 20);
    // Both start without an average (tried first); once the fast one has answered, it wins
    // every draw: the slow one is asked about once (a busy machine may add one).
    assert!(slow <= 3, "fast {fast}, slow {slow}");
    let (fast, slow) = split(&[]).await;
    assert_eq!(
        (fast, slow),
        (10, 10),
        "round robin, the ConfigMap's default"
    );
}
