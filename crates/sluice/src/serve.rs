//! `sluice serve`: its flags, checked, mapped to the `controller` crate's typed options.
//!
//! ```text
//!  argv ──clap──▶ ServeArgs ──ServeArgs::options──▶ controller::Options ──▶ controller::run
//! ```

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use controller::{KubeOptions, Listen, Options, Source, WebhookLimits, WebhookOptions};
use model::{NamespacedName, NodeLocalEndpoints};
use providers::dns::ResolverConfig;
use providers::kubernetes::StatusAddresses;
use translate::CompileOptions;

pub(crate) use controller::DEFAULT_STATUS_LISTEN;

/// `--admin-listen`'s default outside Kubernetes mode.
const DEFAULT_ADMIN_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9113);
/// ingress-nginx's `--healthz-port` default, where its manifests' probes and Prometheus look:
/// the admin port in Kubernetes mode unless told otherwise.
const INGRESS_NGINX_HEALTHZ_PORT: u16 = 10254;
/// `--shutdown-grace-period` in Kubernetes mode when not given: long enough for kube-proxy and
/// load balancers to stop sending new connections after the pod turns terminating (ingress-nginx
/// defaults to 0, and a rollout of its chart refuses connections meanwhile).
const KUBERNETES_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["config", "kubernetes"])))]
pub(crate) struct ServeArgs {
    /// A YAML (or JSON) file, or a folder of them, holding Kubernetes objects: Ingress,
    /// IngressClass, Service, EndpointSlice, Secret (kubernetes.io/tls), ConfigMap. Watched.
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Watch a Kubernetes API server instead (in-cluster credentials when run in a pod).
    #[arg(long)]
    pub(crate) kubernetes: bool,
    #[command(flatten)]
    pub(crate) kube: KubeArgs,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:80")]
    pub(crate) http_listen: SocketAddr,
    /// ingress-nginx's flag: the plain HTTP port on every address (--http-listen 0.0.0.0:PORT).
    #[arg(long, value_name = "PORT", conflicts_with = "http_listen")]
    pub(crate) http_port: Option<u16>,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:443")]
    pub(crate) https_listen: SocketAddr,
    /// ingress-nginx's flag: the TLS port on every address (--https-listen 0.0.0.0:PORT).
    #[arg(long, value_name = "PORT", conflicts_with = "https_listen")]
    pub(crate) https_port: Option<u16>,
    /// Serves /healthz, /ready and /metrics: the port to expose to probes and Prometheus.
    /// Default 127.0.0.1:9113; with --kubernetes 0.0.0.0:10254 (ingress-nginx's, where its
    /// manifests' probes look).
    #[arg(long, value_name = "ADDR")]
    pub(crate) admin_listen: Option<SocketAddr>,
    /// ingress-nginx's flag: the admin port (/healthz, /ready, /metrics) on --healthz-host.
    #[arg(long, value_name = "PORT", conflicts_with = "admin_listen")]
    pub(crate) healthz_port: Option<u16>,
    /// ingress-nginx's flag: the admin address with --healthz-port (default: every address).
    #[arg(long, value_name = "IP", conflicts_with = "admin_listen")]
    pub(crate) healthz_host: Option<std::net::IpAddr>,
    /// ingress-nginx's flag: this path answers on the admin listener as /healthz does (for
    /// probes that look there).
    #[arg(long, value_name = "PATH", value_parser = health_check_path)]
    pub(crate) health_check_path: Option<String>,
    /// /healthz (and --health-check-path) answers as /ready: 503 until the first configuration
    /// is published and while shutting down, as ingress-nginx's /healthz does. Its chart probes
    /// /healthz for readiness; its entry (`/nginx-ingress-controller`) sets this flag.
    #[arg(long)]
    pub(crate) healthz_as_ready: bool,
    /// Serves the status page (/) and /config, which show every tenant's hosts, paths, endpoints
    /// and Secret names: loopback addresses only (anything else is refused at start-up).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_STATUS_LISTEN)]
    pub(crate) status_listen: SocketAddr,
    /// Worker threads (default: the ConfigMap's worker-processes, else one per CPU).
    #[arg(long, value_name = "N")]
    pub(crate) workers: Option<NonZeroUsize>,
    /// IngressClass name; also matched in the legacy kubernetes.io/ingress.class annotation.
    #[arg(long, value_name = "NAME", default_value = "sluice")]
    pub(crate) ingress_class: String,
    /// The spec.controller value of IngressClasses this controller implements.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "sluice.dev/ingress-controller"
    )]
    pub(crate) controller_class: String,
    /// ingress-nginx's flag: also serve Ingresses of this IngressClass (by name) whatever
    /// its spec.controller says.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub(crate) ingress_class_by_name: bool,
    /// ingress-nginx's flag: also serve Ingresses that name no class (no ingressClassName,
    /// no kubernetes.io/ingress.class annotation).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub(crate) watch_ingress_without_class: bool,
    /// TLS Secret served to clients without (matching) SNI; else a self-signed certificate.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name, visible_alias = "default-ssl-certificate")]
    pub(crate) default_tls_secret: Option<NamespacedName>,
    /// The Service (its first port) that answers requests no rule matches, when no Ingress
    /// sets spec.defaultBackend; else they get 404. ingress-nginx's flag.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name)]
    pub(crate) default_backend_service: Option<NamespacedName>,
    /// ingress-nginx's flag: Ingresses with the `ssl-passthrough` annotation get their hosts'
    /// TLS connections passed to the backend of their `/` path undecrypted (SNI read from the
    /// ClientHello on the HTTPS listener; other hosts are terminated there as usual).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub(crate) enable_ssl_passthrough: bool,
    /// Addresses for Gateways (IPs, ranges `a-b`, CIDRs; comma-separated; at most 4096): each
    /// Gateway of Sluice's class gets one of its own (its spec.addresses when free, else the
    /// one its status has, else the first free) and serves only its own routes and
    /// certificates there. The addresses must reach the node (on its interface, or
    /// announced). Without it, every Gateway shares Sluice's listeners.
    #[arg(long, value_name = "IPS", value_parser = address_pool)]
    pub(crate) gateway_address_pool: Option<translate::gateway::AddressPool>,
    /// ingress-nginx's flag: the request metric families carry a `host` label (the rule's host).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool)]
    pub(crate) metrics_per_host: bool,
    /// ingress-nginx's flag: the request metric families' `status` label is the class (2xx,
    /// 4xx, 5xx, ...) instead of the code.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub(crate) report_status_classes: bool,
    /// ingress-nginx's flag: the upper bounds (seconds, comma-separated, increasing) of the
    /// request duration histograms; `+Inf` is implied. Default: Prometheus' default buckets.
    #[arg(long, value_name = "SECONDS,...", value_parser = bucket_list)]
    pub(crate) time_buckets: Option<BucketList>,
    /// ingress-nginx's flag: the bounds (bytes) of the request and response size histograms.
    /// Default: 10,20,…,100.
    #[arg(long, value_name = "BYTES,...", value_parser = bucket_list)]
    pub(crate) length_buckets: Option<BucketList>,
    /// ingress-nginx's flag: the bounds (bytes) of the bytes_sent histogram. Default:
    /// 10,100,…,10000000.
    #[arg(long, value_name = "BYTES,...", value_parser = bucket_list)]
    pub(crate) size_buckets: Option<BucketList>,
    /// ingress-nginx's flag: request metric families not exported (comma-separated, with or
    /// without the nginx_ingress_controller_ prefix), e.g. request_size,bytes_sent.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    pub(crate) exclude_socket_metrics: Vec<String>,
    /// ingress-nginx's flag: Sluice always serves Prometheus metrics on the admin address;
    /// accepted so ingress-nginx's arguments work unchanged.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "true", value_parser = go_bool, hide_short_help = true)]
    pub(crate) enable_metrics: bool,
    /// ConfigMap holding controller settings.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name, default_value = "sluice/sluice")]
    pub(crate) configmap: NamespacedName,
    /// ingress-nginx's flag: a ConfigMap whose entries `"PORT": "NS/SERVICE:PORT[:PROXY][:PROXY]"`
    /// open TCP ports forwarded to the Service's endpoints (README: TCP services). Watched:
    /// ports open and close as it changes.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name)]
    pub(crate) tcp_services_configmap: Option<NamespacedName>,
    /// ingress-nginx's flag: a ConfigMap whose entries `"PORT": "NS/SERVICE:PORT"` open UDP
    /// ports whose datagrams go to the Service's endpoints (README: UDP services). Watched.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name)]
    pub(crate) udp_services_configmap: Option<NamespacedName>,
    /// After SIGTERM, how long /ready answers 503 while the listeners keep accepting and
    /// serving (load balancers and kube-proxy need a few seconds to stop sending; each
    /// response meanwhile ends its connection, so clients move to ready replicas), before
    /// they close and requests in flight drain within worker-shutdown-timeout. A second
    /// signal ends it early. ingress-nginx's flag (default 0 there); a bare number is
    /// seconds. Default: 5s with --kubernetes, else 0.
    #[arg(long, value_name = "DURATION", value_parser = grace_period)]
    pub(crate) shutdown_grace_period: Option<Duration>,
    /// After the drain, how long to wait before exiting. ingress-nginx's flag (its default,
    /// 10, gave its preStop hook time to see nginx stop); Sluice's `/wait-shutdown` returns as
    /// soon as the drain ends, whatever this says. A bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = grace_period)]
    pub(crate) post_shutdown_grace_period: Duration,
    /// ingress-nginx's (klog's) log verbosity: 0–2 info, 3–4 debug, 5 and more trace.
    /// SLUICE_LOG, when set, wins.
    #[arg(long = "v", value_name = "N")]
    pub(crate) verbosity: Option<u8>,
    /// ingress-nginx's flag: Ingress backends, the default backend and TCP/UDP service entries
    /// may not name Services of type ExternalName (each such reference is a diagnostic and
    /// answers 503). By default Sluice follows them: it resolves the name (--resolv-conf) and
    /// dials its addresses at the port's targetPort, re-resolving at each answer's TTL.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub(crate) disable_svc_external_name: bool,
    /// ingress-nginx's flag: an Ingress with a `spec.defaultBackend` (a catch-all) is not
    /// served: an error diagnostic, and the admission webhook denies it.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    pub(crate) disable_catch_all: bool,
    /// Where ExternalName Services' names are resolved: the name servers, search list and
    /// options (ndots, timeout, attempts) of this file, as a pod's resolver reads it. A
    /// missing default file means glibc's defaults (127.0.0.1, no search list).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_RESOLV_CONF)]
    pub(crate) resolv_conf: PathBuf,
    /// Name servers (IP or IP:PORT, comma-separated) to ask instead of --resolv-conf's; its
    /// search list and options still apply.
    #[arg(long, value_name = "ADDR,...", value_delimiter = ',', value_parser = name_server)]
    pub(crate) resolver: Vec<SocketAddr>,
    /// Append access log lines to this file instead of standard output (the ConfigMap's
    /// disable-access-log and log-format-upstream say whether and how they are written).
    #[arg(long, value_name = "PATH")]
    pub(crate) access_log_path: Option<PathBuf>,
}

#[derive(clap::Args, Clone, Debug)]
#[command(next_help_heading = "Kubernetes mode (--kubernetes)")]
pub(crate) struct KubeArgs {
    /// kubeconfig to use (default: in-cluster service account, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "PATH", requires = "kubernetes")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Watch Ingresses, Services, EndpointSlices and Secrets in this namespace only (default,
    /// or empty: all).
    #[arg(long, value_name = "NS", requires = "kubernetes", value_parser = namespace_or_all)]
    pub(crate) watch_namespace: Option<String>,
    /// ingress-nginx's flag: serve only the Ingresses of namespaces whose labels this label
    /// selector selects (`team=shop`, `env in (prod,stage)`, `!legacy`, comma-separated:
    /// all must hold), as `kubectl -l` reads it. Followed as namespaces are relabelled.
    #[arg(long, value_name = "SELECTOR", requires = "kubernetes", conflicts_with = "watch_namespace", value_parser = namespace_selector)]
    pub(crate) watch_namespace_selector: Option<translate::gateway::NamespaceSelector>,
    /// Write this Service's address (load balancer, external IPs or cluster IP) into the status
    /// of the Ingresses Sluice serves.
    #[arg(
        long,
        value_name = "NS/NAME",
        requires = "kubernetes",
        value_parser = namespaced_name,
        conflicts_with = "publish_status_address"
    )]
    pub(crate) publish_service: Option<NamespacedName>,
    /// Write these IPs or host names into the status of the Ingresses Sluice serves.
    #[arg(
        long,
        value_name = "ADDR,...",
        requires = "kubernetes",
        value_delimiter = ',',
        value_parser = status_address
    )]
    pub(crate) publish_status_address: Vec<String>,
    /// ingress-nginx's flag: without --publish-service and --publish-status-address, Ingress
    /// status holds the addresses of the nodes that run a ready pod of this controller (its
    /// pod's labels, $POD_NAMESPACE/$POD_NAME): their ExternalIPs, else InternalIPs; with this
    /// flag their InternalIPs.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool, requires = "kubernetes")]
    pub(crate) report_node_internal_ip_address: bool,
    /// ingress-nginx's flag: no Lease; this replica writes Ingress status and Events as if it
    /// led (for a single replica, or RBAC without Leases).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool, requires = "kubernetes")]
    pub(crate) disable_leader_election: bool,
    /// Name of the Lease (in $POD_NAMESPACE, else the --configmap namespace) that elects the one
    /// replica writing status and Events.
    #[arg(long, value_name = "NAME", default_value = controller::DEFAULT_ELECTION_ID, value_parser = dns_subdomain)]
    pub(crate) election_id: String,
    /// How long a leader's Lease lasts without renewal; it renews every quarter of this.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = lease_duration, visible_alias = "election-ttl")]
    // (the literal must equal controller::DEFAULT_LEASE_DURATION; a unit test checks)
    pub(crate) lease_duration: Duration,
    /// ingress-nginx's flag: a Service annotated `service.kubernetes.io/topology-mode: Auto`
    /// or with `trafficDistribution: PreferClose` sends this replica's requests to the
    /// endpoints hinted for its zone (its node's `topology.kubernetes.io/zone` label; the
    /// node is $NODE_NAME, from the downward API's spec.nodeName).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = go_bool, requires = "kubernetes")]
    pub(crate) enable_topology_aware_routing: bool,
    /// Let EndpointSlice addresses that point at the node itself (loopback 127.0.0.0/8 and ::1,
    /// link-local 169.254.0.0/16 and fe80::/10, unspecified 0.0.0.0 and ::) take traffic. By
    /// default they are left out, with a warning, an Event on the Ingress, /config and a metric.
    #[arg(long, requires = "kubernetes")]
    pub(crate) allow_loopback_endpoints: bool,
    /// Serve the validating admission webhook (admission.k8s.io/v1 AdmissionReview over HTTPS)
    /// on ADDR (`IP:PORT`, e.g. `$(POD_IP):8443`; `:8443` is every IPv4 address): Ingresses
    /// Sluice would refuse are refused by the API server, with Sluice's reasons; what it serves
    /// differently comes back as warnings.
    #[arg(long, value_name = "ADDR", requires_all = ["kubernetes", "validating_webhook_certificate", "validating_webhook_key"], value_parser = webhook_address)]
    pub(crate) validating_webhook: Option<SocketAddr>,
    /// The webhook's certificate chain (PEM); re-read when the file changes.
    #[arg(long, value_name = "PATH", requires = "validating_webhook")]
    pub(crate) validating_webhook_certificate: Option<PathBuf>,
    /// The webhook's private key (PEM).
    #[arg(long, value_name = "PATH", requires = "validating_webhook")]
    pub(crate) validating_webhook_key: Option<PathBuf>,
}

impl Default for KubeArgs {
    fn default() -> KubeArgs {
        KubeArgs {
            kubeconfig: None,
            watch_namespace: None,
            watch_namespace_selector: None,
            publish_service: None,
            publish_status_address: Vec::new(),
            report_node_internal_ip_address: false,
            disable_leader_election: false,
            election_id: controller::DEFAULT_ELECTION_ID.into(),
            lease_duration: controller::DEFAULT_LEASE_DURATION,
            enable_topology_aware_routing: false,
            allow_loopback_endpoints: false,
            validating_webhook: None,
            validating_webhook_certificate: None,
            validating_webhook_key: None,
        }
    }
}

/// `--watch-namespace-selector`: a label selector in `kubectl -l` syntax.
fn namespace_selector(text: &str) -> Result<translate::gateway::NamespaceSelector, String> {
    translate::gateway::NamespaceSelector::parse_text(text)
}

/// resolv.conf where a pod (and a host) has it.
const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";

/// A `--resolver` entry: an IP address, with a port or without (53).
fn name_server(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    let ip = text.trim_start_matches('[').trim_end_matches(']');
    ip.parse::<std::net::IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| format!("{text:?} is not a name server address (IP, IP:PORT or [IPv6]:PORT)"))
}

/// Runs until SIGTERM or SIGINT, then drains and returns.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    // Read once here so that a bad --resolv-conf fails at start with its reason.
    let resolver = args.resolver_config().map_err(anyhow::Error::msg)?;
    controller::run(Options {
        resolver,
        ..args.options()
    })?;
    Ok(())
}

impl ServeArgs {
    /// The flags as the controller's typed options.
    pub(crate) fn options(&self) -> Options {
        let source = match &self.config {
            Some(path) => Source::Files(path.clone()),
            None => Source::Kubernetes(self.kube_options()),
        };
        Options {
            source,
            listen: self.listen(),
            workers: self.workers,
            compile: self.compile_options(),
            shutdown_grace_period: self.shutdown_grace_period.unwrap_or(if self.kubernetes {
                KUBERNETES_SHUTDOWN_GRACE
            } else {
                Duration::ZERO
            }),
            access_log: match &self.access_log_path {
                Some(path) => proxy::AccessLogOutput::File(path.clone()),
                None => proxy::AccessLogOutput::Stdout,
            },
            metric_options: self.metric_options(),
            // `run` has read it already and refused a bad one.
            resolver: self.resolver_config().unwrap_or_default(),
        }
    }

    /// ingress-nginx's metrics flags.
    /// `--resolv-conf` (a missing default file: glibc's defaults), with `--resolver`'s servers.
    fn resolver_config(&self) -> Result<ResolverConfig, String> {
        let mut config = match ResolverConfig::read(&self.resolv_conf) {
            Ok(config) => config,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && self.resolv_conf.as_os_str() == DEFAULT_RESOLV_CONF =>
            {
                ResolverConfig::default()
            }
            Err(e) => {
                return Err(format!(
                    "--resolv-conf {}: {e} (ExternalName Services are resolved with it; pass \
                     a readable file)",
                    self.resolv_conf.display()
                ))
            }
        };
        if !self.resolver.is_empty() {
            config.nameservers = self.resolver.clone();
        }
        Ok(config)
    }

    fn metric_options(&self) -> proxy::MetricOptions {
        let defaults = proxy::MetricOptions::default();
        let buckets = |flag: &Option<BucketList>, default: Vec<f64>| {
            flag.as_ref().map_or(default, |list| list.0.clone())
        };
        let mut excluded = Vec::new();
        for name in &self.exclude_socket_metrics {
            let name = name.trim();
            let short = name
                .strip_prefix("nginx_ingress_controller_")
                .unwrap_or(name);
            if proxy::SOCKET_METRICS.contains(&short) {
                excluded.push(short.to_owned());
            } else if !name.is_empty() {
                // ingress-nginx ignores names it does not have too; say so rather than fail.
                tracing::warn!(
                    name,
                    known = %proxy::SOCKET_METRICS.join(","),
                    "--exclude-socket-metrics: not a request metric family; ignored"
                );
            }
        }
        proxy::MetricOptions {
            per_host: self.metrics_per_host,
            status_classes: self.report_status_classes,
            time_buckets: buckets(&self.time_buckets, defaults.time_buckets),
            length_buckets: buckets(&self.length_buckets, defaults.length_buckets),
            size_buckets: buckets(&self.size_buckets, defaults.size_buckets),
            excluded,
        }
    }

    /// The listeners: Sluice's address flags, else ingress-nginx's port flags on every
    /// address, else the defaults.
    fn listen(&self) -> Listen {
        let every = std::net::IpAddr::from([0, 0, 0, 0]);
        let on_every = |port: Option<u16>, addr: SocketAddr| {
            port.map_or(addr, |port| SocketAddr::new(every, port))
        };
        let admin = match (self.admin_listen, self.healthz_host, self.healthz_port) {
            (Some(addr), ..) => addr,
            (None, None, None) if !self.kubernetes => DEFAULT_ADMIN_LISTEN,
            (None, host, port) => SocketAddr::new(
                host.unwrap_or(every),
                port.unwrap_or(INGRESS_NGINX_HEALTHZ_PORT),
            ),
        };
        Listen {
            http: on_every(self.http_port, self.http_listen),
            https: on_every(self.https_port, self.https_listen),
            admin,
            health: proxy::HealthCheck {
                extra_path: self.health_check_path.clone(),
                as_ready: self.healthz_as_ready,
            },
            status: self.status_listen,
        }
    }

    fn compile_options(&self) -> CompileOptions {
        CompileOptions {
            ingress_class: self.ingress_class.clone(),
            controller_class: self.controller_class.clone(),
            config_map: self.configmap.clone(),
            default_tls_secret: self.default_tls_secret.clone(),
            // Standalone configs run their backends on loopback (the demo, tests, the lab);
            // in a cluster no Pod has such an address.
            node_local_endpoints: if self.kubernetes && !self.kube.allow_loopback_endpoints {
                NodeLocalEndpoints::Refuse
            } else {
                NodeLocalEndpoints::Allow
            },
            default_backend_service: self.default_backend_service.clone(),
            watch_ingress_without_class: self.watch_ingress_without_class,
            ingress_class_by_name: self.ingress_class_by_name,
            enable_ssl_passthrough: self.enable_ssl_passthrough,
            tcp_services_config_map: self.tcp_services_configmap.clone(),
            udp_services_config_map: self.udp_services_configmap.clone(),
            reserved_ports: self.reserved_ports(),
            disable_svc_external_name: self.disable_svc_external_name,
            disable_catch_all: self.disable_catch_all,
            watch_namespace_selector: self.kube.watch_namespace_selector.clone(),
            gateway_address_pool: self.gateway_address_pool.clone(),
            // Kubernetes mode sets them once its listeners are bound (their ports may be 0).
            gateway_services: None,
        }
    }

    /// The ports Sluice's own listeners take, which no TCP service may name.
    fn reserved_ports(&self) -> std::collections::BTreeMap<u16, String> {
        let listen = self.listen();
        let mut ports = std::collections::BTreeMap::new();
        let mut reserve = |port: u16, what: &str| {
            if port != 0 {
                ports.entry(port).or_insert_with(|| what.to_owned());
            }
        };
        reserve(listen.http.port(), "the HTTP listener (--http-listen)");
        reserve(listen.https.port(), "the HTTPS listener (--https-listen)");
        reserve(listen.admin.port(), "the admin listener (--admin-listen)");
        reserve(
            listen.status.port(),
            "the status listener (--status-listen)",
        );
        if let Some(webhook) = self.kube.validating_webhook.filter(|_| self.kubernetes) {
            reserve(
                webhook.port(),
                "the admission webhook (--validating-webhook)",
            );
        }
        ports
    }

    fn kube_options(&self) -> KubeOptions {
        let kube = &self.kube;
        let status_addresses = match (
            &kube.publish_service,
            kube.publish_status_address.is_empty(),
        ) {
            (Some(service), _) => StatusAddresses::Service(service.clone()),
            (None, false) => StatusAddresses::Fixed(kube.publish_status_address.clone()),
            (None, true) => StatusAddresses::Nodes {
                internal: kube.report_node_internal_ip_address,
            },
        };
        KubeOptions {
            kubeconfig: kube.kubeconfig.clone(),
            watch_namespace: kube.watch_namespace.clone().filter(|ns| !ns.is_empty()),
            status_addresses,
            election_id: kube.election_id.clone(),
            lease_duration: kube.lease_duration,
            elect: !kube.disable_leader_election,
            topology_aware_routing: kube.enable_topology_aware_routing,
            webhook: match (
                kube.validating_webhook,
                &kube.validating_webhook_certificate,
                &kube.validating_webhook_key,
            ) {
                (Some(listen), Some(certificate), Some(key)) => Some(Box::new(WebhookOptions {
                    listen,
                    certificate: certificate.clone(),
                    key: key.clone(),
                    limits: WebhookLimits::default(),
                })),
                _ => None,
            },
        }
    }
}

fn grace_period(text: &str) -> Result<Duration, String> {
    translate::configmap::parse_duration(text)
        .ok_or_else(|| format!("{text:?}: expected a duration like 5, 5s or 500ms"))
}

fn namespaced_name(text: &str) -> Result<NamespacedName, String> {
    NamespacedName::parse(text).ok_or_else(|| format!("expected NAMESPACE/NAME, got {text:?}"))
}

fn address_pool(text: &str) -> Result<translate::gateway::AddressPool, String> {
    text.parse().map_err(|e| format!("{e}"))
}

fn dns_subdomain(text: &str) -> Result<String, String> {
    let valid = !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| dns_label(label).is_ok());
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a valid Kubernetes object name (lower-case letters, digits, '-' and '.')"
        ))
    }
}

/// `IP:PORT`, or Go's `:PORT` for every address (ingress-nginx's `--validating-webhook=:8443`).
/// An IPv6 address may come without brackets (`fd00::7:8443` is `[fd00::7]:8443`: the port is
/// required, so it is what follows the last colon), which `$(POD_IP):8443` gives in an IPv6
/// cluster.
fn webhook_address(text: &str) -> Result<SocketAddr, String> {
    let error = || format!("{text:?}: expected IP:PORT or :PORT");
    if let Some(port) = text.strip_prefix(':') {
        return format!("0.0.0.0:{port}").parse().map_err(|_| error());
    }
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let (ip, port) = text.rsplit_once(':').ok_or_else(error)?;
    let ip: std::net::Ipv6Addr = ip.parse().map_err(|_| error())?;
    let port: u16 = port.parse().map_err(|_| error())?;
    Ok(SocketAddr::from((ip, port)))
}

/// Go's `strconv.ParseBool`, which ingress-nginx's boolean flags use.
/// Histogram bounds as a flag gives them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BucketList(Vec<f64>);

/// `0.1,0.5,1` (Go's Float64Slice): finite numbers, each larger than the one before
/// (Prometheus refuses anything else; ingress-nginx would panic at start).
fn bucket_list(text: &str) -> Result<BucketList, String> {
    let mut bounds = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bound: f64 = part
            .parse()
            .ok()
            .filter(|b: &f64| b.is_finite())
            .ok_or_else(|| format!("{part:?} is not a number (bounds are comma-separated)"))?;
        if bounds.last().is_some_and(|last| bound <= *last) {
            return Err(format!(
                "{part} is not larger than the bound before it: bounds must increase"
            ));
        }
        bounds.push(bound);
    }
    Ok(BucketList(bounds))
}

/// `--health-check-path`: an absolute path other than the admin listener's own.
fn health_check_path(text: &str) -> Result<String, String> {
    if !text.starts_with('/') || text.contains(['?', '#', ' ']) {
        return Err(format!(
            "{text:?} is not a path (it starts with / and has no query)"
        ));
    }
    if ["/ready", "/metrics", "/config"].contains(&text) {
        return Err(format!(
            "{text} is the admin listener's own endpoint; probes of a custom path get what /healthz answers"
        ));
    }
    Ok(text.to_owned())
}

fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{text:?}: expected true or false")),
    }
}

/// A namespace name, or empty for all (ingress-nginx's `--watch-namespace=`).
fn namespace_or_all(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Ok(String::new());
    }
    dns_label(text)
}

fn dns_label(text: &str) -> Result<String, String> {
    if model::target::is_dns_label(text) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a valid Kubernetes name (lower-case letters, digits and '-')"
        ))
    }
}

fn status_address(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() || text.contains(char::is_whitespace) {
        return Err(format!("{text:?} is not an IP address or host name"));
    }
    Ok(text.to_owned())
}

fn lease_duration(text: &str) -> Result<Duration, String> {
    match translate::configmap::parse_duration(text) {
        Some(duration) if duration >= Duration::from_secs(2) => Ok(duration),
        Some(_) => Err("must be at least 2s".into()),
        None => Err(format!("{text:?}: expected a duration like 15s or 1m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[arg(long)]
        kubernetes: bool,
        #[command(flatten)]
        kube: KubeArgs,
    }

    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    /// As `main` does it: ingress-nginx's refused flags first, then clap.
    fn serve(args: &[&str]) -> Result<Options, String> {
        let mut argv = vec!["sluice".into(), "serve".into()];
        argv.extend(args.iter().map(std::ffi::OsString::from));
        let argv = crate::ingress_nginx_flags::check(argv)?;
        Serve::try_parse_from(argv.into_iter().skip(1))
            .map(|s| s.args.options())
            .map_err(|e| e.to_string())
    }

    fn kube_of(options: &Options) -> &KubeOptions {
        match &options.source {
            Source::Kubernetes(kube) => kube,
            Source::Files(path) => panic!("files {path:?}, not Kubernetes"),
        }
    }

    /// The community controller's DaemonSet args in seed 000, with `/nginx-ingress-controller`
    /// replaced by `sluice serve --kubernetes` and `$(POD_NAMESPACE)` expanded as the kubelet
    /// does.
    const SEED_ARGS: &[&str] = &[
        "--kubernetes",
        "--election-id=ingress-controller-leader",
        "--ingress-class=nginx",
        "--configmap=ingress-nginx/ingress-nginx-controller",
        "--validating-webhook=:8443",
        "--validating-webhook-certificate=/usr/local/certificates/cert",
        "--validating-webhook-key=/usr/local/certificates/key",
    ];

    #[test]
    fn a_gateway_address_pool_is_read_or_refused_naming_the_flag() {
        let options = serve(&[
            "--kubernetes",
            "--gateway-address-pool=198.18.0.64/26,10.0.0.1",
        ])
        .unwrap();
        let pool = options.compile.gateway_address_pool.expect("a pool");
        assert_eq!(pool.len(), 65);
        let without = serve(&["--kubernetes"]).unwrap();
        assert!(without.compile.gateway_address_pool.is_none());
        for (bad, why) in [
            ("10.0.0.1,x", "\"x\": not an IP address"),
            ("10.0.0.0/8", "more than 4096 addresses"),
            ("10.0.0.9-10.0.0.1", "the first not above the last"),
        ] {
            let error = serve(&["--kubernetes", "--gateway-address-pool", bad]).unwrap_err();
            assert!(
                error.contains("--gateway-address-pool") && error.contains(why),
                "{error}"
            );
        }
    }

    #[test]
    fn klog_verbosity_is_taken_as_ingress_nginx_writes_it() {
        let argv = crate::ingress_nginx_flags::check(
            ["sluice", "serve", "--kubernetes", "--v=3"]
                .map(std::ffi::OsString::from)
                .to_vec(),
        )
        .expect("--v is not refused");
        let parsed = Serve::try_parse_from(argv.into_iter().skip(1)).unwrap();
        assert_eq!(parsed.args.verbosity, Some(3));
        let parsed = Serve::try_parse_from(["serve", "--kubernetes", "--v", "5"]).unwrap();
        assert_eq!(parsed.args.verbosity, Some(5));
        assert!(Serve::try_parse_from(["serve", "--kubernetes", "--v=loud"]).is_err());
    }

    #[test]
    fn the_seeds_ingress_nginx_args_start_sluice_and_mean_what_they_meant() {
        let options = serve(SEED_ARGS).unwrap();
        assert_eq!(kube_of(&options).election_id, "ingress-controller-leader");
        assert_eq!(options.compile.ingress_class, "nginx");
        assert_eq!(
            options.compile.config_map,
            NamespacedName::new("ingress-nginx", "ingress-nginx-controller")
        );
        assert_eq!(options.listen.http, "0.0.0.0:80".parse().unwrap());
        assert_eq!(options.listen.https, "0.0.0.0:443".parse().unwrap());
        // Where the seed's readinessProbe (and ingress-nginx's Prometheus scrape) looks.
        assert_eq!(options.listen.admin, "0.0.0.0:10254".parse().unwrap());
        // `sluice serve` as written keeps /healthz for liveness; the chart's entry
        // (`/nginx-ingress-controller`, rewritten with --healthz-as-ready) makes it readiness.
        assert!(!options.listen.health.as_ready);
        // Kubernetes mode waits 5 s after SIGTERM unless told (ingress-nginx: 0); files mode not.
        assert_eq!(options.shutdown_grace_period, Duration::from_secs(5));
        let told = serve(&[SEED_ARGS, &["--shutdown-grace-period=0"]].concat()).unwrap();
        assert_eq!(told.shutdown_grace_period, Duration::ZERO);
        let files = serve(&["--config", "/etc/sluice"]).unwrap();
        assert_eq!(files.shutdown_grace_period, Duration::ZERO);
        let entry = crate::ingress_nginx_entry::rewrite(
            [&["sluice", "/nginx-ingress-controller"], &SEED_ARGS[1..]]
                .concat()
                .iter()
                .map(std::ffi::OsString::from)
                .collect(),
        );
        let parsed = Serve::try_parse_from(entry.into_iter().skip(1)).unwrap();
        assert!(parsed.args.healthz_as_ready && parsed.args.kubernetes);
        assert_eq!(kube_of(&options).watch_namespace, None);
        // No --publish-service: ingress-nginx publishes its pods' nodes' addresses, so does Sluice.
        assert_eq!(
            kube_of(&options).status_addresses,
            StatusAddresses::Nodes { internal: false }
        );
        let webhook = kube_of(&options)
            .webhook
            .clone()
            .expect("the webhook is on");
        assert_eq!(webhook.listen, "0.0.0.0:8443".parse().unwrap());
        assert_eq!(
            webhook.certificate,
            PathBuf::from("/usr/local/certificates/cert")
        );
        assert_eq!(webhook.key, PathBuf::from("/usr/local/certificates/key"));
        // The manifests' `$(POD_IP):8443`, expanded by the kubelet, in either family.
        for (arg, listen) in [
            ("10.1.2.3:8443", "10.1.2.3:8443"),
            ("fd00::7:8443", "[fd00::7]:8443"),
            ("[fd00::7]:8443", "[fd00::7]:8443"),
        ] {
            assert_eq!(webhook_address(arg), Ok(listen.parse().unwrap()), "{arg}");
        }
        for bad in ["8443", "web:8443", "10.1.2.3", "fd00::7", ":http"] {
            assert!(webhook_address(bad).is_err(), "{bad}");
        }
        // All three or none.
        let error = serve(&["--kubernetes", "--validating-webhook=:8443"]).unwrap_err();
        assert!(
            error.contains("--validating-webhook-certificate"),
            "{error}"
        );
    }

    #[test]
    fn ingress_nginx_flag_names_set_what_sluice_has() {
        let options = serve(&[
            "--kubernetes",
            "--http-port=8080",
            "--https-port",
            "8443",
            "--healthz-port=10255",
            "--default-ssl-certificate=ingress-nginx/default-cert",
            "--default-backend-service=ingress-nginx/fallback",
            "--watch-ingress-without-class",
            "--ingress-class-by-name=true",
            "--controller-class=k8s.io/ingress-nginx",
            "--publish-service=ingress-nginx/ingress-nginx-controller",
            "--watch-namespace=web",
            "--election-ttl=30s",
            "--enable-metrics=true",
            "--update-status=true",
        ])
        .unwrap();
        assert_eq!(options.listen.http, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(options.listen.https, "0.0.0.0:8443".parse().unwrap());
        assert_eq!(options.listen.admin, "0.0.0.0:10255".parse().unwrap());
        let compile = &options.compile;
        assert_eq!(
            compile.default_tls_secret,
            Some(NamespacedName::new("ingress-nginx", "default-cert"))
        );
        assert_eq!(
            compile.default_backend_service,
            Some(NamespacedName::new("ingress-nginx", "fallback"))
        );
        assert!(compile.watch_ingress_without_class && compile.ingress_class_by_name);
        assert_eq!(compile.controller_class, "k8s.io/ingress-nginx");
        let kube = kube_of(&options);
        assert_eq!(
            kube.status_addresses,
            StatusAddresses::Service(NamespacedName::new(
                "ingress-nginx",
                "ingress-nginx-controller"
            ))
        );
        assert_eq!(kube.watch_namespace.as_deref(), Some("web"));
        assert_eq!(kube.lease_duration, Duration::from_secs(30));

        // Go's boolean forms, and ingress-nginx's "all namespaces".
        let options = serve(&[
            "--kubernetes",
            "--watch-ingress-without-class=false",
            "--watch-namespace=",
            "--healthz-host=127.0.0.1",
        ])
        .unwrap();
        assert!(!options.compile.watch_ingress_without_class);
        assert!(
            !options.compile.disable_svc_external_name,
            "followed by default"
        );
        assert_eq!(kube_of(&options).watch_namespace, None);
        // ExternalName Services: refused on request; where their names are asked.
        let external = serve(&[
            "--kubernetes",
            "--disable-svc-external-name",
            "--resolver=10.96.0.10,[fd00::a]:5353",
        ])
        .unwrap();
        assert!(external.compile.disable_svc_external_name);
        assert_eq!(
            external.resolver.nameservers,
            [
                "10.96.0.10:53".parse().unwrap(),
                "[fd00::a]:5353".parse().unwrap()
            ]
        );
        assert_eq!(options.listen.admin, "127.0.0.1:10254".parse().unwrap());
        // Outside Kubernetes mode the admin address stays on loopback unless told otherwise.
        let options = serve(&["--config", "."]).unwrap();
        assert_eq!(options.listen.admin, "127.0.0.1:9113".parse().unwrap());
    }

    #[test]
    fn both_names_for_one_listener_are_refused() {
        for args in [
            &[
                "--config",
                ".",
                "--http-port=80",
                "--http-listen=0.0.0.0:8080",
            ][..],
            &[
                "--config",
                ".",
                "--healthz-port=1",
                "--admin-listen=127.0.0.1:2",
            ],
            &["--config", ".", "--watch-ingress-without-class", "yes"],
        ] {
            assert!(serve(args).is_err(), "{args:?}");
        }
        let error = serve(&["--kubernetes", "--ssl-passthrough-proxy-port=442"]).unwrap_err();
        assert!(
            error.contains("ingress-nginx flag --ssl-passthrough-proxy-port"),
            "{error}"
        );
        // A flag nobody has stays clap's error.
        let error = serve(&["--kubernetes", "--no-such-flag"]).unwrap_err();
        assert!(error.contains("unexpected argument"), "{error}");
    }

    #[test]
    fn defaults_match_the_command_line() {
        let parsed = Cli::parse_from(["sluice", "--kubernetes"]).kube;
        let default = KubeArgs::default();
        assert_eq!(parsed.election_id, default.election_id);
        assert_eq!(parsed.lease_duration, default.lease_duration);
    }

    #[test]
    fn names_and_durations_are_checked_at_start() {
        assert!(dns_subdomain("sluice-leader").is_ok());
        assert!(dns_subdomain("sluice.leader").is_ok());
        for bad in ["", "Sluice", "-x", "x-", "a b", "a_b"] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
        assert_eq!(lease_duration("4s"), Ok(Duration::from_secs(4)));
        assert!(lease_duration("1s").is_err());
        assert!(lease_duration("soon").is_err());
        assert!(status_address("198.18.0.1").is_ok());
        assert!(status_address(" ").is_err());
    }

    #[test]
    fn kubernetes_flags_need_kubernetes_mode() {
        let error = Cli::try_parse_from(["sluice", "--watch-namespace", "web"])
            .err()
            .expect("--watch-namespace without --kubernetes must be refused");
        assert!(error.to_string().contains("--kubernetes"), "{error}");
        let error = Cli::try_parse_from(["sluice", "--allow-loopback-endpoints"])
            .err()
            .expect("--allow-loopback-endpoints without --kubernetes must be refused");
        assert!(error.to_string().contains("--kubernetes"), "{error}");
        assert!(
            Cli::parse_from(["sluice", "--kubernetes", "--allow-loopback-endpoints"])
                .kube
                .allow_loopback_endpoints
        );
        let both = Cli::try_parse_from([
            "sluice",
            "--kubernetes",
            "--publish-service",
            "a/b",
            "--publish-status-address",
            "198.18.0.1",
        ]);
        assert!(both.is_err(), "the two status sources are exclusive");
    }

    #[test]
    fn tcp_and_udp_services_config_maps_are_taken_and_sluices_own_ports_reserved() {
        let mut args = SEED_ARGS.to_vec();
        args.extend([
            "--tcp-services-configmap=ingress-nginx/tcp-services",
            "--udp-services-configmap",
            "ingress-nginx/udp-services",
            "--status-listen=127.0.0.1:10246",
        ]);
        let options = serve(&args).unwrap();
        let compile = &options.compile;
        assert_eq!(
            compile.tcp_services_config_map,
            Some(NamespacedName::new("ingress-nginx", "tcp-services"))
        );
        assert_eq!(
            compile.udp_services_config_map,
            Some(NamespacedName::new("ingress-nginx", "udp-services"))
        );
        // HTTP, HTTPS, admin, status and the webhook: a TCP service naming one is refused.
        let reserved: Vec<u16> = compile.reserved_ports.keys().copied().collect();
        assert_eq!(reserved, [80, 443, 8443, 10246, 10254]);
        assert!(compile.reserved_ports[&8443].contains("--validating-webhook"));
        assert!(serve(&["--kubernetes", "--tcp-services-configmap", "no-namespace"]).is_err());
    }

    #[test]
    fn the_charts_probe_and_status_flags_are_taken() {
        let mut args = SEED_ARGS.to_vec();
        args.extend([
            "--health-check-path=/probe",
            "--report-node-internal-ip-address=true",
            "--disable-leader-election",
        ]);
        let options = serve(&args).unwrap();
        assert_eq!(options.listen.health.extra_path.as_deref(), Some("/probe"));
        let kube = kube_of(&options);
        assert_eq!(
            kube.status_addresses,
            StatusAddresses::Nodes { internal: true }
        );
        assert!(!kube.elect);
        for bad in ["probe", "/ready", "/x?y"] {
            let error = serve(&["--health-check-path", bad]).unwrap_err();
            assert!(error.contains("--health-check-path"), "{error}");
        }
    }
}
