//! ListenerSet (`gateway.networking.k8s.io/v1`) as Sluice reads it: a parent Gateway and
//! listeners of the Gateway's own shape.
//!
//! ```text
//!  YAML ──serde──▶ ListenerSetSpec { parentRef: { group, kind, namespace, name },
//!                  listeners: [Listener (the Gateway's type)] } ──▶ Store
//!             └─ fields not declared here (a listener's `bogus`, …) ──▶ `unsupported` paths
//! ```

use serde::Deserialize;

use super::objects::{GatewayObject, Listener, ObjectReference, Rest, Unsupported};

pub type ListenerSet = GatewayObject<ListenerSetSpec>;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerSetSpec {
    /// The Gateway the listeners join (group and kind default to Gateway API's Gateway, the
    /// namespace to the ListenerSet's).
    pub parent_ref: ObjectReference,
    pub listeners: Vec<Listener>,
    #[serde(flatten)]
    pub rest: Rest,
}

impl Unsupported for ListenerSetSpec {
    fn take_unsupported(&mut self, at: &str, out: &mut Vec<String>) {
        super::objects::take_rest(&mut self.rest, at, out);
        (self.parent_ref).take_unsupported(&format!("{at}.parentRef"), out);
        self.listeners
            .take_unsupported(&format!("{at}.listeners"), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::objects::typed_gateway;

    #[test]
    fn a_listener_set_reads_its_parent_and_listeners_and_names_what_sluice_ignores() {
        let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: team}
spec:
  parentRef: {name: edge, namespace: infra}
  listeners:
  - {name: alt, port: 8080, protocol: HTTP, hostname: alt.example.com, bogus: {},
     filters: {requests: [{type: ExtensionRef, extensionRef: {group: x.io, kind: K, name: k}}]}}
"#;
        let value: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
        let set: ListenerSet = typed_gateway(value).unwrap();
        assert_eq!(&*set.unsupported, ["spec.listeners[0].bogus"]);
        let filters = set.spec.listeners[0].filters.as_ref().unwrap();
        assert_eq!(filters.requests[0].type_, "ExtensionRef");
        assert_eq!(set.spec.parent_ref.name, "edge");
        assert_eq!(set.spec.parent_ref.namespace.as_deref(), Some("infra"));
        assert_eq!(set.spec.listeners[0].port, 8080);
    }
}
