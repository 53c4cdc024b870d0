//! A real gRPC implementation for the tests: grpcio (the gRPC project's C-core under Python,
//! from scripts/grpc-python.sh) running the proxy crate's `tests/grpc/echo.py` as servers (and,
//! in each test, as clients).
//!
//! ```text
//!  SLUICE_GRPC_PYTHON ─▶ python() ─▶ GrpcServer::start(python, NAME) ─▶ echo.py serve NAME
//!                                         (127.0.0.1:port, killed on drop)
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// The servers' and clients' script (its doc lists the service and the client cases).
pub const ECHO_PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../proxy/tests/grpc/echo.py");

/// A grpcio server process on 127.0.0.1; stopped gracefully (GOAWAY, running calls finish)
/// when its stdin closes.
pub struct GrpcServer {
    child: Child,
    stdin: Option<ChildStdin>,
    pub addr: SocketAddr,
}

impl GrpcServer {
    /// `echo.py serve NAME`, over TLS with `tls` (certificate and key files).
    pub fn start(python: &Path, name: &str, tls: Option<(&Path, &Path)>) -> GrpcServer {
        let mut command = Command::new(python);
        command.arg(ECHO_PY).args(["serve", name]);
        if let Some((cert, key)) = tls {
            command.arg(cert).arg(key);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the gRPC server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the server prints its port");
        GrpcServer {
            stdin: child.stdin.take(),
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        }
    }

    /// Starts the graceful stop (GOAWAY to every connection, running calls finish).
    pub fn begin_stop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        // Our own child, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The grpcio Python (`SLUICE_GRPC_PYTHON`), or `None` (skip, with a message) outside CI;
/// under CI (`CI=true`) a missing one fails.
pub fn python() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var_os("SLUICE_GRPC_PYTHON").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        Some(path) => panic!(
            "SLUICE_GRPC_PYTHON={} is not a file (make it with scripts/grpc-python.sh)",
            path.display()
        ),
        None if ci => panic!("CI: SLUICE_GRPC_PYTHON is not set; scripts/test.sh installs grpcio"),
        None => {
            eprintln!(
                "skipped: set SLUICE_GRPC_PYTHON=$(scripts/grpc-python.sh) to run the gRPC tests"
            );
            None
        }
    }
}
