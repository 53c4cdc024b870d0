//! The compiled route table and `route(host, path)`: Ingress matching semantics as plain data.
//!
//! ```text
//!  Host header ─normalise─▶ exact host ─▶ its paths ─┐
//!                           *.parent   ─▶ its paths ─┼─▶ first match (most specific) ─▶ Route
//!                           any host   ─▶ its paths ─┤
//!                           defaultBackend ──────────┘  else None (404)
//! ```
//! Within one host, paths are sorted most specific first: longer path first, and at equal
//! length `Exact` before `Prefix`, so the first match is the one the Ingress spec asks for.
//!
//! **Regex hosts** (ingress-nginx's rules, traps included): when any Ingress asks for regex
//! paths on a host (`use-regex`, or a `rewrite-target` that differs from the path), *every*
//! path of that host, whatever Ingress wrote it, is matched as the case-insensitive regex
//! `(?i)^<path>`, anchored at the start only. A `Prefix` path `/foo` of an Ingress without
//! regex becomes `^/foo/` and `^/foo` (ingress-nginx's two locations). They are tried longest
//! first, then in reverse string order, and the first match wins (nginx's first-match rule
//! for regex locations).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use http::HeaderValue;
use regex::Regex;
use serde::Serialize;

use crate::endpoints::Backend;
use crate::names::NamespacedName;
use crate::policy::RoutePolicy;

/// A rule's host: `foo.example.com`, `*.example.com` (one extra label), or none (any host).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostPattern {
    /// Shared strings: the pattern, the table's key and each route's written host are one.
    Exact(Arc<str>),
    /// The part after `*.`.
    Wildcard(Arc<str>),
    Any,
}

/// How a path rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum PathKind {
    Exact,
    /// `Prefix`, and `ImplementationSpecific`, which Sluice treats as `Prefix`.
    Prefix,
    /// A path of an Ingress with `use-regex` or `rewrite-target`: a regular expression.
    Regex,
}

/// Where a request goes, and the names it is counted under.
///
/// Its names are shared strings (`Arc<str>`): the Ingress's with the Store and the served
/// list, and compile hands every route with the same Service, port, host or path the same
/// string, so a route costs its own allocation and little else.
#[derive(Debug)]
pub struct Route {
    /// The Ingress that owns the rule.
    pub ingress: NamespacedName,
    /// The Service name as written in the Ingress (metrics label), even when unresolved.
    pub service: Arc<str>,
    pub backend: Arc<Backend>,
    /// What the request goes through (the default policy when the Ingress has no annotations).
    pub policy: Arc<RoutePolicy>,
    /// Where the rule is written, for logs and metric labels.
    pub site: RouteSite,
}

impl Route {
    /// The same route with another policy (host-wide passes once every Ingress is in).
    pub fn with_policy(&self, policy: Arc<RoutePolicy>) -> Route {
        Route {
            ingress: self.ingress.clone(),
            service: self.service.clone(),
            backend: self.backend.clone(),
            policy,
            site: self.site.clone(),
        }
    }
}

/// Where a route's rule is written: the labels of its log lines and metrics (bounded: one per
/// Ingress rule, never a request's own path).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteSite {
    /// The rule's host as written; empty for a default backend or a rule without host.
    pub host: Arc<str>,
    /// The path as written; empty for a default backend.
    pub path: Arc<str>,
    /// The Service port as written (number or name).
    pub service_port: Arc<str>,
}

/// One path rule of one host.
#[derive(Clone, Debug)]
pub struct PathRoute {
    pub kind: PathKind,
    /// The length of the path matched: for `Prefix`, the written path without its trailing
    /// slashes (`/` becomes empty), which is always a prefix of it; otherwise all of it.
    path_len: usize,
    /// As written in the Ingress, for display; shared with the route's site.
    pub written: Arc<str>,
    /// On a regex host: what this rule is matched with, `(?i)^<location>`.
    pub pattern: Option<Regex>,
    pub route: Arc<Route>,
}

/// Everything routing needs for one host pattern.
#[derive(Clone, Debug, Default)]
pub struct HostRoutes {
    pub paths: Vec<PathRoute>,
    /// Some served Ingress lists this host under `spec.tls`.
    pub tls: bool,
    /// Paths are regexes here (see the module doc).
    pub regex: bool,
    /// `app-root`: a request for `/` is answered with a 302 to this path.
    /// Boxed: few hosts have one, and every host's entry would otherwise carry its 40 bytes.
    pub app_root: Option<Box<HeaderValue>>,
}

/// The routes of one compiled configuration. Immutable; replaced whole.
#[derive(Debug, Default)]
pub struct RouteTable {
    exact: HashMap<Arc<str>, HostRoutes>,
    wildcard: HashMap<Arc<str>, HostRoutes>,
    any_host: HostRoutes,
    default_backend: Option<Arc<Route>>,
    /// `from-to-www-redirect`: a host without rules of its own → the host to send it to.
    www_redirects: HashMap<String, String>,
}

/// What `route()` found.
#[derive(Debug)]
pub struct Matched<'a> {
    pub route: &'a Arc<Route>,
    /// The host matched has TLS configured (for `ssl-redirect`).
    pub tls: bool,
    /// The regex the path matched, on a regex host (for `rewrite-target`'s captures).
    pub pattern: Option<&'a Regex>,
    /// The host's `app-root`.
    pub app_root: Option<&'a HeaderValue>,
}

impl HostPattern {
    /// Parses a rule's host. `None` when the Ingress spec forbids it (IPs, ports, a bare `*`,
    /// upper case, empty labels).
    pub fn parse(host: Option<&str>) -> Result<HostPattern, &'static str> {
        let Some(host) = host.filter(|h| !h.is_empty()) else {
            return Ok(HostPattern::Any);
        };
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if host.len() > 253 || !name.split('.').all(crate::target::is_dns_label) {
            return Err("must be a lower-case DNS name, optionally starting with `*.` (no IP, port or upper case)");
        }
        if name.parse::<std::net::Ipv4Addr>().is_ok() {
            return Err("an IP address is not allowed as a host");
        }
        Ok(if wildcard {
            HostPattern::Wildcard(name.into())
        } else {
            HostPattern::Exact(name.into())
        })
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Wildcard(suffix) => write!(f, "*.{suffix}"),
            HostPattern::Any => f.write_str("*"),
        }
    }
}

impl PathRoute {
    pub fn new(kind: PathKind, written: impl Into<Arc<str>>, route: Arc<Route>) -> PathRoute {
        let written: Arc<str> = written.into();
        let path_len = match kind {
            PathKind::Exact | PathKind::Regex => written.len(),
            PathKind::Prefix => written.trim_end_matches('/').len(),
        };
        PathRoute {
            kind,
            path_len,
            written,
            pattern: None,
            route,
        }
    }

    /// The path matched (see `path_len`).
    fn path(&self) -> &str {
        &self.written[..self.path_len]
    }

    /// Prefix matching is element-wise: `/foo` matches `/foo`, `/foo/` and `/foo/bar`, never
    /// `/foobar`. On a regex host the pattern decides.
    pub fn matches(&self, request_path: &str) -> bool {
        if let Some(pattern) = &self.pattern {
            return pattern.is_match(request_path);
        }
        match self.kind {
            PathKind::Exact => request_path == self.path(),
            PathKind::Prefix => match request_path.strip_prefix(self.path()) {
                Some(rest) => rest.is_empty() || rest.starts_with('/'),
                None => false,
            },
            // Never without a pattern: a host with a regex path is a regex host.
            PathKind::Regex => false,
        }
    }

    /// The key conflicts are detected on: two rules with it can never both win.
    pub fn identity(&self) -> (PathKind, &str) {
        (self.kind, self.path())
    }

    /// Sort key: most specific first.
    fn specificity(&self) -> (std::cmp::Reverse<usize>, PathKind) {
        (std::cmp::Reverse(self.path_len), self.kind)
    }
}

impl HostRoutes {
    fn find(&self, path: &str) -> Option<&PathRoute> {
        self.paths.iter().find(|p| p.matches(path))
    }

    fn matched<'a>(&'a self, path: &'a PathRoute, tls: bool) -> Matched<'a> {
        Matched {
            route: &path.route,
            tls,
            pattern: path.pattern.as_ref(),
            app_root: self.app_root.as_deref(),
        }
    }

    pub fn sort(&mut self) {
        if self.regex {
            // ingress-nginx: by path in reverse string order, then (stable) longest first.
            self.paths.sort_by(|a, b| {
                let (a, b) = (a.location(), b.location());
                b.len().cmp(&a.len()).then_with(|| b.cmp(a))
            });
            return;
        }
        // Stable: among equal rules the earlier (older Ingress) stays first.
        self.paths.sort_by_key(PathRoute::specificity);
    }

    /// Turns this host into a regex host (see the module doc). Returns the rules whose regex
    /// does not compile, with the reason; they are left out.
    pub fn make_regex(&mut self) -> Vec<(PathRoute, String)> {
        self.regex = true;
        let exact: std::collections::HashSet<Arc<str>> = self
            .paths
            .iter()
            .filter(|p| p.kind == PathKind::Exact)
            .map(|p| p.written.clone())
            .collect();
        let mut expanded = Vec::with_capacity(self.paths.len());
        for path in std::mem::take(&mut self.paths) {
            if path.kind == PathKind::Prefix && &*path.written != "/" {
                // ingress-nginx's two locations for a Prefix path: `/foo/` and `= /foo`.
                let mut slash = path.clone();
                if !slash.written.ends_with('/') {
                    slash.written = format!("{}/", slash.written).into();
                }
                let keep_exact = !exact.contains(&path.written);
                expanded.push(slash);
                if keep_exact {
                    expanded.push(path);
                }
            } else {
                expanded.push(path);
            }
        }
        let mut refused = Vec::new();
        for mut path in expanded {
            match Regex::new(&format!("(?i)^{}", path.written)) {
                Ok(pattern) => {
                    path.pattern = Some(pattern);
                    self.paths.push(path);
                }
                Err(error) => refused.push((path, regex_error(&error))),
            }
        }
        refused
    }
}

impl PathRoute {
    /// The location this rule is sorted by on a regex host.
    fn location(&self) -> &str {
        &self.written
    }
}

/// The regex crate's reason, on one line (it names constructs like look-around and
/// back-references, which it does not support).
fn regex_error(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => text
            .lines()
            .filter(|l| l.starts_with("error:"))
            .map(|l| l.trim_start_matches("error:").trim())
            .next()
            .unwrap_or("invalid regular expression")
            .to_owned(),
        regex::Error::CompiledTooBig(_) => "the regular expression is too big".to_owned(),
        _ => "invalid regular expression".to_owned(),
    }
}

impl RouteTable {
    /// The route for a request. `host` is the Host header or `:authority` (a port and a
    /// trailing dot are ignored, case does not matter); `path` excludes the query.
    pub fn route(&self, host: &str, path: &str) -> Option<Matched<'_>> {
        let host = normalise_host(host);
        let host = host.as_ref();
        let by_host = self.exact.get(host).into_iter().chain(
            host.split_once('.')
                .and_then(|(_, parent)| self.wildcard.get(parent)),
        );
        let mut tls = false;
        for routes in by_host {
            tls |= routes.tls;
            if let Some(found) = routes.find(path) {
                return Some(routes.matched(found, routes.tls));
            }
        }
        if let Some(found) = self.any_host.find(path) {
            return Some(self.any_host.matched(found, tls));
        }
        self.default_backend.as_ref().map(|route| Matched {
            route,
            tls,
            pattern: None,
            app_root: None,
        })
    }

    /// `from-to-www-redirect`: the host a request for `host` is sent to, if any. Checked
    /// before `route()`; free when no Ingress asks for it.
    pub fn www_redirect(&self, host: &str) -> Option<&str> {
        if self.www_redirects.is_empty() {
            return None;
        }
        self.www_redirects
            .get(normalise_host(host).as_ref())
            .map(String::as_str)
    }

    pub fn add_www_redirect(&mut self, from: String, to: String) {
        self.www_redirects.entry(from).or_insert(to);
    }

    pub fn www_redirects(&self) -> &HashMap<String, String> {
        &self.www_redirects
    }

    /// Host routes by pattern, if the table has that host.
    pub fn host(&self, host: &HostPattern) -> Option<&HostRoutes> {
        match host {
            HostPattern::Exact(h) => self.exact.get(h),
            HostPattern::Wildcard(s) => self.wildcard.get(s),
            HostPattern::Any => Some(&self.any_host),
        }
    }

    /// Every host's routes, mutable, for compile's passes (and for tests of the proxy's own
    /// defences, which put into a model what no translator makes).
    pub fn hosts_mut(&mut self) -> impl Iterator<Item = (HostPattern, &mut HostRoutes)> {
        self.exact
            .iter_mut()
            .map(|(h, r)| (HostPattern::Exact(h.clone()), r))
            .chain(
                self.wildcard
                    .iter_mut()
                    .map(|(s, r)| (HostPattern::Wildcard(s.clone()), r)),
            )
            .chain(std::iter::once((HostPattern::Any, &mut self.any_host)))
    }

    pub fn host_mut(&mut self, host: &HostPattern) -> &mut HostRoutes {
        match host {
            HostPattern::Exact(h) => self.exact.entry(h.clone()).or_default(),
            HostPattern::Wildcard(s) => self.wildcard.entry(s.clone()).or_default(),
            HostPattern::Any => &mut self.any_host,
        }
    }

    pub fn set_default_backend(&mut self, route: Arc<Route>) {
        self.default_backend = Some(route);
    }

    pub fn default_backend(&self) -> Option<&Arc<Route>> {
        self.default_backend.as_ref()
    }

    /// Every host pattern with its routes, in a stable order (for display and golden files).
    pub fn hosts(&self) -> Vec<(HostPattern, &HostRoutes)> {
        let mut hosts: Vec<(HostPattern, &HostRoutes)> = self
            .exact
            .iter()
            .map(|(h, r)| (HostPattern::Exact(h.clone()), r))
            .chain(
                self.wildcard
                    .iter()
                    .map(|(s, r)| (HostPattern::Wildcard(s.clone()), r)),
            )
            .collect();
        hosts.sort_by(|a, b| a.0.cmp(&b.0));
        if !self.any_host.paths.is_empty() {
            hosts.push((HostPattern::Any, &self.any_host));
        }
        hosts
    }

    /// Sorts every host's paths, and gives back what the vectors and maps grew into beyond
    /// their size: the table lives until the next compile, and a host of one path would
    /// otherwise hold room for four (at 10,000 hosts, ≈3 MB).
    pub fn finish(&mut self) {
        for routes in self.exact.values_mut().chain(self.wildcard.values_mut()) {
            routes.sort();
            routes.paths.shrink_to_fit();
        }
        self.any_host.sort();
        self.any_host.paths.shrink_to_fit();
        self.exact.shrink_to_fit();
        self.wildcard.shrink_to_fit();
        self.www_redirects.shrink_to_fit();
    }
}

/// Lower case, without port or trailing dot; borrows when nothing needs changing, which is
/// the common case.
fn normalise_host(host: &str) -> std::borrow::Cow<'_, str> {
    let without_port = if host.starts_with('[') {
        // An IPv6 literal: `[::1]:8080`. It never matches a rule, but must not be mangled.
        host.split_once(']')
            .map_or(host, |(h, _)| &host[..h.len() + 1])
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    let trimmed = without_port.strip_suffix('.').unwrap_or(without_port);
    if trimmed.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(trimmed.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(trimmed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(service: &str) -> Arc<Route> {
        Arc::new(Route {
            ingress: NamespacedName::new("default", "test"),
            service: service.into(),
            backend: Arc::new(Backend::unresolved()),
            policy: Arc::default(),
            site: RouteSite::default(),
        })
    }

    fn path(kind: PathKind, p: &str) -> PathRoute {
        PathRoute::new(kind, p, route(p))
    }

    #[test]
    fn prefix_matching_is_element_wise() {
        let cases = [
            ("/", "/anything", true),
            ("/", "/", true),
            ("/foo", "/foo", true),
            ("/foo", "/foo/", true),
            ("/foo", "/foo/bar", true),
            ("/foo/", "/foo", true),
            ("/aaa", "/aaaccc", false),
            ("/foo/bar", "/foo/barbaz", false),
            ("/foo/bar", "/foo", false),
        ];
        for (rule, request, expected) in cases {
            assert_eq!(
                path(PathKind::Prefix, rule).matches(request),
                expected,
                "Prefix {rule} vs {request}"
            );
        }
    }

    #[test]
    fn exact_matching_is_whole_and_case_sensitive() {
        let rule = path(PathKind::Exact, "/foo");
        assert!(rule.matches("/foo"));
        assert!(!rule.matches("/foo/"));
        assert!(!rule.matches("/FOO"));
    }

    #[test]
    fn hosts_parse_per_the_spec() {
        assert_eq!(
            HostPattern::parse(Some("*.example.com")),
            Ok(HostPattern::Wildcard("example.com".into()))
        );
        assert_eq!(HostPattern::parse(None), Ok(HostPattern::Any));
        for bad in [
            "*",
            "Foo.com",
            "a..b",
            "foo.com:80",
            "10.0.0.1",
            "*.*.x",
            "-a.com",
        ] {
            assert!(HostPattern::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn wildcards_match_exactly_one_label() {
        let mut table = RouteTable::default();
        table
            .host_mut(&HostPattern::Wildcard("example.com".into()))
            .paths
            .push(path(PathKind::Prefix, "/"));
        table.finish();
        assert!(table.route("foo.example.com", "/").is_some());
        assert!(table.route("a.b.example.com", "/").is_none());
        assert!(table.route("example.com", "/").is_none());
    }

    #[test]
    fn host_lookup_ignores_port_case_and_trailing_dot() {
        let mut table = RouteTable::default();
        table
            .host_mut(&HostPattern::Exact("foo.com".into()))
            .paths
            .push(path(PathKind::Prefix, "/"));
        table.finish();
        for host in ["foo.com", "FOO.com:8443", "foo.com.", "foo.com:80"] {
            assert!(table.route(host, "/x").is_some(), "{host}");
        }
        assert!(table.route("bar.com", "/x").is_none());
        assert!(table.route("[::1]:80", "/x").is_none());
    }

    #[test]
    fn longest_path_wins_and_exact_beats_prefix_at_equal_length() {
        let mut table = RouteTable::default();
        let host = table.host_mut(&HostPattern::Any);
        host.paths.push(path(PathKind::Prefix, "/"));
        host.paths.push(path(PathKind::Prefix, "/api"));
        host.paths.push(path(PathKind::Exact, "/api"));
        host.paths.push(path(PathKind::Prefix, "/api/v1/"));
        table.finish();
        let service = |p: &str| table.route("x", p).unwrap().route.service.to_string();
        assert_eq!(service("/api"), "/api");
        assert_eq!(table.any_host.paths[1].kind, PathKind::Exact);
        assert_eq!(service("/api/v1/users"), "/api/v1/");
        assert_eq!(service("/api/v2"), "/api");
        assert_eq!(service("/other"), "/");
    }

    #[test]
    fn specific_hosts_fall_back_to_any_host_rules_then_the_default_backend() {
        let mut table = RouteTable::default();
        table
            .host_mut(&HostPattern::Exact("foo.com".into()))
            .paths
            .push(path(PathKind::Exact, "/only"));
        table
            .host_mut(&HostPattern::Any)
            .paths
            .push(path(PathKind::Prefix, "/shared"));
        table.finish();
        assert_eq!(
            &*table.route("foo.com", "/shared/x").unwrap().route.service,
            "/shared"
        );
        assert!(table.route("foo.com", "/nothing").is_none());
        table.set_default_backend(route("default"));
        assert_eq!(
            &*table.route("foo.com", "/nothing").unwrap().route.service,
            "default"
        );
    }
}
