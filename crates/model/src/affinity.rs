//! Session affinity (`affinity: cookie` and the `session-cookie-*` annotations) as
//! ingress-nginx's Lua balancer (`balancer/sticky*.lua`) keeps it: which endpoint a client's
//! cookie names, and the `Set-Cookie` that names it. Pure: the proxy (`proxy::affinity`) reads
//! the cookie, picks the endpoint and asks [`SessionCookie::set_cookie`] for the header.
//!
//! ```text
//!  Cookie: NAME=<key>|<backend tag> ─▶ balanced: the key's place on the backend's ring
//!                                   └▶ persistent: the endpoint whose digest is the key
//!  none, unreadable, or its endpoint gone ─▶ a new endpoint ─▶ Set-Cookie (the route's own
//!  Ingress only: `issues_cookie`)
//!  the backend tag ─▶ which side of a canary split the client was sent to (sticky canaries)
//! ```

use serde::Serialize;

/// ingress-nginx's default cookie name.
pub const DEFAULT_COOKIE_NAME: &str = "INGRESSCOOKIE";

/// One route's affinity: how its backend's endpoint is chosen for a client, and the cookie.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Affinity {
    pub mode: AffinityMode,
    pub canary_behavior: CanaryBehavior,
    pub cookie: SessionCookie,
    /// `session-cookie-change-on-failure`: after a failed attempt the client is moved to the
    /// endpoint that answered, with a new cookie. Off: the cookie keeps naming the first one.
    pub change_on_failure: bool,
    /// The route's own Ingress asked for affinity, so its answers issue the cookie. False: the
    /// route shares its backend with an Ingress that did; a client's cookie is honoured, none
    /// is issued (ingress-nginx's per-backend balancer with its per-location cookie list).
    pub issues_cookie: bool,
}

/// `affinity-mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AffinityMode {
    /// A random key on the backend's consistent-hash ring: when endpoints are added, about
    /// 1/N of the clients move to them (the load is rebalanced).
    #[default]
    Balanced,
    /// The cookie names the endpoint itself: a client never moves while its endpoint lives.
    Persistent,
}

/// `affinity-canary-behavior` (read on the canary Ingress).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CanaryBehavior {
    /// The canary gets the main Ingress's affinity: a client sent to one side stays there.
    #[default]
    Sticky,
    /// The canary keeps its own (usually none): its clients are drawn again each request.
    Legacy,
}

/// The cookie's name and attributes, as the annotations set them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SessionCookie {
    pub name: String,
    /// `session-cookie-path`; `None`: the path of the location as written (ingress-nginx's
    /// `$location_path`, a regex as written on a `use-regex` Ingress).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// `session-cookie-expires`: seconds from the answer's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age: Option<i64>,
    /// As written (`None`, `lax`, …): ingress-nginx validates it case-insensitively and sends
    /// it as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
    /// `session-cookie-conditional-samesite-none`: no `SameSite=None` for the browsers that
    /// reject it (only when written `None`, exactly, as ingress-nginx compares it).
    pub conditional_same_site_none: bool,
    /// `session-cookie-secure: "true"`: always `Secure`; otherwise only over HTTPS.
    pub secure: bool,
}

/// What one answer's cookie is made of beyond the route's settings.
#[derive(Clone, Copy, Debug)]
pub struct CookieContext<'a> {
    /// The cookie's value: `<key>|<backend tag>`.
    pub value: &'a str,
    /// The location's path as written (used when `session-cookie-path` is not set).
    pub location_path: &'a str,
    /// `Expires` already formatted (`Thu, 18-Nov-10 11:27:35 GMT`), when `expires` is set.
    pub expires: Option<&'a str>,
    pub https: bool,
    /// The client's browser takes `SameSite=None` ([`same_site_none_compatible`] of its
    /// User-Agent; asked only with `conditional_same_site_none`).
    pub same_site_none_compatible: bool,
}

impl Default for SessionCookie {
    fn default() -> SessionCookie {
        SessionCookie {
            name: DEFAULT_COOKIE_NAME.to_owned(),
            path: None,
            domain: None,
            expires: None,
            max_age: None,
            same_site: None,
            conditional_same_site_none: false,
            secure: false,
        }
    }
}

impl SessionCookie {
    /// The `Set-Cookie` value, attributes in lua-resty-cookie's order (what ingress-nginx
    /// sends): `name=value; Expires; Max-Age; Domain; Path; Secure; HttpOnly; SameSite`.
    pub fn set_cookie(&self, context: &CookieContext<'_>) -> String {
        use std::fmt::Write as _;
        let mut out = String::with_capacity(96);
        let _ = write!(out, "{}={}", self.name, context.value);
        if let Some(expires) = context.expires {
            let _ = write!(out, "; Expires={expires}");
        }
        if let Some(age) = self.max_age {
            let _ = write!(out, "; Max-Age={age}");
        }
        if let Some(domain) = &self.domain {
            let _ = write!(out, "; Domain={domain}");
        }
        let path = match (&self.path, context.location_path) {
            (Some(path), _) => path.as_str(),
            // A default backend's route has no path: its location is nginx's `/`.
            (None, "") => "/",
            (None, path) => path,
        };
        let _ = write!(out, "; Path={path}");
        if self.secure || context.https {
            out.push_str("; Secure");
        }
        out.push_str("; HttpOnly");
        if let Some(same_site) = &self.same_site {
            let dropped = self.conditional_same_site_none
                && same_site == "None"
                && !context.same_site_none_compatible;
            if !dropped {
                let _ = write!(out, "; SameSite={same_site}");
            }
        }
        out
    }
}

/// Whether a browser takes `SameSite=None` (ingress-nginx's `util/same_site.lua`, from
/// Chromium's list of incompatible clients): no User-Agent counts as compatible.
pub fn same_site_none_compatible(user_agent: Option<&[u8]>) -> bool {
    let Some(agent) = user_agent else {
        return true;
    };
    let has = |needle: &str| agent.windows(needle.len()).any(|w| w == needle.as_bytes());
    !(has("Chrome/4")
        || has("Chrome/5")
        || has("Chrome/6")
        || has("CPU iPhone OS 12")
        || has("iPad; CPU OS 12")
        || (has("Macintosh") && has("Intel Mac OS X 10_14") && has("Safari") && !has("Chrome")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(https: bool, agent: Option<&[u8]>) -> CookieContext<'static> {
        CookieContext {
            value: "k|t",
            location_path: "/app",
            expires: None,
            https,
            same_site_none_compatible: same_site_none_compatible(agent),
        }
    }

    #[test]
    fn attributes_come_in_lua_resty_cookies_order() {
        let cookie = SessionCookie {
            name: "SERVERID".into(),
            domain: Some("foo.bar".into()),
            max_age: Some(259200),
            same_site: Some("Lax".into()),
            ..SessionCookie::default()
        };
        let context = CookieContext {
            expires: Some("Sun, 06-Nov-94 08:49:37 GMT"),
            ..context(true, None)
        };
        assert_eq!(
            cookie.set_cookie(&context),
            "SERVERID=k|t; Expires=Sun, 06-Nov-94 08:49:37 GMT; Max-Age=259200; Domain=foo.bar; Path=/app; Secure; HttpOnly; SameSite=Lax"
        );
    }

    #[test]
    fn secure_over_https_or_when_asked_and_path_defaults_to_the_location() {
        let plain = SessionCookie::default();
        assert_eq!(
            plain.set_cookie(&context(false, None)),
            "INGRESSCOOKIE=k|t; Path=/app; HttpOnly"
        );
        let secure = SessionCookie {
            secure: true,
            path: Some("/x".into()),
            ..SessionCookie::default()
        };
        assert_eq!(
            secure.set_cookie(&context(false, None)),
            "INGRESSCOOKIE=k|t; Path=/x; Secure; HttpOnly"
        );
        let root = CookieContext {
            location_path: "",
            ..context(false, None)
        };
        assert!(plain.set_cookie(&root).contains("; Path=/;"));
    }

    #[test]
    fn conditional_same_site_none_drops_it_for_old_browsers_only_when_written_none() {
        let old: &[u8] = b"Mozilla/5.0 (Windows NT 10.0) Chrome/59.0.3071.115 Safari/537.36";
        let new: &[u8] = b"Mozilla/5.0 (Windows NT 10.0) Chrome/120.0 Safari/537.36";
        let cookie = |written: &str| SessionCookie {
            same_site: Some(written.into()),
            conditional_same_site_none: true,
            ..SessionCookie::default()
        };
        assert!(!cookie("None")
            .set_cookie(&context(false, Some(old)))
            .contains("SameSite"));
        assert!(cookie("None")
            .set_cookie(&context(false, Some(new)))
            .ends_with("; SameSite=None"));
        // ingress-nginx compares with "None" exactly: a lower-case none is always sent.
        assert!(cookie("none")
            .set_cookie(&context(false, Some(old)))
            .ends_with("; SameSite=none"));
        assert!(same_site_none_compatible(None));
    }
}
