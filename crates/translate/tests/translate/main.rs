//! translate's integration tests, one binary: golden files (`compile()` as data), the README's
//! annotation table and ConfigMap keys, the endpoint fast path, the memory measurement (`#[ignore]`), and `migrate --to gateway-api`
//! replayed on the golden cases.

mod catalogue;
mod configmap;
mod endpoints;
mod gateway_listener_status;
mod gateway_sites;
mod gateway_status;
mod golden;
mod grpc_route_status;
mod listener_sets;
mod memory;
mod to_gateway;
