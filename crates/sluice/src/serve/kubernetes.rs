//! `sluice serve --kubernetes`: the control plane fed by kube-rs watchers.
//!
//! ```text
//!  Watchers ──Update──▶ Store ──ChangeSet──▶ (after every kind's first list) ControlPlane::act
//!                                                   │ recompiled
//!                                                   ▼
//!                                   StatusWriter::publish(served, diagnostics)
//! ```
//! The proxy starts at once (so /healthz answers) but nothing is published, and /ready stays
//! 503, until every watched kind has been listed. When the API server goes away the watchers
//! retry with backoff and the last good configuration keeps serving.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use model::{compile, ChangeSet, NamespacedName, Object, Store};
use providers::kubernetes::{
    connect, Published, StatusAddresses, StatusOptions, StatusWriter, Update, WatchScope, Watchers,
};
use proxy::Proxy;

use super::{announce, namespaced_name, ControlPlane, ServeArgs};

/// How long start-up waits for the ConfigMap (for worker-processes) before using the default.
const CONFIG_MAP_WAIT: Duration = Duration::from_secs(5);
const DEFAULT_ELECTION_ID: &str = "sluice-leader";
const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

#[derive(clap::Args, Clone, Debug)]
#[command(next_help_heading = "Kubernetes mode (--kubernetes)")]
pub(crate) struct KubeArgs {
    /// kubeconfig to use (default: in-cluster service account, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "PATH", requires = "kubernetes")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Watch Ingresses, Services, EndpointSlices and Secrets in this namespace only (default: all).
    #[arg(long, value_name = "NS", requires = "kubernetes", value_parser = dns_label)]
    pub(crate) watch_namespace: Option<String>,
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
    /// Name of the Lease (in $POD_NAMESPACE, else the --configmap namespace) that elects the one
    /// replica writing status and Events.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_ELECTION_ID, value_parser = dns_subdomain)]
    pub(crate) election_id: String,
    /// How long a leader's Lease lasts without renewal; it renews every quarter of this.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = lease_duration)]
    // (the literal must equal DEFAULT_LEASE_DURATION; a unit test checks)
    pub(crate) lease_duration: Duration,
    /// Let EndpointSlice addresses that point at the node itself (loopback 127.0.0.0/8 and ::1,
    /// link-local 169.254.0.0/16 and fe80::/10, unspecified 0.0.0.0 and ::) take traffic. By
    /// default they are left out, with a warning, an Event on the Ingress, /config and a metric.
    #[arg(long, requires = "kubernetes")]
    pub(crate) allow_loopback_endpoints: bool,
}

impl Default for KubeArgs {
    fn default() -> KubeArgs {
        KubeArgs {
            kubeconfig: None,
            watch_namespace: None,
            publish_service: None,
            publish_status_address: Vec::new(),
            election_id: DEFAULT_ELECTION_ID.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            allow_loopback_endpoints: false,
        }
    }
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

fn dns_label(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let valid = !text.is_empty()
        && text.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-';
    if valid {
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
    match model::settings::parse_duration(text) {
        Some(duration) if duration >= Duration::from_secs(2) => Ok(duration),
        Some(_) => Err("must be at least 2s".into()),
        None => Err(format!("{text:?}: expected a duration like 15s or 1m")),
    }
}

/// This replica's name: the pod name when running in Kubernetes, else host and process.
fn identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME").ok().filter(|p| !p.is_empty()) {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "sluice".into());
    format!("{host}-{}", std::process::id())
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_async(args))
}

async fn run_async(args: ServeArgs) -> anyhow::Result<()> {
    let kube = &args.kube;
    let client = connect(kube.kubeconfig.as_deref()).await?;
    let options = args.compile_options();

    let worker_processes = initial_worker_processes(&client, &args).await;
    let workers = args.workers(worker_processes);
    let proxy = Proxy::start(args.proxy_config(workers))?;
    tracing::info!(
        http = %proxy.http_addr(),
        https = %proxy.https_addr(),
        admin = %proxy.admin_addr(),
        status = %proxy.status_addr(),
        workers,
        namespace = kube.watch_namespace.as_deref().unwrap_or("(all)"),
        "serving; waiting for the initial sync with the Kubernetes API before publishing"
    );
    announce(&proxy);

    let mut control = ControlPlane::new(proxy, options, worker_processes);
    let mut watchers = Watchers::start(
        &client,
        &WatchScope {
            namespace: kube.watch_namespace.clone(),
            config_map: args.configmap.clone(),
            default_tls_secret: args.default_tls_secret.clone(),
        },
    );
    let lease_namespace = std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| args.configmap.namespace.clone());
    let addresses = match (
        &kube.publish_service,
        kube.publish_status_address.is_empty(),
    ) {
        (Some(service), _) => StatusAddresses::Service(service.clone()),
        (None, false) => StatusAddresses::Fixed(kube.publish_status_address.clone()),
        (None, true) => StatusAddresses::None,
    };
    let status = StatusWriter::start(
        client.clone(),
        StatusOptions {
            identity: identity(),
            lease: NamespacedName::new(lease_namespace, kube.election_id.clone()),
            lease_duration: kube.lease_duration,
            addresses,
            controller: args.controller_class.clone(),
        },
        watchers.ingress_states(),
    );

    let started = Instant::now();
    let mut pending = ChangeSet::default();
    let mut synced = false;
    // Changes keep being applied during the grace period: backends roll too.
    let mut termination = super::Termination::new(args.shutdown_grace_period)?;
    loop {
        let update = tokio::select! {
            update = watchers.next() => update,
            step = termination.next() => match step {
                super::Step::Grace => {
                    control.proxy.terminating();
                    continue;
                }
                super::Step::Stop => break,
            },
        };
        let Some(update) = update else { break };
        pending.merge(apply(&mut control.store, update));
        // Take everything already waiting before acting, so a burst costs one compile.
        while let Some(update) = watchers.try_next() {
            pending.merge(apply(&mut control.store, update));
        }
        if !synced {
            if !watchers.synced() {
                continue;
            }
            synced = true;
            pending.config = true;
            tracing::info!(
                objects = control.store.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "initial sync with the Kubernetes API complete"
            );
        }
        if let Some(compiled) = control.act(std::mem::take(&mut pending)) {
            status.publish(Published {
                served: compiled.ingresses.iter().cloned().collect(),
                diagnostics: control.diagnostics_to_report(&compiled),
            });
        }
    }
    tracing::info!("shutting down: releasing leadership, finishing requests in flight");
    status.stop().await;
    drop(watchers);
    let proxy = control.proxy;
    // The drain blocks until connections finish; keep it off the runtime's thread.
    tokio::task::spawn_blocking(move || proxy.shutdown())
        .await
        .context("draining")?;
    tracing::info!("stopped");
    Ok(())
}

fn apply(store: &mut Store, update: Update) -> ChangeSet {
    match update {
        Update::Apply(object) => store.apply(object),
        Update::Delete(object_ref) => store.remove(&object_ref),
        Update::Relisted { objects, gone, .. } => {
            let mut changes = ChangeSet::default();
            for object_ref in &gone {
                changes.merge(store.remove(object_ref));
            }
            for object in objects {
                changes.merge(store.apply(object));
            }
            changes
        }
    }
}

/// worker-processes is read once at start (threads are not resized live): from the ConfigMap
/// if the API answers quickly, else the default.
async fn initial_worker_processes(client: &kube::Client, args: &ServeArgs) -> Option<u32> {
    if args.workers.is_some() {
        return None;
    }
    let key = &args.configmap;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), &key.namespace);
    match tokio::time::timeout(CONFIG_MAP_WAIT, api.get_opt(&key.name)).await {
        Ok(Ok(Some(config_map))) => {
            let mut store = Store::default();
            store.apply(Object::ConfigMap(config_map));
            compile(&store, &args.compile_options())
                .settings
                .worker_processes
        }
        Ok(Ok(None)) => None,
        Ok(Err(error)) => {
            tracing::warn!("reading ConfigMap {key} for worker-processes failed: {error}");
            None
        }
        Err(_) => {
            tracing::warn!(
                "the Kubernetes API did not answer within {CONFIG_MAP_WAIT:?}; starting with \
                 the default number of workers"
            );
            None
        }
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
}
