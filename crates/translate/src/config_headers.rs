//! The controller ConfigMap's `proxy-set-headers` and `add-headers`: each names a ConfigMap
//! whose data are headers, set on every request sent upstream (ingress-nginx's
//! `proxy_set_header` in every location) or on every response (its http-level
//! `more_set_headers`).
//!
//! ```text
//!  Settings.proxy_set_headers "ns/name" ─▶ Store ConfigMap data ─▶ `proxy_set_header K "V";`
//!  Settings.add_headers       "ns/name" ─▶ Store ConfigMap data ─▶ `more_set_headers "K: V";`
//!        ─▶ translate_snippet (the snippets' checks and nginx variables) ─▶ HeaderEdits
//!        ─▶ the default policy's request/response header edits, first in every route's
//! ```
//! ingress-nginx writes exactly those directives into nginx.conf; going through the snippet
//! translation gives them the same variables and the same refusals (`Host`, framing and
//! connection headers) as a snippet, in one place. A header that cannot be used is a
//! diagnostic on the controller's ConfigMap naming the key, the ConfigMap and the header, and
//! is left out; the other headers apply.

use std::sync::Arc;

use model::policy::{HeaderEdit, RoutePolicy};
use model::{Kind, NamespacedName, ObjectRef, Severity};

use crate::compile::CompileOptions;
use crate::compiler::Compiler;
use crate::ingress::annotations::{translate_snippet, IngressAnnotations};

/// Which of the two keys, and the directive ingress-nginx renders each header as.
#[derive(Clone, Copy)]
enum Side {
    /// `proxy-set-headers`: `proxy_set_header NAME "VALUE";`.
    Request,
    /// `add-headers`: `more_set_headers "NAME: VALUE";`.
    Response,
}

impl Compiler<'_> {
    /// Puts the ConfigMaps' headers into the default policy (the ConfigMap's, for routes
    /// without annotations and the default backend).
    pub(crate) fn config_map_headers(&mut self, options: &CompileOptions) {
        let source = ObjectRef::new(
            Kind::ConfigMap,
            &*options.config_map.namespace,
            &*options.config_map.name,
        );
        let settings = &self.out.settings;
        let keys = [
            (
                "proxy-set-headers",
                settings.proxy_set_headers.clone(),
                Side::Request,
            ),
            ("add-headers", settings.add_headers.clone(), Side::Response),
        ];
        for (key, reference, side) in keys {
            let Some(reference) = reference else { continue };
            let edits = self.referenced_headers(&source, key, &reference, side);
            if edits.is_empty() {
                continue;
            }
            let policy = Arc::make_mut(&mut self.default_policy);
            match side {
                Side::Request => policy.request_headers = edits.into(),
                Side::Response => policy.response_headers = edits.into(),
            }
        }
    }

    /// An Ingress's policy starts with the ConfigMaps' header edits: its own (snippets,
    /// `custom-headers`) come after and win for the same name, as a location's directives
    /// come after the http level's in nginx.
    pub(crate) fn config_map_headers_phase(&self, parsed: &mut IngressAnnotations) {
        prepend(&mut parsed.policy, &self.default_policy);
    }

    /// The edits of the ConfigMap `reference` names; what cannot be used is diagnosed on
    /// `source` and left out.
    fn referenced_headers(
        &mut self,
        source: &ObjectRef,
        key: &str,
        reference: &str,
        side: Side,
    ) -> Vec<HeaderEdit> {
        let (namespace, name) = reference.split_once('/').unwrap_or(("", reference));
        let Some(config_map) = self.read_config_map(&NamespacedName::new(namespace, name)) else {
            self.diagnose_with(
                Severity::Missing,
                source.clone(),
                format!("data.{key}: ConfigMap {reference} not found; no header is set until it exists (as in ingress-nginx)"),
            );
            return Vec::new();
        };
        let mut edits = Vec::new();
        let mut problems = Vec::new();
        for (header, value) in config_map.data.iter().flatten() {
            match header_edit(header, value, side) {
                Ok(edit) => edits.extend(edit),
                Err(why) => problems.push(format!(
                    "data.{key}: ConfigMap {reference}: header {header:?}: {why}; left out (the other headers apply)"
                )),
            }
        }
        for problem in problems {
            self.diagnose(source.clone(), problem);
        }
        edits
    }
}

/// One header as ingress-nginx renders it, through the snippet translation.
fn header_edit(header: &str, value: &str, side: Side) -> Result<Option<HeaderEdit>, String> {
    // The name goes into the directive bare: only a header name may stand there.
    let plain_name = !header.is_empty()
        && header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
    if !plain_name {
        return Err("not a header name (letters, digits, - and _)".to_owned());
    }
    let quoted = value.trim().replace('\\', "\\\\").replace('"', "\\\"");
    let directive = match side {
        Side::Request => format!("proxy_set_header {header} \"{quoted}\";"),
        Side::Response => format!("more_set_headers \"{header}: {quoted}\";"),
    };
    let mut edits = translate_snippet(&directive)?;
    // One directive gives at most one edit (none: a hop-by-hop header cleared, which Sluice
    // does anyway).
    Ok(edits.pop().map(|(edit, _)| edit))
}

/// `base`'s header edits before `policy`'s own.
fn prepend(policy: &mut RoutePolicy, base: &RoutePolicy) {
    for (own, first) in [
        (&mut policy.request_headers, &base.request_headers),
        (&mut policy.response_headers, &base.response_headers),
    ] {
        if !first.is_empty() {
            *own = first.iter().chain(own.iter()).cloned().collect();
        }
    }
}
