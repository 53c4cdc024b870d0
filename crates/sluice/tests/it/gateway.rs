//! Gateway API objects in `sluice serve --config DIR`: the same files, no new flag, live edits.

use std::time::Duration;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

pub(crate) const GATEWAY: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge}
spec:
  gatewayClassName: sluice
  listeners: [{name: http, port: 80, protocol: HTTP}]
";

/// Service `app` and its endpoints, without the Ingress `app_yaml` writes after them.
pub(crate) fn service_yaml(endpoints: &[std::net::SocketAddr]) -> String {
    let app = app_yaml("app", "unused.test", endpoints);
    let service = app.split("---\napiVersion: networking.k8s.io/v1").next();
    service.unwrap().to_owned()
}

/// An HTTPRoute for `host`: `/old` redirected to `/new`, the rest to Service `app`.
fn route_yaml(host: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: app}}\n\
         spec:\n  parentRefs: [{{name: edge}}]\n  hostnames: [{host}]\n  rules:\n\
         \x20 - backendRefs: [{{name: app, port: 80}}]\n\
         \x20 - matches: [{{path: {{type: PathPrefix, value: /old}}}}]\n\
         \x20   filters: [{{type: RequestRedirect, requestRedirect: {{path: {{type: ReplacePrefixMatch, replacePrefixMatch: /new}}}}}}]\n"
    )
}

#[test]
fn gateway_objects_from_files_are_served_and_follow_edits() {
    let dir = temp_dir("gateway");
    let pod = Pod::start("one");
    std::fs::write(dir.join("gateway.yaml"), GATEWAY).unwrap();
    std::fs::write(dir.join("app.yaml"), service_yaml(&[pod.addr])).unwrap();
    std::fs::write(dir.join("route.yaml"), route_yaml("web.test")).unwrap();
    let serve = Serve::start(&dir, &[]);

    let reply = serve.get("web.test", "/echo");
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.text().contains("\"one\""), "{}", reply.text());
    // The HTTP listener is port 80 as the Gateway declares it: the Location names no port,
    // whatever port the socket has.
    let reply = serve.get("web.test", "/old/page?x=1");
    assert_eq!(reply.status, 302, "{}", reply.text());
    assert_eq!(
        reply.header("location"),
        Some("http://web.test/new/page?x=1")
    );
    assert_eq!(serve.get("other.test", "/echo").status, 404);
    let config = serve.config_json().to_string();
    assert!(config.contains("default/app"), "{config}");

    // An edited route moves to another host.
    write_atomically(&dir.join("route.yaml"), &route_yaml("web2.test"));
    eventually(WAIT, "web2.test routed after the edit", || {
        (serve.get("web2.test", "/echo").status == 200).then_some(())
    });
    assert_eq!(serve.get("web.test", "/echo").status, 404);
}
