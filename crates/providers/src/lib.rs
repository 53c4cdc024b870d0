//! Providers: where configuration comes from. Each turns its source into model `Object`s for
//! the Store; none knows about sockets or the proxy.
//!
//! ```text
//!  --config PATH ──▶ file::FileSource (+ file::FileWatch) ──▶ Vec<Object>, errors ──▶ Store
//! ```

pub mod file;

pub use file::{FileError, FileSource, FileWatch};
