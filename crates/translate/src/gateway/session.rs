//! HTTPRoute `rules[].sessionPersistence` (experimental channel; deprecated in v1.7 in favour of
//! GEP-4894's Backend, still served) onto the rule's policy as the affinity Ingresses get from
//! `affinity: cookie` (`model::affinity`): one mechanism, the proxy's.
//!
//! ```text
//!  type Cookie (the default) ─▶ Affinity, persistent: the cookie names the endpoint, so a
//!     client stays on it while it lives (and on its share of weighted backendRefs)
//!     cookie.name             ─▶ the cookie's name (none: `sluice-<hash of route and rule>`,
//!                                the same on every replica)
//!     cookie.path             ─▶ Path (default `/`)
//!     lifetimeType Permanent  ─▶ Max-Age = absoluteTimeout (required: without it, a session
//!                                cookie and a diagnostic)
//!     lifetimeType Session    ─▶ no Max-Age: the browser session; an absoluteTimeout is not
//!                                enforced (a diagnostic)
//!  type Header                ─▶ a diagnostic: not implemented; served without persistence
//!  a malformed value          ─▶ a diagnostic naming the field; served without persistence
//! ```

use std::sync::Arc;

use model::affinity::{Affinity, AffinityMode, CanaryBehavior, SessionCookie};
use model::policy::RoutePolicy;
use model::{ObjectRef, Severity};

use super::objects::SessionPersistence;
use super::timeouts::parse_duration;
use crate::compiler::Compiler;

/// A rule's session persistence, read once (a rule may compile into one route per match).
#[derive(Clone, Debug, Default)]
pub(super) struct RuleSession(Option<Arc<Affinity>>);

impl RuleSession {
    pub(super) fn apply(&self, policy: Arc<RoutePolicy>) -> Arc<RoutePolicy> {
        match &self.0 {
            None => policy,
            Some(affinity) => Arc::new(RoutePolicy {
                affinity: Some(affinity.clone()),
                ..(*policy).clone()
            }),
        }
    }
}

impl Compiler<'_> {
    /// Rule `r`'s `sessionPersistence` (`field` is the rule's path), with a diagnostic for
    /// what is not served.
    pub(super) fn rule_session(
        &mut self,
        (object, field): (&ObjectRef, &str),
        r: usize,
        persistence: Option<&SessionPersistence>,
    ) -> RuleSession {
        let Some(persistence) = persistence else {
            return RuleSession::default();
        };
        let at = format!("{field}.sessionPersistence");
        let (session, problems) = read(object, (&at, r), persistence);
        for (severity, reason) in problems {
            self.diagnose_with(severity, object.clone(), reason);
        }
        session
    }
}

fn read(
    object: &ObjectRef,
    (at, r): (&str, usize),
    persistence: &SessionPersistence,
) -> (RuleSession, Vec<(Severity, String)>) {
    let mut problems = Vec::new();
    // Served without persistence, and why.
    let refuse = |severity: Severity, why: String| {
        let why = format!("{why}; served without session persistence");
        (RuleSession::default(), vec![(severity, why)])
    };
    match persistence.type_.as_deref() {
        None | Some("Cookie") => {}
        Some("Header") => {
            let why = format!("{at}.type Header: not supported by Sluice (yet)");
            return refuse(Severity::Unsupported, why);
        }
        Some(other) => {
            return refuse(
                Severity::Error,
                format!("{at}.type {other:?}: must be Cookie or Header"),
            );
        }
    }
    let timeout = match persistence.absolute_timeout.as_deref() {
        None => None,
        Some(text) => {
            match parse_duration(text) {
                Some(timeout) => Some(timeout),
                None => {
                    let why = format!("{at}.absoluteTimeout {text:?}: not a Gateway API duration (e.g. 1h, 30m, 10s)");
                    return refuse(Severity::Error, why);
                }
            }
        }
    };
    let cookie = persistence.cookie.clone().unwrap_or_default();
    let permanent = match cookie.lifetime_type.as_deref() {
        None | Some("Session") => false,
        Some("Permanent") => true,
        Some(other) => {
            let why = format!("{at}.cookie.lifetimeType {other:?}: must be Session or Permanent");
            return refuse(Severity::Error, why);
        }
    };
    let max_age = match (permanent, timeout) {
        (true, Some(timeout)) => Some(timeout.as_secs().max(1) as i64),
        (true, None) => {
            problems.push((
                Severity::Error,
                format!("{at}.cookie.lifetimeType Permanent needs an absoluteTimeout (its Max-Age); a session cookie is issued"),
            ));
            None
        }
        (false, Some(_)) => {
            problems.push((
                Severity::Unsupported,
                format!("{at}.absoluteTimeout: not enforced on a Session cookie (it lasts the browser session); use lifetimeType Permanent for a Max-Age"),
            ));
            None
        }
        (false, None) => None,
    };
    let name = match cookie.name {
        Some(name) if valid_cookie_name(&name) => name,
        Some(name) => {
            let why = format!("{at}.cookie.name {name:?}: not a cookie name (RFC 6265 token)");
            return refuse(Severity::Error, why);
        }
        None => generated_name(object, r),
    };
    let affinity = Affinity {
        mode: AffinityMode::Persistent,
        canary_behavior: CanaryBehavior::Sticky,
        cookie: SessionCookie {
            name,
            path: Some(cookie.path.unwrap_or_else(|| "/".to_owned())),
            max_age,
            ..SessionCookie::default()
        },
        change_on_failure: false,
        issues_cookie: true,
    };
    (RuleSession(Some(Arc::new(affinity))), problems)
}

/// An RFC 6265 cookie name: a token (no separators, controls or spaces).
fn valid_cookie_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b))
}

/// A cookie name unique to the route's rule and the same on every replica: FNV-1a of
/// `namespace/name/rule`.
fn generated_name(object: &ObjectRef, r: usize) -> String {
    let text = format!("{}/{}/{r}", object.namespace, object.name);
    format!(
        "sluice-{:08x}",
        super::infrastructure_objects::stable_hash(&text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::objects::SessionCookieConfig;
    use model::Kind;

    fn route() -> ObjectRef {
        ObjectRef::new(Kind::HTTPRoute, "app", "shop")
    }

    fn cookie(name: Option<&str>, lifetime: Option<&str>) -> Option<SessionCookieConfig> {
        Some(SessionCookieConfig {
            name: name.map(str::to_owned),
            lifetime_type: lifetime.map(str::to_owned),
            ..SessionCookieConfig::default()
        })
    }

    fn read_one(persistence: SessionPersistence) -> (Option<Arc<Affinity>>, Vec<String>) {
        let (session, problems) = read(
            &route(),
            ("spec.rules[2].sessionPersistence", 2),
            &persistence,
        );
        (
            session.0,
            problems.into_iter().map(|(_, why)| why).collect(),
        )
    }

    #[test]
    fn a_permanent_cookie_has_its_name_path_and_max_age() {
        let (affinity, problems) = read_one(SessionPersistence {
            absolute_timeout: Some("1h30m".into()),
            cookie: cookie(Some("shop-session"), Some("Permanent")),
            ..SessionPersistence::default()
        });
        assert!(problems.is_empty(), "{problems:?}");
        let affinity = affinity.unwrap();
        assert_eq!(affinity.mode, AffinityMode::Persistent);
        assert_eq!(affinity.cookie.name, "shop-session");
        assert_eq!(affinity.cookie.path.as_deref(), Some("/"));
        assert_eq!(affinity.cookie.max_age, Some(5400));
        assert!(affinity.issues_cookie);
    }

    #[test]
    fn a_session_cookie_without_a_name_gets_one_per_rule() {
        let (affinity, problems) = read_one(SessionPersistence::default());
        assert!(problems.is_empty(), "{problems:?}");
        let name = affinity.unwrap().cookie.name.clone();
        assert!(name.starts_with("sluice-") && name.len() == 15, "{name}");
        assert_ne!(
            name,
            generated_name(&route(), 3),
            "another rule, another name"
        );
        assert_eq!(
            name,
            generated_name(&route(), 2),
            "the same on every replica"
        );
    }

    #[test]
    fn what_is_not_served_is_said_with_its_field() {
        let cases = [
            (
                SessionPersistence {
                    type_: Some("Header".into()),
                    ..Default::default()
                },
                false,
                "spec.rules[2].sessionPersistence.type Header: not supported",
            ),
            (
                SessionPersistence {
                    absolute_timeout: Some("soon".into()),
                    ..Default::default()
                },
                false,
                "sessionPersistence.absoluteTimeout \"soon\": not a Gateway API duration",
            ),
            (
                SessionPersistence {
                    cookie: cookie(Some("a b"), None),
                    ..Default::default()
                },
                false,
                "sessionPersistence.cookie.name \"a b\": not a cookie name",
            ),
            (
                SessionPersistence {
                    cookie: cookie(None, Some("Permanent")),
                    ..Default::default()
                },
                true,
                "Permanent needs an absoluteTimeout",
            ),
            (
                SessionPersistence {
                    absolute_timeout: Some("10m".into()),
                    ..Default::default()
                },
                true,
                "absoluteTimeout: not enforced on a Session cookie",
            ),
        ];
        for (persistence, served, said) in cases {
            let (affinity, problems) = read_one(persistence);
            assert_eq!(affinity.is_some(), served, "{said}");
            assert!(
                problems.len() == 1 && problems[0].contains(said),
                "{problems:?}"
            );
        }
    }
}
