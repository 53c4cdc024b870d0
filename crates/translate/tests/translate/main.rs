//! translate's integration tests, one binary: golden files (`compile()` as data), the README's
//! annotation table and ConfigMap keys, the endpoint fast path, and the memory measurement (`#[ignore]`).

mod catalogue;
mod configmap;
mod endpoints;
mod gateway_listener_status;
mod gateway_status;
mod golden;
mod memory;
