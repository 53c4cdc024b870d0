//! The compiled route table and `route(host, path)`: Ingress matching semantics as plain data.
//!
//! ```text
//!  Host header ─normalise─▶ exact host ─▶ its paths ─┐
//!                           *.parent   ─▶ its paths ─┼─▶ first match (most specific) ─▶ Route
//!                           any host   ─▶ its paths ─┤
//!                           defaultBackend ──────────┘  else None (404)
//!  a host with rules whose paths all miss ─▶ its root (first Ingress's policy) or the host
//!  default (--default-backend-service), else None (404): never the next line of the picture
//! ```
//! **Hosts are servers** (ingress-nginx's, traps included): a request whose host has rules is
//! settled by that host, as nginx picks one `server` by name before any `location`; a path no
//! rule of the host matches goes to the host's `location /`, which carries the annotations of
//! the first Ingress with a rule for the host (its auth, CORS, limits, redirects) in front of
//! that Ingress's `spec.defaultBackend` or the default backend. Only hosts without rules reach
//! the wildcard's, the host-less rules and the catch-all.
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
//!
//! **Rules beyond the path.** A path rule may also ask for headers, cookies, query parameters
//! or a method ([`RequestMatch`]); it then applies only to the requests that have them. At
//! equal path, a rule with more conditions is tried first, and rules with as many in the order
//! they were written (so ingress-nginx's canary order, header before cookie before weight, is
//! the order compile writes them in). A route may share its requests by weight with other
//! routes ([`Traffic`]); [`Route::pick`] makes the draw.
//!
//! **Gateway API rules** (translate's `gateway/`) go into the same hosts. Three things are
//! theirs: a rule may answer on one of Sluice's listeners only ([`Listeners`], a byte beside
//! the path's kind: Ingress rules answer on both); a Gateway wildcard `*.example.com` matches
//! one *or more* labels ([`RouteTable::add_suffix_rule`]: the one-label case shares the
//! Ingress wildcard's host, deeper names are looked up by suffix, longest first, only when
//! such rules exist); and conditions rank as Gateway API's precedence asks (a method before
//! headers before query parameters, see [`PathRoute::rank`]). A host with Gateway rules only
//! is no server: its unmatched requests fall through to the wildcards and host-less rules.
//! Listener isolation ([`crate::listener_hosts`]): a Gateway rule answers only requests that
//! belong to the listener it came through ([`PathRoute::via`]), and on one host the rules
//! whose route named the host come before those that got it by intersection.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::HeaderValue;
use regex::Regex;
use serde::Serialize;

use crate::endpoints::Backend;
use crate::listener_hosts::{ListenerHosts, Via};
pub use crate::listeners::Listeners;
use crate::matches::RequestMatch;
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
    /// Other routes taking a share of this rule's requests, or what this route is to another
    /// rule. `None` for almost every route: it costs one pointer.
    pub traffic: Option<Box<Traffic>>,
    /// No upstream: the request goes through the policy's phases, then Sluice answers 404. A
    /// host's root location when no default backend is configured (ingress-nginx's built-in
    /// 404 behind the first Ingress's annotations; see [`HostRoutes::root`]).
    pub not_found: bool,
}

/// A route's part in a traffic split (ingress-nginx's canary; Gateway API's weighted
/// backendRefs later).
#[derive(Debug, Default)]
pub struct Traffic {
    /// The draw is a number in `1..=total`: a number up to the first alternative's weight picks
    /// it, up to the sum of the first two the second, and so on; above all of them, this route.
    /// An alternative whose weight reaches `total` takes every request, one of weight 0 none.
    pub total: u32,
    pub alternatives: Box<[Weighted]>,
    /// This route is the alternative upstream of another rule: its name as ingress-nginx logs
    /// it (`$proxy_alternative_upstream_name`) and labels it (`canary`).
    pub alternative_name: Option<Arc<str>>,
    /// This route is an alternative: the rule's own route (without its split), where an
    /// affinity cookie for it keeps a request whatever the alternative's rules say.
    pub primary: Option<Arc<Route>>,
}

/// One alternative of a split, with its weight.
#[derive(Debug)]
pub struct Weighted {
    pub weight: u32,
    pub route: Arc<Route>,
}

impl Route {
    /// A route to `service` (as written, unresolved) with nothing else: the default policy,
    /// no split. What tests and measurements of the table route to.
    pub fn bare(service: &str) -> Route {
        Route {
            ingress: NamespacedName::new("default", service),
            service: service.into(),
            backend: Arc::new(Backend::unresolved()),
            policy: Arc::default(),
            site: RouteSite::default(),
            traffic: None,
            not_found: false,
        }
    }

    /// The same route with another policy (host-wide passes once every Ingress is in). The
    /// copy has no split: the passes that change policies run before compile makes splits.
    pub fn with_policy(&self, policy: Arc<RoutePolicy>) -> Route {
        Route {
            ingress: self.ingress.clone(),
            service: self.service.clone(),
            backend: self.backend.clone(),
            policy,
            site: self.site.clone(),
            traffic: None,
            not_found: self.not_found,
        }
    }

    /// The route this request takes: an alternative when the draw falls on it, else this one.
    /// `draw(total)` returns a number in `1..=total`; it is called only when some alternative
    /// has a weight, so a route without a split costs no random number.
    pub fn pick(self: &Arc<Route>, draw: impl FnOnce(u32) -> u32) -> &Arc<Route> {
        let Some(traffic) = self.traffic.as_deref() else {
            return self;
        };
        if traffic.total == 0 || traffic.alternatives.iter().all(|a| a.weight == 0) {
            return self;
        }
        let drawn = draw(traffic.total);
        let mut below = 0u32;
        for alternative in traffic.alternatives.iter() {
            below = below.saturating_add(alternative.weight);
            if drawn <= below {
                return &alternative.route;
            }
        }
        self
    }

    /// The side of a split an affinity cookie keeps the request on, asked before the
    /// alternative's rules and the draw (ingress-nginx's `route_to_alternative_balancer`): the
    /// primary when the request is `affinitized` to it (even when a canary header or cookie
    /// rule sent it to the alternative), else the alternative it is affinitized to (even from
    /// a `never` rule); `None`: the rules and the weights decide. A canary split has one
    /// alternative (ingress-nginx's one canary); a Gateway API rule's weighted backendRefs
    /// (session persistence) may have several: the first one the request is affinitized to.
    pub fn affinity_side(
        self: &Arc<Route>,
        affinitized: impl Fn(&Route) -> bool,
    ) -> Option<&Arc<Route>> {
        let traffic = self.traffic.as_deref()?;
        if let Some(primary) = &traffic.primary {
            return if affinitized(primary) {
                Some(primary)
            } else {
                affinitized(self).then_some(self)
            };
        }
        if affinitized(self) {
            return Some(self);
        }
        (traffic.alternatives.iter())
            .map(|alternative| &alternative.route)
            .find(|alternative| affinitized(alternative))
    }

    /// ingress-nginx's name for the route's upstream (`$proxy_upstream_name`):
    /// `NAMESPACE-SERVICE-PORT`, the port as written. `None` for a route without a Service.
    pub fn upstream_name(&self) -> Option<String> {
        (!self.service.is_empty()).then(|| {
            format!(
                "{}-{}-{}",
                self.ingress.namespace, self.service, self.site.service_port
            )
        })
    }

    /// `alternative_name` of the split, when this route is an alternative.
    pub fn alternative_name(&self) -> Option<&Arc<str>> {
        self.traffic.as_deref()?.alternative_name.as_ref()
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
    /// `u32` packs it beside `kind` (8 bytes a rule at 10,000s of rules); a path is an object
    /// field of at most a few MB.
    path_len: u32,
    /// As written in the Ingress, for display; shared with the route's site.
    pub written: Arc<str>,
    /// The listeners the rule answers on (in `kind`'s padding: no cost per rule).
    pub listeners: Listeners,
    /// The Gateway listener the rule came through ([`Via::INGRESS`] for Ingress rules): one
    /// byte more than the padding holds, so 8 bytes a rule (88 instead of 80).
    pub via: Via,
    /// On a regex host: what this rule is matched with, `(?i)^<location>`. A Gateway API
    /// `RegularExpression` path (kind `Regex` on a host that is not a regex host): its
    /// whole-path pattern.
    pub pattern: Option<Regex>,
    /// What else the request must have (none for a plain Ingress path).
    pub when: Box<[RequestMatch]>,
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
    /// Some Ingress has a rule for this host (an entry made only by `spec.tls` has none): a
    /// request for it that no path matches stops here (ingress-nginx's server for the host),
    /// at `root`, else at the table's host default; it never falls through to the wildcard's
    /// or the host-less rules.
    pub server: bool,
    /// The host's root location (ingress-nginx's `location /` of the server, made by the
    /// first Ingress with a rule for the host): that Ingress's policy in front of its
    /// `spec.defaultBackend`, else the default backend, else a 404. `None` when it would be
    /// the table's host default anyway (an Ingress without annotations or defaultBackend).
    pub root: Option<Arc<Route>>,
}

/// The routes of one compiled configuration. Immutable; replaced whole.
#[derive(Debug, Default)]
pub struct RouteTable {
    // foldhash, not SipHash: looked up once a request; the keys are the configuration's
    // (a client's Host is only looked up, never inserted, so it cannot grow a collision chain).
    exact: foldhash::HashMap<Arc<str>, HostRoutes>,
    wildcard: foldhash::HashMap<Arc<str>, HostRoutes>,
    any_host: HostRoutes,
    default_backend: Option<Arc<Route>>,
    /// Where a known host's unmatched paths go when the host has no `root` of its own:
    /// `--default-backend-service` with the ConfigMap's policy; `None`: 404.
    host_default: Option<Arc<Route>>,
    /// ingress-nginx's default server (`_`) without a backend: where a request no host and no
    /// rule takes goes when there is no default backend either. Sluice's 404 behind the http
    /// level's policy (the ConfigMap's `add-headers`): nothing of a location's (allow-lists,
    /// redirects, limits), as ingress-nginx's `_` server has none. `None`: a bare 404 (a
    /// Gateway's own table).
    default_server: Option<Arc<Route>>,
    /// Rules tried before the default backend (its canary's header and cookie rules), in order.
    default_rules: Vec<PathRoute>,
    /// `from-to-www-redirect`: a host without rules of its own → the host to send it to.
    www_redirects: HashMap<String, String>,
    /// Gateway API wildcards by suffix, for names two or more labels below it (one label
    /// below is `wildcard`'s, where the same rules are too). Empty without such rules.
    suffix: foldhash::HashMap<Arc<str>, HostRoutes>,
    /// The Gateway listeners' hostnames by port: which listener a request belongs to.
    /// Empty without Gateway HTTP or HTTPS listeners.
    listener_hosts: ListenerHosts,
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

impl HostPattern {
    /// How specific the hostname is, Gateway API's listener order: none 0, `*.<suffix>` one
    /// more than the suffix's labels, an exact name the most (see `listener_hosts`).
    pub fn rank(&self) -> u8 {
        match self {
            HostPattern::Any => 0,
            HostPattern::Wildcard(suffix) => crate::listener_hosts::suffix_rank(suffix),
            HostPattern::Exact(_) => crate::listener_hosts::EXACT,
        }
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
        let path_len = u32::try_from(path_len).expect("a path shorter than 4 GiB");
        PathRoute {
            kind,
            path_len,
            written,
            listeners: Listeners::ALL,
            via: Via::INGRESS,
            pattern: None,
            when: Box::default(),
            route,
        }
    }

    /// The same path, for the requests that also satisfy `when`, to `route`.
    pub fn with_conditions(&self, when: Box<[RequestMatch]>, route: Arc<Route>) -> PathRoute {
        PathRoute {
            kind: self.kind,
            path_len: self.path_len,
            written: self.written.clone(),
            listeners: self.listeners,
            via: self.via,
            pattern: self.pattern.clone(),
            when,
            route,
        }
    }

    /// The path matched (see `path_len`).
    fn path(&self) -> &str {
        &self.written[..self.path_len as usize]
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

    /// Sort key: the route's own hostname closest to the host first (Gateway API's hostname
    /// precedence; 0 for every Ingress rule), then the most specific path, then the higher
    /// [`rank`](Self::rank) first.
    fn specificity(&self) -> (u8, std::cmp::Reverse<u32>, PathKind, std::cmp::Reverse<u32>) {
        (
            self.via.host_gap,
            std::cmp::Reverse(self.path_len),
            self.kind,
            std::cmp::Reverse(self.rank()),
        )
    }

    /// How the conditions rank at equal path, Gateway API's order: a method match first, then
    /// the most header (and cookie) matches, then the most query parameter matches. Ingress
    /// rules have at most one header or cookie condition, so among them this is the count of
    /// conditions it always was (rules ranking alike keep the order they were added in).
    pub fn rank(&self) -> u32 {
        let mut rank = 0u32;
        for condition in self.when.iter() {
            rank += match condition {
                RequestMatch::Method(_) => 1 << 20,
                RequestMatch::Header { .. } | RequestMatch::Cookie { .. } => 1 << 10,
                RequestMatch::Query { .. } => 1,
            };
        }
        rank
    }

    /// The rule answers on listener `on`, came through a listener at least as specific as
    /// `floor` (the one the request's host selected, see [`ListenerHosts::floor`]; asked
    /// only when the table has Gateway listeners, `ISOLATED`), its path matches and so does
    /// every other condition.
    fn applies<const ISOLATED: bool>(
        &self,
        on: Listeners,
        floor: u8,
        path: &str,
        head: &Parts,
    ) -> bool {
        self.listeners.meets(on)
            && (!ISOLATED || self.via.listener >= floor)
            && self.matches(path)
            && (self.when.is_empty() || RequestMatch::all(&self.when, head))
    }
}

impl HostRoutes {
    /// Adds a rule. Most hosts have one rule: the first gets room for exactly one, where a
    /// plain `push` would reserve four and `finish`'s shrink would leave three as a hole in the
    /// heap (2.4 MB of holes at 10,000 hosts).
    pub fn add(&mut self, path: PathRoute) {
        if self.paths.capacity() == 0 {
            self.paths.reserve_exact(1);
        }
        self.paths.push(path);
    }

    fn find<const ISOLATED: bool>(
        &self,
        on: Listeners,
        floor: u8,
        path: &str,
        head: &Parts,
    ) -> Option<&PathRoute> {
        (self.paths.iter()).find(|p| p.applies::<ISOLATED>(on, floor, path, head))
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
                let (la, lb) = (a.location(), b.location());
                lb.len()
                    .cmp(&la.len())
                    .then_with(|| lb.cmp(la))
                    .then_with(|| b.rank().cmp(&a.rank()))
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
    /// trailing dot are ignored, case does not matter); `path` excludes the query; `head` is
    /// what rules with conditions read.
    pub fn route(&self, host: &str, path: &str, head: &Parts) -> Option<Matched<'_>> {
        self.route_on(Listeners::ALL, host, path, head)
    }

    /// [`route`](Self::route) for a request that came in on listener `on`: rules that answer
    /// on other listeners only are skipped.
    pub fn route_on(
        &self,
        on: Listeners,
        host: &str,
        path: &str,
        head: &Parts,
    ) -> Option<Matched<'_>> {
        let host = normalise_host(host);
        if !self.listener_hosts.on(on) {
            // No Gateway listener on this port (Ingresses only): nothing to isolate, and the
            // plain lookup pays nothing for it.
            return self.route_host::<false>(on, 0, &host, path, head);
        }
        // Gateway listener isolation: rules of listeners less specific than the one the host
        // selected are skipped.
        let floor = self.listener_hosts.floor(on, &host);
        self.route_host::<true>(on, floor, &host, path, head)
    }

    /// [`route_on`](Self::route_on) for a normalised host, the rules of listeners below
    /// `floor` skipped when `ISOLATED`.
    fn route_host<const ISOLATED: bool>(
        &self,
        on: Listeners,
        floor: u8,
        host: &str,
        path: &str,
        head: &Parts,
    ) -> Option<Matched<'_>> {
        let by_host = self.exact.get(host).into_iter().chain(
            host.split_once('.')
                .and_then(|(_, parent)| self.wildcard.get(parent)),
        );
        let mut tls = false;
        for routes in by_host {
            tls |= routes.tls;
            if let Some(found) = routes.find::<ISOLATED>(on, floor, path, head) {
                return Some(routes.matched(found, routes.tls));
            }
            if routes.server {
                let root = routes.root.as_ref().or(self.host_default.as_ref())?;
                return Some(Matched {
                    route: root,
                    tls: routes.tls,
                    pattern: None,
                    app_root: routes.app_root.as_deref(),
                });
            }
        }
        if !self.suffix.is_empty() {
            // Gateway API wildcards two or more labels above the host (one label above was
            // the wildcard map's), the longest suffix first.
            for routes in parents(host).skip(1).filter_map(|p| self.suffix.get(p)) {
                if let Some(found) = routes.find::<ISOLATED>(on, floor, path, head) {
                    return Some(routes.matched(found, routes.tls));
                }
            }
        }
        if let Some(found) = self.any_host.find::<ISOLATED>(on, floor, path, head) {
            return Some(self.any_host.matched(found, tls));
        }
        let conditional = self
            .default_rules
            .iter()
            .find(|rule| RequestMatch::all(&rule.when, head))
            .map(|rule| &rule.route);
        conditional
            .or(self.default_backend.as_ref())
            .or(self.default_server.as_ref())
            .map(|route| Matched {
                route,
                tls,
                pattern: None,
                app_root: None,
            })
    }

    /// A Gateway API wildcard rule, `*.<suffix>`: it matches names one or more labels below
    /// the suffix (an Ingress wildcard only one). The one-label case is the wildcard host's,
    /// beside any Ingress rules for it; deeper names find it by suffix.
    pub fn add_suffix_rule(&mut self, suffix: &Arc<str>, rule: PathRoute) {
        self.suffix
            .entry(suffix.clone())
            .or_default()
            .add(rule.clone());
        self.host_mut(&HostPattern::Wildcard(suffix.clone()))
            .add(rule);
    }

    /// The Gateway listeners' hostnames (listener isolation, misdirected requests).
    pub fn listener_hosts(&self) -> &ListenerHosts {
        &self.listener_hosts
    }

    /// A Gateway listener with hostname `host` (a `Wildcard` is a Gateway suffix here) on the
    /// ports `on`.
    pub fn add_listener_host(&mut self, host: &HostPattern, on: Listeners) {
        match host {
            HostPattern::Exact(name) => self.listener_hosts.add_exact(name, on),
            HostPattern::Wildcard(suffix) => self.listener_hosts.add_suffix(suffix, on),
            HostPattern::Any => self.listener_hosts.add_any(on),
        }
    }

    /// The pre-routing stage (`pre_routing`) of the Gateway listener with hostname `host` (a
    /// `Wildcard` is a Gateway suffix here) on the ports `on`.
    pub fn add_listener_stage(
        &mut self,
        host: &HostPattern,
        on: Listeners,
        stage: Arc<crate::pre_routing::ListenerStage>,
    ) {
        let (name, rank) = match host {
            HostPattern::Exact(name) => (name.clone(), crate::listener_hosts::EXACT),
            HostPattern::Wildcard(suffix) => {
                (suffix.clone(), crate::listener_hosts::suffix_rank(suffix))
            }
            HostPattern::Any => (Arc::from(""), 0),
        };
        self.listener_hosts.add_stage(&name, rank, on, stage);
    }

    /// The pre-routing stage of the listener a request on `on` for `host` (over TLS: with the
    /// handshake's server name `sni`) belongs to. `None` at once when no listener has one (the
    /// plain path's one check), and for a misdirected request (answered 421 by routing).
    /// Over HTTPS the listener is the handshake's: a Host that selects no listener is served
    /// by the server name's (`misdirected` covers a Host that selects another).
    pub fn listener_stage(
        &self,
        on: Listeners,
        sni: Option<&str>,
        host: &str,
    ) -> Option<&Arc<crate::pre_routing::ListenerStage>> {
        if !self.listener_hosts.has_stages() {
            return None;
        }
        let host = normalise_host(host);
        let sni = sni.map(normalise_host);
        let hosts = &self.listener_hosts;
        if hosts.misdirected(on, sni.as_deref(), &host) {
            return None;
        }
        let selected = hosts
            .select(on, &host)
            .or_else(|| hosts.select(on, sni.as_deref()?))?;
        hosts.stage(on, selected)
    }

    /// Gateway API's misdirected request ([`ListenerHosts::misdirected`]), for a request's
    /// Host and a handshake's server name as the client wrote them (port and case do not
    /// matter).
    pub fn misdirected(&self, on: Listeners, sni: Option<&str>, host: &str) -> bool {
        let Some(sni) = sni.filter(|_| self.listener_hosts.on(on)) else {
            return false;
        };
        let (sni, host) = (normalise_host(sni), normalise_host(host));
        self.listener_hosts.misdirected(on, Some(&sni), &host)
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

    /// Whether `name` (a ClientHello's SNI) names a host of the table (exactly, by a wildcard,
    /// or a from-to-www-redirect twin): nginx's servers, each chosen by its own name.
    pub fn serves_host(&self, name: &str) -> bool {
        let name = normalise_host(name);
        let name = name.as_ref();
        self.exact.contains_key(name)
            || name
                .split_once('.')
                .is_some_and(|(_, parent)| self.wildcard.contains_key(parent))
            || self.www_redirects.contains_key(name)
            || (!self.suffix.is_empty() && parents(name).any(|p| self.suffix.contains_key(p)))
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

    /// Room for up to `hosts` exact hosts (the compile knows how many rules it will add), so
    /// the map is not grown by doubling with the outgrown tables left behind.
    pub fn reserve_hosts(&mut self, hosts: usize) {
        self.exact.reserve(hosts);
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

    pub fn default_backend_mut(&mut self) -> Option<&mut Arc<Route>> {
        self.default_backend.as_mut()
    }

    /// Sets where known hosts' unmatched paths go when the host has no root of its own.
    pub fn set_host_default(&mut self, route: Arc<Route>) {
        self.host_default = Some(route);
    }

    pub fn host_default(&self) -> Option<&Arc<Route>> {
        self.host_default.as_ref()
    }

    /// Sets where a request goes that matched no host, no rule and no default backend.
    pub fn set_default_server(&mut self, route: Arc<Route>) {
        self.default_server = Some(route);
    }

    pub fn default_server(&self) -> Option<&Arc<Route>> {
        self.default_server.as_ref()
    }

    /// Rules tried, in order, before the default backend.
    pub fn default_rules(&self) -> &[PathRoute] {
        &self.default_rules
    }

    /// Adds a rule tried before the default backend, after those added before it (its path
    /// is not read: the default backend takes every path).
    pub fn add_default_rule(&mut self, rule: PathRoute) {
        self.default_rules.push(rule);
    }

    /// Every route a request can reach: each rule's, each split's alternatives, the default
    /// backend's. A route shared by several rules comes once per rule.
    pub fn routes(&self) -> impl Iterator<Item = &Arc<Route>> {
        let rules = self
            .exact
            .values()
            .chain(self.wildcard.values())
            .chain(std::iter::once(&self.any_host))
            .flat_map(|host| host.paths.iter())
            .chain(self.default_rules.iter())
            .map(|rule| &rule.route)
            .chain(self.default_backend.iter())
            .chain(self.host_default.iter())
            .chain(self.default_server.iter())
            .chain(
                self.exact
                    .values()
                    .chain(self.wildcard.values())
                    .filter_map(|host| host.root.as_ref()),
            );
        rules.flat_map(|route| {
            let alternatives = route.traffic.as_deref().into_iter();
            std::iter::once(route)
                .chain(alternatives.flat_map(|t| t.alternatives.iter().map(|a| &a.route)))
        })
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
        let hosts = self.exact.values_mut().chain(self.wildcard.values_mut());
        for routes in hosts.chain(self.suffix.values_mut()) {
            routes.sort();
            routes.paths.shrink_to_fit();
        }
        self.any_host.sort();
        self.any_host.paths.shrink_to_fit();
        self.exact.shrink_to_fit();
        self.wildcard.shrink_to_fit();
        self.suffix.shrink_to_fit();
        self.www_redirects.shrink_to_fit();
    }
}

/// The parent names of `name`, nearest first: `a.b.c` gives `b.c`, then `c`.
fn parents(name: &str) -> impl Iterator<Item = &str> {
    fn parent(name: &str) -> Option<&str> {
        name.split_once('.').map(|(_, parent)| parent)
    }
    std::iter::successors(parent(name), |above| parent(above))
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
        Arc::new(Route::bare(service))
    }

    fn get() -> Parts {
        http::Request::new(()).into_parts().0
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
        assert!(table.route("foo.example.com", "/", &get()).is_some());
        assert!(table.route("a.b.example.com", "/", &get()).is_none());
        assert!(table.route("example.com", "/", &get()).is_none());
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
            assert!(table.route(host, "/x", &get()).is_some(), "{host}");
        }
        assert!(table.route("bar.com", "/x", &get()).is_none());
        assert!(table.route("[::1]:80", "/x", &get()).is_none());
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
        let service = |p: &str| {
            table
                .route("x", p, &get())
                .unwrap()
                .route
                .service
                .to_string()
        };
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
            &*table
                .route("foo.com", "/shared/x", &get())
                .unwrap()
                .route
                .service,
            "/shared"
        );
        assert!(table.route("foo.com", "/nothing", &get()).is_none());
        table.set_default_backend(route("default"));
        assert_eq!(
            &*table
                .route("foo.com", "/nothing", &get())
                .unwrap()
                .route
                .service,
            "default"
        );
    }

    fn header_is(value: &str) -> Box<[RequestMatch]> {
        Box::new([RequestMatch::Header {
            name: http::HeaderName::from_static("x-canary"),
            value: crate::matches::ValueMatch::Exact(value.into()),
        }])
    }

    fn with_header(value: &str) -> Parts {
        let request = http::Request::builder().header("x-canary", value);
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn rules_with_conditions_go_first_at_equal_path_in_the_order_written() {
        let mut table = RouteTable::default();
        let host = table.host_mut(&HostPattern::Exact("foo.com".into()));
        let plain = path(PathKind::Prefix, "/");
        host.paths.push(path(PathKind::Prefix, "/api"));
        host.paths
            .push(plain.with_conditions(header_is("always"), route("always")));
        host.paths
            .push(plain.with_conditions(header_is("never"), route("never")));
        host.paths.push(plain);
        host.paths.reverse();
        table.finish();
        let service = |head: &Parts, p: &str| {
            table
                .route("foo.com", p, head)
                .unwrap()
                .route
                .service
                .to_string()
        };
        assert_eq!(service(&with_header("always"), "/x"), "always");
        assert_eq!(service(&with_header("never"), "/x"), "never");
        assert_eq!(service(&with_header("other"), "/x"), "/");
        assert_eq!(service(&get(), "/x"), "/");
        // A longer path wins over a shorter one with conditions.
        assert_eq!(service(&with_header("always"), "/api/v1"), "/api");
        // After the reverse, "never" was written before "always", so it is tried first.
        let host = table.host(&HostPattern::Exact("foo.com".into())).unwrap();
        let order: Vec<&str> = host.paths.iter().map(|p| &*p.route.service).collect();
        assert_eq!(order, ["/api", "never", "always", "/"]);
    }

    #[test]
    fn gateway_wildcards_match_one_or_more_labels_longest_suffix_first() {
        let mut table = RouteTable::default();
        // An Ingress wildcard for one label, a Gateway one for any depth.
        table
            .host_mut(&HostPattern::Wildcard("example.com".into()))
            .add(path(PathKind::Prefix, "/ingress"));
        table.add_suffix_rule(&"example.com".into(), path(PathKind::Prefix, "/gateway"));
        table.add_suffix_rule(&"b.example.com".into(), path(PathKind::Prefix, "/"));
        table.finish();
        let service = |host: &str, p: &str| {
            table
                .route(host, p, &get())
                .map(|m| m.route.service.to_string())
        };
        assert_eq!(
            service("a.example.com", "/ingress").as_deref(),
            Some("/ingress")
        );
        assert_eq!(
            service("a.example.com", "/gateway").as_deref(),
            Some("/gateway")
        );
        assert_eq!(
            service("x.y.example.com", "/gateway").as_deref(),
            Some("/gateway")
        );
        assert_eq!(service("x.y.example.com", "/ingress"), None);
        // The longer suffix first, then the shorter one for what it does not match.
        assert_eq!(
            service("x.y.b.example.com", "/gateway").as_deref(),
            Some("/")
        );
        assert_eq!(service("x.b.example.com", "/other").as_deref(), Some("/"));
        assert_eq!(service("example.com", "/gateway"), None);
        assert!(table.serves_host("x.y.example.com"));
        assert!(!table.serves_host("example.org"));
    }

    #[test]
    fn a_rule_answers_only_on_its_listeners() {
        let mut table = RouteTable::default();
        let host = table.host_mut(&HostPattern::Exact("foo.com".into()));
        let mut secure = path(PathKind::Prefix, "/");
        secure.listeners = Listeners::HTTPS;
        host.add(secure);
        table
            .host_mut(&HostPattern::Any)
            .add(path(PathKind::Prefix, "/"));
        table.finish();
        let on = |listener: Listeners| {
            let found = table.route_on(listener, "foo.com", "/x", &get()).unwrap();
            found.route.service.to_string()
        };
        assert_eq!(
            table
                .host(&HostPattern::Exact("foo.com".into()))
                .unwrap()
                .paths[0]
                .listeners,
            Listeners::HTTPS
        );
        // Plain HTTP skips the HTTPS-only rule (the host is no server: it falls through).
        assert_eq!(on(Listeners::HTTP), "/");
        assert_eq!(on(Listeners::HTTPS), "/");
        assert!(Arc::ptr_eq(
            table
                .route_on(Listeners::HTTPS, "foo.com", "/x", &get())
                .unwrap()
                .route,
            &table
                .host(&HostPattern::Exact("foo.com".into()))
                .unwrap()
                .paths[0]
                .route
        ));
    }

    #[test]
    fn a_method_ranks_before_headers_and_headers_before_query_parameters() {
        let mut table = RouteTable::default();
        let host = table.host_mut(&HostPattern::Exact("foo.com".into()));
        let plain = path(PathKind::Prefix, "/");
        let query = |name: &str| RequestMatch::Query {
            name: name.into(),
            value: crate::matches::ValueMatch::Exact("1".into()),
        };
        host.add(plain.with_conditions(Box::new([query("a"), query("b")]), route("two queries")));
        host.add(plain.with_conditions(header_is("on"), route("header")));
        host.add(plain.with_conditions(
            Box::new([RequestMatch::Method(http::Method::GET)]),
            route("method"),
        ));
        table.finish();
        let host = table.host(&HostPattern::Exact("foo.com".into())).unwrap();
        let order: Vec<&str> = host.paths.iter().map(|p| &*p.route.service).collect();
        assert_eq!(order, ["method", "header", "two queries"]);
    }

    #[test]
    fn the_default_backend_s_rules_are_tried_before_it() {
        let mut table = RouteTable::default();
        table.set_default_backend(route("default"));
        let rule =
            path(PathKind::Prefix, "/").with_conditions(header_is("always"), route("canary"));
        table.add_default_rule(rule);
        let service = |head: &Parts| {
            table
                .route("x", "/any", head)
                .unwrap()
                .route
                .service
                .to_string()
        };
        assert_eq!(service(&with_header("always")), "canary");
        assert_eq!(service(&get()), "default");
        let names: Vec<&str> = table.routes().map(|r| &*r.service).collect();
        assert_eq!(names, ["canary", "default"]);
    }

    #[test]
    fn a_split_draws_once_and_follows_the_weights() {
        let split = |weight: u32, total: u32| {
            Arc::new(Route {
                traffic: Some(Box::new(Traffic {
                    total,
                    alternatives: Box::new([Weighted {
                        weight,
                        route: route("canary"),
                    }]),
                    alternative_name: None,
                    primary: None,
                })),
                ..Arc::try_unwrap(route("main")).unwrap()
            })
        };
        let picked = |route: &Arc<Route>, drawn: u32| route.pick(|_| drawn).service.to_string();
        let main = split(10, 100);
        assert_eq!(picked(&main, 1), "canary");
        assert_eq!(picked(&main, 10), "canary");
        assert_eq!(picked(&main, 11), "main");
        assert_eq!(picked(&main, 100), "main");
        // Weight 0: never, and no draw at all.
        let never = split(0, 100);
        assert_eq!(
            never.pick(|_| unreachable!("no draw")).service.to_string(),
            "main"
        );
        // A weight above the total takes everything.
        assert_eq!(picked(&split(150, 100), 100), "canary");
        // No split: no draw.
        assert_eq!(
            route("plain")
                .pick(|_| unreachable!("no draw"))
                .service
                .to_string(),
            "plain"
        );
        let names: Vec<String> = {
            let mut table = RouteTable::default();
            table.set_default_backend(main.clone());
            table.routes().map(|r| r.service.to_string()).collect()
        };
        assert_eq!(names, ["main", "canary"]);
    }

    /// ingress-nginx's `route_to_alternative_balancer` (balancer.lua): a request affinitized to
    /// the primary stays there before any canary rule (the trap: `canary-by-header: always`
    /// with a main-backend cookie is not sent to the canary); one affinitized to the canary
    /// goes there (even from a `never` rule); only otherwise do the rules and weights decide.
    #[test]
    fn an_affinity_cookie_decides_before_the_canary_rules_and_weights() {
        let main = route("main");
        let canary = Arc::new(Route {
            traffic: Some(Box::new(Traffic {
                alternative_name: Some("default-canary-80".into()),
                primary: Some(main.clone()),
                ..Traffic::default()
            })),
            ..Arc::try_unwrap(route("canary")).unwrap()
        });
        // The main rule's route (weight 0: what a `never` rule and the weightless main use).
        let split = Arc::new(Route {
            traffic: Some(Box::new(Traffic {
                total: 100,
                alternatives: Box::new([Weighted {
                    weight: 0,
                    route: canary.clone(),
                }]),
                ..Traffic::default()
            })),
            ..Arc::try_unwrap(route("main")).unwrap()
        });
        let side = |matched: &Arc<Route>, cookie_for: Option<&str>| {
            matched
                .affinity_side(|r| Some(&*r.service) == cookie_for)
                .map(|r| r.service.to_string())
        };
        // Sent to the canary by its header or cookie rule:
        assert_eq!(side(&canary, Some("main")).as_deref(), Some("main"));
        assert_eq!(side(&canary, Some("canary")).as_deref(), Some("canary"));
        assert_eq!(side(&canary, None), None);
        // On the main rule (no canary rule matched, or `never`):
        assert_eq!(side(&split, Some("main")).as_deref(), Some("main"));
        assert_eq!(side(&split, Some("canary")).as_deref(), Some("canary"));
        assert_eq!(side(&split, None), None);
        // A route outside any split has no side.
        assert_eq!(side(&main, Some("main")), None);
    }
}
