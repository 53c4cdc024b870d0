//! Session affinity belongs to a Service port, as ingress-nginx keeps it per upstream: once
//! every ordinary Ingress is in, the oldest Ingress with `affinity: cookie` on a backend gives
//! every route to that backend its affinity. Routes of other Ingresses honour the cookie but
//! never issue it (ingress-nginx's per-location cookie list); a newer Ingress's own affinity
//! settings give way, with a notice.
//!
//! ```text
//!  routes ─▶ by backend ─▶ the oldest Ingress's affinity ─▶ routes without one: issues_cookie
//!                                                           false; routes with another: its
//! ```

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use model::affinity::Affinity;
use model::compiled::ingress_ref;
use model::policy::RoutePolicy;
use model::{Backend, Diagnostic, NamespacedName, Route, Severity};

use crate::compiler::Compiler;

impl Compiler<'_> {
    /// The pass above; runs after the host-wide passes and before canaries join (a canary
    /// takes its main route's affinity as it is then).
    pub(crate) fn share_affinity(&mut self) {
        let age: HashMap<&NamespacedName, usize> = self
            .out
            .ingresses
            .iter()
            .enumerate()
            .map(|(i, name)| (name, i))
            .collect();
        // Backend (by address) → (age, Ingress, its affinity), the oldest kept.
        let mut owners: HashMap<usize, (usize, NamespacedName, Arc<Affinity>)> = HashMap::new();
        for route in self.out.routes.routes() {
            let Some(affinity) = &route.policy.affinity else {
                continue;
            };
            if route.backend.key().is_none() {
                continue;
            }
            let rank = age.get(&route.ingress).copied().unwrap_or(usize::MAX);
            let key = backend_address(&route.backend);
            let older = owners.get(&key).is_none_or(|(owner, ..)| rank < *owner);
            if older {
                owners.insert(key, (rank, route.ingress.clone(), affinity.clone()));
            }
        }
        if owners.is_empty() {
            return;
        }
        // The affinity of the other Ingresses' routes: the owner's, issuing no cookie.
        let owners: HashMap<usize, (NamespacedName, Arc<Affinity>, Arc<Affinity>)> = owners
            .into_iter()
            .map(|(key, (_, owner, affinity))| {
                let honoured = Arc::new(Affinity {
                    issues_cookie: false,
                    ..(*affinity).clone()
                });
                (key, (owner, affinity, honoured))
            })
            .collect();
        let mut told = BTreeSet::new();
        let mut diagnostics = Vec::new();
        // One new policy per (old policy, affinity), so routes that shared one still do.
        let mut made: HashMap<(usize, usize), Arc<RoutePolicy>> = HashMap::new();
        let mut adjust = |route: &mut Arc<Route>| {
            let Some((owner, affinity, honoured)) = owners.get(&backend_address(&route.backend))
            else {
                return;
            };
            let affinity = match &route.policy.affinity {
                Some(own) if *own == *affinity => return,
                Some(_) => {
                    if told.insert((route.ingress.clone(), owner.clone())) {
                        diagnostics.push(Diagnostic::with_severity(
                            Severity::Notice,
                            ingress_ref(&route.ingress),
                            format!("affinity: Service {} is shared with Ingress {owner}, which is older and sets the affinity of every path to it (as ingress-nginx keeps affinity per upstream); this Ingress's affinity settings are not used", route.service),
                        ));
                    }
                    affinity.clone()
                }
                None => honoured.clone(),
            };
            let key = (
                Arc::as_ptr(&route.policy) as usize,
                Arc::as_ptr(&affinity) as usize,
            );
            let policy = made
                .entry(key)
                .or_insert_with(|| {
                    Arc::new(RoutePolicy {
                        affinity: Some(affinity),
                        ..(*route.policy).clone()
                    })
                })
                .clone();
            *route = Arc::new(route.with_policy(policy));
        };
        for (_, routes) in self.out.routes.hosts_mut() {
            for path in &mut routes.paths {
                adjust(&mut path.route);
            }
            if let Some(root) = &mut routes.root {
                adjust(root);
            }
        }
        if let Some(route) = self.out.routes.default_backend_mut() {
            adjust(route);
        }
        self.out.diagnostics.extend(diagnostics);
    }
}

fn backend_address(backend: &Arc<Backend>) -> usize {
    Arc::as_ptr(backend) as usize
}
