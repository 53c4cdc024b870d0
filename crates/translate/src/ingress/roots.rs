//! Each host's root location, as ingress-nginx makes it: the first Ingress with a rule for a
//! host gives the host's server a `location /` with that Ingress's annotations, in front of
//! its `spec.defaultBackend` or the default backend. The paths no rule of the host matches
//! land there, so an auth host's unrouted path asks for credentials before it answers 404.
//!
//! ```text
//!  first Ingress with a rule for host H (canaries never)
//!     ├─ has spec.defaultBackend ─▶ root = its policy ─▶ that backend
//!     ├─ has annotations ─────────▶ root = its policy ─▶ --default-backend-service, else 404
//!     └─ neither ─────────────────▶ no root: the table's host default (the same answer)
//!  later Ingresses of H ─▶ nothing (their spec.defaultBackend is not H's, as in ingress-nginx)
//!  an Ingress without rules ─▶ its spec.defaultBackend is the catch-all (unknown hosts)
//! ```
//! A path `/` of any Ingress of the host takes every request before the root is asked, as
//! ingress-nginx's real `location /` replaces its default one.

use std::sync::Arc;

use k8s_openapi::api::networking::v1::IngressBackend;
use model::client_cert::Scope;
use model::policy::RoutePolicy;
use model::routes::{HostPattern, HostRoutes, PathKind, Route, RouteSite};
use model::{NamespacedName, ObjectRef, Severity};

use super::upstream::UpstreamChoice;
use crate::compiler::Compiler;

/// One Ingress's share of host roots while its rules are read.
pub(super) struct Roots<'a> {
    ingress: &'a NamespacedName,
    object: &'a ObjectRef,
    /// The policy of its root location (its path `/`'s, without path-scope certificates).
    policy: Arc<RoutePolicy>,
    upstream: &'a UpstreamChoice,
    /// `spec.defaultBackend` of an Ingress with rules.
    default_backend: Option<&'a IngressBackend>,
    /// That backend's route, made when a host first needs it.
    own_default: Option<Arc<Route>>,
    /// Hosts this Ingress was the first to have a rule for.
    owned: usize,
}

impl<'a> Roots<'a> {
    /// `policy`: the Ingress's policy for the path `/`; `default_policy`: the ConfigMap's.
    pub(super) fn new(
        (ingress, object): (&'a NamespacedName, &'a ObjectRef),
        policy: Arc<RoutePolicy>,
        default_policy: &Arc<RoutePolicy>,
        upstream: &'a UpstreamChoice,
        default_backend: Option<&'a IngressBackend>,
    ) -> Roots<'a> {
        // `sluice.dev/auth-tls-scope: path` keeps client certificates to the Ingress's own
        // paths: the root is not one of them.
        let policy = if (policy.client_cert.as_ref()).is_some_and(|c| c.scope == Scope::Path) {
            let without = RoutePolicy {
                client_cert: None,
                ..(*policy).clone()
            };
            if without == **default_policy {
                default_policy.clone()
            } else {
                Arc::new(without)
            }
        } else {
            policy
        };
        Roots {
            ingress,
            object,
            policy,
            upstream,
            default_backend,
            own_default: None,
            owned: 0,
        }
    }
}

impl Compiler<'_> {
    /// Makes `host`'s root when this Ingress is the first with a rule for it. `rule_host`: the
    /// host as written (the route's label).
    pub(super) fn host_root(&mut self, roots: &mut Roots<'_>, host: &HostPattern, rule_host: &str) {
        if *host == HostPattern::Any || self.out.routes.host_mut(host).server {
            return;
        }
        roots.owned += 1;
        let policy = roots.policy.clone();
        let root = match roots.default_backend {
            Some(backend) => {
                if roots.own_default.is_none() {
                    let route = self.route(
                        roots.ingress,
                        backend,
                        "spec.defaultBackend",
                        policy,
                        roots.upstream,
                        ("", ""),
                    );
                    roots.own_default = Some(route);
                }
                roots.own_default.clone()
            }
            None if Arc::ptr_eq(&policy, &self.default_policy) => None,
            None => {
                let default = self.host_default.clone();
                Some(Arc::new(Route {
                    ingress: roots.ingress.clone(),
                    site: RouteSite {
                        host: self.share(rule_host),
                        path: self.share("/"),
                        service_port: default.site.service_port.clone(),
                    },
                    // The host default's target (its backend, or its 404) behind this policy.
                    ..default.with_policy(policy)
                }))
            }
        };
        let routes = self.out.routes.host_mut(host);
        routes.server = true;
        routes.root = root;
    }

    /// After an Ingress's rules: its `spec.defaultBackend` serves nothing when it was first
    /// for none of its hosts (ingress-nginx drops it silently; Sluice says so).
    pub(super) fn unused_default_backend(&mut self, roots: &Roots<'_>) {
        if roots.default_backend.is_some() && roots.owned == 0 {
            self.diagnose_with(
                Severity::Notice,
                roots.object.clone(),
                "spec.defaultBackend: an Ingress with rules sends to it the paths no rule matches on the hosts it is the first (oldest) Ingress to have rules for, and it is first for none (hosts without rule are the catch-all of an Ingress without rules); unused, as in ingress-nginx",
            );
        }
    }
}

/// Every route of a host's server, for a host-wide pass to change (a server-wide refusal,
/// `server-snippet` headers, host-scope client certificates apply to all of them, as nginx's
/// server-level directives do): each path's, and the root, made from the host default when
/// the host has none yet (its Ingress: the one of the host's first path).
pub(super) fn routes_of_server<'r>(
    routes: &'r mut HostRoutes,
    host_default: &Arc<Route>,
) -> impl Iterator<Item = &'r mut Arc<Route>> {
    let owner = routes.paths.first().map(|p| p.route.ingress.clone());
    let wanted = routes.server && routes.root.is_none() && !takes_every_path(routes);
    if let Some(owner) = owner.filter(|_| wanted) {
        let route = Route {
            ingress: owner,
            ..host_default.with_policy(host_default.policy.clone())
        };
        routes.root = Some(Arc::new(route));
    }
    let HostRoutes { paths, root, .. } = routes;
    paths.iter_mut().map(|p| &mut p.route).chain(root.as_mut())
}

/// A path `/` (not `Exact`, without conditions) takes every request of the host before the
/// root could: the root is then dropped (it would cost its memory and serve nothing).
pub(super) fn takes_every_path(routes: &HostRoutes) -> bool {
    routes
        .paths
        .iter()
        .any(|p| p.kind != PathKind::Exact && &*p.written == "/" && p.when.is_empty())
}
