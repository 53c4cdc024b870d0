//! End-to-end tests of the `sluice` binary, one test binary: real `sluice serve` / `backend` /
//! `load` processes on 127.0.0.1, and a private Kubernetes API per test in its own network
//! namespace (`support::kube`). Each module is one area; `cargo test -p sluice -- serve::` runs one.

mod support;

mod compression;
mod ext_authz;
mod external_name;
mod gateway;
mod gateway_bench;
mod grpc_route;
mod kube_backend_tls;
mod kube_config_maps;
mod kube_gateway;
mod kube_infrastructure;
mod kube_listener_set;
mod kubernetes;
mod kubernetes_bench;
mod lab;
mod lab_capacity;
mod lifecycle;
mod listener_filters;
mod listener_set;
mod load;
mod memory;
mod migrate;
mod prometheus;
mod serve;
mod server_tls;
mod status_page;
mod tls;
mod topology;
