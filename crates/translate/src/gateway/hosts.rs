//! Gateway API hostnames as Sluice's table keeps them, and what a listener's and a route's
//! have in common (the spec's intersection).
//!
//! ```text
//!  "foo.example.com" ─▶ Exact    "*.example.com" ─▶ Suffix("example.com")    none ─▶ Any
//!  listener ∩ route ─▶ the more specific of the two, when one covers the other
//! ```

use std::collections::BTreeMap;

use model::listener_hosts::Via;
use model::routes::{HostPattern, Listeners};

use super::pool::Place;

/// A hostname a route answers for on Sluice's table.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum GatewayHost {
    Exact(String),
    /// `*.<suffix>`: one or more labels below the suffix (Gateway API's wildcard).
    Suffix(String),
    /// No hostname anywhere: every host.
    Any,
}

impl GatewayHost {
    pub(super) fn parse(text: Option<&str>) -> Result<GatewayHost, &'static str> {
        Ok(match HostPattern::parse(text)? {
            HostPattern::Exact(h) => GatewayHost::Exact(h.to_string()),
            HostPattern::Wildcard(s) => GatewayHost::Suffix(s.to_string()),
            HostPattern::Any => GatewayHost::Any,
        })
    }

    /// What a listener's hostname and a route's have in common (Gateway API's intersection:
    /// the more specific of the two when one covers the other).
    pub(super) fn intersect(&self, other: &GatewayHost) -> Option<GatewayHost> {
        use GatewayHost::*;
        match (self, other) {
            (Any, h) | (h, Any) => Some(h.clone()),
            (Exact(a), Exact(b)) => (a == b).then(|| Exact(a.clone())),
            (Suffix(s), Exact(h)) | (Exact(h), Suffix(s)) => covers(s, h).then(|| Exact(h.clone())),
            (Suffix(a), Suffix(b)) if a == b || covers(a, b) => Some(Suffix(b.clone())),
            (Suffix(a), Suffix(b)) => covers(b, a).then(|| Suffix(a.clone())),
        }
    }

    /// Whether some name matches both (`intersect` is `Some`), without making the name.
    pub(super) fn overlaps(&self, other: &GatewayHost) -> bool {
        use GatewayHost::*;
        match (self, other) {
            (Any, _) | (_, Any) => true,
            (Exact(a), Exact(b)) => a == b,
            (Suffix(s), Exact(h)) | (Exact(h), Suffix(s)) => covers(s, h),
            (Suffix(a), Suffix(b)) => a == b || covers(a, b) || covers(b, a),
        }
    }
}

/// `*.<suffix>` matches `name`: one or more labels in front of the suffix.
fn covers(suffix: &str, name: &str) -> bool {
    name.strip_suffix(suffix)
        .and_then(|head| head.strip_suffix('.'))
        .is_some_and(|labels| !labels.is_empty())
}

/// The hosts a route answers for, each at its Gateway's site with the listeners it is on.
/// By the listener hostname it came through (`isolation`).
pub(super) type RouteHosts = BTreeMap<(Place, GatewayHost, Via), Listeners>;

/// One of a route's hosts as the route table keys it (its name shared), at its Gateway's
/// site, with the listeners the route answers on there.
/// With how it came (`PathRoute.via`).
pub(super) type PlacedHost = (Place, HostPattern, Listeners, Via);

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> GatewayHost {
        GatewayHost::parse(Some(text)).unwrap()
    }

    #[test]
    fn hostnames_intersect_as_gateway_api_says() {
        let cases = [
            (
                "foo.example.com",
                "foo.example.com",
                Some("foo.example.com"),
            ),
            ("*.example.com", "foo.example.com", Some("foo.example.com")),
            ("*.example.com", "a.b.example.com", Some("a.b.example.com")),
            ("foo.example.com", "*.example.com", Some("foo.example.com")),
            ("*.example.com", "*.b.example.com", Some("*.b.example.com")),
            ("*.b.example.com", "*.example.com", Some("*.b.example.com")),
            ("*.example.com", "example.com", None),
            ("foo.example.com", "bar.example.com", None),
            ("*.example.com", "*.example.org", None),
        ];
        let shown = |h: GatewayHost| match h {
            GatewayHost::Exact(h) => h,
            GatewayHost::Suffix(s) => format!("*.{s}"),
            GatewayHost::Any => "*".to_owned(),
        };
        for (listener, route, expected) in cases {
            let found = host(listener).intersect(&host(route)).map(shown);
            assert_eq!(found.as_deref(), expected, "{listener} ∩ {route}");
            let overlaps = host(listener).overlaps(&host(route));
            assert_eq!(overlaps, expected.is_some(), "{listener} ∩ {route}");
        }
        assert_eq!(
            GatewayHost::Any.intersect(&host("*.x.com")),
            Some(host("*.x.com"))
        );
    }
}
