//! Ingress: `networking.k8s.io/v1` Ingresses and ingress-nginx's annotations, translated into
//! routes.
//!
//! ```text
//!  Store ─▶ our IngressClasses ─▶ served Ingresses (oldest first) ─▶ hosts × paths ─▶ RouteTable
//!                                        │                     └─▶ backends (crate::backends)
//!                                        │   annotations (one registry) ─▶ RoutePolicy
//!                                        │   backend-protocol / port appProtocol + proxy-ssl-secret
//!                                        │                     └─▶ the route's upstream protocol
//!                                        │                         (HTTP/1.1, HTTP/2, gRPC) and TLS
//!                                        └─▶ spec.tls ─▶ claims ─▶ certificates (compile)
//!  host-level annotations (server-alias, www redirect, server-snippet, app-root) ─▶ hosts.rs,
//!  once every Ingress is read
//!  affinity ─▶ affinity.rs, once every ordinary Ingress is in: the oldest Ingress's affinity
//!  on a Service port applies to every route to it
//!  custom-http-errors, default-backend ─▶ errors.rs (the errors phase)
//!  mirror-target, -host, -request-body ─▶ mirror.rs (where the copies go, resolved)
//!  auth-url and its family ─▶ auth.rs (where the sub-requests go, resolved);
//!  auth-type: basic ─▶ auth.rs too (the Secret's users)
//!  canary Ingresses ─▶ claims ─▶ canary.rs, once every ordinary Ingress is read: conditional
//!  rules and a weighted split on the rules of the backend they join
//! ```
//! Conflicts go to the oldest Ingress; the newer one gets a diagnostic.

mod affinity;
pub mod annotations;
mod auth;
mod canary;
pub(crate) mod claims;
mod client_cert;
pub(crate) mod cross_namespace;
mod custom_headers;
mod errors;
mod host_ciphers;
mod hosts;
mod mirror;
mod roots;
pub(crate) mod upstream;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{HTTPIngressPath, IngressBackend, IngressSpec};
use model::affinity::CanaryBehavior;
use model::compiled::ingress_ref;
use model::policy::RoutePolicy;
use model::routes::{HostPattern, PathKind, PathRoute, Route, RouteSite};
use model::{Backend, NamespacedName, ObjectRef, Severity};

use crate::compiler::{
    CompileOptions, Compiler, DEFAULT_CLASS_ANNOTATION, LEGACY_CLASS_ANNOTATION,
};
use crate::objects::Ingress;
use crate::store::Store;
use annotations::IngressAnnotations;
use claims::{Claims, PendingCanary};
use upstream::UpstreamChoice;
/// The policies of one Ingress's routes: shared with the default when it has no annotations
/// that change anything, and without the rewrite for paths equal to their rewrite target.
pub(crate) struct Policies {
    with_rewrite: Arc<RoutePolicy>,
    without_rewrite: Arc<RoutePolicy>,
    /// The other authentication some paths get, decided by the ConfigMap's
    /// `no-auth-locations`: with the Ingress's own `auth-url`, the paths under those
    /// locations go without it; without one, the paths outside them get `global-auth-url`.
    other_auth: Option<OtherAuth>,
}

struct OtherAuth {
    with_rewrite: Arc<RoutePolicy>,
    without_rewrite: Arc<RoutePolicy>,
    /// `other_auth` is for the paths under `no-auth-locations` (the Ingress's own auth
    /// dropped); otherwise for the paths outside them (the global auth added).
    under_exempt: bool,
}

/// What every path of one Ingress is compiled with.
struct IngressContext<'a> {
    name: &'a NamespacedName,
    object: &'a ObjectRef,
    parsed: &'a IngressAnnotations,
    policies: &'a Policies,
    upstream: &'a UpstreamChoice,
}

impl Policies {
    /// The policy of a path written `written`; `exempt`: the ConfigMap's `no-auth-locations`
    /// (ingress-nginx: the path starts with one of them).
    fn for_path(&self, written: &str, rewrites: bool, exempt: &[String]) -> Arc<RoutePolicy> {
        let under = exempt.iter().any(|l| written.starts_with(l.as_str()));
        match &self.other_auth {
            Some(other) if other.under_exempt == under && rewrites => other.with_rewrite.clone(),
            Some(other) if other.under_exempt == under => other.without_rewrite.clone(),
            _ if rewrites => self.with_rewrite.clone(),
            _ => self.without_rewrite.clone(),
        }
    }

    fn new(
        parsed: &IngressAnnotations,
        default: &Arc<RoutePolicy>,
        global_auth: Option<&Result<Arc<model::auth::ExternalAuth>, String>>,
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
        let pair = |edit: &dyn Fn(&mut RoutePolicy)| {
            let mut with = parsed.policy.clone();
            edit(&mut with);
            let mut without = without.clone();
            edit(&mut without);
            (share(with), share(without))
        };
        let other_auth = if parsed.policy.external_auth.is_some() {
            let (with_rewrite, without_rewrite) = pair(&|p| p.external_auth = None);
            Some(OtherAuth {
                with_rewrite,
                without_rewrite,
                under_exempt: true,
            })
        } else if let Some(global) = global_auth.filter(|_| parsed.global_auth) {
            let (with_rewrite, without_rewrite) = pair(&|p| match global {
                Ok(auth) => p.external_auth = Some(auth.clone()),
                Err(reason) => {
                    p.denied.get_or_insert_with(|| reason.clone());
                }
            });
            Some(OtherAuth {
                with_rewrite,
                without_rewrite,
                under_exempt: false,
            })
        } else {
            None
        };
        Policies {
            with_rewrite: share(parsed.policy.clone()),
            without_rewrite: share(without),
            other_auth,
        }
    }
}

/// `canary: "true"` under either prefix, read as the annotation parser reads it.
pub(crate) fn is_canary(ingress: &Ingress) -> bool {
    const KEYS: [&str; 2] = ["sluice.dev/canary", "nginx.ingress.kubernetes.io/canary"];
    debug_assert!(KEYS[0].starts_with(annotations::SLUICE_PREFIX));
    debug_assert!(KEYS[1].starts_with(annotations::NGINX_PREFIX));
    let annotations = ingress.metadata.annotations.as_ref();
    KEYS.iter()
        .find_map(|key| annotations?.get(*key))
        .is_some_and(|v| annotations::go_bool(v.trim()) == Some(true))
}

/// How many paths an Ingress's rules write: the compile sizes its tables once with the sum,
/// instead of growing them by doubling and leaving the outgrown copies as holes in the heap.
pub(crate) fn path_count(ingress: &Ingress) -> usize {
    let rules = ingress.spec.as_ref().and_then(|s| s.rules.as_ref());
    rules
        .into_iter()
        .flatten()
        .map(|rule| rule.http.as_ref().map_or(0, |http| http.paths.len()))
        .sum()
}

/// A path's kind from its `pathType`, and its path (`/` when an ImplementationSpecific path
/// has none), or why the path is left out.
fn path_as_written<'p>(
    path: &'p HTTPIngressPath,
    field: &str,
) -> Result<(PathKind, &'p str), String> {
    let kind = match path.path_type.as_str() {
        "Exact" => PathKind::Exact,
        "Prefix" | "ImplementationSpecific" => PathKind::Prefix,
        "" => return Err(format!("{field}.pathType: missing; it is required (Exact, Prefix or ImplementationSpecific); path ignored")),
        other => return Err(format!("{field}.pathType {other:?}: must be Exact, Prefix or ImplementationSpecific; path ignored")),
    };
    match path.path.as_deref() {
        Some(written) if written.starts_with('/') => Ok((kind, written)),
        None if path.path_type == "ImplementationSpecific" => Ok((kind, "/")),
        other => Err(format!(
            "{field}.path {:?}: must start with '/'; path ignored",
            other.unwrap_or("")
        )),
    }
}

/// ingress-nginx's `strict-validate-path-type` check, which its admission webhook runs: an
/// `Exact` or `Prefix` path (or one without a type) holding other characters than letters,
/// digits, `.`, `_`, `-` and `/` (regex characters belong to `ImplementationSpecific`). One
/// message per such path; the webhook denies them when the key is on and warns otherwise.
pub fn strict_path_type_violations(
    spec: Option<&k8s_openapi::api::networking::v1::IngressSpec>,
) -> Vec<String> {
    let paths = spec
        .into_iter()
        .flat_map(|s| s.rules.iter().flatten())
        .flat_map(|rule| rule.http.iter().flat_map(|http| &http.paths));
    let plain = |path: &str| {
        path.starts_with('/')
            && path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
    };
    paths
        .filter(|p| p.path_type != "ImplementationSpecific")
        .filter_map(|p| p.path.as_deref())
        .filter(|path| !path.is_empty() && !plain(path))
        .map(|path| {
            format!(
                "path {path} cannot be used with pathType Exact or Prefix: only letters, digits, \
                 '.', '_', '-' and '/' (ingress-nginx's strict-validate-path-type); use \
                 ImplementationSpecific for regular expressions"
            )
        })
        .collect()
}

/// The Ingresses in the Store this controller does not serve, each with the class it names
/// (`spec.ingressClassName`, else the legacy annotation; `None`: no class), by name.
pub fn not_ours<'s>(
    store: &'s Store,
    options: &CompileOptions,
) -> Vec<(&'s NamespacedName, Option<&'s str>)> {
    store
        .ingresses_by_name()
        .filter(|(_, ingress)| !is_ours(store, options, ingress))
        .map(|(name, ingress)| (name, class_of(ingress)))
        .collect()
}

/// The class an Ingress names: `spec.ingressClassName`, else the legacy annotation.
fn class_of(ingress: &Ingress) -> Option<&str> {
    let by_spec = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref());
    let annotations = ingress.metadata.annotations.as_ref();
    by_spec.or_else(|| {
        annotations?
            .get(LEGACY_CLASS_ANNOTATION)
            .map(String::as_str)
    })
}

/// The IngressClass rules of the Kubernetes API, plus the legacy annotation.
fn is_ours(store: &Store, options: &CompileOptions, ingress: &Ingress) -> bool {
    if let Some(selector) = &options.watch_namespace_selector {
        let namespace = ingress.metadata.namespace.as_deref().unwrap_or("");
        if !selector.selects(store, namespace) {
            return false;
        }
    }
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

/// The Ingresses this controller serves, oldest first (objects without a timestamp, from files,
/// count as oldest), then by name: the order conflicts are decided in.
pub(crate) fn served<'s>(
    store: &'s Store,
    options: &CompileOptions,
) -> Vec<(&'s NamespacedName, &'s Ingress)> {
    let mut ingresses: Vec<(&NamespacedName, &Ingress)> = store
        .ingresses_by_name()
        .filter(|(_, i)| is_ours(store, options, i))
        .collect();
    ingresses.sort_by(|(a_name, a), (b_name, b)| {
        (a.metadata.creation_timestamp.as_ref())
            .cmp(&b.metadata.creation_timestamp.as_ref())
            .then_with(|| a_name.cmp(b_name))
    });
    ingresses
}

impl Compiler<'_> {
    /// One Ingress, `name` its Store key (the routes share its strings).
    pub(crate) fn ingress(
        &mut self,
        name: &NamespacedName,
        ingress: &Ingress,
        claims: &mut Claims,
    ) {
        let name = name.clone();
        let object = ingress_ref(&name);
        self.out.ingresses.push(name.clone());
        let Some(spec) = ingress.spec.as_ref() else {
            self.diagnose(object, "spec: missing; nothing to serve");
            return;
        };
        if self.disable_catch_all && spec.default_backend.is_some() {
            // Still counted as ours (above): the webhook denies it, as ingress-nginx's does.
            self.diagnose(
                object,
                "spec.defaultBackend: a catch-all Ingress, and --disable-catch-all is set: \
                 not served (as ingress-nginx ignores it); remove spec.defaultBackend, or the flag",
            );
            return;
        }
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
        self.config_map_headers_phase(&mut parsed);
        // ingress-nginx's zone is `<namespace>_<name>_<uid>`, so an Ingress made again starts
        // afresh; the Store keeps no uid, its creation time (seconds) tells them apart.
        if let (Some(limits), Some(created)) = (
            parsed.policy.limits.as_mut().filter(|l| l.keyed()),
            ingress.metadata.creation_timestamp.as_ref(),
        ) {
            let zone = format!("{}_{}", limits.zone, created.0.as_second());
            Arc::make_mut(limits).zone = zone.into();
        }
        if let Some(canary) = parsed.canary.take() {
            self.ignored_on_canary(&object, ingress);
            claims.canaries.push(PendingCanary {
                ingress: name,
                canary,
                hash_by: parsed.policy.hash_by.clone(),
                service_upstream: parsed.service_upstream,
                legacy_affinity: (parsed.canary_behavior == CanaryBehavior::Legacy)
                    .then(|| parsed.policy.affinity.clone()),
            });
            return;
        }
        self.errors_phase(&name, &object, &mut parsed);
        self.mirror_phase(&object, &mut parsed);
        self.external_auth_phase(&name, &object, &mut parsed);
        self.user_auth_phase(&object, &mut parsed);
        self.client_cert_phase(&name, &object, &mut parsed);
        self.custom_headers_phase(&object, &mut parsed);
        self.out.tracing |= parsed.policy.opentelemetry.enabled;
        let upstream = UpstreamChoice {
            service_upstream: parsed.service_upstream,
            annotated: parsed.backend_protocol,
            settings: self.upstream_tls(&name, &mut parsed),
        };
        let policies = Policies::new(&parsed, &self.default_policy, self.global_auth.as_ref());
        if parsed.ssl_passthrough {
            self.passthrough_ingresses.insert(name.clone());
        }

        let context = IngressContext {
            name: &name,
            object: &object,
            parsed: &parsed,
            policies: &policies,
            upstream: &upstream,
        };
        // ingress-nginx: an Ingress without rules makes its spec.defaultBackend the catch-all;
        // one with rules sends its hosts' unmatched paths there (see `roots`).
        let has_rules = spec.rules.as_ref().is_some_and(|rules| !rules.is_empty());
        if let Some(backend) = spec.default_backend.as_ref().filter(|_| !has_rules) {
            self.ingress_default_backend(&context, backend, claims);
        }
        let own_default = spec.default_backend.as_ref().filter(|_| has_rules);
        let root_policy = policies.for_path("/", false, &self.out.settings.no_auth_locations);
        let mut roots = roots::Roots::new(
            (&name, &object),
            root_policy,
            &self.default_policy,
            &upstream,
            own_default,
        );
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
            let rule_host = rule.host.as_deref().unwrap_or("");
            self.host_root(&mut roots, &host, rule_host);
            for (p, path) in rule.http.iter().flat_map(|h| h.paths.iter()).enumerate() {
                let field = format!("spec.rules[{r}].http.paths[{p}]");
                self.ingress_path(&context, &host, rule_host, &field, path, claims);
            }
        }
        self.unused_default_backend(&roots);

        self.ingress_tls(&name, &object, spec, &hosts_of_rules, claims);
    }

    /// `spec.defaultBackend` of an Ingress without rules: the oldest one's takes the requests
    /// of hosts without rules (ingress-nginx's catch-all server).
    fn ingress_default_backend(
        &mut self,
        context: &IngressContext<'_>,
        backend: &IngressBackend,
        claims: &mut Claims,
    ) {
        if let Some(owner) = &claims.default_backend {
            self.diagnose(
                context.object.clone(),
                format!(
                    "spec.defaultBackend: ignored, Ingress {owner} is older and already sets one"
                ),
            );
            return;
        }
        let policy = (context.policies).for_path("/", false, &self.out.settings.no_auth_locations);
        let route = self.route(
            context.name,
            backend,
            "spec.defaultBackend",
            policy,
            context.upstream,
            ("", ""),
        );
        self.out.routes.set_default_backend(route);
        claims.default_backend = Some(context.name.clone());
    }

    /// One path of a rule: its kind, its policy, its route, and its claim on (host, path): the
    /// oldest Ingress routes a path, a newer one gets a diagnostic.
    fn ingress_path(
        &mut self,
        context: &IngressContext<'_>,
        host: &HostPattern,
        rule_host: &str,
        field: &str,
        path: &HTTPIngressPath,
        claims: &mut Claims,
    ) {
        let (kind, written) = match path_as_written(path, field) {
            Ok(path) => path,
            Err(why) => {
                self.diagnose(context.object.clone(), why);
                return;
            }
        };
        // ingress-nginx: a rewrite to the path itself is no rewrite.
        let rewrites = context
            .parsed
            .policy
            .rewrite
            .as_ref()
            .is_some_and(|r| r.target != written);
        let kind = if context.parsed.use_regex || rewrites {
            PathKind::Regex
        } else {
            kind
        };
        let policy =
            context
                .policies
                .for_path(written, rewrites, &self.out.settings.no_auth_locations);
        if kind == PathKind::Prefix
            && path.path_type == "ImplementationSpecific"
            && written != "/"
            && !written.ends_with('/')
        {
            self.diagnose_with(
                Severity::Difference,
                context.object.clone(),
                format!("{field}: ImplementationSpecific {written} is matched as Prefix, element by element ({written}x does not match); ingress-nginx matched it as a string prefix"),
            );
        }
        let route = self.route(
            context.name,
            &path.backend,
            &format!("{field}.backend"),
            policy,
            context.upstream,
            (rule_host, written),
        );
        // The route's site holds the one shared copy of the written path.
        let path_route = PathRoute::new(kind, route.site.path.clone(), route);
        let (kind, normalised) = path_route.identity();
        let claim = (host.clone(), kind, self.share(normalised));
        if let Some(owner) = claims.paths.get(&claim) {
            let owner = if owner == context.name {
                "this Ingress".to_owned()
            } else {
                format!("Ingress {owner}")
            };
            self.diagnose(
                context.object.clone(),
                format!("{field}: {:?} {written} on host {host} is already routed by {owner}, which takes precedence; path ignored", path.path_type),
            );
            return;
        }
        claims.paths.insert(claim, context.name.clone());
        let upstream = claims
            .record_locations
            .then(|| path_route.route.upstream_name())
            .flatten();
        if let Some(upstream) = upstream {
            let location = (host.clone(), written.to_owned(), path.path_type.clone());
            claims.locations.insert(location, upstream);
        }
        self.out.routes.host_mut(host).add(path_route);
    }

    /// `spec.tls` of one Ingress: its hosts are TLS hosts, and the Secret of each is claimed
    /// (the oldest Ingress's wins). Entries without hosts cover the Ingress's own hosts.
    fn ingress_tls(
        &mut self,
        name: &NamespacedName,
        object: &ObjectRef,
        spec: &IngressSpec,
        hosts_of_rules: &[HostPattern],
        claims: &mut Claims,
    ) {
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
    pub(crate) fn route(
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
                traffic: None,
                not_found: false,
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
        let (number, resolved_port) = self.as_ingress_nginx_reads(
            &object,
            field,
            &service,
            (port.and_then(|p| p.number), &written_port),
        );
        let policy =
            self.upstream_protocol(&service, ingress, number, &resolved_port, policy, upstream);
        let backend = self.service_backend(
            &object,
            field,
            &service,
            (number, &resolved_port),
            upstream.service_upstream,
        );
        make(service_name, backend, &policy)
    }

    /// The Service port reference to resolve for an Ingress backend written as `written`: as
    /// written, unless ingress-nginx reads it as another port (one whose targetPort is the
    /// number or name written, found first or instead of a port of that number or name). Then
    /// that port, by its name or number, with a notice: the backend ingress-nginx used is the
    /// one served, and the Ingress is not portable as written.
    pub(crate) fn as_ingress_nginx_reads(
        &mut self,
        object: &ObjectRef,
        field: &str,
        service: &NamespacedName,
        (number, written): (Option<i32>, &str),
    ) -> (Option<i32>, String) {
        let as_written = (number, written.to_owned());
        let Some(port) = crate::backends::ingress_nginx_port(self.store, service, written) else {
            return as_written;
        };
        if crate::backends::names_port(port, written) {
            return as_written;
        }
        let name = port.name.as_deref().filter(|name| !name.is_empty());
        let which = match name {
            Some(name) => format!("{} ({name})", port.port),
            None => port.port.to_string(),
        };
        let target = crate::backends::target_port_text(port).unwrap_or_default();
        let reason = format!(
            "{field}.service.port: {written} is the targetPort ({target}) of Service \
             {service}'s port {which}; ingress-nginx takes the first port whose number, \
             targetPort or name matches, so requests go through port {which} (the Ingress API \
             means the Service's own port: Gateway API and other controllers refuse this)"
        );
        self.diagnose_with(Severity::Notice, object.clone(), reason);
        match name {
            Some(name) => (None, name.to_owned()),
            None => (Some(port.port), port.port.to_string()),
        }
    }

    /// The backend of a Service port (by number and as written), resolved once per compile;
    /// with `service-upstream`, the Service's cluster IP. Problems are diagnostics on
    /// `object` and leave a backend that answers 503.
    pub(crate) fn service_backend(
        &mut self,
        object: &ObjectRef,
        field: &str,
        service: &NamespacedName,
        (number, written_port): (Option<i32>, &str),
        service_upstream: bool,
    ) -> Arc<Backend> {
        if service_upstream {
            match self.cluster_ip_backend(service, number, written_port) {
                Ok(backend) => return backend,
                Err(why) => self.diagnose(
                    object.clone(),
                    format!("{field}: service-upstream: {why}; the Service's endpoints are used"),
                ),
            }
        }
        let cache_key = (service.clone(), written_port.to_owned());
        if let Some(backend) = self.backends_by_port.get(&cache_key) {
            return backend.clone();
        }
        let port = (number, written_port);
        let backend = self.backend_or_diagnose(object, field, service, port, "requests answer 503");
        self.backends_by_port.insert(cache_key, backend.clone());
        backend
    }
}
