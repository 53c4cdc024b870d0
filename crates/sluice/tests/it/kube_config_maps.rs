//! ConfigMaps that Ingresses name (`custom-headers`, `auth-proxy-set-headers`), read from a real
//! kube-apiserver: Sluice watches every ConfigMap of its scope, as ingress-nginx's store does, so
//! they work as in standalone mode and an edit changes the answer without a restart.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::support::kube::*;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(20);

/// The key the auth server wants in `X-Auth-Key`.
const KEY: &str = "letmein";

/// An auth server on `ip:9000`: 200 when the sub-request carries `X-Auth-Key: letmein`, 401
/// otherwise. Counts the sub-requests it answered.
fn start_auth_server(ip: IpAddr) -> Arc<AtomicUsize> {
    let listener = TcpListener::bind(SocketAddr::new(ip, 9000)).expect("bind the auth server");
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    // One request head per loop (sub-requests carry no body).
                    let mut allowed = false;
                    let mut line = String::new();
                    let mut first = true;
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let trimmed = line.trim_end();
                        if trimmed.is_empty() && !first {
                            break;
                        }
                        first = false;
                        if let Some((name, value)) = trimmed.split_once(':') {
                            if name.eq_ignore_ascii_case("x-auth-key") && value.trim() == KEY {
                                allowed = true;
                            }
                        }
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let status = if allowed {
                        "200 OK"
                    } else {
                        "401 Unauthorized"
                    };
                    let answer =
                        format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").into_bytes();
                    if stream.write_all(&answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    asked
}

/// Service `name` (port `http` 80) with one EndpointSlice to `ip:port`.
fn backed_service(cluster: &Cluster, ns: &str, name: &str, ip: IpAddr, port: u16) {
    cluster.create(&service(ns, name));
    cluster.create(&endpoint_slice(
        ns,
        &format!("{name}-1"),
        name,
        port,
        &[Endpoint::ready(ip)],
    ));
}

/// The echo "pod" `pod-11` behind Service `web`.
fn web_pod(cluster: &Cluster, ns: &str) -> Pod {
    let ip = cluster.add_address(11);
    let pod = Pod::start_at("pod-11", &socket(ip, 8080));
    backed_service(cluster, ns, "web", ip, 8080);
    pod
}

fn annotated(mut ingress: serde_json::Value, annotations: &[(&str, &str)]) -> serde_json::Value {
    let annotations: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| (format!("nginx.ingress.kubernetes.io/{k}"), json!(v)))
        .collect();
    ingress["metadata"]["annotations"] = json!(annotations);
    ingress
}

#[test]
fn config_maps_named_by_ingresses_are_read_from_the_api_and_their_edits_apply_live() {
    let ns = "cmheaders";
    let cluster = Cluster::start("cmheaders");
    cluster.create(&namespace(ns));
    cluster.create(&ingress_class("sluice", CONTROLLER));
    let _web = web_pod(&cluster, ns);
    let auth_ip = cluster.add_address(30);
    let asked = start_auth_server(auth_ip);
    backed_service(&cluster, ns, "auth", auth_ip, 9000);
    cluster.create(&config_map(
        ns,
        "sluice",
        &[("global-allowed-response-headers", "X-Team")],
    ));
    cluster.create(&config_map(ns, "team", &[("X-Team", "checkout")]));
    cluster.create(&config_map(ns, "auth-headers", &[("X-Auth-Key", KEY)]));
    cluster.create(&annotated(
        ingress(ns, "headers", Some("sluice"), "headers.test", "web"),
        &[("custom-headers", &format!("{ns}/team"))],
    ));
    let auth_url = format!("http://auth.{ns}.svc.cluster.local/check");
    cluster.create(&annotated(
        ingress(ns, "guarded", Some("sluice"), "guarded.test", "web"),
        &[
            ("auth-url", &auth_url),
            ("auth-proxy-set-headers", "auth-headers"),
        ],
    ));
    cluster.create(&ingress(ns, "plain", Some("sluice"), "plain.test", "web"));
    let sluice = cluster.sluice(ns, &[]);

    // As in standalone mode: the ConfigMaps were listed with everything else.
    let reply = sluice.get("headers.test", "/");
    assert_eq!(reply.status, 200, "{}", sluice.log_tail(20));
    assert_eq!(reply.header("x-team"), Some("checkout"));
    let reply = sluice.get("guarded.test", "/");
    assert_eq!(
        reply.status, 200,
        "the auth server got X-Auth-Key from the ConfigMap"
    );
    assert!(
        asked.load(Ordering::SeqCst) >= 1,
        "the auth server was asked"
    );
    assert_eq!(sluice.get("plain.test", "/").header("x-team"), None);

    // Edited: the answers follow without a restart.
    cluster.replace(&config_map(ns, "team", &[("X-Team", "payments")]));
    eventually(WAIT, "the edited custom-headers ConfigMap served", || {
        (sluice.get("headers.test", "/").header("x-team") == Some("payments")).then_some(())
    });
    cluster.replace(&config_map(ns, "auth-headers", &[("X-Auth-Key", "stale")]));
    sluice.wait_status("guarded.test", 401, WAIT);

    // Deleted: the routes that name it are denied (503, as ingress-nginx's LocationDenied), the
    // others keep serving.
    cluster.delete("ConfigMap", ns, "team");
    sluice.wait_status("headers.test", 503, WAIT);
    assert_eq!(sluice.get("plain.test", "/").status, 200);
    cluster.create(&config_map(ns, "team", &[("X-Team", "back")]));
    sluice.wait_status("headers.test", 200, WAIT);
    assert_eq!(
        sluice.get("headers.test", "/").header("x-team"),
        Some("back")
    );
}

#[test]
fn config_maps_the_settings_name_outside_the_watched_namespace_are_watched_by_name() {
    let ns = "team";
    let cluster = Cluster::start("cmsettings");
    for namespace_name in [ns, "sluice", "shared"] {
        cluster.create(&namespace(namespace_name));
    }
    cluster.create(&ingress_class("sluice", CONTROLLER));
    let _web = web_pod(&cluster, ns);
    cluster.create(&ingress(ns, "web", Some("sluice"), "web.test", "web"));
    cluster.create(&config_map(
        "shared",
        "upstream",
        &[("X-Team", "edge"), ("X-Original", "$host$request_uri")],
    ));
    cluster.create(&config_map(
        "shared",
        "answers",
        &[("X-Frame-Options", "DENY")],
    ));
    cluster.create(&config_map(
        "sluice",
        "sluice",
        &[("proxy-set-headers", "shared/upstream")],
    ));
    // The settings ConfigMap and the one it names both lie outside the watched namespace.
    let sluice = cluster.sluice("sluice", &["--watch-namespace", ns]);
    let echo = |sluice: &KubeSluice| {
        let reply = sluice.get("web.test", "/echo?a=1");
        let json: serde_json::Value = serde_json::from_slice(&reply.body).unwrap_or_default();
        (reply, json)
    };
    let (reply, json) = echo(&sluice);
    assert_eq!(reply.status, 200, "{}", sluice.log_tail(20));
    assert_eq!(json["headers"]["x-team"], "edge", "{json}");
    assert_eq!(json["headers"]["x-original"], "web.test/echo?a=1");

    // Edited: followed without a restart.
    cluster.replace(&config_map("shared", "upstream", &[("X-Team", "core")]));
    eventually(
        WAIT,
        "the edited proxy-set-headers ConfigMap applied",
        || (echo(&sluice).1["headers"]["x-team"] == "core").then_some(()),
    );

    // The settings name another ConfigMap since start: it is watched from then on.
    cluster.replace(&config_map(
        "sluice",
        "sluice",
        &[
            ("proxy-set-headers", "shared/upstream"),
            ("add-headers", "shared/answers"),
        ],
    ));
    eventually(
        WAIT,
        "add-headers from a ConfigMap named since start",
        || (echo(&sluice).0.header("x-frame-options") == Some("DENY")).then_some(()),
    );
    cluster.replace(&config_map(
        "shared",
        "answers",
        &[("X-Frame-Options", "SAMEORIGIN")],
    ));
    eventually(WAIT, "its edit applied", || {
        (echo(&sluice).0.header("x-frame-options") == Some("SAMEORIGIN")).then_some(())
    });
}
