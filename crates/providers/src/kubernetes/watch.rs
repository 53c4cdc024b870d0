//! One kube-rs watcher per kind, each turned into [`Update`]s for the control plane.
//!
//! A watcher lists, then watches from the list's resourceVersion; when the API server is
//! unreachable it retries with backoff, and when its resourceVersion has expired it lists
//! again. A (re)list arrives here as one [`Update::Relisted`] holding everything the watcher
//! now sees plus what it no longer sees, so the control plane applies it as one reset and never
//! publishes a half-listed state. Errors never end a watch: the last good objects stay in the
//! Store and keep serving. Until every watch has listed once, [`FirstLists`] says which have
//! not and why (a 403 names the permission to grant), for the operator of a pod that is not
//! ready.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass, IngressLoadBalancerIngress};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use model::{Kind, NamespacedName, ObjectRef};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, Notify};
use translate::Object;

use super::gateway::{
    ApiObject, BackendTlsPolicies, GatewayClasses, GatewayKind, Gateways, GrpcRoutes, HttpRoutes,
    ListenerSets, ReferenceGrants, TcpRoutes, TlsRoutes, UdpRoutes,
};

/// What the watchers saw, in the order they saw it.
#[derive(Debug)]
pub enum Update {
    /// An object was created or changed.
    Apply(Object),
    /// An object was deleted.
    Delete(ObjectRef),
    /// A watcher finished a (re)list: `objects` is all it sees now, `gone` what it saw before
    /// and no longer does. Apply both before acting: a relist is a reset, not a stream.
    Relisted {
        kind: Kind,
        objects: Vec<Object>,
        gone: Vec<ObjectRef>,
        /// This watcher's first list (later ones follow a lost watch).
        first: bool,
        /// False when the API server answered 404 for the kind's resource (a CRD not
        /// installed, a built-in API not enabled): `objects` is then empty.
        served: bool,
    },
}

/// Which objects to watch.
#[derive(Clone, Debug)]
pub struct WatchScope {
    /// `--watch-namespace`: Ingresses, Services, EndpointSlices, Secrets and ConfigMaps only
    /// from here.
    /// `None` watches all namespaces.
    pub namespace: Option<String>,
    /// The controller's ConfigMap: watched by name when it lies outside `namespace` (inside,
    /// the scope's ConfigMap watch holds it).
    pub config_map: NamespacedName,
    /// `--tcp-services-configmap` and `--udp-services-configmap`: watched by name when
    /// outside `namespace`, like `config_map`.
    pub extra_config_maps: Vec<NamespacedName>,
    /// ConfigMaps the controller's ConfigMap names (`proxy-set-headers`, `add-headers`), as
    /// read at start: watched by name when outside `namespace`, like `config_map`. Named
    /// later: [`Watchers::watch_config_map`].
    pub referenced_config_maps: Vec<NamespacedName>,
    /// `--default-tls-secret`: watched on its own when it lies outside `namespace`.
    pub default_tls_secret: Option<NamespacedName>,
}

/// What an Ingress's status says today, and its uid (Events refer to it). The control plane
/// never sees status (writing it must not recompile anything), so the watchers keep it here for
/// the status writer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IngressState {
    pub uid: Option<String>,
    pub load_balancer: Vec<IngressLoadBalancerIngress>,
}

/// Every watched Ingress's [`IngressState`], shared with the status writer.
#[derive(Clone, Debug, Default)]
pub struct IngressStates {
    inner: Arc<IngressStatesInner>,
}

#[derive(Debug, Default)]
struct IngressStatesInner {
    states: Mutex<BTreeMap<NamespacedName, IngressState>>,
    changed: Notify,
}

/// The running watchers and the merged stream of their updates.
pub struct Watchers {
    updates: mpsc::UnboundedReceiver<Update>,
    /// For watches started later ([`Watchers::watch_config_map`]).
    client: Client,
    sender: mpsc::UnboundedSender<Update>,
    scope: WatchScope,
    /// The ConfigMaps watched by name.
    named: BTreeSet<NamespacedName>,
    /// Watchers that have not finished their first list yet.
    unlisted: usize,
    first_lists: FirstLists,
    states: IngressStates,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The watches whose first list has not completed, each with why (its last error), shared
/// between the watcher tasks and the control plane.
#[derive(Clone, Debug, Default)]
pub struct FirstLists {
    waiting: Arc<Mutex<BTreeMap<String, Option<String>>>>,
}

impl FirstLists {
    /// Each watch still waiting for its first list (e.g. `ConfigMap sluice/tcp`), with its
    /// last error (`None`: no answer yet).
    pub fn waiting(&self) -> Vec<(String, Option<String>)> {
        self.lock()
            .iter()
            .map(|(watch, why)| (watch.clone(), why.clone()))
            .collect()
    }

    /// One line naming each watch still waiting and why.
    pub fn describe(&self) -> String {
        self.waiting()
            .into_iter()
            .map(|(watch, why)| format!("{watch}: {}", why.as_deref().unwrap_or("no answer yet")))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Option<String>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl IngressStates {
    /// One Ingress's state, if it is watched.
    pub fn get(&self, key: &NamespacedName) -> Option<IngressState> {
        self.lock().get(key).cloned()
    }

    /// The status writes a pass has to make: `want` says what an Ingress's load-balancer list
    /// should be (`None`: not ours to touch), and only the Ingresses whose list differs come
    /// back, with the list to write. Decided under the lock, so a pass over tens of thousands
    /// of Ingresses copies only what it writes, not every state.
    pub fn writes<'a>(
        &self,
        mut want: impl FnMut(&NamespacedName, &IngressState) -> Option<&'a [IngressLoadBalancerIngress]>,
    ) -> Vec<(NamespacedName, Vec<IngressLoadBalancerIngress>)> {
        self.lock()
            .iter()
            .filter_map(|(key, state)| {
                let want = want(key, state)?;
                (state.load_balancer != want).then(|| (key.clone(), want.to_vec()))
            })
            .collect()
    }

    /// Records what a status write just set, so a pass before the watch event does not write
    /// it again.
    pub fn record(&self, key: &NamespacedName, load_balancer: Vec<IngressLoadBalancerIngress>) {
        if let Some(state) = self.lock().get_mut(key) {
            state.load_balancer = load_balancer;
        }
    }

    /// Resolves when an Ingress appeared, disappeared or had its status changed by someone.
    pub async fn changed(&self) {
        self.inner.changed.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<NamespacedName, IngressState>> {
        // A panic while holding this lock cannot leave the map half-updated in a way that
        // matters (each write is one insert or remove), so a poisoned lock is still usable.
        self.inner
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn set(&self, key: NamespacedName, state: Option<IngressState>) {
        let mut states = self.lock();
        let changed = match state {
            Some(state) => states.insert(key, state.clone()).as_ref() != Some(&state),
            None => states.remove(&key).is_some(),
        };
        drop(states);
        if changed {
            self.inner.changed.notify_one();
        }
    }
}

impl WatchScope {
    /// The ConfigMaps named by flags (and the settings) that the scope's ConfigMap watch does
    /// not see, each once.
    pub fn outside_config_maps(&self) -> Vec<&NamespacedName> {
        let mut outside: Vec<&NamespacedName> = Vec::new();
        let named = std::iter::once(&self.config_map)
            .chain(&self.extra_config_maps)
            .chain(&self.referenced_config_maps);
        for config_map in named {
            if !self.sees(config_map) && !outside.contains(&config_map) {
                outside.push(config_map);
            }
        }
        outside
    }

    /// Whether the scope's ConfigMap watch sees `config_map`.
    fn sees(&self, config_map: &NamespacedName) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|watched| watched == &*config_map.namespace)
    }
}

impl Watchers {
    /// Starts one watcher per kind on the current tokio runtime.
    pub fn start(client: &Client, scope: &WatchScope) -> Watchers {
        let (sender, updates) = mpsc::unbounded_channel();
        fn namespaced<K>(client: &Client, namespace: Option<&str>) -> Api<K>
        where
            K: Watched + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
            K::DynamicType: Default,
        {
            match namespace {
                Some(namespace) => Api::namespaced(client.clone(), namespace),
                None => Api::all(client.clone()),
            }
        }
        let namespace = scope.namespace.as_deref();
        let in_scope = |kind: &str| match namespace {
            Some(namespace) => format!("{kind} in namespace {namespace}"),
            None => format!("{kind} in all namespaces"),
        };
        let states = IngressStates::default();
        let first_lists = FirstLists::default();
        let spawner = Spawner {
            sender: &sender,
            first_lists: &first_lists,
        };
        let mut tasks = Vec::new();
        let all = watcher::Config::default();
        tasks.push(spawner.spawn::<Ingress>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("Ingresses"),
            Some(states.clone()),
        ));
        tasks.push(spawner.spawn::<IngressClass>(
            Api::all(client.clone()),
            all.clone(),
            "IngressClasses".into(),
            None,
        ));
        tasks.push(spawner.spawn::<Service>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("Services"),
            None,
        ));
        tasks.push(spawner.spawn::<EndpointSlice>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("EndpointSlices"),
            None,
        ));
        // TLS Secrets (certificates) and Opaque ones (basic auth's users, `auth-secret`;
        // client certificates' CAs, `auth-tls-secret`):
        // never service-account tokens, Helm releases or the other kinds the controller has
        // no use for.
        let tls_only = all.clone().fields("type=kubernetes.io/tls");
        tasks.push(spawner.spawn::<Secret>(
            namespaced(client, namespace),
            tls_only,
            in_scope("TLS Secrets"),
            None,
        ));
        let opaque_only = all.clone().fields("type=Opaque");
        tasks.push(spawner.spawn::<Secret>(
            namespaced(client, namespace),
            opaque_only,
            in_scope("Opaque Secrets"),
            None,
        ));
        if let Some(secret) = &scope.default_tls_secret {
            if scope
                .namespace
                .as_ref()
                .is_some_and(|watched| **watched != *secret.namespace)
            {
                tasks.push(spawner.spawn::<Secret>(
                    Api::namespaced(client.clone(), &secret.namespace),
                    one_named(&secret.name),
                    format!("Secret {secret} (--default-tls-secret)"),
                    None,
                ));
            }
        }
        // Every ConfigMap of the scope, as ingress-nginx's store holds them: Ingresses name
        // theirs (`custom-headers`, `auth-proxy-set-headers`) and the controller's may name
        // more (`proxy-set-headers`, `add-headers`).
        tasks.push(spawner.spawn::<ConfigMap>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("ConfigMaps"),
            None,
        ));
        // Gateway API, when its CRDs are installed (a 404 counts as listed and empty, see
        // `not_installed`). Gateways, routes and grants in the scope, as Ingresses are.
        tasks.push(spawner.spawn::<ApiObject<GatewayClasses>>(
            Api::all(client.clone()),
            all.clone(),
            "GatewayClasses".into(),
            None,
        ));
        tasks.push(spawner.spawn::<ApiObject<Gateways>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("Gateways"),
            None,
        ));
        tasks.push(spawner.spawn::<ApiObject<HttpRoutes>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("HTTPRoutes"),
            None,
        ));
        tasks.push(spawner.spawn::<ApiObject<GrpcRoutes>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("GRPCRoutes"),
            None,
        ));
        // TLSRoute v1 (standard channel since v1.5; older CRDs serve v1alpha2 only: 404).
        tasks.push(spawner.spawn::<ApiObject<TlsRoutes>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("TLSRoutes"),
            None,
        ));
        // TCPRoute and UDPRoute v1 (standard channel since v1.7; older CRDs serve v1alpha2
        // only, in the experimental channel: 404, as a missing kind).
        tasks.push(spawner.spawn::<ApiObject<TcpRoutes>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("TCPRoutes"),
            None,
        ));
        tasks.push(spawner.spawn::<ApiObject<UdpRoutes>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("UDPRoutes"),
            None,
        ));
        tasks.push(spawner.spawn::<ApiObject<ReferenceGrants>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("ReferenceGrants"),
            None,
        ));
        // The CA ConfigMaps they name come with the scope's ConfigMap watch above.
        tasks.push(spawner.spawn::<ApiObject<BackendTlsPolicies>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("BackendTLSPolicies"),
            None,
        ));
        tasks.push(spawner.spawn::<ApiObject<ListenerSets>>(
            namespaced(client, namespace),
            all.clone(),
            in_scope("ListenerSets"),
            None,
        ));
        // Namespaces' labels, for Gateway listeners that select route namespaces by label (a
        // change recompiles only while one does: `ChangeSet::namespaces`). Not in a
        // one-namespace scope, whose Role grants no cluster-scoped kind: there a namespace
        // has only the label the API server sets, its name.
        if namespace.is_none() {
            tasks.push(spawner.spawn::<Namespace>(
                Api::all(client.clone()),
                all.clone(),
                "Namespaces".into(),
                None,
            ));
        }
        // ClusterTrustBundles (cluster-scoped CA bundles that BackendTLSPolicies and Gateways'
        // frontend validation may name), all of them, in every scope: a bundle is named by
        // objects that arrive at any time, and one watch that has listed means a reference
        // resolves in the compile that first sees it (a watch per named bundle, started on
        // demand, would leave each new reference unresolved until it listed). A change
        // recompiles only if the last compile read that bundle (`ChangeSet`); what is kept is
        // each bundle's PEM text. An API server without the API (off by default in 1.35)
        // answers 404: no bundles, and a reference says the cluster does not serve them.
        tasks.push(spawner.spawn::<ClusterTrustBundle>(
            Api::all(client.clone()),
            all.clone(),
            "ClusterTrustBundles".into(),
            None,
        ));
        // The ConfigMaps named by flags may live outside the scope: those are watched by name
        // (RBAC may grant exactly them). One inside it is left to the scope's watch, so no
        // ConfigMap comes from two watches (a relist of one would drop what the other holds).
        let named: BTreeSet<NamespacedName> =
            scope.outside_config_maps().into_iter().cloned().collect();
        for config_map in &named {
            tasks.push(spawner.spawn_config_map(client, config_map));
        }
        Watchers {
            updates,
            client: client.clone(),
            sender,
            scope: scope.clone(),
            named,
            unlisted: tasks.len(),
            first_lists,
            states,
            tasks,
        }
    }

    /// After the initial sync: starts watching `config_map` by name when neither the scope's
    /// ConfigMap watch nor a watch by name holds it yet (a ConfigMap the controller's ConfigMap
    /// names since start). `true` when a watch started. Readiness is not withdrawn for it (it
    /// may be one RBAC does not grant: its first failure is logged naming the grant).
    pub fn watch_config_map(&mut self, config_map: &NamespacedName) -> bool {
        if self.scope.sees(config_map) || self.named.contains(config_map) {
            return false;
        }
        let spawner = Spawner {
            sender: &self.sender,
            first_lists: &self.first_lists,
        };
        let task = spawner.spawn_config_map(&self.client, config_map);
        // Not waited for: its first list is not counted (see `observe`).
        self.first_lists
            .lock()
            .remove(&format!("ConfigMap {config_map}"));
        self.unlisted += 1;
        self.tasks.push(task);
        self.named.insert(config_map.clone());
        true
    }

    /// The watches that have not listed yet, and why.
    pub fn first_lists(&self) -> &FirstLists {
        &self.first_lists
    }

    /// The next update; `None` only if every watcher has stopped (they do not, short of a panic).
    pub async fn next(&mut self) -> Option<Update> {
        let update = self.updates.recv().await?;
        Some(self.observe(update))
    }

    /// An update that is already waiting, without waiting for one.
    pub fn try_next(&mut self) -> Option<Update> {
        let update = self.updates.try_recv().ok()?;
        Some(self.observe(update))
    }

    /// True once every watcher has completed its first list: only then is the Store complete
    /// enough to publish (before that, a route could be missing only because its Service had not
    /// been listed yet).
    pub fn synced(&self) -> bool {
        self.unlisted == 0
    }

    pub fn ingress_states(&self) -> IngressStates {
        self.states.clone()
    }

    /// Counts first lists.
    fn observe(&mut self, update: Update) -> Update {
        if let Update::Relisted { first: true, .. } = update {
            self.unlisted = self.unlisted.saturating_sub(1);
        }
        update
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Whether a watch failed because the API server has no such resource (a CRD not installed).
fn not_installed(error: &watcher::Error) -> bool {
    api_status(error).is_some_and(|status| status.code == 404)
}

/// Whether a watch failed because the ServiceAccount may not read the resource (RBAC).
fn forbidden(error: &watcher::Error) -> bool {
    api_status(error).is_some_and(|status| status.code == 403)
}

/// 410 Gone ("too old resource version", reason Expired): the API server no longer holds the
/// history a watch resumed from (etcd compacted it, or its watch cache was rebuilt). Routine,
/// not an outage: the watcher lists again, and the list's end says what changed meanwhile.
/// client-go's reflector logs it at V(4) for the same reason.
fn expired(error: &watcher::Error) -> bool {
    api_status(error).is_some_and(|status| status.code == 410)
}

/// What the API server answered, when the error is its answer.
fn api_status(error: &watcher::Error) -> Option<&kube::core::Status> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchError(status) => Some(status),
        _ => None,
    }
}

fn object_ref<K: Watched>(object: &K) -> ObjectRef {
    ObjectRef::new(
        K::KIND,
        object.namespace().unwrap_or_default(),
        object.name_any(),
    )
}

/// Gateway API kinds: optional (their CRDs may not be installed), read through translate's
/// own types (`gateway.rs`).
impl<K: GatewayKind> Watched for ApiObject<K> {
    const KIND: Kind = K::KIND;
    const OPTIONAL: bool = true;

    fn into_object(self) -> Option<Object> {
        self.into_store_object()
    }
}

fn one_named(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

/// A kind the provider watches. Each object becomes the Store's slim [`Object`] in the
/// watcher's task, as it arrives: the whole API object (and a list page of them) is the only
/// transient, never a list's worth.
pub(super) trait Watched:
    Resource + Clone + Debug + DeserializeOwned + Send + 'static
{
    const KIND: Kind;
    /// A kind whose resource a cluster may not have (a CRD the user installs): a 404 means
    /// "none of these", not a failure (see `not_installed`).
    const OPTIONAL: bool = false;
    /// The Store's object; `None` leaves it out (logged where it is made).
    fn into_object(self) -> Option<Object>;
    /// What the status writer needs from the object before it is slimmed (Ingresses only).
    fn state(&self) -> Option<IngressState> {
        None
    }
}

macro_rules! watched {
    ($($type:ty => $kind:ident),* $(,)?) => {$(
        impl Watched for $type {
            const KIND: Kind = Kind::$kind;
            fn into_object(self) -> Option<Object> {
                Some(Object::from(self))
            }
        }
    )*};
}

watched! {
    IngressClass => IngressClass,
    Service => Service,
    EndpointSlice => EndpointSlice,
    Secret => Secret,
    ConfigMap => ConfigMap,
    Namespace => Namespace,
}

/// Built into the API server, but off by default (Kubernetes 1.35: a beta API behind the
/// `ClusterTrustBundle` feature gate and `--runtime-config`): a 404 means "not served".
impl Watched for ClusterTrustBundle {
    const KIND: Kind = Kind::ClusterTrustBundle;
    const OPTIONAL: bool = true;

    fn into_object(self) -> Option<Object> {
        Some(Object::from(self))
    }
}

impl Watched for Ingress {
    const KIND: Kind = Kind::Ingress;

    fn into_object(self) -> Option<Object> {
        Some(Object::from(self))
    }

    fn state(&self) -> Option<IngressState> {
        let state = IngressState {
            uid: self.metadata.uid.clone(),
            load_balancer: self
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.clone())
                .unwrap_or_default(),
        };
        Some(state)
    }
}

/// What every watcher task gets besides its own API and label.
struct Spawner<'a> {
    sender: &'a mpsc::UnboundedSender<Update>,
    first_lists: &'a FirstLists,
}

impl Spawner<'_> {
    /// A watch of one ConfigMap by name.
    fn spawn_config_map(
        &self,
        client: &Client,
        config_map: &NamespacedName,
    ) -> tokio::task::JoinHandle<()> {
        self.spawn::<ConfigMap>(
            Api::namespaced(client.clone(), &config_map.namespace),
            one_named(&config_map.name),
            format!("ConfigMap {config_map}"),
            None,
        )
    }

    /// Starts one watcher; `watch` names it to the operator until its first list.
    fn spawn<K: Watched>(
        &self,
        api: Api<K>,
        config: watcher::Config,
        watch: String,
        states: Option<IngressStates>,
    ) -> tokio::task::JoinHandle<()>
    where
        K::DynamicType: Default,
    {
        self.first_lists.lock().insert(watch.clone(), None);
        let first_list = FirstList {
            watch,
            lists: self.first_lists.clone(),
        };
        tokio::spawn(run::<K>(
            api,
            config,
            self.sender.clone(),
            states,
            first_list,
        ))
    }
}

/// One watcher's entry in [`FirstLists`], until its first list.
struct FirstList {
    watch: String,
    lists: FirstLists,
}

impl FirstList {
    fn failed(&self, why: String) {
        if let Some(entry) = self.lists.lock().get_mut(&self.watch) {
            *entry = Some(why);
        }
    }

    fn done(&self) {
        self.lists.lock().remove(&self.watch);
    }
}

/// A watch error as the operator should read it: a refusal names the permission to grant.
fn explain<K: Watched>(error: &watcher::Error) -> String
where
    K::DynamicType: Default,
{
    let status = api_status(error);
    let resource = K::plural(&K::DynamicType::default()).into_owned();
    match status {
        Some(status) if status.code == 403 => format!(
            "the API server refused (403 Forbidden: {}); grant Sluice's ServiceAccount get, \
             list and watch on {resource} (deploy/manifests/sluice.yaml and the Helm chart's \
             RBAC hold what Sluice reads)",
            status.message
        ),
        Some(status) if status.code == 401 => format!(
            "the API server does not accept Sluice's credentials (401 Unauthorized: {}); check \
             the ServiceAccount token or --kubeconfig",
            status.message
        ),
        _ => error.to_string(),
    }
}

/// Records an Ingress's status and uid for the status writer (`states`: the Ingress
/// watcher's), and turns the object into the Store's; `known` gets its key (which the states
/// share).
fn arrived<K: Watched>(
    object: K,
    known: &mut BTreeSet<NamespacedName>,
    states: Option<&IngressStates>,
) -> Option<Object> {
    let object = normalise(object);
    let state = object.state();
    let mut object = object.into_object()?;
    let key = known_key(known, object.key());
    // The object carries the same strings to the Store, which keys it by them.
    object.share_key(&key);
    if let (Some(states), Some(state)) = (states, state) {
        states.set(key.clone(), Some(state));
    }
    known.insert(key);
    Some(object)
}

/// `key` as `known` holds it: its own key when it has an equal one, else with the namespace
/// string of a neighbour that has the same (keys sort by namespace first): one string per
/// namespace, not per object.
fn known_key(known: &BTreeSet<NamespacedName>, mut key: NamespacedName) -> NamespacedName {
    if let Some(existing) = known.get(&key) {
        return existing.clone();
    }
    let neighbour = known
        .range(..=&key)
        .next_back()
        .or_else(|| known.range(&key..).next());
    if let Some(existing) = neighbour.filter(|n| n.namespace == key.namespace) {
        key.namespace = existing.namespace.clone();
    }
    key
}

/// Drives one watcher until the receiver goes away.
async fn run<K: Watched>(
    api: Api<K>,
    config: watcher::Config,
    sender: mpsc::UnboundedSender<Update>,
    states: Option<IngressStates>,
    first_list: FirstList,
) where
    K::DynamicType: Default,
{
    let kind = K::KIND;
    // Retries are paced here, not by kube-rs's `StreamBackoff`: that one starts over on any
    // `Ok` event, and the watcher yields `Init` (an `Ok`) before every list it tries, so a
    // list that keeps failing (an optional kind not installed, an API server away while a
    // watch must list again) was retried every 0.25–0.5 s forever. Here only what the API
    // server returned (objects, the list's end, watch events) counts as progress.
    let mut stream = watcher(api, config).boxed();
    let mut retry = RetryDelays::default();
    // An optional kind not installed is asked about more slowly: it is no outage, and every
    // replica of a DaemonSet asks.
    let mut absent_retry = RetryDelays::up_to(ABSENT_LAST_RETRY);
    // What this watcher has delivered, so a relist can say what disappeared meanwhile (one
    // kind per watcher: namespace and name say which object).
    let mut known: BTreeSet<NamespacedName> = BTreeSet::new();
    // A (re)list in progress: its objects and their keys.
    let mut listing: Option<(Vec<Object>, BTreeSet<NamespacedName>)> = None;
    let mut listed_once = false;
    let mut failures = 0u32;
    // False while the API server answers 404 for an optional kind's resource.
    let mut installed = true;
    // True while an optional kind that could never be listed answers 403 (see below).
    let mut unreadable = false;
    while let Some(event) = stream.next().await {
        let event = match event {
            // `Init` comes before the list request: only what the list or watch returned
            // proves the resource exists, the API server answers, or a retry worked.
            Ok(watcher::Event::Init) => watcher::Event::Init,
            Ok(event) => {
                retry.reset();
                absent_retry.reset();
                if !installed {
                    installed = true;
                    tracing::info!(%kind, "{kind} is installed now; watching it");
                }
                if unreadable {
                    unreadable = false;
                    tracing::info!(%kind, "{kind} objects can be read now; watching them");
                }
                if failures > 0 {
                    tracing::info!(%kind, failures, "Kubernetes API reachable again; watch resumed");
                    failures = 0;
                }
                event
            }
            Err(error) if K::OPTIONAL && not_installed(&error) => {
                // Not an outage: the cluster has no such resource, so it has none of these
                // objects. Said once per change; asked again after a backoff (at most every
                // 30 s), so installing the CRDs later is noticed.
                failures = 0;
                let was_installed = installed;
                if installed {
                    installed = false;
                    tracing::info!(
                        %kind,
                        "{} is not installed in this cluster (404); serving without \
                         {kind} objects and checking again (every 30 s at most)",
                        K::plural(&K::DynamicType::default()),
                    );
                }
                listing = None;
                // Told once per change (and the first time, which counts as a list).
                if was_installed || !known.is_empty() {
                    let gone = std::mem::take(&mut known)
                        .into_iter()
                        .map(|key| ObjectRef::new(kind, &*key.namespace, &*key.name))
                        .collect();
                    let first = !listed_once;
                    if first {
                        first_list.done();
                    }
                    listed_once = true;
                    if sender
                        .send(Update::Relisted {
                            kind,
                            objects: Vec::new(),
                            gone,
                            first,
                            served: false,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
                let delay = absent_retry.next_delay();
                tracing::debug!(%kind, retry_in = ?delay, "{kind} is still not installed");
                tokio::time::sleep(delay).await;
                continue;
            }
            Err(error) if K::OPTIONAL && forbidden(&error) && (!listed_once || unreadable) => {
                // The ServiceAccount may not read an optional kind it never could: serve
                // without it rather than stay not ready (ingress-nginx's chart's RBAC has no
                // Gateway API, and its users switching the image have no Gateway objects).
                // Only before the first list: once read, a 403 keeps the last good objects,
                // as any other failure does (revoked RBAC must not drop routes).
                if !unreadable {
                    unreadable = true;
                    tracing::warn!(
                        %kind,
                        "{plural} cannot be read ({why}); serving without {kind} objects until \
                         they can (checked again every 30 s at most)",
                        plural = K::plural(&K::DynamicType::default()),
                        why = explain::<K>(&error),
                    );
                }
                if !listed_once {
                    listed_once = true;
                    first_list.done();
                    let update = Update::Relisted {
                        kind,
                        objects: Vec::new(),
                        gone: Vec::new(),
                        first: true,
                        served: false,
                    };
                    if sender.send(update).is_err() {
                        return;
                    }
                }
                tokio::time::sleep(absent_retry.next_delay()).await;
                continue;
            }
            Err(error) if expired(&error) => {
                tracing::debug!(
                    %kind,
                    watch = %first_list.watch,
                    "watch expired ({error}); listing again"
                );
                continue;
            }
            Err(error) => {
                failures += 1;
                let why = explain::<K>(&error);
                // The first failure is news; repeats while the API server is away are not
                // (the control plane repeats what still blocks readiness).
                if failures == 1 {
                    tracing::warn!(
                        %kind,
                        watch = %first_list.watch,
                        "watching the Kubernetes API failed: {why}; serving the last good \
                         configuration and retrying with backoff"
                    );
                } else {
                    tracing::debug!(%kind, failures, "watch still failing: {why}");
                }
                if !listed_once {
                    first_list.failed(why);
                }
                tokio::time::sleep(retry.next_delay()).await;
                continue;
            }
        };
        let update = match event {
            watcher::Event::Init => {
                listing = Some(Default::default());
                continue;
            }
            watcher::Event::InitApply(object) => {
                let (objects, keys) = listing.get_or_insert_with(Default::default);
                objects.extend(arrived(object, keys, states.as_ref()));
                continue;
            }
            watcher::Event::InitDone => {
                let (objects, now) = listing.take().unwrap_or_default();
                let gone: Vec<&NamespacedName> = known.difference(&now).collect();
                if let Some(states) = &states {
                    for key in &gone {
                        states.set((*key).clone(), None);
                    }
                }
                let gone: Vec<ObjectRef> = gone
                    .into_iter()
                    .map(|key| ObjectRef::new(kind, &*key.namespace, &*key.name))
                    .collect();
                tracing::debug!(%kind, objects = objects.len(), gone = gone.len(), "listed");
                known = now;
                let first = !listed_once;
                if first {
                    first_list.done();
                }
                listed_once = true;
                Update::Relisted {
                    kind,
                    objects,
                    gone,
                    first,
                    served: true,
                }
            }
            watcher::Event::Apply(object) => {
                let object_ref = object_ref::<K>(&object);
                match arrived(object, &mut known, states.as_ref()) {
                    Some(object) => Update::Apply(object),
                    // Changed into something Sluice cannot read: no longer served.
                    None => {
                        known.remove(&NamespacedName::new(
                            object_ref.namespace.as_str(),
                            object_ref.name.as_str(),
                        ));
                        Update::Delete(object_ref)
                    }
                }
            }
            watcher::Event::Delete(object) => {
                let object_ref = object_ref::<K>(&object);
                let key =
                    NamespacedName::new(object_ref.namespace.as_str(), object_ref.name.as_str());
                known.remove(&key);
                if let Some(states) = &states {
                    states.set(key, None);
                }
                Update::Delete(object_ref)
            }
        };
        if sender.send(update).is_err() {
            return;
        }
    }
}

const FIRST_RETRY: Duration = Duration::from_millis(500);
/// client-go's shape (exponential with jitter) but capped at 8 s instead of 30 s: after an API
/// server restart, changes reach traffic within seconds. Eleven watches per replica (and one per
/// object named outside --watch-namespace) retrying every few seconds is still light load for a
/// recovering server.
const LAST_RETRY: Duration = Duration::from_secs(8);
/// For an optional kind the cluster does not have (Gateway API's without its CRDs): client-go's
/// cap. Thirteen such kinds per replica at 8 s would be a LIST every 0.6 s from every node of a
/// DaemonSet, for objects that do not exist.
const ABSENT_LAST_RETRY: Duration = Duration::from_secs(30);

/// 0.5 s, 1 s, 2 s, 4 s, 8 s, 8 s, … (up to the cap) each shortened by up to half at random, so
/// replicas that lost the API server together do not all come back in the same millisecond.
struct RetryDelays {
    next: Duration,
    last: Duration,
}

impl Default for RetryDelays {
    fn default() -> RetryDelays {
        RetryDelays::up_to(LAST_RETRY)
    }
}

impl RetryDelays {
    fn up_to(last: Duration) -> RetryDelays {
        RetryDelays {
            next: FIRST_RETRY,
            last,
        }
    }

    fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (delay * 2).min(self.last);
        delay.mul_f64(0.5 + fastrand::f64() / 2.0)
    }

    /// The API server answered: the next failure is news again, retried soon.
    fn reset(&mut self) {
        self.next = FIRST_RETRY;
    }
}

/// `kubectl apply`'s copy of the whole object (for a Secret: its keys again, in clear JSON).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what the Store must not compare: the resourceVersion and managedFields change on
/// every write (a status update would otherwise look like a configuration change). Also
/// `kubectl apply`'s last-applied annotation, which nothing reads: a second copy of every
/// object kept in memory.
fn normalise<K: Watched>(mut object: K) -> K {
    let meta = object.meta_mut();
    meta.resource_version = None;
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_watch_is_routine_and_a_missing_resource_is_not_an_outage() {
        let answer = |code: u16, reason: &str| {
            Box::new(kube::core::Status {
                code,
                reason: reason.to_owned(),
                ..kube::core::Status::default()
            })
        };
        let gone = watcher::Error::WatchError(answer(410, "Expired"));
        let gone_list = watcher::Error::InitialListFailed(kube::Error::Api(answer(410, "Expired")));
        let missing = watcher::Error::WatchStartFailed(kube::Error::Api(answer(404, "NotFound")));
        let broken = watcher::Error::WatchFailed(kube::Error::Api(answer(500, "InternalError")));
        assert!(expired(&gone) && expired(&gone_list));
        assert!(!expired(&missing) && !expired(&broken));
        assert!(!expired(&watcher::Error::NoResourceVersion));
        assert!(not_installed(&missing));
        assert!(!not_installed(&gone) && !not_installed(&broken));
    }

    #[test]
    fn what_changes_on_every_write_and_kubectls_copy_are_dropped_and_annotations_kept() {
        use k8s_openapi::api::networking::v1::Ingress;
        let mut ingress = Ingress::default();
        ingress.metadata.resource_version = Some("42".into());
        ingress.metadata.annotations = Some(
            [
                (LAST_APPLIED.to_owned(), "{\"a huge\": \"copy\"}".to_owned()),
                (
                    "nginx.ingress.kubernetes.io/rewrite-target".to_owned(),
                    "/$1".to_owned(),
                ),
            ]
            .into(),
        );
        let ingress = normalise(ingress);
        assert_eq!(ingress.metadata.resource_version, None);
        assert_eq!(
            ingress.metadata.annotations,
            Some(
                [(
                    "nginx.ingress.kubernetes.io/rewrite-target".to_owned(),
                    "/$1".to_owned()
                )]
                .into()
            )
        );
        let mut only_kubectl = Ingress::default();
        only_kubectl.metadata.annotations =
            Some([(LAST_APPLIED.to_owned(), "{}".to_owned())].into());
        assert_eq!(normalise(only_kubectl).metadata.annotations, None);
    }

    #[test]
    fn an_ingress_leaves_its_status_and_uid_with_the_states_and_the_rest_goes_on() {
        let ingress: Ingress = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "app", "uid": "4b1e5c3a",
                         "resourceVersion": "7"},
            "spec": {"rules": [{"host": "web.test"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
        }))
        .unwrap();
        let states = IngressStates::default();
        let mut known = BTreeSet::new();
        let Some(Object::Ingress(stored)) = arrived(ingress.clone(), &mut known, Some(&states))
        else {
            unreachable!()
        };
        assert_eq!(stored.spec, ingress.spec);
        let state = states.get(&NamespacedName::new("app", "web")).unwrap();
        assert_eq!(state.uid.as_deref(), Some("4b1e5c3a"));
        assert_eq!(state.load_balancer[0].ip.as_deref(), Some("192.0.2.1"));
    }

    #[test]
    fn config_maps_named_by_flags_are_watched_by_name_only_outside_the_scope_and_once() {
        let scope = |namespace: Option<&str>| WatchScope {
            namespace: namespace.map(str::to_owned),
            config_map: NamespacedName::new("sluice", "sluice"),
            extra_config_maps: vec![
                NamespacedName::new("sluice", "tcp"),
                NamespacedName::new("shop", "udp"),
                NamespacedName::new("sluice", "tcp"),
            ],
            referenced_config_maps: vec![NamespacedName::new("shared", "headers")],
            default_tls_secret: None,
        };
        // All namespaces: the scope's watch sees every one.
        assert!(scope(None).outside_config_maps().is_empty());
        let names = |namespace| -> Vec<String> {
            scope(Some(namespace))
                .outside_config_maps()
                .iter()
                .map(|n| n.to_string())
                .collect()
        };
        assert_eq!(
            names("shop"),
            ["sluice/sluice", "sluice/tcp", "shared/headers"]
        );
        assert_eq!(names("sluice"), ["shop/udp", "shared/headers"]);
        assert_eq!(names("shared"), ["sluice/sluice", "sluice/tcp", "shop/udp"]);
    }

    #[test]
    fn retries_double_up_to_a_cap_with_jitter_and_start_over_after_a_reset() {
        let mut delays = RetryDelays::default();
        let first: Vec<Duration> = (0..7).map(|_| delays.next_delay()).collect();
        let ceilings = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0];
        for (delay, ceiling) in first.iter().zip(ceilings) {
            let ceiling = Duration::from_secs_f64(ceiling);
            assert!(
                *delay <= ceiling && *delay >= ceiling / 2,
                "{delay:?} vs {ceiling:?}"
            );
        }
        delays.reset();
        assert!(delays.next_delay() <= FIRST_RETRY);
        let mut absent = RetryDelays::up_to(ABSENT_LAST_RETRY);
        let last = (0..10).map(|_| absent.next_delay()).last().unwrap();
        assert!(last <= ABSENT_LAST_RETRY && last >= ABSENT_LAST_RETRY / 2);
    }
}
