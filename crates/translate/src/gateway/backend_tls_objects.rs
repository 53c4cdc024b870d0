//! BackendTLSPolicy as Sluice reads it (`gateway.networking.k8s.io/v1`), and what a compile
//! decides of the policies (`BackendTls`, filled by `backend_tls`).
//!
//! ```text
//!  YAML / API JSON ─serde─▶ BackendTlsPolicy (unknown fields ─▶ paths) ─▶ Store
//!  backend_tls ─▶ BackendTls { winners by target, verdicts, routes per Service port,
//!                             Gateways' client certificates }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use model::gateway_status::Condition;
use model::policy::UpstreamTls;
use model::{NamespacedName, ObjectRef};
use rustls::sign::CertifiedKey;
use serde::Deserialize;

use super::objects::{take_rest, unsupported, GatewayObject, Rest, Unsupported};

pub type BackendTlsPolicy = GatewayObject<BackendTlsPolicySpec>;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsPolicySpec {
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetRef>,
    pub validation: BackendTlsValidation,
    /// Implementation-specific keys: Sluice defines none (each is a diagnostic).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(BackendTlsPolicySpec { target_refs => "targetRefs", validation => "validation" });

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetRef {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub section_name: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(PolicyTargetRef {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackendTlsValidation {
    #[serde(default)]
    pub ca_certificate_refs: Vec<LocalObjectRef>,
    #[serde(default, rename = "wellKnownCACertificates")]
    pub well_known_ca_certificates: Option<String>,
    pub hostname: String,
    #[serde(default)]
    pub subject_alt_names: Vec<SubjectAltNameSpec>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(BackendTlsValidation {
    ca_certificate_refs => "caCertificateRefs",
    subject_alt_names => "subjectAltNames",
});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectRef {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub name: String,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(LocalObjectRef {});

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SubjectAltNameSpec {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub hostname: Option<String>,
    #[serde(default)]
    pub uri: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}
unsupported!(SubjectAltNameSpec {});

/// A compile's BackendTLSPolicies: which one covers each target, what it makes, and the
/// routes that sent through each Service port (for the policies' ancestors).
#[derive(Debug, Default)]
pub(crate) struct BackendTls {
    /// (Service, sectionName) → the policy that takes precedence there.
    pub(crate) winners: BTreeMap<(NamespacedName, Option<String>), NamespacedName>,
    pub(crate) verdicts: BTreeMap<NamespacedName, Verdict>,
    /// (Service, port name) → the routes with a share there.
    pub(crate) used_by: BTreeMap<(NamespacedName, String), BTreeSet<ObjectRef>>,
    /// Gateways' `spec.tls.backend.clientCertificateRef`, resolved.
    pub(crate) client_certs: BTreeMap<NamespacedName, Arc<CertifiedKey>>,
    /// A Gateway's `ResolvedRefs` condition, for those with a `clientCertificateRef`.
    pub(crate) gateway_refs: BTreeMap<NamespacedName, Condition>,
    /// (policy, Gateway) → the policy's TLS with that Gateway's client certificate.
    pub(crate) with_client_cert: BTreeMap<(NamespacedName, NamespacedName), Arc<UpstreamTls>>,
}

/// What one policy is.
#[derive(Debug)]
pub(crate) struct Verdict {
    pub(crate) generation: i64,
    /// What its targets' connections are made with; `Err`: why they cannot be (500).
    pub(crate) tls: Result<Arc<UpstreamTls>, String>,
    /// `Accepted` False: the spec's reason and a message (`tls` says the same, or it lost).
    pub(crate) refused: Option<(&'static str, String)>,
    /// `ResolvedRefs` False: the spec's reason and a message.
    pub(crate) unresolved: Option<(&'static str, String)>,
    /// Its targets, as (Service, sectionName).
    pub(crate) targets: Vec<(NamespacedName, Option<String>)>,
}
