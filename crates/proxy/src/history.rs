//! The last configuration swaps and endpoint swaps, each with when it happened and a one-line
//! summary of what changed, for the status page.
//!
//! ```text
//!  Proxy::publish(next)          ─▶ describe_config(previous, next) ─┐
//!  Proxy::endpoints_changed(bs)  ─▶ describe_endpoints(bs) ──────────┴─▶ SwapHistory
//!                                        (two rings of SWAPS_KEPT, behind a Mutex in Shared)
//!  status page ◀─ copies the rings (≤ 2 × SWAPS_KEPT short strings) under the lock
//! ```
//! Only the control plane writes and only the status thread reads; workers never touch it, so
//! the lock is never on a request's path. Every summary names at most [`NAMES_SHOWN`] objects
//! per kind of change, so the memory held is bounded however large a change is.

use std::collections::VecDeque;
use std::fmt::{self, Write};
use std::sync::Arc;
use std::time::SystemTime;

use model::routes::HostPattern;
use model::{Backend, Compiled, NamespacedName};

/// How many swaps of each kind are kept.
pub(crate) const SWAPS_KEPT: usize = 20;

/// How many added or removed names a summary lists before "and N more".
const NAMES_SHOWN: usize = 3;

/// One swap: when, and what changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Swap {
    pub(crate) at: SystemTime,
    pub(crate) summary: String,
}

/// The newest [`SWAPS_KEPT`] swaps of each kind, oldest first.
#[derive(Debug, Default)]
pub(crate) struct SwapHistory {
    config: VecDeque<Swap>,
    endpoints: VecDeque<Swap>,
}

impl SwapHistory {
    pub(crate) fn record_config(&mut self, swap: Swap) {
        push_bounded(&mut self.config, swap);
    }

    pub(crate) fn record_endpoints(&mut self, swap: Swap) {
        push_bounded(&mut self.endpoints, swap);
    }

    /// Configuration swaps, newest first.
    pub(crate) fn config_swaps(&self) -> Vec<Swap> {
        self.config.iter().rev().cloned().collect()
    }

    /// Endpoint swaps, newest first.
    pub(crate) fn endpoint_swaps(&self) -> Vec<Swap> {
        self.endpoints.iter().rev().cloned().collect()
    }
}

fn push_bounded(ring: &mut VecDeque<Swap>, swap: Swap) {
    if ring.len() == SWAPS_KEPT {
        ring.pop_front();
    }
    ring.push_back(swap);
}

/// What a configuration swap changed: Ingresses and hosts added and removed, and how the
/// number of diagnostics moved. O(Ingresses + hosts), on the control plane's thread, next to a
/// compile that costs far more.
pub(crate) fn describe_config(previous: Option<&Compiled>, next: &Compiled) -> String {
    // Sorted lists of shared names, compared by a merge walk: no string is made but for the
    // few names shown (the control plane's thread runs this after each swap; with thousands of
    // hosts, a set of strings per side cost milliseconds of it).
    let hosts_of = |compiled: &Compiled| -> Vec<HostPattern> {
        let mut hosts: Vec<HostPattern> = (compiled.routes.hosts().into_iter())
            .map(|(host, _)| host)
            .collect();
        hosts.sort_unstable();
        hosts
    };
    let ingresses_of = |compiled: &Compiled| -> Vec<NamespacedName> {
        let mut ingresses = compiled.ingresses.clone();
        ingresses.sort_unstable();
        ingresses.dedup();
        ingresses
    };
    let next_hosts = hosts_of(next);
    let next_ingresses = ingresses_of(next);
    let mut summary = format!(
        "{}, {}, {}",
        Count(next_ingresses.len(), "Ingress", "Ingresses"),
        Count(next_hosts.len(), "host", "hosts"),
        Count(next.diagnostics.len(), "diagnostic", "diagnostics")
    );
    let Some(previous) = previous else {
        summary.insert_str(0, "first configuration: ");
        return summary;
    };
    let before = summary.len();
    changes(
        &mut summary,
        "Ingresses",
        &ingresses_of(previous),
        &next_ingresses,
    );
    changes(&mut summary, "hosts", &hosts_of(previous), &next_hosts);
    if previous.diagnostics.len() != next.diagnostics.len() {
        let _ = write!(
            summary,
            "; diagnostics {} → {}",
            previous.diagnostics.len(),
            next.diagnostics.len()
        );
    }
    if summary.len() == before {
        // A Service port, a Secret, an annotation or the ConfigMap changed what is served.
        summary.push_str("; same Ingresses and hosts (rules, Services, Secrets or settings)");
    }
    summary
}

/// Appends `; <what> +a, +b, −c and N more` when the sorted lists `previous` and `next`
/// differ: the added first, then the removed.
fn changes<T: Ord + fmt::Display>(out: &mut String, what: &str, previous: &[T], next: &[T]) {
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    let (mut p, mut n) = (0, 0);
    while p < previous.len() || n < next.len() {
        match (previous.get(p), next.get(n)) {
            (Some(a), Some(b)) if a == b => {
                p += 1;
                n += 1;
            }
            (Some(a), Some(b)) if a > b => {
                added.push(b);
                n += 1;
            }
            (None, Some(b)) => {
                added.push(b);
                n += 1;
            }
            (Some(a), _) => {
                removed.push(a);
                p += 1;
            }
            (None, None) => break,
        }
    }
    let all = (added.iter().map(|name| ('+', name))).chain(removed.iter().map(|name| ('−', name)));
    let total = added.len() + removed.len();
    if total == 0 {
        return;
    }
    let _ = write!(out, "; {what}");
    for (i, (sign, name)) in all.take(NAMES_SHOWN).enumerate() {
        let _ = write!(out, "{} {sign}{name}", if i == 0 { "" } else { "," });
    }
    if total > NAMES_SHOWN {
        let _ = write!(out, " and {} more", total - NAMES_SHOWN);
    }
}

/// What an endpoint swap changed: each backend's endpoints by condition, as they are now.
pub(crate) fn describe_endpoints(backends: &[Arc<Backend>]) -> String {
    let mut summary = String::new();
    for backend in backends.iter().take(NAMES_SHOWN) {
        if !summary.is_empty() {
            summary.push_str("; ");
        }
        match backend.key() {
            Some(key) => {
                let _ = write!(summary, "{key}: ");
            }
            None => summary.push_str("(unresolved): "),
        }
        backend.with_endpoints(|set| {
            let _ = write!(
                summary,
                "{} ready, {} serving and terminating",
                set.ready.len(),
                set.terminating.len()
            );
            if !set.refused.is_empty() {
                let _ = write!(summary, ", {} refused", set.refused.len());
            }
        });
    }
    if backends.len() > NAMES_SHOWN {
        let more = backends.len() - NAMES_SHOWN;
        let _ = write!(
            summary,
            "; and {}",
            Count(more, "more backend", "more backends")
        );
    }
    if summary.is_empty() {
        summary.push_str("no backend changed");
    }
    summary
}

/// `1 host`, `2 hosts`.
struct Count(usize, &'static str, &'static str);

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Count(n, one, many) = *self;
        write!(f, "{n} {}", if n == 1 { one } else { many })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{BackendKey, EndpointSet, NamespacedName};

    fn compiled(ingresses: &[&str]) -> Compiled {
        Compiled {
            ingresses: ingresses
                .iter()
                .map(|name| NamespacedName::new("default", *name))
                .collect(),
            ..Compiled::default()
        }
    }

    #[test]
    fn only_the_newest_swaps_are_kept_newest_first() {
        let mut history = SwapHistory::default();
        for n in 0..SWAPS_KEPT + 5 {
            history.record_config(Swap {
                at: SystemTime::UNIX_EPOCH,
                summary: n.to_string(),
            });
        }
        let swaps = history.config_swaps();
        assert_eq!(swaps.len(), SWAPS_KEPT);
        assert_eq!(swaps[0].summary, (SWAPS_KEPT + 4).to_string());
        assert_eq!(swaps[SWAPS_KEPT - 1].summary, "5");
        assert!(history.endpoint_swaps().is_empty());
    }

    #[test]
    fn a_configuration_swap_names_what_came_and_went_within_bounds() {
        let first = compiled(&["a", "b"]);
        assert_eq!(
            describe_config(None, &first),
            "first configuration: 2 Ingresses, 0 hosts, 0 diagnostics"
        );
        assert_eq!(
            describe_config(None, &compiled(&["a"])),
            "first configuration: 1 Ingress, 0 hosts, 0 diagnostics"
        );
        let next = compiled(&["b", "c", "d", "e", "f"]);
        assert_eq!(
            describe_config(Some(&first), &next),
            "5 Ingresses, 0 hosts, 0 diagnostics; Ingresses +default/c, +default/d, \
             +default/e and 2 more"
        );
        assert!(
            describe_config(Some(&next), &compiled(&["b", "c", "d", "e", "f"]))
                .ends_with("same Ingresses and hosts (rules, Services, Secrets or settings)")
        );
    }

    #[test]
    fn an_endpoint_swap_counts_each_backends_endpoints_by_condition() {
        let backend = |name: &str, ready: usize| {
            let set = EndpointSet {
                ready: (0..ready)
                    .map(|i| std::net::SocketAddr::from(([10, 0, 0, i as u8], 80)))
                    .collect(),
                terminating: vec!["10.0.1.1:80".parse().unwrap()],
                refused: Vec::new(),
                ..EndpointSet::default()
            };
            let key = BackendKey {
                service: NamespacedName::new("default", name),
                port_name: "http".into(),
            };
            Arc::new(Backend::new(key, set))
        };
        let one = describe_endpoints(&[backend("web", 2)]);
        assert_eq!(one, "default/web:http: 2 ready, 1 serving and terminating");
        let many: Vec<_> = (0..5).map(|i| backend(&format!("s{i}"), 1)).collect();
        let text = describe_endpoints(&many);
        assert!(text.ends_with("; and 2 more backends"), "{text}");
        assert_eq!(describe_endpoints(&[]), "no backend changed");
    }
}
