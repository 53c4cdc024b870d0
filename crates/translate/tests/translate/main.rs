//! translate's integration tests, one binary: golden files (`compile()` as data), the README's
//! annotation table and ConfigMap keys, the endpoint fast path, the memory and compile-time
//! measurements (`#[ignore]`), and `migrate --to gateway-api`
//! replayed on the golden cases.

mod backend_tls;
mod catalogue;
mod compile_time;
mod configmap;
mod controller_flags;
mod endpoints;
mod fragments;
mod frontend_tls;
mod gateway_infrastructure;
mod gateway_listener_status;
mod gateway_sites;
mod gateway_status;
mod golden;
mod grpc_route_status;
mod listener_filters;
mod listener_sets;
mod memory;
mod stream_route_status;
mod tls_route_status;
mod to_gateway;
mod trust_bundles;

/// The Store of the YAML `text`, which must parse without errors.
pub(crate) fn store_of(text: &str) -> translate::Store {
    let documents = translate::parse_documents("t.yaml", text).unwrap();
    assert!(documents.errors.is_empty(), "{:?}", documents.errors);
    let mut store = translate::Store::default();
    store.replace_all(documents.objects);
    store
}
