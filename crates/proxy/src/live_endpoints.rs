//! Which endpoints the current configuration's backends hold, as this worker last saw them:
//! the worker's one index of live endpoints. The upstream pool asks it before it keeps a
//! connection, the TCP services before they keep a session; housekeeping rebuilds it on a new
//! configuration and updates it on an endpoint change.
//!
//! ```text
//!  publish ─▶ rebuild(config)        endpoints_changed ─▶ update(backends) ─▶ joined / left
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use model::{Backend, Compiled, EndpointSet};

/// Every endpoint the current configuration's backends hold, counted per backend that holds
/// it (one pod can serve several Services), and each backend's set as last seen.
#[derive(Default)]
pub(crate) struct LiveEndpoints {
    /// Backend (by address) → its endpoint set when this worker last looked.
    pub(crate) seen: HashMap<usize, Arc<EndpointSet>>,
    /// The worker's one index of live endpoints: the upstream pool and the TCP services ask
    /// it too, rather than keep sets of their own.
    /// foldhash: asked once a request (`Upstreams::is_live_endpoint`); the addresses are the
    /// configuration's.
    pub(crate) counts: foldhash::HashMap<SocketAddr, u32>,
}

impl LiveEndpoints {
    pub(crate) fn rebuild(&mut self, config: &Compiled) {
        self.seen.clear();
        self.counts.clear();
        // A `service-upstream` route's one endpoint (the cluster IP) is as live as any other:
        // without it here, its connections were never pooled.
        let backends = config.backends.values();
        for backend in backends.chain(config.service_upstreams.values()) {
            let endpoints = backend.endpoints();
            for addr in endpoints.all() {
                *self.counts.entry(*addr).or_default() += 1;
            }
            self.seen.insert(Arc::as_ptr(backend) as usize, endpoints);
        }
    }

    /// Takes in these backends' current sets; `changed(addr, true)` hears of endpoints no
    /// backend held before, `changed(addr, false)` of ones no backend holds any more.
    pub(crate) fn update(
        &mut self,
        backends: &[Arc<Backend>],
        mut changed: impl FnMut(SocketAddr, bool),
    ) {
        for backend in backends {
            // A backend of a configuration this worker has not seen (or has replaced): the
            // rebuild for that configuration covers it.
            let Some(seen) = self.seen.get_mut(&(Arc::as_ptr(backend) as usize)) else {
                continue;
            };
            let now = backend.endpoints();
            if Arc::ptr_eq(seen, &now) {
                continue;
            }
            // Count the new set in before the old one out, so an endpoint in both never
            // touches zero.
            for addr in now.all() {
                let count = self.counts.entry(*addr).or_default();
                *count += 1;
                if *count == 1 {
                    changed(*addr, true);
                }
            }
            for addr in seen.all() {
                if let Some(count) = self.counts.get_mut(addr) {
                    *count -= 1;
                    if *count == 0 {
                        self.counts.remove(addr);
                        changed(*addr, false);
                    }
                }
            }
            *seen = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::BackendKey;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, last], 8080))
    }

    fn backend(service: &str, ready: &[SocketAddr]) -> Arc<Backend> {
        Arc::new(Backend::new(
            BackendKey {
                service: model::NamespacedName::new("default", service),
                port_name: String::new(),
            },
            EndpointSet {
                ready: ready.to_vec(),
                terminating: Vec::new(),
                refused: Vec::new(),
                ..EndpointSet::default()
            },
        ))
    }

    #[test]
    fn an_endpoint_leaves_only_when_no_backend_holds_it() {
        let (web, api) = (
            backend("web", &[addr(1), addr(2)]),
            backend("api", &[addr(2)]),
        );
        let config = Compiled {
            backends: [
                (web.key().unwrap().clone(), web.clone()),
                (api.key().unwrap().clone(), api.clone()),
            ]
            .into_iter()
            .collect(),
            ..Compiled::default()
        };
        let mut live = LiveEndpoints::default();
        live.rebuild(&config);
        assert_eq!(live.counts.len(), 2);

        // web drops the shared endpoint and gains a new one: only the new one is news.
        web.set_endpoints(EndpointSet {
            ready: vec![addr(1), addr(3)],
            terminating: Vec::new(),
            refused: Vec::new(),
            ..EndpointSet::default()
        });
        let mut changes = Vec::new();
        live.update(std::slice::from_ref(&web), |a, joined| {
            changes.push((a, joined))
        });
        assert_eq!(changes, [(addr(3), true)]);

        // api drops it too: now it is gone. An unchanged backend is no work at all.
        api.set_endpoints(EndpointSet::default());
        changes.clear();
        live.update(&[api.clone(), web.clone()], |a, joined| {
            changes.push((a, joined))
        });
        assert_eq!(changes, [(addr(2), false)]);
        assert_eq!(live.counts.len(), 2);

        // A backend of a configuration this worker never saw is left to that rebuild.
        let stranger = backend("other", &[addr(9)]);
        live.update(&[stranger], |a, joined| changes.push((a, joined)));
        assert_eq!(changes.len(), 1);
    }
}
