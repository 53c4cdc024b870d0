//! ingress-nginx's flags that decide which Ingresses a controller serves, in `compile()`:
//! `--watch-namespace-selector` (by the labels of the Ingress's Namespace, followed as they
//! change) and `--disable-catch-all` (an Ingress with a `spec.defaultBackend` is refused).

use crate::store_of;
use model::{NamespacedName, Severity};
use translate::gateway::NamespaceSelector;
use translate::{compile, CompileOptions};

/// Namespaces shop and lab with these labels, an Ingress in each, and a catch-all in shop.
fn objects(shop_labels: &str, lab_labels: &str) -> String {
    let ingress = |namespace: &str, host: &str| {
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\n\
             metadata: {{name: web, namespace: {namespace}}}\n\
             spec:\n  ingressClassName: sluice\n  rules: [{{host: {host}, http: {{paths: \
             [{{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}]}}}}]\n"
        )
    };
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop, labels: {shop_labels}}}\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: lab, labels: {lab_labels}}}\n\
         {}{}---\napiVersion: networking.k8s.io/v1\nkind: Ingress\n\
         metadata: {{name: catch-all, namespace: shop}}\n\
         spec:\n  ingressClassName: sluice\n  defaultBackend: {{service: {{name: web, port: {{number: 80}}}}}}\n",
        ingress("shop", "shop.test"),
        ingress("lab", "lab.test"),
    )
}

fn served(compiled: &model::Compiled) -> std::collections::BTreeSet<String> {
    compiled.ingresses.iter().map(ToString::to_string).collect()
}

#[test]
fn a_namespace_selector_serves_the_ingresses_of_the_namespaces_it_selects() {
    let selector = NamespaceSelector::parse_text("team=shop,env in (prod)").unwrap();
    let options = CompileOptions {
        watch_namespace_selector: Some(selector),
        ..CompileOptions::default()
    };
    let store = store_of(&objects("{team: shop, env: prod}", "{team: lab}"));
    let compiled = compile(&store, &options);
    assert_eq!(
        served(&compiled),
        ["shop/catch-all".into(), "shop/web".into()].into()
    );
    // Namespaces' labels are read: a relabel compiles again.
    assert!(compiled.namespace_selectors);

    // Relabelled: lab is selected now, shop no longer.
    let relabelled = store_of(&objects("{team: other}", "{team: shop, env: prod}"));
    assert_eq!(
        served(&compile(&relabelled, &options)),
        ["lab/web".into()].into()
    );
    // Without the selector, all of them.
    assert_eq!(
        served(&compile(&store, &CompileOptions::default())).len(),
        3
    );
}

#[test]
fn disable_catch_all_refuses_an_ingress_with_a_default_backend() {
    let store = store_of(&objects("{team: shop}", "{team: lab}"));
    let options = CompileOptions {
        disable_catch_all: true,
        ..CompileOptions::default()
    };
    let compiled = compile(&store, &options);
    let catch_all = NamespacedName::new("shop", "catch-all");
    // Still ours (the webhook denies it on this error), but nothing of it is served.
    assert!(compiled.ingresses.contains(&catch_all));
    assert!(compiled.routes.default_backend().is_none());
    let refused: Vec<_> = compiled
        .diagnostics
        .iter()
        .filter(|d| d.object.name == "catch-all")
        .collect();
    assert!(
        refused.iter().any(|d| d.severity == Severity::Error
            && d.reason.contains("--disable-catch-all is set: not served")),
        "{refused:?}"
    );
    // Without the flag it is the catch-all.
    let compiled = compile(&store, &CompileOptions::default());
    assert!(compiled.routes.default_backend().is_some());
}
