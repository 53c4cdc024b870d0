//! CORS (`enable-cors` and the `cors-*` annotations) as ingress-nginx's template writes it, and
//! Gateway API's `CORS` filter by its own rules ([`CorsRules`]): which requests get the
//! `Access-Control-*` headers, and which `OPTIONS` Sluice answers 204 itself. Pure: the proxy
//! asks [`Cors::grant`] with the request's `Origin` and method.
//!
//! ```text
//!  Origin header ─▶ AllowedOrigins::Any ─▶ `*` (whatever the Origin, or none)
//!                └▶ AllowedOrigins::List ─▶ an entry matches (case-insensitively, at the end
//!                   of the Origin) ─▶ the Origin echoed │ none ─▶ no CORS at all
//!  granted + OPTIONS ─▶ preflight: 204 here, never the backend
//!  granted, any other method ─▶ the headers on whatever answers (backend or Sluice's error)
//! ```
//! Gateway API's rules differ where ingress-nginx's template has traps: an origin entry is
//! the whole Origin (`*.` one or more labels), a preflight is an `OPTIONS` that asks for a
//! method (`Access-Control-Request-Method`), answered here whether its origin is allowed or not, `*` with credentials echoes the Origin, and
//! `*` methods or headers echo what the preflight asked for.

use http::HeaderValue;
use serde::{Serialize, Serializer};

use crate::header_text::{optional_value_text, value_text};

/// ingress-nginx's defaults, used when an annotation is absent or refused.
pub const DEFAULT_METHODS: &str = "GET, PUT, POST, DELETE, PATCH, OPTIONS";
pub const DEFAULT_HEADERS: &str = "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization";
pub const DEFAULT_MAX_AGE: i64 = 1_728_000;

/// One route's CORS policy, its header values made once per compile.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cors {
    pub origins: AllowedOrigins,
    #[serde(serialize_with = "value_text")]
    pub allow_methods: HeaderValue,
    #[serde(serialize_with = "value_text")]
    pub allow_headers: HeaderValue,
    /// `Access-Control-Allow-Credentials: true` is sent only when on (off sends nothing, so a
    /// backend's own header passes).
    pub allow_credentials: bool,
    /// `None`: not sent (a backend's own passes).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "optional_value_text"
    )]
    pub expose_headers: Option<HeaderValue>,
    #[serde(serialize_with = "value_text")]
    pub max_age: HeaderValue,
    pub rules: CorsRules,
}

/// Whose CORS semantics a policy follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CorsRules {
    /// ingress-nginx's template: every `OPTIONS` of a granted origin is a preflight, `*` is
    /// sent as `*` (credentials or not), every header on every answer.
    IngressNginx,
    /// Gateway API's `CORS` filter: a preflight asks for a method; with credentials, `*`
    /// origins echo the Origin; `*` methods and headers echo the preflight's; an empty list is
    /// not sent; an actual request gets only the origin, credentials and exposed headers.
    GatewayApi,
}

/// `cors-allow-origin` as ingress-nginx keeps it (shown as `*` or the list).
#[derive(Clone, Debug, PartialEq)]
pub enum AllowedOrigins {
    /// `*` (the default, or `*` anywhere in the list): every request, with or without an
    /// `Origin`, gets `Access-Control-Allow-Origin: *`.
    Any,
    /// Only requests whose `Origin` matches an entry get the headers, with their `Origin`
    /// echoed. Empty (every entry refused): no request gets them.
    List(Box<[OriginPattern]>),
}

/// One `cors-allow-origin` entry: `scheme://host[:port]`, `scheme://*.host[:port]` (one label)
/// or `null`, already checked by the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OriginPattern {
    /// As written, for the golden files and diagnostics.
    written: Box<str>,
    /// Gateway API's entry: the whole Origin, and `*.` one or more labels (ingress-nginx's
    /// matches at the end of the Origin, `*` one label).
    whole: bool,
    /// `scheme://` before a `*.` wildcard, lowercased; `None`: no wildcard.
    wildcard_scheme: Option<Box<str>>,
    /// What the Origin must end with: the whole entry, or what follows the `*` (`.host:port`),
    /// lowercased.
    suffix: Box<str>,
}

/// What a granted request gets as `Access-Control-Allow-Origin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllowOrigin<'r> {
    /// `*`.
    Any,
    /// The request's own `Origin`, as it came.
    Echo(&'r HeaderValue),
}

/// The answer for one request: the headers' `Access-Control-Allow-Origin`, and whether Sluice
/// answers it itself (a preflight).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant<'r> {
    pub origin: AllowOrigin<'r>,
    pub preflight: bool,
}

impl Cors {
    /// ingress-nginx's policy with `enable-cors: "true"` alone.
    pub fn ingress_nginx_default() -> Cors {
        Cors {
            origins: AllowedOrigins::Any,
            allow_methods: HeaderValue::from_static(DEFAULT_METHODS),
            allow_headers: HeaderValue::from_static(DEFAULT_HEADERS),
            allow_credentials: true,
            expose_headers: None,
            max_age: HeaderValue::from(DEFAULT_MAX_AGE),
            rules: CorsRules::IngressNginx,
        }
    }

    /// Does this request get CORS headers (`origin`: its first `Origin` header), and is it a
    /// preflight (`options`: its method; `asks_method`: it has `Access-Control-Request-Method`)?
    /// ingress-nginx's `$cors` variable: `true` when the origin matched (always with `*`),
    /// `trueoptions` for an `OPTIONS` among those, which is answered 204 whether or not it
    /// carries `Access-Control-Request-Method`. Gateway API: a preflight asks for a method.
    pub fn grant<'r>(
        &self,
        origin: Option<&'r HeaderValue>,
        options: bool,
        asks_method: bool,
    ) -> Option<Grant<'r>> {
        let gateway = self.rules == CorsRules::GatewayApi;
        let preflight = options && (asks_method || !gateway);
        let origin = match &self.origins {
            // Browsers refuse `*` with credentials: Gateway API echoes the Origin then.
            AllowedOrigins::Any if gateway && self.allow_credentials => match origin {
                Some(origin) => AllowOrigin::Echo(origin),
                None => AllowOrigin::Any,
            },
            AllowedOrigins::Any => AllowOrigin::Any,
            AllowedOrigins::List(patterns) => {
                let origin = origin?;
                let bytes = origin.as_bytes();
                if !patterns.iter().any(|p| p.matches(bytes)) {
                    return None;
                }
                AllowOrigin::Echo(origin)
            }
        };
        Some(Grant { origin, preflight })
    }
}

impl OriginPattern {
    /// An entry the reader accepted (ingress-nginx's `^([a-z]+://(\*\.)?[A-Za-z0-9\-.]*(:\d+)?|null)$`).
    pub fn new(written: &str) -> OriginPattern {
        let lower = written.to_ascii_lowercase();
        let (wildcard_scheme, suffix) = match lower.split_once("://*") {
            Some((scheme, rest)) => (Some(format!("{scheme}://").into()), rest.into()),
            None => (None, lower.as_str().into()),
        };
        OriginPattern {
            written: written.into(),
            whole: false,
            wildcard_scheme,
            suffix,
        }
    }

    /// A Gateway API `allowOrigins` entry (`scheme://host[:port]` or `scheme://*.host[:port]`,
    /// already checked by translate): it matches the whole Origin, case-insensitively, and
    /// `*` stands for one or more labels.
    pub fn gateway(written: &str) -> OriginPattern {
        OriginPattern {
            whole: true,
            ..OriginPattern::new(written)
        }
    }

    pub fn written(&self) -> &str {
        &self.written
    }

    /// ingress-nginx's `$http_origin ~* (entry)$`: case-insensitive and anchored at the end
    /// only, so an Origin that merely ends with the entry matches too (`null` matches
    /// `https://xnull`); `*` stands for one label of letters, digits and `-`.
    pub fn matches(&self, origin: &[u8]) -> bool {
        let Some(before) = strip_suffix_ignore_case(origin, self.suffix.as_bytes()) else {
            return false;
        };
        let Some(scheme) = &self.wildcard_scheme else {
            return !self.whole || before.is_empty();
        };
        if self.whole {
            // `scheme://` then labels: letters, digits, `-` and the dots between them.
            return strip_prefix_ignore_case(before, scheme.as_bytes()).is_some_and(|labels| {
                !labels.is_empty()
                    && labels.split(|b| *b == b'.').all(|l| {
                        !l.is_empty() && l.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
                    })
            });
        }
        let label = before
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        // The label is all the letters before the suffix: the scheme's `/` cannot be one.
        label > 0
            && strip_suffix_ignore_case(&before[..before.len() - label], scheme.as_bytes())
                .is_some()
    }
}

impl Serialize for AllowedOrigins {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AllowedOrigins::Any => serializer.serialize_str("*"),
            AllowedOrigins::List(patterns) => serializer.collect_seq(patterns.iter()),
        }
    }
}

impl Serialize for OriginPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.written)
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    (text.len() >= prefix.len() && text[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &text[prefix.len()..])
}

fn strip_suffix_ignore_case<'a>(text: &'a [u8], suffix: &[u8]) -> Option<&'a [u8]> {
    let start = text.len().checked_sub(suffix.len())?;
    text[start..]
        .eq_ignore_ascii_case(suffix)
        .then(|| &text[..start])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(entry: &str, origin: &str) -> bool {
        OriginPattern::new(entry).matches(origin.as_bytes())
    }

    #[test]
    fn exact_entries_match_scheme_host_and_port_ignoring_case() {
        assert!(matches(
            "https://origin.cors.com:8080",
            "https://origin.cors.com:8080"
        ));
        assert!(matches(
            "https://origin.cors.com",
            "HTTPS://Origin.CORS.com"
        ));
        assert!(!matches(
            "https://origin.cors.com",
            "http://origin.cors.com"
        ));
        assert!(!matches("http://origin.com", "http://origin.com:8080"));
        assert!(!matches("http://origin.com:8080", "http://origin.com"));
        assert!(!matches(
            "https://origin.com",
            "https://origin.com.evil.net"
        ));
    }

    #[test]
    fn entries_are_anchored_at_the_end_only_as_in_ingress_nginx() {
        // `(null)$` and `(https://a\.com)$`, unanchored at the start.
        assert!(matches("null", "null"));
        assert!(matches("null", "https://xnull"));
        assert!(matches("https://a.com", "xhttps://a.com"));
        assert!(!matches("https://a.com", "https://a.com/"));
    }

    #[test]
    fn a_wildcard_stands_for_exactly_one_label() {
        let entry = "http://*.origin.com:8080";
        assert!(matches(entry, "http://foo.origin.com:8080"));
        assert!(matches(entry, "http://Foo-1.ORIGIN.com:8080"));
        assert!(!matches(entry, "http://origin.com:8080"));
        assert!(!matches(entry, "http://.origin.com:8080"));
        assert!(!matches(entry, "http://a.b.origin.com:8080"));
        assert!(!matches(entry, "http://foo.origin.com"));
        assert!(!matches(entry, "https://foo.origin.com:8080"));
        assert!(!matches(entry, "http://f_o.origin.com:8080"));
    }

    #[test]
    fn any_grants_every_request_and_a_list_only_matching_origins() {
        let origin = HeaderValue::from_static("https://a.example.com");
        let other = HeaderValue::from_static("https://b.example.com");
        let any = Cors::ingress_nginx_default();
        assert_eq!(
            any.grant(None, false, false),
            Some(Grant {
                origin: AllowOrigin::Any,
                preflight: false
            })
        );
        assert_eq!(
            any.grant(Some(&origin), true, false).map(|g| g.preflight),
            Some(true)
        );
        let list = Cors {
            origins: AllowedOrigins::List(vec![OriginPattern::new("https://a.example.com")].into()),
            ..Cors::ingress_nginx_default()
        };
        assert_eq!(
            list.grant(Some(&origin), true, true),
            Some(Grant {
                origin: AllowOrigin::Echo(&origin),
                preflight: true
            })
        );
        assert_eq!(list.grant(Some(&other), true, true), None);
        assert_eq!(list.grant(None, false, false), None);
        let empty = Cors {
            origins: AllowedOrigins::List(Box::default()),
            ..Cors::ingress_nginx_default()
        };
        assert_eq!(empty.grant(Some(&origin), false, false), None);
    }

    #[test]
    fn gateway_entries_match_the_whole_origin_and_any_number_of_labels() {
        let gateway =
            |entry: &str, origin: &str| OriginPattern::gateway(entry).matches(origin.as_bytes());
        assert!(gateway("https://www.foo.com", "https://www.foo.com"));
        assert!(gateway("https://www.foo.com", "HTTPS://WWW.FOO.COM"));
        assert!(!gateway("https://www.foo.com", "xhttps://www.foo.com"));
        assert!(!gateway("https://www.foo.com", "https://www.foo.com:8443"));
        assert!(gateway("https://*.bar.com", "https://www.bar.com"));
        assert!(gateway("https://*.bar.com", "https://xpto.www.bar.com"));
        assert!(!gateway("https://*.bar.com", "https://bar.com"));
        assert!(!gateway("https://*.bar.com", "http://www.bar.com"));
        assert!(!gateway("https://*.bar.com", "https://evil.com/.bar.com"));
        assert!(!gateway("https://*.bar.com", "https://a..bar.com"));
    }

    #[test]
    fn gateway_rules_echo_the_origin_with_credentials_and_need_a_method_for_a_preflight() {
        let origin = HeaderValue::from_static("https://a.example.com");
        let cors = Cors {
            rules: CorsRules::GatewayApi,
            ..Cors::ingress_nginx_default()
        };
        assert_eq!(
            cors.grant(Some(&origin), true, true),
            Some(Grant {
                origin: AllowOrigin::Echo(&origin),
                preflight: true
            })
        );
        // An OPTIONS that asks for no method is an ordinary request, for the backend.
        assert_eq!(
            cors.grant(Some(&origin), true, false).map(|g| g.preflight),
            Some(false)
        );
        let without = Cors {
            allow_credentials: false,
            ..cors
        };
        assert_eq!(
            without.grant(Some(&origin), false, false).map(|g| g.origin),
            Some(AllowOrigin::Any)
        );
    }
}
