//! Mirroring (ingress-nginx's `mirror-target`, `mirror-host`, `mirror-request-body`): a copy
//! of each request of a route goes to another backend too; its answer is thrown away.
//!
//! ```text
//!  mirror-target "https://10.0.0.9:8443$request_uri" ─MirrorTarget::parse─▶ scheme, host, port,
//!      uri: a template of literals and request variables (or a fixed path)
//!  translate: host ─▶ an IP literal (one endpoint) │ <svc>.<ns>.svc[.cluster.local] (that
//!      Service port's endpoint cell) │ another name: the endpoints the control plane's
//!      resolver finds for it (no DNS on the data path)
//!  proxy, per request: Mirror × the client's head ─▶ the mirrored head (mirror.rs there) ─▶
//!      sent without waiting; the main request never waits for it
//! ```
//! What nginx does, and what this keeps: `proxy_pass` with variables sends the expanded URL's
//! path as it is; without variables it sends its own path with the client's query appended, and
//! without any path the mirror location's own (`/_mirror-<Ingress UID>`), also with the query.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use http::HeaderValue;
use serde::{Serialize, Serializer};

use crate::access_log::{parse_request_key, Segment, Variable};
use crate::endpoints::Backend;
use crate::upstream_tls::UpstreamTls;

/// A route's mirror: where the copy goes and what it carries (and, for Gateway API's several
/// `RequestMirror` filters, the next mirror).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Mirror {
    /// `mirror-target` as written.
    pub target: String,
    /// The `Host` the copy is sent with: `mirror-host`, else the target's host.
    #[serde(serialize_with = "value_text")]
    pub host: HeaderValue,
    /// The request line's target.
    pub uri: MirrorUri,
    /// `mirror-request-body` (default on): the client's body goes to the mirror too.
    pub request_body: bool,
    /// Where the copy goes: a Service port (`namespace/name:port`) or an address.
    #[serde(serialize_with = "arc_text")]
    pub upstream_name: Arc<str>,
    #[serde(skip)]
    pub backend: Arc<Backend>,
    /// An `https` target: TLS as nginx's `proxy_pass https://` makes it (no verification, no
    /// SNI).
    #[serde(skip)]
    pub tls: Option<Arc<UpstreamTls>>,
    /// The copy is sent with HTTP/2 in cleartext (h2c) and `te: trailers`: a GRPCRoute's
    /// mirror, as gRPC servers speak nothing else. Otherwise HTTP/1.1.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub http2: bool,
    /// Gateway API's `percent` / `fraction`: the share of requests copied, `numerator` of
    /// `denominator` (drawn per request); `None`: every request (ingress-nginx's mirror).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<MirrorShare>,
    /// Gateway API's further `RequestMirror` filters of the rule: each gets its own copy.
    /// `None` for Ingress's one `mirror-target`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::policy::optional_arc"
    )]
    pub also: Option<Arc<Mirror>>,
}

/// A share of requests, `numerator` in `denominator` (numerator ≤ denominator, denominator > 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MirrorShare {
    pub numerator: u32,
    pub denominator: u32,
}

impl MirrorShare {
    /// Whether a request whose draw (uniform in `0..denominator`) is `draw` is copied.
    pub fn takes(self, draw: u32) -> bool {
        draw < self.numerator
    }
}

impl PartialEq for Mirror {
    fn eq(&self, other: &Mirror) -> bool {
        self.target == other.target
            && self.host == other.host
            && self.uri == other.uri
            && self.request_body == other.request_body
            && self.http2 == other.http2
            && Arc::ptr_eq(&self.backend, &other.backend)
            && self.share == other.share
            && self.also == other.also
    }
}

impl Mirror {
    /// This mirror and those after it (`also`), in the rule's order.
    pub fn chain(self: &Arc<Mirror>) -> impl Iterator<Item = &Arc<Mirror>> {
        std::iter::successors(Some(self), |mirror| mirror.also.as_ref())
    }

    /// This chain with `last` added at its end.
    pub fn followed_by(&self, last: Arc<Mirror>) -> Mirror {
        let mut chain = self.clone();
        chain.also = Some(match &self.also {
            Some(next) => Arc::new(next.followed_by(last)),
            None => last,
        });
        chain
    }

    /// Applies `edit` to every mirror of the chain (GRPCRoute's HTTP/2 copies).
    pub fn edit_each(self: &mut Arc<Mirror>, edit: &impl Fn(&mut Mirror)) {
        let mirror = Arc::make_mut(self);
        edit(mirror);
        if let Some(next) = &mut mirror.also {
            next.edit_each(edit);
        }
    }
}

/// The path and query a mirrored request is sent with.
#[derive(Clone, Debug, PartialEq)]
pub enum MirrorUri {
    /// A target without variables: this path, with the client's query (after any rewrite)
    /// appended, as nginx's `proxy_pass` with a URI does in an exact location.
    Fixed(String),
    /// A target with variables (`$request_uri`, `$args`, `$http_x`…): the expansion, sent
    /// as it is (nginx appends nothing to a `proxy_pass` with variables). An expansion that
    /// is not a valid origin-form target drops that copy.
    Template(Box<[Segment]>),
}

impl Serialize for MirrorUri {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            MirrorUri::Fixed(path) => serializer.serialize_str(&format!("{path} + client query")),
            MirrorUri::Template(_) => serializer.serialize_str("expanded per request"),
        }
    }
}

/// A `mirror-target` URL, checked: `http(s)://host[:port]` and an optional path template.
#[derive(Clone, Debug, PartialEq)]
pub struct MirrorTarget {
    pub https: bool,
    /// Lowercase; an IPv6 address without its brackets.
    pub host: String,
    /// The written port, else 80 or 443.
    pub port: u16,
    /// `None`: the target has no path (nginx then sends the mirror location's own path).
    pub uri: Option<MirrorUri>,
}

/// Where a mirror target's host leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MirrorHost<'a> {
    Address(IpAddr),
    /// `<name>.<namespace>.svc` or `<name>.<namespace>.svc.cluster.local`.
    Service {
        namespace: &'a str,
        name: &'a str,
    },
    /// Any other name: the control plane resolves it.
    Name,
}

impl MirrorTarget {
    /// Reads a `mirror-target`; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<MirrorTarget, String> {
        let (https, rest) = if has_prefix(text, "http://") {
            (false, &text[7..])
        } else if has_prefix(text, "https://") {
            (true, &text[8..])
        } else {
            return Err("not an http:// or https:// URL".to_owned());
        };
        let end = rest.find(['/', '?', '$', '#']).unwrap_or(rest.len());
        let (authority, uri) = rest.split_at(end);
        let (host, port) = split_authority(authority)?;
        let port = match port {
            None => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(format!("invalid port {port:?}")),
            },
        };
        let uri = if uri.is_empty() {
            None
        } else if uri.contains('$') {
            Some(MirrorUri::Template(template(uri)?))
        } else {
            Some(MirrorUri::Fixed(fixed(uri)?))
        };
        Ok(MirrorTarget {
            https,
            host,
            port,
            uri,
        })
    }

    /// What the host names.
    pub fn host_kind(&self) -> MirrorHost<'_> {
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return MirrorHost::Address(ip);
        }
        let service = self
            .host
            .strip_suffix(".svc.cluster.local")
            .or_else(|| self.host.strip_suffix(".svc"));
        match service.and_then(|s| s.split_once('.')) {
            Some((name, namespace))
                if crate::target::is_dns_label(name) && crate::target::is_dns_label(namespace) =>
            {
                MirrorHost::Service { namespace, name }
            }
            _ => MirrorHost::Name,
        }
    }

    /// The `Host` nginx sends without `mirror-host`: the URL's host without its port (Go's
    /// `url.Hostname()`; an IPv6 address in brackets, as a `Host` must write it).
    pub fn default_host(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }
}

impl fmt::Display for MirrorTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.default_host(), self.port)
    }
}

fn has_prefix(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

/// `host[:port]`, `[v6][:port]`: the host lowercased, checked as an address or a DNS name.
fn split_authority(authority: &str) -> Result<(String, Option<&str>), String> {
    if authority.is_empty() {
        return Err("no host".to_owned());
    }
    if authority.contains('@') {
        return Err("user information in the URL is not supported".to_owned());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| "an IPv6 address without its closing ]".to_owned())?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("invalid IPv6 address {host:?}"));
        }
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("unexpected {after:?} after the address")),
            },
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let host = host.to_ascii_lowercase();
    let name_ok = host.parse::<IpAddr>().is_ok()
        || (!host.is_empty() && host.split('.').all(crate::target::is_dns_label));
    if !name_ok {
        return Err(format!("invalid host {host:?}"));
    }
    Ok((host, port))
}

/// A path with variables: the request's, as `upstream-hash-by` knows them, but not `$uri`,
/// which in nginx's mirror location is that location's own path.
fn template(uri: &str) -> Result<Box<[Segment]>, String> {
    if !(uri.starts_with('/') || uri.starts_with('$')) {
        return Err(format!("the path {uri:?} must start with / or a variable"));
    }
    let segments = parse_request_key(uri)?;
    if segments
        .iter()
        .any(|s| matches!(s, Segment::Variable(Variable::Uri)))
    {
        return Err("`$uri` is the mirror location's own path in ingress-nginx \
                    (/_mirror-<Ingress UID>); use $request_uri"
            .to_owned());
    }
    Ok(segments.into_boxed_slice())
}

/// A fixed path: origin form, no query of its own.
fn fixed(uri: &str) -> Result<String, String> {
    if !uri.starts_with('/') {
        return Err(format!("the path {uri:?} must start with /"));
    }
    if uri.contains('?') || uri.contains('#') {
        return Err(format!(
            "a query or fragment in a target without variables ({uri:?}) is not supported"
        ));
    }
    uri.parse::<http::uri::PathAndQuery>()
        .map_err(|_| format!("invalid path {uri:?}"))?;
    Ok(uri.to_owned())
}

fn arc_text<S: Serializer>(value: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value)
}

fn value_text<S: Serializer>(value: &HeaderValue, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(value.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_as_ingress_nginx_documents_them() {
        let t = MirrorTarget::parse("https://test.env.com$request_uri").unwrap();
        assert!(t.https);
        assert_eq!((t.host.as_str(), t.port), ("test.env.com", 443));
        assert_eq!(
            t.uri,
            Some(MirrorUri::Template(
                vec![Segment::Variable(Variable::RequestUri)].into()
            ))
        );
        assert_eq!(t.host_kind(), MirrorHost::Name);

        let t = MirrorTarget::parse("HTTP://10.0.0.9:8080/copy").unwrap();
        assert!(!t.https);
        assert_eq!(t.port, 8080);
        assert_eq!(t.uri, Some(MirrorUri::Fixed("/copy".into())));
        assert_eq!(t.host_kind(), MirrorHost::Address([10, 0, 0, 9].into()));

        let t = MirrorTarget::parse("http://[::1]:81").unwrap();
        assert_eq!((t.host.as_str(), t.port, &t.uri), ("::1", 81, &None));
        assert_eq!(t.default_host(), "[::1]");

        let t = MirrorTarget::parse("http://shadow.test.svc.cluster.local/$request_uri").unwrap();
        assert_eq!(
            t.host_kind(),
            MirrorHost::Service {
                namespace: "test",
                name: "shadow"
            }
        );
        let t = MirrorTarget::parse("http://Shadow.Test.svc:8080").unwrap();
        assert_eq!(
            t.host_kind(),
            MirrorHost::Service {
                namespace: "test",
                name: "shadow"
            }
        );
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let wrong = |text: &str| MirrorTarget::parse(text).unwrap_err();
        assert!(wrong("IamNotAURL").contains("not an http"));
        assert!(wrong("ftp://x/").contains("not an http"));
        assert!(wrong("http://").contains("no host"));
        assert!(wrong("http://a..b/").contains("invalid host"));
        assert!(wrong("http://u@h/").contains("user information"));
        assert!(wrong("http://h:0/").contains("invalid port"));
        assert!(wrong("http://h:99999/").contains("invalid port"));
        assert!(wrong("http://h/$someparam").contains("$someparam"));
        assert!(wrong("http://h$uri").contains("$request_uri"));
        assert!(wrong("http://h/$upstream_addr").contains("$upstream_addr"));
        assert!(wrong("http://h/a?b=1").contains("query"));
    }
}
