//! GRPCRoute in `sluice serve --config DIR`: the YAML files a user writes, a grpcio server
//! behind them and a grpcio client speaking h2c with prior knowledge to Sluice's HTTP port (the
//! proxy crate's `tests/grpc/echo.py`), live edits followed.
//!
//! Skipped without `SLUICE_GRPC_PYTHON` (scripts/grpc-python.sh), except under CI.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use testkit::grpc::{python, GrpcServer, ECHO_PY};

use crate::support::*;

/// Service `echo`, after `gateway::GATEWAY` (the class and Gateway `edge`, port 80 HTTP).
const SERVICE: &str = "\
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec: {ports: [{name: grpc, port: 8080}]}
";

/// A GRPCRoute for `rpc.test` sending `service`'s calls to Service `echo`.
fn route_yaml(service: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {{name: rpc}}\n\
         spec:\n  parentRefs: [{{name: edge}}]\n  hostnames: [rpc.test]\n  rules:\n\
         \x20 - matches: [{{method: {{service: {service}}}}}]\n\
         \x20   backendRefs: [{{name: echo, port: 8080}}]\n"
    )
}

/// One unary call of `path` through Sluice's HTTP port; echo.py's JSON answer.
fn call(python: &Path, serve: &Serve, path: &str) -> Value {
    let output = Command::new(python)
        .args([
            ECHO_PY,
            "call",
            &serve.http.to_string(),
            "rpc.test",
            path,
            "hi",
        ])
        .output()
        .expect("the gRPC client runs");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&output.stderr));
    })
}

#[test]
fn a_grpc_route_from_files_is_served_over_h2c_and_follows_edits() {
    let Some(python) = python() else { return };
    let server = GrpcServer::start(&python, "one", None);

    let dir = temp_dir("grpc-route");
    let slice = format!(
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: echo-1, labels: {{kubernetes.io/service-name: echo}}}}\n\
         addressType: IPv4\nports: [{{name: grpc, port: {}}}]\n\
         endpoints: [{{addresses: [\"127.0.0.1\"]}}]\n",
        server.addr.port()
    );
    let objects = format!("{}{SERVICE}{slice}", crate::gateway::GATEWAY);
    std::fs::write(dir.join("gateway.yaml"), objects).unwrap();
    std::fs::write(dir.join("route.yaml"), route_yaml("echo.Echo")).unwrap();
    let serve = Serve::start(&dir, &[]);

    let reply = call(&python, &serve, "/echo.Echo/Say");
    assert_eq!(reply["code"], "OK", "{reply:#}");
    assert_eq!(reply["reply"]["server"], "one", "{reply:#}");
    // A service no rule names: Sluice's own 404, which a gRPC client reads as UNIMPLEMENTED.
    let reply = call(&python, &serve, "/echo.Other/Say");
    assert_eq!(reply["code"], "UNIMPLEMENTED", "{reply:#}");

    // The route edited to the other service: followed without a restart.
    write_atomically(&dir.join("route.yaml"), &route_yaml("echo.Other"));
    eventually(Duration::from_secs(10), "echo.Other routed", || {
        (call(&python, &serve, "/echo.Other/Ask")["code"] == "OK").then_some(())
    });
    let reply = call(&python, &serve, "/echo.Echo/Say");
    assert_eq!(reply["code"], "UNIMPLEMENTED", "{reply:#}");
}
