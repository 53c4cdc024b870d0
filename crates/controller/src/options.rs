//! What `sluice serve` asks of the control plane, validated: sources, listeners, workers and the
//! proxy configuration derived from them.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use providers::kubernetes::StatusAddresses;
use proxy::ProxyConfig;
use translate::CompileOptions;

use crate::webhook::WebhookOptions;

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
    /// Where ExternalName Services' names are asked: `--resolv-conf`'s name servers, search
    /// list and options, with `--resolver`'s servers in place of its own when given.
    pub resolver: providers::dns::ResolverConfig,
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
#[derive(Clone, Debug)]
pub struct Listen {
    pub http: SocketAddr,
    pub https: SocketAddr,
    /// `/healthz`, `/ready`, `/metrics`.
    pub admin: SocketAddr,
    /// `--health-check-path` (answered as `/healthz` too) and `--healthz-as-ready`.
    pub health: proxy::HealthCheck,
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
    /// `false` (`--disable-leader-election`): no Lease, this replica writes as the leader.
    pub elect: bool,
    /// `--validating-webhook`: the admission webhook, answered from this process's Store.
    pub webhook: Option<Box<WebhookOptions>>,
    /// `--enable-topology-aware-routing`: the node's zone is looked up at start.
    pub topology_aware_routing: bool,
}

impl Default for KubeOptions {
    fn default() -> KubeOptions {
        KubeOptions {
            kubeconfig: None,
            watch_namespace: None,
            status_addresses: StatusAddresses::None,
            election_id: DEFAULT_ELECTION_ID.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            elect: true,
            webhook: None,
            topology_aware_routing: false,
        }
    }
}

impl Options {
    /// `workers`, else the ConfigMap's worker-processes, else one per CPU.
    pub(crate) fn workers(&self, worker_processes: Option<u32>) -> NonZeroUsize {
        let cpus = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
        self.workers
            .or_else(|| worker_processes.and_then(|n| NonZeroUsize::new(n as usize)))
            .unwrap_or(cpus)
    }

    pub(crate) fn proxy_config(&self, workers: NonZeroUsize) -> ProxyConfig {
        ProxyConfig {
            http_listen: self.listen.http,
            https_listen: self.listen.https,
            admin_listen: self.listen.admin,
            health: self.listen.health.clone(),
            status_listen: self.listen.status,
            workers,
            access_log: self.access_log.clone(),
            metric_identity: self.metric_identity(),
            metric_options: self.metric_options.clone(),
            port_retry_interval: proxy::DEFAULT_PORT_RETRY_INTERVAL,
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
