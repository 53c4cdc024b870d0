//! GRPCRoute (`gateway.networking.k8s.io/v1`) as Sluice reads it: the HTTPRoute's parentRefs,
//! hostnames, header matches, filters and backendRefs, with gRPC's method match.
//!
//! ```text
//!  YAML ──serde──▶ GrpcRouteSpec { parentRefs, hostnames, rules: [{ name, matches: [{ method:
//!                  { type, service, method }, headers }], filters, backendRefs }] } ──▶ Store
//!             └─ fields not declared here (sessionPersistence, a backendRef's filters, …)
//!                ──▶ `unsupported` paths, as for every Gateway API kind
//! ```
//! The shared pieces are HTTPRoute's own types: a GRPCRoute filter is an HTTPRoute filter of
//! fewer types (the compile refuses the others), a GRPCBackendRef a backendRef.

use serde::Deserialize;

use super::objects::{
    take_rest, GatewayObject, HttpBackendRef, HttpRouteFilter, ParentReference, Rest, Unsupported,
    ValueMatchSpec,
};

pub type GrpcRoute = GatewayObject<GrpcRouteSpec>;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRouteSpec {
    pub parent_refs: Vec<ParentReference>,
    pub hostnames: Vec<String>,
    pub rules: Vec<GrpcRouteRule>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRouteRule {
    /// Named rules: read (nothing depends on the name yet).
    pub name: Option<String>,
    pub matches: Vec<GrpcRouteMatch>,
    pub filters: Vec<HttpRouteFilter>,
    pub backend_refs: Vec<HttpBackendRef>,
    #[serde(flatten)]
    pub rest: Rest,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRouteMatch {
    pub method: Option<GrpcMethodMatch>,
    pub headers: Vec<ValueMatchSpec>,
    #[serde(flatten)]
    pub rest: Rest,
}

/// `type` Exact (the default) or RegularExpression, over `service` and/or `method`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcMethodMatch {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub service: Option<String>,
    pub method: Option<String>,
    #[serde(flatten)]
    pub rest: Rest,
}

impl Unsupported for GrpcRouteSpec {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
        self.parent_refs
            .take_unsupported(&format!("{at}.parentRefs"), out);
        self.rules.take_unsupported(&format!("{at}.rules"), out);
    }
}

impl Unsupported for GrpcRouteRule {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
        self.matches.take_unsupported(&format!("{at}.matches"), out);
        self.filters.take_unsupported(&format!("{at}.filters"), out);
        self.backend_refs
            .take_unsupported(&format!("{at}.backendRefs"), out);
    }
}

impl Unsupported for GrpcRouteMatch {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
        self.method.take_unsupported(&format!("{at}.method"), out);
        self.headers.take_unsupported(&format!("{at}.headers"), out);
    }
}

impl Unsupported for GrpcMethodMatch {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        take_rest(&mut self.rest, at, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::objects::typed_gateway;

    #[test]
    fn a_grpc_route_reads_its_method_matches_and_names_what_sluice_ignores() {
        let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: rpc, namespace: app}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com]
  rules:
  - name: echo
    matches:
    - method: {service: echo.Echo, method: Say}
      headers: [{name: version, value: two}]
    backendRefs: [{name: echo, port: 8080, weight: 3, filters: []}]
    sessionPersistence: {}
"#;
        let value: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        let route: GrpcRoute = typed_gateway(value).unwrap();
        assert_eq!(&*route.unsupported, ["spec.rules[0].sessionPersistence"]);
        let rule = &route.spec.rules[0];
        let method = rule.matches[0].method.as_ref().unwrap();
        assert_eq!(
            (method.service.as_deref(), method.method.as_deref()),
            (Some("echo.Echo"), Some("Say"))
        );
        assert_eq!(rule.backend_refs[0].weight, Some(3));
    }
}
