//! ClusterTrustBundle references (Gateway API v1.7, Extended `ClusterTrustBundle`) as
//! `compile()` decides them: a BackendTLSPolicy's and a Gateway frontend validation's
//! `caCertificateRefs` naming `certificates.k8s.io/ClusterTrustBundle` trust the bundle's
//! `spec.trustBundle` exactly as a ConfigMap's `ca.crt` (same checks, same reasons when it is
//! missing or unusable); a cluster that does not serve the API says so; a changed bundle
//! compiles again (also through the route fragments) only when a compile read it.

use crate::store_of;
use model::frontend_tls::PortTls;
use model::{Kind, ObjectRef};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use translate::{compile, compile_reusing, parse_documents, CompileOptions, Fragments, Store};

use crate::backend_tls::{ca_pem, conditions, objects, policy, route_tls, said};
use crate::frontend_tls::{gateway, listener_state, resolved_refs_message};

/// A ClusterTrustBundle document (with its leading separator) holding `pem`.
fn bundle(name: &str, pem: &str) -> String {
    let pem = pem.trim_end().replace('\n', "\n    ");
    format!(
        "---\napiVersion: certificates.k8s.io/v1beta1\nkind: ClusterTrustBundle\nmetadata: {{name: {name}}}\nspec:\n  trustBundle: |\n    {pem}\n"
    )
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

const CREATED: &str = "2026-01-01T00:00:00Z";

/// A policy for Service `service` trusting ClusterTrustBundle `bundle`.
fn bundle_policy(service: &str, bundle: &str) -> String {
    policy(
        service,
        CREATED,
        &format!("{{group: '', kind: Service, name: {service}}}"),
        &format!("{{caCertificateRefs: [{{group: certificates.k8s.io, kind: ClusterTrustBundle, name: {bundle}}}], hostname: web.example.com}}"),
    )
}

/// Policies for `web` (bundle `good`), `missing` (none such), `broken` (`garbage`: no PEM)
/// and `kinds` (`empty`: an empty bundle), and the bundles.
fn backend_objects(good_pem: &str) -> String {
    objects(&format!(
        "{}{}{}{}{}{}{}",
        bundle_policy("web", "good"),
        bundle_policy("missing", "nowhere"),
        bundle_policy("broken", "garbage"),
        bundle_policy("kinds", "empty"),
        bundle("good", good_pem),
        bundle("garbage", "not a certificate"),
        "---\napiVersion: certificates.k8s.io/v1beta1\nkind: ClusterTrustBundle\nmetadata: {name: empty}\nspec: {trustBundle: ''}\n",
    ))
}

fn policy_refs_message(c: &model::Compiled, policy: &str) -> String {
    let found = conditions(&c.gateway_status, policy);
    (found
        .iter()
        .find(|c| c.type_ == "ResolvedRefs")
        .unwrap()
        .message)
        .clone()
}

#[test]
fn a_backend_tls_policy_trusts_a_cluster_trust_bundle_as_it_does_a_config_map() {
    let ca = ca_pem();
    let c = compile(&store_of(&backend_objects(&ca)), &CompileOptions::default());
    let (invalid, tls) = route_tls(&c, "/web");
    assert!(!invalid);
    let tls = tls.expect("TLS to the backend");
    assert_eq!(tls.trusted, [der(&ca)]);
    assert_eq!(tls.name, "web.example.com");
    let web = conditions(&c.gateway_status, "web");
    assert_eq!(said(web, "Accepted"), (true, "Accepted", 4));
    assert_eq!(said(web, "ResolvedRefs"), (true, "ResolvedRefs", 4));

    // Missing, no certificate in it, empty: the ConfigMap's reasons, its shares answer 500.
    for name in ["missing", "broken", "kinds"] {
        let found = conditions(&c.gateway_status, name);
        assert_eq!(said(found, "Accepted"), (false, "NoValidCACertificate", 4));
        assert_eq!(
            said(found, "ResolvedRefs"),
            (false, "InvalidCACertificateRef", 4),
            "{name}"
        );
        assert_eq!(route_tls(&c, &format!("/{name}")), (true, None), "{name}");
    }
    let at = "spec.validation.caCertificateRefs[0]";
    assert_eq!(
        policy_refs_message(&c, "missing"),
        format!("{at}: ClusterTrustBundle nowhere not found")
    );
    assert_eq!(
        policy_refs_message(&c, "broken"),
        format!("{at}: ClusterTrustBundle garbage: spec.trustBundle: no CERTIFICATE block found")
    );
    assert_eq!(
        policy_refs_message(&c, "kinds"),
        format!("{at}: ClusterTrustBundle empty: spec.trustBundle: no CERTIFICATE block found")
    );
    // Every bundle named is one whose change compiles again, found or not.
    let read: Vec<&str> = c
        .cluster_trust_bundles_read
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(read, ["empty", "garbage", "good", "nowhere"]);
}

#[test]
fn in_a_cluster_that_does_not_serve_the_api_a_reference_says_so() {
    let mut store = store_of(&backend_objects(&ca_pem()));
    let changes = store.set_served(Kind::ClusterTrustBundle, false);
    assert!(
        changes.config,
        "a change of what the cluster serves compiles"
    );
    assert!(!store.serves(Kind::ClusterTrustBundle));
    assert!(store.set_served(Kind::ClusterTrustBundle, false).is_empty());
    let c = compile(&store, &CompileOptions::default());
    let message = policy_refs_message(&c, "missing");
    assert!(
        message
            .contains("ClusterTrustBundle nowhere: the cluster does not serve ClusterTrustBundle")
            && message.contains("--feature-gates=ClusterTrustBundle=true")
            && message
                .contains("--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true"),
        "{message}"
    );
    assert!(store.set_served(Kind::ClusterTrustBundle, true).config);
    let c = compile(&store, &CompileOptions::default());
    assert!(policy_refs_message(&c, "missing").ends_with("ClusterTrustBundle nowhere not found"));
}

#[test]
fn a_file_s_bundle_may_be_v1alpha1_and_is_kept_as_its_pem_only() {
    let ca = ca_pem();
    let text = bundle("old", &ca)
        .replace("v1beta1", "v1alpha1")
        .replace("spec:\n", "spec:\n  signerName: example.com/signer\n");
    let store = store_of(&text);
    let kept = store.cluster_trust_bundle("old").expect("kept");
    assert_eq!(kept.trust_bundle.trim_end(), ca.trim_end());
    assert_eq!(kept.metadata.namespace, None, "cluster-scoped");
    // A namespace written on it means nothing (kubectl ignores it too).
    let text = bundle("placed", &ca).replace("{name: placed}", "{name: placed, namespace: x}");
    let store = store_of(&text);
    assert!(store.cluster_trust_bundle("placed").is_some());
}

/// The frontend validation of `frontend_tls`'s Gateway: the default names bundle `good`;
/// port 7443 one that does not exist, 8443 one without certificates, 6443 names a namespace
/// (cluster-scoped: must be unset), 4443 a missing bundle and `good` together.
const FRONTEND: &str = "      default:
        validation:
          caCertificateRefs: [{kind: ClusterTrustBundle, group: certificates.k8s.io, name: good}]
      perPort:
      - port: 7443
        tls: {validation: {caCertificateRefs: [{kind: ClusterTrustBundle, group: certificates.k8s.io, name: nowhere}]}}
      - port: 8443
        tls: {validation: {caCertificateRefs: [{kind: ClusterTrustBundle, group: certificates.k8s.io, name: garbage}]}}
      - port: 6443
        tls: {validation: {caCertificateRefs: [{kind: ClusterTrustBundle, group: certificates.k8s.io, name: good, namespace: infra}]}}
      - port: 4443
        tls: {validation: {caCertificateRefs: [{kind: ClusterTrustBundle, group: certificates.k8s.io, name: nowhere}, {kind: ClusterTrustBundle, group: certificates.k8s.io, name: good}]}}
";

#[test]
fn a_gateway_s_frontend_validation_trusts_a_cluster_trust_bundle_with_the_spec_s_reasons() {
    let ca = ca_pem();
    let text = format!(
        "{}{}{}",
        crate::frontend_tls::objects(&gateway(FRONTEND)),
        bundle("good", &ca),
        bundle("garbage", "not a certificate"),
    );
    let c = compile(&store_of(&text), &CompileOptions::default());
    let status = &c.gateway_status;
    let ok = (true, "ResolvedRefs");
    let accepted = (true, "Accepted");
    let programmed = (true, "Programmed");
    let unresolved = (false, "InvalidCACertificateRef");
    let refused = [
        unresolved,
        (false, "NoValidCACertificate"),
        (false, "Invalid"),
    ];
    let cases = [
        ("https", [ok, accepted, programmed]),
        ("unresolved", refused),
        ("kind", refused),
        ("grant", refused),
        ("garbage", [ok, accepted, programmed]),
        ("half", [unresolved, accepted, programmed]),
    ];
    for (name, expected) in cases {
        assert_eq!(listener_state(status, name), expected, "{name}");
    }
    let message = |name: &str| resolved_refs_message(status, name);
    let at =
        |p: usize| format!("spec.tls.frontend.perPort[{p}].tls.validation.caCertificateRefs[0]");
    assert_eq!(
        message("unresolved"),
        format!("{}: ClusterTrustBundle nowhere not found", at(0))
    );
    assert_eq!(
        message("kind"),
        format!(
            "{}: ClusterTrustBundle garbage: spec.trustBundle: no CERTIFICATE block found",
            at(1)
        )
    );
    assert_eq!(
        message("grant"),
        format!(
            "{}: ClusterTrustBundle good is cluster-scoped: namespace (infra) must be unset",
            at(2)
        )
    );
    // The default's port (443) and the half-resolved one require a certificate of the bundle's
    // CA: its subject is the one hint sent.
    for port in [443, 4443] {
        let Some(PortTls::Handshake(tls)) = c.certificates.port_tls(port) else {
            panic!("port {port}: {:?}", c.certificates.port_tls(port))
        };
        assert!(tls.client_cert_required.is_some(), "{port}");
        assert_eq!(tls.client_cert_request.as_ref().map(Vec::len), Some(1));
    }
    let read: Vec<&str> = c
        .cluster_trust_bundles_read
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(read, ["garbage", "good", "nowhere"]);
}

#[test]
fn a_changed_bundle_compiles_again_only_when_read_and_reused_routes_take_it() {
    let (first, second) = (ca_pem(), ca_pem());
    let options = CompileOptions::default();
    let mut store = store_of(&format!(
        "{}{}",
        backend_objects(&first),
        bundle("unrelated", &first)
    ));
    let mut fragments = Fragments::default();
    let last = compile_reusing(&store, &options, &mut fragments);
    assert_eq!(route_tls(&last, "/web").1.unwrap().trusted, [der(&first)]);

    // A bundle no compile read: kept in the Store, nothing compiled.
    let apply = |store: &mut Store, text: &str| {
        let mut objects = parse_documents("t.yaml", text).unwrap().objects;
        store.apply(objects.remove(0))
    };
    let changes = apply(&mut store, &bundle("unrelated", &second));
    assert_eq!(changes.cluster_trust_bundles.len(), 1);
    assert!(!changes.config && !changes.needs_compile(Some(&last)));
    assert!(changes.needs_compile(None), "nothing compiled yet");
    // Unchanged: no change at all.
    assert!(apply(&mut store, &bundle("good", &first)).is_empty());

    // The bundle the policy names, replaced: a compile, whose reused routes trust the new CA.
    let changes = apply(&mut store, &bundle("good", &second));
    assert!(changes.needs_compile(Some(&last)));
    let next = compile_reusing(&store, &options, &mut fragments);
    assert_eq!(route_tls(&next, "/web").1.unwrap().trusted, [der(&second)]);
    assert_eq!(
        serde_yaml::to_string(&next.view()).unwrap(),
        serde_yaml::to_string(&compile(&store, &options).view()).unwrap()
    );

    // Deleted, and one that was missing created: each read, each a compile.
    let gone = store.remove(&ObjectRef::new(Kind::ClusterTrustBundle, "", "good"));
    assert!(gone.needs_compile(Some(&next)));
    let next = compile_reusing(&store, &options, &mut fragments);
    assert_eq!(route_tls(&next, "/web"), (true, None));
    let created = apply(&mut store, &bundle("nowhere", &first));
    assert!(created.needs_compile(Some(&next)));
    let next = compile_reusing(&store, &options, &mut fragments);
    assert_eq!(
        route_tls(&next, "/missing").1.unwrap().trusted,
        [der(&first)]
    );
}
