//! One Ingress's rules as HTTPRoutes: a route per host, its parentRefs (the HTTPS listeners when
//! plain HTTP is redirected, else every listener), and a route on the `http` listener that
//! redirects to HTTPS as ingress-nginx's `ssl-redirect` does.
//!
//! ```text
//!  path (pathType; regex host ─▶ RegularExpression "(?i)<path>.*": ingress-nginx's ^<path>)
//!    canary of the same host and path ─▶ header / cookie rules first, then weighted backendRefs
//!    rewrite-target, upstream-vhost ─▶ URLRewrite │ x-forwarded-prefix ─▶ RequestHeaderModifier
//!    permanent-/temporal-redirect ─▶ RequestRedirect (no backend) │ app-root ─▶ Exact "/" redirect
//!  the host's first Ingress's spec.defaultBackend ─▶ a PathPrefix "/" rule (the host's root)
//! ```

use std::collections::BTreeSet;

use http::Uri;
use k8s_openapi::api::networking::v1::{HTTPIngressPath, IngressBackend, IngressServiceBackend};
use model::{NamespacedName, Settings};
use serde_json::{json, Value};

use super::listeners::{Listeners, HTTP_LISTENER};
use super::source::{host_slug, Gap, Source, Target};
use crate::ingress::annotations::Canary;
use crate::Store;

/// Annotations of a main Ingress this conversion writes as Gateway API.
const CONVERTED: &[&str] = &[
    "rewrite-target",
    "use-regex",
    "upstream-vhost",
    "x-forwarded-prefix",
    "permanent-redirect",
    "permanent-redirect-code",
    "temporal-redirect",
    "app-root",
    "ssl-redirect",
    "force-ssl-redirect",
    "from-to-www-redirect",
    "enable-global-auth",
];

/// What converting one Ingress needs to know about the others.
pub(super) struct Context<'a> {
    pub store: &'a Store,
    pub settings: &'a Settings,
    pub target: &'a Target,
    pub listeners: &'a Listeners,
    pub regex_hosts: &'a BTreeSet<String>,
    pub primaries: &'a [Source<'a>],
    pub canaries: &'a [Source<'a>],
    /// Each host's first main Ingress (oldest): its defaultBackend is the host's root.
    pub first_of_host: &'a dyn Fn(Option<&str>) -> Option<&'a NamespacedName>,
}

/// The paths an Ingress has for `host`.
pub(super) fn paths_of<'a>(
    source: &'a Source,
    host: Option<&'a str>,
) -> impl Iterator<Item = &'a HTTPIngressPath> {
    source
        .spec
        .rules
        .iter()
        .flatten()
        .filter(move |r| r.host.as_deref() == host)
        .flat_map(|r| r.http.iter().flat_map(|h| &h.paths))
}

/// The hosts an Ingress has rules for, in the order written.
pub(super) fn hosts_of<'a>(source: &'a Source) -> Vec<Option<&'a str>> {
    let mut hosts: Vec<Option<&str>> = Vec::new();
    for rule in source.spec.rules.iter().flatten() {
        if rule.http.is_some() && !hosts.contains(&rule.host.as_deref()) {
            hosts.push(rule.host.as_deref());
        }
    }
    hosts
}

/// One Ingress's HTTPRoutes and gaps.
pub(super) fn convert_ingress(ctx: &Context, source: &Source) -> (Vec<Value>, Vec<Gap>) {
    let mut out = Output {
        objects: Vec::new(),
        gaps: Vec::new(),
        key: &source.key,
    };
    let hosts = hosts_of(source);
    if let Some((why, _)) = source.screened(ctx.settings) {
        out.gap(
            "the whole Ingress",
            format!("{why}: refused by Sluice, and not served by ingress-nginx; not converted"),
        );
        return (out.objects, out.gaps);
    }
    for name in source.annotation_names() {
        if CONVERTED.contains(&name) {
            continue;
        }
        out.gap(name, unconverted_why(name));
        if host_wide(name) {
            for host in &hosts {
                out.gap(
                    format!("host {}", host.unwrap_or("*")),
                    format!("{name} applies to the whole host in ingress-nginx (every Ingress's paths on it): not converted"),
                );
            }
        }
    }
    for host in &hosts {
        let name = if hosts.len() == 1 {
            source.key.name.to_string()
        } else {
            format!("{}-{}", source.key.name, host_slug(*host))
        };
        host_routes(ctx, source, *host, &name, &mut out);
    }
    if hosts.is_empty() {
        if let Some(backend) = &source.spec.default_backend {
            // A rule-less Ingress's default backend: the catch-all of every host without rules.
            if let Some(reference) =
                backend_ref(ctx, source, backend, &mut out, "spec.defaultBackend")
            {
                let rule = json!({"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": [reference]});
                let parents = vec![parent(ctx.target, None)];
                out.objects.extend(http_routes(
                    source,
                    &source.key.name,
                    None,
                    &parents,
                    vec![rule],
                ));
                out.gap("spec.defaultBackend", "converted to a route for every host: in Gateway API it also answers the paths a host's own routes do not match, where ingress-nginx answers from that host's root (404 or the default backend)");
            }
        }
    }
    (out.objects, out.gaps)
}

struct Output<'a> {
    objects: Vec<Value>,
    gaps: Vec<Gap>,
    key: &'a NamespacedName,
}

impl Output<'_> {
    fn gap(&mut self, what: impl Into<String>, why: impl Into<String>) {
        self.gaps.push(Gap {
            object: self.key.to_string(),
            what: what.into(),
            why: why.into(),
        });
    }
}

/// ingress-nginx applies these to the host's `server`, whatever Ingress wrote them.
fn host_wide(name: &str) -> bool {
    name.starts_with("auth-tls-")
        || matches!(
            name,
            "server-snippet" | "server-alias" | "ssl-ciphers" | "ssl-prefer-server-ciphers"
        )
}

/// Why an annotation is not converted, by family.
fn unconverted_why(name: &str) -> String {
    let why = if name.starts_with("canary") {
        "a canary annotation on an Ingress that is not a canary (canary: \"true\" missing): ignored, as by ingress-nginx"
    } else if name == "enable-cors" || name.starts_with("cors-") {
        "HTTPRoute's CORS filter (which Sluice serves) is not written by migrate yet: not converted"
    } else if name == "affinity"
        || name == "affinity-mode"
        || name == "affinity-canary-behavior"
        || name.starts_with("session-cookie-")
    {
        "HTTPRoute sessionPersistence (experimental; Sluice serves its Cookie type) is not written by migrate yet, and ingress-nginx's balanced mode has no equivalent: not converted"
    } else if name.starts_with("proxy-") && name.ends_with("-timeout") {
        "HTTPRoute timeouts bound a whole request or backend attempt, not each connect/read/send: not converted"
    } else if name == "backend-protocol" {
        "the backend's protocol is the Service port's appProtocol (kubernetes.io/h2c) or a BackendTLSPolicy in Gateway API: not converted"
    } else if name == "ssl-passthrough" {
        "TLS passthrough is a TLSRoute on a TLS listener (mode Passthrough), which Sluice serves but migrate does not write yet: not converted"
    } else if name == "mirror-target" || name == "mirror-host" || name == "mirror-request-body" {
        "HTTPRoute's RequestMirror filter takes a backendRef, not a URL: not converted"
    } else {
        "no Gateway API equivalent: not converted"
    };
    why.to_string()
}

/// The routes of one host of one Ingress.
fn host_routes(ctx: &Context, source: &Source, host: Option<&str>, name: &str, out: &mut Output) {
    let regex = host.is_some_and(|h| ctx.regex_hosts.contains(h));
    let mut rules = Vec::new();
    let mut redirect_matches = Vec::new();
    let mut has_root = false;
    if let Some(app_root) = source.annotation("app-root") {
        rules.push(json!({
            "matches": [{"path": {"type": "Exact", "value": "/"}}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": app_root}, "statusCode": 302}}],
        }));
    }
    for path in paths_of(source, host) {
        let written = path.path.as_deref().unwrap_or("/");
        has_root |= written == "/" && path.path_type != "Exact";
        let Some(mut converted) = path_rules(ctx, source, host, path, regex, out) else {
            continue;
        };
        redirect_matches.push(converted[converted.len() - 1]["matches"][0].clone());
        rules.append(&mut converted);
    }
    if !has_root && (ctx.first_of_host)(host) == Some(&source.key) {
        if let Some(backend) = &source.spec.default_backend {
            if let Some(reference) = backend_ref(ctx, source, backend, out, "spec.defaultBackend") {
                let matches = json!({"path": {"type": "PathPrefix", "value": "/"}});
                redirect_matches.push(matches.clone());
                rules.push(json!({"matches": [matches], "backendRefs": [reference]}));
            }
        }
    }
    if regex && paths_of(source, host).count() > 1 {
        out.gap(
            format!("host {}", host.unwrap_or("*")),
            "regex paths: ingress-nginx tries the longest first; Gateway API ranks RegularExpression matches as the implementation chooses (Sluice: in the order written, after Exact and PathPrefix): check overlapping patterns",
        );
    }
    if rules.is_empty() {
        return;
    }
    let tls = ctx.listeners.is_tls(host);
    let https = ctx.listeners.https_for(host);
    let ssl_redirect = source
        .flag("ssl-redirect")
        .unwrap_or(ctx.settings.ssl_redirect);
    let force = source
        .flag("force-ssl-redirect")
        .unwrap_or(ctx.settings.force_ssl_redirect);
    let mut redirect = (tls && ssl_redirect) || force;
    if redirect && https.is_empty() {
        out.gap(
            "force-ssl-redirect",
            format!("host {} has no certificate, so the Gateway has no HTTPS listener for it: the redirect is not converted", host.unwrap_or("*")),
        );
        redirect = false;
    }
    let code = ctx.settings.http_redirect_code;
    if redirect && ![301, 302, 303, 307, 308].contains(&code) {
        out.gap(
            "http-redirect-code",
            format!("{code}: RequestRedirect allows 301, 302, 303, 307 and 308; the HTTPS redirect is written with 308"),
        );
    }
    let code = if [301, 302, 303, 307, 308].contains(&code) {
        code
    } else {
        308
    };
    let parents = if redirect {
        https.iter().map(|l| parent(ctx.target, Some(l))).collect()
    } else {
        vec![parent(ctx.target, None)]
    };
    out.objects
        .extend(http_routes(source, name, host, &parents, rules));
    if redirect {
        let rules = redirect_matches
            .into_iter()
            .map(|m| json!({
                "matches": [m],
                "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": code}}],
            }))
            .collect();
        let parents = vec![parent(ctx.target, Some(HTTP_LISTENER))];
        out.objects.extend(http_routes(
            source,
            &format!("{name}-ssl-redirect"),
            host,
            &parents,
            rules,
        ));
    }
}

/// The rules one Ingress path becomes (its canaries' first, the path's own last), or `None`
/// (with a gap) when its backend cannot be written.
fn path_rules(
    ctx: &Context,
    source: &Source,
    host: Option<&str>,
    path: &HTTPIngressPath,
    regex: bool,
    out: &mut Output,
) -> Option<Vec<Value>> {
    let written = path.path.as_deref().unwrap_or("/");
    let field = format!("path {}{written}", host.unwrap_or("*"));
    let mut filters = Vec::new();
    let mut path_match = if regex {
        json!({"type": "RegularExpression", "value": format!("(?i){written}.*")})
    } else if path.path_type == "Exact" {
        json!({"type": "Exact", "value": written})
    } else {
        json!({"type": "PathPrefix", "value": written})
    };
    if let Some(target) = source
        .annotation("rewrite-target")
        .filter(|t| *t != written)
    {
        match rewrite(written, target) {
            Rewrite::FullPath => filters.push(json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": target}}})),
            Rewrite::StripPrefix(prefix) => {
                path_match = json!({"type": "PathPrefix", "value": prefix});
                filters.push(json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}));
                out.gap(&field, format!("rewrite-target {target} on {written}: written as PathPrefix {prefix} with ReplacePrefixMatch /, matched case-sensitively (ingress-nginx's regex is case-insensitive)"));
            }
            Rewrite::Captures => out.gap(&field, format!("rewrite-target {target}: URLRewrite has no regex captures; the path is not rewritten")),
        }
    }
    if let Some(vhost) = source.annotation("upstream-vhost") {
        if vhost.contains('$') || vhost.parse::<http::uri::Authority>().is_err() {
            out.gap(&field, format!("upstream-vhost {vhost:?}: URLRewrite's hostname takes a plain host name; not converted"));
        } else {
            let rewrite = filters.iter_mut().find(|f| f["type"] == "URLRewrite");
            match rewrite {
                Some(f) => f["urlRewrite"]["hostname"] = json!(vhost),
                None => {
                    filters.push(json!({"type": "URLRewrite", "urlRewrite": {"hostname": vhost}}))
                }
            }
        }
    }
    if let Some(prefix) = source.annotation("x-forwarded-prefix") {
        filters.push(json!({"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Forwarded-Prefix", "value": prefix}]}}));
    }
    let matches = json!([{"path": path_match}]);
    if let Some(redirect) = redirect_filter(source, out, &field) {
        // ingress-nginx answers the redirect before any proxying: no backend.
        return Some(vec![json!({"matches": matches, "filters": [redirect]})]);
    }
    let reference = backend_ref(ctx, source, &path.backend, out, &field)?;
    let mut rules = Vec::new();
    let mut main_refs = vec![reference.clone()];
    // ingress-nginx attaches a canary to the main rule's backend (the oldest canary of it),
    // so every rule routing to that Service port takes it.
    if let Some((canary, canary_path)) = canary_for(ctx, source, &path.backend) {
        let mut canary_out = Output {
            objects: Vec::new(),
            gaps: Vec::new(),
            key: &canary.key,
        };
        for name in canary.annotation_names() {
            // The canary family becomes rules; ingress-nginx ignores the rest on a canary.
            if !name.starts_with("canary") {
                canary_out.gap(name, "on a canary Ingress: ingress-nginx uses the main Ingress's settings; not converted");
            }
        }
        let canary_ref = backend_ref(ctx, canary, &canary_path.backend, &mut canary_out, &field);
        out.gaps.append(&mut canary_out.gaps);
        if let (Some(canary_ref), Some(parsed)) = (canary_ref, &canary.parsed.canary) {
            let split = Split {
                main: &reference,
                canary: &canary_ref,
                path: &matches[0]["path"],
                filters: &filters,
            };
            split.rules(parsed, &mut rules, &mut main_refs);
        }
    }
    let mut main = json!({"matches": matches, "backendRefs": main_refs});
    if !filters.is_empty() {
        main["filters"] = json!(filters);
    }
    rules.push(main);
    Some(rules)
}

/// The canary of a main rule's backend: the oldest canary Ingress with a path whose host and
/// path a main Ingress has, routing to the same Service port.
fn canary_for<'a>(
    ctx: &Context<'a>,
    source: &Source,
    backend: &IngressBackend,
) -> Option<(&'a Source<'a>, &'a HTTPIngressPath)> {
    let wanted = backend_id(ctx, source, backend)?;
    for canary in ctx.canaries {
        for host in hosts_of(canary) {
            for canary_path in paths_of(canary, host) {
                let joins = ctx.primaries.iter().any(|main| {
                    paths_of(main, host).any(|p| {
                        p.path == canary_path.path
                            && backend_id(ctx, main, &p.backend).as_ref() == Some(&wanted)
                    })
                });
                if joins {
                    return Some((canary, canary_path));
                }
            }
        }
    }
    None
}

/// A backend as namespace, Service and port number (a named port resolved).
fn backend_id(
    ctx: &Context,
    source: &Source,
    backend: &IngressBackend,
) -> Option<(String, String, i32)> {
    let service = backend.service.as_ref()?;
    let number = port_number(ctx, source, service)?;
    Some((source.namespace().to_string(), service.name.clone(), number))
}

fn port_number(ctx: &Context, source: &Source, service: &IngressServiceBackend) -> Option<i32> {
    let port = service.port.as_ref()?;
    let written = match (port.number, port.name.as_deref()) {
        (Some(number), _) => number.to_string(),
        (None, Some(name)) => name.to_owned(),
        (None, None) => return None,
    };
    let key = NamespacedName::new(source.namespace(), service.name.as_str());
    // The port ingress-nginx serves: the one of that number or name, else the first whose
    // targetPort is the reference. The backendRef names it, to reach the same endpoints.
    crate::backends::ingress_nginx_port(ctx.store, &key, &written)
        .map(|found| found.port)
        .or(port.number)
}

/// A main rule and its canary, for the canary's rules.
struct Split<'v> {
    main: &'v Value,
    canary: &'v Value,
    path: &'v Value,
    filters: &'v [Value],
}

impl Split<'_> {
    /// The canary's rules in front of the main rule (header, then cookie), and its weight in
    /// the main rule's backendRefs: ingress-nginx's order.
    fn rules(&self, canary: &Canary, rules: &mut Vec<Value>, main_refs: &mut Vec<Value>) {
        let (weight, total) = (canary.weight, canary.weight_total);
        if let Some(header) = &canary.header {
            let header = header.as_str();
            if let Some(value) = &canary.header_value {
                rules.push(self.rule(json!({"name": header, "value": value}), self.canary));
            } else if let Some(pattern) = &canary.header_pattern {
                // ingress-nginx searches the value; Gateway API's regex is the whole value.
                let pattern = format!(".*(?:{}).*", pattern.as_str());
                rules.push(self.rule(
                    json!({"type": "RegularExpression", "name": header, "value": pattern}),
                    self.canary,
                ));
            } else {
                rules.push(self.rule(json!({"name": header, "value": "always"}), self.canary));
                if weight > 0 || canary.cookie.is_some() {
                    rules.push(self.rule(json!({"name": header, "value": "never"}), self.main));
                }
            }
        }
        if let Some(cookie) = &canary.cookie {
            // nginx's $cookie_<name> ignores the name's case.
            let cookie_match = |value: &str| {
                let value = format!("(.*;\\s*)?(?i:{})={value}(;.*)?", regex::escape(cookie));
                json!({"type": "RegularExpression", "name": "Cookie", "value": value})
            };
            rules.push(self.rule(cookie_match("always"), self.canary));
            if weight > 0 {
                rules.push(self.rule(cookie_match("never"), self.main));
            }
        }
        if weight > 0 {
            let weight = weight.min(total);
            let mut primary = self.main.clone();
            primary["weight"] = json!(total - weight);
            let mut alternative = self.canary.clone();
            alternative["weight"] = json!(weight);
            *main_refs = vec![primary, alternative];
        }
    }

    /// The path with one header condition, to `to`.
    fn rule(&self, header: Value, to: &Value) -> Value {
        let mut rule = json!({
            "matches": [{"path": self.path, "headers": [header]}],
            "backendRefs": [to],
        });
        if !self.filters.is_empty() {
            rule["filters"] = json!(self.filters);
        }
        rule
    }
}

enum Rewrite {
    /// No captures: ingress-nginx's `rewrite` replaces the whole path with the target.
    FullPath,
    /// The common idiom `<prefix>(/|$)(.*)` → `/$2`: strip the prefix.
    StripPrefix(String),
    /// Other captures: no equivalent.
    Captures,
}

fn rewrite(path: &str, target: &str) -> Rewrite {
    if !target.contains('$') {
        return Rewrite::FullPath;
    }
    match path.strip_suffix("(/|$)(.*)") {
        Some(prefix)
            if target == "/$2" && !prefix.is_empty() && regex::escape(prefix) == prefix =>
        {
            Rewrite::StripPrefix(prefix.to_string())
        }
        _ => Rewrite::Captures,
    }
}

/// `permanent-redirect` / `temporal-redirect` as a RequestRedirect filter.
fn redirect_filter(source: &Source, out: &mut Output, field: &str) -> Option<Value> {
    let (annotation, url, code) = if let Some(url) = source.annotation("permanent-redirect") {
        let code = source
            .annotation("permanent-redirect-code")
            .and_then(|c| c.parse().ok())
            .unwrap_or(301u16);
        ("permanent-redirect", url, code)
    } else {
        (
            "temporal-redirect",
            source.annotation("temporal-redirect")?,
            302,
        )
    };
    let uri: Uri = match url.parse() {
        Ok(uri) => uri,
        Err(_) => {
            out.gap(
                field,
                format!("{annotation} {url:?}: not a URL; not converted"),
            );
            return None;
        }
    };
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        out.gap(
            field,
            format!("{annotation} {url:?}: not an absolute URL; not converted"),
        );
        return None;
    };
    if ![301, 302, 303, 307, 308].contains(&code) {
        out.gap(field, format!("{annotation} code {code}: RequestRedirect allows 301, 302, 303, 307 and 308; not converted"));
        return None;
    }
    let mut redirect = json!({"scheme": scheme, "hostname": authority.host(), "statusCode": code,
        "path": {"type": "ReplaceFullPath", "replaceFullPath": uri.path()}});
    if let Some(port) = authority.port_u16() {
        redirect["port"] = json!(port);
    }
    if uri.query().is_some() {
        out.gap(field, format!("{annotation} {url:?}: RequestRedirect cannot set a query; the request's own query is kept"));
    } else {
        out.gap(field, format!("{annotation}: the Location keeps the request's query string, which ingress-nginx's return drops"));
    }
    Some(json!({"type": "RequestRedirect", "requestRedirect": redirect}))
}

/// An Ingress backend as a backendRef, or `None` (with a gap).
fn backend_ref(
    ctx: &Context,
    source: &Source,
    backend: &IngressBackend,
    out: &mut Output,
    field: &str,
) -> Option<Value> {
    let Some(service) = &backend.service else {
        out.gap(
            field,
            "a resource backend has no Gateway API equivalent; rule not converted",
        );
        return None;
    };
    let port = service.port.as_ref();
    let number = port_number(ctx, source, service);
    let Some(number) = number else {
        out.gap(field, format!("Service {}'s port {:?} is not found (a backendRef needs a port number); rule not converted", service.name, port.and_then(|p| p.name.as_deref()).unwrap_or("")));
        return None;
    };
    let found = ctx.store.service(&NamespacedName::new(
        source.namespace(),
        service.name.as_str(),
    ));
    if let Some(name) = found.and_then(crate::objects::Service::external_name) {
        out.gap(
            field,
            format!(
                "Service {} is of type ExternalName ({name}), which ingress-nginx (and Sluice \
                 for Ingresses) follows; Gateway API leaves ExternalName to the implementation \
                 and Sluice's routes do not follow it (their share answers 500): give the \
                 Service EndpointSlices, or keep this path on the Ingress",
                service.name
            ),
        );
        return Some(json!({"name": service.name, "port": number}));
    }
    match found.and_then(|s| s.spec.as_ref()) {
        None => out.gap(
            field,
            format!(
                "Service {} does not exist: ingress-nginx answers 503, Gateway API 500",
                service.name
            ),
        ),
        Some(spec) if !spec.ports.iter().flatten().any(|p| p.port == number) => out.gap(
            field,
            format!(
                "Service {} has no port {number}: ingress-nginx answers 503, Gateway API 500",
                service.name
            ),
        ),
        Some(spec) => {
            let written = match port.and_then(|p| p.number) {
                Some(written) => written.to_string(),
                None => port.and_then(|p| p.name.clone()).unwrap_or_default(),
            };
            let ports = spec.ports.iter().flatten();
            if !ports
                .filter(|p| p.port == number)
                .any(|p| crate::backends::names_port(p, &written))
            {
                out.gap(
                    field,
                    format!(
                        "port {written} is not a port of Service {} but the targetPort of its \
                         port {number}, which ingress-nginx serves: the backendRef names port \
                         {number}",
                        service.name
                    ),
                );
            }
        }
    }
    Some(json!({"name": service.name, "port": number}))
}

fn parent(target: &Target, section: Option<&str>) -> Value {
    let mut parent =
        json!({"name": &*target.gateway.name, "namespace": &*target.gateway.namespace});
    if let Some(section) = section {
        parent["sectionName"] = json!(section);
    }
    parent
}

/// Gateway API allows no more rules in one HTTPRoute.
const MAX_RULES: usize = 16;

/// HTTPRoutes `name`, `name-2`, … of at most [`MAX_RULES`] rules each. Splitting changes
/// nothing: precedence between rules does not depend on the route they are in, except between
/// equal matches, which the rules of one path never are.
fn http_routes(
    source: &Source,
    name: &str,
    host: Option<&str>,
    parents: &[Value],
    rules: Vec<Value>,
) -> Vec<Value> {
    rules
        .chunks(MAX_RULES)
        .enumerate()
        .map(|(i, rules)| {
            let name = match i {
                0 => name.to_string(),
                i => format!("{name}-{}", i + 1),
            };
            let mut route = json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {"name": name, "namespace": source.namespace()},
                "spec": {"parentRefs": parents, "rules": rules},
            });
            if let Some(host) = host {
                route["spec"]["hostnames"] = json!([host]);
            }
            route
        })
        .collect()
}
