//! The errors phase of an Ingress's routes: `custom-http-errors`, `disable-proxy-intercept-errors`
//! and `default-backend`, with the ConfigMap's `custom-http-errors` as nginx inherits it.
//!
//! ```text
//!  custom-http-errors set ─▶ its codes, answered by default-backend (if it has a ready
//!                            endpoint), else --default-backend-service, else a 404 of Sluice's
//!  not set (or empty)     ─▶ the ConfigMap's codes, answered by --default-backend-service only
//!                            (nginx's server-level error_page: default-backend plays no part)
//!  default-backend        ─▶ also where requests go while the route's Service has no ready
//!                            endpoint
//! ```

use std::sync::Arc;

use model::policy::{CustomErrors, ErrorBackend};
use model::{NamespacedName, ObjectRef, Severity};

use crate::compiler::Compiler;
use crate::ingress::annotations::{IngressAnnotations, NGINX_PREFIX};

impl Compiler<'_> {
    /// Fills the errors phase of `parsed.policy` (the default policy's when the Ingress sets
    /// nothing, so that routes without annotations still share it).
    pub(crate) fn errors_phase(
        &mut self,
        ingress: &NamespacedName,
        object: &ObjectRef,
        parsed: &mut IngressAnnotations,
    ) {
        let annotated = parsed.default_backend.take().and_then(|name| {
            let service = NamespacedName::new(ingress.namespace.clone(), name.as_str());
            match self.first_port_backend(&service) {
                Ok((backend, _)) => Some(Arc::new(ErrorBackend {
                    upstream_name: format!("custom-default-backend-{}-{name}", ingress.namespace)
                        .into(),
                    backend,
                })),
                Err((severity, why)) => {
                    self.diagnose_with(
                        severity,
                        object.clone(),
                        format!("annotation {NGINX_PREFIX}default-backend: Service {service}: {why}; ignored"),
                    );
                    None
                }
            }
        });
        parsed.policy.default_backend = annotated.clone();
        let inherited = self.default_policy.custom_errors.clone();
        parsed.policy.custom_errors = match parsed.custom_http_errors.take() {
            Some(codes) if !codes.is_empty() => {
                let disable = parsed
                    .disable_intercept
                    .unwrap_or(self.out.settings.disable_proxy_intercept_errors);
                let policy = inherited
                    .as_ref()
                    .map_or_else(|| self.default_policy.clone(), |e| e.policy.clone());
                self.out.any_custom_errors = true;
                Some(Arc::new(CustomErrors {
                    codes: codes.into(),
                    intercept_upstream: !disable,
                    backends: annotated
                        .into_iter()
                        .chain(self.default_error_backend.clone())
                        .collect(),
                    policy,
                }))
            }
            _ => {
                if parsed.disable_intercept.is_some() {
                    self.diagnose_with(
                        Severity::Notice,
                        object.clone(),
                        format!("annotation {NGINX_PREFIX}disable-proxy-intercept-errors: has no effect without the custom-http-errors annotation (as in ingress-nginx)"),
                    );
                }
                inherited
            }
        };
    }
}
