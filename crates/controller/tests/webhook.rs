//! The admission webhook's decision (`controller::webhook::review`): the Store Sluice serves,
//! plus the candidate Ingress, compiled; the candidate's errors refuse it, the rest are warnings.

use controller::webhook::{respond, review, Verdict};
use model::{parse_documents, CompileOptions, Store};
use serde_json::{json, Value};

const EXISTING: &str = "
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: first, namespace: shop, creationTimestamp: '2024-01-01T00:00:00Z'}
spec:
  ingressClassName: sluice
  rules: [{host: shop.test, http: {paths: [{path: /cart, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
";

fn store() -> Store {
    let documents = parse_documents("existing.yaml", EXISTING).unwrap();
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    let mut store = Store::default();
    store.replace_all(documents.objects);
    store
}

/// An Ingress `name` in `shop` routing `path` on shop.test to `service`, with `annotations`.
fn ingress(name: &str, path: &str, service: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {
            "ingressClassName": "sluice",
            "rules": [{"host": "shop.test", "http": {"paths": [{
                "path": path, "pathType": "Prefix",
                "backend": {"service": {"name": service, "port": {"number": 80}}},
            }]}}],
        },
    })
}

fn request(operation: &str, object: Value) -> Value {
    json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
        "operation": operation,
        "namespace": "shop",
        "object": object,
    })
}

fn decide(operation: &str, object: Value) -> Verdict {
    review(
        &store(),
        &CompileOptions::default(),
        &request(operation, object),
    )
}

#[test]
fn a_good_ingress_is_allowed_without_warnings() {
    let verdict = decide("CREATE", ingress("second", "/account", "web", json!({})));
    assert_eq!(
        verdict,
        Verdict {
            allowed: true,
            ..Verdict::default()
        }
    );
}

#[test]
fn a_path_an_older_ingress_routes_is_refused_on_the_new_one() {
    // On CREATE the object has no creationTimestamp yet: it is the newest.
    let verdict = decide("CREATE", ingress("second", "/cart", "web", json!({})));
    assert!(!verdict.allowed);
    assert!(
        verdict
            .message
            .starts_with("Sluice refuses Ingress shop/second: ")
            && verdict
                .message
                .contains("already routed by Ingress shop/first"),
        "{}",
        verdict.message
    );
    // The older Ingress itself may still be updated.
    let mut first = ingress("first", "/cart", "web", json!({}));
    first["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
    assert!(decide("UPDATE", first).allowed);
}

#[test]
fn an_invalid_annotation_is_refused_and_an_unsupported_one_is_a_warning() {
    let verdict = decide(
        "CREATE",
        ingress(
            "second",
            "/account",
            "web",
            json!({"nginx.ingress.kubernetes.io/whitelist-source-range": "10.0.0.0/33"}),
        ),
    );
    assert!(!verdict.allowed, "{verdict:?}");
    assert!(
        verdict.message.contains("whitelist-source-range"),
        "{}",
        verdict.message
    );

    let verdict = decide(
        "CREATE",
        ingress(
            "second",
            "/account",
            "web",
            json!({"nginx.ingress.kubernetes.io/affinity": "cookie"}),
        ),
    );
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(verdict.warnings.len(), 1, "{verdict:?}");
    assert!(
        verdict.warnings[0].contains("affinity") && verdict.warnings[0].contains("unsupported"),
        "{:?}",
        verdict.warnings
    );
}

/// A new Ingress with these annotations, as the API server would send it for review.
fn create_annotated(annotations: Value) -> Verdict {
    decide("CREATE", ingress("second", "/account", "web", annotations))
}

#[test]
fn authentication_sluice_does_not_implement_yet_is_refused() {
    for annotations in [
        json!({"nginx.ingress.kubernetes.io/auth-type": "basic",
               "nginx.ingress.kubernetes.io/auth-secret": "basic-auth"}),
        json!({"nginx.ingress.kubernetes.io/auth-url": "http://auth.example.com/check",
               "nginx.ingress.kubernetes.io/auth-signin": "https://auth.example.com/start"}),
        json!({"nginx.ingress.kubernetes.io/auth-tls-secret": "default/client-ca",
               "nginx.ingress.kubernetes.io/auth-tls-verify-client": "on"}),
    ] {
        let verdict = create_annotated(annotations);
        assert!(!verdict.allowed, "{verdict:?}");
        assert!(
            verdict
                .message
                .contains("restricts access and is not implemented"),
            "{}",
            verdict.message
        );
    }
    // A companion alone does nothing in ingress-nginx either: a warning.
    let verdict =
        create_annotated(json!({"nginx.ingress.kubernetes.io/auth-secret": "basic-auth"}));
    assert!(verdict.allowed, "{verdict:?}");
    assert_eq!(verdict.warnings.len(), 1, "{verdict:?}");
}

#[test]
fn a_service_that_does_not_exist_yet_is_a_warning_not_a_refusal() {
    let verdict = decide("CREATE", ingress("second", "/account", "later", json!({})));
    assert!(verdict.allowed, "{verdict:?}");
    assert!(
        verdict.warnings[0].contains("Service shop/later not found"),
        "{:?}",
        verdict.warnings
    );
}

#[test]
fn deletes_and_other_classes_are_allowed_unchecked() {
    assert!(decide("DELETE", Value::Null).allowed);
    let mut other = ingress("second", "/cart", "web", json!({}));
    other["spec"]["ingressClassName"] = json!("nginx-other");
    assert!(decide("CREATE", other).allowed);
}

#[test]
fn the_answer_is_an_admission_review_for_the_same_uid() {
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": request("CREATE", ingress("second", "/cart", "web", json!({}))),
    }))
    .unwrap();
    let answer: Value = serde_json::from_slice(&respond(&body, |request| {
        review(&store(), &CompileOptions::default(), request)
    }))
    .unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    let response = &answer["response"];
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    assert!(response["status"]["message"]
        .as_str()
        .unwrap()
        .contains("already routed"));
    // Not a review at all.
    let answer: Value = serde_json::from_slice(&respond(b"{}", |_| unreachable!())).unwrap();
    assert_eq!(answer["response"]["allowed"], false);
}
