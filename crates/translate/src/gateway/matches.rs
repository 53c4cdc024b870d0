//! An HTTPRoute match as a rule of the table: its path, and its method, headers and query
//! parameters as conditions.
//!
//! ```text
//!  HTTPRouteMatch { path: Exact │ PathPrefix │ RegularExpression (whole path), method,
//!                   headers, queryParams (Exact │ RegularExpression, whole value) }
//!      ─▶ PathRoute { kind, pattern, when: [Method, Header…, Query…] } │ None + a diagnostic
//! ```

use std::collections::HashSet;
use std::sync::Arc;

use http::{HeaderName, Method};
use model::matches::{RequestMatch, ValueMatch};
use model::routes::{PathKind, PathRoute, Route};
use model::ObjectRef;
use regex::Regex;

use super::objects::{self, HttpRouteMatch};
use crate::compiler::Compiler;

impl Compiler<'_> {
    /// One match: its path, and its method, headers and query parameters as conditions.
    /// `None` (with a diagnostic) when it is invalid: the match is left out.
    pub(super) fn gateway_match(
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
        self.header_matches(object, field, &spec.headers, &mut when)?;
        // Of several matches on one query parameter name, only the first counts.
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

    /// A match's `headers` as conditions (HTTPRoute's and GRPCRoute's alike). `None` (with a
    /// diagnostic) when one is invalid: the match is left out.
    pub(super) fn header_matches(
        &mut self,
        object: &ObjectRef,
        field: &str,
        headers: &[objects::ValueMatchSpec],
        when: &mut Vec<RequestMatch>,
    ) -> Option<()> {
        // Gateway API: of several matches on one header name (in any case), only the first
        // counts.
        let mut seen = HashSet::new();
        for (h, header) in headers.iter().enumerate() {
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
        Some(())
    }

    /// A match `type` that is neither Exact nor RegularExpression: the match is left out.
    pub(super) fn bad_match_type(&mut self, object: &ObjectRef, field: &str, other: &str) {
        self.diagnose(
            object.clone(),
            format!("{field}.type {other:?}: must be Exact or RegularExpression; match ignored"),
        );
    }

    pub(super) fn value_match(
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
                self.bad_match_type(object, field, other);
                None
            }
        }
    }

    /// A `RegularExpression` value, matched against the whole path or value (RE2 syntax, which
    /// the regex crate shares).
    pub(super) fn gateway_regex(
        &mut self,
        object: &ObjectRef,
        field: &str,
        value: &str,
    ) -> Option<Regex> {
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
}
