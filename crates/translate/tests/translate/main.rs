//! translate's integration tests, one binary: golden files (`compile()` as data), the README's
//! annotation table and ConfigMap keys, the endpoint fast path, and the memory measurement (`#[ignore]`).

mod catalogue;
mod configmap;
mod endpoints;
mod gateway_sites;
mod gateway_status;
mod golden;
mod memory;
