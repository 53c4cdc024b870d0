//! The control plane as a library: provider events → Store → compile → publish to the proxy.
//! `sluice serve` maps its flags to [`Options`] and calls [`run`]; tests, the admission webhook
//! and `sluice migrate` use the same pieces ([`ControlPlane`], [`load_files`]).
//!
//! ```text
//!  Source::Files:      FileWatch ──▶ debounce ──▶ FileSource::reload ──▶ Store::replace_all ─┐
//!  Source::Kubernetes: Watchers ──Update (apply, delete, relist)──▶ Store::apply/remove ──────┤
//!                                                                                       ChangeSet
//!        config changed ──▶ compile(&Store) ──▶ Proxy::publish (atomic swap) ◀──────────────┤
//!        endpoints only ──▶ translate::refresh_endpoints ──▶ Proxy::endpoints_changed ◀──────┘
//!  Kubernetes only: recompiled ──▶ StatusWriter::publish(served, diagnostics) (leader only)
//!                   recompiled ──▶ Webhook::publish(&Store) ─▶ its thread: AdmissionReview ──▶
//!                   webhook::review(snapshot + candidate) ──▶ allowed/denied
//! ```
//! All of this runs on one current-thread runtime; workers never wait for it, and neither does
//! it wait for the admission webhook, which serves and compiles on threads of its own.
//! [`webhook_cert`] is apart: `sluice webhook-cert` (deploy/'s Job) makes the webhook's
//! certificate Secret and sets its CA as the webhook configuration's `caBundle`.
//!
//! ```text
//!  start ─▶ ConfigMap read ─▶ soft RLIMIT_NOFILE: max-worker-open-files × workers, else the
//!           hard limit (logged) ─▶ Proxy::start ─▶ announce (one stdout line)
//!  SIGTERM ─▶ Proxy::terminating (/ready 503; still serving, still applying changes)
//!          ─ shutdown_grace_period, or a second signal ─▶ Proxy::shutdown (drain)
//! ```

mod control;
mod files;
mod kubernetes;
mod limits;
pub mod migrate;
mod signals;
pub mod webhook;
pub mod webhook_cert;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use providers::kubernetes::StatusAddresses;
use proxy::ProxyConfig;
use translate::CompileOptions;

pub use control::ControlPlane;
pub use files::load_files;
pub use kubernetes::{apply_update, load_kubernetes};
pub use signals::{Step, Termination};
pub use webhook::{WebhookLimits, WebhookOptions};

/// ingress-nginx's internal status port, also loopback-only there.
pub const DEFAULT_STATUS_LISTEN: &str = "127.0.0.1:10246";
/// The Lease `--election-id` names unless set.
pub const DEFAULT_ELECTION_ID: &str = "sluice-leader";
/// How long a leader's Lease lasts without renewal unless set.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// Everything `sluice serve` needs, validated (the binary's flags, typed).
#[derive(Clone, Debug)]
pub struct Options {
    pub source: Source,
    pub listen: Listen,
    /// Worker threads; `None`: the ConfigMap's `worker-processes`, else one per CPU.
    pub workers: Option<NonZeroUsize>,
    /// Ingress class, ConfigMap, default certificate and backend, endpoint policy.
    pub compile: CompileOptions,
    /// After SIGTERM, how long `/ready` answers 503 while serving goes on.
    pub shutdown_grace_period: Duration,
    /// Where access log lines go.
    pub access_log: proxy::AccessLogOutput,
    /// `--metrics-per-host`, `--report-status-classes`.
    pub metric_options: proxy::MetricOptions,
}

/// Where the Kubernetes objects come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A YAML (or JSON) file, or a folder of them; watched.
    Files(PathBuf),
    /// A Kubernetes API server.
    Kubernetes(KubeOptions),
}

/// The proxy's listeners.
#[derive(Clone, Copy, Debug)]
pub struct Listen {
    pub http: SocketAddr,
    pub https: SocketAddr,
    /// `/healthz`, `/ready`, `/metrics`.
    pub admin: SocketAddr,
    /// `/config`: loopback only.
    pub status: SocketAddr,
}

/// Kubernetes mode: how to reach the API, what to watch, how to report.
#[derive(Clone, Debug)]
pub struct KubeOptions {
    /// `None`: in-cluster credentials, else `$KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// Watch Ingresses, Services, EndpointSlices and Secrets of this namespace only.
    pub watch_namespace: Option<String>,
    /// What to write into the status of served Ingresses.
    pub status_addresses: StatusAddresses,
    /// The Lease (in `$POD_NAMESPACE`, else the ConfigMap's namespace) that elects the writer
    /// of status and Events.
    pub election_id: String,
    pub lease_duration: Duration,
    /// `--validating-webhook`: the admission webhook, answered from this process's Store.
    pub webhook: Option<Box<WebhookOptions>>,
}

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

impl Default for KubeOptions {
    fn default() -> KubeOptions {
        KubeOptions {
            kubeconfig: None,
            watch_namespace: None,
            status_addresses: StatusAddresses::None,
            election_id: DEFAULT_ELECTION_ID.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            webhook: None,
        }
    }
}

impl Options {
    /// `workers`, else the ConfigMap's worker-processes, else one per CPU.
    fn workers(&self, worker_processes: Option<u32>) -> NonZeroUsize {
        let cpus = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
        self.workers
            .or_else(|| worker_processes.and_then(|n| NonZeroUsize::new(n as usize)))
            .unwrap_or(cpus)
    }

    fn proxy_config(&self, workers: NonZeroUsize) -> ProxyConfig {
        ProxyConfig {
            http_listen: self.listen.http,
            https_listen: self.listen.https,
            admin_listen: self.listen.admin,
            status_listen: self.listen.status,
            workers,
            access_log: self.access_log.clone(),
            metric_identity: self.metric_identity(),
            metric_options: self.metric_options.clone(),
        }
    }

    /// ingress-nginx's `controller_*` metric labels: the pod (from the downward API's
    /// `$POD_NAME` and `$POD_NAMESPACE`, else the host name) and the controller class.
    fn metric_identity(&self) -> proxy::MetricIdentity {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        proxy::MetricIdentity {
            namespace: env("POD_NAMESPACE").unwrap_or_default(),
            class: self.compile.controller_class.clone(),
            pod: env("POD_NAME").unwrap_or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|h| h.trim().to_owned())
                    .unwrap_or_default()
            }),
        }
    }
}

/// Runs until SIGTERM or SIGINT, then drains and returns.
pub fn run(options: Options) -> Result<(), Error> {
    match &options.source {
        Source::Files(path) => files::run(path.clone(), &options),
        Source::Kubernetes(kube) => kubernetes::run(kube.clone(), &options),
    }
}

/// A current-thread runtime for the control plane.
fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "starting the control plane's runtime",
            source,
        })
}

/// The stable line on stdout for scripts and tests that start Sluice on port 0.
fn announce(proxy: &proxy::Proxy) {
    println!(
        "sluice serve: listening http={} https={} admin={} status={}",
        proxy.http_addr(),
        proxy.https_addr(),
        proxy.admin_addr(),
        proxy.status_addr()
    );
}
