//! A Gateway's infrastructure (GEP-1762, GEP-1867): the Service Sluice generates for it in
//! Kubernetes mode, with `spec.infrastructure`'s labels and annotations. (A `parametersRef`,
//! the class's or the Gateway's, refuses the Gateway before: `infrastructure_objects`.)
//!
//! ```text
//!  a served Gateway, Kubernetes mode ─▶ Generated::Service {
//!      name: <gateway>-<class> (a hashed fallback when that is no Service name),
//!      labels: gateway-name, gateway-class-name, spec.infrastructure.labels (checked),
//!      annotations: spec.infrastructure.annotations (checked),
//!      ports: its accepted listeners' (protocol, port) ─▶ where Sluice serves them,
//!      addresses: its own (--gateway-address-pool) │ the shared ones (the provider's) }
//!  … or Generated::Refused(why): a name too long for its label, no accepted listener
//!  a Gateway served nowhere ─▶ nothing
//!  a configuration from files ─▶ nothing generated; labels or annotations: a notice
//! ```
//! The labels, key rules, name and `parametersRef` decisions are `infrastructure_objects`'s; the
//! provider's leader writes the Service and EndpointSlices
//! (`providers/src/kubernetes/infrastructure.rs`): nothing here knows how.

use std::collections::BTreeMap;

use model::gateway_status::{
    GatewayService, Generated, ListenPorts, ServiceAddresses, ServicePort,
};
use model::routes::Listeners;
use model::streams::StreamProtocol;
use model::{NamespacedName, Severity};

use super::infrastructure_objects::{
    key_problem, label_value_problem, service_name, GATEWAY_CLASS_NAME_LABEL, GATEWAY_NAME_LABEL,
    MAX_NAME,
};
use super::objects::Gateway;
use super::{gateway_ref, ListenerSlot, Place};
use crate::compiler::Compiler;

impl Compiler<'_> {
    /// What is generated for a served Gateway: `None` from files (`listen` is `None`: there is
    /// no API server) and for a Gateway served nowhere, else its Service or why there is none.
    /// `listeners`: every accepted listener (the Gateway's and its ListenerSets').
    pub(super) fn gateway_service(
        &mut self,
        (key, gateway): (&NamespacedName, &Gateway),
        place: Place,
        listeners: &[ListenerSlot],
        listen: Option<ListenPorts>,
    ) -> Option<Generated> {
        let object = gateway_ref(key);
        let infrastructure = gateway.spec.infrastructure.clone().unwrap_or_default();
        let Some(listen) = listen else {
            if !infrastructure.labels.is_empty() || !infrastructure.annotations.is_empty() {
                self.diagnose_with(
                    Severity::Notice,
                    object,
                    "spec.infrastructure: its labels and annotations go on the Service Sluice generates for a Gateway in Kubernetes mode (--kubernetes); from files nothing is generated",
                );
            }
            return None;
        };
        let addresses = match place {
            Place::Own(ip) => ServiceAddresses::Own(ip),
            Place::Shared => ServiceAddresses::Shared,
            Place::Nowhere => return None,
        };
        if key.name.len() > MAX_NAME {
            return Some(Generated::Refused(format!(
                "metadata.name is longer than {MAX_NAME} characters, the most the label {GATEWAY_NAME_LABEL} holds: no Service is generated"
            )));
        }
        let class = &gateway.spec.gateway_class_name;
        let mut labels = BTreeMap::from([(GATEWAY_NAME_LABEL.to_owned(), key.name.to_string())]);
        if class.len() <= MAX_NAME {
            labels.insert(GATEWAY_CLASS_NAME_LABEL.to_owned(), class.clone());
        } else {
            self.diagnose_with(
                Severity::Notice,
                object.clone(),
                format!("spec.gatewayClassName is longer than {MAX_NAME} characters, the most a label holds: the generated Service has no {GATEWAY_CLASS_NAME_LABEL} label"),
            );
        }
        for (name, value) in infrastructure.labels {
            let problem = key_problem(&name).or_else(|| label_value_problem(&value));
            match problem {
                Some(why) => self.diagnose(
                    object.clone(),
                    format!("spec.infrastructure.labels[{name:?}]: {why}; left out of the generated Service"),
                ),
                None => {
                    labels.insert(name, value);
                }
            }
        }
        let mut annotations = BTreeMap::new();
        for (name, value) in infrastructure.annotations {
            match key_problem(&name) {
                Some(why) => self.diagnose(
                    object.clone(),
                    format!("spec.infrastructure.annotations[{name:?}]: {why}; left out of the generated Service"),
                ),
                None => {
                    annotations.insert(name, value);
                }
            }
        }
        let ports = service_ports(key, listeners, listen);
        if ports.is_empty() {
            return Some(Generated::Refused(
                "no listener of the Gateway is accepted, and a Service needs a port: none is generated".to_owned(),
            ));
        }
        Some(Generated::Service(GatewayService {
            name: service_name(key, class),
            labels,
            annotations,
            ports,
            addresses,
            generation: gateway.generation,
        }))
    }
}

/// One port per (protocol, port) of the Gateway's accepted listeners, sorted.
fn service_ports(
    key: &NamespacedName,
    listeners: &[ListenerSlot],
    listen: ListenPorts,
) -> Vec<ServicePort> {
    let mut ports: Vec<ServicePort> = listeners
        .iter()
        .filter(|l| l.gateway == *key)
        .filter_map(|l| {
            let port = u16::try_from(l.port).ok()?;
            let protocol = l.stream.unwrap_or(StreamProtocol::Tcp);
            // 80 and 443 are Sluice's own sockets; any other port is bound at its number.
            let target = match (l.stream, l.on) {
                (None, Listeners::HTTP) => listen.http,
                (None, Listeners::HTTPS) => listen.https,
                _ => port,
            };
            let prefix = match protocol {
                StreamProtocol::Tcp => "tcp",
                StreamProtocol::Udp => "udp",
            };
            Some(ServicePort {
                name: format!("{prefix}-{port}"),
                protocol,
                port,
                target,
            })
        })
        .collect();
    ports.sort_by_key(|p| (p.protocol, p.port));
    ports.dedup_by_key(|p| (p.protocol, p.port));
    ports
}
