//! TLSRoute (`gateway.networking.k8s.io/v1`; v1alpha2 and v1alpha3 have the same fields) as
//! Sluice reads it: parentRefs, hostnames (server names) and one rule's backendRefs.
//!
//! ```text
//!  YAML ──serde──▶ TlsRouteSpec { parentRefs, hostnames, rules: [{ name, backendRefs }] } ──▶ Store
//!             └─ fields not declared here ──▶ `unsupported` paths, as for every Gateway API kind
//! ```
//! A TLSRoute's backendRef is HTTPRoute's without filters. Also here: a TLS listener's
//! `tls.mode` ([`TlsMode`]), which the listeners and the TLSRoute compile both read.

use serde::Deserialize;

use super::objects::{
    take_rest, GatewayObject, HttpBackendRef, Listener, ParentReference, Rest, Unsupported,
};

pub type TlsRoute = GatewayObject<TlsRouteSpec>;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsRouteSpec {
    pub parent_refs: Vec<ParentReference>,
    pub hostnames: Vec<String>,
    pub rules: Vec<TlsRouteRule>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsRouteRule {
    /// Named rules: read (nothing depends on the name).
    pub name: Option<String>,
    pub backend_refs: Vec<HttpBackendRef>,
    #[serde(flatten)]
    pub rest: Rest,
}

impl Unsupported for TlsRouteSpec {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
        self.parent_refs
            .take_unsupported(&format!("{at}.parentRefs"), out);
        self.rules.take_unsupported(&format!("{at}.rules"), out);
    }
}

impl Unsupported for TlsRouteRule {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
        self.backend_refs
            .take_unsupported(&format!("{at}.backendRefs"), out);
    }
}

/// A TLS listener's `tls.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    Passthrough,
    Terminate,
}

impl TlsMode {
    /// A TLS listener's mode (Terminate when `tls.mode` is not written, as the API defaults
    /// it); `None` for the other protocols.
    pub fn of(listener: &Listener) -> Option<TlsMode> {
        (listener.protocol == "TLS").then(|| {
            match listener.tls.as_ref().and_then(|t| t.mode.as_deref()) {
                Some("Passthrough") => TlsMode::Passthrough,
                _ => TlsMode::Terminate,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::objects::typed_gateway;

    #[test]
    fn a_tls_route_reads_its_hostnames_and_backend_refs_and_names_what_sluice_ignores() {
        let text = r#"
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: pass, namespace: app}
spec:
  parentRefs: [{name: gw, sectionName: tls}]
  hostnames: [abc.example.com]
  rules:
  - backendRefs: [{name: tcp, port: 8443}]
    sessionPersistence: {}
"#;
        let value: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        let route: TlsRoute = typed_gateway(value).unwrap();
        assert_eq!(&*route.unsupported, ["spec.rules[0].sessionPersistence"]);
        assert_eq!(route.spec.hostnames, ["abc.example.com"]);
        let reference = &route.spec.rules[0].backend_refs[0];
        assert_eq!(
            (reference.name.as_str(), reference.port),
            ("tcp", Some(8443))
        );
    }
}
