//! `custom-headers`: the named ConfigMap's data, read from the Store, become response header
//! edits of the Ingress's routes, with ingress-nginx's checks and its
//! `global-allowed-response-headers` gate. A ConfigMap that cannot be read denies the routes
//! (503), as ingress-nginx does; every other route keeps serving.

use http::{HeaderName, HeaderValue};

use model::custom_headers::{valid_name, valid_value};
use model::policy::{HeaderAction, HeaderEdit};
use model::{ObjectRef, Severity};

use super::annotations::IngressAnnotations;
use crate::compiler::Compiler;

impl Compiler<'_> {
    /// Appends the ConfigMap's headers to `parsed.policy.response_headers` (set, replacing
    /// the upstream's, as `more_set_headers`), or refuses the routes (503) where
    /// ingress-nginx denies the location.
    pub(crate) fn custom_headers_phase(
        &mut self,
        object: &ObjectRef,
        parsed: &mut IngressAnnotations,
    ) {
        let Some((config_map, key)) = parsed.custom_headers.take() else {
            return;
        };
        // ingress-nginx denies the location when it cannot read the ConfigMap (its
        // `LocationDenied`): served without the headers, a route would drop what its owner
        // asked for (often security headers), so it answers 503 until the ConfigMap exists.
        let Some(data) = self.read_config_map(&config_map).map(|c| c.data.clone()) else {
            self.diagnose_with(
                Severity::Missing,
                object.clone(),
                format!("annotation {key}: ConfigMap {config_map} not found; the routes answer 503 until it exists (as in ingress-nginx)"),
            );
            parsed.policy.denied = Some(format!("{key}: ConfigMap {config_map} not found"));
            return;
        };
        let allowed = &self.out.settings.global_allowed_response_headers;
        let mut edits: Vec<HeaderEdit> = parsed.policy.response_headers.to_vec();
        for (name, value) in data.unwrap_or_default() {
            let problem = if !valid_name(&name) {
                Some(format!("invalid header name {name:?}"))
            } else if !valid_value(&value) {
                Some(format!("invalid value {value:?} for header {name}"))
            } else if !allowed.contains(&name) {
                Some(format!("header {name} is not listed in the ConfigMap key global-allowed-response-headers"))
            } else {
                None
            };
            let edit = HeaderName::from_bytes(name.as_bytes())
                .ok()
                .zip(HeaderValue::from_str(&value).ok());
            match (problem, edit) {
                (None, Some((name, value))) => edits.push(HeaderEdit {
                    name,
                    action: HeaderAction::Set(value),
                }),
                (problem, _) => {
                    let why = problem.unwrap_or_else(|| format!("header {name} cannot be sent"));
                    self.diagnose(
                        object.clone(),
                        format!("annotation {key}: ConfigMap {config_map}: {why}; the routes answer 503 (as in ingress-nginx)"),
                    );
                    parsed.policy.denied = Some(format!("{key}: {why}"));
                    return;
                }
            }
        }
        parsed.policy.response_headers = edits.into();
    }
}
