//! Parsers of who may reach a route: allow/deny lists, the annotations that fail closed, and
//! snippets (translated to header edits or refused).

use model::policy::{Access, HeaderEdit, RoutePolicy};
use model::Severity;

use super::reader::Reader;
use super::registry::{Support, REGISTRY};
use super::snippet::translate_snippet;
use crate::configmap::parse_cidrs;

impl Reader<'_> {
    /// Allow- and deny-lists. A list that cannot be read refuses the routes (503, as
    /// ingress-nginx's "location denied"): serving them open would drop an access rule.
    pub(super) fn access(&mut self, policy: &mut RoutePolicy) {
        let allow_name = if self.get("allowlist-source-range").is_some() {
            if self.get("whitelist-source-range").is_some() {
                let key = self.key("whitelist-source-range");
                self.diagnose(
                    Severity::Notice,
                    format!(
                        "annotation {key}: ignored, allowlist-source-range is set too and wins"
                    ),
                );
            }
            "allowlist-source-range"
        } else {
            "whitelist-source-range"
        };
        for (name, allow) in [(allow_name, true), ("denylist-source-range", false)] {
            let Some(value) = self.get(name) else {
                continue;
            };
            match parse_cidrs(value) {
                Ok(nets) if allow && nets.is_empty() => {}
                Ok(nets) => {
                    let access: &mut Access = &mut policy.access;
                    if allow {
                        access.allow = nets;
                    } else {
                        access.deny = nets;
                    }
                }
                Err(why) => {
                    let key = self.key(name);
                    self.diagnose(
                        Severity::Error,
                        format!("annotation {key}: {why}; the Ingress's routes answer 503 until it is fixed (an access list is never dropped)"),
                    );
                    policy.denied = Some(format!("{key} cannot be read"));
                }
            }
        }
    }

    /// Annotations that restrict access and are not implemented (`Support::FailsClosed`) refuse
    /// the routes (503) the way an unreadable allow-list does: a cluster moving from
    /// ingress-nginx must not lose its authentication silently. Any value counts: ingress-nginx
    /// refuses the location on a value it cannot use as well.
    pub(super) fn fail_closed(&mut self, policy: &mut RoutePolicy) {
        for annotation in REGISTRY {
            let (name, Support::FailsClosed(why)) = (annotation.name, annotation.support) else {
                continue;
            };
            if self.get(name).is_none() {
                continue;
            }
            let key = self.key(name);
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: restricts access and is not implemented; {why}"),
            );
            policy.denied = Some(format!("{key} is not implemented (it restricts access)"));
        }
    }

    pub(super) fn snippets(
        &mut self,
        policy: &mut RoutePolicy,
        server_request: &mut Vec<HeaderEdit>,
        server_response: &mut Vec<HeaderEdit>,
    ) {
        let mut request = policy.request_headers.to_vec();
        let mut response = policy.response_headers.to_vec();
        // `auth-snippet` goes into ingress-nginx's auth sub-request location: nothing there
        // is translated, so with snippets allowed it refuses the routes (`None`).
        let snippets = [
            ("configuration-snippet", Some(false)),
            ("server-snippet", Some(true)),
            ("auth-snippet", None),
        ];
        for (name, server) in snippets {
            let Some(text) = self.get(name) else { continue };
            let key = self.key(name);
            if !self.settings.allow_snippet_annotations {
                // ingress-nginx's controller drops the snippet and serves the Ingress; its
                // admission webhook refuses it, and so does Sluice's (an error diagnostic).
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: snippet annotations are off (ConfigMap allow-snippet-annotations); the snippet is dropped and the Ingress served without it, as ingress-nginx does (its admission webhook, like Sluice's, refuses the Ingress)"),
                );
                continue;
            }
            let translated = match server {
                Some(_) => translate_snippet(text),
                None => Err(
                    "directives of the auth sub-request's location are not translated".to_owned(),
                ),
            };
            match translated {
                Ok(edits) => {
                    let server = server == Some(true);
                    for (edit, to_request) in edits {
                        match (server, to_request) {
                            (false, true) => request.push(edit),
                            (false, false) => response.push(edit),
                            (true, true) => server_request.push(edit),
                            (true, false) => server_response.push(edit),
                        }
                    }
                }
                Err(why) => {
                    self.diagnose(
                        Severity::Error,
                        format!("annotation {key}: {why}; snippets are never executed, so the Ingress's routes answer 503 until it is changed"),
                    );
                    policy.denied = Some(format!("{key} cannot be translated"));
                }
            }
        }
        policy.request_headers = request.into();
        policy.response_headers = response.into();
    }
}
