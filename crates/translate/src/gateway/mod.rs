//! Gateway API: GatewayClasses of Sluice's controller, their Gateways' listeners and the
//! HTTPRoutes attached to them, compiled into the same rule model as Ingresses.
//!
//! ```text
//!  GatewayClass (controllerName sluice.dev/gateway-controller)
//!    └▶ Gateway ─▶ listeners: HTTP :80 ─▶ Listeners::HTTP   (served on --http-listen)
//!                             HTTPS :443 ─▶ Listeners::HTTPS (--https-listen; certificateRefs
//!                                           ─▶ Certificates, ReferenceGrant across namespaces)
//!  HTTPRoute ─parentRefs (name, sectionName, port)─▶ listeners that allow it
//!            ─hostnames ∩ listener hostname─▶ hosts (exact, *.suffix of any depth, any)
//!            ─rules × matches─▶ PathRoute { path, when: [method, headers, query], listeners }
//!                      filters ─▶ RoutePolicy blocks (header edits, upstream Host, redirect)
//!                      backendRefs ─▶ Route, weighted split as Traffic (backends.rs resolves)
//! ```
//! Routes are read oldest first, then by namespace/name, rules and matches in order: the
//! RouteTable's stable sort then gives Gateway API's precedence (see `model::routes`).
//! Nothing here is reached in an Ingress-only configuration beyond three empty-map checks.

pub mod objects;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use http::{HeaderName, HeaderValue, Method};
use model::gateway_redirect::{GatewayRedirect, PathReplace};
use model::matches::{RequestMatch, ValueMatch};
use model::mirror::{Mirror, MirrorUri};
use model::policy::{HeaderAction, HeaderEdit, RoutePolicy, SslRedirect, UpstreamProtocol};
use model::routes::Weighted;
use model::routes::{HostPattern, Listeners, PathKind, PathRoute, Route, RouteSite, Traffic};
use model::{Backend, Kind, NamespacedName, ObjectRef, Severity};
use regex::Regex;

use crate::compiler::Compiler;
use objects::{HeaderModifier, HttpBackendRef, HttpRoute, HttpRouteMatch, ListenerTls};

/// The `controllerName` of the GatewayClasses Sluice serves.
pub const GATEWAY_CONTROLLER: &str = "sluice.dev/gateway-controller";
/// The API group of Gateway API's kinds (the default group of references to them).
pub const GROUP: &str = "gateway.networking.k8s.io";

/// A hostname a route answers for on Sluice's table.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum GatewayHost {
    Exact(String),
    /// `*.<suffix>`: one or more labels below the suffix (Gateway API's wildcard).
    Suffix(String),
    /// No hostname anywhere: every host.
    Any,
}

impl GatewayHost {
    fn parse(text: Option<&str>) -> Result<GatewayHost, &'static str> {
        Ok(match HostPattern::parse(text)? {
            HostPattern::Exact(h) => GatewayHost::Exact(h.to_string()),
            HostPattern::Wildcard(s) => GatewayHost::Suffix(s.to_string()),
            HostPattern::Any => GatewayHost::Any,
        })
    }

    /// What a listener's hostname and a route's have in common (Gateway API's intersection:
    /// the more specific of the two when one covers the other).
    fn intersect(&self, other: &GatewayHost) -> Option<GatewayHost> {
        use GatewayHost::*;
        match (self, other) {
            (Any, h) | (h, Any) => Some(h.clone()),
            (Exact(a), Exact(b)) => (a == b).then(|| Exact(a.clone())),
            (Suffix(s), Exact(h)) | (Exact(h), Suffix(s)) => covers(s, h).then(|| Exact(h.clone())),
            (Suffix(a), Suffix(b)) if a == b || covers(a, b) => Some(Suffix(b.clone())),
            (Suffix(a), Suffix(b)) => covers(b, a).then(|| Suffix(a.clone())),
        }
    }
}

/// `*.<suffix>` matches `name`: one or more labels in front of the suffix.
fn covers(suffix: &str, name: &str) -> bool {
    name.strip_suffix(suffix)
        .and_then(|head| head.strip_suffix('.'))
        .is_some_and(|labels| !labels.is_empty())
}

/// Which namespaces' routes a listener admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AllowedFrom {
    Same,
    All,
    Nobody,
}

/// One listener Sluice serves.
struct ListenerSlot {
    gateway: NamespacedName,
    name: String,
    port: i32,
    on: Listeners,
    host: GatewayHost,
    from: AllowedFrom,
    http_routes: bool,
}

fn gateway_ref(key: &NamespacedName) -> ObjectRef {
    ObjectRef::new(Kind::Gateway, &*key.namespace, &*key.name)
}

fn route_ref(key: &NamespacedName) -> ObjectRef {
    ObjectRef::new(Kind::HTTPRoute, &*key.namespace, &*key.name)
}

impl Compiler<'_> {
    /// Every Gateway API object of Sluice's classes, into the route table and certificates.
    /// Runs after the Ingresses' passes, so their host-wide annotations stay on their routes.
    pub(crate) fn gateway_api(&mut self) {
        let store = self.store;
        let mut classes = BTreeSet::new();
        for class in store.gateway_classes() {
            if class.spec.controller_name != GATEWAY_CONTROLLER {
                continue;
            }
            let name = class.metadata.name.as_deref().unwrap_or_default();
            classes.insert(name.to_owned());
            let object = ObjectRef::new(Kind::GatewayClass, "", name);
            self.unsupported_fields(&object, &class.unsupported);
        }
        if classes.is_empty() {
            return;
        }
        for (key, grant) in store.reference_grants_by_name() {
            let object = ObjectRef::new(Kind::ReferenceGrant, &*key.namespace, &*key.name);
            self.unsupported_fields(&object, &grant.unsupported);
        }
        let mut listeners = Vec::new();
        let mut ours = BTreeSet::new();
        for (key, gateway) in store.gateways_by_name() {
            if !classes.contains(&gateway.spec.gateway_class_name) {
                continue;
            }
            ours.insert(key.clone());
            let object = gateway_ref(key);
            self.unsupported_fields(&object, &gateway.unsupported);
            for (i, listener) in gateway.spec.listeners.iter().enumerate() {
                if let Some(slot) = self.listener(key, i, listener) {
                    listeners.push(slot);
                }
            }
        }
        let mut routes: Vec<(&NamespacedName, &HttpRoute)> = store.http_routes_by_name().collect();
        // Gateway API's tie-break: the oldest route, then namespace/name (objects from files
        // have no creation time and count as oldest).
        routes.sort_by(|(a_key, a), (b_key, b)| {
            (a.metadata.creation_timestamp.as_ref())
                .cmp(&b.metadata.creation_timestamp.as_ref())
                .then_with(|| a_key.cmp(b_key))
        });
        // Gateway routes start from the ConfigMap's policy without ingress-nginx's ssl-redirect:
        // Gateway API has none (an HTTP listener serves plain HTTP; a redirect is a filter).
        let ingress_default = self.default_policy.clone();
        self.default_policy = Arc::new(RoutePolicy {
            ssl_redirect: SslRedirect {
                enabled: false,
                force: false,
                ..ingress_default.ssl_redirect
            },
            ..(*ingress_default).clone()
        });
        for (key, route) in routes {
            self.http_route(key, route, &listeners, &ours);
        }
        self.default_policy = ingress_default;
    }

    fn unsupported_fields(&mut self, object: &ObjectRef, fields: &[String]) {
        for field in fields {
            self.diagnose_with(
                Severity::Unsupported,
                object.clone(),
                format!("{field}: not supported by Sluice (yet); ignored"),
            );
        }
    }

    /// One listener of one of our Gateways, or `None` (with a diagnostic) when Sluice does not
    /// serve it.
    fn listener(
        &mut self,
        gateway: &NamespacedName,
        i: usize,
        listener: &objects::Listener,
    ) -> Option<ListenerSlot> {
        let object = gateway_ref(gateway);
        let field = format!("spec.listeners[{i}]");
        let on = match (listener.protocol.as_str(), listener.port) {
            ("HTTP", 80) => Listeners::HTTP,
            ("HTTPS", 443) => Listeners::HTTPS,
            (protocol, port) => {
                self.diagnose_with(
                    Severity::Unsupported,
                    object,
                    format!("{field}: {protocol} on port {port}: Sluice serves a Gateway's HTTP listener on port 80 (--http-listen) and HTTPS listener on port 443 (--https-listen), no other yet; listener ignored"),
                );
                return None;
            }
        };
        let host = match GatewayHost::parse(listener.hostname.as_deref()) {
            Ok(host) => host,
            Err(why) => {
                self.diagnose(
                    object,
                    format!(
                        "{field}.hostname {:?}: {why}; listener ignored",
                        listener.hostname.as_deref().unwrap_or("")
                    ),
                );
                return None;
            }
        };
        if on == Listeners::HTTP && listener.tls.is_some() {
            self.diagnose(
                object.clone(),
                format!("{field}.tls: an HTTP listener has no TLS; ignored"),
            );
        }
        if on == Listeners::HTTPS
            && !self.listener_tls(gateway, &field, listener.tls.as_ref(), &host)
        {
            return None;
        }
        let allowed = listener.allowed_routes.as_ref();
        let from = allowed
            .and_then(|a| a.namespaces.as_ref())
            .and_then(|n| n.from.as_deref())
            .unwrap_or("Same");
        let from = match from {
            "Same" => AllowedFrom::Same,
            "All" => AllowedFrom::All,
            "Selector" => {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("{field}.allowedRoutes.namespaces.from Selector: not supported yet (standalone Sluice keeps no Namespace objects to select); the listener admits no routes"),
                );
                AllowedFrom::Nobody
            }
            other => {
                self.diagnose(
                    object.clone(),
                    format!("{field}.allowedRoutes.namespaces.from {other:?}: must be Same, All or Selector; the listener admits no routes"),
                );
                AllowedFrom::Nobody
            }
        };
        let http_routes = match allowed.and_then(|a| a.kinds.as_deref()) {
            None | Some([]) => true,
            Some(kinds) => {
                let mut http = false;
                for (k, kind) in kinds.iter().enumerate() {
                    let group = kind.group.as_deref().unwrap_or(GROUP);
                    if group == GROUP && kind.kind == "HTTPRoute" {
                        http = true;
                    } else {
                        self.diagnose_with(
                            Severity::Unsupported,
                            object.clone(),
                            format!("{field}.allowedRoutes.kinds[{k}]: {group}/{}: Sluice serves HTTPRoutes only, yet; ignored", kind.kind),
                        );
                    }
                }
                http
            }
        };
        Some(ListenerSlot {
            gateway: gateway.clone(),
            name: listener.name.clone(),
            port: listener.port,
            on,
            host,
            from,
            http_routes,
        })
    }

    /// An HTTPS listener's certificate: the first usable `certificateRefs` Secret, served for
    /// the listener's hostname. `false` (with diagnostics): the listener is not served.
    fn listener_tls(
        &mut self,
        gateway: &NamespacedName,
        field: &str,
        tls: Option<&ListenerTls>,
        host: &GatewayHost,
    ) -> bool {
        let object = gateway_ref(gateway);
        let Some(tls) = tls else {
            self.diagnose(object, format!("{field}.tls: required on an HTTPS listener (mode Terminate with certificateRefs); listener ignored"));
            return false;
        };
        let mode = tls.mode.as_deref().unwrap_or("Terminate");
        if mode != "Terminate" {
            self.diagnose_with(
                Severity::Unsupported,
                object,
                format!(
                    "{field}.tls.mode {mode}: Sluice terminates TLS only, yet; listener ignored"
                ),
            );
            return false;
        }
        for (c, reference) in tls.certificate_refs.iter().enumerate() {
            let at = format!("{field}.tls.certificateRefs[{c}]");
            let group = reference.group.as_deref().unwrap_or("");
            let kind = reference.kind.as_deref().unwrap_or("Secret");
            if !group.is_empty() || kind != "Secret" {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("{at}: {group}/{kind}: certificates come from Secrets only; ignored"),
                );
                continue;
            }
            let namespace = reference.namespace.as_deref().unwrap_or(&gateway.namespace);
            if namespace != &*gateway.namespace
                && !self.granted(
                    ("Gateway", &gateway.namespace),
                    ("Secret", namespace, &reference.name),
                )
            {
                self.diagnose(
                    object.clone(),
                    format!("{at}: Secret {namespace}/{} is in another namespace and no ReferenceGrant there allows it; ignored", reference.name),
                );
                continue;
            }
            let secret = NamespacedName::new(namespace, reference.name.as_str());
            match self.load_secret(&secret) {
                Ok((key, info)) => {
                    let pattern = match host {
                        GatewayHost::Exact(h) => HostPattern::Exact(h.as_str().into()),
                        // The certificate store's wildcards are one label deep (TLS's own
                        // rule for `*.` names): deeper names get the default certificate.
                        GatewayHost::Suffix(s) => HostPattern::Wildcard(s.as_str().into()),
                        GatewayHost::Any => HostPattern::Any,
                    };
                    // An Ingress's certificate for the name (or --default-tls-secret for a
                    // listener without hostname) came first and stays, as its rules win ties.
                    if let Some(kept) = self.out.certificates.sources().get(&pattern.to_string()) {
                        self.diagnose_with(
                            Severity::Notice,
                            object,
                            format!("{at}: {pattern} already has the certificate of Secret {kept} (an Ingress's or --default-tls-secret), which is served"),
                        );
                        return true;
                    }
                    if tls.certificate_refs.len() > c + 1 {
                        self.diagnose_with(
                            Severity::Unsupported,
                            object.clone(),
                            format!("{field}.tls.certificateRefs: Sluice serves one certificate per listener, the first usable ({secret}); the others are ignored"),
                        );
                    }
                    self.out
                        .certificates
                        .insert(&pattern, key, secret.to_string(), info);
                    return true;
                }
                Err(why) => self.diagnose_with(
                    why.severity(),
                    object.clone(),
                    format!("{at}: Secret {secret}: {why}"),
                ),
            }
        }
        self.diagnose(
            object,
            format!("{field}.tls.certificateRefs: no usable certificate; listener ignored"),
        );
        false
    }

    /// A ReferenceGrant in the target's namespace lets `from` (a kind of Gateway API's group
    /// in a namespace) refer to `to` (a core kind, its namespace and name).
    fn granted(
        &self,
        (from_kind, from_namespace): (&str, &str),
        (to_kind, to_namespace, to_name): (&str, &str, &str),
    ) -> bool {
        self.store.reference_grants_by_name().any(|(key, grant)| {
            &*key.namespace == to_namespace
                && grant.spec.from.iter().any(|f| {
                    f.group == GROUP && f.kind == from_kind && f.namespace == from_namespace
                })
                && grant.spec.to.iter().any(|t| {
                    t.group.is_empty()
                        && t.kind == to_kind
                        && t.name.as_deref().is_none_or(|name| name == to_name)
                })
        })
    }

    /// One HTTPRoute: the listeners it attaches to, the hosts it answers for there, then its
    /// rules. A route naming none of our Gateways is another controller's: not a word.
    fn http_route(
        &mut self,
        key: &NamespacedName,
        route: &HttpRoute,
        listeners: &[ListenerSlot],
        ours: &BTreeSet<NamespacedName>,
    ) {
        let spec = &route.spec;
        let parent_of = |parent: &objects::ParentReference| {
            let group = parent.group.as_deref().unwrap_or(GROUP);
            let kind = parent.kind.as_deref().unwrap_or("Gateway");
            let namespace = parent.namespace.as_deref().unwrap_or(&key.namespace);
            (group == GROUP && kind == "Gateway")
                .then(|| NamespacedName::new(namespace, parent.name.as_str()))
                .filter(|gateway| ours.contains(gateway))
        };
        if !spec.parent_refs.iter().any(|p| parent_of(p).is_some()) {
            return;
        }
        let object = route_ref(key);
        self.unsupported_fields(&object, &route.unsupported);
        let mut route_hosts = Vec::new();
        for (h, hostname) in spec.hostnames.iter().enumerate() {
            match GatewayHost::parse(Some(hostname)) {
                Ok(GatewayHost::Any) | Err(_) => self.diagnose(
                    object.clone(),
                    format!("spec.hostnames[{h}] {hostname:?}: must be a lower-case DNS name, optionally starting with `*.`; ignored"),
                ),
                Ok(host) => route_hosts.push(host),
            }
        }
        let mut hosts: BTreeMap<GatewayHost, Listeners> = BTreeMap::new();
        for (p, parent) in spec.parent_refs.iter().enumerate() {
            let field = format!("spec.parentRefs[{p}]");
            let Some(gateway) = parent_of(parent) else {
                continue;
            };
            let (mut named, mut allowed, mut by_host) = (false, false, false);
            for slot in listeners.iter().filter(|l| l.gateway == gateway) {
                if parent
                    .section_name
                    .as_ref()
                    .is_some_and(|s| *s != slot.name)
                    || parent.port.is_some_and(|port| port != slot.port)
                {
                    continue;
                }
                named = true;
                let admits = match slot.from {
                    AllowedFrom::Same => slot.gateway.namespace == key.namespace,
                    AllowedFrom::All => true,
                    AllowedFrom::Nobody => false,
                };
                if !admits || !slot.http_routes {
                    continue;
                }
                allowed = true;
                let found: Vec<GatewayHost> = if spec.hostnames.is_empty() {
                    vec![slot.host.clone()]
                } else {
                    route_hosts
                        .iter()
                        .filter_map(|h| slot.host.intersect(h))
                        .collect()
                };
                for host in found {
                    by_host = true;
                    let on = hosts.entry(host).or_insert(Listeners::NONE);
                    *on = on.union(slot.on);
                }
            }
            let reason = if !named {
                let section = parent
                    .section_name
                    .as_ref()
                    .map(|s| format!(" named {s}"))
                    .unwrap_or_default();
                let port = parent
                    .port
                    .map(|p| format!(" on port {p}"))
                    .unwrap_or_default();
                format!("Gateway {gateway} has no listener{section}{port} that Sluice serves (NoMatchingParent)")
            } else if !allowed {
                format!("the listeners of Gateway {gateway} do not allow this route (allowedRoutes: its namespace or kind; NotAllowedByListeners)")
            } else if !by_host {
                format!("none of the route's hostnames matches a listener hostname of Gateway {gateway} (NoMatchingListenerHostname)")
            } else {
                continue;
            };
            self.diagnose(
                object.clone(),
                format!("{field}: {reason}; not attached there"),
            );
        }
        if hosts.is_empty() {
            return;
        }
        let site_host = match hosts.keys().next() {
            Some(GatewayHost::Exact(h)) => self.share(h),
            Some(GatewayHost::Suffix(s)) => self.share(&format!("*.{s}")),
            _ => self.share(""),
        };
        for (r, rule) in spec.rules.iter().enumerate() {
            self.http_route_rule(key, &object, r, rule, &hosts, &site_host);
        }
    }

    fn http_route_rule(
        &mut self,
        key: &NamespacedName,
        object: &ObjectRef,
        r: usize,
        rule: &objects::HttpRouteRule,
        hosts: &BTreeMap<GatewayHost, Listeners>,
        site_host: &Arc<str>,
    ) {
        let field = format!("spec.rules[{r}]");
        let default_match = [HttpRouteMatch::default()];
        let matches = if rule.matches.is_empty() {
            &default_match[..]
        } else {
            &rule.matches[..]
        };
        let first_path = matches[0]
            .path
            .as_ref()
            .and_then(|p| p.value.as_deref())
            .unwrap_or("/");
        let site = RouteSite {
            host: site_host.clone(),
            path: self.share(first_path),
            service_port: self.share(""),
        };
        // A filter that replaces the matched prefix needs each match's own prefix: then one
        // route per match, else one for the rule.
        let per_match = rule.filters.iter().any(replaces_prefix);
        let shared = (!per_match).then(|| {
            let policy = self.gateway_filters((key, object), &field, &rule.filters, None);
            let refs = &rule.backend_refs;
            self.gateway_backends(key, object, &field, refs, policy, site.clone())
        });
        for (m, spec_match) in matches.iter().enumerate() {
            let at = format!("{field}.matches[{m}]");
            let route = match &shared {
                Some(route) => route.clone(),
                None => {
                    let path = spec_match.path.as_ref();
                    let prefix = match path.and_then(|p| p.type_.as_deref()) {
                        None | Some("PathPrefix") => {
                            path.and_then(|p| p.value.as_deref()).or(Some("/"))
                        }
                        Some(_) => None,
                    };
                    let filters = &rule.filters;
                    let policy = self.gateway_filters((key, object), &field, filters, prefix);
                    let refs = &rule.backend_refs;
                    self.gateway_backends(key, object, &field, refs, policy, site.clone())
                }
            };
            let Some(mut path_rule) = self.gateway_match(object, &at, spec_match, route) else {
                continue;
            };
            if path_rule.kind == PathKind::Prefix && path_rule.route.policy.rewrite.is_some() {
                // URLRewrite's ReplacePrefixMatch: the rewrite takes what follows the prefix
                // as capture 1 of this pattern, which matches exactly what the prefix does.
                let prefix = path_rule.written.trim_end_matches('/');
                let pattern = format!("^{}(/.*)?$", regex::escape(prefix));
                path_rule.pattern = Some(Regex::new(&pattern).expect("an escaped prefix"));
            }
            for (host, on) in hosts {
                let mut rule = path_rule.clone();
                rule.listeners = *on;
                match host {
                    GatewayHost::Exact(h) => {
                        let h = self.share(h);
                        self.out.routes.host_mut(&HostPattern::Exact(h)).add(rule);
                    }
                    GatewayHost::Suffix(s) => {
                        let s = self.share(s);
                        self.out.routes.add_suffix_rule(&s, rule);
                    }
                    GatewayHost::Any => self.out.routes.host_mut(&HostPattern::Any).add(rule),
                }
            }
        }
    }

    /// One match: its path, and its method, headers and query parameters as conditions.
    /// `None` (with a diagnostic) when it is invalid: the match is left out.
    fn gateway_match(
        &mut self,
        object: &ObjectRef,
        field: &str,
        spec: &HttpRouteMatch,
        route: Arc<Route>,
    ) -> Option<PathRoute> {
        let path = spec.path.as_ref();
        let path_type = path
            .and_then(|p| p.type_.as_deref())
            .unwrap_or("PathPrefix");
        let value = path.and_then(|p| p.value.as_deref()).unwrap_or("/");
        let (kind, pattern) = match path_type {
            "Exact" | "PathPrefix" if !value.starts_with('/') => {
                self.diagnose(
                    object.clone(),
                    format!("{field}.path.value {value:?}: must start with '/'; match ignored"),
                );
                return None;
            }
            "Exact" => (PathKind::Exact, None),
            "PathPrefix" => (PathKind::Prefix, None),
            "RegularExpression" => (
                PathKind::Regex,
                Some(self.gateway_regex(object, &format!("{field}.path.value"), value)?),
            ),
            other => {
                self.diagnose(object.clone(), format!("{field}.path.type {other:?}: must be Exact, PathPrefix or RegularExpression; match ignored"));
                return None;
            }
        };
        let mut when = Vec::new();
        if let Some(method) = &spec.method {
            match Method::from_bytes(method.as_bytes()) {
                Ok(method) => when.push(RequestMatch::Method(method)),
                Err(_) => {
                    self.diagnose(
                        object.clone(),
                        format!("{field}.method {method:?}: not an HTTP method; match ignored"),
                    );
                    return None;
                }
            }
        }
        // Gateway API: of several matches on one header name (in any case) or query
        // parameter name, only the first counts.
        let mut seen = HashSet::new();
        for (h, header) in spec.headers.iter().enumerate() {
            let at = format!("{field}.headers[{h}]");
            let Ok(name) = HeaderName::from_bytes(header.name.as_bytes()) else {
                self.diagnose(
                    object.clone(),
                    format!(
                        "{at}.name {:?}: not a header name; match ignored",
                        header.name
                    ),
                );
                return None;
            };
            if seen.insert(name.clone()) {
                let value = self.value_match(object, &at, header)?;
                when.push(RequestMatch::Header { name, value });
            }
        }
        let mut seen = HashSet::new();
        for (q, query) in spec.query_params.iter().enumerate() {
            let at = format!("{field}.queryParams[{q}]");
            if seen.insert(query.name.as_str()) {
                let value = self.value_match(object, &at, query)?;
                when.push(RequestMatch::Query {
                    name: query.name.as_str().into(),
                    value,
                });
            }
        }
        let mut rule = PathRoute::new(kind, self.share(value), route);
        rule.pattern = pattern;
        rule.when = when.into_boxed_slice();
        Some(rule)
    }

    fn value_match(
        &mut self,
        object: &ObjectRef,
        field: &str,
        spec: &objects::ValueMatchSpec,
    ) -> Option<ValueMatch> {
        match spec.type_.as_deref().unwrap_or("Exact") {
            "Exact" => Some(ValueMatch::Exact(spec.value.as_str().into())),
            "RegularExpression" => self
                .gateway_regex(object, &format!("{field}.value"), &spec.value)
                .map(ValueMatch::Regex),
            other => {
                self.diagnose(
                    object.clone(),
                    format!(
                        "{field}.type {other:?}: must be Exact or RegularExpression; match ignored"
                    ),
                );
                None
            }
        }
    }

    /// A `RegularExpression` value, matched against the whole path or value (RE2 syntax, which
    /// the regex crate shares).
    fn gateway_regex(&mut self, object: &ObjectRef, field: &str, value: &str) -> Option<Regex> {
        match Regex::new(&format!("^(?:{value})$")) {
            Ok(regex) => Some(regex),
            Err(error) => {
                let why = error.to_string();
                let why = why.lines().last().unwrap_or("invalid").trim();
                self.diagnose(
                    object.clone(),
                    format!(
                        "{field} {value:?}: not a valid regular expression ({why}); match ignored"
                    ),
                );
                None
            }
        }
    }

    /// A rule's filters, as blocks of its policy. A filter Sluice does not implement refuses
    /// the rule (503, with a diagnostic): serving it without would be another behaviour.
    fn gateway_filters(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        field: &str,
        filters: &[objects::HttpRouteFilter],
        prefix: Option<&str>,
    ) -> Arc<RoutePolicy> {
        if filters.is_empty() {
            return self.default_policy.clone();
        }
        let mut policy = (*self.default_policy).clone();
        for (f, filter) in filters.iter().enumerate() {
            let at = format!("{field}.filters[{f}]");
            let refused = match filter.type_.as_str() {
                "RequestHeaderModifier" => header_edits(
                    &mut policy.request_headers,
                    filter.request_header_modifier.as_ref(),
                )
                .map_err(|why| format!("{at}.requestHeaderModifier: {why}")),
                "ResponseHeaderModifier" => header_edits(
                    &mut policy.response_headers,
                    filter.response_header_modifier.as_ref(),
                )
                .map_err(|why| format!("{at}.responseHeaderModifier: {why}")),
                "URLRewrite" => match &filter.url_rewrite {
                    Some(rewrite) => url_rewrite(&mut policy, rewrite, prefix)
                        .map_err(|why| format!("{at}.urlRewrite{why}")),
                    None => Err(format!("{at}.urlRewrite: missing for type URLRewrite")),
                },
                "RequestRedirect" => match &filter.request_redirect {
                    Some(redirect) => gateway_redirect(redirect, prefix)
                        .map(|redirect| policy.gateway_redirect = Some(Arc::new(redirect)))
                        .map_err(|why| format!("{at}.requestRedirect{why}")),
                    None => Err(format!(
                        "{at}.requestRedirect: missing for type RequestRedirect"
                    )),
                },
                "RequestMirror" => match &filter.request_mirror {
                    Some(_) if policy.mirror.is_some() => {
                        Err(format!("{at}: a second RequestMirror is not supported yet"))
                    }
                    Some(mirror) => {
                        let field = format!("{at}.requestMirror");
                        policy.mirror = self.gateway_mirror((key, object), &field, mirror);
                        Ok(())
                    }
                    None => Err(format!(
                        "{at}.requestMirror: missing for type RequestMirror"
                    )),
                },
                other => Err(format!("{at}.type {other}: not supported yet")),
            };
            if let Err(why) = refused {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("{why}; the rule answers 503"),
                );
                policy.denied.get_or_insert(why);
            }
        }
        if policy == *self.default_policy {
            self.default_policy.clone()
        } else {
            Arc::new(policy)
        }
    }

    /// A rule's backendRefs: one route, or a weighted split of several. A reference that
    /// cannot be used keeps its share, which answers 500, as Gateway API says.
    fn gateway_backends(
        &mut self,
        key: &NamespacedName,
        object: &ObjectRef,
        field: &str,
        refs: &[HttpBackendRef],
        policy: Arc<RoutePolicy>,
        site: RouteSite,
    ) -> Arc<Route> {
        let mut shares: Vec<(u32, Route)> = Vec::new();
        for (b, reference) in refs.iter().enumerate() {
            let at = format!("{field}.backendRefs[{b}]");
            let weight = match reference.weight.unwrap_or(1) {
                weight @ 0..=1_000_000 => weight as u32,
                weight => {
                    self.diagnose(
                        object.clone(),
                        format!("{at}.weight {weight}: must be 0 to 1000000; taken as 0"),
                    );
                    0
                }
            };
            if weight == 0 {
                continue;
            }
            let (service, backend, port) =
                self.gateway_backend(key, object, &at, reference, "its share answers 500");
            // An unusable reference never has endpoints; its share answers 500.
            let policy = match backend.key() {
                Some(_) => self.app_protocol(object, &at, &backend, &policy),
                None => invalid_backend(&policy),
            };
            shares.push((
                weight,
                Route {
                    ingress: key.clone(),
                    service,
                    backend,
                    policy,
                    site: RouteSite {
                        service_port: port,
                        ..site.clone()
                    },
                    traffic: None,
                    not_found: false,
                },
            ));
        }
        if shares.is_empty() {
            // No backendRefs, or every weight 0: Gateway API's 500 (unless a filter answers
            // first, as a redirect does).
            return Arc::new(Route {
                ingress: key.clone(),
                service: self.share(""),
                backend: Arc::new(Backend::unresolved()),
                policy: if policy.gateway_redirect.is_some() || policy.denied.is_some() {
                    policy
                } else {
                    invalid_backend(&policy)
                },
                site,
                traffic: None,
                not_found: false,
            });
        }
        let total = shares.iter().map(|(w, _)| *w).sum();
        let mut shares = shares.into_iter();
        let (_, mut first) = shares.next().expect("one share at least");
        let alternatives: Box<[Weighted]> = shares
            .map(|(weight, route)| Weighted {
                weight,
                route: Arc::new(route),
            })
            .collect();
        if !alternatives.is_empty() {
            first.traffic = Some(Box::new(Traffic {
                total,
                alternatives,
                alternative_name: None,
                primary: None,
            }));
        }
        Arc::new(first)
    }

    /// A `RequestMirror`: a copy of each request to the backendRef's Service port, its
    /// answer dropped (the mirror block Ingress's `mirror-target` fills). `None` after a
    /// diagnostic when the reference cannot be used: the rule serves without a mirror.
    fn gateway_mirror(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        field: &str,
        mirror: &objects::RequestMirror,
    ) -> Option<Arc<Mirror>> {
        if mirror.percent.is_some() || mirror.fraction.is_some() {
            self.diagnose_with(
                Severity::Unsupported,
                object.clone(),
                format!("{field}: percent and fraction are not supported yet; every request is mirrored"),
            );
        }
        let at = format!("{field}.backendRef");
        let reference = &mirror.backend_ref;
        let (_, backend, port) = self.gateway_backend(key, object, &at, reference, "not mirrored");
        let upstream_name: Arc<str> = backend.key()?.to_string().into();
        let namespace = reference.namespace.as_deref().unwrap_or(&key.namespace);
        let host = format!("{}.{namespace}.svc", reference.name);
        let request_uri = model::access_log::parse_request_key("$request_uri").ok()?;
        Some(Arc::new(Mirror {
            target: format!("backendRef {namespace}/{}:{port}", reference.name),
            host: HeaderValue::from_str(&host).ok()?,
            uri: MirrorUri::Template(request_uri.into()),
            request_body: true,
            upstream_name,
            backend,
            tls: None,
        }))
    }

    /// The policy for a share to `backend`, as its Service port's `appProtocol` asks:
    /// `kubernetes.io/h2c` is HTTP/2 in cleartext; TLS to a backend is BackendTLSPolicy's,
    /// not supported yet (a diagnostic; HTTP/1.1 in cleartext is spoken).
    fn app_protocol(
        &mut self,
        object: &ObjectRef,
        field: &str,
        backend: &Backend,
        policy: &Arc<RoutePolicy>,
    ) -> Arc<RoutePolicy> {
        let found = backend.key().and_then(|key| {
            let spec = self.store.service(&key.service)?.spec.as_ref()?;
            let ports = spec.ports.as_deref()?;
            let port = ports
                .iter()
                .find(|p| p.name.as_deref().unwrap_or_default() == key.port_name)?;
            port.app_protocol.clone()
        });
        match found.as_deref() {
            Some("kubernetes.io/h2c") => Arc::new(RoutePolicy {
                upstream_protocol: UpstreamProtocol::Http2,
                ..(**policy).clone()
            }),
            Some(tls @ ("https" | "kubernetes.io/wss")) => {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("{field}: the Service port's appProtocol {tls} asks for TLS to the backend, which needs BackendTLSPolicy, not supported yet; plain HTTP/1.1 is spoken"),
                );
                policy.clone()
            }
            _ => policy.clone(),
        }
    }

    /// One backendRef: a Service port, resolved as every source's are (`backends.rs`).
    fn gateway_backend(
        &mut self,
        key: &NamespacedName,
        object: &ObjectRef,
        field: &str,
        reference: &HttpBackendRef,
        outcome: &str,
    ) -> (Arc<str>, Arc<Backend>, Arc<str>) {
        let service_name = self.share(&reference.name);
        let unresolved = |this: &mut Self, why: String| {
            this.diagnose(object.clone(), format!("{field}: {why}; {outcome}"));
            (
                service_name.clone(),
                Arc::new(Backend::unresolved()),
                this.share(""),
            )
        };
        let group = reference.group.as_deref().unwrap_or("");
        let kind = reference.kind.as_deref().unwrap_or("Service");
        if !group.is_empty() || kind != "Service" {
            return unresolved(
                self,
                format!("{group}/{kind}: Sluice sends to Services only (InvalidKind)"),
            );
        }
        let Some(port) = reference.port else {
            return unresolved(self, "port: required for a Service".to_owned());
        };
        let namespace = reference.namespace.as_deref().unwrap_or(&key.namespace);
        if namespace != &*key.namespace
            && !self.granted(
                ("HTTPRoute", &key.namespace),
                ("Service", namespace, &reference.name),
            )
        {
            return unresolved(
                self,
                format!("Service {namespace}/{} is in another namespace and no ReferenceGrant there allows it (RefNotPermitted)", reference.name),
            );
        }
        let service = NamespacedName {
            namespace: if namespace == &*key.namespace {
                key.namespace.clone()
            } else {
                self.share(namespace)
            },
            name: service_name.clone(),
        };
        let written = port.to_string();
        let backend =
            self.backend_or_diagnose(object, field, &service, (Some(port), &written), outcome);
        (service_name, backend, self.share(&written))
    }
}

/// A filter whose path is `ReplacePrefixMatch` (it needs the prefix its match matched).
fn replaces_prefix(filter: &objects::HttpRouteFilter) -> bool {
    let redirect = filter
        .request_redirect
        .as_ref()
        .and_then(|r| r.path.as_ref());
    let rewrite = filter.url_rewrite.as_ref().and_then(|r| r.path.as_ref());
    redirect
        .into_iter()
        .chain(rewrite)
        .any(|p| p.type_ == "ReplacePrefixMatch")
}

/// A `URLRewrite`: its hostname is the upstream Host, its path a rewrite of the path sent
/// upstream (the query kept). `Err`: the field at fault, after `urlRewrite`, and why.
fn url_rewrite(
    policy: &mut RoutePolicy,
    rewrite: &objects::UrlRewrite,
    prefix: Option<&str>,
) -> Result<(), String> {
    if let Some(host) = &rewrite.hostname {
        let value = HeaderValue::from_str(host);
        let valid = matches!(HostPattern::parse(Some(host)), Ok(HostPattern::Exact(_)));
        match value {
            Ok(value) if valid => policy.upstream_vhost = Some(value),
            _ => return Err(format!(".hostname {host:?}: must be a lower-case DNS name")),
        }
    }
    if let Some(path) = &rewrite.path {
        let target = match path_replace(path, prefix).map_err(|why| format!(".path{why}"))? {
            PathReplace::Full(full) => full.to_string(),
            // Capture 1 of the rule's pattern: what follows the matched prefix.
            PathReplace::Prefix { with, .. } => format!("{}$1", with.trim_end_matches('/')),
        };
        if target.trim_end_matches("$1").contains('$') {
            return Err(format!(
                ".path {target:?}: a `$` is not supported in a rewritten path"
            ));
        }
        let parsed = model::policy::Rewrite::parse(&target, None)
            .map_err(|why| format!(".path {target:?}: {why}"))?;
        policy.rewrite = Some(parsed);
    }
    Ok(())
}

/// A `RequestRedirect`, for a match of `prefix` (`None`: not a PathPrefix match). `Err`: the
/// field at fault, after `requestRedirect`, and why.
fn gateway_redirect(
    redirect: &objects::RequestRedirect,
    prefix: Option<&str>,
) -> Result<GatewayRedirect, String> {
    let scheme = match redirect.scheme.as_deref() {
        None => None,
        Some(scheme @ ("http" | "https")) => Some(scheme.into()),
        Some(other) => return Err(format!(".scheme {other:?}: must be http or https")),
    };
    let hostname = match redirect.hostname.as_deref() {
        None => None,
        Some(host) => match HostPattern::parse(Some(host)) {
            Ok(HostPattern::Exact(_)) => Some(host.into()),
            _ => return Err(format!(".hostname {host:?}: must be a lower-case DNS name")),
        },
    };
    let port = match redirect.port {
        None => None,
        Some(port) => Some(
            u16::try_from(port)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!(".port {port}: must be 1 to 65535"))?,
        ),
    };
    let code = match redirect.status_code.unwrap_or(302) {
        code @ (301 | 302 | 303 | 307 | 308) => code,
        other => {
            return Err(format!(
                ".statusCode {other}: must be 301 or 302 (or 303, 307, 308)"
            ))
        }
    };
    let path = match &redirect.path {
        None => None,
        Some(path) => Some(path_replace(path, prefix).map_err(|why| format!(".path{why}"))?),
    };
    Ok(GatewayRedirect {
        scheme,
        hostname,
        port,
        path,
        code,
    })
}

/// An HTTPPathModifier for a match of `prefix`.
fn path_replace(path: &objects::PathModifier, prefix: Option<&str>) -> Result<PathReplace, String> {
    let absolute = |field: &str, value: Option<&String>| -> Result<Box<str>, String> {
        match value {
            Some(value) if value.starts_with('/') => Ok(value.as_str().into()),
            Some(value) => Err(format!(".{field} {value:?}: must start with '/'")),
            None => Err(format!(".{field}: required for type {}", path.type_)),
        }
    };
    match path.type_.as_str() {
        "ReplaceFullPath" => Ok(PathReplace::Full(absolute(
            "replaceFullPath",
            path.replace_full_path.as_ref(),
        )?)),
        "ReplacePrefixMatch" => {
            let Some(matched) = prefix else {
                return Err(".type ReplacePrefixMatch: only with a PathPrefix match".to_owned());
            };
            Ok(PathReplace::Prefix {
                matched: matched.into(),
                with: absolute("replacePrefixMatch", path.replace_prefix_match.as_ref())?,
            })
        }
        other => Err(format!(
            ".type {other:?}: must be ReplaceFullPath or ReplacePrefixMatch"
        )),
    }
}

/// `policy` for the share of an unusable backendRef (it answers 500).
fn invalid_backend(policy: &Arc<RoutePolicy>) -> Arc<RoutePolicy> {
    Arc::new(RoutePolicy {
        invalid_backend: true,
        ..(**policy).clone()
    })
}

/// A header modifier's `set`, `add` and `remove`, in that order, after what the policy had.
fn header_edits(
    edits: &mut Box<[HeaderEdit]>,
    modifier: Option<&HeaderModifier>,
) -> Result<(), String> {
    let modifier = modifier.ok_or("missing for its type")?;
    let name = |text: &str| {
        HeaderName::from_bytes(text.as_bytes()).map_err(|_| format!("{text:?}: not a header name"))
    };
    let value = |text: &str| {
        HeaderValue::from_str(text).map_err(|_| format!("{text:?}: not a header value"))
    };
    let mut all = edits.to_vec();
    for pair in &modifier.set {
        all.push(HeaderEdit {
            name: name(&pair.name)?,
            action: HeaderAction::Set(value(&pair.value)?),
        });
    }
    for pair in &modifier.add {
        all.push(HeaderEdit {
            name: name(&pair.name)?,
            action: HeaderAction::Append(value(&pair.value)?),
        });
    }
    for text in &modifier.remove {
        all.push(HeaderEdit {
            name: name(text)?,
            action: HeaderAction::Remove,
        });
    }
    *edits = all.into_boxed_slice();
    Ok(())
}

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
        }
        assert_eq!(
            GatewayHost::Any.intersect(&host("*.x.com")),
            Some(host("*.x.com"))
        );
    }
}
