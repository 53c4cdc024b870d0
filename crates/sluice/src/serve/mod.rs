//! `sluice serve`: the control plane of one process, wired to the proxy's data plane.
//!
//! ```text
//!  --config:     FileWatch ──▶ debounce ──▶ FileSource::reload ──▶ Store::replace_all ─┐
//!  --kubernetes: Watchers ──Update (apply, delete, relist)──▶ Store::apply/remove ──────┤
//!                                                                                 ChangeSet
//!        config changed ──▶ compile(&Store) ──▶ Proxy::publish (atomic swap) ◀────────┤
//!        endpoints only ──▶ Compiled::refresh_endpoints ──▶ Proxy::endpoints_changed ◀┘
//! ```
//! All of this runs on one current-thread runtime; workers never wait for it.
//!
//! ```text
//!  start ─▶ soft RLIMIT_NOFILE raised to the hard limit (logged) ─▶ Proxy::start
//!  SIGTERM ─▶ Proxy::terminating (/ready 503; still serving, still applying changes)
//!          ─ --shutdown-grace-period, or a second signal ─▶ Proxy::shutdown (drain)
//! ```

mod kubernetes;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use model::{
    compile, ChangeSet, CompileOptions, Compiled, Diagnostic, NamespacedName, NodeLocalEndpoints,
    Store,
};
use providers::{FileSource, FileWatch};
use proxy::{Proxy, ProxyConfig};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// ingress-nginx's internal status port, also loopback-only there.
pub(crate) const DEFAULT_STATUS_LISTEN: &str = "127.0.0.1:10246";

/// Coalesces the burst of events one save produces (write, chmod, rename) into one reload.
const DEBOUNCE: Duration = Duration::from_millis(20);

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
    pub(crate) kube: kubernetes::KubeArgs,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:80")]
    pub(crate) http_listen: SocketAddr,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:443")]
    pub(crate) https_listen: SocketAddr,
    /// Serves /healthz, /ready and /metrics: the port to expose to probes and Prometheus.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9113")]
    pub(crate) admin_listen: SocketAddr,
    /// Serves /config, which shows every tenant's hosts, paths, endpoints and Secret names:
    /// loopback addresses only (anything else is refused at start-up).
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
    /// TLS Secret served to clients without (matching) SNI; else a self-signed certificate.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name)]
    pub(crate) default_tls_secret: Option<NamespacedName>,
    /// ConfigMap holding controller settings.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name, default_value = "sluice/sluice")]
    pub(crate) configmap: NamespacedName,
    /// After SIGTERM, how long /ready answers 503 while the listeners keep accepting and
    /// serving (load balancers and kube-proxy need a few seconds to stop sending), before
    /// they close and requests in flight drain within worker-shutdown-timeout. A second
    /// signal ends it early. ingress-nginx's flag; a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = grace_period)]
    pub(crate) shutdown_grace_period: Duration,
}

fn grace_period(text: &str) -> Result<Duration, String> {
    model::settings::parse_duration(text)
        .ok_or_else(|| format!("{text:?}: expected a duration like 5, 5s or 500ms"))
}

fn namespaced_name(text: &str) -> Result<NamespacedName, String> {
    NamespacedName::parse(text).ok_or_else(|| format!("expected NAMESPACE/NAME, got {text:?}"))
}

/// Runs until SIGTERM or SIGINT, then drains and returns.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    raise_open_files_limit();
    match &args.config {
        Some(config) => run_files(config.clone(), args),
        None => kubernetes::run(args),
    }
}

impl ServeArgs {
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
        }
    }

    /// `--workers`, else the ConfigMap's worker-processes, else one per CPU.
    fn workers(&self, worker_processes: Option<u32>) -> NonZeroUsize {
        let cpus = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
        self.workers
            .or_else(|| worker_processes.and_then(|n| NonZeroUsize::new(n as usize)))
            .unwrap_or(cpus)
    }

    fn proxy_config(&self, workers: NonZeroUsize) -> ProxyConfig {
        ProxyConfig {
            http_listen: self.http_listen,
            https_listen: self.https_listen,
            admin_listen: self.admin_listen,
            status_listen: self.status_listen,
            workers,
        }
    }
}

/// A container runtime may start us with a soft limit of 1024 descriptors; every client and
/// upstream connection takes one.
fn raise_open_files_limit() {
    match proxy::raise_open_files_limit() {
        Ok(limit) if limit.now > limit.before => tracing::info!(
            before = limit.before,
            now = limit.now,
            hard = limit.hard,
            "raised the open-files limit (RLIMIT_NOFILE) from {} to the hard limit {}",
            limit.before,
            limit.hard
        ),
        Ok(limit) => tracing::info!(
            soft = limit.now,
            hard = limit.hard,
            "the open-files limit (RLIMIT_NOFILE) is already at the hard limit"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-files limit (RLIMIT_NOFILE)"),
    }
}

/// SIGTERM and SIGINT, for both providers' loops: the first signal starts the grace period,
/// its end (or a second signal) ends the loop.
pub(crate) struct Termination {
    grace: Duration,
    ends: Option<tokio::time::Instant>,
    terminate: Signal,
}

/// What the serving loop does next.
pub(crate) enum Step {
    /// Mark the proxy as terminating (/ready 503) and keep serving.
    Grace,
    /// Leave the loop and drain.
    Stop,
}

impl Termination {
    pub(crate) fn new(grace: Duration) -> anyhow::Result<Termination> {
        Ok(Termination {
            grace,
            ends: None,
            terminate: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }

    /// Waits for the next step; cancel-safe, so it can be one branch of a `select!`.
    pub(crate) async fn next(&mut self) -> Step {
        let ends = self.ends;
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            () = tokio::time::sleep_until(ends.unwrap_or_else(tokio::time::Instant::now)),
                if ends.is_some() => return Step::Stop,
        }
        if self.ends.is_some() || self.grace.is_zero() {
            return Step::Stop;
        }
        self.ends = Some(tokio::time::Instant::now() + self.grace);
        tracing::info!(
            grace = ?self.grace,
            "shutting down: /ready answers 503; still serving for --shutdown-grace-period"
        );
        Step::Grace
    }
}

/// The stable line on stdout for scripts and tests that start Sluice on port 0.
fn announce(proxy: &Proxy) {
    println!(
        "sluice serve: listening http={} https={} admin={} status={}",
        proxy.http_addr(),
        proxy.https_addr(),
        proxy.admin_addr(),
        proxy.status_addr()
    );
}

fn run_files(config: PathBuf, args: ServeArgs) -> anyhow::Result<()> {
    let options = args.compile_options();
    let mut source = FileSource::open(&config)?;
    // Watch before anything else reads the files, so no edit can fall in between.
    let watch = FileWatch::start(source.root())?;
    let mut store = Store::default();
    store.replace_all(source.objects());
    let compiled = Arc::new(compile(&store, &options));

    let workers = args.workers(compiled.settings.worker_processes);
    let proxy = Proxy::start(args.proxy_config(workers))?;

    let mut control = ControlPlane::new(proxy, options, compiled.settings.worker_processes);
    control.store = store;
    control.report_source_errors(source.errors());
    control.publish(compiled);
    tracing::info!(
        http = %control.proxy.http_addr(),
        https = %control.proxy.https_addr(),
        admin = %control.proxy.admin_addr(),
        status = %control.proxy.status_addr(),
        workers,
        objects = control.store.len(),
        config = %config.display(),
        "serving"
    );
    announce(&control.proxy);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut termination = Termination::new(args.shutdown_grace_period)?;
        loop {
            tokio::select! {
                _ = watch.changed() => {
                    tokio::time::sleep(DEBOUNCE).await;
                    if source.reload() {
                        control.report_source_errors(source.errors());
                        let changes = control.store.replace_all(source.objects());
                        control.act(changes);
                    }
                }
                step = termination.next() => match step {
                    Step::Grace => control.proxy.terminating(),
                    Step::Stop => break,
                },
            }
        }
        anyhow::Ok(())
    })?;
    tracing::info!("shutting down: no new connections; finishing requests in flight");
    control.proxy.shutdown();
    tracing::info!("stopped");
    Ok(())
}

struct ControlPlane {
    proxy: Proxy,
    options: CompileOptions,
    store: Store,
    source_errors: Vec<String>,
    /// Diagnostics already logged, so a reload only logs what is new.
    diagnostics: BTreeSet<String>,
    /// Endpoint addresses refused by the node-local policy, as last reported (see
    /// `Compiled::refused_endpoint_diagnostics`).
    refused_endpoints: Vec<Diagnostic>,
    worker_processes: Option<u32>,
}

impl ControlPlane {
    fn new(proxy: Proxy, options: CompileOptions, worker_processes: Option<u32>) -> ControlPlane {
        ControlPlane {
            proxy,
            options,
            store: Store::default(),
            source_errors: Vec::new(),
            diagnostics: BTreeSet::new(),
            refused_endpoints: Vec::new(),
            worker_processes,
        }
    }

    /// Acts on what changed in the Store: recompile on configuration changes, otherwise take
    /// the endpoint fast path. Returns the configuration when what the status writer reports
    /// may have changed: it recompiled, or the fast path changed which endpoints are refused.
    fn act(&mut self, changes: ChangeSet) -> Option<Arc<Compiled>> {
        if changes.config {
            let started = Instant::now();
            let compiled = Arc::new(compile(&self.store, &self.options));
            tracing::info!(
                elapsed_us = started.elapsed().as_micros() as u64,
                ingresses = compiled.ingresses.len(),
                "configuration compiled"
            );
            self.publish(compiled.clone());
            return Some(compiled);
        } else if !changes.endpoints.is_empty() {
            let current = self.proxy.current()?;
            let started = Instant::now();
            let changed = current.refresh_endpoints(&self.store, &changes.endpoints);
            let backends = changed.len();
            // Walking the routes for refused addresses is O(routes): only when some are involved.
            let refusals_involved = !self.refused_endpoints.is_empty()
                || changed
                    .iter()
                    .any(|b| b.with_endpoints(|set| !set.refused.is_empty()));
            if backends > 0 {
                self.proxy.endpoints_changed(changed);
            }
            tracing::info!(
                backends,
                elapsed_us = started.elapsed().as_micros() as u64,
                "endpoints updated"
            );
            if refusals_involved && self.report_refused_endpoints(&current) {
                return Some(current);
            }
        }
        None
    }

    /// Logs each newly refused endpoint address once; true when the set changed.
    fn report_refused_endpoints(&mut self, compiled: &Compiled) -> bool {
        let current = compiled.refused_endpoint_diagnostics();
        if current == self.refused_endpoints {
            return false;
        }
        for new in current
            .iter()
            .filter(|d| !self.refused_endpoints.contains(d))
        {
            tracing::warn!("{new}");
        }
        self.refused_endpoints = current;
        true
    }

    /// Everything the status writer turns into Events: the compile's diagnostics and the
    /// refused endpoint addresses.
    fn diagnostics_to_report(&self, compiled: &Compiled) -> Vec<Diagnostic> {
        let mut all = compiled.diagnostics.clone();
        all.extend(self.refused_endpoints.iter().cloned());
        all
    }

    fn publish(&mut self, compiled: Arc<Compiled>) {
        let current: BTreeSet<String> = compiled
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect();
        for new in current.difference(&self.diagnostics) {
            tracing::warn!("{new}");
        }
        if compiled.settings.worker_processes != self.worker_processes {
            tracing::warn!(
                "worker-processes changed in the ConfigMap; it applies at the next start"
            );
            self.worker_processes = compiled.settings.worker_processes;
        }
        self.diagnostics = current;
        self.report_refused_endpoints(&compiled);
        self.proxy.publish(compiled);
    }

    fn report_source_errors(&mut self, errors: Vec<String>) {
        for error in &errors {
            if !self.source_errors.contains(error) {
                tracing::warn!("{error}");
            }
        }
        self.source_errors = errors.clone();
        self.proxy.set_source_errors(errors);
    }
}
