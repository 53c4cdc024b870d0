//! TCPRoute and UDPRoute (`gateway.networking.k8s.io/v1` since v1.7; `v1alpha2` has the same
//! fields) as Sluice reads them: parentRefs and one rule's backendRefs; no hostnames, no
//! matches (a listener port is all that routes).
//!
//! ```text
//!  YAML ──serde──▶ StreamRouteSpec { parentRefs, rules: [{ name, backendRefs }] } ──▶ Store
//!             └─ fields not declared here ──▶ `unsupported` paths, as for every Gateway API kind
//! ```
//! Both kinds have one shape: [`TcpRoute`] and [`UdpRoute`] are the same type under two names.
//! Also here: [`StreamPorts`], the TCP and UDP ports Gateway listeners hold (the compile's
//! state, which `compiler.rs` keeps).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::objects::{
    take_rest, GatewayObject, HttpBackendRef, ParentReference, Rest, Unsupported,
};
use super::pool::Place;

/// The TCP and UDP ports Gateway listeners hold, and the ports they may not have.
#[derive(Debug, Default)]
pub(crate) struct StreamPorts {
    /// Sluice's own listeners' ports (the flags'), as the services ConfigMaps see them.
    pub(crate) reserved: BTreeMap<u16, String>,
    /// (protocol, port, site) → the listener holding it there (`Gateway ns/name listener`).
    held: BTreeMap<(&'static str, u16, Place), String>,
}

impl StreamPorts {
    /// Whether a TCP listener holds `port` at some site: an HTTP or HTTPS listener may not
    /// have it (every site's TCP ports are bound on one address).
    pub(super) fn tcp_holds(&self, port: u16) -> bool {
        (self.held.keys()).any(|(protocol, p, _)| *protocol == "TCP" && *p == port)
    }

    /// Who holds each (protocol, port, site): `claim_stream_port` fills it.
    pub(super) fn held_mut(&mut self) -> &mut BTreeMap<(&'static str, u16, Place), String> {
        &mut self.held
    }
}

pub type TcpRoute = GatewayObject<StreamRouteSpec>;
pub type UdpRoute = GatewayObject<StreamRouteSpec>;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamRouteSpec {
    pub parent_refs: Vec<ParentReference>,
    pub rules: Vec<StreamRouteRule>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamRouteRule {
    /// Named rules: read (nothing depends on the name).
    pub name: Option<String>,
    pub backend_refs: Vec<HttpBackendRef>,
    #[serde(flatten)]
    pub rest: Rest,
}

impl Unsupported for StreamRouteSpec {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
        self.parent_refs
            .take_unsupported(&format!("{at}.parentRefs"), out);
        self.rules.take_unsupported(&format!("{at}.rules"), out);
    }
}

impl Unsupported for StreamRouteRule {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
        self.backend_refs
            .take_unsupported(&format!("{at}.backendRefs"), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::objects::typed_gateway;

    #[test]
    fn a_tcp_route_reads_its_parent_refs_and_weighted_backend_refs() {
        let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: db, namespace: app}
spec:
  parentRefs: [{name: gw, sectionName: tcp, port: 5432}]
  rules:
  - backendRefs: [{name: db-a, port: 5432, weight: 3}, {name: db-b, port: 5432}]
    sessionPersistence: {}
"#;
        let value: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        let route: TcpRoute = typed_gateway(value).unwrap();
        assert_eq!(&*route.unsupported, ["spec.rules[0].sessionPersistence"]);
        let parent = &route.spec.parent_refs[0];
        assert_eq!(
            (parent.section_name.as_deref(), parent.port),
            (Some("tcp"), Some(5432))
        );
        let refs = &route.spec.rules[0].backend_refs;
        assert_eq!((refs[0].name.as_str(), refs[0].weight), ("db-a", Some(3)));
        assert_eq!((refs[1].name.as_str(), refs[1].weight), ("db-b", None));
    }
}
