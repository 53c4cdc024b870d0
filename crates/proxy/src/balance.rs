//! Picking an endpoint, per worker: round robin or power-of-two-choices on in-flight requests,
//! or the request key's place on a consistent-hash ring (`upstream-hash-by`), skipping
//! endpoints this request already tried and ones that recently refused connections.
//!
//! ```text
//!  active endpoints ─▶ untried and not set aside? ─▶ untried? ─▶ any
//!     ─▶ round robin | P2C | first along the ring from the key's hash | the session
//!        cookie's endpoint (affinity.rs)
//! ```
//! All state is this worker's own: no shared counters, so workers never contend. Workers
//! drift apart a little in their rotation, which spreads load just as well.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use model::{Backend, EndpointSet, LoadBalance};

use crate::affinity::{Sticky, StickyTable, Strictness};
use crate::metrics::AddressHasher;
use crate::ring::Ring;

/// How long an endpoint that refused or failed a connection is passed over (unless nothing
/// else is left). Long enough to stop hammering a dead pod, short enough that a restarted
/// one is back almost at once.
pub(crate) const SET_ASIDE: Duration = Duration::from_millis(1500);

#[derive(Default)]
pub(crate) struct Balancer {
    /// Next round-robin position per backend, keyed by the backend's address.
    round_robin: HashMap<usize, usize, BuildHasherDefault<AddressHasher>>,
    /// Requests sent and not finished, per endpoint (tracked for least-request only).
    in_flight: HashMap<SocketAddr, u32>,
    /// Endpoints passed over until the given time.
    set_aside: HashMap<SocketAddr, Instant>,
    /// Hash rings of backends with `upstream-hash-by` routes, by the backend's address, with
    /// the endpoint set each was made from (held, so its address cannot be reused by a newer
    /// set while the ring is kept).
    rings: HashMap<usize, (Arc<EndpointSet>, Ring), BuildHasherDefault<AddressHasher>>,
    /// The endpoint digests (and rings) of backends with affinity routes, kept as `rings`.
    sticky: HashMap<usize, (Arc<EndpointSet>, StickyTable), BuildHasherDefault<AddressHasher>>,
}

/// How strictly a candidate is filtered; the first level with any candidate wins.
#[derive(Clone, Copy)]
enum Level {
    Healthy,
    Untried,
    Any,
}

/// One request outstanding at an endpoint, for least-request balancing: counted from its
/// attempt until its response body ends (or the attempt fails).
pub(crate) struct InFlight {
    balancer: Rc<RefCell<Balancer>>,
    addr: SocketAddr,
}

impl Balancer {
    /// An endpoint of `backend` for the next attempt, or `None` when it has none.
    pub(crate) fn pick(
        &mut self,
        backend: &Backend,
        policy: LoadBalance,
        tried: &[SocketAddr],
        now: Instant,
    ) -> Option<SocketAddr> {
        let key = backend as *const Backend as usize;
        backend.with_endpoints(|set| {
            let endpoints = set.active();
            match endpoints.len() {
                0 => None,
                1 => Some(endpoints[0]),
                _ => Some(match policy {
                    LoadBalance::RoundRobin => self.round_robin(key, endpoints, tried, now),
                    LoadBalance::LeastRequest => self.least_request(endpoints, tried, now),
                }),
            }
        })
    }

    /// The endpoint of `backend` that the key hashed to `hash` goes to (`upstream-hash-by`):
    /// the first along the ring from it that this request has not tried and that is not set
    /// aside; failing that, the first untried one; failing that, the key's own.
    pub(crate) fn pick_hashed(
        &mut self,
        backend: &Backend,
        hash: u64,
        tried: &[SocketAddr],
        now: Instant,
    ) -> Option<SocketAddr> {
        keep_current(&mut self.rings, backend, |_, active| Ring::new(active));
        let (_, ring) = self.rings.get(&(backend as *const Backend as usize))?;
        if ring.endpoints().len() <= 1 {
            return ring.endpoints().first().copied();
        }
        for level in [Level::Healthy, Level::Untried] {
            if let Some(found) = ring.walk(hash).find(|e| self.allowed(level, e, tried, now)) {
                return Some(found);
            }
        }
        ring.walk(hash).next()
    }

    /// The endpoint of `backend` for a request with session affinity (`affinity`): the one
    /// its cookie names while it is ready, else a new one (see `affinity`).
    pub(crate) fn pick_sticky(
        &mut self,
        backend: &Backend,
        sticky: &mut Sticky,
        tried: &[SocketAddr],
        now: Instant,
    ) -> Option<SocketAddr> {
        keep_current(&mut self.sticky, backend, StickyTable::new);
        let (_, table) = self.sticky.get(&(backend as *const Backend as usize))?;
        sticky.pick(table, tried, |strictness, endpoint| {
            let level = match strictness {
                Strictness::Healthy => Level::Healthy,
                Strictness::Untried => Level::Untried,
                Strictness::Any => Level::Any,
            };
            self.allowed(level, endpoint, tried, now)
        })
    }

    pub(crate) fn set_aside(&mut self, endpoint: SocketAddr, now: Instant) {
        self.set_aside.insert(endpoint, now + SET_ASIDE);
    }

    pub(crate) fn started(&mut self, endpoint: SocketAddr) {
        *self.in_flight.entry(endpoint).or_default() += 1;
    }

    pub(crate) fn finished(&mut self, endpoint: SocketAddr) {
        if let Some(n) = self.in_flight.get_mut(&endpoint) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(&endpoint);
            }
        }
    }

    /// Forgets round-robin positions and rings of backends that no longer exist.
    pub(crate) fn keep_only(&mut self, backends: &HashSet<usize>) {
        self.round_robin.retain(|key, _| backends.contains(key));
        self.rings.retain(|key, _| backends.contains(key));
        self.sticky.retain(|key, _| backends.contains(key));
    }

    pub(crate) fn expire(&mut self, now: Instant) {
        self.set_aside.retain(|_, until| *until > now);
    }

    fn allowed(
        &self,
        level: Level,
        endpoint: &SocketAddr,
        tried: &[SocketAddr],
        now: Instant,
    ) -> bool {
        match level {
            Level::Healthy => {
                !tried.contains(endpoint)
                    && (self.set_aside.is_empty()
                        || self
                            .set_aside
                            .get(endpoint)
                            .is_none_or(|until| *until <= now))
            }
            Level::Untried => !tried.contains(endpoint),
            Level::Any => true,
        }
    }

    fn level(&self, endpoints: &[SocketAddr], tried: &[SocketAddr], now: Instant) -> Level {
        [Level::Healthy, Level::Untried]
            .into_iter()
            .find(|level| {
                endpoints
                    .iter()
                    .any(|e| self.allowed(*level, e, tried, now))
            })
            .unwrap_or(Level::Any)
    }

    fn round_robin(
        &mut self,
        key: usize,
        endpoints: &[SocketAddr],
        tried: &[SocketAddr],
        now: Instant,
    ) -> SocketAddr {
        let next = self.round_robin.entry(key).or_default();
        let start = *next;
        *next = next.wrapping_add(1);
        let n = endpoints.len();
        let level = self.level(endpoints, tried, now);
        (0..n)
            .map(|i| endpoints[(start + i) % n])
            .find(|e| self.allowed(level, e, tried, now))
            .unwrap_or(endpoints[start % n])
    }

    fn least_request(
        &self,
        endpoints: &[SocketAddr],
        tried: &[SocketAddr],
        now: Instant,
    ) -> SocketAddr {
        let level = self.level(endpoints, tried, now);
        let candidates = || {
            endpoints
                .iter()
                .filter(|e| self.allowed(level, e, tried, now))
        };
        let count = candidates().count();
        if count <= 1 {
            return candidates().next().copied().unwrap_or(endpoints[0]);
        }
        let first = fastrand::usize(..count);
        let mut second = fastrand::usize(..count - 1);
        if second >= first {
            second += 1;
        }
        let a = *candidates().nth(first).expect("index below count");
        let b = *candidates().nth(second).expect("index below count");
        let load = |e: &SocketAddr| self.in_flight.get(e).copied().unwrap_or(0);
        if load(&b) < load(&a) {
            b
        } else {
            a
        }
    }
}

/// Makes what `cache` keeps for `backend` (by its address: a ring, a sticky table) again with
/// `make` from its active endpoints, once its endpoint set changed. The set is held beside it,
/// so its address cannot be reused by a newer set while the entry is kept.
fn keep_current<T>(
    cache: &mut HashMap<usize, (Arc<EndpointSet>, T), BuildHasherDefault<AddressHasher>>,
    backend: &Backend,
    make: impl FnOnce(&Backend, &[SocketAddr]) -> T,
) {
    let key = backend as *const Backend as usize;
    let current = backend.with_endpoints(|set| {
        let kept = cache.get(&key);
        kept.is_some_and(|(made_from, _)| std::ptr::eq(Arc::as_ptr(made_from), set))
    });
    if !current {
        let set = backend.endpoints();
        let made = make(backend, set.active());
        cache.insert(key, (set, made));
    }
}

/// Counts a request at `addr` when the route balances by least requests (other policies
/// need no count, and pay no `Rc` clone).
pub(crate) fn in_flight(
    balancer: &Rc<RefCell<Balancer>>,
    addr: SocketAddr,
    policy: LoadBalance,
) -> Option<InFlight> {
    (policy == LoadBalance::LeastRequest).then(|| {
        balancer.borrow_mut().started(addr);
        InFlight {
            balancer: balancer.clone(),
            addr,
        }
    })
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.balancer.borrow_mut().finished(self.addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{BackendKey, EndpointSet, NamespacedName};

    fn backend(ports: &[u16]) -> Backend {
        let key = BackendKey {
            service: NamespacedName::new("default", "web"),
            port_name: String::new(),
        };
        let ready = ports
            .iter()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
            .collect();
        Backend::new(
            key,
            EndpointSet {
                ready,
                terminating: vec![],
                refused: Vec::new(),
            },
        )
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn round_robin_rotates_per_backend() {
        let (a, b) = (backend(&[1, 2, 3]), backend(&[1, 2]));
        let mut balancer = Balancer::default();
        let now = Instant::now();
        let mut pick = |be: &Backend| {
            balancer
                .pick(be, LoadBalance::RoundRobin, &[], now)
                .unwrap()
                .port()
        };
        // Interleaving two backends must not starve either one's endpoints.
        let picks: Vec<u16> = (0..4).flat_map(|_| [pick(&a), pick(&b)]).collect();
        assert_eq!(picks, [1, 1, 2, 2, 3, 1, 1, 2]);
    }

    #[test]
    fn tried_and_set_aside_endpoints_are_skipped_while_others_exist() {
        let be = backend(&[1, 2, 3]);
        let mut balancer = Balancer::default();
        let now = Instant::now();
        balancer.set_aside(addr(2), now);
        for _ in 0..6 {
            let picked = balancer
                .pick(&be, LoadBalance::RoundRobin, &[addr(1)], now)
                .unwrap();
            assert_eq!(picked, addr(3));
        }
        // Everything tried or set aside: the set-aside one is still better than a tried one.
        let picked = balancer
            .pick(&be, LoadBalance::RoundRobin, &[addr(1), addr(3)], now)
            .unwrap();
        assert_eq!(picked, addr(2));
        // After the pause it counts as healthy again.
        balancer.expire(now + SET_ASIDE);
        let later = now + SET_ASIDE;
        let picks: HashSet<_> = (0..3)
            .map(|_| {
                balancer
                    .pick(&be, LoadBalance::RoundRobin, &[], later)
                    .unwrap()
            })
            .collect();
        assert_eq!(picks.len(), 3);
    }

    #[test]
    fn least_request_prefers_the_idle_endpoint() {
        let be = backend(&[1, 2]);
        let mut balancer = Balancer::default();
        for _ in 0..5 {
            balancer.started(addr(1));
        }
        let now = Instant::now();
        for _ in 0..20 {
            assert_eq!(
                balancer.pick(&be, LoadBalance::LeastRequest, &[], now),
                Some(addr(2))
            );
        }
        for _ in 0..5 {
            balancer.finished(addr(1));
        }
        assert!(balancer.in_flight.is_empty());
    }

    #[test]
    fn no_endpoints_is_none_and_one_is_always_chosen() {
        let mut balancer = Balancer::default();
        let now = Instant::now();
        assert_eq!(
            balancer.pick(&backend(&[]), LoadBalance::RoundRobin, &[], now),
            None
        );
        let only = backend(&[7]);
        assert_eq!(
            balancer.pick(&only, LoadBalance::LeastRequest, &[addr(7)], now),
            Some(addr(7))
        );
    }
}
