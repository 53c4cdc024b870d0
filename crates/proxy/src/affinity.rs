//! Session affinity in the upstream phase (`affinity: cookie`): the endpoint the client's
//! cookie names, a new one (and a new cookie) when it names none that is ready, and the
//! `Set-Cookie` on the answer; also which side of a canary split a client's cookie keeps it on.
//! ingress-nginx's `balancer/sticky*.lua` semantics; the values are Sluice's own.
//!
//! ```text
//!  Cookie NAME=<value>|<backend tag> ─▶ Sticky (per request) ─▶ Attempts::next
//!     ─▶ Balancer::pick_sticky ─▶ StickyTable of the backend's ready endpoints (per worker):
//!        persistent  <digest>         the endpoint with that digest, else a random one
//!        balanced    <key>.<digest>   the key's owner on the ring (digest: where the key was
//!                                     issued: the owner changed but that endpoint lives ─▶
//!                                     the owner, rebalanced; it left ─▶ a new key)
//!     a retry ─▶ another endpoint; a new cookie only with change-on-failure (or when one was
//!               being issued anyway)
//!  answer ─▶ IssuedCookie kept on it when one was issued and the route's Ingress asked for
//!  affinity ─▶ the response headers phase: Set-Cookie (after proxy-cookie-*, before the
//!  route's header edits)
//! ```
//! A digest is the stable hash of the backend tag and the endpoint's address, so every worker
//! and every replica read a cookie alike; the tag (the stable hash of the Service port) tells
//! a canary's cookie from its main backend's.

use std::cell::OnceCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::request::Parts;
use http::{header, HeaderMap, HeaderValue};
use model::affinity::{Affinity, AffinityMode, CookieContext};
use model::{Backend, Route};

use crate::headers;
use crate::ring::{stable_hash, Ring};

/// Random keys tried for a new balanced client before taking the next endpoint along the
/// ring (ingress-nginx's `MAX_UPSTREAM_CHECKS_COUNT`).
const MAX_KEY_DRAWS: u32 = 20;

/// How strictly a new endpoint is filtered (the balancer's levels, strictest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strictness {
    /// Not tried by this request, not set aside.
    Healthy,
    /// Not tried by this request.
    Untried,
    Any,
}

/// One request's affinity: what its cookie said, and the cookie its answer gets.
pub(crate) struct Sticky {
    mode: AffinityMode,
    change_on_failure: bool,
    /// The request's cookie, when it could be read.
    cookie: Option<CookieValue>,
    /// The cookie the answer issues (a new endpoint, or a balanced key rebalanced).
    issue: Option<CookieValue>,
    tag: u64,
    /// The client's browser takes `SameSite=None` (read from the request before its headers
    /// go upstream).
    same_site_none_compatible: bool,
}

/// What a cookie's first part holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CookieValue {
    /// The balanced key (0 in persistent mode).
    key: u64,
    /// The endpoint's digest.
    digest: u64,
}

/// A backend's ready endpoints with their digests, and its ring (made on first use by a
/// balanced route), as one worker last saw them.
pub(crate) struct StickyTable {
    tag: u64,
    endpoints: Box<[(SocketAddr, u64)]>,
    ring: OnceCell<Ring>,
}

impl StickyTable {
    pub(crate) fn new(backend: &Backend, active: &[SocketAddr]) -> StickyTable {
        let tag = backend_tag(backend);
        StickyTable {
            tag,
            endpoints: active.iter().map(|e| (*e, digest(tag, e))).collect(),
            ring: OnceCell::new(),
        }
    }

    fn by_digest(&self, digest: u64) -> Option<SocketAddr> {
        self.endpoints
            .iter()
            .find(|(_, d)| *d == digest)
            .map(|(e, _)| *e)
    }

    fn digest_of(&self, endpoint: SocketAddr) -> u64 {
        self.endpoints
            .iter()
            .find(|(e, _)| *e == endpoint)
            .map_or(0, |(_, d)| *d)
    }

    fn ring(&self) -> &Ring {
        self.ring.get_or_init(|| {
            let endpoints: Vec<SocketAddr> = self.endpoints.iter().map(|(e, _)| *e).collect();
            Ring::new(&endpoints)
        })
    }
}

impl Sticky {
    /// The request's affinity under `affinity`, its cookie read from `headers`.
    pub(crate) fn new(affinity: &Affinity, headers: &HeaderMap) -> Sticky {
        let cookie = cookie_value(headers, &affinity.cookie.name)
            .and_then(|text| parse(affinity.mode, text.split_once('|').map_or(text, |p| p.0)));
        let cookie_settings = &affinity.cookie;
        let same_site_none_compatible = !cookie_settings.conditional_same_site_none
            || model::affinity::same_site_none_compatible(
                headers.get(header::USER_AGENT).map(|v| v.as_bytes()),
            );
        Sticky {
            mode: affinity.mode,
            change_on_failure: affinity.change_on_failure,
            cookie,
            issue: None,
            tag: 0,
            same_site_none_compatible,
        }
    }

    /// The endpoint for the next attempt; `tried`: the endpoints that failed this request;
    /// `allowed`: whether an endpoint passes a level of the balancer's filter.
    pub(crate) fn pick(
        &mut self,
        table: &StickyTable,
        tried: &[SocketAddr],
        allowed: impl Fn(Strictness, &SocketAddr) -> bool,
    ) -> Option<SocketAddr> {
        if table.endpoints.is_empty() {
            return None;
        }
        self.tag = table.tag;
        if tried.is_empty() {
            if let Some(found) = self.cookie.and_then(|c| self.honour(table, c)) {
                return Some(found);
            }
            return Some(self.new_endpoint(table, &allowed, true));
        }
        // A retry goes elsewhere (ingress-nginx asks the cookie's endpoint again without
        // change-on-failure); the cookie changes only with it, or when one is being issued.
        let issue = self.change_on_failure || self.issue.is_some();
        Some(self.new_endpoint(table, &allowed, issue))
    }

    /// The endpoint the cookie names, if it is ready.
    fn honour(&mut self, table: &StickyTable, cookie: CookieValue) -> Option<SocketAddr> {
        match self.mode {
            AffinityMode::Persistent => table.by_digest(cookie.digest),
            AffinityMode::Balanced => {
                let owner = table.ring().walk(key_hash(cookie.key)).next()?;
                let owner_digest = table.digest_of(owner);
                if owner_digest == cookie.digest {
                    return Some(owner);
                }
                // Endpoints were added and one took the key's place: balanced mode moves the
                // client there, as ingress-nginx's ring does. The endpoint it was on left:
                // a new key, so the client stays put when that one comes back.
                table.by_digest(cookie.digest)?;
                self.issue = Some(CookieValue {
                    key: cookie.key,
                    digest: owner_digest,
                });
                Some(owner)
            }
        }
    }

    /// A new endpoint, as ingress-nginx's `pick_new_upstream`: persistent, a random one;
    /// balanced, the owner of a random key. The cookie names it when `issue`.
    fn new_endpoint(
        &mut self,
        table: &StickyTable,
        allowed: &impl Fn(Strictness, &SocketAddr) -> bool,
        issue: bool,
    ) -> SocketAddr {
        let levels = [Strictness::Healthy, Strictness::Untried, Strictness::Any];
        let (key, endpoint) = match self.mode {
            AffinityMode::Persistent => {
                let endpoints = &table.endpoints;
                let level = levels
                    .into_iter()
                    .find(|l| endpoints.iter().any(|(e, _)| allowed(*l, e)))
                    .unwrap_or(Strictness::Any);
                let candidates = endpoints.iter().filter(|(e, _)| allowed(level, e));
                let nth = fastrand::usize(..candidates.clone().count().max(1));
                let picked = candidates
                    .clone()
                    .nth(nth)
                    .map_or(endpoints[0].0, |(e, _)| *e);
                (0, picked)
            }
            AffinityMode::Balanced => {
                let ring = table.ring();
                let drawn = (0..MAX_KEY_DRAWS).find_map(|_| {
                    let key = fastrand::u64(..);
                    let owner = ring.walk(key_hash(key)).next()?;
                    allowed(Strictness::Healthy, &owner).then_some((key, owner))
                });
                drawn.unwrap_or_else(|| {
                    let key = fastrand::u64(..);
                    let mut walk = ring.walk(key_hash(key));
                    let first = walk.next().unwrap_or(table.endpoints[0].0);
                    let untried = std::iter::once(first)
                        .chain(walk)
                        .find(|e| allowed(Strictness::Untried, e));
                    (key, untried.unwrap_or(first))
                })
            }
        };
        if issue {
            self.issue = Some(CookieValue {
                key,
                digest: table.digest_of(endpoint),
            });
        }
        endpoint
    }

    /// The value of the cookie to issue, if any: `<digest>|<tag>` (persistent) or
    /// `<key>.<digest>|<tag>` (balanced), in hex.
    fn issued_value(&self) -> Option<String> {
        let issue = self.issue?;
        Some(match self.mode {
            AffinityMode::Persistent => format!("{:016x}|{:016x}", issue.digest, self.tag),
            AffinityMode::Balanced => {
                format!("{:016x}.{:016x}|{:016x}", issue.key, issue.digest, self.tag)
            }
        })
    }
}

/// The `Set-Cookie` of a newly pinned client, made when the upstream answers and added in the
/// response headers phase (after proxy-cookie-* rewrote the upstream's own cookies, which
/// nginx's proxy module does not apply to the one ingress-nginx's balancer sets).
#[derive(Clone, Debug)]
pub(crate) struct IssuedCookie(pub(crate) HeaderValue);

/// The upstream answered: the cookie to issue, kept on `response` for the response headers
/// phase. Only on the routes of the Ingress that asked for affinity (ingress-nginx's location
/// list).
pub(crate) fn keep_cookie<B>(
    response: &mut http::Response<B>,
    sticky: &Sticky,
    affinity: &Affinity,
    route: &Route,
    https: bool,
) {
    if !affinity.issues_cookie {
        return;
    }
    let Some(value) = sticky.issued_value() else {
        return;
    };
    let expires = affinity.cookie.expires.and_then(cookie_time);
    let context = CookieContext {
        value: &value,
        location_path: &route.site.path,
        expires: expires.as_deref(),
        https,
        same_site_none_compatible: sticky.same_site_none_compatible,
    };
    if let Ok(cookie) = HeaderValue::from_str(&affinity.cookie.set_cookie(&context)) {
        response.extensions_mut().insert(IssuedCookie(cookie));
    }
}

/// The response headers phase: the kept cookie, if any, joins the answer's headers.
pub(crate) fn set_cookie<B>(response: &mut http::Response<B>) {
    if let Some(IssuedCookie(cookie)) = response.extensions_mut().remove::<IssuedCookie>() {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
}

/// The side of a canary split the client's cookie names, before the canary's header, cookie
/// and weight (each side has the affinity, its cookie carries the side's backend tag; the
/// order is the model's, `Route::affinity_side`); `None`: no such cookie, the rules decide.
pub(crate) fn sticky_side<'r>(route: &'r Arc<Route>, head: &Parts) -> Option<&'r Arc<Route>> {
    if route.traffic.is_none() || !head.headers.contains_key(header::COOKIE) {
        return None;
    }
    route.affinity_side(|side| affinitized(side, &head.headers))
}

/// The request's cookie for `route`'s affinity names `route`'s backend (ingress-nginx's
/// `is_affinitized`).
fn affinitized(route: &Route, headers: &HeaderMap) -> bool {
    let Some(affinity) = &route.policy.affinity else {
        return false;
    };
    let tag = cookie_value(headers, &affinity.cookie.name)
        .and_then(|text| text.split_once('|'))
        .and_then(|(_, tag)| u64::from_str_radix(tag, 16).ok());
    tag.is_some_and(|tag| tag == backend_tag(&route.backend))
}

/// The value of cookie `name` (HTTP/2 clients may split cookies over several headers).
fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| headers::cookie(value, name))
}

/// A cookie's first part in `mode`'s form; `None` when it is not one Sluice issued.
fn parse(mode: AffinityMode, text: &str) -> Option<CookieValue> {
    let hex = |text: &str| {
        (text.len() == 16)
            .then(|| u64::from_str_radix(text, 16).ok())
            .flatten()
    };
    match mode {
        AffinityMode::Persistent => Some(CookieValue {
            key: 0,
            digest: hex(text)?,
        }),
        AffinityMode::Balanced => {
            let (key, digest) = text.split_once('.')?;
            Some(CookieValue {
                key: hex(key)?,
                digest: hex(digest)?,
            })
        }
    }
}

/// The stable hash of a backend's Service port (`namespace/name:port`).
pub(crate) fn backend_tag(backend: &Backend) -> u64 {
    let Some(key) = backend.key() else {
        return 0;
    };
    let name = format!(
        "{}/{}:{}",
        key.service.namespace, key.service.name, key.port_name
    );
    stable_hash(name.as_bytes())
}

/// An endpoint's digest under a backend's tag (the salt: one pod behind two Services has two).
fn digest(tag: u64, endpoint: &SocketAddr) -> u64 {
    stable_hash(format!("{tag:016x}{endpoint}").as_bytes())
}

fn key_hash(key: u64) -> u64 {
    stable_hash(&key.to_le_bytes())
}

/// nginx's `cookie_time` of now + `seconds`: `Thu, 18-Nov-10 11:27:35 GMT`.
fn cookie_time(seconds: i64) -> Option<String> {
    let now = SystemTime::now();
    let offset = Duration::from_secs(seconds.unsigned_abs());
    let at = if seconds >= 0 {
        now.checked_add(offset)?
    } else {
        now.checked_sub(offset)?
    };
    // `Sun, 06 Nov 1994 08:49:37 GMT` ─▶ `Sun, 06-Nov-94 08:49:37 GMT`.
    let http = httpdate::fmt_http_date(at);
    let (day, rest) = http.split_at(7);
    let (month, rest) = rest.split_at(5);
    let (year, time) = rest.split_at(4);
    Some(format!("{day}-{}-{}{time}", month.trim(), year.get(2..)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::affinity::SessionCookie;
    use model::{BackendKey, EndpointSet, NamespacedName};

    fn backend(service: &str, ports: &[u16]) -> Backend {
        Backend::new(
            BackendKey {
                service: NamespacedName::new("default", service),
                port_name: "http".into(),
            },
            EndpointSet {
                ready: ports
                    .iter()
                    .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
                    .collect(),
                ..EndpointSet::default()
            },
        )
    }

    fn affinity(mode: AffinityMode) -> Affinity {
        Affinity {
            mode,
            canary_behavior: Default::default(),
            cookie: SessionCookie::default(),
            change_on_failure: false,
            issues_cookie: true,
        }
    }

    fn table(backend: &Backend) -> StickyTable {
        backend.with_endpoints(|set| StickyTable::new(backend, set.active()))
    }

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let cookie = format!("other=1; INGRESSCOOKIE={value}");
        headers.insert(header::COOKIE, HeaderValue::from_str(&cookie).unwrap());
        headers
    }

    /// A first pick for a client, and the cookie it was given.
    fn first(
        mode: AffinityMode,
        table: &StickyTable,
        headers: &HeaderMap,
    ) -> (u16, Option<String>) {
        let mut sticky = Sticky::new(&affinity(mode), headers);
        let picked = sticky.pick(table, &[], |_, _| true).unwrap();
        (picked.port(), sticky.issued_value())
    }

    #[test]
    fn a_cookie_keeps_its_endpoint_in_both_modes_and_a_gone_one_gets_a_new_cookie() {
        for mode in [AffinityMode::Persistent, AffinityMode::Balanced] {
            let all = table(&backend("web", &[1, 2, 3, 4]));
            let (port, cookie) = first(mode, &all, &HeaderMap::new());
            let cookie = cookie.expect("a new client gets a cookie");
            for _ in 0..20 {
                assert_eq!(first(mode, &all, &with_cookie(&cookie)), (port, None));
            }
            // Another endpoint leaves: the client stays.
            let others: Vec<u16> = [1, 2, 3, 4].into_iter().filter(|p| *p != port).collect();
            let fewer: Vec<u16> = [port]
                .into_iter()
                .chain(others[1..].iter().copied())
                .collect();
            let fewer = table(&backend("web", &fewer));
            assert_eq!(first(mode, &fewer, &with_cookie(&cookie)), (port, None));
            // Its own leaves: another endpoint and a new cookie.
            let gone = table(&backend("web", &others));
            let (moved, new) = first(mode, &gone, &with_cookie(&cookie));
            assert_ne!(moved, port);
            let new = new.expect("a new cookie");
            // Its old endpoint back: the new cookie keeps it where it went (balanced: unless
            // the returning endpoint takes the new key, as an added one takes 1/N of them).
            if mode == AffinityMode::Persistent {
                assert_eq!(first(mode, &all, &with_cookie(&new)), (moved, None));
            }
        }
    }

    #[test]
    fn a_cookie_of_another_backend_or_mode_is_none() {
        let web = table(&backend("web", &[1, 2, 3]));
        let api = table(&backend("api", &[1, 2, 3]));
        let (_, cookie) = first(AffinityMode::Persistent, &web, &HeaderMap::new());
        let cookie = cookie.unwrap();
        // The digest is salted with the backend: api does not know it.
        assert!(first(AffinityMode::Persistent, &api, &with_cookie(&cookie))
            .1
            .is_some());
        assert!(first(AffinityMode::Balanced, &web, &with_cookie(&cookie))
            .1
            .is_some());
        assert!(first(AffinityMode::Balanced, &web, &with_cookie("junk|1"))
            .1
            .is_some());
    }

    #[test]
    fn a_retry_goes_elsewhere_and_changes_the_cookie_only_on_failure_when_asked() {
        let all = table(&backend("web", &[1, 2, 3]));
        let (port, cookie) = first(AffinityMode::Persistent, &all, &HeaderMap::new());
        let tried = [SocketAddr::from(([127, 0, 0, 1], port))];
        let untried = |l: Strictness, e: &SocketAddr| l == Strictness::Any || !tried.contains(e);
        for change in [false, true] {
            let headers = with_cookie(cookie.as_deref().unwrap());
            let mut sticky = Sticky::new(
                &Affinity {
                    change_on_failure: change,
                    ..affinity(AffinityMode::Persistent)
                },
                &headers,
            );
            assert_eq!(sticky.pick(&all, &[], untried).unwrap().port(), port);
            let retry = sticky.pick(&all, &tried, untried).unwrap();
            assert_ne!(retry.port(), port);
            assert_eq!(sticky.issued_value().is_some(), change);
        }
    }

    #[test]
    fn balanced_moves_some_clients_to_added_endpoints_persistent_none() {
        let few = table(&backend("web", &[1, 2]));
        let more = table(&backend("web", &[1, 2, 3, 4]));
        for (mode, moves) in [
            (AffinityMode::Persistent, false),
            (AffinityMode::Balanced, true),
        ] {
            let moved = (0..200)
                .filter(|_| {
                    let (port, cookie) = first(mode, &few, &HeaderMap::new());
                    first(mode, &more, &with_cookie(&cookie.unwrap())).0 != port
                })
                .count();
            assert_eq!(moved > 0, moves, "{mode:?}: {moved} of 200 moved");
        }
    }

    #[test]
    fn cookie_time_is_nginxs_format() {
        let text = cookie_time(0).unwrap();
        assert_eq!(text.len(), "Thu, 18-Nov-10 11:27:35 GMT".len(), "{text}");
        assert_eq!(&text[7..8], "-");
        assert_eq!(&text[11..12], "-");
        assert!(text.ends_with(" GMT"));
    }
}
