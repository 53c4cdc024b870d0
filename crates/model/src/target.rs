//! A request's target as routing sees it: the path decoded and normalised before any rule is
//! matched, and the `Host` checked, so that no byte sequence reaches a route its plain form
//! would not.
//!
//! ```text
//!  raw path ─▶ scan: `%`, `//`, `/.`, control byte? ─ none (the common request) ─▶ routed as is,
//!     │                                                                           forwarded as is
//!     └─ some ─▶ percent-decode (`%2F` too, as nginx) ─▶ refuse NUL, control bytes, bad `%`
//!                ─▶ remove dot segments (RFC 3986 §5.2.4), merge `//`; above `/` ─▶ refused
//!                ─▶ routed on the result; forwarded as it came when decoding alone gave the
//!                   result, else as the result re-encoded
//! ```
//!
//! Why not always forward the raw path, as nginx does with a bare `proxy_pass`: a backend that
//! resolves `..` after decoding (or Tomcat, which treats `..;` as `..`) would then serve a path
//! the chosen rule does not cover, `GET /public/%2e%2e/private` read as `/private`. Why not
//! always forward the decoded form: `%2F` inside a segment (GitLab's `projects/group%2Fname`)
//! means something to the backend. So the raw path goes upstream exactly when it contains no
//! dot segment and no empty segment: then every reading of it, decoded or not, stays inside
//! the rule it was routed by. Anything else goes upstream in the form it was routed on.

use std::borrow::Cow;

/// Why a request target is refused (400).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("the path does not start with `/`")]
    NotAbsolute,
    #[error("the path has a `%` not followed by two hex digits")]
    BadEscape,
    #[error("the path holds a NUL or control byte")]
    ControlByte,
    #[error("the path climbs above `/`")]
    AboveRoot,
    #[error(
        "the path has a dot segment with parameters (`..;`), which some backends read as `..`"
    )]
    DotSegmentParameter,
    #[error("the Host is not a valid host name, IP literal or port")]
    InvalidHost,
}

/// A request path in the form routing matches on.
#[derive(Debug, PartialEq, Eq)]
pub struct NormalPath<'a> {
    /// What the rules are matched against: decoded, without dot segments or empty segments.
    /// Bytes that are not UTF-8 after decoding are replaced (no rule can name them).
    pub routed: Cow<'a, str>,
    /// What to send upstream instead of the raw path, percent-encoded; `None`: the raw path.
    pub forward: Option<String>,
}

/// Decodes and normalises a request path (the target without its query).
pub fn normalize_path(raw: &str) -> Result<NormalPath<'_>, TargetError> {
    if !raw.starts_with('/') {
        return Err(TargetError::NotAbsolute);
    }
    if is_plain(raw.as_bytes())? {
        return Ok(NormalPath {
            routed: Cow::Borrowed(raw),
            forward: None,
        });
    }
    let decoded = percent_decode(raw.as_bytes())?;
    let normal = remove_dot_segments(&decoded)?;
    let forward = (normal != decoded).then(|| percent_encode(&normal));
    let routed = match String::from_utf8(normal) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok(NormalPath {
        routed: Cow::Owned(routed),
        forward,
    })
}

/// Whether a `Host` value (or HTTP/2 `:authority` without user info) is a host name, an IPv4
/// address or a bracketed IPv6 literal, with an optional port. Stricter than nginx, which
/// only refuses separators, control bytes and `..`: a name outside DNS's alphabet has no rule
/// to match and only serves to confuse what logs and backends see.
pub fn validate_host(host: &[u8]) -> Result<(), TargetError> {
    let (name, port) = if host.first() == Some(&b'[') {
        let end = host
            .iter()
            .position(|&b| b == b']')
            .ok_or(TargetError::InvalidHost)?;
        let literal = &host[1..end];
        let ipv6 = std::str::from_utf8(literal)
            .ok()
            .and_then(|text| text.parse::<std::net::Ipv6Addr>().ok());
        if ipv6.is_none() {
            return Err(TargetError::InvalidHost);
        }
        (None, &host[end + 1..])
    } else {
        match host.iter().position(|&b| b == b':') {
            Some(colon) => (Some(&host[..colon]), &host[colon..]),
            None => (Some(host), &host[host.len()..]),
        }
    };
    if let Some(name) = name {
        let name = name.strip_suffix(b".").unwrap_or(name);
        let valid = !name.is_empty()
            && name.len() <= 253
            && name.split(|&b| b == b'.').all(|label| {
                !label.is_empty()
                    && label
                        .iter()
                        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~'))
            });
        if !valid {
            return Err(TargetError::InvalidHost);
        }
    }
    match port {
        [] => Ok(()),
        [b':', digits @ ..] if digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit) => Ok(()),
        _ => Err(TargetError::InvalidHost),
    }
}

/// A `Host` value without its port: `host:80` → `host`, `[::1]:80` → `[::1]`. An IPv6 literal keeps
/// its brackets, as nginx's `$host` does: put back into a URL or a header, `::1` alone would read as
/// a name with a port. Always a prefix of `host`, so a caller holding a `str` can slice it.
pub fn strip_port(host: &[u8]) -> &[u8] {
    if host.first() == Some(&b'[') {
        return match host.iter().position(|&b| b == b']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(colon) => &host[..colon],
        None => host,
    }
}

/// Whether `text` is one DNS label as Kubernetes names and Ingress hosts use it (RFC 1123): 1 to 63
/// lower-case letters, digits and `-`, neither first nor last a `-`.
pub fn is_dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// One pass over the raw path: `true` when nothing in it needs decoding or normalising.
fn is_plain(path: &[u8]) -> Result<bool, TargetError> {
    let mut plain = true;
    let mut previous = 0u8;
    for &b in path {
        match b {
            0..=0x20 | 0x7f => return Err(TargetError::ControlByte),
            b'%' => plain = false,
            b'/' if previous == b'/' => plain = false,
            b'.' if previous == b'/' => plain = false,
            _ => {}
        }
        previous = b;
    }
    Ok(plain)
}

fn percent_decode(path: &[u8]) -> Result<Vec<u8>, TargetError> {
    let mut out = Vec::with_capacity(path.len());
    let mut bytes = path.iter();
    while let Some(&b) = bytes.next() {
        let byte = if b == b'%' {
            let high = bytes.next().and_then(|&h| hex(h));
            let low = bytes.next().and_then(|&l| hex(l));
            match (high, low) {
                (Some(high), Some(low)) => high << 4 | low,
                _ => return Err(TargetError::BadEscape),
            }
        } else {
            b
        };
        if byte < 0x20 || byte == 0x7f {
            return Err(TargetError::ControlByte);
        }
        out.push(byte);
    }
    Ok(out)
}

fn hex(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// RFC 3986 §5.2.4 on an absolute path, with empty segments merged (nginx's
/// `merge_slashes`) and a climb above the root refused rather than clamped.
pub(crate) fn remove_dot_segments(path: &[u8]) -> Result<Vec<u8>, TargetError> {
    let mut kept: Vec<&[u8]> = Vec::new();
    let mut trailing_slash = false;
    for segment in path[1..].split(|&b| b == b'/') {
        trailing_slash = false;
        match segment {
            b"" => trailing_slash = true,
            b"." => trailing_slash = true,
            b".." => {
                if kept.pop().is_none() {
                    return Err(TargetError::AboveRoot);
                }
                trailing_slash = true;
            }
            _ if segment.starts_with(b"..;") || segment.starts_with(b".;") => {
                return Err(TargetError::DotSegmentParameter);
            }
            _ => kept.push(segment),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for segment in &kept {
        out.push(b'/');
        out.extend_from_slice(segment);
    }
    if trailing_slash || kept.is_empty() {
        out.push(b'/');
    }
    Ok(out)
}

/// A path made by the proxy (a rewrite target with captures of the decoded path), encoded for
/// the request line: what may not appear in a path as it is becomes `%XX`.
pub fn encode_path(path: &str) -> String {
    percent_encode(path.as_bytes())
}

/// Literal query text of a rewrite target, encoded for the request line: `%XX` escapes and
/// query delimiters stay as written; what may not appear in a query at all (space, `"`, `#`,
/// control and non-ASCII bytes…) becomes `%XX`.
pub(crate) fn encode_query_literal(text: &str) -> String {
    encode_where(text.as_bytes(), |b| {
        is_path_char(b) || matches!(b, b'/' | b'?' | b'%')
    })
}

/// A capture put into a query: one value, so the query's own delimiters (`&`, `=`, `+`, `;`,
/// `#`) and `%` are encoded as well.
pub(crate) fn encode_query_value(text: &str) -> String {
    encode_where(text.as_bytes(), |b| {
        (is_path_char(b) || matches!(b, b'/' | b'?')) && !matches!(b, b'&' | b'=' | b'+' | b';')
    })
}

/// Percent-encodes what may not appear in a path as it is (RFC 3986 `pchar` and `/` stay).
fn percent_encode(path: &[u8]) -> String {
    encode_where(path, |b| b == b'/' || is_path_char(b))
}

/// RFC 3986 `pchar` without `%`: unreserved, sub-delims, `:` and `@`.
fn is_path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
        )
}

fn encode_where(bytes: &[u8], keep: impl Fn(u8) -> bool) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if keep(b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routed(raw: &str) -> (String, Option<String>) {
        let normal = normalize_path(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
        (normal.routed.into_owned(), normal.forward)
    }

    #[test]
    fn plain_paths_cost_nothing() {
        for raw in ["/", "/a/b", "/a/b/", "/a.b/c..d/", "/a;b=c"] {
            let normal = normalize_path(raw).unwrap();
            assert!(matches!(normal.routed, Cow::Borrowed(_)), "{raw}");
            assert_eq!(normal.forward, None);
        }
    }

    /// The issue's attack table: each must route (and go upstream) as its plain form.
    #[test]
    fn traversal_and_disguise_route_on_the_plain_form() {
        let cases = [
            ("/public/../private/secret", "/private/secret", true),
            ("/public/%2e%2e/private/secret", "/private/secret", true),
            ("/public/%2E%2e/private/secret", "/private/secret", true),
            ("//private/secret", "/private/secret", true),
            ("/./private/secret", "/private/secret", true),
            ("/%70rivate/secret", "/private/secret", false),
            ("/public/..%2Fprivate", "/private", true),
            ("/a/./b/../c/", "/a/c/", true),
            ("/a/b/..", "/a/", true),
            ("/a/b/.", "/a/b/", true),
            ("/a//b///c", "/a/b/c", true),
            ("/..", "/", false),
        ];
        for (raw, expected, rewritten) in cases {
            if raw == "/.." {
                assert_eq!(normalize_path(raw), Err(TargetError::AboveRoot));
                continue;
            }
            let (path, forward) = routed(raw);
            assert_eq!(path, expected, "{raw}");
            assert_eq!(forward.is_some(), rewritten, "{raw}");
            if let Some(forward) = forward {
                assert_eq!(forward, expected, "{raw} goes upstream as routed");
            }
        }
    }

    #[test]
    fn encoded_slashes_route_as_slashes_and_go_upstream_encoded() {
        // GitLab's API names projects `group%2Fname`: the backend must see it as sent.
        let (path, forward) = routed("/api/v4/projects/group%2Fname");
        assert_eq!(path, "/api/v4/projects/group/name");
        assert_eq!(forward, None);
    }

    #[test]
    fn hostile_paths_are_refused() {
        let cases = [
            ("/a/../..", TargetError::AboveRoot),
            ("/%2e%2e/etc/passwd", TargetError::AboveRoot),
            ("/a/%00", TargetError::ControlByte),
            ("/a%0d%0aX-Injected:%201", TargetError::ControlByte),
            ("/a%7f", TargetError::ControlByte),
            ("/a\u{1}", TargetError::ControlByte),
            ("/a%", TargetError::BadEscape),
            ("/a%2", TargetError::BadEscape),
            ("/a%zz", TargetError::BadEscape),
            ("/public/..;/private", TargetError::DotSegmentParameter),
            (
                "/public/%2e%2e;jsessionid=1/private",
                TargetError::DotSegmentParameter,
            ),
            ("*", TargetError::NotAbsolute),
            ("", TargetError::NotAbsolute),
        ];
        for (raw, error) in cases {
            assert_eq!(normalize_path(raw), Err(error), "{raw:?}");
        }
    }

    #[test]
    fn what_goes_upstream_is_encoded_where_it_must_be() {
        let (path, forward) = routed("/a/../caf%C3%A9%20menu%3F%25");
        assert_eq!(path, "/café menu?%");
        assert_eq!(forward.unwrap(), "/caf%C3%A9%20menu%3F%25");
        // Not UTF-8 after decoding: routed with a replacement, forwarded byte for byte.
        let (path, forward) = routed("//%E9t%E9");
        assert_eq!(path, "/\u{fffd}t\u{fffd}");
        assert_eq!(forward.unwrap(), "/%E9t%E9");
    }

    #[test]
    fn normalising_twice_changes_nothing() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let alphabet: &[&str] = &["/", "a", ".", "..", "%2e", "%2F", "//", "%41", ";", "b/"];
        for _ in 0..20_000 {
            let mut raw = String::from("/");
            for _ in 0..(rng % 9) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                raw.push_str(alphabet[(rng % alphabet.len() as u64) as usize]);
            }
            let Ok(first) = normalize_path(&raw) else {
                continue;
            };
            let sent = first.forward.clone().unwrap_or_else(|| raw.clone());
            let again = normalize_path(&sent).unwrap_or_else(|e| panic!("{raw} → {sent}: {e}"));
            assert_eq!(again.routed, first.routed, "{raw} → {sent}");
            assert!(!first.routed.contains("//"), "{raw}");
            assert!(
                !first.routed.split('/').any(|s| s == ".." || s == "."),
                "{raw}"
            );
        }
    }

    #[test]
    fn ports_are_stripped_and_ipv6_literals_keep_their_brackets() {
        assert_eq!(strip_port(b"[::1]:80"), b"[::1]");
        assert_eq!(strip_port(b"[::1]"), b"[::1]");
        assert_eq!(strip_port(b"host:80"), b"host");
        assert_eq!(strip_port(b"host"), b"host");
        // An unclosed literal is left whole (validate_host refuses it before routing).
        assert_eq!(strip_port(b"[::1"), b"[::1");
    }

    #[test]
    fn dns_labels_are_lower_case_and_hyphenated_inside() {
        for good in ["a", "web-1", "0abc", &"x".repeat(63)] {
            assert!(is_dns_label(good), "{good}");
        }
        for bad in ["", "-web", "web-", "Web", "a.b", "a_b", &"x".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn hosts() {
        for good in [
            "example.com",
            "Example.COM.",
            "a-b_c.example:8080",
            "10.0.0.1",
            "[::1]",
            "[2001:db8::1]:443",
            "localhost:",
        ] {
            assert_eq!(validate_host(good.as_bytes()), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "a..b",
            ".example.com",
            "exa mple.com",
            "example.com/evil",
            "example.com\\evil",
            "example.com:80:80",
            "example.com:port",
            "example.com:123456",
            "[::1",
            "[not-v6]",
            "user@example.com",
            "example.com\0",
        ] {
            assert_eq!(
                validate_host(bad.as_bytes()),
                Err(TargetError::InvalidHost),
                "{bad:?}"
            );
        }
    }
}
