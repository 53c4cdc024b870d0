//! The proxy's integration tests, one binary: a `Proxy` on 127.0.0.1:0 fed from Kubernetes
//! objects (`support::Harness`), real backends, and clients that speak HTTP/1, HTTP/2, TLS, raw
//! frames. Each module is one area; `cargo test -p proxy -- routing::` runs one.

mod support;

mod access_log;
mod admin;
mod affinity;
mod annotations;
mod backend_tls;
mod basic_auth;
mod buffering;
mod canary;
mod client_cert;
mod codec;
mod config_headers;
mod cors;
mod custom_errors;
mod digest_auth;
mod edge;
mod external_auth;
mod forwarded;
mod frontend_tls;
mod gateway;
mod gateway_retry;
mod gateway_sites;
mod gateway_streams;
mod gateway_timeouts;
mod grpc;
mod grpc_route;
mod h2_edge;
mod h2c;
mod h2c_client;
mod h2spec;
mod host_root;
mod http1;
mod limits;
mod listener_isolation;
mod load_balance;
mod mirror;
mod oauth2_proxy;
mod otel;
mod passthrough;
mod proxy_protocol;
mod rate_limits;
mod routing;
mod server_wide;
mod slow_prefixes;
mod tcp_services;
mod tls;
mod tls_route;
mod udp_services;
mod upstream;
mod upstream_tls;
