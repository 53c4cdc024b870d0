//! BackendTLSPolicy as `compile()` decides it: the `UpstreamTls` a Gateway route's share gets,
//! which policy wins a target, and the `status.ancestors` conditions with the spec's reasons.

use model::gateway_status::{Condition, GatewayStatuses};
use model::upstream_tls::SubjectAltName;
use model::{Compiled, NamespacedName};

use crate::gateway_listener_status::compiled;

pub(crate) fn ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}

/// A Gateway, a route with one rule per Service, and `policies`.
pub(crate) fn objects(policies: &str) -> String {
    let ca = ca_pem().replace('\n', "\n    ");
    let services = [
        "web", "other", "kinds", "missing", "broken", "plain", "sans",
    ];
    let mut text = format!(
        "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: sluice}}
spec: {{controllerName: sluice.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: app}}
spec:
  gatewayClassName: sluice
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: ca, namespace: app}}
data:
  ca.crt: |
    {ca}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: garbage, namespace: app}}
data: {{ca.crt: not a certificate}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: route, namespace: app}}
spec:
  parentRefs: [{{name: edge}}]
  rules:
"
    );
    for name in services {
        text.push_str(&format!(
            "  - matches: [{{path: {{type: PathPrefix, value: /{name}}}}}]\n    backendRefs: [{{name: {name}, port: 443}}]\n"
        ));
    }
    for name in services {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: app}}\nspec: {{ports: [{{name: https, port: 443, appProtocol: https}}, {{name: admin, port: 9443}}]}}\n"
        ));
    }
    text + policies
}

pub(crate) fn policy(name: &str, created: &str, target: &str, validation: &str) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: {name}, namespace: app, generation: 4, creationTimestamp: '{created}'}}\nspec:\n  targetRefs: [{target}]\n  validation: {validation}\n"
    )
}

pub(crate) const CA: &str =
    "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: web.example.com}";

pub(crate) fn conditions<'a>(statuses: &'a GatewayStatuses, name: &str) -> &'a [Condition] {
    let status = &statuses.backend_tls_policies[&NamespacedName::new("app", name)];
    assert_eq!(status.ancestors.len(), 1, "{status:?}");
    let ancestor = &status.ancestors[0];
    assert_eq!(ancestor.ancestor_ref.name, "edge");
    assert_eq!(ancestor.ancestor_ref.kind.as_deref(), Some("Gateway"));
    assert_eq!(ancestor.controller_name, "sluice.dev/gateway-controller");
    &ancestor.conditions
}

pub(crate) fn said(conditions: &[Condition], type_: &str) -> (bool, &'static str, i64) {
    let c = (conditions.iter()).find(|c| c.type_ == type_).unwrap();
    (c.status, c.reason, c.observed_generation)
}

pub(crate) fn route_tls(
    c: &Compiled,
    path: &str,
) -> (bool, Option<std::sync::Arc<model::UpstreamTls>>) {
    let head = http::Request::new(()).into_parts().0;
    let found = c.routes.route("x.example.com", path, &head).unwrap();
    (
        found.route.policy.invalid_backend,
        found.route.policy.upstream_tls.clone(),
    )
}

#[test]
fn a_policy_makes_its_port_s_shares_tls_verified_against_its_ca_and_hostname() {
    let text = objects(&policy(
        "web",
        "2026-01-01T00:00:00Z",
        "{group: '', kind: Service, name: web, sectionName: https}",
        CA,
    ));
    let c = compiled(&text);
    let (invalid, tls) = route_tls(&c, "/web");
    assert!(!invalid);
    let tls = tls.expect("TLS to the backend");
    assert!(tls.verify && tls.server_name);
    assert_eq!(tls.name, "web.example.com");
    assert_eq!(tls.trusted.len(), 1);
    assert!(tls.subject_alt_names.is_empty() && !tls.system_roots);
    let conditions = conditions(&c.gateway_status, "web");
    assert_eq!(said(conditions, "Accepted"), (true, "Accepted", 4));
    assert_eq!(said(conditions, "ResolvedRefs"), (true, "ResolvedRefs", 4));
    // Another Service's https port without a policy: cleartext, said in a diagnostic.
    assert_eq!(route_tls(&c, "/plain"), (false, None));
    assert!(c.diagnostics.iter().any(|d| d.object.name == "route"
        && d.reason.contains("appProtocol https")
        && d.reason.contains("there is none")));
    // A policy for another port of the Service leaves this one alone.
    let text = objects(&policy(
        "admin",
        "2026-01-01T00:00:00Z",
        "{group: '', kind: Service, name: web, sectionName: admin}",
        CA,
    ));
    let c = compiled(&text);
    assert_eq!(route_tls(&c, "/web"), (false, None));
    assert!(!c
        .gateway_status
        .backend_tls_policies
        .contains_key(&NamespacedName::new("app", "admin")));
}

#[test]
fn the_older_policy_wins_a_target_and_the_other_is_conflicted() {
    let text = objects(&format!(
        "{}{}{}",
        policy("newer", "2026-02-01T00:00:00Z", "{group: '', kind: Service, name: web}", CA),
        policy("older", "2026-01-01T00:00:00Z", "{group: '', kind: Service, name: web}", "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: older.example.com}"),
        // A section name is a target of its own: no conflict with the two above.
        policy("section", "2026-03-01T00:00:00Z", "{group: '', kind: Service, name: web, sectionName: https}", "{caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: section.example.com}"),
    ));
    let c = compiled(&text);
    assert_eq!(
        said(conditions(&c.gateway_status, "older"), "Accepted"),
        (true, "Accepted", 4)
    );
    assert_eq!(
        said(conditions(&c.gateway_status, "newer"), "Accepted"),
        (false, "Conflicted", 4)
    );
    assert_eq!(
        said(conditions(&c.gateway_status, "section"), "Accepted"),
        (true, "Accepted", 4)
    );
    // The port's own policy is the more specific one.
    assert_eq!(route_tls(&c, "/web").1.unwrap().name, "section.example.com");
}

#[test]
fn unusable_ca_references_refuse_the_policy_with_the_spec_s_reasons_and_its_shares_answer_500() {
    let text = objects(&format!(
        "{}{}{}",
        policy("kinds", "2026-01-01T00:00:00Z", "{group: '', kind: Service, name: kinds}", "{caCertificateRefs: [{group: invalid.io, kind: InvalidKind, name: x}], hostname: a.example.com}"),
        policy("missing", "2026-01-01T00:00:00Z", "{group: '', kind: Service, name: missing}", "{caCertificateRefs: [{group: '', kind: ConfigMap, name: nowhere}], hostname: a.example.com}"),
        policy("broken", "2026-01-01T00:00:00Z", "{group: '', kind: Service, name: broken}", "{caCertificateRefs: [{group: '', kind: ConfigMap, name: garbage}], hostname: a.example.com}"),
    ));
    let c = compiled(&text);
    let kinds = conditions(&c.gateway_status, "kinds");
    assert_eq!(said(kinds, "Accepted"), (false, "NoValidCACertificate", 4));
    assert_eq!(said(kinds, "ResolvedRefs"), (false, "InvalidKind", 4));
    for name in ["missing", "broken"] {
        let found = conditions(&c.gateway_status, name);
        assert_eq!(said(found, "Accepted"), (false, "NoValidCACertificate", 4));
        assert_eq!(
            said(found, "ResolvedRefs"),
            (false, "InvalidCACertificateRef", 4)
        );
        assert_eq!(route_tls(&c, &format!("/{name}")), (true, None), "{name}");
    }
    assert_eq!(route_tls(&c, "/kinds"), (true, None));
    // A ConfigMap it names is one whose change compiles again.
    assert!(c
        .config_maps_read
        .contains(&NamespacedName::new("app", "nowhere")));
}

#[test]
fn subject_alt_names_and_system_roots_are_carried_to_the_proxy() {
    let text = objects(&policy(
        "sans",
        "2026-01-01T00:00:00Z",
        "{group: '', kind: Service, name: sans}",
        "{wellKnownCACertificates: System, hostname: sni.example.com, subjectAltNames: [{type: Hostname, hostname: Web.Example.com}, {type: URI, uri: 'spiffe://cluster/ns/app/sa/web'}]}",
    ));
    let c = compiled(&text);
    let tls = route_tls(&c, "/sans").1.unwrap_or_else(|| {
        panic!(
            "{:?} {:?}",
            c.diagnostics, c.gateway_status.backend_tls_policies
        )
    });
    assert!(tls.system_roots && tls.trusted.is_empty());
    assert_eq!(tls.name, "sni.example.com");
    assert_eq!(
        tls.subject_alt_names,
        [
            SubjectAltName::Hostname("web.example.com".into()),
            SubjectAltName::Uri("spiffe://cluster/ns/app/sa/web".into())
        ]
    );
    let text = objects(&policy(
        "sans",
        "2026-01-01T00:00:00Z",
        "{group: '', kind: Service, name: sans}",
        "{wellKnownCACertificates: Corporate, hostname: a.example.com}",
    ));
    let c = compiled(&text);
    assert_eq!(
        said(conditions(&c.gateway_status, "sans"), "Accepted"),
        (false, "Invalid", 4)
    );
    assert_eq!(route_tls(&c, "/sans"), (true, None));
}

#[test]
fn a_gateway_s_backend_client_certificate_goes_on_its_routes_policy_tls_and_its_resolved_refs() {
    let leaf = testkit_leaf();
    let with_ref = |reference: &str| {
        objects(&policy("web", "2026-01-01T00:00:00Z", "{group: '', kind: Service, name: web}", CA))
            .replace(
                "  listeners: [{name: http, port: 80, protocol: HTTP}]\n",
                &format!("  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n  tls: {{backend: {{clientCertificateRef: {reference}}}}}\n"),
            )
            + &leaf
    };
    let c = compiled(&with_ref("{name: client}"));
    let tls = route_tls(&c, "/web").1.unwrap();
    assert!(tls.client_cert.is_some());
    let gateway = &c.gateway_status.gateways[&NamespacedName::new("app", "edge")];
    let resolved = (gateway.conditions.iter())
        .find(|c| c.type_ == "ResolvedRefs")
        .unwrap();
    assert_eq!((resolved.status, resolved.reason), (true, "ResolvedRefs"));
    for (reference, reason) in [
        ("{name: nowhere}", "InvalidClientCertificateRef"),
        (
            "{group: example.com, kind: Secret, name: client}",
            "InvalidClientCertificateRef",
        ),
        ("{kind: ConfigMap, name: ca}", "InvalidClientCertificateRef"),
        ("{name: client, namespace: elsewhere}", "RefNotPermitted"),
    ] {
        let c = compiled(&with_ref(reference));
        let gateway = &c.gateway_status.gateways[&NamespacedName::new("app", "edge")];
        let resolved = (gateway.conditions.iter())
            .find(|c| c.type_ == "ResolvedRefs")
            .unwrap();
        assert_eq!(
            (resolved.status, resolved.reason),
            (false, reason),
            "{reference}"
        );
        let accepted = (gateway.conditions.iter())
            .find(|c| c.type_ == "Accepted")
            .unwrap();
        assert!(accepted.status, "{reference}");
        assert!(route_tls(&c, "/web").1.unwrap().client_cert.is_none());
    }
}

/// Secret `client` (kubernetes.io/tls) in `app`.
fn testkit_leaf() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["client.example.com".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let indent = |pem: String| pem.trim_end().replace('\n', "\n    ");
    format!(
        "---\napiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata: {{name: client, namespace: app}}\nstringData:\n  tls.crt: |\n    {}\n  tls.key: |\n    {}\n",
        indent(cert.pem()),
        indent(key.serialize_pem())
    )
}

/// A RequestMirror to a Service port a policy covers: the copy goes with the policy's TLS.
#[test]
fn a_mirror_to_a_policy_s_port_is_sent_with_its_tls() {
    let mirrored = "\
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mirrored, namespace: app}
spec:
  parentRefs: [{name: edge}]
  hostnames: [m.example.com]
  rules:
  - filters: [{type: RequestMirror, requestMirror: {backendRef: {name: web, port: 443}}}]
    backendRefs: [{name: plain, port: 443}]
";
    let target = "{group: '', kind: Service, name: web, sectionName: https}";
    let c = compiled(&(objects(&policy("web", "2026-01-01T00:00:00Z", target, CA)) + mirrored));
    let head = http::Request::new(()).into_parts().0;
    let found = c.routes.route("m.example.com", "/", &head).unwrap();
    let mirror = found.route.policy.mirror.as_ref().expect("a mirror");
    let tls = mirror.tls.as_ref().expect("the policy's TLS");
    assert!(tls.verify && tls.server_name);
    assert_eq!(tls.name, "web.example.com");
    assert!(said(conditions(&c.gateway_status, "web"), "Accepted").0);
}
