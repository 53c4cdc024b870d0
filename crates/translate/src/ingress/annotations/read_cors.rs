//! The CORS family (`enable-cors`, `cors-*`), checked with ingress-nginx's validators
//! (`annotations/cors`), each refused value falling back as ingress-nginx falls back, and its
//! traps named in notices.

use std::sync::{Arc, LazyLock};

use http::HeaderValue;
use regex::Regex;

use model::cors::{AllowedOrigins, Cors, OriginPattern, DEFAULT_HEADERS, DEFAULT_METHODS};
use model::Severity;

use super::reader::{go_bool, Reader};

/// The annotations read only with `enable-cors`.
const COMPANIONS: [&str; 6] = [
    "cors-allow-origin",
    "cors-allow-methods",
    "cors-allow-headers",
    "cors-allow-credentials",
    "cors-expose-headers",
    "cors-max-age",
];

/// ingress-nginx's validator of the whole `cors-allow-origin` value (spaces removed first).
static ORIGINS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^((((([a-z]+://)?(\*\.)?[A-Za-z0-9\-.]*(:\d+)?,?)|null)+)|\*)?$").unwrap()
});
/// ingress-nginx's check of one entry of the list.
static ORIGIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([a-z]+://(\*\.)?[A-Za-z0-9\-.]*(:\d+)?|\*|null)?$").unwrap());
static METHODS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^([A-Za-z]+,?\s?)+$").unwrap());
static HEADERS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[A-Za-z0-9-_, ]*$").unwrap());
static EXPOSE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(([A-Za-z0-9\-_]+|\*),?\s?)+$").unwrap());

impl Reader<'_> {
    /// The CORS policy, or `None` without `enable-cors: "true"` (then the `cors-*`
    /// annotations have no effect, as in ingress-nginx, whose template writes nothing).
    pub(super) fn cors(&mut self) -> Option<Arc<Cors>> {
        let enabled = match self.get("enable-cors") {
            None => false,
            Some(value) => go_bool(value).unwrap_or_else(|| {
                self.refused("enable-cors", value, "false (CORS off)");
                false
            }),
        };
        if !enabled {
            self.no_effect_without(&COMPANIONS, "enable-cors: \"true\"");
            return None;
        }
        let mut cors = Cors::ingress_nginx_default();
        cors.origins = self.cors_origins();
        if let Some(value) = self.get("cors-allow-methods") {
            // Checked with spaces removed, then again as written (two spaces fail there).
            if valid(&METHODS, value) && METHODS.is_match(value) {
                cors.allow_methods = header(value);
            } else {
                self.refused("cors-allow-methods", value, DEFAULT_METHODS);
            }
        }
        if let Some(value) = self.get("cors-allow-headers") {
            if !value.is_empty() && valid(&HEADERS, value) {
                cors.allow_headers = header(value);
            } else {
                self.refused("cors-allow-headers", value, DEFAULT_HEADERS);
            }
        }
        if let Some(value) = self.get("cors-allow-credentials") {
            match go_bool(value) {
                Some(on) => cors.allow_credentials = on,
                None => self.refused("cors-allow-credentials", value, "true"),
            }
        }
        if let Some(value) = self.get("cors-expose-headers") {
            if valid(&EXPOSE, value) && EXPOSE.is_match(value) {
                cors.expose_headers = Some(header(value));
            } else {
                self.refused(
                    "cors-expose-headers",
                    value,
                    "none (no Access-Control-Expose-Headers)",
                );
            }
        }
        if let Some(value) = self.get("cors-max-age") {
            // Go's `strconv.Atoi`: a sign is allowed, and a negative age is sent as written.
            match value.parse::<i64>() {
                Ok(age) => cors.max_age = HeaderValue::from(age),
                Err(_) => self.refused("cors-max-age", value, "1728000"),
            }
        }
        if cors.origins == AllowedOrigins::Any && cors.allow_credentials {
            let key = self.key("enable-cors");
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: Access-Control-Allow-Origin: * is sent with Access-Control-Allow-Credentials: true (ingress-nginx's defaults); browsers refuse credentialed requests with that pair, list the origins in cors-allow-origin to allow them"),
            );
        }
        Some(Arc::new(cors))
    }

    /// `cors-allow-origin`: absent, empty or refused as a whole ─▶ `*`; `*` anywhere ─▶ `*`;
    /// otherwise the entries ingress-nginx keeps.
    fn cors_origins(&mut self) -> AllowedOrigins {
        let Some(value) = self.get("cors-allow-origin") else {
            return AllowedOrigins::Any;
        };
        let key = self.key("cors-allow-origin");
        if value.is_empty() {
            self.refused("cors-allow-origin", value, "* (every origin)");
            return AllowedOrigins::Any;
        }
        if !valid(&ORIGINS, value) {
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: invalid value {value:?}: expected a comma-separated list of scheme://host[:port], scheme://*.host[:port] and null, or * alone; * (every origin) applies: as in ingress-nginx, a refused list allows every origin instead of none"),
            );
            return AllowedOrigins::Any;
        }
        let mut patterns = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            // Only a lone `*` gets here: with other entries the validator refuses the value.
            if entry == "*" {
                return AllowedOrigins::Any;
            }
            if ORIGIN.is_match(entry) {
                patterns.push(OriginPattern::new(entry));
            } else {
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: entry {entry:?} skipped: expected scheme://host[:port], scheme://*.host[:port] or null (as ingress-nginx skips it)"),
                );
            }
        }
        if patterns.is_empty() {
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: no entry of {value:?} is usable: no request gets CORS headers and OPTIONS requests go to the backend (as in ingress-nginx)"),
            );
        } else if patterns.iter().any(|p| p.written() == "null") {
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: the entry null matches every Origin ending in null (ingress-nginx anchors entries at the end only; Sluice matches as it does)"),
            );
        }
        AllowedOrigins::List(patterns.into())
    }

    /// A refused value: `default` applies, as in ingress-nginx.
    pub(super) fn refused(&mut self, name: &str, value: &str, default: &str) {
        let key = self.key(name);
        self.diagnose(
            Severity::Error,
            format!("annotation {key}: invalid value {value:?}; ingress-nginx's default {default} applies"),
        );
    }
}

/// ingress-nginx's `ValidateRegex(regex, true)`: the value with its spaces removed, and no
/// line break.
fn valid(regex: &Regex, value: &str) -> bool {
    !value.contains(['\r', '\n']) && regex.is_match(&value.replace(' ', ""))
}

/// The validators let through only visible ASCII and spaces.
fn header(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static(""))
}
