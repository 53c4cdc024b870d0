//! ListenerSets in `sluice serve --config DIR`: a ListenerSet the Gateway allows adds a listener
//! on a port of its own, where the routes attached to the ListenerSet answer; one the Gateway
//! does not allow is not served, and taking the permission back closes the port.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use testkit::free_tcp_port;

use crate::gateway::service_yaml;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

/// Gateway `edge` (port 80) allowing ListenerSets from `allowed` (None, Same, All).
fn gateway_yaml(allowed: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: sluice}}\n\
         spec: {{controllerName: sluice.dev/gateway-controller}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge}}\n\
         spec:\n  gatewayClassName: sluice\n  allowedListeners: {{namespaces: {{from: {allowed}}}}}\n\
         \x20 listeners: [{{name: http, port: 80, protocol: HTTP}}]\n"
    )
}

/// ListenerSet `name` in `namespace` with one HTTP listener on `port` for `host`, and an
/// HTTPRoute attached to it (parentRef kind ListenerSet) sending everything to Service `app`.
fn listener_set_yaml(namespace: &str, name: &str, port: u16, host: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\n\
         metadata: {{name: {name}, namespace: {namespace}}}\n\
         spec:\n  parentRef: {{name: edge, namespace: default}}\n\
         \x20 listeners: [{{name: extra, port: {port}, protocol: HTTP, hostname: {host}}}]\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {{name: {name}, namespace: {namespace}}}\n\
         spec:\n  parentRefs: [{{kind: ListenerSet, name: {name}, sectionName: extra}}]\n\
         \x20 rules: [{{backendRefs: [{{name: app, namespace: default, port: 80}}]}}]\n"
    )
}

fn at(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn closed(port: u16) -> bool {
    TcpStream::connect_timeout(&at(port), Duration::from_secs(1)).is_err()
}

#[test]
fn an_allowed_listener_set_serves_its_routes_on_its_port_and_a_refused_one_does_not() {
    let dir = temp_dir("listener-set");
    let pod = Pod::start("one");
    let (port, refused) = (free_tcp_port(), free_tcp_port());
    std::fs::write(dir.join("gateway.yaml"), gateway_yaml("Same")).unwrap();
    std::fs::write(dir.join("app.yaml"), service_yaml(&[pod.addr])).unwrap();
    let allowed = listener_set_yaml("default", "extra", port, "extra.test");
    std::fs::write(dir.join("allowed.yaml"), allowed).unwrap();
    // Another namespace, which `from: Same` does not allow (the route may use the Service:
    // a grant lets it, so only the ListenerSet's permission decides).
    let other = listener_set_yaml("other", "denied", refused, "denied.test")
        + "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
           metadata: {name: routes, namespace: default}\n\
           spec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: other}]\n\
           \x20 to: [{group: \"\", kind: Service}]\n";
    std::fs::write(dir.join("other.yaml"), other).unwrap();
    let serve = Serve::start(&dir, &[]);

    let reply = get(at(port), "extra.test", "/echo").unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.text().contains("\"one\""), "{}", reply.text());
    // The route is attached to the ListenerSet's listener only: not on the Gateway's own, not
    // for another host on the ListenerSet's.
    assert_eq!(serve.get("extra.test", "/echo").status, 404);
    assert_eq!(get(at(port), "else.test", "/echo").unwrap().status, 404);
    assert!(closed(refused), "the refused ListenerSet's port is open");

    // The Gateway allows every namespace now: the other ListenerSet's port opens.
    write_atomically(&dir.join("gateway.yaml"), &gateway_yaml("All"));
    eventually(WAIT, "the other ListenerSet served", || {
        let reply = get(at(refused), "denied.test", "/echo").ok()?;
        (reply.status == 200).then_some(())
    });
    // And none: both ports close, the Gateway's own listener stays.
    write_atomically(&dir.join("gateway.yaml"), &gateway_yaml("None"));
    eventually(WAIT, "both ListenerSets' ports closed", || {
        (closed(port) && closed(refused)).then_some(())
    });
    assert_eq!(serve.get("extra.test", "/echo").status, 404);
}
