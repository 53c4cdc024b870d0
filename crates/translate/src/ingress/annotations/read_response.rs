//! The rewrites of the upstream's answer: `proxy-redirect-from`/`-to` (nginx's
//! `proxy_redirect`), `proxy-cookie-path` and `proxy-cookie-domain`, with ingress-nginx's
//! validators and template.

use std::sync::Arc;

use model::response_rewrite::{Replace, ResponseRewrite};
use model::Severity;

use super::reader::Reader;
use crate::configmap::url_chars;

/// ingress-nginx's `cookieDomainRegex` characters.
fn domain_chars(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~/:".contains(c))
}

impl<'a> Reader<'a> {
    /// The four annotations, each defaulting to the ConfigMap's key of its name (checked when
    /// the ConfigMap was read; ingress-nginx's default `off`).
    pub(super) fn response_rewrite(&mut self) -> Option<Arc<ResponseRewrite>> {
        let rewrite = ResponseRewrite {
            redirect: self.proxy_redirect(),
            cookie_path: self.cookie_rewrite("proxy-cookie-path", url_chars),
            cookie_domain: self.cookie_rewrite("proxy-cookie-domain", domain_chars),
        };
        (!rewrite.is_empty()).then(|| Arc::new(rewrite))
    }

    /// One of the pair as ingress-nginx reads it: `off` when unset, empty or refused by its
    /// validator (the ConfigMap default).
    fn redirect_half(&mut self, name: &str) -> &'a str {
        match self.get(name) {
            None => self.settings.response_rewrite.get(name).unwrap_or("off"),
            Some("") => "off",
            Some(value) if url_chars(value) && !value.trim().contains(' ') => value.trim(),
            Some(value) => {
                self.refused(name, value, "off");
                "off"
            }
        }
    }

    /// ingress-nginx's template: `from` `off` or `default` is written alone; otherwise the
    /// pair is written unless `to` is `off`, in which case no `proxy_redirect` is written at
    /// all. nginx's `default` (also what applies without the directive) rewrites only
    /// `Location`s beginning with ingress-nginx's internal `http://upstream_balancer/`, which
    /// no upstream sends: nothing is rewritten here.
    fn proxy_redirect(&mut self) -> Option<Replace> {
        let from = self.redirect_half("proxy-redirect-from");
        let to = self.redirect_half("proxy-redirect-to");
        // The ConfigMap's values were diagnosed when it was read.
        let annotated = self.get("proxy-redirect-from").is_some();
        if from == "off" {
            self.no_effect_without(&["proxy-redirect-to"], "proxy-redirect-from");
            return None;
        }
        let key = self.key("proxy-redirect-from");
        if !annotated && (from == "default" || to == "off") {
            return None;
        }
        if from == "default" {
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: default: nginx's default proxy_redirect rewrites only Location values beginning with ingress-nginx's internal upstream name (http://upstream_balancer/), which upstreams do not send; nothing is rewritten"),
            );
            return None;
        }
        if to == "off" {
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: {from:?} without proxy-redirect-to: ingress-nginx writes no proxy_redirect then, and nginx's default rewrites nothing an upstream sends; nothing is rewritten"),
            );
            return None;
        }
        if from.starts_with('~') {
            self.diagnose(
                Severity::Unsupported,
                format!("annotation {key}: {from:?}: nginx regular expressions (~) are not supported, only a literal prefix; ignored"),
            );
            return None;
        }
        Some(Replace {
            from: from.to_owned(),
            to: to.to_owned(),
        })
    }

    /// `off`, or `<from> <to>` as nginx's directive takes them (ingress-nginx writes the value
    /// into the directive as it is; a value nginx refuses would fail its whole configuration,
    /// here only this annotation is ignored).
    fn cookie_rewrite(&mut self, name: &str, chars: fn(&str) -> bool) -> Option<Replace> {
        let Some(value) = self.get(name) else {
            let (from, to) = self.settings.response_rewrite.get(name)?.split_once(' ')?;
            return Some(Replace {
                from: from.to_owned(),
                to: to.to_owned(),
            });
        };
        if value.is_empty() || value == "off" {
            return None;
        }
        let words: Vec<&str> = value.split_whitespace().collect();
        let [from, to] = words[..] else {
            self.invalid(name, value, "off, or the text to find and its replacement");
            return None;
        };
        if !chars(from) || !chars(to) {
            self.refused(name, value, "off");
            return None;
        }
        if from.starts_with('~') {
            let key = self.key(name);
            self.diagnose(
                Severity::Unsupported,
                format!("annotation {key}: {value:?}: nginx regular expressions (~) are not supported, only literal text; ignored"),
            );
            return None;
        }
        Some(Replace {
            from: from.to_owned(),
            to: to.to_owned(),
        })
    }

    /// `custom-headers`: `namespace/name` (ingress-nginx's `BasicCharsRegex`, spaces removed;
    /// its store key, so both parts are needed).
    pub(super) fn custom_headers(&mut self) -> Option<(model::NamespacedName, String)> {
        let value = self.get("custom-headers")?;
        let compact = value.replace(' ', "");
        let parts = compact
            .split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'));
        let valid = compact
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~/:".contains(c));
        match parts.filter(|_| valid) {
            Some((namespace, name)) => Some((
                model::NamespacedName::new(namespace, name),
                self.key("custom-headers"),
            )),
            None => {
                self.invalid("custom-headers", value, "a ConfigMap as namespace/name");
                None
            }
        }
    }
}
