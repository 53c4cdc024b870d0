//! BackendTLSPolicy: how Gateway routes' connections to a Service port are made TLS, as the
//! same `UpstreamTls` the `proxy-ssl-*` annotations make (one TLS client in the proxy).
//!
//! ```text
//!  BackendTLSPolicy ─targetRefs (Service, sectionName = port name)─▶ index by target
//!     (the oldest policy, then namespace/name, wins a target; the others: Conflicted)
//!     validation: caCertificateRefs (ConfigMap / Secret ca.crt, ClusterTrustBundle
//!                 spec.trustBundle) | wellKnownCACertificates
//!                 System, hostname (SNI; verified unless subjectAltNames), subjectAltNames
//!        ─▶ Arc<UpstreamTls> (verify on, SNI on) | why not (its target's shares answer 500)
//!  backendRef share (app_protocol) ─(Service, port name)─▶ that UpstreamTls on its RoutePolicy,
//!     the route remembered per target ─▶ after the routes: status.ancestors, one per Gateway
//!     that accepted such a route (Accepted, ResolvedRefs with the spec's reasons)
//!  Gateway spec.tls.backend.clientCertificateRef ─▶ Secret (tls.crt, tls.key) ─▶ the client
//!     certificate of its routes' policy TLS (the Gateway's ResolvedRefs says whether it resolved)
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;

use model::gateway_status::{
    Condition, GatewayStatuses, ParentRef, PolicyAncestorStatus, PolicyStatus, RouteStatus,
};
use model::policy::{TlsVersions, UpstreamTls};
use model::upstream_tls::SubjectAltName;
use model::{Backend, Kind, NamespacedName, ObjectRef, Severity};

use super::backend_tls_objects::{BackendTlsPolicy, LocalObjectRef, Verdict};
use super::objects::{Gateway, GROUP, TRUST_BUNDLE_GROUP, TRUST_BUNDLE_KIND};
use super::GATEWAY_CONTROLLER;
use crate::compiler::Compiler;
use crate::ingress::upstream::trust_anchors;

/// Why a ClusterTrustBundle cannot be found in a cluster whose API server answered 404 for
/// them, and what its operator can do (the API is off by default in Kubernetes 1.35).
const TRUST_BUNDLES_UNSERVED: &str = "the cluster does not serve ClusterTrustBundle \
    (certificates.k8s.io/v1beta1 clustertrustbundles answered 404); kube-apiserver serves it \
    with --feature-gates=ClusterTrustBundle=true and \
    --runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true";

impl Compiler<'_> {
    /// Reads every BackendTLSPolicy and decides which covers each target.
    pub(super) fn backend_tls_policies(&mut self) {
        let store = self.store;
        let mut policies: Vec<_> = store.backend_tls_policies_by_name().collect();
        // GEP-713's precedence: the oldest, then namespace/name (objects of a file have no
        // creation time and count as oldest).
        policies.sort_by(|(a_key, a), (b_key, b)| {
            (a.metadata
                .creation_timestamp
                .cmp(&b.metadata.creation_timestamp))
            .then_with(|| a_key.cmp(b_key))
        });
        // The Gateways' client certificates were read with the Gateways.
        let mut index = std::mem::take(&mut self.backend_tls);
        for (key, policy) in policies {
            let object = ObjectRef::new(Kind::BackendTLSPolicy, &*key.namespace, &*key.name);
            self.unsupported_fields(&object, &policy.unsupported);
            for option in policy.spec.options.keys() {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("spec.options.{option}: Sluice defines no options; ignored"),
                );
            }
            let mut verdict = self.verdict(key, policy);
            for (t, target) in policy.spec.target_refs.iter().enumerate() {
                if !target.group.is_empty() || target.kind != "Service" {
                    self.diagnose(
                        object.clone(),
                        format!("spec.targetRefs[{t}]: {}/{}: Sluice applies BackendTLSPolicy to Services only; ignored", target.group, target.kind),
                    );
                    continue;
                }
                let service = NamespacedName::new(key.namespace.clone(), target.name.as_str());
                let at = (service, target.section_name.clone());
                match index.winners.get(&at) {
                    Some(winner) => {
                        verdict.refused = Some((
                            "Conflicted",
                            format!("BackendTLSPolicy {winner} is older (or first by name) and targets the same Service port"),
                        ));
                    }
                    None => {
                        index.winners.insert(at.clone(), key.clone());
                    }
                }
                verdict.targets.push(at);
            }
            index.verdicts.insert(key.clone(), verdict);
        }
        self.backend_tls = index;
    }

    /// What a policy makes of its validation, with its conditions' reasons.
    fn verdict(&mut self, key: &NamespacedName, policy: &BackendTlsPolicy) -> Verdict {
        let validation = &policy.spec.validation;
        let mut verdict = Verdict {
            generation: policy.generation,
            tls: Err(String::new()),
            refused: None,
            unresolved: None,
            targets: Vec::new(),
        };
        let mut trusted = Vec::new();
        let mut resolved_any = false;
        for (r, reference) in validation.ca_certificate_refs.iter().enumerate() {
            let at = format!("spec.validation.caCertificateRefs[{r}]");
            match self.ca_certificate(&key.namespace, reference) {
                Ok(certs) => {
                    resolved_any = true;
                    trusted.extend(certs);
                }
                Err((reason, why)) => {
                    let message = format!("{at}: {why}");
                    verdict.unresolved.get_or_insert((reason, message));
                }
            }
        }
        let system_roots = match validation.well_known_ca_certificates.as_deref() {
            None | Some("") => false,
            Some("System") => true,
            Some(other) => {
                verdict.refused = Some((
                    "Invalid",
                    format!(
                        "spec.validation.wellKnownCACertificates {other}: Sluice knows System only"
                    ),
                ));
                false
            }
        };
        if verdict.refused.is_none() && !resolved_any && !system_roots {
            verdict.refused = Some((
                "NoValidCACertificate",
                match &verdict.unresolved {
                    Some((_, why)) => why.clone(),
                    None => "no CA certificate to verify the backend with".to_owned(),
                },
            ));
        }
        let mut subject_alt_names = Vec::new();
        for (s, san) in validation.subject_alt_names.iter().enumerate() {
            match (san.type_.as_str(), &san.hostname, &san.uri) {
                ("Hostname", Some(name), _) if !name.is_empty() => {
                    subject_alt_names.push(SubjectAltName::Hostname(name.to_ascii_lowercase()))
                }
                ("URI", _, Some(uri)) if !uri.is_empty() => {
                    subject_alt_names.push(SubjectAltName::Uri(uri.clone()))
                }
                (kind, _, _) => {
                    verdict.refused.get_or_insert((
                        "Invalid",
                        format!("spec.validation.subjectAltNames[{s}]: type {kind} with no value of that type"),
                    ));
                }
            }
        }
        verdict.tls = match &verdict.refused {
            Some((_, why)) => Err(why.clone()),
            None => Ok(Arc::new(UpstreamTls {
                verify: true,
                // Gateway API sets no depth limit.
                verify_depth: u32::MAX,
                name: validation.hostname.clone(),
                server_name: true,
                versions: TlsVersions::ALL,
                secret: Some(format!("BackendTLSPolicy {key}")),
                trusted,
                client_cert: None,
                subject_alt_names,
                system_roots,
            })),
        };
        verdict
    }

    /// The CA certificates of one `caCertificateRefs` entry, or the spec's reason it is not.
    fn ca_certificate(
        &mut self,
        namespace: &Arc<str>,
        reference: &LocalObjectRef,
    ) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, (&'static str, String)> {
        let key = NamespacedName::new(namespace.clone(), reference.name.as_str());
        self.ca_bundle(&reference.group, &reference.kind, &key)
    }

    /// The CA certificates of the ConfigMap or Secret `key` (its `ca.crt`) or of the
    /// ClusterTrustBundle `key.name` (its `spec.trustBundle`; cluster-scoped, so no
    /// ReferenceGrant is asked for), as a reference's `group`/`kind` names it, or the reason
    /// it cannot be used (InvalidCACertificateRef, InvalidKind) and why. BackendTLSPolicy's
    /// and a Gateway's frontend validation's.
    pub(super) fn ca_bundle(
        &mut self,
        group: &str,
        kind: &str,
        key: &NamespacedName,
    ) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, (&'static str, String)> {
        let invalid = |why: String| ("InvalidCACertificateRef", why);
        let store = self.store;
        let (pem, field): (&[u8], _) = match (group, kind) {
            ("", "ConfigMap") => {
                let found = self
                    .read_config_map(key)
                    .ok_or_else(|| invalid(format!("ConfigMap {key} not found")))?;
                let data = found.data.as_ref().and_then(|d| d.get("ca.crt"));
                let pem = data.ok_or_else(|| invalid(format!("ConfigMap {key} has no ca.crt")))?;
                (pem.as_bytes(), format!("ConfigMap {key}: ca.crt"))
            }
            // Implementation-specific: a Secret's ca.crt, as `proxy-ssl-secret` reads one.
            ("", "Secret") => {
                let found = store
                    .secret(key)
                    .ok_or_else(|| invalid(format!("Secret {key} not found")))?;
                let data = found.data.as_ref().and_then(|d| d.get("ca.crt"));
                let pem = data.ok_or_else(|| invalid(format!("Secret {key} has no ca.crt")))?;
                (&pem.0[..], format!("Secret {key}: ca.crt"))
            }
            (TRUST_BUNDLE_GROUP, TRUST_BUNDLE_KIND) => {
                let name = &*key.name;
                let found = self.read_cluster_trust_bundle(name).ok_or_else(|| {
                    invalid(match store.serves(Kind::ClusterTrustBundle) {
                        true => format!("ClusterTrustBundle {name} not found"),
                        false => format!("ClusterTrustBundle {name}: {TRUST_BUNDLES_UNSERVED}"),
                    })
                })?;
                let pem = found.trust_bundle.as_bytes();
                (pem, format!("ClusterTrustBundle {name}: spec.trustBundle"))
            }
            (group, kind) => {
                return Err((
                    "InvalidKind",
                    format!(
                    "{group}/{kind}: Sluice reads CA certificates from ConfigMaps, Secrets and ClusterTrustBundles only"
                ),
                ))
            }
        };
        trust_anchors(pem).map_err(|why| invalid(format!("{field}: {why}")))
    }

    /// The TLS a share to `backend` from `route` is made with: `None` when no policy covers
    /// its Service port, `Err` (why) when the one that does cannot be used.
    pub(super) fn backend_tls_for(
        &mut self,
        route: &ObjectRef,
        backend: &Backend,
    ) -> Option<Result<Arc<UpstreamTls>, String>> {
        let key = backend.key()?;
        if self.backend_tls.verdicts.is_empty() {
            return None;
        }
        let service_port = (key.service.clone(), key.port_name.to_string());
        if let Some(recording) = &mut self.recording {
            (recording.backend_tls_uses).push((service_port.clone(), route.clone()));
        }
        (self.backend_tls.used_by)
            .entry(service_port)
            .or_default()
            .insert(route.clone());
        let index = &self.backend_tls;
        let winner = index
            .winners
            .get(&(key.service.clone(), Some(key.port_name.to_string())))
            .or_else(|| index.winners.get(&(key.service.clone(), None)))?;
        let verdict = &index.verdicts[winner];
        let tls = match &verdict.tls {
            Ok(tls) => tls.clone(),
            Err(why) => return Some(Err(format!("BackendTLSPolicy {winner}: {why}"))),
        };
        if index.client_certs.is_empty() {
            return Some(Ok(tls));
        }
        // The client certificate of the route's Gateway (the first by namespace/name, when
        // its parents are several Gateways with one each).
        let Some(gateway) = self
            .route_gateways(route)
            .into_iter()
            .find(|g| self.backend_tls.client_certs.contains_key(g))
        else {
            return Some(Ok(tls));
        };
        let winner = winner.clone();
        let index = &mut self.backend_tls;
        let cert = index.client_certs[&gateway].clone();
        let with = (index.with_client_cert.entry((winner, gateway))).or_insert_with(|| {
            Arc::new(UpstreamTls {
                client_cert: Some(cert),
                ..(*tls).clone()
            })
        });
        Some(Ok(with.clone()))
    }

    /// The Gateways a route's parentRefs name, in namespace/name order.
    fn route_gateways(&self, route: &ObjectRef) -> BTreeSet<NamespacedName> {
        if let Some(gateway) = self.filter_owner(route) {
            return BTreeSet::from([gateway]);
        }
        let key = NamespacedName::new(route.namespace.as_str(), route.name.as_str());
        let parents = match route.kind {
            Kind::HTTPRoute => self.store.http_route(&key).map(|r| &r.spec.parent_refs),
            Kind::GRPCRoute => self.store.grpc_route(&key).map(|r| &r.spec.parent_refs),
            _ => None,
        };
        (parents.into_iter().flatten())
            .filter(|p| p.group.as_deref().unwrap_or(GROUP) == GROUP)
            .filter(|p| p.kind.as_deref().unwrap_or("Gateway") == "Gateway")
            .map(|p| {
                let namespace = p.namespace.as_deref().unwrap_or(&route.namespace);
                NamespacedName::new(namespace, p.name.as_str())
            })
            .collect()
    }

    /// The Gateway of a listener filter's owner (`listener_filters`: the Gateway itself, or a
    /// ListenerSet's parent); `None` for routes.
    fn filter_owner(&self, object: &ObjectRef) -> Option<NamespacedName> {
        let key = NamespacedName::new(object.namespace.as_str(), object.name.as_str());
        match object.kind {
            Kind::Gateway => Some(key),
            Kind::ListenerSet => {
                let set = (self.store.listener_sets_by_name())
                    .find(|(k, _)| **k == key)?
                    .1;
                let parent = &set.spec.parent_ref;
                let namespace = parent.namespace.as_deref().unwrap_or(&key.namespace);
                Some(NamespacedName::new(namespace, parent.name.as_str()))
            }
            _ => None,
        }
    }

    /// A Gateway's `spec.tls.backend.clientCertificateRef`: the certificate its routes present
    /// to TLS backends, and its `ResolvedRefs` condition (with the spec's reasons).
    pub(super) fn gateway_client_certificate(&mut self, key: &NamespacedName, gateway: &Gateway) {
        let Some(reference) = (gateway.spec.tls.as_ref())
            .and_then(|tls| tls.backend.as_ref())
            .and_then(|backend| backend.client_certificate_ref.as_ref())
        else {
            return;
        };
        let at = "spec.tls.backend.clientCertificateRef";
        let group = reference.group.as_deref().unwrap_or("");
        let kind = reference.kind.as_deref().unwrap_or("Secret");
        let namespace = reference.namespace.as_deref().unwrap_or(&key.namespace);
        let found = if !group.is_empty() || kind != "Secret" {
            Err((
                "InvalidClientCertificateRef",
                format!("{at}: {group}/{kind}: client certificates come from Secrets only"),
            ))
        } else if namespace != &*key.namespace
            && !self.granted(
                ("Gateway", &key.namespace),
                ("Secret", namespace, &reference.name),
            )
        {
            Err((
                "RefNotPermitted",
                format!("{at}: Secret {namespace}/{} is in another namespace and no ReferenceGrant there allows it", reference.name),
            ))
        } else {
            let secret = NamespacedName::new(namespace, reference.name.as_str());
            self.load_secret(&secret).map_err(|problem| {
                (
                    "InvalidClientCertificateRef",
                    format!("{at}: Secret {secret}: {}", problem.text),
                )
            })
        };
        let generation = gateway.generation;
        let condition = match found {
            Ok((cert, _)) => {
                self.backend_tls.client_certs.insert(key.clone(), cert);
                Condition::new("ResolvedRefs", true, "ResolvedRefs", "", generation)
            }
            Err((reason, why)) => {
                let object = ObjectRef::new(Kind::Gateway, &*key.namespace, &*key.name);
                self.diagnose(
                    object,
                    format!("{why}; its routes present no client certificate"),
                );
                Condition::new("ResolvedRefs", false, reason, why, generation)
            }
        };
        self.backend_tls.gateway_refs.insert(key.clone(), condition);
    }

    /// Each policy's `status.ancestors`: one entry per Gateway that accepted a route with a
    /// share to one of its targets.
    pub(super) fn backend_tls_status(&mut self, status: &mut GatewayStatuses) {
        let index = std::mem::take(&mut self.backend_tls);
        if index.verdicts.is_empty() {
            return;
        }
        for (key, verdict) in &index.verdicts {
            let mut gateways = BTreeSet::new();
            for ((service, port), routes) in &index.used_by {
                let covered = verdict.targets.iter().any(|(s, section)| {
                    s == service && section.as_ref().is_none_or(|name| name == port)
                });
                if !covered {
                    continue;
                }
                for route in routes {
                    match self.filter_owner(route) {
                        // A listener filter's auth server: the listener's Gateway, when accepted.
                        Some(gateway) => gateways.extend(
                            (status.gateways.get(&gateway))
                                .filter(|g| {
                                    (g.conditions.iter()).any(|c| c.type_ == "Accepted" && c.status)
                                })
                                .map(|_| gateway),
                        ),
                        None => gateways.extend(accepting_gateways(status, route)),
                    }
                }
            }
            if gateways.is_empty() {
                continue;
            }
            let generation = verdict.generation;
            let accepted = match &verdict.refused {
                Some((reason, why)) => Condition::new("Accepted", false, reason, why, generation),
                None => Condition::new("Accepted", true, "Accepted", "", generation),
            };
            let resolved = match &verdict.unresolved {
                Some((reason, why)) => {
                    Condition::new("ResolvedRefs", false, reason, why, generation)
                }
                None => Condition::new("ResolvedRefs", true, "ResolvedRefs", "", generation),
            };
            let ancestors = gateways
                .into_iter()
                .map(|gateway: NamespacedName| PolicyAncestorStatus {
                    ancestor_ref: ParentRef {
                        group: Some(GROUP.to_owned()),
                        kind: Some("Gateway".to_owned()),
                        namespace: Some(gateway.namespace.to_string()),
                        name: gateway.name.to_string(),
                        section_name: None,
                        port: None,
                    },
                    controller_name: GATEWAY_CONTROLLER,
                    conditions: vec![accepted.clone(), resolved.clone()],
                })
                .collect();
            (status.backend_tls_policies).insert(key.clone(), PolicyStatus { ancestors });
        }
    }
}

/// The Gateways whose status entry on `route` says Accepted.
fn accepting_gateways(statuses: &GatewayStatuses, route: &ObjectRef) -> Vec<NamespacedName> {
    let key = NamespacedName::new(route.namespace.as_str(), route.name.as_str());
    let found: Option<&RouteStatus> = match route.kind {
        Kind::HTTPRoute => statuses.http_routes.get(&key).map(|s| &**s),
        Kind::GRPCRoute => statuses.grpc_routes.get(&key).map(|s| &**s),
        Kind::TLSRoute => statuses.tls_routes.get(&key).map(|s| &**s),
        Kind::TCPRoute => statuses.tcp_routes.get(&key).map(|s| &**s),
        Kind::UDPRoute => statuses.udp_routes.get(&key).map(|s| &**s),
        _ => None,
    };
    found
        .into_iter()
        .flat_map(|s| &s.parents)
        .filter(|p| p.parent_ref.kind.as_deref().unwrap_or("Gateway") == "Gateway")
        .filter(|p| (p.conditions.iter()).any(|c| c.type_ == "Accepted" && c.status))
        .map(|p| {
            let namespace = p
                .parent_ref
                .namespace
                .as_deref()
                .unwrap_or(&route.namespace);
            NamespacedName::new(namespace, p.parent_ref.name.as_str())
        })
        .collect()
}
