//! The status writer: the Lease holder writes `status.loadBalancer.ingress` on the Ingresses this
//! controller serves, clears it from Ingresses it stopped serving, and turns problems with an
//! Ingress into Kubernetes Events; for Gateway API, each Gateway's generated Service
//! (`infrastructure`) and the objects' status (`gateway_status`). Every replica serves traffic;
//! only one talks back (with `--disable-leader-election`, each: no Lease).
//!
//! ```text
//!  control plane ──Published{served, diagnostics}──┐
//!  watchers ──IngressStates (status, uid)──────────┼──▶ reconcile (Lease holder only) ──▶ status patches
//!  Lease tick ──▶ acquire/renew ───────────────────┘        │                          └─▶ Events
//!  the addresses, each pass: --publish-status-address │ --publish-service's Service │ neither:
//!    the nodes of the ready pods labelled as this one (ingress-nginx's default)
//! ```
//! A pass that fails (API server away, conflict) leaves the work marked undone; the next tick
//! tries again. Nothing here can affect traffic.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, EventSource, Node, ObjectReference, Pod, Service,
};
use k8s_openapi::api::networking::v1::{Ingress, IngressLoadBalancerIngress};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client};
use model::{Diagnostic, Kind, NamespacedName, Severity};
use tokio::sync::{oneshot, watch};

use super::gateway_status::Found;
use super::gateway_status::GatewayWrites;
use super::infrastructure::InfrastructureWrites;
use super::lease::Election;

/// Status patches in flight at once during a pass.
const STATUS_WRITES_IN_FLIGHT: usize = 8;

/// How soon a pass that could not write everything is tried again.
const RETRY: Duration = Duration::from_secs(2);
use super::watch::{IngressState, IngressStates};

/// Where the addresses written into Ingress status come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatusAddresses {
    /// `--publish-service`: that Service's load-balancer addresses, else its external IPs,
    /// else its cluster IP.
    Service(NamespacedName),
    /// `--publish-status-address`: these IPs or host names.
    Fixed(Vec<String>),
    /// Neither flag, as ingress-nginx: the addresses of the nodes running a ready pod with
    /// this replica's pod's labels (its ReplicaSet or DaemonSet): each node's ExternalIPs,
    /// else its InternalIPs; only InternalIPs with `--report-node-internal-ip-address`.
    Nodes { internal: bool },
    /// Status is left alone (Events are still written).
    None,
}

#[derive(Clone, Debug)]
pub struct StatusOptions {
    /// This replica's name in the Lease and in field managers (`POD_NAME`).
    pub identity: String,
    /// The Lease: namespace and `--election-id`.
    pub lease: NamespacedName,
    pub lease_duration: Duration,
    /// `--disable-leader-election`: no Lease; this replica writes as if it led (meant for one
    /// replica, as in ingress-nginx).
    pub elect: bool,
    /// This replica's pod (`$POD_NAMESPACE`/`$POD_NAME`), when both are set: whose labels
    /// find the controller's pods for [`StatusAddresses::Nodes`].
    pub pod: Option<NamespacedName>,
    pub addresses: StatusAddresses,
    /// `reportingController` of Events: the IngressClass controller value.
    pub controller: String,
}

/// What the control plane published last.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// Ingresses the current configuration serves.
    pub served: BTreeSet<NamespacedName>,
    pub diagnostics: Vec<Diagnostic>,
    /// Gateway API status as the compile decided it.
    pub gateway: Arc<model::gateway_status::GatewayStatuses>,
}

/// Handle to the running status writer.
pub struct StatusWriter {
    published: watch::Sender<Option<Arc<Published>>>,
    /// Whether this replica holds the Lease.
    leading: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<oneshot::Sender<()>>>,
    writer: tokio::task::JoinHandle<()>,
}

impl StatusWriter {
    /// Starts the election and the writer on the current tokio runtime. Nothing is written
    /// before the first [`StatusWriter::publish`]: until then we do not know what we serve.
    pub fn start(client: Client, options: StatusOptions, states: IngressStates) -> StatusWriter {
        let (published, published_rx) = watch::channel(None);
        let (stop, stop_rx) = oneshot::channel();
        let (leader, leader_rx) = watch::channel(false);
        let mut options = options;
        if matches!(options.addresses, StatusAddresses::Nodes { .. }) && options.pod.is_none() {
            tracing::warn!(
                "neither --publish-service nor --publish-status-address given, and POD_NAME or \
                 POD_NAMESPACE unset, so the controller's pods (whose nodes' addresses \
                 ingress-nginx publishes then) cannot be found: Ingress status is not written"
            );
            options.addresses = StatusAddresses::None;
        }
        if options.elect {
            let election = Election::new(
                client.clone(),
                &options.lease.namespace,
                &options.lease.name,
                &options.identity,
                options.lease_duration,
            );
            // The election runs on its own so that a long pass of status writes (thousands
            // of Ingresses) never delays a renewal past the Lease's expiry.
            tokio::spawn(elect(election, options.lease.clone(), leader, stop_rx));
        } else {
            tracing::info!(
                "--disable-leader-election: this replica writes Ingress status and Events \
                 without a Lease"
            );
            leader.send_replace(true);
            // Kept open: a closed channel would end the writer.
            tokio::spawn(async move {
                let _leader = leader;
                if let Ok(done) = stop_rx.await {
                    let _ = done.send(());
                }
            });
        }
        let task = Task {
            reporter: Reporter {
                controller: options.controller.clone(),
                instance: Some(options.identity.clone()),
            },
            field_manager: format!("sluice-{}", options.identity),
            resync: options.lease_duration * 2,
            client,
            options,
            states,
            leader: leader_rx.clone(),
            published: published_rx,
            addresses: None,
            pod_missing_reported: false,
            address_error: None,
            rbac: RbacFallbacks::default(),
            reported: BTreeSet::new(),
            gateway: GatewayWrites::default(),
            infrastructure: InfrastructureWrites::default(),
        };
        let writer = tokio::spawn(task.run());
        StatusWriter {
            published,
            leading: leader_rx,
            stop: Some(stop),
            writer,
        }
    }

    /// Whether this replica leads (holds the Lease), as it changes.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Tells the writer what the control plane now serves.
    pub fn publish(&self, published: Published) {
        self.published.send_replace(Some(Arc::new(published)));
    }

    /// Stops writing and releases the Lease if this replica holds it.
    pub async fn stop(mut self) {
        self.writer.abort();
        if let Some(stop) = self.stop.take() {
            let (done, wait) = oneshot::channel();
            if stop.send(done).is_ok() {
                // Bounded: shutting down must not hang on an unreachable API server.
                let _ = tokio::time::timeout(Duration::from_secs(5), wait).await;
            }
        }
    }
}

/// Acquires or renews every retry period and tells the writer whether it leads.
async fn elect(
    mut election: Election,
    lease: NamespacedName,
    leader: watch::Sender<bool>,
    mut stop: oneshot::Receiver<oneshot::Sender<()>>,
) {
    let mut tick = tokio::time::interval(election.retry_period());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            done = &mut stop => {
                leader.send_replace(false);
                election.release().await;
                if let Ok(done) = done {
                    let _ = done.send(());
                }
                return;
            }
        }
        match election.try_acquire_or_renew().await {
            Ok(_) => {
                if last_error.take().is_some() {
                    tracing::info!(%lease, "the Lease is reachable again");
                }
            }
            Err(error) => {
                let error = error.to_string();
                // Each new problem once at warn level; its repeats only at debug.
                if last_error.as_deref() == Some(error.as_str()) {
                    tracing::debug!(%lease, "{error}");
                } else {
                    tracing::warn!(
                        %lease,
                        "leader election failed: {error}; Ingress status and Events wait for it \
                         (the Lease lives in $POD_NAMESPACE, else the --configmap namespace, \
                         which must exist)"
                    );
                    last_error = Some(error);
                }
            }
        }
        let leads = election.is_leader();
        if leader.send_if_modified(|was| std::mem::replace(was, leads) != leads) {
            if leads {
                tracing::info!(%lease, "became the leader: writing Ingress status and Events");
            } else {
                tracing::info!(
                    %lease,
                    holder = election.holder().unwrap_or("nobody"),
                    "not the leader: another replica writes Ingress status and Events"
                );
            }
        }
    }
}

struct Task {
    client: Client,
    options: StatusOptions,
    /// Who writes the Events. Each Event is written by a Recorder of its own: kube-rs 5's
    /// Recorder folds Events with the same reason on the same object into one series, whatever
    /// their notes, so a second problem of an Ingress would only bump the first one's count
    /// and never be read. Each problem is reported once (`reported`), so no series is needed.
    reporter: Reporter,
    field_manager: String,
    /// A full pass at least this often, even without news (a load balancer can get its
    /// address late).
    resync: Duration,
    states: IngressStates,
    leader: watch::Receiver<bool>,
    /// `None` until the control plane's first publish (its initial sync).
    published: watch::Receiver<Option<Arc<Published>>>,
    /// The addresses resolved at the last pass.
    addresses: Option<Vec<IngressLoadBalancerIngress>>,
    /// [`StatusAddresses::Nodes`]: this replica's pod was not found, and the log said so.
    pod_missing_reported: bool,
    /// The last failure to resolve the addresses, said once at warn level (a pass runs every
    /// few seconds while the API server is away; its repeats go to debug).
    address_error: Option<String>,
    /// Writes the RBAC refused, done the other way.
    rbac: RbacFallbacks,
    /// Diagnostics already turned into Events by this replica while leading.
    reported: BTreeSet<Diagnostic>,
    /// Gateway API status this replica wrote while leading.
    gateway: GatewayWrites,
    /// The Services and EndpointSlices generated for Gateways, applied while leading.
    infrastructure: InfrastructureWrites,
}

impl Task {
    async fn run(mut self) {
        let mut resync = tokio::time::interval(self.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Every wake-up is news (or the periodic resync): one pass each, when leading.
        loop {
            tokio::select! {
                _ = resync.tick() => {}
                changed = self.leader.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    // A new leader reports what is wrong again: the old one's Events may be
                    // long gone.
                    self.reported.clear();
                    self.gateway.forget();
                    self.infrastructure.forget();
                }
                changed = self.published.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = self.states.changed() => {}
            }
            if self.leads() && !self.reconcile().await {
                // Something could not be written (API server away, conflict): try again soon
                // rather than at the next resync.
                resync.reset_after(RETRY);
            }
        }
    }

    fn leads(&self) -> bool {
        *self.leader.borrow()
    }

    /// One pass; true when everything it had to write was written.
    async fn reconcile(&mut self) -> bool {
        // Before the first publish we do not know what we serve; clearing anything then
        // would blank the status of every Ingress at each leader change.
        let Some(published) = self.published.borrow().clone() else {
            return false;
        };
        let mut complete = self.report_events(&published).await;
        let desired = match self.desired_addresses().await {
            Ok(desired) => {
                if self.address_error.take().is_some() {
                    tracing::info!("the status addresses resolve again");
                }
                desired
            }
            Err(error) => {
                let error = error.to_string();
                if self.address_error.as_deref() == Some(error.as_str()) {
                    tracing::debug!("resolving the status addresses still fails: {error}");
                } else {
                    tracing::warn!("resolving the status addresses failed: {error}");
                    self.address_error = Some(error);
                }
                return false;
            }
        };
        // A Gateway's addresses are the Ingresses': the same flags say where Sluice is reached.
        complete &= self.write_gateway(&published, desired.as_deref()).await;
        let Some(desired) = desired else {
            return complete;
        };
        if self.addresses.as_ref() != Some(&desired) {
            tracing::info!(addresses = ?desired.iter().map(address_text).collect::<Vec<_>>(), "Ingress status addresses");
            self.addresses = Some(desired.clone());
        }
        let writes = self
            .states
            .writes(|key, state| wanted_addresses(published.served.contains(key), state, &desired));
        // A few at a time: one patch is a round trip, and a new leader may have thousands to
        // write; more in parallel would only queue up in the API server.
        let this = &*self;
        let mut results = futures_util::stream::iter(writes)
            .map(|(key, want)| async move {
                if !this.leads() {
                    // Lost the Lease mid-pass: the new leader takes it from here.
                    return false;
                }
                match this.write_status(&key, &want).await {
                    Ok(()) => {
                        this.states.record(&key, want);
                        true
                    }
                    Err(kube::Error::Api(status)) if status.is_not_found() => true,
                    Err(error) => {
                        tracing::warn!("writing the status of Ingress {key} failed: {error}");
                        false
                    }
                }
            })
            .buffer_unordered(STATUS_WRITES_IN_FLIGHT);
        while let Some(written) = results.next().await {
            complete &= written;
        }
        complete
    }

    /// The Gateways' generated Services first (what became of them is a condition of each
    /// Gateway), then the Gateway API status.
    async fn write_gateway(
        &mut self,
        published: &Published,
        addresses: Option<&[IngressLoadBalancerIngress]>,
    ) -> bool {
        let leader = self.leader.clone();
        let leads = move || *leader.borrow();
        let shared: Vec<IpAddr> = (addresses.into_iter().flatten())
            .filter_map(|a| a.ip.as_deref().or(a.hostname.as_deref()))
            .filter_map(|text| text.parse().ok())
            .collect();
        let statuses = &published.gateway;
        let generated = (self.infrastructure)
            .reconcile(&self.client, statuses, &shared, &leads)
            .await;
        let conditions = self.infrastructure.conditions(statuses);
        let found = Found {
            shared: addresses,
            conditions: &conditions,
            cluster_ips: self.infrastructure.cluster_ips(),
        };
        let written = (self.gateway)
            .reconcile(&self.client, &self.field_manager, statuses, found, leads)
            .await;
        generated && written
    }

    async fn write_status(
        &self,
        key: &NamespacedName,
        addresses: &[IngressLoadBalancerIngress],
    ) -> Result<(), kube::Error> {
        let api: Api<Ingress> = Api::namespaced(self.client.clone(), &key.namespace);
        // A merge patch of just this field: nothing else in status is ours to touch. `null`
        // removes the list entirely when we stop serving the Ingress.
        let ingress = if addresses.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::to_value(addresses).unwrap_or_default()
        };
        let patch = serde_json::json!({ "status": { "loadBalancer": { "ingress": ingress } } });
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        if !self.rbac.status_by_update.load(Ordering::Relaxed) {
            match api
                .patch_status(&key.name, &params, &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::debug!(ingress = %key, "status written");
                    return Ok(());
                }
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    if !self.rbac.status_by_update.swap(true, Ordering::Relaxed) {
                        tracing::info!(
                            "patching ingresses/status is forbidden: writing it by update \
                             (ingress-nginx's RBAC grants update only)"
                        );
                    }
                }
                Err(error) => return Err(error),
            }
        }
        // Update: the whole object as read (its resourceVersion: a conflict is tried again at
        // the next pass), this one field changed. Read through the Ingress itself, which its
        // `get` allows (the status subresource's `get` is another grant).
        let mut current = api.get(&key.name).await?;
        let status = current.status.get_or_insert_with(Default::default);
        let load_balancer = status.load_balancer.get_or_insert_with(Default::default);
        load_balancer.ingress = (!addresses.is_empty()).then(|| addresses.to_vec());
        let params = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        api.replace_status(&key.name, &params, &current).await?;
        tracing::debug!(ingress = %key, "status written by update");
        Ok(())
    }

    /// `None` when status is not ours to write.
    async fn desired_addresses(
        &mut self,
    ) -> Result<Option<Vec<IngressLoadBalancerIngress>>, kube::Error> {
        let texts: Vec<String> = match &self.options.addresses {
            StatusAddresses::None => return Ok(None),
            StatusAddresses::Fixed(addresses) => addresses.clone(),
            StatusAddresses::Nodes { internal } => {
                let pod = self.options.pod.clone().expect("checked at start");
                match node_addresses(&self.client, &pod, *internal).await? {
                    Some(addresses) => {
                        self.pod_missing_reported = false;
                        addresses
                    }
                    None => {
                        if !std::mem::replace(&mut self.pod_missing_reported, true) {
                            tracing::warn!(
                                "pod {pod} ($POD_NAMESPACE/$POD_NAME) not found: the nodes \
                                 whose addresses go into Ingress status are those of the \
                                 controller's pods, found by its labels; status not written"
                            );
                        }
                        return Ok(None);
                    }
                }
            }
            StatusAddresses::Service(key) => {
                let api: Api<Service> = Api::namespaced(self.client.clone(), &key.namespace);
                match api.get_opt(&key.name).await? {
                    Some(service) => service_addresses(&service),
                    None => {
                        tracing::warn!(
                            "--publish-service {key}: no such Service; status not written"
                        );
                        return Ok(None);
                    }
                }
            }
        };
        Ok(Some(
            texts.iter().map(|t| load_balancer_ingress(t)).collect(),
        ))
    }

    /// Emits an Event for every problem with an Ingress not reported yet. Returns false if
    /// some could not be written (they are tried again next pass).
    async fn report_events(&mut self, published: &Published) -> bool {
        let current: BTreeSet<&Diagnostic> = published
            .diagnostics
            .iter()
            .filter(|d| d.object.kind == Kind::Ingress)
            .collect();
        // A problem that went away and comes back is news again.
        self.reported.retain(|d| current.contains(d));
        let mut complete = true;
        for diagnostic in current {
            if self.reported.contains(diagnostic) {
                continue;
            }
            let key = NamespacedName::new(
                diagnostic.object.namespace.as_str(),
                diagnostic.object.name.as_str(),
            );
            let reference = ObjectReference {
                api_version: Some("networking.k8s.io/v1".into()),
                kind: Some("Ingress".into()),
                namespace: Some(key.namespace.to_string()),
                name: Some(key.name.to_string()),
                uid: self.states.get(&key).and_then(|s| s.uid),
                ..ObjectReference::default()
            };
            // Errors and unsupported input change what is served: Warning. Documented
            // differences and ingress-nginx's traps are served as intended: Normal.
            let (type_, reason) = match diagnostic.severity {
                Severity::Error | Severity::Missing => (EventType::Warning, "ConfigurationProblem"),
                Severity::Unsupported => (EventType::Warning, "UnsupportedConfiguration"),
                Severity::Difference => (EventType::Normal, "DiffersFromIngressNginx"),
                Severity::Notice => (EventType::Normal, "IngressNginxBehaviour"),
                Severity::Expiring => (EventType::Warning, "CertificateExpiring"),
            };
            let event = Event {
                type_,
                reason: reason.into(),
                // The API limits notes to 1 kB.
                note: Some(truncate(&diagnostic.reason, 1000)),
                action: "Compile".into(),
                secondary: None,
            };
            let written = if self.rbac.core_events.load(Ordering::Relaxed) {
                self.core_event(&event, &reference).await
            } else {
                let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
                match recorder.publish(&event, &reference).await {
                    Err(kube::Error::Api(status)) if status.code == 403 => {
                        tracing::info!(
                            "creating events.k8s.io Events is forbidden: writing core v1 Events \
                             (ingress-nginx's RBAC grants those only)"
                        );
                        self.rbac.core_events.store(true, Ordering::Relaxed);
                        self.core_event(&event, &reference).await
                    }
                    other => other,
                }
            };
            match written {
                Ok(()) => {
                    self.reported.insert(diagnostic.clone());
                }
                Err(error) => {
                    tracing::warn!("recording an Event on Ingress {key} failed: {error}");
                    complete = false;
                }
            }
        }
        complete
    }
}

impl Task {
    /// `event` about `reference` as a core v1 Event (what `kubectl describe` shows either way).
    async fn core_event(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let namespace = reference.namespace.clone().unwrap_or_default();
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &namespace);
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let name = reference.name.clone().unwrap_or_default();
        let core = CoreEvent {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}.")),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: reference.clone(),
            reason: Some(event.reason.clone()),
            message: event.note.clone(),
            type_: Some(match event.type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            action: Some(event.action.clone()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(EventSource {
                component: Some(self.reporter.controller.clone()),
                host: None,
            }),
            reporting_component: Some(self.reporter.controller.clone()),
            reporting_instance: self.reporter.instance.clone(),
            ..CoreEvent::default()
        };
        api.create(&PostParams::default(), &core).await?;
        Ok(())
    }
}

/// Which writes the ServiceAccount's RBAC refused once, so the other way is taken from then on:
/// ingress-nginx's chart grants `update` (not `patch`) on ingresses/status and core v1 Events
/// (not `events.k8s.io`).
#[derive(Default)]
struct RbacFallbacks {
    status_by_update: AtomicBool,
    core_events: AtomicBool,
}

/// What an Ingress's `status.loadBalancer.ingress` should say (`None`: not ours to touch):
/// our addresses while we serve it; nothing once we stop serving one that still shows our
/// addresses (we wrote them); anything else is another controller's.
fn wanted_addresses<'a>(
    served: bool,
    state: &IngressState,
    ours: &'a [IngressLoadBalancerIngress],
) -> Option<&'a [IngressLoadBalancerIngress]> {
    if served {
        Some(ours)
    } else if !state.load_balancer.is_empty() && state.load_balancer == ours {
        Some(&[])
    } else {
        None
    }
}

/// The addresses a Service offers, in ingress-nginx's order of preference.
fn service_addresses(service: &Service) -> Vec<String> {
    let from_load_balancer: Vec<String> = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
        .collect();
    if !from_load_balancer.is_empty() {
        return from_load_balancer;
    }
    let spec = service.spec.clone().unwrap_or_default();
    if let Some(external) = spec.external_ips.filter(|ips| !ips.is_empty()) {
        return external;
    }
    spec.cluster_ip
        .filter(|ip| !ip.is_empty() && ip != "None")
        .into_iter()
        .collect()
}

/// [`StatusAddresses::Nodes`]: the addresses of the nodes that run a ready pod labelled as
/// `pod` is, sorted (as ingress-nginx sorts them: a pod listed in another order changes
/// nothing), each once. `None`: `pod` does not exist.
async fn node_addresses(
    client: &Client,
    pod: &NamespacedName,
    internal: bool,
) -> Result<Option<Vec<String>>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let Some(this) = pods.get_opt(&pod.name).await? else {
        return Ok(None);
    };
    // All of its labels, as ingress-nginx selects (pod-template-hash included: a rollout's
    // new pods publish their own nodes).
    let selector = this
        .metadata
        .labels
        .unwrap_or_default()
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    let siblings = pods.list(&ListParams::default().labels(&selector)).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let mut addresses: Vec<String> = Vec::new();
    let mut seen_nodes = BTreeSet::new();
    for sibling in siblings.items.iter().filter(|p| running_and_ready(p)) {
        let Some(node) = sibling.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        if !seen_nodes.insert(node.clone()) {
            continue;
        }
        let Some(node) = nodes.get_opt(&node).await? else {
            continue;
        };
        addresses.extend(node_ips(&node, internal));
    }
    addresses.sort();
    addresses.dedup();
    Ok(Some(addresses))
}

fn running_and_ready(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && (status.conditions.iter().flatten()).any(|c| c.type_ == "Ready" && c.status == "True")
}

/// A node's ExternalIPs, else its InternalIPs; only its InternalIPs when `internal`.
fn node_ips(node: &Node, internal: bool) -> Vec<String> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    let of_type = |kind: &str| -> Vec<String> {
        (addresses.into_iter().flatten())
            .filter(|a| a.type_ == kind && !a.address.is_empty())
            .map(|a| a.address.clone())
            .collect()
    };
    let external = of_type("ExternalIP");
    if internal || external.is_empty() {
        of_type("InternalIP")
    } else {
        external
    }
}

fn load_balancer_ingress(text: &str) -> IngressLoadBalancerIngress {
    if text.parse::<IpAddr>().is_ok() {
        IngressLoadBalancerIngress {
            ip: Some(text.to_owned()),
            ..IngressLoadBalancerIngress::default()
        }
    } else {
        IngressLoadBalancerIngress {
            hostname: Some(text.to_owned()),
            ..IngressLoadBalancerIngress::default()
        }
    }
}

fn address_text(address: &IngressLoadBalancerIngress) -> &str {
    address
        .ip
        .as_deref()
        .or(address.hostname.as_deref())
        .unwrap_or_default()
}

fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, LoadBalancerStatus, ServiceSpec, ServiceStatus,
    };

    #[test]
    fn addresses_are_ips_or_host_names() {
        assert_eq!(
            load_balancer_ingress("198.18.0.1").ip.as_deref(),
            Some("198.18.0.1")
        );
        assert_eq!(
            load_balancer_ingress("2001:db8::1").ip.as_deref(),
            Some("2001:db8::1")
        );
        let named = load_balancer_ingress("lb.example.com");
        assert_eq!(named.hostname.as_deref(), Some("lb.example.com"));
        assert_eq!(named.ip, None);
    }

    #[test]
    fn service_addresses_prefer_the_load_balancer() {
        let mut service = Service {
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.96.0.10".into()),
                external_ips: Some(vec!["203.0.113.7".into()]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        assert_eq!(service_addresses(&service), ["203.0.113.7"]);
        service.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    hostname: Some("lb.example.com".into()),
                    ..LoadBalancerIngress::default()
                }]),
            }),
            ..ServiceStatus::default()
        });
        assert_eq!(service_addresses(&service), ["lb.example.com"]);
        let headless = Service {
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        assert!(service_addresses(&headless).is_empty());
    }

    #[test]
    fn status_is_ours_while_served_and_cleared_only_where_it_shows_our_addresses() {
        let ours = [load_balancer_ingress("198.18.0.1")];
        let showing = |addresses: &[&str]| IngressState {
            uid: None,
            load_balancer: addresses.iter().map(|a| load_balancer_ingress(a)).collect(),
        };
        // Served: our addresses, whatever it shows now.
        for now in [
            showing(&[]),
            showing(&["198.18.0.1"]),
            showing(&["203.0.113.9"]),
        ] {
            assert_eq!(wanted_addresses(true, &now, &ours), Some(&ours[..]));
        }
        // No longer served: cleared where it shows ours, left alone where it shows another's.
        let cleared = wanted_addresses(false, &showing(&["198.18.0.1"]), &ours);
        assert_eq!(cleared, Some(&[][..]));
        assert_eq!(
            wanted_addresses(false, &showing(&["203.0.113.9"]), &ours),
            None
        );
        assert_eq!(wanted_addresses(false, &showing(&[]), &ours), None);

        // A pass writes only the Ingresses whose status differs from what it wants.
        let states = IngressStates::default();
        for (name, addresses) in [
            ("right", &["198.18.0.1"][..]),
            ("stale", &[]),
            ("gone", &["198.18.0.1"]),
            ("other", &["203.0.113.9"]),
        ] {
            states.set(NamespacedName::new("app", name), Some(showing(addresses)));
        }
        let served: BTreeSet<NamespacedName> = ["right", "stale"]
            .map(|name| NamespacedName::new("app", name))
            .into();
        let writes =
            states.writes(|key, state| wanted_addresses(served.contains(key), state, &ours));
        assert_eq!(
            writes,
            [
                (NamespacedName::new("app", "gone"), Vec::new()),
                (NamespacedName::new("app", "stale"), ours.to_vec()),
            ]
        );
    }

    #[test]
    fn notes_are_cut_at_a_character_boundary() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("ééé", 3), "é…");
    }
}
