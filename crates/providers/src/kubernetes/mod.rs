//! The Kubernetes provider: watch a real API server and feed the same Store as the file
//! provider; write Ingress status and Events back from one leader-elected replica.
//!
//! ```text
//!  API server ──watch, one per kind──▶ Watchers ──Update──▶ control plane ──▶ Store ──▶ compile
//!                      └─ Ingress status, uid ──▶ IngressStates ─┐
//!  control plane ──Published{served, diagnostics}──▶ StatusWriter ┴─(Lease holder)─▶ status, Events
//!                  └─ gateway (Compiled.gateway_status) ─▶ InfrastructureWrites ─▶ each
//!                       Gateway's Service and EndpointSlices ─▶ GatewayWrites ─▶ Gateway API status
//! ```
//! Gateway API kinds (`gateway`) are watched like the rest; a cluster without their CRDs
//! (404) has none of them, which is not an error. So are ClusterTrustBundles, a built-in API
//! that is off by default: the Store then records that the cluster does not serve them.
//! Nothing here touches sockets for traffic; the proxy knows nothing of Kubernetes.

mod gateway;
mod gateway_status;
mod infrastructure;
mod lease;
mod status;
mod watch;

use std::path::Path;

pub use status::{Published, StatusAddresses, StatusOptions, StatusWriter};
pub use watch::{FirstLists, IngressState, IngressStates, Update, WatchScope, Watchers};

/// Why the API server's address and credentials could not be worked out.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes configuration found (not in a pod, no $KUBECONFIG, no ~/.kube/config): \
         {0}; pass --kubeconfig PATH"
    )]
    Infer(#[from] kube::config::InferConfigError),
    #[error("building the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// A client from `--kubeconfig PATH`, else the in-cluster service account, else `$KUBECONFIG`
/// or `~/.kube/config`. No request is made: an unreachable API server is not an error here.
pub async fn connect(kubeconfig: Option<&Path>) -> Result<kube::Client, ConnectError> {
    let config = match kubeconfig {
        Some(path) => {
            let error = |source| ConnectError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let file = kube::config::Kubeconfig::read_from(path).map_err(error)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(error)?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}
