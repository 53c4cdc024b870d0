//! Response compression as the ConfigMap sets it (ingress-nginx's `use-gzip`, `gzip-*`,
//! `enable-brotli`, `brotli-*`; ConfigMap only, no per-Ingress annotation exists). The keys'
//! checks are `translate::configmap`; what a response gets is `proxy::compress`.
//!
//! ```text
//!  ConfigMap keys ─▶ Compression { gzip, brotli: Coding { level, min_length, types } ,
//!                                  gzip_disable }  ─▶ read per response by the proxy
//! ```

use regex::Regex;
use serde::{Serialize, Serializer};

/// ingress-nginx's default `gzip-types` (`internal/ingress/controller/config/config.go`).
pub const GZIP_TYPES: &str = "application/atom+xml application/javascript \
application/x-javascript application/json application/rss+xml application/vnd.ms-fontobject \
application/x-font-ttf application/x-web-app-manifest+json application/xhtml+xml \
application/xml font/opentype image/svg+xml image/x-icon text/css text/javascript text/plain \
text/x-component";

/// ingress-nginx's default `brotli-types` (the gzip list with `application/xml+rss` first).
pub const BROTLI_TYPES: &str = "application/xml+rss application/atom+xml \
application/javascript application/x-javascript application/json application/rss+xml \
application/vnd.ms-fontobject application/x-font-ttf application/x-web-app-manifest+json \
application/xhtml+xml application/xml font/opentype image/svg+xml image/x-icon text/css \
text/javascript text/plain text/x-component";

/// The ConfigMap's compression keys, with ingress-nginx's defaults (both codings off).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Compression {
    /// `use-gzip`.
    pub use_gzip: bool,
    /// `gzip-level` (1-9), `gzip-min-length`, `gzip-types`.
    pub gzip: Coding,
    /// `gzip-disable`: requests whose `User-Agent` it matches get no gzip.
    pub gzip_disable: GzipDisable,
    /// `enable-brotli`.
    pub enable_brotli: bool,
    /// `brotli-level` (0-11), `brotli-min-length`, `brotli-types`.
    pub brotli: Coding,
}

/// One coding's settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Coding {
    pub level: u32,
    /// A response whose length is known and below this is sent as it is (nginx's
    /// `*_min_length`; a response of unknown length is compressed).
    pub min_length: u64,
    pub types: MimeTypes,
}

/// nginx's `gzip_types` / `brotli_types`: the media types compressed, `text/html` always
/// among them, or every type (`*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MimeTypes {
    /// `*`: every response with a `Content-Type`.
    all: bool,
    /// Lower case, without `text/html` (always matched).
    types: Vec<String>,
}

/// `gzip-disable`, read as ingress-nginx renders it (`gzip_disable "VALUE";`, one argument).
#[derive(Clone, Debug, Default)]
pub enum GzipDisable {
    #[default]
    None,
    /// nginx's special `msie6`: MSIE 4 to 6 (6 unless its `User-Agent` says `SV1`).
    Msie6,
    /// A regular expression matched case-insensitively anywhere in the `User-Agent` (nginx
    /// compiles `gzip_disable` with `NGX_REGEX_CASELESS`).
    Regex(Regex),
}

impl Default for Compression {
    fn default() -> Compression {
        Compression {
            use_gzip: false,
            gzip: Coding {
                level: 1,
                min_length: 256,
                types: MimeTypes::parse(GZIP_TYPES).expect("the default list parses"),
            },
            gzip_disable: GzipDisable::None,
            enable_brotli: false,
            brotli: Coding {
                level: 4,
                min_length: 20,
                types: MimeTypes::parse(BROTLI_TYPES).expect("the default list parses"),
            },
        }
    }
}

impl Compression {
    /// Whether any coding is on: the proxy's one check per request when none is.
    pub fn enabled(&self) -> bool {
        self.use_gzip || self.enable_brotli
    }

    pub fn is_default(&self) -> bool {
        *self == Compression::default()
    }
}

impl MimeTypes {
    /// nginx's `*_types` arguments: media types separated by white space (`type/subtype`,
    /// parameters not allowed), or `*` for all. `Err` names the first bad entry.
    pub fn parse(text: &str) -> Result<MimeTypes, String> {
        let mut types: Vec<String> = Vec::new();
        let mut all = false;
        for word in text.split_whitespace() {
            if word == "*" {
                all = true;
                continue;
            }
            let valid = word.split_once('/').is_some_and(|(kind, sub)| {
                let token = |t: &str| {
                    !t.is_empty()
                        && t.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
                };
                token(kind) && token(sub)
            });
            if !valid {
                return Err(word.to_owned());
            }
            let word = word.to_ascii_lowercase();
            if word != "text/html" && !types.contains(&word) {
                types.push(word);
            }
        }
        if types.is_empty() && !all && text.trim().is_empty() {
            return Err(String::new());
        }
        Ok(MimeTypes { all, types })
    }

    /// Whether a response with this `Content-Type` value (parameters and case ignored) is
    /// compressed. A response without one never is (nginx: not even with `*`).
    pub fn matches(&self, content_type: &[u8]) -> bool {
        let end = content_type
            .iter()
            .position(|b| *b == b';')
            .unwrap_or(content_type.len());
        let media = content_type[..end].trim_ascii();
        if media.is_empty() {
            return false;
        }
        self.all
            || media.eq_ignore_ascii_case(b"text/html")
            || self
                .types
                .iter()
                .any(|t| media.eq_ignore_ascii_case(t.as_bytes()))
    }
}

impl Serialize for MimeTypes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.all {
            return serializer.serialize_str("*");
        }
        serializer.collect_str(&format_args!("text/html {}", self.types.join(" ")))
    }
}

impl GzipDisable {
    /// The key's value: `msie6`, else a regular expression (case-insensitive); empty: none.
    pub fn parse(value: &str) -> Result<GzipDisable, regex::Error> {
        match value {
            "" => Ok(GzipDisable::None),
            "msie6" => Ok(GzipDisable::Msie6),
            pattern => regex::RegexBuilder::new(pattern)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
                .map(GzipDisable::Regex),
        }
    }

    /// Whether a request with this `User-Agent` gets no gzip.
    pub fn refuses(&self, user_agent: &[u8]) -> bool {
        match self {
            GzipDisable::None => false,
            GzipDisable::Msie6 => msie6(user_agent),
            GzipDisable::Regex(regex) => std::str::from_utf8(user_agent)
                .map(|agent| regex.is_match(agent))
                .unwrap_or_else(|_| regex.is_match(&String::from_utf8_lossy(user_agent))),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            GzipDisable::None => "",
            GzipDisable::Msie6 => "msie6",
            GzipDisable::Regex(regex) => regex.as_str(),
        }
    }
}

/// nginx's `msie6` test (`ngx_http_request.c`, the `User-Agent` handler): `MSIE 4.`, `MSIE 5.`,
/// or `MSIE 6.` without `SV1` after it (6.0 with XP SP2's fixes handles gzip).
fn msie6(agent: &[u8]) -> bool {
    let Some(at) = agent.windows(5).position(|w| w == b"MSIE ") else {
        return false;
    };
    let msie = &agent[at..];
    if msie.len() <= 7 || msie[6] != b'.' {
        return false;
    }
    match msie[5] {
        b'4' | b'5' => true,
        b'6' => !msie[8..].windows(3).any(|w| w == b"SV1"),
        _ => false,
    }
}

impl PartialEq for GzipDisable {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.as_str() == other.as_str()
    }
}

impl Serialize for GzipDisable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_match_without_parameters_or_case_and_text_html_always() {
        let types = MimeTypes::parse("application/json TEXT/CSS").unwrap();
        assert!(types.matches(b"application/json; charset=utf-8"));
        assert!(types.matches(b"Text/Css"));
        assert!(types.matches(b"text/html;charset=UTF-8"));
        assert!(!types.matches(b"image/png"));
        assert!(!types.matches(b""));
        let all = MimeTypes::parse("*").unwrap();
        assert!(all.matches(b"image/png") && !all.matches(b" ; x=y"));
        assert_eq!(
            MimeTypes::parse("text/css, text/plain"),
            Err("text/css,".into())
        );
        assert_eq!(MimeTypes::parse("json"), Err("json".into()));
        assert!(MimeTypes::parse("  ").is_err());
        let defaults = MimeTypes::parse(GZIP_TYPES).unwrap();
        assert!(defaults.matches(b"text/plain") && defaults.matches(b"application/javascript"));
        assert!(!defaults.matches(b"application/octet-stream"));
    }

    #[test]
    fn msie6_is_nginx_s_test() {
        let refuses = |agent: &str| GzipDisable::Msie6.refuses(agent.as_bytes());
        assert!(refuses(
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.0)"
        ));
        assert!(refuses("Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)"));
        assert!(!refuses(
            "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"
        ));
        assert!(!refuses(
            "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)"
        ));
        assert!(!refuses("curl/8.0"));
        assert!(!refuses("MSIE 6."));
    }

    #[test]
    fn a_disable_pattern_is_case_insensitive_and_unanchored() {
        let disable = GzipDisable::parse("bot|crawler").unwrap();
        assert!(disable.refuses(b"Mozilla/5.0 (compatible; Googlebot/2.1)"));
        assert!(disable.refuses(b"SomeCRAWLER"));
        assert!(!disable.refuses(b"curl/8.0"));
        assert!(GzipDisable::parse("(?<=x)y").is_err());
        assert_eq!(GzipDisable::parse("").unwrap(), GzipDisable::None);
    }
}
