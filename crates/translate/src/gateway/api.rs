//! Gateway API objects as the API server sends them (JSON) into the Store's objects, through
//! the same types as a file's documents, so both modes read and report a field alike.
//!
//! ```text
//!  watch event JSON ─▶ serde_yaml::Value ─▶ gateway::objects (typed, unknown fields kept) ─▶ Object
//! ```

use super::objects::typed_gateway;

/// One Gateway API object as the API server sends it (JSON), through the same types as a file's
/// document, so both modes read and report a field alike. `None` for a kind that is not Gateway
/// API's; the error names the field (the CRD's schema normally catches it first).
pub fn from_api(
    kind: model::Kind,
    value: &serde_json::Value,
) -> Option<Result<crate::Object, String>> {
    use crate::objects::Object;
    let value = match serde_yaml::to_value(value) {
        Ok(value) => value,
        Err(error) => return Some(Err(error.to_string())),
    };
    let parsed = match kind {
        model::Kind::GatewayClass => {
            typed_gateway(value).map(|o| Object::GatewayClass(Box::new(o)))
        }
        model::Kind::Gateway => typed_gateway(value).map(|o| Object::Gateway(Box::new(o))),
        model::Kind::HTTPRoute => typed_gateway(value).map(|o| Object::HttpRoute(Box::new(o))),
        model::Kind::GRPCRoute => typed_gateway(value).map(|o| Object::GrpcRoute(Box::new(o))),
        model::Kind::TLSRoute => typed_gateway(value).map(|o| Object::TlsRoute(Box::new(o))),
        model::Kind::TCPRoute => typed_gateway(value).map(|o| Object::TcpRoute(Box::new(o))),
        model::Kind::UDPRoute => typed_gateway(value).map(|o| Object::UdpRoute(Box::new(o))),
        model::Kind::ListenerSet => typed_gateway(value).map(|o| Object::ListenerSet(Box::new(o))),
        model::Kind::ReferenceGrant => {
            typed_gateway(value).map(|o| Object::ReferenceGrant(Box::new(o)))
        }
        model::Kind::BackendTLSPolicy => {
            typed_gateway(value).map(|o| Object::BackendTlsPolicy(Box::new(o)))
        }
        _ => return None,
    };
    Some(parsed.map_err(|(field, message)| match field {
        Some(field) => format!("{field}: {message}"),
        None => message,
    }))
}
