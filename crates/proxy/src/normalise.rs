//! The normalise phase's check of the request's host (its path is `model::target`'s).

use http::request::Parts;
use http::{header, Version};
use model::validate_host;

use crate::error::ProxyError;

/// The host a request is for, checked: HTTP/2 `:authority` (or an HTTP/1.1 absolute-form
/// target), else `Host`. RFC 9112 §3.2 and nginx: an HTTP/1.1 request without `Host`, with
/// more than one, or with an invalid one is refused; so is an HTTP/2 request whose `host`
/// disagrees with its `:authority`.
pub(crate) fn request_host(head: &Parts) -> Result<&str, ProxyError> {
    let mut hosts = head.headers.get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err(ProxyError::BadRequest("more than one Host header"));
    }
    let authority = head.uri.authority().map(|a| a.as_str());
    let host = match (authority, host) {
        (Some(authority), Some(host)) => {
            if head.version == Version::HTTP_2
                && !host.as_bytes().eq_ignore_ascii_case(authority.as_bytes())
            {
                return Err(ProxyError::BadRequest(
                    "the host header disagrees with :authority",
                ));
            }
            authority
        }
        (Some(authority), None) if head.version != Version::HTTP_11 => authority,
        (None, Some(host)) => host
            .to_str()
            .map_err(|_| ProxyError::BadRequest("the Host header is not ASCII"))?,
        (None, None) if head.version != Version::HTTP_11 => return Ok(""),
        (_, None) => return Err(ProxyError::BadRequest("an HTTP/1.1 request without Host")),
    };
    validate_host(host.as_bytes()).map_err(ProxyError::BadTarget)?;
    Ok(host)
}
