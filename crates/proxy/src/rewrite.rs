//! The rewrite phase: the target sent upstream, after `rewrite-target` (nginx's query rules)
//! or path normalisation. The first change keeps the client's target for `X-Original-URI`.

use bytes::Bytes;
use http::request::Parts;
use http::uri::PathAndQuery;
use http::Uri;

use crate::error::ProxyError;
use crate::headers;

/// The target after `rewrite-target`: the rewritten path, and nginx's rule for the query:
/// the client's query is kept unless the template has its own (then it follows it after `&`)
/// or ends with `?` (then there is none). Both parts come encoded from the model; a target
/// the request line cannot carry is the proxy's fault (500), never a silent `/`.
pub(crate) fn set_rewritten(
    head: &mut Parts,
    rewritten: model::Rewritten,
) -> Result<(), ProxyError> {
    let model::Rewritten {
        path: mut target,
        query: target_query,
    } = rewritten;
    let client_query = head.uri.query().filter(|q| !q.is_empty());
    match (target_query.as_deref(), client_query) {
        (None, Some(query)) => {
            target.push('?');
            target.push_str(query);
        }
        (Some(""), _) | (None, None) => {}
        (Some(own), None) => {
            target.push('?');
            target.push_str(own);
        }
        (Some(own), Some(query)) => {
            target.push('?');
            target.push_str(own);
            target.push('&');
            target.push_str(query);
        }
    }
    let path_and_query = PathAndQuery::from_maybe_shared(Bytes::from(target))
        .map_err(|_| ProxyError::RewriteInvalid)?;
    let mut parts = std::mem::take(&mut head.uri).into_parts();
    let original = parts.path_and_query.replace(path_and_query);
    // X-Original-URI is the target as the client sent it.
    if let Some(original) = original {
        if head.extensions.get::<headers::OriginalTarget>().is_none() {
            head.extensions.insert(headers::OriginalTarget(original));
        }
    }
    head.uri = Uri::from_parts(parts).map_err(|_| ProxyError::RewriteInvalid)?;
    Ok(())
}

/// Replaces the path of the target, keeping its query (and, for HTTP/2 and absolute-form
/// targets, its scheme and authority). The first change keeps the target the client sent
/// for `X-Original-URI` (moved, not copied: this path allocates anyway).
pub(crate) fn set_path(head: &mut Parts, path: String) {
    let target = match head.uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = std::mem::take(&mut head.uri).into_parts();
    let original = std::mem::replace(
        &mut parts.path_and_query,
        PathAndQuery::from_maybe_shared(Bytes::from(target)).ok(),
    );
    if let Some(original) = original {
        if head.extensions.get::<headers::OriginalTarget>().is_none() {
            head.extensions.insert(headers::OriginalTarget(original));
        }
    }
    // Every byte of a normalised path is a valid URI byte: this cannot fail.
    head.uri = Uri::from_parts(parts).unwrap_or_default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    #[test]
    fn rewritten_targets_follow_nginx_query_rules() {
        let rewrite = |target: &str, template: &str| {
            let (mut head, ()) = Request::get(target).body(()).unwrap().into_parts();
            let pattern = regex::Regex::new("^/a(.*)").unwrap();
            let rewritten = model::Rewrite::parse(template, None)
                .unwrap()
                .apply(Some(&pattern), head.uri.path())
                .unwrap();
            set_rewritten(&mut head, rewritten).unwrap();
            head.uri.to_string()
        };
        assert_eq!(rewrite("/a?x=1", "/b"), "/b?x=1");
        assert_eq!(rewrite("/a?x=1", "/b?y=2"), "/b?y=2&x=1");
        assert_eq!(rewrite("/a?x=1", "/b?"), "/b");
        assert_eq!(rewrite("/a", "/b?y=2"), "/b?y=2");
        assert_eq!(rewrite("/a", "b c"), "/b%20c");
        assert_eq!(rewrite("/a/c?x=1", "/b$1?y=$1"), "/b/c?y=/c&x=1");
    }
}
