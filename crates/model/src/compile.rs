//! `compile(&Store) -> Compiled`: the whole configuration rebuilt from one snapshot.
//!
//! ```text
//!  Store ─▶ our IngressClasses ─▶ served Ingresses (oldest first) ─▶ hosts × paths ─▶ RouteTable
//!                                        │                     └─▶ backends (Service → port name)
//!                                        │   backend-protocol / port appProtocol + proxy-ssl-secret
//!                                        │                     └─▶ the route's upstream protocol
//!                                        │                         (HTTP/1.1, HTTP/2, gRPC) and TLS
//!                                        └─▶ spec.tls ─▶ Secrets ─▶ Certificates
//!  ConfigMap ─▶ Settings;   every problem ─▶ Diagnostic (and the object or rule is left out)
//! ```
//! Pure and deterministic: no I/O, no clock, sorted iteration. A broken object never stops
//! the rest from compiling; conflicts go to the oldest Ingress, the newer one gets a diagnostic.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::api::networking::v1::IngressBackend;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;
use serde::Serialize;

use crate::annotations::{self, BackendProtocol, IngressAnnotations};
use crate::endpoints::{endpoints_for, Backend, BackendKey, EndpointSet, NodeLocalEndpoints};
use crate::objects::{Ingress, Kind, ObjectRef};
use crate::policy::{HeaderEdit, ProxyProtocolVersion, RoutePolicy, UpstreamProtocol, UpstreamTls};
use crate::routes::{HostPattern, PathKind, PathRoute, Route, RouteSite, RouteTable};
use crate::settings::Settings;
use crate::store::{NamespacedName, Store};
use crate::streams::{StreamService, StreamServiceView};
use crate::tls::{
    certificate_info, certified_key_from_pem, certified_key_from_secret, CertificateInfo,
    Certificates,
};

pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
pub const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

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
}

/// Something about one object an operator must know: it is invalid, or uses what Sluice does
/// not implement, or is served differently than ingress-nginx would. The rest still serves.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    pub object: ObjectRef,
    pub reason: String,
    pub severity: Severity,
}

/// How much a diagnostic changes what is served. The admission webhook refuses `Error`s and
/// returns the others as warnings; `sluice migrate` calls an Ingress with an `Error` or
/// `Unsupported` one "not served as written".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Invalid or refused: the object, rule or annotation is left out (or, where leaving it out
    /// would open access, its routes answer 503).
    Error,
    /// Input Sluice does not implement (yet): ignored, so behaviour differs from ingress-nginx.
    Unsupported,
    /// Names an object that does not exist (yet): a Service (its paths answer 503) or a Secret
    /// (the default certificate is served) until it appears. Valid input: applying a folder, or
    /// cert-manager making the Secret after the Ingress, passes through this state.
    Missing,
    /// Served, but not exactly as ingress-nginx would (a documented, deliberate difference).
    Difference,
    /// Served as ingress-nginx would, in a way that surprises (its documented traps).
    Notice,
    /// Served now, failing soon: a certificate that expires within `tls::EXPIRY_WARNING` or
    /// has expired (clients refuse it).
    Expiring,
}

/// The product of one compile. Immutable; the proxy swaps it in whole.
#[derive(Debug, Default)]
pub struct Compiled {
    pub routes: RouteTable,
    /// Every resolved backend, for the endpoint fast path.
    pub backends: BTreeMap<BackendKey, Arc<Backend>>,
    /// `service-upstream` backends: the Service's cluster IP, changed only by a compile.
    pub service_upstreams: BTreeMap<BackendKey, Arc<Backend>>,
    pub certificates: Certificates,
    pub settings: Settings,
    /// `settings.hsts_header()`, made once here rather than per response.
    pub hsts_header: Option<String>,
    /// The access log's format and filters; `None`: `disable-access-log` or
    /// `disable-http-access-log`.
    pub access_log: Option<crate::access_log::AccessLog>,
    /// TCP services' line format (`log-format-stream`); `None`: `disable-access-log` or
    /// `disable-stream-access-log`.
    pub stream_access_log: Option<crate::access_log::StreamLogFormat>,
    /// Some route traces (`enable-opentelemetry`, ConfigMap or annotation): requests keep a
    /// record for a span. `false`: tracing costs a request this one check.
    pub tracing: bool,
    pub diagnostics: Vec<Diagnostic>,
    /// Ingresses this configuration serves.
    pub ingresses: Vec<NamespacedName>,
    /// `ssl-passthrough` hosts (exact names, lower case) → the route of their `/` path: TLS
    /// connections naming the host in SNI go to its backend undecrypted.
    pub passthrough: HashMap<String, Arc<Route>>,
    /// The policy its backends' endpoints were read with; the fast path keeps applying it.
    pub node_local_endpoints: NodeLocalEndpoints,
    /// TCP services (`--tcp-services-configmap`): listen port → where its connections go.
    /// Their backends are in `backends` too, so endpoint changes reach them on the fast path.
    pub tcp_services: BTreeMap<u16, Arc<StreamService>>,
    /// UDP services (`--udp-services-configmap`): listen port ─▶ where its datagrams go.
    pub udp_services: BTreeMap<u16, Arc<StreamService>>,
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
        }
    }
}

impl Diagnostic {
    /// An [`Severity::Error`].
    pub fn new(object: ObjectRef, reason: impl Into<String>) -> Diagnostic {
        Diagnostic::with_severity(Severity::Error, object, reason)
    }

    pub fn with_severity(
        severity: Severity,
        object: ObjectRef,
        reason: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            object,
            reason: reason.into(),
            severity,
        }
    }
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Unsupported => "unsupported",
            Severity::Missing => "missing",
            Severity::Difference => "difference",
            Severity::Notice => "notice",
            Severity::Expiring => "expiring",
        }
    }
}

impl fmt::Display for Diagnostic {
    /// Errors read as before; the other kinds say what they are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.severity {
            Severity::Error => write!(f, "{}: {}", self.object, self.reason),
            other => write!(f, "{}: {}: {}", self.object, other.as_str(), self.reason),
        }
    }
}

/// Compiles the Store's current content.
pub fn compile(store: &Store, options: &CompileOptions) -> Compiled {
    let mut compiler = Compiler {
        store,
        out: Compiled {
            node_local_endpoints: options.node_local_endpoints,
            ..Compiled::default()
        },
        backends_by_port: HashMap::new(),
        default_policy: Arc::default(),
        hosts: HostExtras::default(),
        passthrough_ingresses: BTreeSet::new(),
        tls_policies: HashMap::new(),
        strings: HashSet::new(),
    };
    compiler.settings(options);
    compiler.out.hsts_header = compiler.out.settings.hsts_header();
    compiler.out.access_log = crate::access_log::AccessLog::from_settings(&compiler.out.settings).0;
    compiler.out.stream_access_log =
        crate::access_log::StreamLogFormat::from_settings(&compiler.out.settings).0;
    compiler.out.tracing = compiler.out.settings.opentelemetry.enabled;
    compiler.default_policy = Arc::new(RoutePolicy::from_settings(&compiler.out.settings));
    let mut ingresses: Vec<(&NamespacedName, &Ingress)> = store
        .ingresses_by_name()
        .filter(|(_, i)| is_ours(store, options, i))
        .collect();
    // Oldest first; objects without a timestamp (files) count as oldest, then by name.
    ingresses.sort_by(|(a_name, a), (b_name, b)| {
        (a.metadata.creation_timestamp.as_ref())
            .cmp(&b.metadata.creation_timestamp.as_ref())
            .then_with(|| a_name.cmp(b_name))
    });

    let mut claims = Claims::default();
    for (name, ingress) in ingresses {
        compiler.ingress(name, ingress, &mut claims);
    }
    compiler.certificates(options, claims.tls);
    if let (None, Some(service)) = (&claims.default_backend, &options.default_backend_service) {
        compiler.default_backend_service(service);
    }
    compiler.finish_hosts();
    compiler.passthrough(options);
    compiler.streams(options);
    compiler.out.routes.finish();
    compiler.out.diagnostics.sort();
    compiler.out.diagnostics.dedup();
    compiler.out.diagnostics.shrink_to_fit();
    compiler.out.ingresses.shrink_to_fit();
    compiler.out
}

/// Why a referenced object cannot be used: it does not exist (yet), or it is unusable.
#[derive(Clone, Debug)]
struct Problem {
    text: String,
    missing: bool,
}

impl Problem {
    fn missing(text: impl Into<String>) -> Problem {
        Problem {
            text: text.into(),
            missing: true,
        }
    }

    fn invalid(text: impl Into<String>) -> Problem {
        Problem {
            text: text.into(),
            missing: false,
        }
    }

    fn severity(&self) -> Severity {
        if self.missing {
            Severity::Missing
        } else {
            Severity::Error
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The policies of one Ingress's routes: shared with the default when it has no annotations
/// that change anything, and without the rewrite for paths equal to their rewrite target.
struct Policies {
    with_rewrite: Arc<RoutePolicy>,
    without_rewrite: Arc<RoutePolicy>,
    /// The ConfigMap's `global-auth-url` covers this Ingress: the policy of its paths outside
    /// `no-auth-locations`, refused until external authentication is implemented.
    global_auth_refused: Option<Arc<RoutePolicy>>,
}

impl Policies {
    /// The policy of a path written `written`; `exempt`: the ConfigMap's `no-auth-locations`.
    fn for_path(&self, written: &str, rewrites: bool, exempt: &[String]) -> Arc<RoutePolicy> {
        match &self.global_auth_refused {
            Some(refused) if !exempt.iter().any(|l| written.starts_with(l.as_str())) => {
                refused.clone()
            }
            _ if rewrites => self.with_rewrite.clone(),
            _ => self.without_rewrite.clone(),
        }
    }

    fn new(
        parsed: &IngressAnnotations,
        default: &Arc<RoutePolicy>,
        settings: &Settings,
    ) -> Policies {
        let share = |policy: RoutePolicy| {
            if policy == **default {
                default.clone()
            } else {
                Arc::new(policy)
            }
        };
        let without = RoutePolicy {
            rewrite: None,
            ..parsed.policy.clone()
        };
        let global_auth_refused = (settings.global_auth_url && parsed.global_auth).then(|| {
            Arc::new(RoutePolicy {
                denied: Some(parsed.policy.denied.clone().unwrap_or_else(|| {
                    "the ConfigMap's global-auth-url is not implemented (it restricts access)"
                        .to_owned()
                })),
                ..without.clone()
            })
        });
        Policies {
            with_rewrite: share(parsed.policy.clone()),
            without_rewrite: share(without),
            global_auth_refused,
        }
    }
}

/// Who holds each contested thing, so later (newer) claimants can be told who won.
#[derive(Default)]
struct Claims {
    paths: HashMap<(HostPattern, PathKind, String), NamespacedName>,
    default_backend: Option<NamespacedName>,
    /// Host → (Secret, claiming Ingress).
    tls: BTreeMap<HostPattern, (NamespacedName, NamespacedName)>,
}

struct Compiler<'a> {
    store: &'a Store,
    out: Compiled,
    /// Ingress backend (service, port as written) → backend, so each is resolved once.
    backends_by_port: HashMap<(NamespacedName, String), Arc<Backend>>,
    /// The ConfigMap's policy, shared by every route without annotations.
    default_policy: Arc<RoutePolicy>,
    hosts: HostExtras,
    /// Ingresses with `ssl-passthrough`, in the order they were read.
    passthrough_ingresses: BTreeSet<NamespacedName>,
    /// (Ingress, its policy, Service, protocol) → that policy with the protocol and the
    /// `UpstreamTls` of the Ingress's TLS settings for that Service, so that its routes to one
    /// Service share one. (Policies without annotations are shared between Ingresses; their
    /// TLS settings are not.)
    tls_policies:
        HashMap<(NamespacedName, usize, NamespacedName, BackendProtocol), Arc<RoutePolicy>>,
    /// Every name a route holds (Service, port, host, path), once: 10,000 routes to `/` on
    /// port `http` hold one `/` and one `http`.
    strings: HashSet<Arc<str>>,
}

/// How one Ingress's routes reach their endpoints.
struct UpstreamChoice {
    /// `service-upstream`: the Service's cluster IP rather than its endpoints.
    service_upstream: bool,
    /// `backend-protocol`; wins over the Service port's `appProtocol`.
    annotated: Option<BackendProtocol>,
    /// What TLS routes get (`name` empty: the Service's DNS name is filled in).
    settings: UpstreamTls,
}

/// Host-level annotations, applied once every Ingress has been read.
#[derive(Default)]
struct HostExtras {
    /// `server-alias`: alias → (host, Ingress that asked).
    aliases: BTreeMap<HostPattern, (HostPattern, NamespacedName)>,
    /// `from-to-www-redirect`: hosts whose www/non-www twin redirects to them.
    www: Vec<(String, NamespacedName)>,
    /// `server-snippet` header edits: host → (request, response) edits.
    edits: BTreeMap<HostPattern, (Vec<HeaderEdit>, Vec<HeaderEdit>)>,
    /// `app-root` → the Ingress that set it first.
    app_roots: BTreeMap<HostPattern, NamespacedName>,
    /// Hosts whose every route is refused (`auth-tls-secret`) → why.
    refused: BTreeMap<HostPattern, String>,
}

/// Now, in Unix seconds (certificates' expiry is compared with it).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn ingress_ref(name: &NamespacedName) -> ObjectRef {
    ObjectRef::new(Kind::Ingress, &*name.namespace, &*name.name)
}

/// The IngressClass rules of the Kubernetes API, plus the legacy annotation.
fn is_ours(store: &Store, options: &CompileOptions, ingress: &Ingress) -> bool {
    let our_class = |name: &str| {
        let class = store
            .ingress_classes()
            .find(|c| c.metadata.name.as_deref() == Some(name));
        match class {
            Some(class) => {
                (options.ingress_class_by_name && name == options.ingress_class)
                    || class.spec.as_ref().and_then(|s| s.controller.as_deref())
                        == Some(options.controller_class.as_str())
            }
            None => name == options.ingress_class,
        }
    };
    if let Some(name) = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
    {
        return our_class(name);
    }
    if let Some(name) = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LEGACY_CLASS_ANNOTATION))
    {
        return name == &options.ingress_class;
    }
    options.watch_ingress_without_class
        || store.ingress_classes().any(|class| {
            let is_default = class
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                .is_some_and(|v| v == "true");
            is_default
                && class.spec.as_ref().and_then(|s| s.controller.as_deref())
                    == Some(options.controller_class.as_str())
        })
}

impl Compiler<'_> {
    /// The one shared copy of `text` in this configuration.
    fn share(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        self.strings.insert(shared.clone());
        shared
    }

    /// `--tcp-services-configmap` and `--udp-services-configmap` (see `streams`).
    fn streams(&mut self, options: &CompileOptions) {
        use crate::streams::{stream_services, StreamProtocol};
        for (protocol, name) in [
            (StreamProtocol::Tcp, &options.tcp_services_config_map),
            (StreamProtocol::Udp, &options.udp_services_config_map),
        ] {
            let Some(name) = name else { continue };
            let services = stream_services(
                protocol,
                self.store,
                name,
                &options.reserved_ports,
                self.out.node_local_endpoints,
                &mut self.out.backends,
                &mut self.out.diagnostics,
            );
            match protocol {
                StreamProtocol::Tcp => self.out.tcp_services = services,
                StreamProtocol::Udp => self.out.udp_services = services,
            }
        }
    }

    fn diagnose(&mut self, object: ObjectRef, reason: impl Into<String>) {
        self.out.diagnostics.push(Diagnostic::new(object, reason));
    }

    fn settings(&mut self, options: &CompileOptions) {
        let Some(config_map) = self.store.config_map(&options.config_map) else {
            return;
        };
        let source = ObjectRef::new(
            Kind::ConfigMap,
            &*options.config_map.namespace,
            &*options.config_map.name,
        );
        let data = config_map.data.clone().unwrap_or_default();
        self.out.settings = Settings::from_config_map(&source, &data, &mut self.out.diagnostics);
        if let (_, Some(problem)) = crate::access_log::AccessLog::from_settings(&self.out.settings)
        {
            self.diagnose(source.clone(), problem);
        }
        if let (_, Some(problem)) =
            crate::access_log::StreamLogFormat::from_settings(&self.out.settings)
        {
            self.diagnose(source, problem);
        }
    }

    /// One Ingress, `name` its Store key (the routes share its strings).
    fn ingress(&mut self, name: &NamespacedName, ingress: &Ingress, claims: &mut Claims) {
        let name = name.clone();
        let object = ingress_ref(&name);
        self.out.ingresses.push(name.clone());
        let Some(spec) = ingress.spec.as_ref() else {
            self.diagnose(object, "spec: missing; nothing to serve");
            return;
        };
        let mut parsed = annotations::parse(
            ingress
                .metadata
                .annotations
                .as_ref()
                .unwrap_or(&BTreeMap::new()),
            &self.out.settings,
            &object,
            &mut self.out.diagnostics,
        );
        self.out.tracing |= parsed.policy.opentelemetry.enabled;
        let upstream = UpstreamChoice {
            service_upstream: parsed.service_upstream,
            annotated: parsed.backend_protocol,
            settings: self.upstream_tls(&name, &mut parsed),
        };
        let policies = Policies::new(&parsed, &self.default_policy, &self.out.settings);
        if parsed.ssl_passthrough {
            self.passthrough_ingresses.insert(name.clone());
        }

        if let Some(backend) = &spec.default_backend {
            match &claims.default_backend {
                Some(owner) => self.diagnose(
                    object.clone(),
                    format!("spec.defaultBackend: ignored, Ingress {owner} is older and already sets one"),
                ),
                None => {
                    let route = self.route(
                        &name,
                        backend,
                        "spec.defaultBackend",
                        policies.for_path("/", false, &self.out.settings.no_auth_locations),
                        &upstream,
                        ("", ""),
                    );
                    self.out.routes.set_default_backend(route);
                    claims.default_backend = Some(name.clone());
                }
            }
        }

        let mut hosts_of_rules = Vec::new();
        for (r, rule) in spec.rules.iter().flatten().enumerate() {
            let host = match HostPattern::parse(rule.host.as_deref()) {
                // The route's written host and the table's key are then this one string.
                Ok(HostPattern::Exact(host)) => HostPattern::Exact(self.share(&host)),
                Ok(host) => host,
                Err(why) => {
                    self.diagnose(
                        object.clone(),
                        format!(
                            "spec.rules[{r}].host {:?}: {why}; rule ignored",
                            rule.host.as_deref().unwrap_or("")
                        ),
                    );
                    continue;
                }
            };
            hosts_of_rules.push(host.clone());
            self.host_annotations(&name, &host, &parsed);
            for (p, path) in rule.http.iter().flat_map(|h| h.paths.iter()).enumerate() {
                let field = format!("spec.rules[{r}].http.paths[{p}]");
                let kind = match path.path_type.as_str() {
                    "Exact" => PathKind::Exact,
                    "Prefix" | "ImplementationSpecific" => PathKind::Prefix,
                    "" => {
                        self.diagnose(
                            object.clone(),
                            format!("{field}.pathType: missing; it is required (Exact, Prefix or ImplementationSpecific); path ignored"),
                        );
                        continue;
                    }
                    other => {
                        self.diagnose(
                            object.clone(),
                            format!("{field}.pathType {other:?}: must be Exact, Prefix or ImplementationSpecific; path ignored"),
                        );
                        continue;
                    }
                };
                let written = match path.path.as_deref() {
                    Some(written) if written.starts_with('/') => written,
                    None if path.path_type == "ImplementationSpecific" => "/",
                    other => {
                        self.diagnose(
                            object.clone(),
                            format!(
                                "{field}.path {:?}: must start with '/'; path ignored",
                                other.unwrap_or("")
                            ),
                        );
                        continue;
                    }
                };
                // ingress-nginx: a rewrite to the path itself is no rewrite.
                let rewrites = parsed
                    .policy
                    .rewrite
                    .as_ref()
                    .is_some_and(|r| r.target != written);
                let kind = if parsed.use_regex || rewrites {
                    PathKind::Regex
                } else {
                    kind
                };
                let policy =
                    policies.for_path(written, rewrites, &self.out.settings.no_auth_locations);
                if kind == PathKind::Prefix
                    && path.path_type == "ImplementationSpecific"
                    && written != "/"
                    && !written.ends_with('/')
                {
                    self.diagnose_with(
                        Severity::Difference,
                        object.clone(),
                        format!("{field}: ImplementationSpecific {written} is matched as Prefix, element by element ({written}x does not match); ingress-nginx matched it as a string prefix"),
                    );
                }
                let route = self.route(
                    &name,
                    &path.backend,
                    &format!("{field}.backend"),
                    policy,
                    &upstream,
                    (rule.host.as_deref().unwrap_or(""), written),
                );
                // The route's site holds the one shared copy of the written path.
                let path_route = PathRoute::new(kind, route.site.path.clone(), route);
                let (kind, normalised) = path_route.identity();
                let claim = (host.clone(), kind, normalised.to_owned());
                if let Some(owner) = claims.paths.get(&claim) {
                    let owner = if *owner == name {
                        "this Ingress".to_owned()
                    } else {
                        format!("Ingress {owner}")
                    };
                    self.diagnose(
                        object.clone(),
                        format!("{field}: {:?} {written} on host {host} is already routed by {owner}, which takes precedence; path ignored", path.path_type),
                    );
                    continue;
                }
                claims.paths.insert(claim, name.clone());
                self.out.routes.host_mut(&host).paths.push(path_route);
            }
        }

        for (t, tls) in spec.tls.iter().flatten().enumerate() {
            let hosts: Vec<HostPattern> = match &tls.hosts {
                Some(hosts) if !hosts.is_empty() => {
                    let mut parsed = Vec::new();
                    for host in hosts {
                        match HostPattern::parse(Some(host)) {
                            Ok(h) => parsed.push(h),
                            Err(why) => self.diagnose(
                                object.clone(),
                                format!("spec.tls[{t}].hosts: {host:?}: {why}; host ignored"),
                            ),
                        }
                    }
                    parsed
                }
                // No hosts listed: the entry covers this Ingress's own hosts.
                _ => hosts_of_rules
                    .iter()
                    .filter(|h| **h != HostPattern::Any)
                    .cloned()
                    .collect(),
            };
            for host in &hosts {
                self.out.routes.host_mut(host).tls = true;
            }
            let Some(secret_name) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) else {
                self.diagnose(
                    object.clone(),
                    format!("spec.tls[{t}].secretName: missing; the default certificate is served"),
                );
                continue;
            };
            let secret = NamespacedName::new(name.namespace.clone(), secret_name);
            for host in hosts {
                match claims.tls.get(&host) {
                    Some((other_secret, owner)) if *other_secret != secret => self.diagnose(
                        object.clone(),
                        format!("spec.tls[{t}]: host {host} already uses Secret {other_secret} from Ingress {owner}, which is older; Secret {secret_name} ignored for it"),
                    ),
                    Some(_) => {}
                    None => {
                        claims.tls.insert(host, (secret.clone(), name.clone()));
                    }
                }
            }
        }
    }

    /// Resolves an Ingress backend to a route. Problems are diagnostics, and the route then
    /// points at an unresolved backend that answers 503.
    fn route(
        &mut self,
        ingress: &NamespacedName,
        backend: &IngressBackend,
        field: &str,
        policy: Arc<RoutePolicy>,
        upstream: &UpstreamChoice,
        (host, path): (&str, &str),
    ) -> Arc<Route> {
        let object = ingress_ref(ingress);
        let written_port = backend
            .service
            .as_ref()
            .and_then(|s| s.port.as_ref())
            .map(|p| match (p.number, &p.name) {
                (Some(number), _) => number.to_string(),
                (None, Some(name)) => name.clone(),
                (None, None) => String::new(),
            })
            .unwrap_or_default();
        let site = RouteSite {
            host: self.share(host),
            path: self.share(path),
            service_port: self.share(&written_port),
        };
        let make = |service: Arc<str>, backend: Arc<Backend>, policy: &Arc<RoutePolicy>| {
            Arc::new(Route {
                ingress: ingress.clone(),
                service,
                backend,
                policy: policy.clone(),
                site: site.clone(),
            })
        };
        let Some(service_backend) = &backend.service else {
            let reason = if backend.resource.is_some() {
                format!(
                    "{field}.resource: resource backends are not supported; requests answer 503"
                )
            } else {
                format!("{field}.service: missing; requests answer 503")
            };
            self.diagnose(object, reason);
            return make(Arc::from(""), Arc::new(Backend::unresolved()), &policy);
        };
        let service_name = self.share(&service_backend.name);
        let service = NamespacedName {
            namespace: ingress.namespace.clone(),
            name: service_name.clone(),
        };
        let port = service_backend.port.as_ref();
        let written_port = match (
            port.and_then(|p| p.number),
            port.and_then(|p| p.name.as_deref()),
        ) {
            (Some(number), _) => number.to_string(),
            (None, Some(name)) => name.to_owned(),
            (None, None) => {
                self.diagnose(
                    object,
                    format!("{field}.service.port: needs a number or a name; requests answer 503"),
                );
                return make(service_name, Arc::new(Backend::unresolved()), &policy);
            }
        };
        let policy = self.upstream_protocol(
            &service,
            ingress,
            port.and_then(|p| p.number),
            &written_port,
            policy,
            upstream,
        );
        if upstream.service_upstream {
            match self.cluster_ip_backend(&service, port.and_then(|p| p.number), &written_port) {
                Ok(backend) => return make(service_name, backend, &policy),
                Err(why) => self.diagnose(
                    object.clone(),
                    format!("{field}: service-upstream: {why}; the Service's endpoints are used"),
                ),
            }
        }
        let cache_key = (service.clone(), written_port.clone());
        if let Some(backend) = self.backends_by_port.get(&cache_key) {
            return make(service_name, backend.clone(), &policy);
        }
        let backend = match self.resolve_port(&service, port.and_then(|p| p.number), &written_port)
        {
            Ok(key) => self
                .out
                .backends
                .entry(key.clone())
                .or_insert_with(|| {
                    let policy = self.out.node_local_endpoints;
                    Arc::new(Backend::new(
                        key.clone(),
                        endpoints_for(self.store, &key, policy),
                    ))
                })
                .clone(),
            Err(why) => {
                self.diagnose_with(
                    why.severity(),
                    object,
                    format!("{field}: {why}; requests answer 503"),
                );
                Arc::new(Backend::unresolved())
            }
        };
        self.backends_by_port.insert(cache_key, backend.clone());
        make(service_name, backend, &policy)
    }

    /// The policy a route to this Service port gets: the protocol and `UpstreamTls` that
    /// `backend-protocol` says, or, without the annotation, the port's `appProtocol`: `https`
    /// and `kubernetes.io/wss` are HTTP/1.1 over TLS, `kubernetes.io/h2c` HTTP/2 in cleartext.
    /// A gRPC route's request bodies stream (nginx's `grpc_pass` never buffers them: a
    /// client-streaming call may never end on its own).
    fn upstream_protocol(
        &mut self,
        service: &NamespacedName,
        ingress: &NamespacedName,
        number: Option<i32>,
        written: &str,
        policy: Arc<RoutePolicy>,
        choice: &UpstreamChoice,
    ) -> Arc<RoutePolicy> {
        let chosen = match choice.annotated {
            Some(chosen) => chosen,
            None => {
                let app_protocol = self
                    .store
                    .service(service)
                    .and_then(|found| found.spec.as_ref())
                    .and_then(|spec| spec.ports.as_deref())
                    .and_then(|ports| {
                        ports.iter().find(|p| match number {
                            Some(n) => p.port == n,
                            None => p.name.as_deref() == Some(written),
                        })
                    })
                    .and_then(|port| port.app_protocol.clone());
                let (protocol, tls) = match app_protocol.as_deref() {
                    Some(p) if p.eq_ignore_ascii_case("https") || p == "kubernetes.io/wss" => {
                        (UpstreamProtocol::Http1, true)
                    }
                    Some("kubernetes.io/h2c") => (UpstreamProtocol::Http2, false),
                    _ => (UpstreamProtocol::Http1, false),
                };
                BackendProtocol { protocol, tls }
            }
        };
        if (chosen.protocol.is_http1() && !chosen.tls) || policy.denied.is_some() {
            return policy;
        }
        let key = (
            ingress.clone(),
            Arc::as_ptr(&policy) as usize,
            service.clone(),
            chosen,
        );
        if let Some(found) = self.tls_policies.get(&key) {
            return found.clone();
        }
        let upstream_tls = chosen.tls.then(|| {
            let mut settings = choice.settings.clone();
            if settings.name.is_empty() {
                settings.name = format!("{}.{}.svc", service.name, service.namespace);
            }
            Arc::new(settings)
        });
        let mut changed = RoutePolicy {
            upstream_protocol: chosen.protocol,
            upstream_tls,
            ..(*policy).clone()
        };
        if chosen.protocol == UpstreamProtocol::Grpc {
            changed.body.request_buffering = false;
        }
        let changed = Arc::new(changed);
        // The key's pointer stays valid for the whole compile: the policy is held by this
        // Ingress's routes, so no other policy can take its address.
        self.tls_policies.insert(key, changed.clone());
        changed
    }

    /// The `UpstreamTls` of an Ingress's TLS routes, with `proxy-ssl-secret` read. A Secret
    /// that cannot be used refuses the Ingress's routes (503), as ingress-nginx denies them:
    /// serving without its CA or client certificate would drop a security setting.
    fn upstream_tls(
        &mut self,
        ingress: &NamespacedName,
        parsed: &mut IngressAnnotations,
    ) -> UpstreamTls {
        let ssl = &parsed.proxy_ssl;
        let mut tls = UpstreamTls {
            verify: ssl.verify,
            verify_depth: ssl.verify_depth,
            name: ssl.name.clone().unwrap_or_default(),
            server_name: ssl.server_name,
            versions: ssl.versions,
            secret: None,
            trusted: Vec::new(),
            client_cert: None,
        };
        let Some(written) = ssl.secret.clone() else {
            return tls;
        };
        tls.secret = Some(written.clone());
        let result = self
            .proxy_ssl_secret(ingress, &written)
            .and_then(|(trusted, client)| {
                if tls.verify && trusted.is_empty() {
                    return Err(Problem::invalid(
                        "proxy-ssl-verify is on but the Secret has no data.ca.crt to verify with",
                    ));
                }
                Ok((trusted, client))
            });
        match result {
            Ok((trusted, client)) => {
                tls.trusted = trusted;
                tls.client_cert = client;
            }
            Err(why) => {
                self.diagnose_with(
                    why.severity(),
                    ingress_ref(ingress),
                    format!("annotation {}proxy-ssl-secret: Secret {written}: {why}; the Ingress's routes answer 503 until it is fixed (as in ingress-nginx)", annotations::NGINX_PREFIX),
                );
                parsed.policy.denied = Some(format!("proxy-ssl-secret {written} cannot be used"));
            }
        }
        tls
    }

    /// `proxy-ssl-secret`: `ca.crt` (trusted certificates) and `tls.crt` + `tls.key` (the
    /// client certificate), either or both. Only a Secret of the Ingress's own namespace.
    fn proxy_ssl_secret(
        &self,
        ingress: &NamespacedName,
        written: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, Option<Arc<CertifiedKey>>), Problem> {
        let Some((namespace, name)) = written.split_once('/') else {
            return Err(Problem::invalid("expected namespace/name"));
        };
        if namespace != &*ingress.namespace {
            return Err(Problem::invalid(
                "a Secret of another namespace (refused, as ingress-nginx does by default)",
            ));
        }
        let found = self
            .store
            .secret(&NamespacedName::new(namespace, name))
            .ok_or_else(|| Problem::missing("not found"))?;
        let data = found.data.as_ref();
        let field = |name: &str| {
            data.and_then(|d| d.get(name))
                .map(|b| b.0.as_slice())
                .filter(|b| !b.is_empty())
        };
        let trusted = match field("ca.crt") {
            None => Vec::new(),
            Some(pem) => {
                let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
                    .collect::<Result<_, _>>()
                    .map_err(|e| {
                        Problem::invalid(format!("data.ca.crt: not PEM certificates: {e}"))
                    })?;
                if certs.is_empty() {
                    return Err(Problem::invalid("data.ca.crt: no CERTIFICATE block found"));
                }
                // What the proxy's verifier will do with them, so that it cannot fail there.
                let mut roots = rustls::RootCertStore::empty();
                for cert in &certs {
                    roots.add(cert.clone()).map_err(|e| {
                        Problem::invalid(format!(
                            "data.ca.crt: a certificate that cannot be a trust anchor: {e}"
                        ))
                    })?;
                }
                certs
            }
        };
        let client = match (field("tls.crt"), field("tls.key")) {
            (Some(cert), Some(key)) => {
                Some(certified_key_from_pem(cert, key).map_err(Problem::invalid)?)
            }
            (None, None) => None,
            _ => {
                return Err(Problem::invalid(
                    "data.tls.crt and data.tls.key must be given together",
                ))
            }
        };
        if trusted.is_empty() && client.is_none() {
            return Err(Problem::invalid(
                "neither data.ca.crt nor data.tls.crt and data.tls.key",
            ));
        }
        Ok((trusted, client))
    }

    /// `service-upstream`: one endpoint, the Service's cluster IP and port.
    fn cluster_ip_backend(
        &mut self,
        service: &NamespacedName,
        number: Option<i32>,
        written: &str,
    ) -> Result<Arc<Backend>, String> {
        let key = self
            .resolve_port(service, number, written)
            .map_err(|p| p.text)?;
        if let Some(backend) = self.out.service_upstreams.get(&key) {
            return Ok(backend.clone());
        }
        let found = self.store.service(service).ok_or("Service not found")?;
        let spec = found.spec.as_ref().ok_or("the Service has no spec")?;
        let ip: std::net::IpAddr = spec
            .cluster_ip
            .as_deref()
            .and_then(|ip| ip.parse().ok())
            .ok_or("the Service has no cluster IP (headless?)")?;
        let port = spec
            .ports
            .iter()
            .flatten()
            .find(|p| match number {
                Some(n) => p.port == n,
                None => p.name.as_deref() == Some(written),
            })
            .map(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
            .ok_or("no such port")?;
        let endpoints = EndpointSet {
            ready: vec![std::net::SocketAddr::new(ip, port)],
            ..EndpointSet::default()
        };
        let backend = Arc::new(Backend::new(key.clone(), endpoints));
        self.out.service_upstreams.insert(key, backend.clone());
        Ok(backend)
    }

    /// Records the host-level annotations of one Ingress for one of its hosts.
    fn host_annotations(
        &mut self,
        ingress: &NamespacedName,
        host: &HostPattern,
        parsed: &IngressAnnotations,
    ) {
        let object = ingress_ref(ingress);
        if let Some(root) = &parsed.app_root {
            match self.hosts.app_roots.get(host) {
                Some(owner) if owner != ingress => self.diagnose(
                    object.clone(),
                    format!("annotation app-root: host {host} already has one from Ingress {owner}, which is older; ignored"),
                ),
                Some(_) => {}
                None => {
                    self.hosts.app_roots.insert(host.clone(), ingress.clone());
                    self.out.routes.host_mut(host).app_root = Some(Box::new(root.clone()));
                }
            }
        }
        for alias in &parsed.server_aliases {
            self.hosts
                .aliases
                .entry(alias.clone())
                .or_insert_with(|| (host.clone(), ingress.clone()));
        }
        if let Some(why) = &parsed.hosts_refused {
            self.hosts
                .refused
                .entry(host.clone())
                .or_insert_with(|| format!("{why} (Ingress {ingress}, for the whole host)"));
        }
        if parsed.from_to_www {
            if let HostPattern::Exact(name) = host {
                self.hosts.www.push((name.to_string(), ingress.clone()));
            }
        }
        if !parsed.server_request_headers.is_empty() || !parsed.server_response_headers.is_empty() {
            let edits = self.hosts.edits.entry(host.clone()).or_default();
            edits
                .0
                .extend(parsed.server_request_headers.iter().cloned());
            edits
                .1
                .extend(parsed.server_response_headers.iter().cloned());
        }
    }

    /// `ssl-passthrough`, as ingress-nginx: per host, the `/` path's backend takes the host's
    /// TLS connections undecrypted; its other paths and annotations apply only to plain HTTP.
    fn passthrough(&mut self, options: &CompileOptions) {
        let asked = std::mem::take(&mut self.passthrough_ingresses);
        if asked.is_empty() {
            return;
        }
        if !options.enable_ssl_passthrough {
            for ingress in asked {
                self.diagnose_with(
                    Severity::Notice,
                    ingress_ref(&ingress),
                    "annotation nginx.ingress.kubernetes.io/ssl-passthrough: needs --enable-ssl-passthrough (as in ingress-nginx); TLS is terminated here",
                );
            }
            return;
        }
        let mut diagnostics = Vec::new();
        for (host, routes) in self.out.routes.hosts() {
            let mut owners = routes
                .paths
                .iter()
                .filter(|p| asked.contains(&p.route.ingress))
                .peekable();
            let Some(first) = owners.peek() else { continue };
            let ingress = first.route.ingress.clone();
            let HostPattern::Exact(name) = &host else {
                diagnostics.push(Diagnostic::with_severity(
                    Severity::Unsupported,
                    ingress_ref(&ingress),
                    format!("annotation nginx.ingress.kubernetes.io/ssl-passthrough: host {host}: only exact host names are passed through (SNI is matched exactly, as in ingress-nginx); TLS is terminated"),
                ));
                continue;
            };
            let root = routes
                .paths
                .iter()
                .find(|p| asked.contains(&p.route.ingress) && &*p.written == "/");
            match root {
                Some(path) => {
                    self.out.passthrough.insert(name.to_string(), path.route.clone());
                }
                None => diagnostics.push(Diagnostic::new(
                    ingress_ref(&ingress),
                    format!("annotation nginx.ingress.kubernetes.io/ssl-passthrough: host {host}: no path / to pass TLS through to (only the / path's backend is used, as in ingress-nginx); TLS is terminated"),
                )),
            }
            for other in routes
                .paths
                .iter()
                .filter(|p| asked.contains(&p.route.ingress) && &*p.written != "/")
            {
                diagnostics.push(Diagnostic::with_severity(
                    Severity::Notice,
                    ingress_ref(&other.route.ingress),
                    format!("annotation nginx.ingress.kubernetes.io/ssl-passthrough: host {host}: path {:?} is served over plain HTTP only; TLS connections all go to the / path's backend (as in ingress-nginx)", other.written),
                ));
            }
        }
        self.out.diagnostics.extend(diagnostics);
    }

    /// Host-level passes once every Ingress is in: regex hosts, server-snippet edits,
    /// aliases and www redirects.
    fn finish_hosts(&mut self) {
        let mut diagnostics = Vec::new();
        let edits = std::mem::take(&mut self.hosts.edits);
        let refused = std::mem::take(&mut self.hosts.refused);
        for (host, routes) in self.out.routes.hosts_mut() {
            if let Some(why) = refused.get(&host) {
                let mut told = BTreeSet::new();
                for path in &mut routes.paths {
                    if path.route.policy.denied.is_none() {
                        if told.insert(path.route.ingress.clone()) {
                            diagnostics.push(Diagnostic::new(
                                ingress_ref(&path.route.ingress),
                                format!("host {host}: every route answers 503: {why}"),
                            ));
                        }
                        let policy = RoutePolicy {
                            denied: Some(why.clone()),
                            ..(*path.route.policy).clone()
                        };
                        path.route = Arc::new(path.route.with_policy(Arc::new(policy)));
                    }
                }
            }
            if let Some((request, response)) = edits.get(&host) {
                for path in &mut routes.paths {
                    let mut policy = (*path.route.policy).clone();
                    policy.request_headers = request
                        .iter()
                        .chain(policy.request_headers.iter())
                        .cloned()
                        .collect();
                    policy.response_headers = response
                        .iter()
                        .chain(policy.response_headers.iter())
                        .cloned()
                        .collect();
                    path.route = Arc::new(path.route.with_policy(Arc::new(policy)));
                }
            }
            let Some(asker) = routes
                .paths
                .iter()
                .find(|p| p.kind == PathKind::Regex)
                .map(|p| p.route.ingress.clone())
            else {
                continue;
            };
            for (path, why) in routes.make_regex() {
                diagnostics.push(Diagnostic::new(
                    ingress_ref(&path.route.ingress),
                    format!("path {:?} on host {host}: not a regular expression Sluice can match: {why}; path ignored", path.written),
                ));
            }
            let mut noted = std::collections::BTreeSet::new();
            for path in &routes.paths {
                if path.kind != PathKind::Regex && noted.insert(path.route.ingress.clone()) {
                    diagnostics.push(Diagnostic::with_severity(
                        Severity::Notice,
                        ingress_ref(&path.route.ingress),
                        format!("host {host}: this Ingress's Exact and Prefix paths are matched as case-insensitive regexes anchored at the start only (^<path>), because Ingress {asker} uses use-regex or rewrite-target on this host (as ingress-nginx does)"),
                    ));
                }
            }
        }
        self.out.diagnostics.extend(diagnostics);

        for (alias, (host, ingress)) in std::mem::take(&mut self.hosts.aliases) {
            if self
                .out
                .routes
                .host(&alias)
                .is_some_and(|r| !r.paths.is_empty())
            {
                self.diagnose(
                    ingress_ref(&ingress),
                    format!("annotation server-alias: {alias} has rules of its own; alias ignored"),
                );
                continue;
            }
            if let Some(routes) = self.out.routes.host(&host).cloned() {
                *self.out.routes.host_mut(&alias) = routes;
            }
        }
        for (name, ingress) in std::mem::take(&mut self.hosts.www) {
            let twin = match name.strip_prefix("www.") {
                Some(bare) => bare.to_owned(),
                None => format!("www.{name}"),
            };
            if self
                .out
                .routes
                .host(&HostPattern::Exact(twin.as_str().into()))
                .is_some()
            {
                // ingress-nginx too: a twin with its own server is left alone.
                self.diagnose_with(
                    Severity::Notice,
                    ingress_ref(&ingress),
                    format!("annotation from-to-www-redirect: {twin} has rules of its own, so it is not redirected"),
                );
                continue;
            }
            self.out.routes.add_www_redirect(twin, name);
        }
    }

    fn diagnose_with(&mut self, severity: Severity, object: ObjectRef, reason: impl Into<String>) {
        self.out
            .diagnostics
            .push(Diagnostic::with_severity(severity, object, reason));
    }

    /// Service port (by number or name) → the port name EndpointSlices use for it.
    /// `--default-backend-service`: the Service's first port, as ingress-nginx uses it, with
    /// the ConfigMap's policy. A missing Service leaves requests no rule matches at 404.
    fn default_backend_service(&mut self, service: &NamespacedName) {
        let object = ObjectRef::new(Kind::Service, &*service.namespace, &*service.name);
        let first_port = self.store.service(service).map(|found| {
            found
                .spec
                .as_ref()
                .and_then(|s| s.ports.as_deref())
                .and_then(|ports| ports.first())
                .map(|port| port.port)
        });
        let port = match first_port {
            Some(Some(port)) => port,
            Some(None) => {
                return self.diagnose(
                    object,
                    "--default-backend-service: the Service has no port; requests no rule matches answer 404",
                )
            }
            None => {
                return self.diagnose_with(
                    Severity::Missing,
                    object,
                    "--default-backend-service: no such Service; requests no rule matches answer 404",
                )
            }
        };
        let backend = match self.resolve_port(service, Some(port), &port.to_string()) {
            Ok(key) => self
                .out
                .backends
                .entry(key.clone())
                .or_insert_with(|| {
                    let policy = self.out.node_local_endpoints;
                    Arc::new(Backend::new(
                        key.clone(),
                        endpoints_for(self.store, &key, policy),
                    ))
                })
                .clone(),
            Err(why) => {
                self.diagnose_with(
                    why.severity(),
                    object,
                    format!("--default-backend-service: {why}"),
                );
                return;
            }
        };
        self.out.routes.set_default_backend(Arc::new(Route {
            ingress: service.clone(),
            service: service.name.clone(),
            backend,
            policy: self.default_policy.clone(),
            site: RouteSite {
                service_port: port.to_string().into(),
                ..RouteSite::default()
            },
        }));
    }

    fn resolve_port(
        &self,
        service: &NamespacedName,
        number: Option<i32>,
        written: &str,
    ) -> Result<BackendKey, Problem> {
        let found = self
            .store
            .service(service)
            .ok_or_else(|| Problem::missing(format!("Service {service} not found")))?;
        let ports: &[ServicePort] = found
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_deref())
            .unwrap_or_default();
        let port = ports
            .iter()
            .find(|p| match number {
                Some(n) => p.port == n,
                None => p.name.as_deref() == Some(written),
            })
            .ok_or_else(|| Problem::invalid(format!("Service {service} has no port {written}")))?;
        Ok(BackendKey {
            service: service.clone(),
            port_name: port.name.clone().unwrap_or_default(),
        })
    }

    fn certificates(
        &mut self,
        options: &CompileOptions,
        tls: BTreeMap<HostPattern, (NamespacedName, NamespacedName)>,
    ) {
        let now = unix_now();
        let mut parsed = HashMap::new();
        let mut warned = HashSet::new();
        for (host, (secret, ingress)) in tls {
            let result = parsed
                .entry(secret.clone())
                .or_insert_with(|| self.load_secret(&secret))
                .clone();
            match result {
                Ok((key, info)) => {
                    if let Some(info) = &info {
                        if warned.insert((secret.clone(), ingress.clone())) {
                            self.warn_expiry(ingress_ref(&ingress), &secret, info, now);
                        }
                    }
                    self.out
                        .certificates
                        .insert(&host, key, secret.to_string(), info)
                }
                Err(why) => self.diagnose_with(
                    why.severity(),
                    ingress_ref(&ingress),
                    format!("TLS for host {host}: Secret {secret}: {why}; the default certificate is served"),
                ),
            }
        }
        if let Some(secret) = &options.default_tls_secret {
            let object = ObjectRef::new(Kind::Secret, &*secret.namespace, &*secret.name);
            match self.load_secret(secret) {
                Ok((key, info)) => {
                    if let Some(info) = &info {
                        self.warn_expiry(object, secret, info, now);
                    }
                    self.out
                        .certificates
                        .insert(&HostPattern::Any, key, secret.to_string(), info)
                }
                Err(why) => self.diagnose_with(
                    why.severity(),
                    object,
                    format!(
                        "--default-tls-secret: {why}; a self-signed certificate is served instead"
                    ),
                ),
            }
        }
    }

    /// A served certificate that expires within [`crate::tls::EXPIRY_WARNING`] (or has):
    /// a diagnostic whose text stays the same until it expires, so it is reported once.
    fn warn_expiry(
        &mut self,
        object: ObjectRef,
        secret: &NamespacedName,
        info: &CertificateInfo,
        now: i64,
    ) {
        let warning = crate::tls::EXPIRY_WARNING.as_secs() as i64;
        let when = crate::tls::utc_text(info.not_after);
        let reason = if info.not_after <= now {
            format!(
                "Secret {secret}: the certificate expired at {when}; clients refuse it: renew it"
            )
        } else if info.not_after - now <= warning {
            format!(
                "Secret {secret}: the certificate expires at {when}, within {} days: renew it",
                warning / 86_400
            )
        } else {
            return;
        };
        self.diagnose_with(Severity::Expiring, object, reason);
    }

    fn load_secret(
        &self,
        secret: &NamespacedName,
    ) -> Result<
        (
            Arc<rustls::sign::CertifiedKey>,
            Option<Arc<CertificateInfo>>,
        ),
        Problem,
    > {
        let found = self
            .store
            .secret(secret)
            .ok_or_else(|| Problem::missing("not found"))?;
        let key = certified_key_from_secret(found).map_err(Problem::invalid)?;
        // rustls serves the chain as opaque bytes; reading it is for expiry and metrics only.
        let info = key
            .cert
            .first()
            .and_then(|leaf| certificate_info(leaf).ok())
            .map(Arc::new);
        Ok((key, info))
    }
}

/// A serialisable picture of a compiled configuration: what `/config` shows and golden files
/// hold. Endpoints are read as they are now.
#[derive(Debug, Serialize)]
pub struct CompiledView {
    pub hosts: BTreeMap<String, HostView>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub www_redirects: BTreeMap<String, String>,
    pub default_backend: Option<RouteView>,
    pub backends: BTreeMap<String, EndpointSet>,
    pub certificates: BTreeMap<String, String>,
    /// `ssl-passthrough` hosts → the backend their TLS connections go to (and the PROXY
    /// protocol version written to it, if any).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub passthrough: BTreeMap<String, String>,
    /// TCP services: listen port → Service port and PROXY protocol flags.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tcp_services: BTreeMap<u16, StreamServiceView>,
    /// UDP services: listen port ─▶ Service port.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub udp_services: BTreeMap<u16, StreamServiceView>,
    pub settings: Settings,
    pub ingresses: Vec<String>,
    pub diagnostics: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct HostView {
    pub tls: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_root: Option<String>,
    pub paths: Vec<RouteView>,
}

#[derive(Debug, Serialize)]
pub struct RouteView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<PathKind>,
    pub ingress: String,
    pub service: String,
    /// `None` when the backend could not be resolved (requests answer 503).
    pub backend: Option<String>,
    /// On a regex host: the regex the path is matched with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// What the route's policy changes from the ConfigMap's default policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<serde_json::Value>,
}

impl RouteView {
    fn new(path: Option<&PathRoute>, route: &Route, default: &RoutePolicy) -> RouteView {
        RouteView {
            path: path.map(|p| p.written.to_string()),
            kind: path.map(|p| p.kind),
            ingress: route.ingress.to_string(),
            service: route.service.to_string(),
            backend: route.backend.key().map(ToString::to_string),
            regex: path.and_then(|p| p.pattern.as_ref()).map(|r| r.to_string()),
            policy: route.policy.difference(default),
        }
    }
}

impl Compiled {
    pub fn view(&self) -> CompiledView {
        let default = RoutePolicy::from_settings(&self.settings);
        CompiledView {
            www_redirects: self
                .routes
                .www_redirects()
                .iter()
                .map(|(from, to)| (from.clone(), to.clone()))
                .collect(),
            hosts: self
                .routes
                .hosts()
                .into_iter()
                .map(|(host, routes)| {
                    let paths = routes
                        .paths
                        .iter()
                        .map(|p| RouteView::new(Some(p), &p.route, &default))
                        .collect();
                    (
                        host.to_string(),
                        HostView {
                            tls: routes.tls,
                            regex: routes.regex,
                            app_root: routes
                                .app_root
                                .as_ref()
                                .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned()),
                            paths,
                        },
                    )
                })
                .collect(),
            default_backend: self
                .routes
                .default_backend()
                .map(|r| RouteView::new(None, r, &default)),
            backends: self
                .backends
                .iter()
                .map(|(key, backend)| (key.to_string(), (*backend.endpoints()).clone()))
                .collect(),
            certificates: self.certificates.sources().clone(),
            passthrough: self
                .passthrough
                .iter()
                .map(|(host, route)| {
                    let backend = route
                        .backend
                        .key()
                        .map_or_else(|| "(unresolved)".to_owned(), ToString::to_string);
                    let backend = match route.policy.passthrough_proxy_protocol {
                        None => backend,
                        Some(ProxyProtocolVersion::V1) => format!("{backend} (PROXY protocol v1)"),
                        Some(ProxyProtocolVersion::V2) => format!("{backend} (PROXY protocol v2)"),
                    };
                    (host.clone(), backend)
                })
                .collect(),
            tcp_services: self
                .tcp_services
                .iter()
                .map(|(port, service)| (*port, service.view()))
                .collect(),
            udp_services: self
                .udp_services
                .iter()
                .map(|(port, service)| (*port, service.view()))
                .collect(),
            settings: self.settings.clone(),
            ingresses: self.ingresses.iter().map(ToString::to_string).collect(),
            diagnostics: self.diagnostics.iter().map(ToString::to_string).collect(),
        }
    }
}

impl Compiled {
    /// One diagnostic per served Ingress and refused address of its backends, as the endpoints
    /// are now (see [`NodeLocalEndpoints`]); sorted. Not part of `diagnostics`, because the fast
    /// path changes endpoints without a compile. O(routes): call it when refused addresses are
    /// involved, not on every endpoint change.
    pub fn refused_endpoint_diagnostics(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let mut visit = |route: &Route| {
            let Some(key) = route.backend.key() else {
                return;
            };
            route.backend.with_endpoints(|set| {
                for refused in &set.refused {
                    out.push(Diagnostic::new(
                        ingress_ref(&route.ingress),
                        format!(
                            "backend {key}: endpoint {} (EndpointSlice {}) not used: {}; \
                             --allow-loopback-endpoints allows it",
                            refused.address, refused.slice, refused.reason
                        ),
                    ));
                }
            });
        };
        for (_, routes) in self.routes.hosts() {
            for path in &routes.paths {
                visit(&path.route);
            }
        }
        if let Some(route) = self.routes.default_backend() {
            visit(route);
        }
        out.sort();
        out.dedup();
        out
    }
}

impl Compiled {
    /// The endpoint fast path: re-reads the endpoints of every backend of these Services and
    /// swaps the ones that changed. Returns those backends. O(those Services' slices). Uses the
    /// node-local endpoint policy this configuration was compiled with.
    pub fn refresh_endpoints<'a>(
        &self,
        store: &Store,
        services: impl IntoIterator<Item = &'a NamespacedName>,
    ) -> Vec<Arc<Backend>> {
        let mut changed = Vec::new();
        for service in services {
            let from = BackendKey {
                service: service.clone(),
                port_name: String::new(),
            };
            for (key, backend) in self.backends.range(from..) {
                if key.service != *service {
                    break;
                }
                if backend.set_endpoints(endpoints_for(store, key, self.node_local_endpoints)) {
                    changed.push(backend.clone());
                }
            }
        }
        changed
    }
}
