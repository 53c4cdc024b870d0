//! The digest-auth phase (`auth-type: digest`): RFC 2617 challenges and responses with
//! `qop=auth` and MD5, as the nginx-http-auth-digest module ingress-nginx loads for it, with
//! its lifetimes, replay counts and lock-out of guessing clients.
//!
//! ```text
//!  no / unreadable Authorization ─▶ 401, WWW-Authenticate: Digest algorithm="MD5",
//!                                    qop="auth", realm="…", nonce="<16 hex>" (remembered)
//!  Authorization: Digest username realm nonce uri qop nc cnonce response
//!    ─▶ uri is the request's target │ the user's HA1 in that realm │ response ==
//!       MD5(HA1:nonce:nc:cnonce:qop:MD5(method:uri)) │ the nonce fresh, this nc unused
//!    ─▶ on, Authentication-Info: qop="auth", rspauth="…" on the answer
//!    ─▶ otherwise 401 with a new challenge (stale="true" when only the nonce was too old:
//!       the client answers again with the same password, the user is not asked)
//!  MAX_TRIES failures from one address ─▶ 401 without a challenge for EVASION
//! ```
//! Nonces and failures live in [`Sessions`], one for every worker: a client's next
//! connection may land on another worker (SO_REUSEPORT), as on another nginx worker (the
//! module keeps them in shared memory).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use http::request::Parts;
use http::{header, HeaderValue};
use md5::{Digest, Md5};
use model::digest_auth::DigestAuth;

use crate::basic_auth::constant_eq;
use crate::headers::OriginalTarget;

/// How long a challenge waits for its first good answer (the module's `auth_digest_timeout`).
const CHALLENGE_TIMEOUT: Duration = Duration::from_secs(60);
/// After its first good answer, how long a nonce keeps being accepted
/// (`auth_digest_expires`); then the client gets a stale challenge and answers it unasked.
const NONCE_REUSE: Duration = Duration::from_secs(10);
/// A nonce accepts the nc values 1 to `REPLAYS - 1`, each once (`auth_digest_replays`).
const REPLAYS: u32 = 20;
/// Failed answers from one client address before its answers are ignored
/// (`auth_digest_maxtries`)…
const MAX_TRIES: u32 = 5;
/// …until this long after its last failure (`auth_digest_evasion_time`).
const EVASION: Duration = Duration::from_secs(300);
/// Nonces remembered at most (a challenge per unauthenticated request: a flood must not grow
/// memory); past it the oldest are forgotten, whose clients then get a stale challenge.
const NONCES_MAX: usize = 65_536;
/// Client addresses whose failures are remembered at most; past it (after forgetting the
/// expired ones) new addresses are not counted, as the module does when its zone is full.
const CLIENTS_MAX: usize = 65_536;

/// What the phase decided.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The client proved the password: `Authentication-Info` goes on the answer.
    Granted(Option<HeaderValue>),
    /// 401 with this challenge.
    Challenge(HeaderValue),
    /// 401 without a challenge: this address failed too often.
    Ignored,
}

/// The nonces handed out and the failures counted, for every worker.
pub(crate) struct Sessions {
    state: Mutex<State>,
    random: SystemRandom,
}

#[derive(Default)]
struct State {
    nonces: HashMap<u64, Nonce>,
    /// Nonces in the order they were made, to forget the oldest first.
    issued: VecDeque<u64>,
    failures: HashMap<IpAddr, Failures>,
}

struct Nonce {
    expires: Instant,
    /// Answered well at least once: `expires` is then `NONCE_REUSE` after that answer.
    answered: bool,
    /// Bit n set: nc n has been used.
    used: u32,
}

struct Failures {
    count: u32,
    /// `EVASION` after the last failure.
    until: Instant,
}

impl Sessions {
    pub(crate) fn new() -> Sessions {
        Sessions {
            state: Mutex::new(State::default()),
            random: SystemRandom::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A worker that panicked holding the lock left counters, never a torn invariant
        // worth refusing every later request for.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Decides about `head` from `client` on a route with `auth`.
    pub(crate) fn check(
        &self,
        auth: &DigestAuth,
        head: &Parts,
        client: IpAddr,
        now: Instant,
    ) -> Outcome {
        if self.ignored(client, now) {
            return Outcome::Ignored;
        }
        let answer = head
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| Answer::parse(value.as_bytes()));
        let Some(answer) = answer else {
            return Outcome::Challenge(self.challenge(&auth.realm, false, now));
        };
        match self.verify(auth, head, &answer, now) {
            Ok(info) => {
                self.state().failures.remove(&client);
                Outcome::Granted(info)
            }
            Err(stale) => {
                if !stale {
                    tracing::debug!(
                        user = %String::from_utf8_lossy(&answer.username),
                        %client,
                        "digest authentication failed"
                    );
                }
                self.failed(client, now);
                Outcome::Challenge(self.challenge(&auth.realm, stale, now))
            }
        }
    }

    /// `Ok`: a good answer, with its `Authentication-Info`. `Err(stale)`: refused; `stale`
    /// when the response proved the password and only the nonce or nc was not (any more)
    /// good.
    fn verify(
        &self,
        auth: &DigestAuth,
        head: &Parts,
        answer: &Answer,
        now: Instant,
    ) -> Result<Option<HeaderValue>, bool> {
        if !answer.names_target(head) {
            return Err(false);
        }
        let user = std::str::from_utf8(&answer.username).map_err(|_| false)?;
        let realm = std::str::from_utf8(&answer.realm).map_err(|_| false)?;
        let ha1 = auth.users.ha1(user, realm).ok_or(false)?;
        let method_uri = hex_md5(&[head.method.as_str().as_bytes(), &answer.uri]);
        let expected = answer.response_for(ha1.as_bytes(), &method_uri);
        if !constant_eq(&expected, &answer.response) {
            return Err(false);
        }
        let nonce = nonce_value(&answer.nonce).ok_or(true)?;
        let nc = nc_value(&answer.nc).ok_or(true)?;
        self.use_nonce(nonce, nc, now)?;
        // rspauth: the same digest over ":uri" instead of "method:uri", proving the server
        // knows the password too.
        let colon_uri = hex_md5(&[b"", &answer.uri]);
        let rspauth = answer.response_for(ha1.as_bytes(), &colon_uri);
        let mut info = Vec::with_capacity(96 + answer.cnonce.len());
        info.extend_from_slice(b"qop=\"auth\", rspauth=\"");
        info.extend_from_slice(&rspauth);
        info.extend_from_slice(b"\", cnonce=\"");
        info.extend_from_slice(&answer.cnonce);
        info.extend_from_slice(b"\", nc=");
        info.extend_from_slice(&answer.nc);
        Ok(HeaderValue::from_bytes(&info).ok())
    }

    /// Marks `nc` of `nonce` used. `Err(true)`: stale (unknown, expired, or an nc past
    /// `REPLAYS`); `Err(false)`: this nc was used already (a replay).
    fn use_nonce(&self, nonce: u64, nc: u32, now: Instant) -> Result<(), bool> {
        if !(1..REPLAYS).contains(&nc) {
            return Err(true);
        }
        let mut state = self.state();
        // An unknown nonce with a right response: one this process forgot (the oldest go
        // first under a flood) or another replica made; the client knows the password.
        let known = state.nonces.get_mut(&nonce).ok_or(true)?;
        if known.expires <= now {
            return Err(true);
        }
        if known.used & (1 << nc) != 0 {
            return Err(false);
        }
        known.used |= 1 << nc;
        if !known.answered {
            known.answered = true;
            known.expires = now + NONCE_REUSE;
        }
        Ok(())
    }

    /// A new challenge for `realm`, its nonce remembered.
    fn challenge(&self, realm: &str, stale: bool, now: Instant) -> HeaderValue {
        let nonce = self.issue(now);
        let stale = if stale { ", stale=\"true\"" } else { "" };
        let quoted = model::basic_auth::quoted(realm);
        let value = format!(
            "Digest algorithm=\"MD5\", qop=\"auth\", realm={quoted}, nonce=\"{nonce:016x}\"{stale}"
        );
        // The compile refused realms a header cannot carry.
        HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("Digest"))
    }

    fn issue(&self, now: Instant) -> u64 {
        let mut state = self.state();
        if state.nonces.len() >= NONCES_MAX {
            state.nonces.retain(|_, nonce| nonce.expires > now);
            while state.nonces.len() >= NONCES_MAX {
                let Some(oldest) = state.issued.pop_front() else {
                    break;
                };
                state.nonces.remove(&oldest);
            }
            let State { nonces, issued, .. } = &mut *state;
            issued.retain(|id| nonces.contains_key(id));
        }
        loop {
            let mut bytes = [0u8; 8];
            // The system's generator does not fail on Linux; a fallback keeps answering.
            if self.random.fill(&mut bytes).is_err() {
                bytes = fastrand::u64(..).to_le_bytes();
            }
            let nonce = u64::from_le_bytes(bytes);
            if state.nonces.contains_key(&nonce) {
                continue;
            }
            state.nonces.insert(
                nonce,
                Nonce {
                    expires: now + CHALLENGE_TIMEOUT,
                    answered: false,
                    used: 0,
                },
            );
            state.issued.push_back(nonce);
            return nonce;
        }
    }

    fn ignored(&self, client: IpAddr, now: Instant) -> bool {
        let state = self.state();
        state
            .failures
            .get(&client)
            .is_some_and(|f| f.count >= MAX_TRIES && now < f.until)
    }

    fn failed(&self, client: IpAddr, now: Instant) {
        let mut state = self.state();
        if state.failures.len() >= CLIENTS_MAX && !state.failures.contains_key(&client) {
            state.failures.retain(|_, f| f.until > now);
            if state.failures.len() >= CLIENTS_MAX {
                return;
            }
        }
        let failures = state.failures.entry(client).or_insert(Failures {
            count: 0,
            until: now,
        });
        // A failure after the window closed starts counting anew.
        failures.count = if now > failures.until {
            1
        } else {
            failures.count + 1
        };
        failures.until = now + EVASION;
    }
}

/// An `Authorization: Digest …` header's fields, unquoted.
#[derive(Debug, Default, PartialEq)]
struct Answer {
    username: Vec<u8>,
    realm: Vec<u8>,
    nonce: Vec<u8>,
    uri: Vec<u8>,
    qop: Vec<u8>,
    nc: Vec<u8>,
    cnonce: Vec<u8>,
    response: Vec<u8>,
}

impl Answer {
    /// `Digest name=value, name="quoted \" value", …` (the scheme in any case). `None`: not
    /// digest, not well formed, a field twice, or one of the eight fields missing (then the
    /// client gets a challenge, as for no header).
    fn parse(value: &[u8]) -> Option<Answer> {
        let rest = value.trim_ascii();
        let scheme_end = rest.iter().position(|b| *b == b' ' || *b == b'\t')?;
        if !rest[..scheme_end].eq_ignore_ascii_case(b"digest") {
            return None;
        }
        let mut answer = Answer::default();
        let mut seen = 0u8;
        let mut at = scheme_end;
        loop {
            while at < rest.len() && matches!(rest[at], b' ' | b'\t' | b',') {
                at += 1;
            }
            if at == rest.len() {
                break;
            }
            let name_start = at;
            while at < rest.len() && is_token(rest[at]) {
                at += 1;
            }
            let name = &rest[name_start..at];
            while at < rest.len() && matches!(rest[at], b' ' | b'\t') {
                at += 1;
            }
            if name.is_empty() || rest.get(at) != Some(&b'=') {
                return None;
            }
            at += 1;
            while at < rest.len() && matches!(rest[at], b' ' | b'\t') {
                at += 1;
            }
            let mut field = Vec::new();
            if rest.get(at) == Some(&b'"') {
                at += 1;
                loop {
                    match rest.get(at)? {
                        b'"' => break,
                        b'\\' => {
                            field.push(*rest.get(at + 1)?);
                            at += 2;
                        }
                        other => {
                            field.push(*other);
                            at += 1;
                        }
                    }
                }
                at += 1;
            } else {
                let start = at;
                while at < rest.len() && is_token(rest[at]) {
                    at += 1;
                }
                field.extend_from_slice(&rest[start..at]);
            }
            if at < rest.len() && !matches!(rest[at], b' ' | b'\t' | b',') {
                return None;
            }
            let (bit, slot) = match name.to_ascii_lowercase().as_slice() {
                b"username" => (0, &mut answer.username),
                b"realm" => (1, &mut answer.realm),
                b"nonce" => (2, &mut answer.nonce),
                b"uri" => (3, &mut answer.uri),
                b"qop" => (4, &mut answer.qop),
                b"nc" => (5, &mut answer.nc),
                b"cnonce" => (6, &mut answer.cnonce),
                b"response" => (7, &mut answer.response),
                // algorithm, opaque, userhash, extensions: not part of the MD5 + auth digest.
                _ => continue,
            };
            if seen & (1 << bit) != 0 {
                return None;
            }
            seen |= 1 << bit;
            *slot = field;
        }
        let complete = seen == 0xff
            && answer.nonce.len() == 16
            && [&answer.username, &answer.uri, &answer.qop, &answer.nc]
                .iter()
                .chain([&&answer.cnonce, &&answer.response])
                .all(|field| !field.is_empty());
        complete.then_some(answer)
    }

    /// Whether `uri` names the request's target as the client sent it (before a normalising
    /// or rewrite-target, as nginx's `$request_uri`): exactly, or the same up to its query
    /// (the module accepts that for .NET's client, which leaves the query out). Over HTTP/2
    /// the target is `:path`; an absolute-form target may be named either way.
    fn names_target(&self, head: &Parts) -> bool {
        let uri = self.uri.as_slice();
        let original = head
            .extensions
            .get::<OriginalTarget>()
            .map(|o| o.0.as_str());
        let path_and_query =
            original.unwrap_or_else(|| head.uri.path_and_query().map_or("/", |p| p.as_str()));
        let same = |target: &[u8]| {
            target == uri
                || (target.len() > uri.len()
                    && target.starts_with(uri)
                    && target[uri.len()] == b'?')
        };
        same(path_and_query.as_bytes())
            || (head.uri.scheme().is_some() && same(head.uri.to_string().as_bytes()))
    }

    /// `MD5(HA1:nonce:nc:cnonce:qop:HA2)` in lower-case hex.
    fn response_for(&self, ha1: &[u8], ha2: &[u8; 32]) -> [u8; 32] {
        hex_md5(&[ha1, &self.nonce, &self.nc, &self.cnonce, &self.qop, ha2])
    }
}

/// RFC 9110's tchar.
fn is_token(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// `MD5(parts joined with ':')` in lower-case hex, as digest authentication hashes.
fn hex_md5(parts: &[&[u8]]) -> [u8; 32] {
    let mut md5 = Md5::new();
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            md5.update(b":");
        }
        md5.update(part);
    }
    let digest = md5.finalize();
    let mut hex = [0u8; 32];
    for (index, byte) in digest.iter().enumerate() {
        hex[2 * index] = HEX[usize::from(byte >> 4)];
        hex[2 * index + 1] = HEX[usize::from(byte & 0x0f)];
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The 16 hex digits of a nonce this module made.
fn nonce_value(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    (text.len() == 16).then(|| u64::from_str_radix(text, 16).ok())?
}

/// nc: hex digits (8 by the RFC).
fn nc_value(text: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(text).ok()?;
    (text.len() <= 8 && !text.starts_with('+')).then(|| u32::from_str_radix(text, 16).ok())?
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use model::digest_auth::DigestUsers;

    use super::*;

    /// HA1 = MD5("Mufasa:testrealm@host.com:Circle Of Life"), RFC 2617 §3.5's example.
    const MUFASA: &str = "939e7578ed9e3c518a452acee763bce9";

    fn auth() -> DigestAuth {
        let file = DigestUsers::from_htdigest(&format!("Mufasa:testrealm@host.com:{MUFASA}\n"));
        DigestAuth {
            realm: "testrealm@host.com".into(),
            secret: "default/users".into(),
            users: Arc::new(file.users),
        }
    }

    fn head(authorization: Option<&str>) -> Parts {
        let mut request = http::Request::get("/dir/index.html");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn nonce_of(challenge: &HeaderValue) -> String {
        let text = challenge.to_str().unwrap();
        let start = text.find("nonce=\"").unwrap() + 7;
        text[start..start + 16].to_owned()
    }

    /// The RFC's example request, answered to `nonce` with `nc`.
    fn answer(nonce: &str, nc: &str) -> String {
        let ha2 = hex_md5(&[b"GET", b"/dir/index.html"]);
        let response = hex_md5(&[
            MUFASA.as_bytes(),
            nonce.as_bytes(),
            nc.as_bytes(),
            b"0a4f113b",
            b"auth",
            &ha2,
        ]);
        let response = std::str::from_utf8(&response).unwrap().to_owned();
        format!("Digest username=\"Mufasa\", realm=\"testrealm@host.com\", nonce=\"{nonce}\", uri=\"/dir/index.html\", qop=auth, nc={nc}, cnonce=\"0a4f113b\", response=\"{response}\", opaque=\"x\"")
    }

    #[test]
    fn the_rfc_example_digest() {
        // RFC 2617 §3.5: this nonce, nc and cnonce give this response.
        let ha2 = hex_md5(&[b"GET", b"/dir/index.html"]);
        let response = hex_md5(&[
            MUFASA.as_bytes(),
            b"dcd98b7102dd2f0e8b11d0f600bfb0c093",
            b"00000001",
            b"0a4f113b",
            b"auth",
            &ha2,
        ]);
        assert_eq!(&response, b"6629fae49393a05397450978507c4ef1");
    }

    #[test]
    fn a_challenge_answered_lets_in_once_per_nc() {
        let sessions = Sessions::new();
        let auth = auth();
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let now = Instant::now();
        let Outcome::Challenge(challenge) = sessions.check(&auth, &head(None), client, now) else {
            panic!("no challenge");
        };
        let text = challenge.to_str().unwrap();
        assert!(
            text.starts_with(
                "Digest algorithm=\"MD5\", qop=\"auth\", realm=\"testrealm@host.com\", nonce=\""
            ),
            "{text}"
        );
        let nonce = nonce_of(&challenge);
        let first = answer(&nonce, "00000001");
        let Outcome::Granted(Some(info)) = sessions.check(&auth, &head(Some(&first)), client, now)
        else {
            panic!("refused");
        };
        let info = info.to_str().unwrap();
        let rspauth = hex_md5(&[
            MUFASA.as_bytes(),
            nonce.as_bytes(),
            b"00000001",
            b"0a4f113b",
            b"auth",
            &hex_md5(&[b"", b"/dir/index.html"]),
        ]);
        let rspauth = std::str::from_utf8(&rspauth).unwrap();
        assert_eq!(
            info,
            format!("qop=\"auth\", rspauth=\"{rspauth}\", cnonce=\"0a4f113b\", nc=00000001")
        );
        // The same nc again: a replay, refused without stale.
        let Outcome::Challenge(again) = sessions.check(&auth, &head(Some(&first)), client, now)
        else {
            panic!("replay let in");
        };
        assert!(!again.to_str().unwrap().contains("stale"));
        // The next nc is good; one past REPLAYS is stale.
        let second = answer(&nonce, "00000002");
        assert!(matches!(
            sessions.check(&auth, &head(Some(&second)), client, now),
            Outcome::Granted(_)
        ));
        let past = answer(&nonce, &format!("{REPLAYS:08x}"));
        let Outcome::Challenge(stale) = sessions.check(&auth, &head(Some(&past)), client, now)
        else {
            panic!("nc past the replays let in");
        };
        assert!(stale.to_str().unwrap().ends_with(", stale=\"true\""));
    }

    #[test]
    fn nonces_expire_unanswered_after_a_minute_and_answered_after_ten_seconds() {
        let sessions = Sessions::new();
        let auth = auth();
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let start = Instant::now();
        let nonce_at = |now| {
            let Outcome::Challenge(c) = sessions.check(&auth, &head(None), client, now) else {
                panic!("no challenge")
            };
            nonce_of(&c)
        };
        let stale = |outcome: Outcome| matches!(outcome, Outcome::Challenge(c) if c.to_str().unwrap().contains("stale=\"true\""));
        let late = nonce_at(start);
        let after_a_minute = start + CHALLENGE_TIMEOUT + Duration::from_secs(1);
        let request = head(Some(&answer(&late, "00000001")));
        assert!(stale(sessions.check(
            &auth,
            &request,
            client,
            after_a_minute
        )));

        let used = nonce_at(start);
        let request = head(Some(&answer(&used, "00000001")));
        assert!(matches!(
            sessions.check(&auth, &request, client, start + Duration::from_secs(30)),
            Outcome::Granted(_)
        ));
        let request = head(Some(&answer(&used, "00000002")));
        let later = start + Duration::from_secs(30) + NONCE_REUSE + Duration::from_secs(1);
        assert!(stale(sessions.check(&auth, &request, client, later)));
        // A nonce this process never made (forgotten, or another replica's): stale too.
        let request = head(Some(&answer("00000000deadbeef", "00000001")));
        assert!(stale(sessions.check(&auth, &request, client, start)));
    }

    #[test]
    fn a_guessing_address_is_ignored_for_the_evasion_time() {
        let sessions = Sessions::new();
        let auth = auth();
        let guesser: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        let start = Instant::now();
        let wrong = "Digest username=\"Mufasa\", realm=\"testrealm@host.com\", nonce=\"0123456789abcdef\", uri=\"/dir/index.html\", qop=auth, nc=00000001, cnonce=\"x\", response=\"00000000000000000000000000000000\"";
        for _ in 0..MAX_TRIES {
            assert!(matches!(
                sessions.check(&auth, &head(Some(wrong)), guesser, start),
                Outcome::Challenge(_)
            ));
        }
        assert!(matches!(
            sessions.check(&auth, &head(None), guesser, start),
            Outcome::Ignored
        ));
        assert!(matches!(
            sessions.check(&auth, &head(None), other, start),
            Outcome::Challenge(_)
        ));
        let later = start + EVASION + Duration::from_secs(1);
        assert!(matches!(
            sessions.check(&auth, &head(None), guesser, later),
            Outcome::Challenge(_)
        ));
    }

    #[test]
    fn answers_are_read_as_clients_write_them() {
        let parsed = Answer::parse(
            b"digest username=\"a\\\"b\", REALM=r, nonce=\"0123456789abcdef\",uri=\"/x?y\",  qop=auth, nc=00000001, cnonce=\"c\", response=\"d\", algorithm=MD5",
        )
        .unwrap();
        assert_eq!(parsed.username, b"a\"b");
        assert_eq!(parsed.realm, b"r");
        assert_eq!(parsed.uri, b"/x?y");
        assert_eq!(parsed.nc, b"00000001");
        // Basic, a field missing or twice, a short nonce, an unterminated quote: no answer.
        for bad in [
            "Basic YW5uOnM=",
            "Digest username=\"a\", realm=r, nonce=\"0123456789abcdef\", uri=\"/\", qop=auth, nc=1, cnonce=c",
            "Digest username=a, username=b, realm=r, nonce=\"0123456789abcdef\", uri=\"/\", qop=auth, nc=1, cnonce=c, response=d",
            "Digest username=a, realm=r, nonce=\"0123\", uri=\"/\", qop=auth, nc=1, cnonce=c, response=d",
            "Digest username=\"a, realm=r",
            "Digest",
        ] {
            assert_eq!(Answer::parse(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn the_uri_must_name_the_request_target() {
        let answer = |uri: &str| Answer {
            uri: uri.as_bytes().to_vec(),
            ..Answer::default()
        };
        let head = http::Request::get("/a/b?c=d")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert!(answer("/a/b?c=d").names_target(&head));
        assert!(answer("/a/b").names_target(&head));
        assert!(!answer("/a").names_target(&head));
        assert!(!answer("/a/b?c").names_target(&head));
        assert!(!answer("/other").names_target(&head));
        let h2 = http::Request::get("https://example.com/a/b")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert!(answer("/a/b").names_target(&h2));
        assert!(answer("https://example.com/a/b").names_target(&h2));
    }
}
