//! Canary Ingresses (`canary: "true"`): the rules they add to the ordinary Ingresses' routes,
//! with ingress-nginx's semantics and traps.
//!
//! ```text
//!  canary Ingress path (host, path, pathType, Service port)
//!     └─▶ the ordinary rule with that host, path and pathType ─▶ its backend (the primary)
//!  every rule whose backend is the primary, whatever its host or Ingress:
//!     header H = value | H ~ pattern | H = always ─▶ canary     (H = never ─▶ main, stop)
//!     cookie C = always ─▶ canary                              (C = never ─▶ main, stop)
//!     else the main route, splitting canary-weight in max(canary-weight-total, 100) to the canary
//! ```
//! ingress-nginx attaches the canary to the main rule's *upstream* (namespace, Service, port as
//! written), not to the rule, so every rule routing to that Service port gets it, on any host;
//! only the first canary of an upstream is used; the canary's own hosts, TLS and annotations
//! are never served (except `upstream-hash-by` and `service-upstream`, which ingress-nginx keeps
//! per upstream). Sluice reproduces each of these and says so in a diagnostic.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{IngressBackend, IngressSpec};
use model::compiled::ingress_ref;
use model::policy::RoutePolicy;
use model::routes::{HostPattern, PathRoute, Route, Traffic, Weighted};
use model::{Backend, NamespacedName, ObjectRef, RequestMatch, Severity, ValueMatch};

use crate::compiler::Compiler;
use crate::ingress::annotations::{self, Canary};
use crate::ingress::claims::{Claims, PendingCanary};
use crate::objects::Ingress;

/// A canary joined to a primary upstream.
struct Joined {
    /// The canary's own upstream name.
    name: Arc<str>,
    ingress: NamespacedName,
    backend: Arc<Backend>,
    canary: Canary,
    hash_by: Option<Arc<model::HashBy>>,
    /// `affinity-canary-behavior: legacy`: the canary's own affinity (else the main's).
    legacy_affinity: Option<Option<Arc<model::affinity::Affinity>>>,
    /// (host, path) the canary named, to tell it where else it applies.
    named: Vec<(String, String)>,
}

/// The annotations of a canary Ingress that still do something.
const KEPT_ON_CANARY: [&str; 4] = [
    "upstream-hash-by",
    "upstream-hash-by-subset",
    "upstream-hash-by-subset-size",
    "service-upstream",
];

/// Whether a canary Ingress's annotation still does something: the affinity family is read
/// there too (`affinity-canary-behavior` says whether the canary's own applies).
fn kept_on_canary(name: &str) -> bool {
    KEPT_ON_CANARY.contains(&name)
        || name.starts_with("affinity")
        || name.starts_with("session-cookie-")
}

impl Compiler<'_> {
    /// The annotations a canary Ingress carries that ingress-nginx ignores on it: one notice.
    pub(crate) fn ignored_on_canary(&mut self, object: &ObjectRef, ingress: &Ingress) {
        let ignored: Vec<&str> = ingress
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter_map(|(key, _)| {
                let name = key
                    .strip_prefix(annotations::NGINX_PREFIX)
                    .or_else(|| key.strip_prefix(annotations::SLUICE_PREFIX))?;
                (!name.starts_with("canary") && !kept_on_canary(name)).then_some(key.as_str())
            })
            .collect();
        if !ignored.is_empty() {
            self.diagnose_with(
                Severity::Notice,
                object.clone(),
                format!("canary Ingress: {} ignored; its requests take the main Ingress's settings (as in ingress-nginx, which keeps only upstream-hash-by, load-balance, affinity and service-upstream of a canary)", ignored.join(", ")),
            );
        }
        let spec = ingress.spec.as_ref();
        if spec.is_some_and(|s| s.tls.as_ref().is_some_and(|t| !t.is_empty())) {
            self.diagnose_with(
                Severity::Notice,
                object.clone(),
                "canary Ingress: spec.tls ignored; the main Ingress's hosts carry the certificates (as in ingress-nginx)",
            );
        }
    }

    /// Joins the canary Ingresses to the ordinary rules and writes their rules. Runs once every
    /// ordinary Ingress is in, after the host-wide passes (their policies are final).
    pub(crate) fn canaries(&mut self, claims: &mut Claims) {
        let mut joined: HashMap<String, Joined> = HashMap::new();
        let pending = std::mem::take(&mut claims.canaries);
        for canary in pending {
            self.join_canary(canary, claims, &mut joined);
        }
        if joined.is_empty() {
            return;
        }
        let mut applies_to: Vec<(NamespacedName, String)> = Vec::new();
        for (host, routes) in self.out.routes.hosts_mut() {
            let mut added = Vec::new();
            for rule in routes.paths.iter_mut() {
                let Some(join) = rule.route.upstream_name().and_then(|u| joined.get(&u)) else {
                    continue;
                };
                let site = (
                    rule.route.site.host.to_string(),
                    rule.route.site.path.to_string(),
                );
                if !join.named.contains(&site) {
                    applies_to.push((
                        join.ingress.clone(),
                        format!(
                            "host {host} path {} (Ingress {})",
                            rule.written, rule.route.ingress
                        ),
                    ));
                }
                let (conditional, main) = canary_rules(&rule.route, join);
                added.extend(
                    conditional
                        .into_iter()
                        .map(|(when, route)| rule.with_conditions(when, route)),
                );
                rule.route = main;
            }
            routes.paths.extend(added);
        }
        if claims.default_backend.is_some() {
            let default = self.out.routes.default_backend().cloned();
            if let Some(join) = default
                .as_ref()
                .and_then(|r| r.upstream_name())
                .and_then(|u| joined.get(&u))
            {
                let default = default.expect("checked above");
                let (conditional, main) = canary_rules(&default, join);
                for (when, route) in conditional {
                    let rule = PathRoute::new(model::routes::PathKind::Prefix, "", route.clone());
                    self.out
                        .routes
                        .add_default_rule(rule.with_conditions(when, route));
                }
                if let Some(slot) = self.out.routes.default_backend_mut() {
                    *slot = main;
                }
            }
        }
        applies_to.sort();
        applies_to.dedup();
        for (canary, where_) in applies_to {
            self.diagnose_with(
                Severity::Notice,
                ingress_ref(&canary),
                format!("canary also applies to {where_}, which routes to the same Service port: ingress-nginx attaches a canary to the backend, not to the rule"),
            );
        }
    }

    /// Finds the primary upstream of each path of one canary Ingress (ingress-nginx's
    /// `mergeAlternativeBackends`) and records the join.
    fn join_canary(
        &mut self,
        pending: PendingCanary,
        claims: &Claims,
        joined: &mut HashMap<String, Joined>,
    ) {
        let object = ingress_ref(&pending.ingress);
        let Some(spec) = self
            .store
            .ingress(&pending.ingress)
            .and_then(|i| i.spec.clone())
        else {
            return;
        };
        let paths = canary_paths(&spec);
        for (field, location, backend) in paths {
            let Some(service) = backend.service.as_ref() else {
                continue;
            };
            let port = service.port.as_ref();
            let written_port = match (
                port.and_then(|p| p.number),
                port.and_then(|p| p.name.clone()),
            ) {
                (Some(number), _) => number.to_string(),
                (None, Some(name)) => name,
                (None, None) => {
                    self.diagnose(
                        object.clone(),
                        format!("{field}.backend.service.port: needs a number or a name; canary ignored"),
                    );
                    continue;
                }
            };
            let alternative = format!(
                "{}-{}-{written_port}",
                pending.ingress.namespace, service.name
            );
            let primaries = match &location {
                Some(location) => self
                    .primaries_of_path(&object, &field, location, &alternative, claims)
                    .into_iter()
                    .collect(),
                None => self.primaries_of_default(&object, &alternative, claims),
            };
            let service_name =
                NamespacedName::new(pending.ingress.namespace.clone(), &*service.name);
            let resolved = (!primaries.is_empty()).then(|| {
                self.as_ingress_nginx_reads(
                    &object,
                    &format!("{field}.backend"),
                    &service_name,
                    (port.and_then(|p| p.number), &written_port),
                )
            });
            for primary in primaries {
                if let Some(first) = joined.get_mut(&primary) {
                    let this = (&pending.ingress, alternative.as_str());
                    let why = second_canary(first, this, &primary, location.as_ref());
                    if let Some((severity, why)) = why {
                        self.diagnose_with(severity, object.clone(), format!("{field}: {why}"));
                    }
                    continue;
                }
                let (number, resolved_port) = resolved.clone().unwrap_or_default();
                let backend = self.service_backend(
                    &object,
                    &format!("{field}.backend"),
                    &service_name,
                    (number, &resolved_port),
                    pending.service_upstream,
                );
                let named = location
                    .iter()
                    .map(|(host, path, _)| (host.clone(), path.clone()))
                    .collect();
                joined.insert(
                    primary,
                    Joined {
                        name: alternative.as_str().into(),
                        ingress: pending.ingress.clone(),
                        backend,
                        canary: pending.canary.clone(),
                        hash_by: pending.hash_by.clone(),
                        legacy_affinity: pending.legacy_affinity.clone(),
                        named,
                    },
                );
            }
        }
    }

    /// The primary upstream of one canary path: the ordinary rule of the same host, path and
    /// pathType. None (with the reason) when there is none, when it is the canary's own
    /// Service port, or when another rule of the host routes to the canary's Service port
    /// (ingress-nginx then stops looking).
    fn primaries_of_path(
        &mut self,
        object: &ObjectRef,
        field: &str,
        (host, path, path_type): &(String, String, String),
        alternative: &str,
        claims: &Claims,
    ) -> Option<String> {
        let Ok(pattern) = HostPattern::parse(Some(host)) else {
            self.diagnose(
                object.clone(),
                format!("{field}: host {host:?} is not a valid host; canary ignored"),
            );
            return None;
        };
        let on_host = claims
            .locations
            .iter()
            .filter(|((h, _, _), _)| *h == pattern);
        let mut found = None;
        let mut host_exists = false;
        for ((_, p, t), upstream) in on_host {
            host_exists = true;
            if upstream == alternative {
                self.diagnose_with(
                    Severity::Notice,
                    object.clone(),
                    format!("{field}: Service port {alternative} is already the main backend of host {pattern} path {p}; canary ignored (as in ingress-nginx)"),
                );
                return None;
            }
            if p == path && t == path_type {
                found = Some(upstream.clone());
            }
        }
        if found.is_none() {
            let why = if host_exists || pattern == HostPattern::Any {
                format!("no ordinary Ingress routes host {pattern} path {path} ({path_type})")
            } else {
                format!("no ordinary Ingress serves host {pattern}")
            };
            // `Missing`: the main Ingress may come next (a folder applied in any order).
            self.diagnose_with(
                Severity::Missing,
                object.clone(),
                format!("{field}: {why}; a canary only joins an existing rule, so it is not served (as in ingress-nginx)"),
            );
        }
        found
    }

    /// The primaries of a canary's `spec.defaultBackend`: every rule without host, and an
    /// Ingress's `spec.defaultBackend` (ingress-nginx's default server), except the
    /// controller's own default backend.
    fn primaries_of_default(
        &mut self,
        object: &ObjectRef,
        alternative: &str,
        claims: &Claims,
    ) -> Vec<String> {
        let mut primaries: Vec<String> = claims
            .locations
            .iter()
            .filter(|((h, _, _), _)| *h == HostPattern::Any)
            .map(|(_, upstream)| upstream.clone())
            .collect();
        if claims.default_backend.is_some() {
            primaries.extend(
                self.out
                    .routes
                    .default_backend()
                    .and_then(|r| r.upstream_name()),
            );
        }
        primaries.sort();
        primaries.dedup();
        if primaries.iter().any(|p| p == alternative) {
            self.diagnose_with(
                Severity::Notice,
                object.clone(),
                format!("spec.defaultBackend: Service port {alternative} is already a main backend of the default server; canary ignored (as in ingress-nginx)"),
            );
            return Vec::new();
        }
        if primaries.is_empty() {
            self.diagnose_with(
                Severity::Missing,
                object.clone(),
                "spec.defaultBackend: no ordinary Ingress has a rule without host or a spec.defaultBackend to join; canary not served (as in ingress-nginx)",
            );
        }
        primaries
    }
}

/// (field, (host, path, pathType), backend) for each path of a canary Ingress, its
/// `spec.defaultBackend` first (no location: it joins the default server).
type CanaryPath = (String, Option<(String, String, String)>, IngressBackend);

fn canary_paths(spec: &IngressSpec) -> Vec<CanaryPath> {
    let mut paths = Vec::new();
    if let Some(backend) = &spec.default_backend {
        paths.push(("spec.defaultBackend".to_owned(), None, backend.clone()));
    }
    for (r, rule) in spec.rules.iter().flatten().enumerate() {
        for (p, path) in rule.http.iter().flat_map(|h| h.paths.iter()).enumerate() {
            let host = rule.host.clone().unwrap_or_default();
            let written = match path.path.clone() {
                Some(written) => written,
                None if path.path_type == "ImplementationSpecific" => "/".to_owned(),
                None => continue,
            };
            paths.push((
                format!("spec.rules[{r}].http.paths[{p}]"),
                Some((host, written, path.path_type.clone())),
                path.backend.clone(),
            ));
        }
    }
    paths
}

/// A canary path whose primary already has a canary: the same canary naming another of the
/// backend's rules is recorded; another canary is ignored, and why (an error where
/// ingress-nginx's webhook refuses it: a second canary of one host and path).
fn second_canary(
    first: &mut Joined,
    (ingress, alternative): (&NamespacedName, &str),
    primary: &str,
    location: Option<&(String, String, String)>,
) -> Option<(Severity, String)> {
    if *first.name == *alternative && first.ingress == *ingress {
        if let Some((host, path, _)) = location {
            first.named.push((host.clone(), path.clone()));
        }
        return None;
    }
    let same_rule =
        location.is_some_and(|(host, path, _)| first.named.contains(&(host.clone(), path.clone())));
    let severity = if same_rule {
        Severity::Error
    } else {
        Severity::Notice
    };
    Some((
        severity,
        format!("backend {primary} already has canary {} (Ingress {}), which is older; ingress-nginx uses only the first canary of a backend, this one is ignored", first.name, first.ingress),
    ))
}

/// A rule's conditions beyond its path, and where the requests that meet them go.
type Conditional = (Box<[RequestMatch]>, Arc<Route>);

/// The rules a canary adds in front of `main`, in ingress-nginx's order, and the route that
/// replaces `main` (with the weighted split, when the canary has a weight).
fn canary_rules(main: &Arc<Route>, join: &Joined) -> (Vec<Conditional>, Arc<Route>) {
    // ingress-nginx copies the main upstream's affinity to the canary's unless the canary
    // says `legacy`.
    let affinity = match &join.legacy_affinity {
        Some(own) => own.clone(),
        None => main.policy.affinity.clone(),
    };
    let policy = if main.policy.hash_by == join.hash_by && main.policy.affinity == affinity {
        main.policy.clone()
    } else {
        Arc::new(RoutePolicy {
            hash_by: join.hash_by.clone(),
            affinity,
            ..(*main.policy).clone()
        })
    };
    let canary = Arc::new(Route {
        ingress: main.ingress.clone(),
        service: main.service.clone(),
        backend: join.backend.clone(),
        policy,
        site: main.site.clone(),
        traffic: Some(Box::new(Traffic {
            alternative_name: Some(join.name.clone()),
            primary: Some(main.clone()),
            ..Traffic::default()
        })),
        not_found: false,
    });
    let c = &join.canary;
    // The main side: its split carries the canary even at weight 0, so that a request whose
    // affinity cookie names the canary goes there from any rule (ingress-nginx asks the
    // cookies before the traffic rules); `never` rules take the weightless one.
    let split = |weight: u32| {
        Arc::new(Route {
            traffic: Some(Box::new(Traffic {
                total: c.weight_total,
                alternatives: Box::new([Weighted {
                    weight: weight.min(c.weight_total),
                    route: canary.clone(),
                }]),
                ..Traffic::default()
            })),
            ..main.with_policy(main.policy.clone())
        })
    };
    let never = split(0);
    let main = if c.weight == 0 {
        never.clone()
    } else {
        split(c.weight)
    };
    let exact = |value: &str| ValueMatch::Exact(value.into());
    let mut rules: Vec<Conditional> = Vec::new();
    if let Some(name) = &c.header {
        let header = |value: ValueMatch| -> Box<[RequestMatch]> {
            Box::new([RequestMatch::Header {
                name: name.clone(),
                value,
            }])
        };
        if let Some(value) = &c.header_value {
            rules.push((header(exact(value)), canary.clone()));
        } else if let Some(pattern) = &c.header_pattern {
            rules.push((header(ValueMatch::Regex(pattern.clone())), canary.clone()));
        } else {
            rules.push((header(exact("always")), canary.clone()));
            rules.push((header(exact("never")), never.clone()));
        }
    }
    if let Some(name) = &c.cookie {
        let cookie = |value: &str| -> Box<[RequestMatch]> {
            Box::new([RequestMatch::Cookie {
                name: name.as_str().into(),
                value: exact(value),
            }])
        };
        rules.push((cookie("always"), canary.clone()));
        rules.push((cookie("never"), never.clone()));
    }
    (rules, main)
}
