//! HTTPRoute filters as blocks of the rule's policy, read by the proxy's existing phases.
//!
//! ```text
//!  RequestHeaderModifier ─▶ request_headers    ResponseHeaderModifier ─▶ response_headers
//!  URLRewrite ─▶ upstream_vhost, rewrite       RequestRedirect ─▶ gateway_redirect
//!  RequestMirror ─▶ mirror                     CORS ─▶ cors (Gateway API's rules, cors.rs)
//!  ExternalAuth (HTTP) ─▶ external_auth with its Gateway API part (listener_filters.rs builds it)
//!  a backendRef's header modifiers ─▶ that share's policy, on top of the rule's
//!  anything else ─▶ denied (503) + a diagnostic
//! ```

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use model::gateway_redirect::{GatewayRedirect, PathReplace};
use model::mirror::{Mirror, MirrorShare, MirrorUri};
use model::policy::{HeaderAction, HeaderEdit, RoutePolicy};
use model::routes::HostPattern;
use model::{NamespacedName, ObjectRef, Severity};

use super::objects::{self, HeaderModifier};
use crate::compiler::Compiler;

impl Compiler<'_> {
    /// A rule's filters, as blocks of its policy. A filter Sluice does not implement refuses
    /// the rule (503, with a diagnostic): serving it without would be another behaviour.
    pub(super) fn gateway_filters(
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
                "RequestHeaderModifier" | "ResponseHeaderModifier" => {
                    header_filter(&mut policy, filter, &at)
                }
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
                    Some(mirror) => {
                        let field = format!("{at}.requestMirror");
                        // Several mirrors: each its own copy (`Mirror.also`), in order.
                        let added = self.gateway_mirror((key, object), &field, mirror);
                        policy.mirror = match (policy.mirror.take(), added) {
                            (Some(first), Some(added)) => Some(Arc::new(first.followed_by(added))),
                            (first, added) => added.or(first),
                        };
                        Ok(())
                    }
                    None => Err(format!(
                        "{at}.requestMirror: missing for type RequestMirror"
                    )),
                },
                "CORS" => match &filter.cors {
                    Some(cors) => super::cors::gateway_cors(cors)
                        .map(|cors| policy.cors = Some(Arc::new(cors)))
                        .map_err(|why| format!("{at}.cors{why}")),
                    None => Err(format!("{at}.cors: missing for type CORS")),
                },
                "ExternalAuth" => match (&filter.external_auth, &policy.external_auth) {
                    (Some(_), Some(_)) => Err(format!(
                        "{at}: Sluice runs one ExternalAuth filter per rule; another is before it"
                    )),
                    (Some(auth), None) => {
                        let from = (object, object.kind.as_str());
                        self.gateway_external_auth(from, &at, auth)
                            .map(|auth| policy.external_auth = Some(Arc::new(auth)))
                    }
                    (None, _) => Err(format!("{at}.externalAuth: missing for type ExternalAuth")),
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

    /// A backendRef's own filters, on top of its rule's policy: header modifiers and URLRewrite
    /// for that share's requests and answers (`prefix`: the match's, for ReplacePrefixMatch).
    /// Another type refuses the share (503, with a diagnostic).
    pub(super) fn backend_filters(
        &mut self,
        object: &ObjectRef,
        field: &str,
        filters: &[objects::HttpRouteFilter],
        base: &Arc<RoutePolicy>,
        prefix: Option<&str>,
    ) -> Arc<RoutePolicy> {
        let mut policy = (**base).clone();
        for (f, filter) in filters.iter().enumerate() {
            let at = format!("{field}.filters[{f}]");
            let refused = match filter.type_.as_str() {
                "RequestHeaderModifier" | "ResponseHeaderModifier" => {
                    header_filter(&mut policy, filter, &at)
                }
                // The same rewrite a rule's URLRewrite makes, for this share only.
                "URLRewrite" => match &filter.url_rewrite {
                    Some(rewrite) => url_rewrite(&mut policy, rewrite, prefix)
                        .map_err(|why| format!("{at}.urlRewrite{why}")),
                    None => Err(format!("{at}.urlRewrite: missing for type URLRewrite")),
                },
                other => Err(format!(
                    "{at}.type {other}: not supported on a backendRef yet"
                )),
            };
            if let Err(why) = refused {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("{why}; this backend's share answers 503"),
                );
                policy.denied.get_or_insert(why);
            }
        }
        Arc::new(policy)
    }

    /// A `RequestMirror`: a copy of each request to the backendRef's Service port, its
    /// answer dropped (the mirror block Ingress's `mirror-target` fills). `None` after a
    /// diagnostic when the reference cannot be used: the rule serves without a mirror.
    pub(super) fn gateway_mirror(
        &mut self,
        (key, object): (&NamespacedName, &ObjectRef),
        field: &str,
        mirror: &objects::RequestMirror,
    ) -> Option<Arc<Mirror>> {
        let share = match mirror_share(mirror) {
            Ok(share) => share,
            Err(why) => {
                self.diagnose(object.clone(), format!("{field}{why}; not mirrored"));
                return None;
            }
        };
        let at = format!("{field}.backendRef");
        let reference = &mirror.backend_ref;
        let (_, backend, port) = self.gateway_backend(key, object, &at, reference, "not mirrored");
        let upstream_name: Arc<str> = backend.key()?.to_string().into();
        // A BackendTLSPolicy on the mirror's Service port: the copy goes with its TLS, as the
        // route's shares do; never in cleartext when the policy cannot be used.
        let tls = match self.backend_tls_for(object, &backend) {
            None => None,
            Some(Ok(_)) if object.kind == model::Kind::GRPCRoute => {
                let why = format!("{at}: a BackendTLSPolicy covers its Service port, and a GRPCRoute's copy goes in cleartext HTTP/2 only (not supported yet); not mirrored");
                self.diagnose_with(model::Severity::Unsupported, object.clone(), why);
                return None;
            }
            Some(Ok(tls)) => Some(tls),
            Some(Err(why)) => {
                self.diagnose(object.clone(), format!("{at}: {why}; not mirrored"));
                return None;
            }
        };
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
            tls,
            http2: false,
            share,
            also: None,
        }))
    }
}

/// `percent` (0–100) or `fraction` (numerator ≤ denominator, denominator default 100) as the
/// share of requests copied; neither: every request. `Err`: the field and why.
fn mirror_share(mirror: &objects::RequestMirror) -> Result<Option<MirrorShare>, String> {
    match (mirror.percent, &mirror.fraction) {
        (Some(_), Some(_)) => Err(": percent and fraction are exclusive".into()),
        (Some(percent), None) => match u32::try_from(percent) {
            Ok(numerator) if numerator <= 100 => Ok(Some(MirrorShare {
                numerator,
                denominator: 100,
            })),
            _ => Err(format!(".percent {percent}: must be 0 to 100")),
        },
        (None, Some(fraction)) => {
            let denominator = fraction.denominator.unwrap_or(100);
            match (u32::try_from(fraction.numerator), u32::try_from(denominator)) {
                (Ok(numerator), Ok(denominator)) if denominator > 0 && numerator <= denominator => {
                    Ok(Some(MirrorShare {
                        numerator,
                        denominator,
                    }))
                }
                _ => Err(format!(
                    ".fraction {}/{denominator}: the numerator must be 0 to the denominator, the denominator above 0",
                    fraction.numerator
                )),
            }
        }
        (None, None) => Ok(None),
    }
}

/// A `RequestHeaderModifier` or `ResponseHeaderModifier` (a rule's or a backendRef's) as
/// header edits of `policy`; `Err` names the field at `at` and why.
fn header_filter(
    policy: &mut RoutePolicy,
    filter: &objects::HttpRouteFilter,
    at: &str,
) -> Result<(), String> {
    if filter.type_ == "RequestHeaderModifier" {
        header_edits(
            &mut policy.request_headers,
            filter.request_header_modifier.as_ref(),
        )
        .map_err(|why| format!("{at}.requestHeaderModifier: {why}"))
    } else {
        header_edits(
            &mut policy.response_headers,
            filter.response_header_modifier.as_ref(),
        )
        .map_err(|why| format!("{at}.responseHeaderModifier: {why}"))
    }
}

/// A filter whose path is `ReplacePrefixMatch` (it needs the prefix its match matched).
pub(super) fn replaces_prefix(filter: &objects::HttpRouteFilter) -> bool {
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

    fn mirror(
        percent: Option<i32>,
        fraction: Option<(i32, Option<i32>)>,
    ) -> objects::RequestMirror {
        objects::RequestMirror {
            percent,
            fraction: fraction.map(|(numerator, denominator)| objects::Fraction {
                numerator,
                denominator,
                ..objects::Fraction::default()
            }),
            ..objects::RequestMirror::default()
        }
    }

    #[test]
    fn mirror_shares_from_percent_or_fraction() {
        let share = |numerator, denominator| {
            Ok(Some(MirrorShare {
                numerator,
                denominator,
            }))
        };
        assert_eq!(mirror_share(&mirror(None, None)), Ok(None));
        assert_eq!(mirror_share(&mirror(Some(20), None)), share(20, 100));
        assert_eq!(
            mirror_share(&mirror(None, Some((25, Some(50))))),
            share(25, 50)
        );
        assert_eq!(mirror_share(&mirror(None, Some((3, None)))), share(3, 100));
        assert!(mirror_share(&mirror(Some(101), None))
            .unwrap_err()
            .contains(".percent 101"));
        assert!(mirror_share(&mirror(None, Some((5, Some(0))))).is_err());
        assert!(mirror_share(&mirror(None, Some((6, Some(5))))).is_err());
        assert!(mirror_share(&mirror(Some(1), Some((1, None))))
            .unwrap_err()
            .contains("exclusive"));
    }
}
