//! Providers: where configuration comes from. Each turns its source into model `Object`s (or,
//! for names, addresses) for the Store; none knows about the proxy.
//!
//! ```text
//!  --config PATH ──▶ file::FileSource (+ file::FileWatch) ──▶ Vec<Object>, errors ──▶ Store
//!  --kubernetes  ──▶ kubernetes::Watchers (kube-rs) ──▶ Update (apply, delete, relist) ──▶ Store
//!                    kubernetes::StatusWriter ◀── what the control plane serves (status, Events)
//!  ExternalNames ──▶ dns::NameWatch (resolv.conf's servers, TTLs) ──▶ Resolution ──▶ Store
//! ```

pub mod dns;
pub mod file;
pub mod kubernetes;

pub use file::{FileError, FileSource, FileWatch};
