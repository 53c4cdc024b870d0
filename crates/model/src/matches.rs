//! What a rule asks of a request beyond its host and path: headers, cookies, query
//! parameters, the method. A rule matches when its path does and every one of these does.
//!
//! ```text
//!  request head ─▶ RequestMatch::Header  name, value exact | regex   (repeated header lines:
//!                                                                    their values joined ", ")
//!               ─▶ RequestMatch::Cookie  name (any case), value      (the first cookie so named)
//!               ─▶ RequestMatch::Query   name, value exact | regex   (the first parameter so
//!                                                                    named, as sent: no decoding)
//!               ─▶ RequestMatch::Method
//! ```
//! The header and cookie rules are nginx's `$http_<name>` and `$cookie_<name>`, which
//! ingress-nginx's canary rules read, so a translated rule sees the value nginx saw. A missing
//! header, cookie or parameter matches nothing, not even an empty value.

use std::fmt;

use http::header::{HeaderMap, HeaderName, COOKIE};
use http::request::Parts;
use http::Method;
use regex::Regex;

/// One condition of a rule.
#[derive(Clone, Debug)]
pub enum RequestMatch {
    Header { name: HeaderName, value: ValueMatch },
    Cookie { name: Box<str>, value: ValueMatch },
    Query { name: Box<str>, value: ValueMatch },
    Method(Method),
}

/// How a value is compared.
#[derive(Clone, Debug)]
pub enum ValueMatch {
    /// Byte for byte, case included.
    Exact(Box<str>),
    /// Somewhere in the value, unless the pattern anchors itself (ingress-nginx's
    /// `canary-by-header-pattern` is unanchored; a translator that wants a whole-value match
    /// writes `^(?:…)$`).
    Regex(Regex),
}

impl ValueMatch {
    fn matches(&self, value: &[u8]) -> bool {
        match self {
            ValueMatch::Exact(expected) => expected.as_bytes() == value,
            ValueMatch::Regex(pattern) => {
                std::str::from_utf8(value).is_ok_and(|value| pattern.is_match(value))
            }
        }
    }
}

impl RequestMatch {
    /// Does the request satisfy this condition?
    pub fn matches(&self, head: &Parts) -> bool {
        match self {
            RequestMatch::Header { name, value } => header_matches(&head.headers, name, value),
            RequestMatch::Cookie { name, value } => {
                cookie(&head.headers, name).is_some_and(|found| value.matches(found))
            }
            RequestMatch::Query { name, value } => head
                .uri
                .query()
                .and_then(|query| query_parameter(query, name))
                .is_some_and(|found| value.matches(found.as_bytes())),
            RequestMatch::Method(method) => head.method == method,
        }
    }

    /// All of `matches` hold (true for none).
    pub fn all(matches: &[RequestMatch], head: &Parts) -> bool {
        matches.iter().all(|m| m.matches(head))
    }
}

/// A header's value as nginx's `$http_<name>` gives it: one line as it is, several joined with
/// `, ` (the one case that allocates).
fn header_matches(headers: &HeaderMap, name: &HeaderName, value: &ValueMatch) -> bool {
    let mut lines = headers.get_all(name).iter();
    let Some(first) = lines.next() else {
        return false;
    };
    let Some(second) = lines.next() else {
        return value.matches(first.as_bytes());
    };
    let mut joined = Vec::with_capacity(first.len() + second.len() + 2);
    joined.extend_from_slice(first.as_bytes());
    for line in std::iter::once(second).chain(lines) {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(line.as_bytes());
    }
    value.matches(&joined)
}

/// The first cookie named `name` (compared without regard to case, as nginx does) across the
/// request's `Cookie` lines; its value without surrounding spaces.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h [u8]> {
    headers.get_all(COOKIE).iter().find_map(|line| {
        line.as_bytes().split(|&b| b == b';').find_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            let (key, value) = (&pair[..eq], &pair[eq + 1..]);
            key.trim_ascii()
                .eq_ignore_ascii_case(name.as_bytes())
                .then(|| value.trim_ascii())
        })
    })
}

/// The first parameter named `name` (exactly) in a query string, as sent.
fn query_parameter<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then_some(value)
    })
}

impl fmt::Display for ValueMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueMatch::Exact(value) => write!(f, "= {value:?}"),
            ValueMatch::Regex(pattern) => write!(f, "~ {:?}", pattern.as_str()),
        }
    }
}

impl fmt::Display for RequestMatch {
    /// One line for `/config` and golden files: `header x-canary = "always"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestMatch::Header { name, value } => write!(f, "header {name} {value}"),
            RequestMatch::Cookie { name, value } => write!(f, "cookie {name} {value}"),
            RequestMatch::Query { name, value } => write!(f, "query {name} {value}"),
            RequestMatch::Method(method) => write!(f, "method {method}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: &str, uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut request = http::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn exact(value: &str) -> ValueMatch {
        ValueMatch::Exact(value.into())
    }

    #[test]
    fn headers_match_nginx_s_value_of_them() {
        let rule = RequestMatch::Header {
            name: HeaderName::from_static("x-canary"),
            value: exact("always"),
        };
        assert!(rule.matches(&head("GET", "/", &[("X-Canary", "always")])));
        assert!(!rule.matches(&head("GET", "/", &[("x-canary", "Always")])));
        assert!(!rule.matches(&head("GET", "/", &[])));
        // Two lines: nginx joins them, so neither alone matches.
        let two = head("GET", "/", &[("x-canary", "always"), ("x-canary", "never")]);
        assert!(!rule.matches(&two));
        let joined = RequestMatch::Header {
            name: HeaderName::from_static("x-canary"),
            value: exact("always, never"),
        };
        assert!(joined.matches(&two));
        let pattern = RequestMatch::Header {
            name: HeaderName::from_static("x-user"),
            value: ValueMatch::Regex(Regex::new("^(alice|bob)$").unwrap()),
        };
        assert!(pattern.matches(&head("GET", "/", &[("x-user", "bob")])));
        assert!(!pattern.matches(&head("GET", "/", &[("x-user", "bobby")])));
        let unanchored = RequestMatch::Header {
            name: HeaderName::from_static("x-user"),
            value: ValueMatch::Regex(Regex::new("ob").unwrap()),
        };
        assert!(unanchored.matches(&head("GET", "/", &[("x-user", "bobby")])));
    }

    #[test]
    fn cookies_are_found_by_name_in_any_line() {
        let rule = RequestMatch::Cookie {
            name: "canary".into(),
            value: exact("always"),
        };
        let lines = [("cookie", "a=1; Canary = always ;b=2")];
        assert!(rule.matches(&head("GET", "/", &lines)));
        let second_line = [("cookie", "a=1"), ("cookie", "canary=always")];
        assert!(rule.matches(&head("GET", "/", &second_line)));
        // The first cookie so named decides.
        let first_wins = [("cookie", "canary=never; canary=always")];
        assert!(!rule.matches(&head("GET", "/", &first_wins)));
        assert!(!rule.matches(&head("GET", "/", &[("cookie", "xcanary=always")])));
        assert!(!rule.matches(&head("GET", "/", &[("x-canary", "always")])));
    }

    #[test]
    fn query_parameters_and_methods() {
        let rule = RequestMatch::Query {
            name: "v".into(),
            value: exact("2"),
        };
        assert!(rule.matches(&head("GET", "/p?a=1&v=2", &[])));
        assert!(!rule.matches(&head("GET", "/p?v=1&v=2", &[])));
        assert!(!rule.matches(&head("GET", "/p?vv=2", &[])));
        assert!(!rule.matches(&head("GET", "/p", &[])));
        let post = RequestMatch::Method(Method::POST);
        assert!(post.matches(&head("POST", "/", &[])));
        assert!(!post.matches(&head("GET", "/", &[])));
        assert!(RequestMatch::all(&[], &head("GET", "/", &[])));
        assert!(!RequestMatch::all(
            &[rule, post],
            &head("POST", "/?v=1", &[])
        ));
    }
}
