//! The mirror family (`mirror-target`, `mirror-host`, `mirror-request-body`), checked with
//! ingress-nginx's validators and its traps named.

use http::HeaderValue;

use model::mirror::MirrorTarget;
use model::Severity;

use super::parsed::MirrorAnnotations;
use super::reader::Reader;

impl Reader<'_> {
    /// The mirror family (ingress-nginx's `annotations/mirror`): `mirror-request-body` is on
    /// unless exactly `off`; `mirror-host` defaults to the target's host. A target
    /// ingress-nginx's validator refuses, or one that is no URL, mirrors nothing here; in
    /// ingress-nginx it still turns the `mirror` directive on, towards an internal location
    /// it then does not write, so the host's own locations get the copies: said in the
    /// diagnostic.
    pub(super) fn mirror(&mut self) -> Option<MirrorAnnotations> {
        const TRAP: &str = "not mirrored (ingress-nginx ignores the value too, but still sends a copy of each request to its internal path /_mirror-<Ingress UID>, which this host's own locations then answer)";
        let request_body = match self.get("mirror-request-body") {
            None | Some("on") => true,
            Some("off") => false,
            Some(value) => {
                let key = self.key("mirror-request-body");
                self.diagnose(
                    Severity::Error,
                    format!(
                        "annotation {key}: invalid value {value:?}: expected on or off; on applies"
                    ),
                );
                true
            }
        };
        let Some(written) = self.get("mirror-target") else {
            self.no_effect_without(&["mirror-host", "mirror-request-body"], "mirror-target");
            return None;
        };
        let key = self.key("mirror-target");
        if written.is_empty() {
            // ingress-nginx reads an empty value as no mirror at all.
            self.invalid("mirror-target", written, "an http:// or https:// URL");
            return None;
        }
        if !is_server_name_text(written) {
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: invalid value {written:?}: ingress-nginx allows only letters, digits and -._~/:^$[](){{}}*+?|&=\\ in it; {TRAP}"),
            );
            return None;
        }
        let target = match MirrorTarget::parse(written) {
            Ok(target) => target,
            Err(why) => {
                // ingress-nginx writes the mirror location only when its URL parser found a
                // host; past that, what Sluice refuses nginx fails on (an unknown variable) or
                // sends somewhere else (`$uri`: its own internal path).
                let outcome = if go_url_has_host(written) {
                    "not mirrored"
                } else {
                    TRAP
                };
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: invalid value {written:?}: {why}; {outcome}"),
                );
                return None;
            }
        };
        let default_host = target.default_host();
        let host = match self.get("mirror-host") {
            None => default_host,
            Some(host) => {
                let hkey = self.key("mirror-host");
                if host.contains('$') {
                    self.diagnose(
                        Severity::Unsupported,
                        format!("annotation {hkey}: {host:?}: nginx variables are not supported, only a literal host; the target's host {default_host:?} applies"),
                    );
                    default_host
                } else if !is_server_name_text(host) || HeaderValue::from_str(host).is_err() {
                    self.diagnose(
                        Severity::Error,
                        format!("annotation {hkey}: invalid value {host:?}: expected a host name; the target's host {default_host:?} applies (as in ingress-nginx)"),
                    );
                    default_host
                } else {
                    host.to_owned()
                }
            }
        };
        Some(MirrorAnnotations {
            key,
            written: written.to_owned(),
            host: HeaderValue::from_str(&host).ok()?,
            target,
            request_body,
        })
    }
}

/// The characters ingress-nginx's `ValidateServerName` allows (`parser.IsValidRegex`), which
/// it checks `mirror-target` and `mirror-host` with.
fn is_server_name_text(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~/:^$[](){}*+?|&=\\".contains(c))
}

/// Whether ingress-nginx's mirror parser finds a host in a target (`parser.StringToURL` on
/// the text before its first `$`: a scheme, a host, no `..` in it).
fn go_url_has_host(target: &str) -> bool {
    let before_variables = target.split('$').next().unwrap_or("");
    let Some((scheme, rest)) = before_variables.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    !scheme.is_empty() && !host.is_empty() && !host.contains("..")
}
