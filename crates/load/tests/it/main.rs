//! The load generator's integration tests, one binary: real servers on 127.0.0.1:0 misbehaving in
//! one way each (`support`). `cargo test -p load -- tls::` runs one module.

mod support;

mod errors;
mod omission;
mod run;
mod tls;
