//! Gateway API listener isolation and route hostname precedence in `RouteTable::route_on`,
//! through the public model only (what translate's `gateway/isolation.rs` writes).
//!
//! ```text
//!  listener hostnames ─add_listener_host─▶ RouteTable ◀─ rules with PathRoute.via
//!  route_on(listener, host, path) ─▶ the rule of the listener the host selects, or none
//! ```

use std::sync::Arc;

use model::listener_hosts::Via;
use model::routes::{HostPattern, Listeners, PathKind, PathRoute};
use model::{RequestMatch, Route, RouteTable, ValueMatch};

fn exact(name: &str) -> HostPattern {
    HostPattern::Exact(name.into())
}

fn wildcard(suffix: &str) -> HostPattern {
    HostPattern::Wildcard(suffix.into())
}

fn route(service: &str) -> Arc<Route> {
    Arc::new(Route::bare(service))
}

/// A Gateway rule for `path` on `host`, through the listener `listener`, of a route whose
/// hostname was `named`.
fn rule(path: &str, listener: &HostPattern, named: &HostPattern, host: &HostPattern) -> PathRoute {
    let mut rule = PathRoute::new(PathKind::Prefix, path, route(path));
    rule.listeners = Listeners::HTTP;
    rule.via = Via::gateway(listener.rank(), named.rank(), host.rank());
    rule
}

fn header(name: &'static str, value: &str) -> Box<[RequestMatch]> {
    Box::new([RequestMatch::Header {
        name: http::HeaderName::from_static(name),
        value: ValueMatch::Exact(value.into()),
    }])
}

fn served(table: &RouteTable, host: &str, path: &str, headers: &[(&str, &str)]) -> Option<String> {
    let mut request = http::Request::builder().uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let head = request.body(()).unwrap().into_parts().0;
    let matched = table.route_on(Listeners::HTTP, host, path, &head)?;
    Some(matched.route.service.to_string())
}

#[test]
fn a_request_is_served_only_by_the_rules_of_the_listener_its_host_selects() {
    // The conformance suite's GatewayHTTPListenerIsolation, with routes whose hostnames reach
    // into the other listeners (the second half of the test), and an Ingress rule.
    let mut table = RouteTable::default();
    let listeners = [
        (HostPattern::Any, "/empty-hostname"),
        (wildcard("example.com"), "/wildcard-example-com"),
        (wildcard("foo.example.com"), "/wildcard-foo-example-com"),
        (exact("abc.foo.example.com"), "/abc-foo-example-com"),
    ];
    // Each route's hostnames, intersected with its listener's by hand (translate's job).
    let hosts_through = |listener: &HostPattern| -> Vec<(HostPattern, HostPattern)> {
        let named = |h: &str| {
            if let Some(s) = h.strip_prefix("*.") {
                wildcard(s)
            } else {
                exact(h)
            }
        };
        let pairs: &[(&str, &str)] = match listener {
            HostPattern::Any => &[
                ("bar.com", "bar.com"),
                ("*.example.com", "*.example.com"),
                ("*.foo.example.com", "*.foo.example.com"),
                ("abc.foo.example.com", "abc.foo.example.com"),
            ],
            HostPattern::Wildcard(s) if &**s == "example.com" => &[
                ("*.example.com", "*.example.com"),
                ("*.foo.example.com", "*.foo.example.com"),
                ("abc.foo.example.com", "abc.foo.example.com"),
            ],
            HostPattern::Wildcard(_) => &[
                ("*.example.com", "*.foo.example.com"),
                ("*.foo.example.com", "*.foo.example.com"),
                ("abc.foo.example.com", "abc.foo.example.com"),
            ],
            HostPattern::Exact(_) => &[
                ("*.example.com", "abc.foo.example.com"),
                ("*.foo.example.com", "abc.foo.example.com"),
                ("abc.foo.example.com", "abc.foo.example.com"),
            ],
        };
        pairs.iter().map(|(n, h)| (named(n), named(h))).collect()
    };
    for (listener, path) in &listeners {
        table.add_listener_host(listener, Listeners::HTTP);
        for (named, host) in hosts_through(listener) {
            let rule = rule(path, listener, &named, &host);
            match &host {
                HostPattern::Wildcard(suffix) => table.add_suffix_rule(suffix, rule),
                _ => table.host_mut(&host).add(rule),
            }
        }
    }
    table
        .host_mut(&exact("ingress.example.com"))
        .add(PathRoute::new(PathKind::Prefix, "/", route("ingress")));
    table.finish();
    let cases = [
        ("bar.com", "/empty-hostname"),
        ("bar.example.com", "/wildcard-example-com"),
        ("bar.foo.example.com", "/wildcard-foo-example-com"),
        ("abc.foo.example.com", "/abc-foo-example-com"),
    ];
    for (host, own) in cases {
        for (_, path) in &listeners {
            let expected = (path == &own).then(|| own.to_owned());
            assert_eq!(served(&table, host, path, &[]), expected, "{host}{path}");
        }
    }
    // An Ingress rule answers whatever listener its host selects.
    let ingress = served(&table, "ingress.example.com", "/x", &[]);
    assert_eq!(ingress.as_deref(), Some("ingress"));
}

#[test]
fn a_route_that_named_the_host_outranks_one_that_got_it_by_intersection() {
    // GatewayRouteHostnameIntersectionPrecedence: on the listener abc.example.com, the older
    // route named *.example.com (a longer path), the newer abc.example.com.
    let mut table = RouteTable::default();
    let listener = exact("abc.example.com");
    table.add_listener_host(&listener, Listeners::HTTP);
    let mut older = rule(
        "/path/prefix",
        &listener,
        &wildcard("example.com"),
        &listener,
    );
    older.when = header("header-b", "B");
    let mut newer = rule("/path", &listener, &listener, &listener);
    newer.when = header("header-a", "A");
    table.host_mut(&listener).add(older);
    table.host_mut(&listener).add(newer);
    table.finish();
    let path = "/path/prefix/longer";
    let both = [("header-a", "A"), ("header-b", "B")];
    let host = "abc.example.com";
    assert_eq!(served(&table, host, path, &both).as_deref(), Some("/path"));
    // What the route that named the host does not match passes to the other.
    let b = served(&table, host, path, &[("header-b", "B")]);
    assert_eq!(b.as_deref(), Some("/path/prefix"));
    assert_eq!(served(&table, host, path, &[]), None);
}
