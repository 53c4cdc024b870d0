//! `proxy-redirect-from`/`-to`, `proxy-cookie-path`, `proxy-cookie-domain`: nginx's
//! `proxy_redirect`, `proxy_cookie_path` and `proxy_cookie_domain` on the upstream's answer.
//!
//! ```text
//!  upstream answer ─▶ Location: <from>…          ─▶ Location: <to>…
//!                     Refresh: 5; url=<from>…    ─▶ Refresh: 5; url=<to>…
//!                     Set-Cookie: …; Path=<from>… ─▶ …; Path=<to>…
//!                     Set-Cookie: …; Domain=<d>  ─▶ …; Domain=<to>
//! ```
//!
//! Matching as nginx's: the redirect and the cookie path by a case-sensitive prefix (the
//! prefix replaced, the rest kept), the cookie domain by the whole value case-insensitively
//! (a leading `.` of either ignored); attribute names (`path=`, `domain=`, `url=`) are found
//! case-insensitively. Only literal text: nginx variables and regexes are refused when read.

use serde::Serialize;

/// One literal `from` → `to` pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Replace {
    pub from: String,
    pub to: String,
}

/// The rewrites of one route's upstream answers; at least one is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ResponseRewrite {
    /// `Location`, and the URL of `Refresh` (after its `url=`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<Replace>,
    /// `Set-Cookie`'s `Path` attribute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_path: Option<Replace>,
    /// `Set-Cookie`'s `Domain` attribute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cookie_domain: Option<Replace>,
}

impl Replace {
    /// `value` with the prefix `from` replaced, or `None` when it does not start with it.
    fn prefix(&self, value: &str) -> Option<String> {
        value
            .strip_prefix(self.from.as_str())
            .map(|rest| format!("{}{rest}", self.to))
    }

    /// `to` when `value` is `from` (case-insensitively, a leading `.` of either ignored; the
    /// value's own `.` is kept, as nginx does).
    fn domain(&self, value: &str) -> Option<String> {
        let (dot, bare) = match value.strip_prefix('.') {
            Some(bare) => (".", bare),
            None => ("", value),
        };
        let from = self.from.strip_prefix('.').unwrap_or(&self.from);
        bare.eq_ignore_ascii_case(from)
            .then(|| format!("{dot}{}", self.to))
    }
}

impl ResponseRewrite {
    pub fn is_empty(&self) -> bool {
        self.redirect.is_none() && self.cookie_path.is_none() && self.cookie_domain.is_none()
    }

    /// A `Location` value rewritten; `None`: unchanged.
    pub fn location(&self, value: &str) -> Option<String> {
        self.redirect.as_ref()?.prefix(value)
    }

    /// A `Refresh` value (`5; url=/x`) with its URL rewritten; `None`: unchanged.
    pub fn refresh(&self, value: &str) -> Option<String> {
        let redirect = self.redirect.as_ref()?;
        let at = find_ignore_case(value, "url=")? + "url=".len();
        let rewritten = redirect.prefix(&value[at..])?;
        Some(format!("{}{rewritten}", &value[..at]))
    }

    /// A `Set-Cookie` value with its `Path` / `Domain` attributes rewritten; `None`:
    /// unchanged. The name=value pair before the first `;` is never an attribute.
    pub fn set_cookie(&self, value: &str) -> Option<String> {
        if self.cookie_path.is_none() && self.cookie_domain.is_none() {
            return None;
        }
        let mut parts = value.split(';');
        let mut out = String::with_capacity(value.len() + 16);
        out.push_str(parts.next().unwrap_or_default());
        let mut changed = false;
        for part in parts {
            out.push(';');
            let rewritten = part.split_once('=').and_then(|(name, attr)| {
                let trimmed = name.trim();
                let new = if trimmed.eq_ignore_ascii_case("path") {
                    self.cookie_path.as_ref()?.prefix(attr)
                } else if trimmed.eq_ignore_ascii_case("domain") {
                    self.cookie_domain.as_ref()?.domain(attr)
                } else {
                    None
                }?;
                Some(format!("{name}={new}"))
            });
            match rewritten {
                Some(text) => {
                    out.push_str(&text);
                    changed = true;
                }
                None => out.push_str(part),
            }
        }
        changed.then_some(out)
    }
}

fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replace(from: &str, to: &str) -> Option<Replace> {
        Some(Replace {
            from: from.to_owned(),
            to: to.to_owned(),
        })
    }

    #[test]
    fn location_and_refresh_by_prefix() {
        let r = ResponseRewrite {
            redirect: replace("http://backend:8080/", "https://example.com/app/"),
            ..ResponseRewrite::default()
        };
        assert_eq!(
            r.location("http://backend:8080/a?b").as_deref(),
            Some("https://example.com/app/a?b")
        );
        assert_eq!(r.location("HTTP://backend:8080/a"), None, "case-sensitive");
        assert_eq!(r.location("/a"), None);
        assert_eq!(
            r.refresh("5; URL=http://backend:8080/x").as_deref(),
            Some("5; URL=https://example.com/app/x")
        );
        assert_eq!(r.refresh("5"), None);
    }

    #[test]
    fn cookie_path_and_domain() {
        let r = ResponseRewrite {
            cookie_path: replace("/one/", "/"),
            cookie_domain: replace("localhost", "example.org"),
            ..ResponseRewrite::default()
        };
        assert_eq!(
            r.set_cookie("a=path=/one/; PATH=/one/x; Domain=.LocalHost; HttpOnly")
                .as_deref(),
            Some("a=path=/one/; PATH=/x; Domain=.example.org; HttpOnly")
        );
        assert_eq!(r.set_cookie("a=b; path=/two/; domain=other"), None);
        assert_eq!(
            ResponseRewrite::default().set_cookie("a=b; path=/one/"),
            None
        );
    }
}
