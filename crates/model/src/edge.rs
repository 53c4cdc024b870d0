//! What the ConfigMap asks of every request and every answer, whatever the route: the block
//! lists (`block-cidrs`, `block-user-agents`, `block-referers`) and the upstream headers
//! the client never sees (`hide-headers`, `server-tokens`, `allow-backend-server-header`).
//!
//! ```text
//!  request ─▶ Blocklist::blocks(client address, User-Agent, Referer) ─yes─▶ 403
//!             (before routing: ingress-nginx checks them in every server block)
//!  answer  ─▶ ResponseFilter: the upstream's hidden headers out, then `Server` as
//!             server-tokens / allow-backend-server-header say
//! ```
//! Both are made once per compile from `Settings`; a ConfigMap without these keys makes
//! neither, and the request path pays one `is_none()` for each.

use std::net::IpAddr;

use http::{header, HeaderMap, HeaderName, HeaderValue};
use ipnet::IpNet;
use regex::bytes::{Regex, RegexBuilder};

/// One entry of `block-user-agents` / `block-referers`, as nginx's `map` reads it: `~regex`
/// (case-sensitive), `~*regex` (case-insensitive), else a string equal to the whole value
/// ignoring case. An absent header is the empty value (a `~^$` entry blocks it).
#[derive(Clone, Debug)]
pub enum HeaderPattern {
    /// Lower case.
    Exact(Box<[u8]>),
    Regex(Regex),
}

/// A regex above this is refused: the patterns run on every request.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

impl HeaderPattern {
    /// An entry as written (trimmed); `Err` says why it cannot be used.
    pub fn parse(entry: &str) -> Result<HeaderPattern, String> {
        let (source, case_insensitive) = match entry.strip_prefix("~*") {
            Some(rest) => (rest, true),
            None => match entry.strip_prefix('~') {
                Some(rest) => (rest, false),
                None => {
                    // nginx's `\` before a value that would read as a special parameter.
                    let text = entry.strip_prefix('\\').unwrap_or(entry);
                    return Ok(HeaderPattern::Exact(
                        text.to_ascii_lowercase().into_bytes().into_boxed_slice(),
                    ));
                }
            },
        };
        if source.is_empty() {
            return Err(format!("{entry:?} is an empty regular expression"));
        }
        RegexBuilder::new(source)
            .case_insensitive(case_insensitive)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map(HeaderPattern::Regex)
            .map_err(|e| format!("{entry:?} is not a regular expression Sluice can run: {e}"))
    }

    pub fn matches(&self, value: &[u8]) -> bool {
        match self {
            HeaderPattern::Exact(text) => value.eq_ignore_ascii_case(text),
            HeaderPattern::Regex(regex) => regex.is_match(value),
        }
    }
}

/// The ConfigMap's block lists; a request any of them names is answered 403.
#[derive(Clone, Debug, Default)]
pub struct Blocklist {
    pub cidrs: Vec<IpNet>,
    pub user_agents: Vec<HeaderPattern>,
    pub referers: Vec<HeaderPattern>,
}

impl Blocklist {
    /// The lists as the ConfigMap keys hold them (entries checked when they were read: one
    /// that does not parse here is left out). `None` when all three are empty.
    pub fn new(cidrs: &[IpNet], user_agents: &[String], referers: &[String]) -> Option<Blocklist> {
        let patterns = |entries: &[String]| {
            entries
                .iter()
                .filter_map(|e| HeaderPattern::parse(e).ok())
                .collect::<Vec<_>>()
        };
        let list = Blocklist {
            cidrs: cidrs.to_vec(),
            user_agents: patterns(user_agents),
            referers: patterns(referers),
        };
        let empty =
            list.cidrs.is_empty() && list.user_agents.is_empty() && list.referers.is_empty();
        (!empty).then_some(list)
    }

    /// Whether a request from `client` with these headers is refused. Every value of a
    /// repeated header is checked, so a second `User-Agent` cannot hide the first.
    pub fn blocks(&self, client: IpAddr, headers: &HeaderMap) -> bool {
        let client = client.to_canonical();
        self.cidrs.iter().any(|net| net.contains(&client))
            || Self::names(&self.user_agents, headers, &header::USER_AGENT)
            || Self::names(&self.referers, headers, &header::REFERER)
    }

    fn names(patterns: &[HeaderPattern], headers: &HeaderMap, name: &HeaderName) -> bool {
        if patterns.is_empty() {
            return false;
        }
        let mut values = headers.get_all(name).iter().peekable();
        if values.peek().is_none() {
            return patterns.iter().any(|p| p.matches(b""));
        }
        values.any(|value| patterns.iter().any(|p| p.matches(value.as_bytes())))
    }
}

/// What happens to an answer's headers on its way to the client: the upstream's
/// `hide-headers` removed, and `Server` as nginx's `server_tokens` with ingress-nginx's
/// `more_clear_headers Server` leaves it.
#[derive(Clone, Debug, Default)]
pub struct ResponseFilter {
    /// `hide-headers`: removed from the upstream's answers (nginx's `proxy_hide_header`),
    /// never from headers Sluice adds after (the route's edits, CORS, HSTS).
    pub hidden: Box<[HeaderName]>,
    pub server: ServerHeader,
}

/// The `Server` header of every answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ServerHeader {
    /// `server-tokens: false` (the default): none, the upstream's removed too (ingress-nginx's
    /// `more_clear_headers Server`, whatever `allow-backend-server-header` says).
    #[default]
    Cleared,
    /// `server-tokens: true`: Sluice's name and version, replacing the upstream's unless
    /// `allow-backend-server-header` passes it (then Sluice's only where the upstream sent
    /// none: nginx's `proxy_pass_header Server`).
    Named {
        value: HeaderValue,
        pass_upstream: bool,
    },
}

impl ResponseFilter {
    /// `product` is what `Server` says with `server-tokens` (`sluice/<version>`).
    pub fn new(
        hidden: &[String],
        server_tokens: bool,
        pass_upstream: bool,
        product: &'static str,
    ) -> ResponseFilter {
        ResponseFilter {
            hidden: hidden
                .iter()
                .filter_map(|name| HeaderName::try_from(name.as_str()).ok())
                .collect(),
            server: if server_tokens {
                ServerHeader::Named {
                    value: HeaderValue::from_static(product),
                    pass_upstream,
                }
            } else {
                ServerHeader::Cleared
            },
        }
    }

    /// An answer's headers; `from_upstream`: the upstream (or the error backend) wrote them.
    pub fn apply(&self, headers: &mut HeaderMap, from_upstream: bool) {
        if from_upstream {
            for name in self.hidden.iter() {
                headers.remove(name);
            }
        }
        match &self.server {
            // Sluice's own answers carry none at this point (the route's edits come after).
            ServerHeader::Cleared if from_upstream => {
                headers.remove(header::SERVER);
            }
            ServerHeader::Cleared => {}
            ServerHeader::Named {
                value,
                pass_upstream,
            } => {
                if !(from_upstream && *pass_upstream && headers.contains_key(header::SERVER)) {
                    headers.insert(header::SERVER, value.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::try_from(*name).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn list(cidrs: &[&str], agents: &[&str], referers: &[&str]) -> Blocklist {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Blocklist::new(
            &cidrs.iter().map(|c| c.parse().unwrap()).collect::<Vec<_>>(),
            &owned(agents),
            &owned(referers),
        )
        .unwrap()
    }

    #[test]
    fn patterns_read_as_nginx_map_entries() {
        let exact = HeaderPattern::parse("BadBot/1.0").unwrap();
        assert!(exact.matches(b"badbot/1.0"));
        assert!(
            !exact.matches(b"BadBot/1.0 (compatible)"),
            "a string is the whole value"
        );
        let sensitive = HeaderPattern::parse("~Scanner").unwrap();
        assert!(sensitive.matches(b"Mozilla Scanner 2"));
        assert!(!sensitive.matches(b"mozilla scanner 2"));
        let insensitive = HeaderPattern::parse("~*scanner").unwrap();
        assert!(insensitive.matches(b"Mozilla SCANNER 2"));
        let escaped = HeaderPattern::parse("\\~tilde").unwrap();
        assert!(escaped.matches(b"~TILDE"));
        assert!(HeaderPattern::parse("~(unclosed").is_err());
        assert!(HeaderPattern::parse("~").is_err());
        assert!(
            HeaderPattern::parse("~*a(?=b)").is_err(),
            "no look-around in Rust's regex"
        );
    }

    #[test]
    fn blocks_by_address_agent_and_referer() {
        let blocklist = list(
            &["10.0.0.0/8", "2001:db8::/32"],
            &["~*curl"],
            &["~*spam\\.example"],
        );
        let none = HeaderMap::new();
        assert!(blocklist.blocks("10.1.2.3".parse().unwrap(), &none));
        assert!(
            blocklist.blocks("::ffff:10.1.2.3".parse().unwrap(), &none),
            "mapped IPv4"
        );
        assert!(blocklist.blocks("2001:db8::1".parse().unwrap(), &none));
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(!blocklist.blocks(client, &none));
        assert!(blocklist.blocks(client, &headers(&[("user-agent", "CURL/8.0")])));
        assert!(!blocklist.blocks(client, &headers(&[("user-agent", "Mozilla/5.0")])));
        let hidden = headers(&[("user-agent", "Mozilla/5.0"), ("user-agent", "curl/8")]);
        assert!(
            blocklist.blocks(client, &hidden),
            "a second value cannot hide the first"
        );
        let referred = headers(&[("referer", "https://SPAM.example/x")]);
        assert!(blocklist.blocks(client, &referred));
    }

    #[test]
    fn an_absent_header_is_the_empty_value() {
        let blocklist = list(&[], &["~^$"], &[]);
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(blocklist.blocks(client, &HeaderMap::new()));
        assert!(!blocklist.blocks(client, &headers(&[("user-agent", "x")])));
        assert!(Blocklist::new(&[], &[], &[]).is_none());
    }

    #[test]
    fn server_header_as_server_tokens_says() {
        let upstream = || headers(&[("server", "Apache/2.4.1"), ("x-powered-by", "PHP/5")]);
        let cleared = ResponseFilter::new(&["x-powered-by".into()], false, true, "sluice/0");
        let mut h = upstream();
        cleared.apply(&mut h, true);
        assert!(h.is_empty(), "{h:?}");
        let named = ResponseFilter::new(&[], true, false, "sluice/0");
        let mut h = upstream();
        named.apply(&mut h, true);
        assert_eq!(h["server"], "sluice/0");
        assert_eq!(h["x-powered-by"], "PHP/5");
        let passing = ResponseFilter::new(&[], true, true, "sluice/0");
        let mut h = upstream();
        passing.apply(&mut h, true);
        assert_eq!(h["server"], "Apache/2.4.1");
        let mut own = HeaderMap::new();
        passing.apply(&mut own, false);
        assert_eq!(own["server"], "sluice/0");
    }
}
