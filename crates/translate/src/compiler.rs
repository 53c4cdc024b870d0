//! The state one compile builds up, and what every source's translation (`ingress/`, and
//! `gateway/` later) shares: the options, the output under construction, shared strings,
//! diagnostics.
//!
//! ```text
//!  compile.rs ─▶ ingress/ (and later gateway/) ─▶ compiler.rs (this: Compiler, CompileOptions)
//!                                                └▶ backends.rs, store.rs, model
//! ```
//! Below the sources, so that they depend on it and it on none of them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use model::policy::{ErrorBackend, RoutePolicy};
use model::{
    Backend, BackendKey, Compiled, Diagnostic, NamespacedName, NodeLocalEndpoints, ObjectRef,
    Route, Severity,
};

use crate::ingress::annotations::BackendProtocol;
use crate::ingress::claims::HostExtras;
use crate::objects::{ClusterTrustBundle, ConfigMap};
use crate::store::Store;

pub(crate) const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
pub(crate) const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Why a Gateway API route's backendRef may not name an ExternalName Service: the spec leaves
/// them to the implementation and advises against following them by default (a route's author
/// could reach any name, past ReferenceGrants and the node-local policy's intent).
const GATEWAY_EXTERNAL_NAME: &str = "Gateway API routes do not follow ExternalName Services in \
     Sluice (the spec leaves them to the implementation and advises against them); use a \
     Service with a selector, or one without and EndpointSlices that list the addresses";

/// Which objects are ours and where the controller settings live.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// `--ingress-class`: also honoured in the legacy annotation, and as an `ingressClassName`
    /// when no IngressClass object of that name exists (standalone configs may omit it).
    pub ingress_class: String,
    /// `--controller-class`: the `spec.controller` of IngressClasses we implement.
    pub controller_class: String,
    pub config_map: NamespacedName,
    pub default_tls_secret: Option<NamespacedName>,
    /// Whether EndpointSlice addresses that point at the node itself (loopback, link-local,
    /// unspecified) take traffic: allowed for standalone configs, refused in Kubernetes mode
    /// unless `--allow-loopback-endpoints`.
    pub node_local_endpoints: NodeLocalEndpoints,
    /// `--default-backend-service`: answers requests no rule matches (ingress-nginx: its
    /// first port), unless an Ingress sets `spec.defaultBackend`.
    pub default_backend_service: Option<NamespacedName>,
    /// `--watch-ingress-without-class`: also serve Ingresses that name no class at all.
    pub watch_ingress_without_class: bool,
    /// `--ingress-class-by-name`: an IngressClass named `ingress_class` is ours whatever its
    /// `spec.controller` says.
    pub ingress_class_by_name: bool,
    /// `--enable-ssl-passthrough`: the `ssl-passthrough` annotation takes effect.
    pub enable_ssl_passthrough: bool,
    /// `--tcp-services-configmap`: the ConfigMap whose entries open TCP service ports.
    pub tcp_services_config_map: Option<NamespacedName>,
    /// `--udp-services-configmap`: the ConfigMap whose entries open UDP service ports.
    pub udp_services_config_map: Option<NamespacedName>,
    /// Ports Sluice's own listeners use (HTTP, HTTPS, admin, status, webhook) → which
    /// listener: a TCP or UDP service entry naming one is refused.
    pub reserved_ports: BTreeMap<u16, String>,
    /// `--disable-svc-external-name` (false): Ingress backends, the default backend and TCP/UDP
    /// service entries may name Services of type ExternalName, whose name Sluice resolves
    /// (`providers::dns`) and dials, as ingress-nginx does.
    pub disable_svc_external_name: bool,
    /// `--gateway-address-pool`: each Gateway gets an address of its own (`gateway/addresses`);
    /// `None`: every Gateway shares Sluice's listeners.
    pub gateway_address_pool: Option<crate::gateway::AddressPool>,
    /// Kubernetes mode: where `--http-listen` and `--https-listen` are bound, for the Service
    /// generated for each Gateway (`gateway/infrastructure`); `None` (a configuration from
    /// files, where there is no API server): nothing is generated.
    pub gateway_services: Option<model::gateway_status::ListenPorts>,
    /// `--disable-catch-all`: an Ingress with a `spec.defaultBackend` is refused whole (an
    /// error diagnostic; the webhook denies it), as ingress-nginx ignores it.
    pub disable_catch_all: bool,
    /// `--watch-namespace-selector`: only the Ingresses of namespaces whose labels it selects
    /// are served; the others are another controller's.
    pub watch_namespace_selector: Option<crate::gateway::NamespaceSelector>,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            ingress_class: "sluice".into(),
            controller_class: "sluice.dev/ingress-controller".into(),
            config_map: NamespacedName::new("sluice", "sluice"),
            default_tls_secret: None,
            node_local_endpoints: NodeLocalEndpoints::Allow,
            default_backend_service: None,
            watch_ingress_without_class: false,
            ingress_class_by_name: false,
            enable_ssl_passthrough: false,
            tcp_services_config_map: None,
            udp_services_config_map: None,
            reserved_ports: BTreeMap::new(),
            disable_svc_external_name: false,
            gateway_address_pool: None,
            gateway_services: None,
            disable_catch_all: false,
            watch_namespace_selector: None,
        }
    }
}

pub(crate) struct Compiler<'a> {
    pub(crate) store: &'a Store,
    pub(crate) out: Compiled,
    /// Ingress backend (service, port as written) → backend, so each is resolved once.
    pub(crate) backends_by_port: HashMap<(NamespacedName, String), Arc<Backend>>,
    /// The ConfigMap's policy, shared by every route without annotations.
    pub(crate) default_policy: Arc<RoutePolicy>,
    /// The ConfigMap's `global-auth-url`, compiled once: `Err` says why the routes it covers
    /// are refused.
    pub(crate) global_auth: Option<Result<Arc<model::auth::ExternalAuth>, String>>,
    /// `--default-backend-service` as the errors phase's backend (`upstream-default-backend`).
    pub(crate) default_error_backend: Option<Arc<ErrorBackend>>,
    /// Where known hosts' unmatched paths go (and what a host's root location forwards to
    /// when its Ingress has no `spec.defaultBackend`): `--default-backend-service`'s route, else
    /// a 404 with the ConfigMap's policy (ingress-nginx's root location of a host whose
    /// Ingress has no annotations: ssl-redirect, add-headers, the ConfigMap's allow-lists).
    pub(crate) host_default: Arc<Route>,
    pub(crate) hosts: HostExtras,
    /// Ingresses with `ssl-passthrough`, in the order they were read.
    pub(crate) passthrough_ingresses: BTreeSet<NamespacedName>,
    /// (Ingress, its policy, Service, protocol) → that policy with the protocol and the
    /// `UpstreamTls` of the Ingress's TLS settings for that Service, so that its routes to one
    /// Service share one. (Policies without annotations are shared between Ingresses; their
    /// TLS settings are not.)
    pub(crate) tls_policies:
        HashMap<(NamespacedName, usize, NamespacedName, BackendProtocol), Arc<RoutePolicy>>,
    /// Every name a route holds (Service, port, host, path), once: 10,000 routes to `/` on
    /// port `http` hold one `/` and one `http`.
    pub(crate) strings: HashSet<Arc<str>>,
    /// Gateway API's BackendTLSPolicies, by target (read before the routes).
    pub(crate) backend_tls: crate::gateway::backend_tls_objects::BackendTls,
    /// The last compile's route fragments, when the caller keeps them (`compile_reusing`).
    pub(crate) fragments: Option<&'a mut crate::gateway::Fragments>,
    /// What the route whose rules are being compiled resolves, for its fragment.
    pub(crate) recording: Option<crate::gateway::fragments::Recording>,
    /// Gateway TCP and UDP listeners' ports (read with Sluice's own, `reserved_ports`).
    pub(crate) stream_ports: crate::gateway::stream_objects::StreamPorts,
    /// Whether the backend references being compiled may name ExternalName Services: the
    /// options' choice for Ingress sources; Gateway API routes set `Refuse` while theirs are.
    pub(crate) external_names: crate::backends::ExternalNames,
    /// `--disable-catch-all`.
    pub(crate) disable_catch_all: bool,
}
impl Compiler<'_> {
    /// The one shared copy of `text` in this configuration.
    pub(crate) fn share(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        self.strings.insert(shared.clone());
        shared
    }

    /// The backend of a Service port (by number, else the name as written), or, with a
    /// diagnostic on `object` saying `field`, why and `outcome`, a backend that never has
    /// endpoints.
    pub(crate) fn backend_or_diagnose(
        &mut self,
        object: &ObjectRef,
        field: &str,
        service: &NamespacedName,
        (number, written_port): (Option<i32>, &str),
        outcome: &str,
    ) -> Arc<Backend> {
        match self.resolve_backend(service, number, written_port) {
            Ok(backend) => backend,
            Err(why) => {
                let reason = format!("{field}: {why}; {outcome}");
                self.diagnose_with(why.severity(), object.clone(), reason);
                Arc::new(Backend::unresolved())
            }
        }
    }

    /// `f`, with the backend references it resolves refused when they name an ExternalName
    /// Service (Gateway API's, `GATEWAY_EXTERNAL_NAME`).
    pub(crate) fn refusing_external_names<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let before = std::mem::replace(
            &mut self.external_names,
            crate::backends::ExternalNames::Refuse(GATEWAY_EXTERNAL_NAME),
        );
        let out = f(self);
        self.external_names = before;
        out
    }

    /// The backend of a Service port (by number, else the name as written): what every
    /// source's backend reference goes through (`backends::resolve`, then `backend_of`).
    pub(crate) fn resolve_backend(
        &mut self,
        service: &NamespacedName,
        number: Option<i32>,
        written_port: &str,
    ) -> Result<Arc<Backend>, crate::backends::Problem> {
        let key = crate::backends::resolve(
            self.store,
            service,
            number,
            written_port,
            self.external_names,
        )?;
        Ok(self.backend_of(key))
    }

    /// This configuration's one backend for `key`: made by this compile, else the last
    /// compile's (through `compile_reusing`: its endpoints re-read, so that route fragments
    /// holding it stay usable), else a new one.
    fn backend_of(&mut self, key: BackendKey) -> Arc<Backend> {
        let backend = self.this_compiles_backend(key);
        if let Some(recording) = &mut self.recording {
            recording.backends.push(backend.clone());
        }
        backend
    }

    fn this_compiles_backend(&mut self, key: BackendKey) -> Arc<Backend> {
        if let Some(backend) = self.out.backends.get(&key) {
            return backend.clone();
        }
        let policy = self.out.node_local_endpoints;
        let last = self.fragments.as_deref().and_then(|f| f.last_backend(&key));
        let backend = match last.cloned() {
            Some(backend) => {
                self.refresh_kept_endpoints(&key, &backend);
                backend
            }
            None => {
                let made =
                    crate::backends::backend(self.store, &key, policy, &mut self.out.backends);
                let version = self.store.endpoints_version(&key.service);
                if let Some(fragments) = self.fragments.as_deref_mut() {
                    fragments.endpoints_stale(&made, version);
                }
                made
            }
        };
        self.out.backends.insert(key, backend.clone());
        backend
    }

    /// A backend kept from the last compile: its endpoints read again from the Store, unless
    /// its Service's slices did not change since they were (the endpoint fast path keeps a
    /// published backend's endpoints current between compiles).
    pub(crate) fn refresh_kept_endpoints(&mut self, key: &BackendKey, backend: &Arc<Backend>) {
        let version = self.store.endpoints_version(&key.service);
        let stale =
            (self.fragments.as_deref_mut()).is_none_or(|f| f.endpoints_stale(backend, version));
        if stale {
            let policy = self.out.node_local_endpoints;
            backend.set_endpoints(crate::backends::endpoints_for(self.store, key, policy));
        }
    }

    pub(crate) fn diagnose(&mut self, object: ObjectRef, reason: impl Into<String>) {
        self.out.diagnostics.push(Diagnostic::new(object, reason));
    }

    pub(crate) fn diagnose_with(
        &mut self,
        severity: Severity,
        object: ObjectRef,
        reason: impl Into<String>,
    ) {
        self.out
            .diagnostics
            .push(Diagnostic::with_severity(severity, object, reason));
    }
}

impl<'a> Compiler<'a> {
    /// The ConfigMap `key` names, from the Store, recorded as read (found or not) so that a
    /// change to it, and only to a ConfigMap some compile read, compiles again.
    pub(crate) fn read_config_map(&mut self, key: &NamespacedName) -> Option<&'a ConfigMap> {
        self.out.config_maps_read.insert(key.clone());
        self.store.config_map(key)
    }

    /// The ClusterTrustBundle `name`, recorded as read (found or not), as
    /// [`Compiler::read_config_map`] does.
    pub(crate) fn read_cluster_trust_bundle(
        &mut self,
        name: &str,
    ) -> Option<&'a ClusterTrustBundle> {
        if !self.out.cluster_trust_bundles_read.contains(name) {
            self.out.cluster_trust_bundles_read.insert(name.to_owned());
        }
        self.store.cluster_trust_bundle(name)
    }
}
