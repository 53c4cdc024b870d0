//! `compile(&Store) -> Compiled`: the whole configuration rebuilt from one snapshot.
//!
//! ```text
//!  ConfigMap ─▶ configmap ─▶ Settings ─▶ the default RoutePolicy
//!  Store ─▶ ingress::served ─▶ Compiler::ingress (ingress/) ─▶ RouteTable, backends, claims
//!  claims.tls + --default-tls-secret ─▶ Secrets ─▶ Certificates
//!  --default-backend-service, host-level annotations, ssl-passthrough, TCP/UDP services
//!  Gateway API (gateway/): after the Ingresses' host-wide passes, into the same hosts
//!  every problem ─▶ Diagnostic (and the object or rule is left out)
//! ```
//! Pure and deterministic: no I/O, no clock, sorted iteration. A broken object never stops
//! the rest from compiling; conflicts go to the oldest Ingress, the newer one gets a diagnostic.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use model::compiled::ingress_ref;
use model::policy::{CustomErrors, ErrorBackend, RoutePolicy};
use model::routes::{HostPattern, Route, RouteSite};
use model::tls::{certificate_info, CertificateInfo};
use model::{Backend, Compiled, Kind, NamespacedName, ObjectRef, Severity};

use crate::backends::{ExternalNames, Problem};
pub use crate::compiler::CompileOptions;
use crate::compiler::Compiler;
use crate::gateway::Fragments;
use crate::ingress::claims::{Claims, HostExtras};
use crate::ingress::{self};
use crate::store::Store;
use crate::tls::certified_key_from_secret;

/// What `Server` says with the ConfigMap's `server-tokens` (nginx: `nginx/<version>`).
const SERVER_PRODUCT: &str = concat!("sluice/", env!("CARGO_PKG_VERSION"));

/// Compiles the Store's current content.
pub fn compile(store: &Store, options: &CompileOptions) -> Compiled {
    compile_with(store, options, None)
}

/// Compiles the Store's current content as [`compile`] does, reusing what the last compile
/// through `fragments` made of the Gateway routes that did not change (and keeping this
/// compile's for the next): the same output, in time that follows the change.
pub fn compile_reusing(
    store: &Store,
    options: &CompileOptions,
    fragments: &mut Fragments,
) -> Compiled {
    fragments.begin(options.node_local_endpoints);
    let compiled = compile_with(store, options, Some(&mut *fragments));
    fragments.end(&compiled);
    compiled
}

fn compile_with(
    store: &Store,
    options: &CompileOptions,
    fragments: Option<&mut Fragments>,
) -> Compiled {
    let mut compiler = Compiler {
        store,
        out: Compiled {
            node_local_endpoints: options.node_local_endpoints,
            ..Compiled::default()
        },
        backends_by_port: HashMap::new(),
        default_policy: Arc::default(),
        global_auth: None,
        default_error_backend: None,
        host_default: Arc::new(not_found_route(Arc::default())),
        hosts: HostExtras::default(),
        passthrough_ingresses: BTreeSet::new(),
        tls_policies: HashMap::new(),
        strings: HashSet::new(),
        backend_tls: Default::default(),
        fragments,
        recording: None,
        stream_ports: Default::default(),
        external_names: if options.disable_svc_external_name {
            ExternalNames::Refuse(
                "--disable-svc-external-name is set, so Sluice follows no ExternalName \
                 Service; use a Service with a selector, or one without and EndpointSlices \
                 that list the addresses",
            )
        } else {
            ExternalNames::Follow
        },
        disable_catch_all: options.disable_catch_all,
    };
    compiler.settings(options);
    // Namespaces' labels decide which Ingresses are served: a relabel compiles again.
    compiler.out.namespace_selectors |= options.watch_namespace_selector.is_some();
    compiler.out.hsts_header = compiler.out.settings.hsts_header();
    let settings = &compiler.out.settings;
    compiler.out.blocklist = model::edge::Blocklist::new(
        &settings.block_cidrs,
        &settings.block_user_agents,
        &settings.block_referers,
    )
    .map(Box::new);
    compiler.out.response_filter = model::edge::ResponseFilter::new(
        &settings.hide_headers,
        settings.server_tokens,
        settings.allow_backend_server_header,
        SERVER_PRODUCT,
    );
    compiler.out.access_log = model::access_log::AccessLog::from_settings(&compiler.out.settings).0;
    compiler.out.stream_access_log =
        model::access_log::StreamLogFormat::from_settings(&compiler.out.settings).0;
    compiler.out.tracing = compiler.out.settings.opentelemetry.enabled;
    compiler.default_policy = Arc::new(RoutePolicy::from_settings(&compiler.out.settings));
    compiler.config_map_headers(options);
    compiler.global_auth = compiler.global_external_auth(options);
    let default_service = options
        .default_backend_service
        .as_ref()
        .and_then(|service| compiler.default_backend_service(service));
    compiler.custom_errors();
    // Made once the default policy is final (the ConfigMap's custom errors are in it).
    let default_route = default_service.map(|route| compiler.default_backend_route(route));
    compiler.host_default = default_route
        .clone()
        .unwrap_or_else(|| Arc::new(not_found_route(compiler.default_policy.clone())));
    let served = ingress::served(store, options);
    let paths = served.iter().map(|(_, i)| ingress::path_count(i)).sum();
    compiler.out.ingresses.reserve_exact(served.len());
    compiler.out.routes.reserve_hosts(paths);
    let mut claims = Claims {
        paths: HashMap::with_capacity(paths),
        // The ordinary rules are recorded for canaries to join only when there are canaries:
        // at 10,000 paths the record is a few MB the compile would otherwise allocate for
        // nothing.
        record_locations: served.iter().any(|(_, i)| ingress::is_canary(i)),
        ..Claims::default()
    };
    for (name, ingress) in served {
        compiler.ingress(name, ingress, &mut claims);
    }
    compiler.certificates(options, std::mem::take(&mut claims.tls));
    compiler
        .out
        .routes
        .set_host_default(compiler.host_default.clone());
    if let (None, Some(route)) = (&claims.default_backend, default_route) {
        compiler.out.routes.set_default_backend(route);
    }
    compiler.default_server();
    compiler.finish_hosts();
    compiler.client_cert_hosts();
    compiler.cipher_hosts();
    compiler.share_affinity();
    compiler.canaries(&mut claims);
    // The services ConfigMaps first: a Gateway TCP or UDP listener may not take their ports.
    compiler.streams(options);
    compiler.stream_ports.reserved = options.reserved_ports.clone();
    let pool = options.gateway_address_pool.as_ref();
    compiler.gateway_api(pool, options.gateway_services);
    compiler.passthrough(options);
    compiler.out.routes.finish();
    compiler.out.diagnostics.sort();
    compiler.out.diagnostics.dedup();
    compiler.out.diagnostics.shrink_to_fit();
    compiler.out.ingresses.shrink_to_fit();
    compiler.out
}
/// Sluice's 404 behind `policy`, for known hosts' unmatched paths without a default backend.
/// Its names are empty: counted and logged as a request no rule matched.
fn not_found_route(policy: Arc<RoutePolicy>) -> Route {
    Route {
        ingress: NamespacedName::new("", ""),
        service: Arc::from(""),
        backend: Arc::new(Backend::unresolved()),
        policy,
        site: RouteSite::default(),
        traffic: None,
        not_found: true,
    }
}

/// Now, in Unix seconds (certificates' expiry is compared with it).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Compiler<'_> {
    /// ingress-nginx's `_` server without a backend answers 404 with the http level's
    /// `more_set_headers` (the ConfigMap's `add-headers`) and nothing of a location's: no
    /// allow-lists, redirects or limits. Set only when there are such headers: without them
    /// the table's bare 404 is the same answer.
    fn default_server(&mut self) {
        if self.out.routes.default_backend().is_some()
            || self.default_policy.response_headers.is_empty()
        {
            return;
        }
        let policy = RoutePolicy {
            response_headers: self.default_policy.response_headers.clone(),
            custom_errors: self.default_policy.custom_errors.clone(),
            opentelemetry: self.default_policy.opentelemetry,
            ..RoutePolicy::default()
        };
        let route = Arc::new(not_found_route(Arc::new(policy)));
        self.out.routes.set_default_server(route);
    }

    /// `--tcp-services-configmap` and `--udp-services-configmap` (see `streams`).
    pub(crate) fn streams(&mut self, options: &CompileOptions) {
        use crate::streams::stream_services;
        use model::streams::StreamProtocol;
        for (protocol, name) in [
            (StreamProtocol::Tcp, &options.tcp_services_config_map),
            (StreamProtocol::Udp, &options.udp_services_config_map),
        ] {
            let Some(name) = name else { continue };
            self.out.config_maps_read.insert(name.clone());
            let services = stream_services(
                protocol,
                self.store,
                name,
                &options.reserved_ports,
                (self.out.node_local_endpoints, self.external_names),
                &mut self.out.backends,
                &mut self.out.diagnostics,
            );
            match protocol {
                StreamProtocol::Tcp => self.out.tcp_services = services,
                StreamProtocol::Udp => self.out.udp_services = services,
            }
        }
    }

    pub(crate) fn settings(&mut self, options: &CompileOptions) {
        let Some(config_map) = self.read_config_map(&options.config_map) else {
            return;
        };
        let source = ObjectRef::new(
            Kind::ConfigMap,
            &*options.config_map.namespace,
            &*options.config_map.name,
        );
        let data = config_map.data.clone().unwrap_or_default();
        self.out.settings =
            crate::configmap::from_config_map(&source, &data, &mut self.out.diagnostics);
        if let (_, Some(problem)) = model::access_log::AccessLog::from_settings(&self.out.settings)
        {
            self.diagnose(source.clone(), problem);
        }
        if let (_, Some(problem)) =
            model::access_log::StreamLogFormat::from_settings(&self.out.settings)
        {
            self.diagnose(source, problem);
        }
    }

    /// `--default-backend-service`: the Service's first port, as ingress-nginx uses it; it is
    /// the errors phase's backend (`upstream-default-backend`), and the route of requests no
    /// rule matches unless an Ingress's `spec.defaultBackend` takes that place. A missing
    /// Service leaves those requests at 404.
    pub(crate) fn default_backend_service(
        &mut self,
        service: &NamespacedName,
    ) -> Option<(NamespacedName, Arc<Backend>, i32)> {
        let object = ObjectRef::new(Kind::Service, &*service.namespace, &*service.name);
        let (backend, port) = match self.first_port_backend(service) {
            Ok(found) => found,
            Err((severity, why)) => {
                self.diagnose_with(
                    severity,
                    object,
                    format!(
                        "--default-backend-service: {why}; requests no rule matches answer 404"
                    ),
                );
                return None;
            }
        };
        self.default_error_backend = Some(Arc::new(ErrorBackend {
            upstream_name: "upstream-default-backend".into(),
            backend: backend.clone(),
        }));
        Some((service.clone(), backend, port))
    }

    /// The route of `--default-backend-service`, with the ConfigMap's policy.
    pub(crate) fn default_backend_route(
        &self,
        (service, backend, port): (NamespacedName, Arc<Backend>, i32),
    ) -> Arc<Route> {
        Arc::new(Route {
            service: service.name.clone(),
            ingress: service,
            backend,
            policy: self.default_policy.clone(),
            site: RouteSite {
                service_port: port.to_string().into(),
                ..RouteSite::default()
            },
            traffic: None,
            not_found: false,
        })
    }

    /// The backend of a Service's first port (as ingress-nginx uses a default backend), or
    /// why there is none.
    pub(crate) fn first_port_backend(
        &mut self,
        service: &NamespacedName,
    ) -> Result<(Arc<Backend>, i32), (Severity, String)> {
        let found = self
            .store
            .service(service)
            .ok_or((Severity::Missing, "no such Service".to_owned()))?;
        let port = found
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_deref())
            .and_then(|ports| ports.first())
            .map(|port| port.port)
            .ok_or((Severity::Error, "the Service has no port".to_owned()))?;
        let backend = (self.resolve_backend(service, Some(port), &port.to_string()))
            .map_err(|why| (why.severity(), why.to_string()))?;
        Ok((backend, port))
    }

    /// The ConfigMap's `custom-http-errors`: the errors phase of the default policy, answered
    /// by `--default-backend-service` (resolved before).
    pub(crate) fn custom_errors(&mut self) {
        let settings = &self.out.settings;
        if settings.custom_http_errors.is_empty() {
            return;
        }
        let errors = CustomErrors {
            codes: settings.custom_http_errors.clone().into(),
            intercept_upstream: !settings.disable_proxy_intercept_errors,
            backends: self.default_error_backend.iter().cloned().collect(),
            policy: self.default_policy.clone(),
        };
        let errors = Arc::new(errors);
        self.out.custom_errors = Some(errors.clone());
        self.out.any_custom_errors = true;
        self.default_policy = Arc::new(RoutePolicy {
            custom_errors: Some(errors),
            ..(*self.default_policy).clone()
        });
    }

    pub(crate) fn certificates(
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

    /// A served certificate that expires within [`model::tls::EXPIRY_WARNING`] (or has):
    /// a diagnostic whose text stays the same until it expires, so it is reported once.
    pub(crate) fn warn_expiry(
        &mut self,
        object: ObjectRef,
        secret: &NamespacedName,
        info: &CertificateInfo,
        now: i64,
    ) {
        let warning = model::tls::EXPIRY_WARNING.as_secs() as i64;
        let when = model::tls::utc_text(info.not_after);
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

    pub(crate) fn load_secret(
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
