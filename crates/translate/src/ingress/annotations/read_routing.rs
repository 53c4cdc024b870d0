//! Parsers of where a request goes: redirects, app-root, server aliases, rewrites.

use http::HeaderValue;

use model::policy::{Redirect, Rewrite};
use model::routes::HostPattern;
use model::Severity;

use super::reader::Reader;

impl Reader<'_> {
    /// `temporal-redirect` wins over `permanent-redirect`; a code outside 300–307 (temporal) or
    /// 300–308 (permanent) falls back to 302 or 301, as in ingress-nginx.
    pub(super) fn redirect(&mut self) -> Option<Redirect> {
        for (name, code_name, default, highest) in [
            ("temporal-redirect", "temporal-redirect-code", 302, 307),
            ("permanent-redirect", "permanent-redirect-code", 301, 308),
        ] {
            let Some(url) = self.get(name) else { continue };
            let code = match self.get(code_name) {
                None => default,
                Some(text) => match text.parse::<u16>() {
                    Ok(code) if (300..=highest).contains(&code) => code,
                    _ => {
                        let key = self.key(code_name);
                        self.diagnose(
                            Severity::Error,
                            format!("annotation {key}: invalid value {text:?}: expected a status from 300 to {highest}; {default} applies (as in ingress-nginx)"),
                        );
                        default
                    }
                },
            };
            let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
            return match HeaderValue::from_str(url) {
                Ok(location) if scheme_ok => Some(Redirect { code, location }),
                _ => {
                    self.invalid(name, url, "an http:// or https:// URL");
                    None
                }
            };
        }
        None
    }

    pub(super) fn app_root(&mut self) -> Option<HeaderValue> {
        let value = self.get("app-root")?;
        let valid = value.starts_with('/') && !value.contains("://") && !value.contains('$');
        match HeaderValue::from_str(value) {
            Ok(root) if valid => Some(root),
            _ => {
                self.invalid("app-root", value, "an absolute path like /app");
                None
            }
        }
    }

    pub(super) fn server_aliases(&mut self) -> Vec<HostPattern> {
        let Some(value) = self.get("server-alias") else {
            return Vec::new();
        };
        let mut aliases = Vec::new();
        for alias in value.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match HostPattern::parse(Some(&alias.to_ascii_lowercase())) {
                Ok(HostPattern::Any) | Err(_) => {
                    self.invalid("server-alias", alias, "host names separated by commas")
                }
                Ok(host) => aliases.push(host),
            }
        }
        aliases
    }

    pub(super) fn rewrite(&mut self) -> Option<Rewrite> {
        let target = self.get("rewrite-target")?;
        if target.is_empty() {
            return None;
        }
        let forwarded_prefix = self.header_value("x-forwarded-prefix");
        if target.chars().any(|c| c.is_control() || c == ' ') {
            self.invalid(
                "rewrite-target",
                target,
                "a path with $1…$9 capture references",
            );
            return None;
        }
        match Rewrite::parse(target, forwarded_prefix) {
            Ok(rewrite) => Some(rewrite),
            Err(why) => {
                let key = self.key("rewrite-target");
                self.diagnose(
                    Severity::Unsupported,
                    format!("annotation {key}: {target:?}: {why}; ignored"),
                );
                None
            }
        }
    }
}
