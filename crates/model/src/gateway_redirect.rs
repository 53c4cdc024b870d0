//! Gateway API's `RequestRedirect` filter: a Location made from the request and the filter's
//! scheme, hostname, port and path, answered in the redirect phase (answer here).
//!
//! ```text
//!  request (listener, Host, path, query) + GatewayRedirect ──location()──▶ 301/302 Location
//!    scheme   the filter's, else the listener's (http on the port-80 listener, https on 443)
//!    host     the filter's hostname, else the request's (without its port)
//!    port     the filter's; else the well-known port of the filter's scheme; else the
//!             LISTENER's declared port (80 or 443), never the socket's: a port is written
//!             only when it is not the scheme's own (80 for http, 443 for https)
//!    path     as sent, ReplaceFullPath, or ReplacePrefixMatch of the matched prefix; the
//!             query is kept
//! ```

use serde::Serialize;

/// A `RequestRedirect` filter, compiled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct GatewayRedirect {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<Box<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<Box<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathReplace>,
    /// 301 or 302.
    pub code: u16,
}

/// How a redirect or rewrite changes the path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathReplace {
    /// `ReplaceFullPath`.
    Full(Box<str>),
    /// `ReplacePrefixMatch`: the rule's matched prefix (`matched`) becomes `with`.
    Prefix { matched: Box<str>, with: Box<str> },
}

/// The port a scheme has without writing one.
fn well_known(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

impl PathReplace {
    /// The new path for `path` (which the rule matched).
    pub fn apply(&self, path: &str) -> String {
        match self {
            PathReplace::Full(full) => full.to_string(),
            PathReplace::Prefix { matched, with } => {
                // Element-wise, as the match was: `/foo` of `/foo/bar` leaves `/bar`.
                let matched = matched.trim_end_matches('/');
                let rest = path.strip_prefix(matched).unwrap_or(path);
                let joined = format!("{}{rest}", with.trim_end_matches('/'));
                if joined.is_empty() {
                    "/".to_owned()
                } else if !joined.starts_with('/') {
                    format!("/{joined}")
                } else {
                    joined
                }
            }
        }
    }
}

impl GatewayRedirect {
    /// The Location for a request that came in on the HTTPS listener (`https`) or the HTTP
    /// one, for `host` (without port), `path` and `query` as received.
    pub fn location(&self, https: bool, host: &str, path: &str, query: Option<&str>) -> String {
        self.location_from(https, if https { 443 } else { 80 }, host, path, query)
    }

    /// [`GatewayRedirect::location`] from a listener that declares `listener_port` (Sluice's
    /// own two declare 80 and 443 whatever port their sockets have; the others theirs).
    pub fn location_from(
        &self,
        https: bool,
        listener_port: u16,
        host: &str,
        path: &str,
        query: Option<&str>,
    ) -> String {
        let listener_scheme = if https { "https" } else { "http" };
        let scheme = self.scheme.as_deref().unwrap_or(listener_scheme);
        let port = self.port.or_else(|| match &self.scheme {
            Some(scheme) => well_known(scheme).or(Some(listener_port)),
            None => Some(listener_port),
        });
        let host = self.hostname.as_deref().unwrap_or(host);
        let mut location = format!("{scheme}://{host}");
        if let Some(port) = port.filter(|p| Some(*p) != well_known(scheme)) {
            location.push_str(&format!(":{port}"));
        }
        match &self.path {
            Some(replace) => location.push_str(&replace.apply(path)),
            None => location.push_str(path),
        }
        if let Some(query) = query {
            location.push('?');
            location.push_str(query);
        }
        location
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redirect() -> GatewayRedirect {
        GatewayRedirect {
            scheme: None,
            hostname: None,
            port: None,
            path: None,
            code: 302,
        }
    }

    #[test]
    fn the_port_comes_from_the_listener_s_declared_port_and_is_written_only_when_unusual() {
        let plain = redirect();
        assert_eq!(
            plain.location(false, "a.com", "/x", Some("q=1")),
            "http://a.com/x?q=1"
        );
        assert_eq!(plain.location(true, "a.com", "/x", None), "https://a.com/x");
        let to_https = GatewayRedirect {
            scheme: Some("https".into()),
            ..redirect()
        };
        assert_eq!(
            to_https.location(false, "a.com", "/x", None),
            "https://a.com/x"
        );
        let to_http = GatewayRedirect {
            scheme: Some("http".into()),
            ..redirect()
        };
        assert_eq!(to_http.location(true, "a.com", "/", None), "http://a.com/");
        let port = GatewayRedirect {
            port: Some(8443),
            hostname: Some("b.com".into()),
            ..to_https.clone()
        };
        assert_eq!(
            port.location(false, "a.com", "/", None),
            "https://b.com:8443/"
        );
        let port_443 = GatewayRedirect {
            port: Some(443),
            ..to_https
        };
        assert_eq!(
            port_443.location(false, "a.com", "/", None),
            "https://a.com/"
        );
        let plain_port = GatewayRedirect {
            port: Some(8080),
            ..redirect()
        };
        assert_eq!(
            plain_port.location(false, "a.com", "/", None),
            "http://a.com:8080/"
        );
    }

    #[test]
    fn paths_are_replaced_whole_or_by_the_matched_prefix() {
        let prefix = |matched: &str, with: &str| PathReplace::Prefix {
            matched: matched.into(),
            with: with.into(),
        };
        assert_eq!(prefix("/foo", "/xyz").apply("/foo/bar"), "/xyz/bar");
        assert_eq!(prefix("/foo", "/xyz").apply("/foo"), "/xyz");
        assert_eq!(prefix("/foo/", "/xyz/").apply("/foo/bar"), "/xyz/bar");
        assert_eq!(prefix("/foo", "/").apply("/foo/bar"), "/bar");
        assert_eq!(prefix("/foo", "/").apply("/foo"), "/");
        assert_eq!(prefix("/", "/new").apply("/a/b"), "/new/a/b");
        assert_eq!(PathReplace::Full("/one".into()).apply("/foo/bar"), "/one");
    }
}
