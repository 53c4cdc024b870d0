//! Providers: where configuration comes from. Each turns its source into model `Object`s for
//! the Store; none knows about sockets or the proxy.
//!
//! ```text
//!  --config PATH ──▶ file::FileSource (+ file::FileWatch) ──▶ Vec<Object>, errors ──▶ Store
//!  --kubernetes  ──▶ kubernetes::Watchers (kube-rs) ──▶ Update (apply, delete, relist) ──▶ Store
//!                    kubernetes::StatusWriter ◀── what the control plane serves (status, Events)
//! ```

pub mod file;
pub mod kubernetes;

pub use file::{FileError, FileSource, FileWatch};
