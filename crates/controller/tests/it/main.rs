//! The controller's integration tests, one binary: the control plane in process (`control`)
//! and the admission webhook (`webhook`).

mod control;
mod webhook;
