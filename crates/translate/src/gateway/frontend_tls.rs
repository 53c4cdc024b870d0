//! A Gateway's frontend validation (`spec.tls.frontend`): client certificates on its HTTPS
//! listeners, set per port (`perPort`, else `default`), served as the port's handshake
//! (`model::frontend_tls`) in the Gateway's site's certificates.
//!
//! ```text
//!  validation { caCertificateRefs, mode } ─▶ each ref: ConfigMap (or Secret) ca.crt, in
//!      another namespace only with a ReferenceGrant; ClusterTrustBundle spec.trustBundle
//!      (cluster-scoped, namespace unset) ─▶ one ClientCa of every usable ref
//!      AllowValidOnly ─▶ HostTls { client_cert_required } (the handshake verifies)
//!      AllowInsecureFallback ─▶ HostTls { client_cert_request } (asked, any accepted) and
//!                               the Gateway's InsecureFrontendValidationMode condition
//!      no usable ref ─▶ PortTls::Refuse on the Gateway's own site (closed before the handshake)
//!  HTTPS listener on port P ─▶ Certificates.set_port_tls(P, …) │ a bad ref: ResolvedRefs False
//!      (InvalidCACertificateRef, InvalidCACertificateKind, RefNotPermitted); none usable:
//!      Accepted False (NoValidCACertificate), the listener not served
//! ```
//! On the shared listeners (a Gateway without an address of its own) a port's setting applies
//! to every connection to it, Ingresses' included; the first Gateway to set it keeps it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use model::client_cert::ClientCa;
use model::frontend_tls::PortTls;
use model::gateway_status::Condition;
use model::tls::HostTls;
use model::{Kind, NamespacedName, ObjectRef, Severity};

use super::objects::{
    FrontendValidation, Gateway, Listener, ObjectReference, TRUST_BUNDLE_GROUP, TRUST_BUNDLE_KIND,
};
use super::pool::Place;
use crate::compiler::Compiler;

/// Why a listener's client certificate validation is not (wholly) served: its conditions.
#[derive(Clone, Debug)]
pub(super) struct CaProblem {
    /// `ResolvedRefs` False with this reason.
    pub(super) reason: &'static str,
    /// No usable CA at all: `Accepted` False (NoValidCACertificate), not served.
    pub(super) none_valid: bool,
    pub(super) message: String,
}

/// What one `validation` block makes.
#[derive(Clone, Debug)]
struct Decision {
    tls: PortTls,
    problem: Option<CaProblem>,
}

/// A Gateway's frontend validation, resolved once per compile.
#[derive(Default)]
pub(super) struct GatewayFrontend {
    default: Option<Decision>,
    per_port: BTreeMap<i32, Decision>,
    /// Ports whose `perPort` entry has no validation: exempt from the default's.
    exempt: BTreeSet<i32>,
}

fn gateway_ref(key: &NamespacedName) -> ObjectRef {
    ObjectRef::new(Kind::Gateway, &*key.namespace, &*key.name)
}

impl Compiler<'_> {
    /// Resolves `spec.tls.frontend` of the Gateway `key` (empty when it has none).
    pub(super) fn gateway_frontend(
        &mut self,
        key: &NamespacedName,
        gateway: &Gateway,
    ) -> GatewayFrontend {
        let mut out = GatewayFrontend::default();
        let Some(frontend) = (gateway.spec.tls.as_ref()).and_then(|t| t.frontend.as_ref()) else {
            return out;
        };
        let at = "spec.tls.frontend";
        if let Some(validation) = &frontend.default.validation {
            let field = format!("{at}.default.validation");
            out.default = Some(self.validation(key, &field, validation));
        }
        for (p, port) in frontend.per_port.iter().enumerate() {
            let field = format!("{at}.perPort[{p}].tls.validation");
            let https = (gateway.spec.listeners.iter())
                .any(|l| l.port == port.port && l.protocol == "HTTPS");
            if !https {
                self.diagnose_with(
                    Severity::Notice,
                    gateway_ref(key),
                    format!(
                        "{at}.perPort[{p}]: port {} has no HTTPS listener; nothing to validate",
                        port.port
                    ),
                );
                continue;
            }
            let decision = match &port.tls.validation {
                Some(validation) => self.validation(key, &field, validation),
                None => {
                    out.exempt.insert(port.port);
                    continue;
                }
            };
            out.per_port.insert(port.port, decision);
        }
        out
    }

    /// Installs the handshake of `listener`'s port (an HTTPS listener of a Gateway whose
    /// frontend validation covers that port) in the site at `place`, and says what its
    /// conditions carry. `None`: nothing to validate, or all is well.
    pub(super) fn listener_frontend(
        &mut self,
        frontend: &GatewayFrontend,
        (key, place): (&NamespacedName, Place),
        listener: &Listener,
    ) -> Option<CaProblem> {
        let port = u16::try_from(listener.port).ok()?;
        if listener.protocol != "HTTPS" {
            return None;
        }
        let decision = match frontend.per_port.get(&listener.port) {
            Some(decision) => decision,
            None if frontend.exempt.contains(&listener.port) => return None,
            None => frontend.default.as_ref()?,
        };
        // The shared listeners serve others too: a Gateway's missing CA must not close them.
        let refuse = matches!(decision.tls, PortTls::Refuse(_));
        if !(refuse && place == Place::Shared) {
            if let Some(certificates) = self.certificates_at(place) {
                let kept = certificates.port_tls(port).cloned();
                let set = certificates.set_port_tls(port, decision.tls.clone());
                if !set && kept.as_ref() != Some(&decision.tls) {
                    self.diagnose_with(
                        Severity::Notice,
                        gateway_ref(key),
                        format!(
                            "spec.tls.frontend: port {} of the shared listeners already has another Gateway's client certificate validation ({}), which is served",
                            port,
                            kept.map(|k| k.describe()).unwrap_or_default()
                        ),
                    );
                }
            }
        }
        decision.problem.clone()
    }

    /// One `validation` block (at `field`) of the Gateway `key`.
    fn validation(
        &mut self,
        key: &NamespacedName,
        field: &str,
        validation: &FrontendValidation,
    ) -> Decision {
        let object = gateway_ref(key);
        let required = match validation.mode.as_deref().unwrap_or("AllowValidOnly") {
            "AllowValidOnly" => true,
            "AllowInsecureFallback" => false,
            other => {
                self.diagnose(
                    object.clone(),
                    format!("{field}.mode {other:?}: must be AllowValidOnly or AllowInsecureFallback; AllowValidOnly is served"),
                );
                true
            }
        };
        let mut certs = Vec::new();
        let mut sources = Vec::new();
        let mut problem: Option<CaProblem> = None;
        for (r, reference) in validation.ca_certificate_refs.iter().enumerate() {
            let at = format!("{field}.caCertificateRefs[{r}]");
            match self.frontend_ca(key, reference) {
                Ok((source, found)) => {
                    sources.push(source);
                    certs.extend(found);
                }
                Err((reason, why)) => {
                    let message = format!("{at}: {why}");
                    self.diagnose(object.clone(), format!("{message}; ignored"));
                    problem.get_or_insert(CaProblem {
                        reason,
                        none_valid: false,
                        message,
                    });
                }
            }
        }
        let ca = match certs.is_empty() {
            true => Err(match &problem {
                Some(p) => p.message.clone(),
                None => format!("{field}.caCertificateRefs: none given"),
            }),
            false => ClientCa::from_certs(
                sources.join(", "),
                certs,
                None,
                model::tls::crypto_provider().clone(),
            )
            .map_err(|why| format!("{field}.caCertificateRefs: {why}")),
        };
        let ca = match ca {
            Ok(ca) => Arc::new(ca),
            Err(why) => {
                self.diagnose(
                    object,
                    format!("{field}: no usable CA certificate; its HTTPS listeners are not served (NoValidCACertificate)"),
                );
                let reason = problem
                    .as_ref()
                    .map_or("InvalidCACertificateRef", |p| p.reason);
                return Decision {
                    tls: PortTls::Refuse(why.as_str().into()),
                    problem: Some(CaProblem {
                        reason,
                        none_valid: true,
                        message: why,
                    }),
                };
            }
        };
        let tls = HostTls {
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            client_cert_request: Some(ca.names().to_vec()),
            client_cert_required: required.then_some(ca),
            ciphers: None,
        };
        Decision {
            tls: PortTls::Handshake(Arc::new(tls)),
            problem,
        }
    }

    /// One `caCertificateRefs` entry: where it came from and its CA certificates, or the
    /// spec's reason it cannot be used and why.
    fn frontend_ca(
        &mut self,
        key: &NamespacedName,
        reference: &ObjectReference,
    ) -> Result<(String, Vec<rustls::pki_types::CertificateDer<'static>>), (&'static str, String)>
    {
        let group = reference.group.as_deref().unwrap_or("");
        let kind = reference.kind.as_deref().unwrap_or("ConfigMap");
        let name = reference.name.as_str();
        if (group, kind) == (TRUST_BUNDLE_GROUP, TRUST_BUNDLE_KIND) {
            // Cluster-scoped: no namespace, no ReferenceGrant.
            if let Some(namespace) = &reference.namespace {
                return Err((
                    "InvalidCACertificateRef",
                    format!("ClusterTrustBundle {name} is cluster-scoped: namespace ({namespace}) must be unset"),
                ));
            }
            let target = NamespacedName::new("", name);
            let certs = self.ca_bundle(group, kind, &target)?;
            return Ok((format!("ClusterTrustBundle {name}"), certs));
        }
        let namespace = reference.namespace.as_deref().unwrap_or(&key.namespace);
        if namespace != &*key.namespace
            && matches!((group, kind), ("", "ConfigMap" | "Secret"))
            && !self.granted(("Gateway", &key.namespace), (kind, namespace, name))
        {
            return Err((
                "RefNotPermitted",
                format!("{kind} {namespace}/{name} is in another namespace and no ReferenceGrant there allows it"),
            ));
        }
        let target = NamespacedName::new(namespace, name);
        match self.ca_bundle(group, kind, &target) {
            Ok(certs) => Ok((format!("{kind} {target}"), certs)),
            Err(("InvalidKind", why)) => Err(("InvalidCACertificateKind", why)),
            Err(other) => Err(other),
        }
    }
}

/// The Gateway's `InsecureFrontendValidationMode` condition: True while its default or a
/// port's validation allows insecure fallback; absent otherwise (the spec removes it).
pub(super) fn insecure_mode(gateway: &Gateway, generation: i64) -> Option<Condition> {
    let frontend = gateway.spec.tls.as_ref()?.frontend.as_ref()?;
    let insecure = |v: &Option<FrontendValidation>| {
        (v.as_ref()).is_some_and(|v| v.mode.as_deref() == Some("AllowInsecureFallback"))
    };
    let any = insecure(&frontend.default.validation)
        || frontend
            .per_port
            .iter()
            .any(|p| insecure(&p.tls.validation));
    any.then(|| {
        Condition::new(
            "InsecureFrontendValidationMode",
            true,
            "ConfigurationChanged",
            "a client without a valid certificate is served (AllowInsecureFallback)",
            generation,
        )
    })
}
