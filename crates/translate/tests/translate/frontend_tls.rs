//! A Gateway's frontend validation (`spec.tls.frontend`) as `compile()` decides it: which port's
//! handshake requires or asks for a client certificate (`Certificates::port_tls`), the listener
//! conditions with the spec's reasons for bad CA references (the conformance suite's
//! GatewayFrontendInvalidClientCertificateValidation shape), and the Gateway's
//! InsecureFrontendValidationMode condition.

use model::frontend_tls::PortTls;
use model::gateway_status::GatewayStatuses;
use model::NamespacedName;

use crate::backend_tls::ca_pem;
use crate::gateway_listener_status::compiled;
use crate::gateway_status::find;

fn server_secret(namespace: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["example.org".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let indent = |pem: String| pem.replace('\n', "\n    ");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: server, namespace: {namespace}}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n    {}\n  tls.key: |\n    {}\n",
        indent(cert.pem()),
        indent(key.serialize_pem())
    )
}

/// A ConfigMap `namespace/name` with `ca.crt` (YAML, indented as a block scalar's lines).
fn config_map(namespace: &str, name: &str, ca_crt: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}}}\ndata:\n  ca.crt: |\n    {ca_crt}\n---\n")
}

pub(crate) fn objects(gateway: &str) -> String {
    let ca = ca_pem().replace('\n', "\n    ");
    [
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: sluice}\nspec: {controllerName: sluice.dev/gateway-controller}\n---\n".to_owned(),
        config_map("infra", "ca", &ca),
        config_map("web", "elsewhere", &ca),
        config_map("infra", "garbage", "not a certificate"),
        server_secret("infra"),
        format!("---\n{gateway}"),
    ]
    .concat()
}

const LISTENERS: &str = "  listeners:
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: server}]}}
  - {name: unresolved, port: 7443, protocol: HTTPS, hostname: first.example.org,
     tls: {certificateRefs: [{name: server}]}}
  - {name: kind, port: 8443, protocol: HTTPS, hostname: second.example.org,
     tls: {certificateRefs: [{name: server}]}}
  - {name: grant, port: 6443, protocol: HTTPS, hostname: third.example.org,
     tls: {certificateRefs: [{name: server}]}}
  - {name: garbage, port: 5443, protocol: HTTPS, hostname: fourth.example.org,
     tls: {certificateRefs: [{name: server}]}}
  - {name: half, port: 4443, protocol: HTTPS, hostname: fifth.example.org,
     tls: {certificateRefs: [{name: server}]}}
  - {name: http, port: 80, protocol: HTTP}
";

pub(crate) fn gateway(frontend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: infra, generation: 3}}\nspec:\n  gatewayClassName: sluice\n  tls:\n    frontend:\n{frontend}{LISTENERS}"
    )
}

const INVALID: &str = "      default:
        validation:
          caCertificateRefs: [{kind: ConfigMap, group: '', name: ca}]
      perPort:
      - port: 7443
        tls: {validation: {caCertificateRefs: [{kind: ConfigMap, group: '', name: nowhere}]}}
      - port: 8443
        tls: {validation: {caCertificateRefs: [{kind: Service, group: '', name: web}]}}
      - port: 6443
        tls: {validation: {caCertificateRefs: [{kind: ConfigMap, group: '', name: elsewhere, namespace: web}]}}
      - port: 5443
        tls: {validation: {caCertificateRefs: [{kind: ConfigMap, group: '', name: garbage}]}}
      - port: 4443
        tls: {validation: {caCertificateRefs: [{kind: ConfigMap, group: '', name: nowhere}, {kind: ConfigMap, group: '', name: ca}]}}
      - port: 80
        tls: {validation: {caCertificateRefs: [{kind: ConfigMap, group: '', name: ca}]}}
";

pub(crate) fn listener_state(status: &GatewayStatuses, name: &str) -> [(bool, &'static str); 3] {
    let gateway = &status.gateways[&NamespacedName::new("infra", "edge")];
    let listener = (gateway.listeners.iter()).find(|l| l.name == name);
    let listener = listener.unwrap_or_else(|| panic!("{name}: {:?}", gateway.listeners));
    ["ResolvedRefs", "Accepted", "Programmed"].map(|t| {
        let c = find(&listener.conditions, t);
        (c.status, c.reason)
    })
}

/// The message of listener `name`'s ResolvedRefs condition.
pub(crate) fn resolved_refs_message(status: &GatewayStatuses, name: &str) -> String {
    let gateway = &status.gateways[&NamespacedName::new("infra", "edge")];
    let listener = gateway.listeners.iter().find(|l| l.name == name).unwrap();
    find(&listener.conditions, "ResolvedRefs").message.clone()
}

#[test]
fn bad_ca_references_are_listener_conditions_with_the_spec_s_reasons() {
    let compiled = compiled(&objects(&gateway(INVALID)));
    let status = &compiled.gateway_status;
    let ok = (true, "ResolvedRefs");
    let accepted = (true, "Accepted");
    let programmed = (true, "Programmed");
    let refused = (false, "NoValidCACertificate");
    let off = (false, "Invalid");
    let cases = [
        ("https", [ok, accepted, programmed]),
        (
            "unresolved",
            [(false, "InvalidCACertificateRef"), refused, off],
        ),
        ("kind", [(false, "InvalidCACertificateKind"), refused, off]),
        ("grant", [(false, "RefNotPermitted"), refused, off]),
        (
            "garbage",
            [(false, "InvalidCACertificateRef"), refused, off],
        ),
        // One of two refs resolves: served with it, ResolvedRefs says what did not.
        (
            "half",
            [(false, "InvalidCACertificateRef"), accepted, programmed],
        ),
        // Frontend validation is for HTTPS listeners: the HTTP one is untouched.
        ("http", [ok, accepted, programmed]),
    ];
    for (name, expected) in cases {
        assert_eq!(listener_state(status, name), expected, "{name}");
    }
    let gateway = &status.gateways[&NamespacedName::new("infra", "edge")];
    let message = |name: &str| resolved_refs_message(status, name);
    assert_eq!(
        message("unresolved"),
        "spec.tls.frontend.perPort[0].tls.validation.caCertificateRefs[0]: ConfigMap infra/nowhere not found"
    );
    assert!(
        message("grant").contains("no ReferenceGrant"),
        "{}",
        message("grant")
    );
    assert!(!(gateway.conditions.iter()).any(|c| c.type_ == "InsecureFrontendValidationMode"));
    // A CA ConfigMap is read by name, missing or not: its creation or change recompiles.
    for name in ["ca", "nowhere", "garbage"] {
        let key = NamespacedName::new("infra", name);
        assert!(compiled.config_maps_read.contains(&key), "{name}");
    }
}

#[test]
fn each_https_port_gets_its_handshake_and_insecure_fallback_is_a_gateway_condition() {
    let frontend = "      default:
        validation:
          mode: AllowInsecureFallback
          caCertificateRefs: [{kind: ConfigMap, group: '', name: ca}]
      perPort:
      - port: 7443
        tls: {validation: {caCertificateRefs: [{kind: ConfigMap, group: '', name: ca}]}}
      - port: 6443
        tls: {validation: {caCertificateRefs: [{kind: ConfigMap, group: '', name: elsewhere, namespace: web}]}}
      - port: 8443
        tls: {}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: ca, namespace: web}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}]
  to: [{group: '', kind: ConfigMap}]
";
    // The ReferenceGrant goes after the Gateway's listeners: split the Gateway around it.
    let (head, grant) = frontend.split_once("---\n").unwrap();
    let text = objects(&format!("{}---\n{grant}", gateway(head)));
    let compiled = compiled(&text);
    let certificates = &compiled.certificates;
    let required = |port| match certificates.port_tls(port) {
        Some(PortTls::Handshake(tls)) => Some(tls.client_cert_required.is_some()),
        other => panic!("port {port}: {other:?}"),
    };
    // The default (fallback: asked, not required) on 443, 5443, 4443; perPort on 7443 and
    // 6443 (AllowValidOnly, across namespaces with the grant); 8443 exempt; never port 80.
    assert_eq!(required(443), Some(false));
    assert_eq!(required(5443), Some(false));
    assert_eq!(required(7443), Some(true));
    assert_eq!(required(6443), Some(true));
    assert!(certificates.port_tls(8443).is_none());
    assert!(certificates.port_tls(80).is_none());
    let Some(PortTls::Handshake(tls)) = certificates.port_tls(443) else {
        unreachable!()
    };
    assert_eq!(tls.client_cert_request.as_ref().map(Vec::len), Some(1));

    let gateway = &compiled.gateway_status.gateways[&NamespacedName::new("infra", "edge")];
    let insecure = find(&gateway.conditions, "InsecureFrontendValidationMode");
    assert_eq!(
        (
            insecure.status,
            insecure.reason,
            insecure.observed_generation
        ),
        (true, "ConfigurationChanged", 3)
    );
    for listener in &gateway.listeners {
        assert!(
            find(&listener.conditions, "Accepted").status,
            "{}",
            listener.name
        );
        assert!(
            find(&listener.conditions, "ResolvedRefs").status,
            "{}",
            listener.name
        );
    }
    assert!(
        !compiled
            .diagnostics
            .iter()
            .any(|d| d.reason.contains("spec.tls")),
        "{:?}",
        compiled.diagnostics
    );
}
