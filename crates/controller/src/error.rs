//! Why the control plane could not start, or stopped with an error: one enum for every source.

use std::time::Duration;

/// Why the control plane could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] providers::FileError),
    #[error(transparent)]
    Proxy(#[from] proxy::StartError),
    #[error(transparent)]
    Kubernetes(#[from] providers::kubernetes::ConnectError),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("admission webhook: {0}")]
    Webhook(String),
    #[error("the Kubernetes API did not list every watched kind within {0:?}: {1}")]
    SyncTimeout(Duration, String),
    #[error("draining the proxy: {0}")]
    Drain(#[from] tokio::task::JoinError),
}
