//! `Source::Kubernetes`: the control plane fed by kube-rs watchers.
//!
//! ```text
//!  Watchers ──Update──▶ Store ──ChangeSet──▶ (after every kind's first list) ControlPlane::act
//!                                                   │ recompiled
//!                                                   ▼
//!                                   StatusWriter::publish(served, diagnostics)
//!  configuration changed ──▶ Webhook::publish(&Store) (reviews run on the webhook's thread)
//! ```
//! The proxy starts at once (so /healthz answers) but nothing is published, and /ready stays
//! 503, until every watched kind has been listed. When the API server goes away the watchers
//! retry with backoff and the last good configuration keeps serving.

use std::time::{Duration, Instant};

use model::{NamespacedName, Settings};
use providers::kubernetes::{
    connect, Published, StatusOptions, StatusWriter, Update, WatchScope, Watchers,
};
use proxy::Proxy;
use translate::gateway::ListenPorts;
use translate::{compile, ChangeSet, CompileOptions, Object, Store};

use crate::control::ControlPlane;
use crate::error::Error;
use crate::limits;
use crate::options::{KubeOptions, Options};
use crate::signals::{Step, Termination};
use crate::start::{announce, runtime};
use crate::webhook::Webhook;

/// How long start-up waits for the ConfigMap (worker-processes, max-worker-open-files) before
/// using the defaults.
const CONFIG_MAP_WAIT: Duration = Duration::from_secs(5);

pub(crate) fn run(kube: KubeOptions, options: &Options) -> Result<(), Error> {
    runtime()?.block_on(run_async(kube, options))
}

/// `--enable-topology-aware-routing`: the `topology.kubernetes.io/zone` label of the node
/// `$NODE_NAME` names (the downward API's `spec.nodeName`), read once at start as
/// ingress-nginx reads it. `None`, with a warning saying why: every zone's endpoints serve.
async fn node_zone(client: &kube::Client) -> Option<String> {
    const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
    let why = match std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty()) {
        None => "$NODE_NAME is not set (give the container env NODE_NAME from the downward \
                 API's spec.nodeName)"
            .to_owned(),
        Some(node) => {
            let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
            match nodes.get(&node).await {
                Ok(found) => match found.metadata.labels.and_then(|mut l| l.remove(ZONE_LABEL)) {
                    Some(zone) => {
                        tracing::info!(node, zone, "topology-aware routing: this replica's zone");
                        return Some(zone);
                    }
                    None => format!("node {node} has no {ZONE_LABEL} label"),
                },
                Err(e) => format!(
                    "node {node} could not be read ({e}; the ServiceAccount needs get on nodes)"
                ),
            }
        }
    };
    tracing::warn!("--enable-topology-aware-routing: {why}; every zone's endpoints take traffic");
    None
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

/// One function for the whole run (~110 lines): the event loop's arms share the control
/// plane, the watchers, the status writer and the sync state, which pieces would pass around.
async fn run_async(kube: KubeOptions, options: &Options) -> Result<(), Error> {
    let client = connect(kube.kubeconfig.as_deref()).await?;

    let startup = startup_settings(&client, &options.compile).await;
    let workers = options.workers(startup.worker_processes);
    limits::open_files(startup.max_worker_open_files, workers);
    let proxy = Proxy::start(options.proxy_config(workers))?;
    // Each Gateway's generated Service points at where its listeners on 80 and 443 are
    // served: the ports bound just now.
    let compile_options = &CompileOptions {
        gateway_services: Some(ListenPorts {
            http: proxy.http_addr().port(),
            https: proxy.https_addr().port(),
        }),
        ..options.compile.clone()
    };
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

    let mut control = ControlPlane::new(
        proxy,
        compile_options.clone(),
        &startup,
        options.resolver.clone(),
    );
    if kube.topology_aware_routing {
        let zone = node_zone(&client).await;
        control.store.set_topology_zone(zone.as_deref());
        // PreferSameNode's hints name nodes: $NODE_NAME is all it takes.
        let node = std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty());
        control.store.set_topology_node(node.as_deref());
    }
    let mut watchers = Watchers::start(
        &client,
        &WatchScope {
            namespace: kube.watch_namespace.clone(),
            config_map: compile_options.config_map.clone(),
            extra_config_maps: stream_config_maps(compile_options),
            referenced_config_maps: referenced_config_maps(&startup),
            default_tls_secret: compile_options.default_tls_secret.clone(),
        },
    );
    control.proxy.set_leader(&kube.election_id, false);
    let status = start_status_writer(&client, &kube, compile_options, &watchers);
    let webhook = start_webhook(&kube, compile_options)?;

    let mut leading = status.leading();
    let started = Instant::now();
    let mut report_waiting_at = tokio::time::Instant::now() + WAITING_REPORT;
    let mut pending = ChangeSet::default();
    let mut synced = false;
    // Changes keep being applied during the grace period: backends roll too.
    let mut termination = Termination::new(options.shutdown_grace_period)?;
    loop {
        // Read before the select, whose resolution branch borrows `control`.
        let certificate_check_in = control.certificate_check_in();
        let update = tokio::select! {
            update = watchers.next() => update.map(Some),
            Ok(()) = leading.changed() => {
                let leads = *leading.borrow_and_update();
                control.proxy.set_leader(&kube.election_id, leads);
                continue;
            }
            resolution = control.next_resolution(), if synced => {
                let changes = (control.store).set_resolved(
                    &resolution.name,
                    resolution.addresses,
                    resolution.problem,
                );
                pending.merge(changes);
                Some(None)
            }
            _ = crate::control::sleep_for(certificate_check_in), if synced => {
                pending.config = true;
                Some(None)
            }
            () = tokio::time::sleep_until(report_waiting_at), if !synced => {
                // Not ready: say again what it waits for, so the reason is in the last lines
                // of the log, not only at the first failure.
                tracing::warn!(
                    waited_s = started.elapsed().as_secs(),
                    "not ready: waiting for the first list of {}",
                    watchers.first_lists().describe()
                );
                report_waiting_at += WAITING_REPORT;
                continue;
            }
            step = termination.next() => match step {
                Step::Grace => {
                    control.proxy.terminating();
                    continue;
                }
                Step::Stop => break,
            },
        };
        match update {
            Some(Some(update)) => pending.merge(apply_update(&mut control.store, update)),
            Some(None) => {} // a certificate check or a resolved name: `pending` says what
            None => break,
        }
        // Take everything already waiting before acting, so a burst costs one compile.
        while let Some(update) = watchers.try_next() {
            pending.merge(apply_update(&mut control.store, update));
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
                resident_kib = crate::control::resident_kib(),
                "initial sync with the Kubernetes API complete"
            );
        }
        let config_changed = control.needs_compile(&pending);
        if let Some(compiled) = control.act(std::mem::take(&mut pending)) {
            // A ConfigMap the settings name since start, outside the watched namespace.
            for config_map in referenced_config_maps(&compiled.settings) {
                if watchers.watch_config_map(&config_map) {
                    tracing::info!(%config_map, "watching a ConfigMap the settings name");
                }
            }
            status.publish(Published {
                served: compiled.ingresses.iter().cloned().collect(),
                diagnostics: control.diagnostics_to_report(&compiled),
                gateway: compiled.gateway_status.clone(),
            });
        }
        if let Some(webhook) = webhook.as_ref().filter(|_| config_changed) {
            webhook.publish(&control.store);
        }
    }
    tracing::info!("shutting down: releasing leadership, finishing requests in flight");
    status.stop().await;
    drop(watchers);
    let proxy = control.proxy;
    // The drain blocks until connections finish; keep it off the runtime's thread.
    tokio::task::spawn_blocking(move || proxy.shutdown()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// The status writer: leader election on the Lease named `--election-id` in the pod's
/// namespace (else the ConfigMap's), and the Ingresses' status while leading.
fn start_status_writer(
    client: &kube::Client,
    kube: &KubeOptions,
    compile_options: &CompileOptions,
    watchers: &Watchers,
) -> StatusWriter {
    let env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    let pod_namespace = env("POD_NAMESPACE");
    let pod = pod_namespace
        .clone()
        .zip(env("POD_NAME"))
        .map(|(namespace, name)| NamespacedName::new(namespace, name));
    let lease_namespace =
        pod_namespace.unwrap_or_else(|| compile_options.config_map.namespace.to_string());
    StatusWriter::start(
        client.clone(),
        StatusOptions {
            identity: identity(),
            lease: NamespacedName::new(lease_namespace, kube.election_id.clone()),
            lease_duration: kube.lease_duration,
            elect: kube.elect,
            pod,
            addresses: kube.status_addresses.clone(),
            controller: compile_options.controller_class.clone(),
        },
        watchers.ingress_states(),
    )
}

/// The admission webhook, when `--validating-webhook` asks for one.
fn start_webhook(
    kube: &KubeOptions,
    compile_options: &CompileOptions,
) -> Result<Option<Webhook>, Error> {
    let Some(webhook) = &kube.webhook else {
        return Ok(None);
    };
    let started = Webhook::start(webhook, compile_options.clone())?;
    tracing::info!(addr = %started.addr(), "admission webhook listening");
    Ok(Some(started))
}

/// The TCP and UDP services ConfigMaps, watched beside the controller's.
fn stream_config_maps(options: &CompileOptions) -> Vec<model::NamespacedName> {
    [
        &options.tcp_services_config_map,
        &options.udp_services_config_map,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect()
}

/// The ConfigMaps the settings name (`proxy-set-headers`, `add-headers`), watched beside the
/// controller's when they lie outside `--watch-namespace`.
fn referenced_config_maps(settings: &Settings) -> Vec<NamespacedName> {
    [&settings.proxy_set_headers, &settings.add_headers]
        .into_iter()
        .flatten()
        .filter_map(|reference| reference.split_once('/'))
        .map(|(namespace, name)| NamespacedName::new(namespace, name))
        .collect()
}

/// While the first lists are not all in, what they wait for is logged this often.
const WAITING_REPORT: Duration = Duration::from_secs(30);

/// How long [`load_kubernetes`] waits for every kind's first list.
const LOAD_WAIT: Duration = Duration::from_secs(120);

/// Every object Sluice would watch, listed once (for `sluice migrate`): no proxy, no status.
pub fn load_kubernetes(kube: &KubeOptions, options: &CompileOptions) -> Result<Store, Error> {
    runtime()?.block_on(async {
        let client = connect(kube.kubeconfig.as_deref()).await?;
        let mut watchers = Watchers::start(
            &client,
            &WatchScope {
                namespace: kube.watch_namespace.clone(),
                config_map: options.config_map.clone(),
                extra_config_maps: stream_config_maps(options),
                referenced_config_maps: Vec::new(),
                default_tls_secret: options.default_tls_secret.clone(),
            },
        );
        let mut store = Store::default();
        let listed = async {
            while let Some(update) = watchers.next().await {
                apply_update(&mut store, update);
                while let Some(update) = watchers.try_next() {
                    apply_update(&mut store, update);
                }
                if watchers.synced() {
                    break;
                }
            }
        };
        tokio::time::timeout(LOAD_WAIT, listed)
            .await
            .map_err(|_| Error::SyncTimeout(LOAD_WAIT, watchers.first_lists().describe()))?;
        Ok(store)
    })
}

/// Applies one watcher update to the Store; a relist is a reset, not a stream of deletes.
pub fn apply_update(store: &mut Store, update: Update) -> ChangeSet {
    match update {
        // At debug level, the arrival of each change: with `configuration compiled` (info),
        // where a change's time goes (`gateway_bench` reads them).
        Update::Apply(object) => {
            tracing::debug!("object changed: {}", object.object_ref());
            store.apply(object)
        }
        Update::Delete(object_ref) => {
            tracing::debug!("object deleted: {object_ref}");
            store.remove(&object_ref)
        }
        Update::Relisted {
            kind,
            objects,
            gone,
            served,
            ..
        } => {
            let mut changes = store.set_served(kind, served);
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

/// worker-processes and max-worker-open-files are read once at start (threads are not
/// resized live, the limit is asked for before the listeners open): from the ConfigMap if the
/// API answers quickly, else the defaults.
async fn startup_settings(client: &kube::Client, options: &CompileOptions) -> Settings {
    let key = &options.config_map;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), &key.namespace);
    match tokio::time::timeout(CONFIG_MAP_WAIT, api.get_opt(&key.name)).await {
        Ok(Ok(Some(config_map))) => {
            let mut store = Store::default();
            store.apply(Object::from(config_map));
            compile(&store, options).settings
        }
        Ok(Ok(None)) => Settings::default(),
        Ok(Err(error)) => {
            tracing::warn!("reading ConfigMap {key} at start-up failed: {error}");
            Settings::default()
        }
        Err(_) => {
            tracing::warn!(
                "the Kubernetes API did not answer within {CONFIG_MAP_WAIT:?}; starting with \
                 the default worker-processes and max-worker-open-files"
            );
            Settings::default()
        }
    }
}
