//! Making and replaying route fragments (`fragments.rs`): one HTTPRoute or GRPCRoute either
//! compiled (attached, its rules, its status) and kept, or put back in place from what the last
//! compile kept of it.
//!
//! ```text
//!  gateway_api_into ─▶ gateway_route(source) ─┬─ fragment usable ─▶ replay (counts, claims,
//!                                             │                     rules, diagnostics, backends)
//!                                             └─ otherwise ─▶ http_route / grpc_route ─▶ keep
//! ```

use std::sync::Arc;

use model::gateway_status::RouteStatus;
use model::{Backend, Kind};

use super::fragments::{Fragment, Recording, RouteOutcome, Source};
use super::hosts::GatewayHost;
use super::ListenerSlot;
use crate::compiler::Compiler;

impl Compiler<'_> {
    /// One HTTPRoute or GRPCRoute, attached and compiled into the table (`compile`): replayed
    /// from its fragment of the last compile when nothing it depends on changed. Returns its
    /// status.
    pub(super) fn gateway_route(
        &mut self,
        source: Source,
        (listeners, both_kinds): (&mut [ListenerSlot], bool),
        compile: impl FnOnce(&mut Self, &mut [ListenerSlot]) -> RouteOutcome,
    ) -> Option<Arc<RouteStatus>> {
        let Some(fragments) = self.fragments.as_deref_mut() else {
            return compile(self, listeners).status;
        };
        let address = source.address();
        let context = self.store.context();
        let kind = source.kind();
        let old = fragments.previous.remove(&address);
        let usable = old.filter(|old| {
            old.context == context
                && (!both_kinds || unclaimed(listeners, kind, &old.outcome.pairs))
                && self.backends_still_usable(&old.backends)
        });
        let fragment = match usable {
            Some(old) => {
                self.replay(&old, kind, (listeners, both_kinds));
                if let Some(fragments) = self.fragments.as_deref_mut() {
                    fragments.counts.reused += 1;
                }
                old
            }
            None => {
                let mark = self.out.diagnostics.len();
                let outer = self.recording.replace(Recording::default());
                let outcome = compile(self, listeners);
                let recording = std::mem::replace(&mut self.recording, outer).unwrap_or_default();
                if let Some(fragments) = self.fragments.as_deref_mut() {
                    fragments.counts.compiled += 1;
                }
                if outcome.contested {
                    return outcome.status;
                }
                let mut slots: Vec<usize> = outcome.pairs.iter().map(|(s, _)| *s).collect();
                slots.sort_unstable();
                slots.dedup();
                Box::new(Fragment {
                    _source: source.kept(),
                    context,
                    outcome,
                    listeners: slots,
                    diagnostics: self.out.diagnostics[mark..].to_vec(),
                    backends: recording.backends,
                    backend_tls_uses: recording.backend_tls_uses,
                })
            }
        };
        let status = fragment.outcome.status.clone();
        if let Some(fragments) = self.fragments.as_deref_mut() {
            fragments.routes.insert(address, fragment);
        }
        status
    }

    /// Whether a fragment's backends are this configuration's: each Service port has one
    /// backend per configuration.
    fn backends_still_usable(&self, backends: &[Arc<Backend>]) -> bool {
        backends.iter().all(|backend| {
            let held = backend.key().and_then(|key| self.out.backends.get(key));
            held.is_none_or(|held| Arc::ptr_eq(held, backend))
        })
    }

    /// A fragment's effects, as compiling its route again would have them.
    fn replay(
        &mut self,
        fragment: &Fragment,
        kind: Kind,
        (listeners, both_kinds): (&mut [ListenerSlot], bool),
    ) {
        let outcome = &fragment.outcome;
        for &slot in &fragment.listeners {
            listeners[slot].attached += 1;
        }
        if both_kinds {
            for (slot, host) in &outcome.pairs {
                listeners[*slot].claims.push((host.clone(), kind));
            }
        }
        for rule in &outcome.rules {
            self.add_placed(rule, &outcome.placed);
        }
        self.out
            .diagnostics
            .extend(fragment.diagnostics.iter().cloned());
        for backend in &fragment.backends {
            let Some(key) = backend.key() else { continue };
            if self.out.backends.contains_key(key) {
                continue;
            }
            // Endpoints that changed in the same batch as the configuration were not taken by
            // the fast path: read them as a fresh backend would.
            self.refresh_kept_endpoints(key, backend);
            self.out.backends.insert(key.clone(), backend.clone());
        }
        for (service_port, route) in &fragment.backend_tls_uses {
            (self.backend_tls.used_by)
                .entry(service_port.clone())
                .or_default()
                .insert(route.clone());
        }
    }
}

/// No route of the other kind holds a hostname the route attached with (it would have been
/// refused there: `attach_route`'s rule that the older of the two kinds keeps a hostname).
fn unclaimed(listeners: &[ListenerSlot], kind: Kind, pairs: &[(usize, GatewayHost)]) -> bool {
    pairs.iter().all(|(slot, host)| {
        !(listeners[*slot].claims.iter()).any(|(held, k)| *k != kind && held.overlaps(host))
    })
}
