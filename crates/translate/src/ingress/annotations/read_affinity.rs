//! Session affinity (`affinity`, `affinity-mode`, `affinity-canary-behavior`,
//! `session-cookie-*`), checked with ingress-nginx's validators (`annotations/sessionaffinity`),
//! each refused value falling back to ingress-nginx's default with an error naming it, and the
//! `use-regex` trap (no `session-cookie-path`) in a notice.

use std::sync::{Arc, LazyLock};

use regex::Regex;

use model::affinity::{Affinity, AffinityMode, CanaryBehavior, SessionCookie, DEFAULT_COOKIE_NAME};
use model::Severity;

use super::reader::{go_bool, Reader};

/// The annotations read only with `affinity: cookie`.
const COMPANIONS: [&str; 10] = [
    "session-cookie-name",
    "session-cookie-path",
    "session-cookie-domain",
    "session-cookie-expires",
    "session-cookie-max-age",
    "session-cookie-samesite",
    "session-cookie-conditional-samesite-none",
    "session-cookie-secure",
    "session-cookie-change-on-failure",
    "affinity-mode",
];

/// ingress-nginx's `BasicCharsRegex` (cookie name and domain).
static BASIC_CHARS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[/\-._~a-zA-Z0-9/:]*$").unwrap());
/// ingress-nginx's `URLIsValidRegex` (cookie path).
static URL_CHARS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[\-._~a-zA-Z0-9/:,?&=]*$").unwrap());
/// ingress-nginx's check of `session-cookie-expires` and `-max-age`: anchored at one end only
/// on each side of the `|` (as written there), so the number is also parsed.
static SECONDS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(^0|-?[1-9]\d*$)").unwrap());

impl Reader<'_> {
    /// The affinity block, or `None` without `affinity: cookie` (the only type; ingress-nginx
    /// then ignores the `session-cookie-*` annotations). `regex_paths`: the Ingress's paths
    /// are regular expressions (`use-regex`, `rewrite-target`).
    pub(super) fn affinity(
        &mut self,
        regex_paths: bool,
        canary_behavior: CanaryBehavior,
    ) -> Option<Arc<Affinity>> {
        match self.get("affinity") {
            Some("cookie") => {}
            None => {
                self.no_effect_without(&COMPANIONS, "affinity: cookie");
                return None;
            }
            Some(value) => {
                self.refused("affinity", value, "none (no session affinity)");
                self.no_effect_without(&COMPANIONS, "affinity: cookie");
                return None;
            }
        }
        let mode = match self.get("affinity-mode") {
            None | Some("balanced") => AffinityMode::Balanced,
            Some("persistent") => AffinityMode::Persistent,
            Some(value) => {
                self.refused("affinity-mode", value, "balanced");
                AffinityMode::Balanced
            }
        };
        let mut cookie = SessionCookie::default();
        if let Some(value) = self.get("session-cookie-name") {
            // The name goes into a header as written: the validator's characters, minus the
            // ones a cookie name may not hold (`/`, `:`), which would make the cookie unusable.
            if !value.is_empty() && BASIC_CHARS.is_match(value) && !value.contains(['/', ':']) {
                cookie.name = value.to_owned();
            } else {
                self.refused("session-cookie-name", value, DEFAULT_COOKIE_NAME);
            }
        }
        cookie.path = self.cookie_text("session-cookie-path", &URL_CHARS);
        cookie.domain = self.cookie_text("session-cookie-domain", &BASIC_CHARS);
        cookie.expires = self.seconds("session-cookie-expires");
        cookie.max_age = self.seconds("session-cookie-max-age");
        if let Some(value) = self.get("session-cookie-samesite") {
            if ["none", "lax", "strict"].contains(&value.to_ascii_lowercase().as_str()) {
                cookie.same_site = Some(value.to_owned());
            } else {
                self.refused(
                    "session-cookie-samesite",
                    value,
                    "none (no SameSite attribute)",
                );
            }
        }
        cookie.conditional_same_site_none = self.flag("session-cookie-conditional-samesite-none");
        cookie.secure = self.flag("session-cookie-secure");
        let change_on_failure = self.flag("session-cookie-change-on-failure");
        // What a migration meets: sessions pinned by ingress-nginx are pinned again, once.
        let key = self.key("affinity");
        self.diagnose(
            Severity::Difference,
            format!("annotation {key}: the cookie's values are Sluice's own, so a client holding one that ingress-nginx issued is given an endpoint and a cookie anew, once"),
        );
        if regex_paths && cookie.path.is_none() {
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: session-cookie-path should be set when use-regex is true (ingress-nginx's warning): the cookie's Path is each location as written, a regular expression that browsers compare literally, so the cookie may never be sent back"),
            );
        }
        Some(Arc::new(Affinity {
            mode,
            canary_behavior,
            cookie,
            change_on_failure,
            issues_cookie: true,
        }))
    }

    /// `affinity-canary-behavior`, read with or without `affinity` (it matters on a canary
    /// Ingress, whose own affinity is usually none).
    pub(super) fn canary_behavior(&mut self) -> CanaryBehavior {
        match self.get("affinity-canary-behavior") {
            None | Some("sticky") => CanaryBehavior::Sticky,
            Some("legacy") => CanaryBehavior::Legacy,
            Some(value) => {
                self.refused("affinity-canary-behavior", value, "sticky");
                CanaryBehavior::Sticky
            }
        }
    }

    /// A boolean `session-cookie-*` annotation: false when absent or refused.
    fn flag(&mut self, name: &str) -> bool {
        let Some(value) = self.get(name) else {
            return false;
        };
        go_bool(value).unwrap_or_else(|| {
            self.refused(name, value, "false");
            false
        })
    }

    /// A text attribute checked against `chars`; empty is the same as absent.
    fn cookie_text(&mut self, name: &str, chars: &Regex) -> Option<String> {
        let value = self.get(name).filter(|v| !v.is_empty())?;
        if chars.is_match(value) {
            Some(value.to_owned())
        } else {
            self.refused(name, value, "none (no such attribute)");
            None
        }
    }

    /// `session-cookie-expires` / `-max-age`: seconds, possibly negative (sent as written).
    fn seconds(&mut self, name: &str) -> Option<i64> {
        let value = self.get(name).filter(|v| !v.is_empty())?;
        match value.parse::<i64>() {
            Ok(seconds) if SECONDS.is_match(value) => Some(seconds),
            _ => {
                self.refused(name, value, "none (a session cookie)");
                None
            }
        }
    }
}
