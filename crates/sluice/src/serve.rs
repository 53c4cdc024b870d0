//! `sluice serve`: the control plane of one process, wired to the proxy's data plane.
//!
//! ```text
//!  FileWatch ──changed──▶ debounce ──▶ FileSource::reload ──▶ Store::replace_all ──▶ ChangeSet
//!                                                                                     │
//!        config changed ──▶ compile(&Store) ──▶ Proxy::publish (atomic swap) ◀────────┤
//!        endpoints only ──▶ Compiled::refresh_endpoints ──▶ Proxy::endpoints_changed ◀┘
//! ```
//! All of this runs on one current-thread runtime; workers never wait for it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use model::{compile, CompileOptions, Compiled, NamespacedName, Store};
use providers::{FileSource, FileWatch};
use proxy::{Proxy, ProxyConfig};

/// Coalesces the burst of events one save produces (write, chmod, rename) into one reload.
const DEBOUNCE: Duration = Duration::from_millis(20);

#[derive(clap::Args, Clone, Debug)]
pub(crate) struct ServeArgs {
    /// A YAML (or JSON) file, or a folder of them, holding Kubernetes objects: Ingress,
    /// IngressClass, Service, EndpointSlice, Secret (kubernetes.io/tls), ConfigMap. Watched.
    #[arg(long, value_name = "PATH")]
    pub(crate) config: PathBuf,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:80")]
    pub(crate) http_listen: SocketAddr,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:443")]
    pub(crate) https_listen: SocketAddr,
    /// Serves /healthz, /ready, /metrics and /config.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9113")]
    pub(crate) admin_listen: SocketAddr,
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
}

fn namespaced_name(text: &str) -> Result<NamespacedName, String> {
    NamespacedName::parse(text).ok_or_else(|| format!("expected NAMESPACE/NAME, got {text:?}"))
}

/// Runs until SIGTERM or SIGINT, then drains and returns.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = CompileOptions {
        ingress_class: args.ingress_class.clone(),
        controller_class: args.controller_class.clone(),
        config_map: args.configmap.clone(),
        default_tls_secret: args.default_tls_secret.clone(),
    };
    let mut source = FileSource::open(&args.config)?;
    // Watch before anything else reads the files, so no edit can fall in between.
    let watch = FileWatch::start(source.root())?;
    let mut store = Store::default();
    store.replace_all(source.objects());
    let compiled = Arc::new(compile(&store, &options));

    let cpus = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let workers = args
        .workers
        .or_else(|| {
            compiled
                .settings
                .worker_processes
                .and_then(|n| NonZeroUsize::new(n as usize))
        })
        .unwrap_or(cpus);
    let proxy = Proxy::start(ProxyConfig {
        http_listen: args.http_listen,
        https_listen: args.https_listen,
        admin_listen: args.admin_listen,
        workers,
    })?;

    let mut control = ControlPlane {
        proxy,
        options,
        store,
        source_errors: Vec::new(),
        diagnostics: BTreeSet::new(),
        worker_processes: compiled.settings.worker_processes,
    };
    control.report_source_errors(source.errors());
    control.publish(compiled);
    tracing::info!(
        http = %control.proxy.http_addr(),
        https = %control.proxy.https_addr(),
        admin = %control.proxy.admin_addr(),
        workers,
        objects = control.store.len(),
        config = %args.config.display(),
        "serving"
    );
    // A stable line on stdout for scripts and tests that start Sluice on port 0.
    println!(
        "sluice serve: listening http={} https={} admin={}",
        control.proxy.http_addr(),
        control.proxy.https_addr(),
        control.proxy.admin_addr()
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .context("installing the SIGTERM handler")?;
        loop {
            tokio::select! {
                _ = watch.changed() => {
                    tokio::time::sleep(DEBOUNCE).await;
                    if source.reload() {
                        control.report_source_errors(source.errors());
                        control.apply(source.objects());
                    }
                }
                _ = terminate.recv() => break,
                _ = tokio::signal::ctrl_c() => break,
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
    worker_processes: Option<u32>,
}

impl ControlPlane {
    /// Applies a provider's full view: recompile on configuration changes, otherwise take the
    /// endpoint fast path.
    fn apply(&mut self, objects: Vec<model::Object>) {
        let changes = self.store.replace_all(objects);
        if changes.config {
            let started = Instant::now();
            let compiled = Arc::new(compile(&self.store, &self.options));
            tracing::info!(
                elapsed_us = started.elapsed().as_micros() as u64,
                ingresses = compiled.ingresses.len(),
                "configuration compiled"
            );
            self.publish(compiled);
        } else if !changes.endpoints.is_empty() {
            let Some(current) = self.proxy.current() else {
                return;
            };
            let started = Instant::now();
            let changed = current.refresh_endpoints(&self.store, &changes.endpoints);
            if changed > 0 {
                self.proxy.endpoints_changed();
            }
            tracing::info!(
                backends = changed,
                elapsed_us = started.elapsed().as_micros() as u64,
                "endpoints updated"
            );
        }
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
