//! GRPCRoute: attached as HTTPRoutes are (`attach_route`), its rules compiled into the same
//! table. A gRPC method is a request path, so a method match is a path match.
//!
//! ```text
//!  method Exact { service, method } ─▶ Exact  /<service>/<method>
//!         Exact { service }         ─▶ Prefix /<service>/
//!         Exact { method }          ─▶ Regex  ^/[^/]+/<method>$
//!         RegularExpression         ─▶ Regex  ^/(?:<service>)/(?:<method>)$ (either: [^/]+)
//!  no method                        ─▶ Prefix /
//!  headers ─▶ conditions (HTTPRoute's)    filters ─▶ RequestHeaderModifier, RequestMirror
//!  backendRefs ─▶ weighted shares            (its copy over h2c), ResponseHeaderModifier
//!                                            (HTTPRoute's); others 503
//!  every share ─▶ UpstreamProtocol::Grpc: HTTP/2 (h2c) whatever the Service's appProtocol,
//!                 request bodies streamed, Sluice's own answers gRPC errors
//! ```
//! Precedence is the table's: a longer path (service and method) first, then more header
//! matches, then the older route and rule order, which is GRPCRoute's order.

use std::sync::Arc;

use model::policy::{RoutePolicy, UpstreamProtocol};
use model::routes::{PathKind, PathRoute, Route, RouteSite};
use model::{Kind, NamespacedName, ObjectRef, Severity};

use super::grpc_objects::{GrpcMethodMatch, GrpcRoute, GrpcRouteMatch, GrpcRouteRule};
use super::{route_ref, ListenerSlot, RouteHead};
use crate::compiler::Compiler;

/// The filter types GRPCRoute has that Sluice implements.
const GRPC_FILTERS: [&str; 3] = [
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestMirror",
];

impl Compiler<'_> {
    /// One GRPCRoute, as [`Compiler::http_route`] does an HTTPRoute.
    pub(super) fn grpc_route(
        &mut self,
        key: &NamespacedName,
        route: &GrpcRoute,
        listeners: &mut [ListenerSlot],
        ours: (&super::Parents, bool),
    ) -> super::RouteOutcome {
        let spec = &route.spec;
        let head = RouteHead {
            key,
            kind: Kind::GRPCRoute,
            parent_refs: &spec.parent_refs,
            hostnames: &spec.hostnames,
            unsupported: &route.unsupported,
            generation: route.generation,
        };
        let Some(attached) = self.attach_route(&head, listeners, ours) else {
            return super::RouteOutcome::default();
        };
        let object = route_ref(Kind::GRPCRoute, key);
        let mark = self.out.diagnostics.len();
        let mut rules = Vec::new();
        if !attached.hosts.is_empty() {
            let site_host = self.site_host(&attached.hosts);
            for (r, rule) in spec.rules.iter().enumerate() {
                self.grpc_route_rule((key, &object), r, rule, &site_host, &mut rules);
            }
        }
        let count = spec.rules.len();
        self.route_outcome(&object, attached, rules, (mark, count), route.generation)
    }

    fn grpc_route_rule(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        r: usize,
        rule: &GrpcRouteRule,
        site_host: &Arc<str>,
        rules: &mut Vec<PathRoute>,
    ) {
        let field = format!("spec.rules[{r}]");
        let policy = self.grpc_filters((key, object), &field, rule);
        let site = RouteSite {
            host: site_host.clone(),
            path: self.share("/"),
            service_port: self.share(""),
        };
        let refs = (&rule.backend_refs[..], None);
        let route = self.gateway_backends((key, object), &field, refs, policy, site);
        let default_match = [GrpcRouteMatch::default()];
        let matches = if rule.matches.is_empty() {
            &default_match[..]
        } else {
            &rule.matches[..]
        };
        for (m, spec_match) in matches.iter().enumerate() {
            let at = format!("{field}.matches[{m}]");
            rules.extend(self.grpc_match(object, &at, spec_match, route.clone()));
        }
    }

    /// A rule's filters as its policy (HTTPRoute's blocks), with gRPC spoken upstream and to
    /// the mirror. The types GRPCRoute does not have make the rule answer 503 with a
    /// diagnostic.
    fn grpc_filters(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        field: &str,
        rule: &GrpcRouteRule,
    ) -> Arc<RoutePolicy> {
        let (usable, refused): (Vec<_>, Vec<_>) = (rule.filters.iter().enumerate())
            .partition(|(_, f)| GRPC_FILTERS.contains(&f.type_.as_str()));
        let usable: Vec<_> = usable.into_iter().map(|(_, f)| f.clone()).collect();
        let policy = self.gateway_filters((key, object), field, &usable, None);
        let mut policy = (*policy).clone();
        for (f, filter) in refused {
            let other = &filter.type_;
            let why = format!("{field}.filters[{f}].type {other}: not supported on a GRPCRoute");
            self.diagnose_with(
                Severity::Unsupported,
                object.clone(),
                format!("{why}; the rule answers 503"),
            );
            policy.denied.get_or_insert(why);
        }
        // gRPC: HTTP/2 to the backend whatever its appProtocol says, bodies streamed (a
        // client-streaming call may never end on its own), Sluice's own answers gRPC errors.
        policy.upstream_protocol = UpstreamProtocol::Grpc;
        policy.body.request_buffering = false;
        if let Some(mirror) = &mut policy.mirror {
            mirror.edit_each(&|mirror| mirror.http2 = true);
        }
        Arc::new(policy)
    }

    /// One match: its method as a path, its headers as conditions. `None` (with a
    /// diagnostic) when it is invalid: the match is left out.
    fn grpc_match(
        &mut self,
        object: &ObjectRef,
        field: &str,
        spec: &GrpcRouteMatch,
        route: Arc<Route>,
    ) -> Option<PathRoute> {
        let (kind, written, pattern) = match &spec.method {
            None => (PathKind::Prefix, "/".to_owned(), None),
            Some(method) => self.grpc_method(object, &format!("{field}.method"), method)?,
        };
        let mut when = Vec::new();
        self.header_matches(object, field, &spec.headers, &mut when)?;
        let mut rule = PathRoute::new(kind, self.share(&written), route);
        rule.pattern = pattern;
        rule.when = when.into_boxed_slice();
        Some(rule)
    }

    /// A method match as the path it stands for: the kind, the path written (what the table
    /// ranks by: the longer, the more specific) and, for a regex, its pattern.
    fn grpc_method(
        &mut self,
        object: &ObjectRef,
        field: &str,
        method: &GrpcMethodMatch,
    ) -> Option<(PathKind, String, Option<regex::Regex>)> {
        let (service, name) = (method.service.as_deref(), method.method.as_deref());
        if service.is_none() && name.is_none() {
            let why = format!("{field}: one of service and method is required; match ignored");
            self.diagnose(object.clone(), why);
            return None;
        }
        match method.type_.as_deref().unwrap_or("Exact") {
            "Exact" => {
                if let Some(bad) = service.filter(|s| !valid_service(s)) {
                    self.diagnose(object.clone(), format!("{field}.service {bad:?}: not a gRPC service name (dot-separated identifiers); match ignored"));
                    return None;
                }
                if let Some(bad) = name.filter(|m| !valid_identifier(m)) {
                    self.diagnose(object.clone(), format!("{field}.method {bad:?}: not a gRPC method name (an identifier); match ignored"));
                    return None;
                }
                Some(match (service, name) {
                    (Some(service), Some(name)) => {
                        (PathKind::Exact, format!("/{service}/{name}"), None)
                    }
                    (Some(service), None) => (PathKind::Prefix, format!("/{service}/"), None),
                    (None, Some(name)) => {
                        let pattern = format!("/[^/]+/{}", regex::escape(name));
                        let regex = self.gateway_regex(object, field, &pattern)?;
                        (PathKind::Regex, format!("/*/{name}"), Some(regex))
                    }
                    (None, None) => unreachable!("checked above"),
                })
            }
            "RegularExpression" => {
                let service = service.unwrap_or("[^/]+");
                let name = name.unwrap_or("[^/]+");
                // Each part checked alone, so the diagnostic names the one at fault.
                self.gateway_regex(object, &format!("{field}.service"), service)?;
                self.gateway_regex(object, &format!("{field}.method"), name)?;
                let pattern = format!("/(?:{service})/(?:{name})");
                let regex = self.gateway_regex(object, field, &pattern)?;
                Some((PathKind::Regex, pattern, Some(regex)))
            }
            other => {
                self.bad_match_type(object, field, other);
                None
            }
        }
    }
}

/// A gRPC method name (the API's pattern `^[A-Za-z_][A-Za-z_0-9]*$`).
fn valid_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A gRPC service name: identifiers joined by dots, optionally with a leading dot (the API's
/// pattern, case-insensitive).
fn valid_service(text: &str) -> bool {
    let text = text.strip_prefix('.').unwrap_or(text);
    text.split('.').all(valid_identifier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_and_method_names_follow_the_api_s_patterns() {
        for good in [
            "echo.Echo",
            ".pkg.v1.Svc",
            "Svc",
            "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho",
        ] {
            assert!(valid_service(good), "{good}");
        }
        for bad in ["", "echo..Echo", "echo/Echo", "1pkg.Svc", "echo.Echo."] {
            assert!(!valid_service(bad), "{bad}");
        }
        assert!(valid_identifier("EchoTwo") && valid_identifier("_x1"));
        assert!(!valid_identifier("Echo.Two") && !valid_identifier("2x") && !valid_identifier(""));
    }
}
