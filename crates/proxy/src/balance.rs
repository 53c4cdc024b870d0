//! Picking an endpoint, per worker: round robin, power-of-two-choices on in-flight requests or
//! on response times (`ewma`), or the request key's place on a consistent-hash ring
//! (`upstream-hash-by`), skipping endpoints this request already tried and ones that recently
//! refused connections.
//!
//! ```text
//!  active endpoints ─▶ untried and not set aside? ─▶ untried? ─▶ any
//!     ─▶ round robin | P2C on in-flight | P2C on the EWMA of response times | first along
//!        the ring from the key's hash | the session cookie's endpoint (affinity.rs)
//!  response body ends (InFlight dropped) ─▶ least_request: one less in flight │ ewma: the
//!     attempt's time folded into the endpoint's average
//! ```
//! `ewma` is ingress-nginx's `balancer/ewma.lua`: an endpoint's score is its average response
//! time (connected to body end), decayed by `exp(-Δt / 10 s)` since it was last updated, so
//! an endpoint that was slow a minute ago is tried again; an endpoint added to a backend
//! starts at the average of the others' (its slow start), and one never measured scores 0
//! (each is tried once at first), as ingress-nginx's shared dictionary reads.
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
    /// `ewma`: each endpoint's response-time average (seconds) and when it was last updated.
    ewma: HashMap<SocketAddr, (f64, Instant)>,
    /// `ewma`: the endpoint set each backend had when last picked from, to give endpoints
    /// added since the others' average (ingress-nginx's slow start at its balancer's sync).
    ewma_sets: HashMap<usize, Arc<EndpointSet>, BuildHasherDefault<AddressHasher>>,
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

/// One request outstanding at an endpoint, for least-request balancing (counted) and `ewma`
/// (timed): from its attempt until its response body ends (or the attempt fails).
pub(crate) struct InFlight {
    balancer: Rc<RefCell<Balancer>>,
    addr: SocketAddr,
    /// `ewma`: when the attempt started.
    since: Option<Instant>,
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
        if policy == LoadBalance::Ewma {
            self.ewma_slow_start(key, backend, now);
        }
        backend.with_endpoints(|set| {
            let endpoints = set.active();
            match endpoints.len() {
                0 => None,
                1 => Some(endpoints[0]),
                _ => Some(match policy {
                    LoadBalance::RoundRobin => self.round_robin(key, endpoints, tried, now),
                    LoadBalance::LeastRequest => self.least_request(endpoints, tried, now),
                    LoadBalance::Ewma => self.ewma(endpoints, tried, now),
                }),
            }
        })
    }

    /// The endpoint of `backend` that the key hashed to `hash` goes to (`upstream-hash-by`):
    /// the first along the ring from it that this request has not tried and that is not set
    /// aside; failing that, the first untried one; failing that, the key's own. With a
    /// `subset` size (`upstream-hash-by-subset`), a random one of the key's first `subset`
    /// endpoints along the ring that is not tried or set aside comes before those rules.
    pub(crate) fn pick_hashed(
        &mut self,
        backend: &Backend,
        (hash, subset): (u64, Option<u32>),
        tried: &[SocketAddr],
        now: Instant,
    ) -> Option<SocketAddr> {
        keep_current(&mut self.rings, backend, |_, active| Ring::new(active));
        let (_, ring) = self.rings.get(&(backend as *const Backend as usize))?;
        if ring.endpoints().len() <= 1 {
            return ring.endpoints().first().copied();
        }
        if let Some(size) = subset.filter(|n| *n > 1) {
            let members: Vec<SocketAddr> = ring.walk(hash).take(size as usize).collect();
            let start = fastrand::usize(..members.len());
            for level in [Level::Healthy, Level::Untried] {
                let mut turn = (0..members.len()).map(|i| members[(start + i) % members.len()]);
                if let Some(found) = turn.find(|e| self.allowed(level, e, tried, now)) {
                    return Some(found);
                }
            }
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

    /// `ewma`: folds one attempt's time at `endpoint` into its average, as ingress-nginx's
    /// `after_balance` does.
    pub(crate) fn observed(&mut self, endpoint: SocketAddr, took: Duration, now: Instant) {
        let took = took.as_secs_f64();
        let entry = self.ewma.entry(endpoint).or_insert((took, now));
        let weight = decay(now.saturating_duration_since(entry.1));
        entry.0 = entry.0 * weight + took * (1.0 - weight);
        entry.1 = now;
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
        self.ewma_sets.retain(|key, _| backends.contains(key));
    }

    pub(crate) fn expire(&mut self, now: Instant) {
        self.set_aside.retain(|_, until| *until > now);
        // An average not updated for ten decay times is under 0.005 % of what it was: the
        // endpoint is gone, or idle enough to start afresh.
        self.ewma
            .retain(|_, (_, touched)| now.saturating_duration_since(*touched) < EWMA_DECAY * 10);
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

    /// Endpoints that joined `backend` since it was last picked from start at the average of
    /// the others' (decayed) averages, as ingress-nginx's `sync` stores for added endpoints;
    /// the first time, every endpoint starts without one (score 0: each is tried).
    fn ewma_slow_start(&mut self, key: usize, backend: &Backend, now: Instant) {
        let seen = backend.with_endpoints(|set| {
            let kept = self.ewma_sets.get(&key);
            kept.is_some_and(|seen| std::ptr::eq(Arc::as_ptr(seen), set))
        });
        if seen {
            return;
        }
        let set = backend.endpoints();
        let Some(previous) = self.ewma_sets.insert(key, set.clone()) else {
            return;
        };
        let known: Vec<f64> = previous
            .active()
            .iter()
            .filter_map(|e| self.ewma.get(e))
            .map(|(average, touched)| average * decay(now.saturating_duration_since(*touched)))
            .collect();
        if known.is_empty() {
            return;
        }
        let start = known.iter().sum::<f64>() / known.len() as f64;
        for endpoint in set.active() {
            if !previous.active().contains(endpoint) {
                self.ewma.entry(*endpoint).or_insert((start, now));
            }
        }
    }

    /// ingress-nginx's `ewma`: two candidates drawn at random, the lower decayed average wins.
    fn ewma(&self, endpoints: &[SocketAddr], tried: &[SocketAddr], now: Instant) -> SocketAddr {
        let level = self.level(endpoints, tried, now);
        let candidates: Vec<SocketAddr> = endpoints
            .iter()
            .filter(|e| self.allowed(level, e, tried, now))
            .copied()
            .collect();
        if candidates.len() <= 1 {
            return candidates.first().copied().unwrap_or(endpoints[0]);
        }
        let first = fastrand::usize(..candidates.len());
        let mut second = fastrand::usize(..candidates.len() - 1);
        if second >= first {
            second += 1;
        }
        // Without an average (never answered): 0, tried first, as ingress-nginx's missing
        // shared-dict entry reads.
        let score = |e: &SocketAddr| {
            self.ewma.get(e).map_or(0.0, |(average, touched)| {
                average * decay(now.saturating_duration_since(*touched))
            })
        };
        let (a, b) = (candidates[first], candidates[second]);
        if score(&b) < score(&a) {
            b
        } else {
            a
        }
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

/// `ewma`'s decay time (ingress-nginx's `DECAY_TIME`).
const EWMA_DECAY: Duration = Duration::from_secs(10);

/// How much of an average is left after `elapsed`.
fn decay(elapsed: Duration) -> f64 {
    (-elapsed.as_secs_f64() / EWMA_DECAY.as_secs_f64()).exp()
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

/// Counts a request at `addr` when the route balances by least requests, or times it when by
/// `ewma` (other policies need neither, and pay no `Rc` clone).
pub(crate) fn in_flight(
    balancer: &Rc<RefCell<Balancer>>,
    addr: SocketAddr,
    policy: LoadBalance,
) -> Option<InFlight> {
    let since = match policy {
        LoadBalance::RoundRobin => return None,
        LoadBalance::LeastRequest => None,
        LoadBalance::Ewma => Some(Instant::now()),
    };
    balancer.borrow_mut().started(addr);
    Some(InFlight {
        balancer: balancer.clone(),
        addr,
        since,
    })
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut balancer = self.balancer.borrow_mut();
        balancer.finished(self.addr);
        if let Some(since) = self.since {
            let now = Instant::now();
            balancer.observed(self.addr, now.saturating_duration_since(since), now);
        }
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
                ..EndpointSet::default()
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
    fn a_hashed_subset_spreads_one_key_over_its_first_endpoints_along_the_ring() {
        let be = backend(&(1..=10).collect::<Vec<u16>>());
        let mut balancer = Balancer::default();
        let now = Instant::now();
        let hash = crate::ring::stable_hash(b"/hot/key");
        let ring: Vec<SocketAddr> = crate::ring::Ring::new(&be.endpoints().ready)
            .walk(hash)
            .collect();
        let (own, subset) = (ring[0], &ring[..3]);
        // Without a subset: always the key's own endpoint.
        for _ in 0..20 {
            assert_eq!(balancer.pick_hashed(&be, (hash, None), &[], now), Some(own));
        }
        // With one of 3: every pick among the key's first 3, and each of them picked.
        let mut seen = std::collections::BTreeMap::new();
        for _ in 0..300 {
            let picked = balancer
                .pick_hashed(&be, (hash, Some(3)), &[], now)
                .unwrap();
            assert!(subset.contains(&picked), "{picked} outside {subset:?}");
            *seen.entry(picked).or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        // A retry goes to another of the subset; with all of it tried, along the ring.
        let tried = [subset[0], subset[1]];
        assert_eq!(
            balancer.pick_hashed(&be, (hash, Some(3)), &tried, now),
            Some(subset[2])
        );
        assert_eq!(
            balancer.pick_hashed(&be, (hash, Some(3)), subset, now),
            Some(ring[3])
        );
        // A subset as large as the backend: any endpoint.
        let all = balancer
            .pick_hashed(&be, (hash, Some(50)), &[], now)
            .unwrap();
        assert!(ring.contains(&all));
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

    #[test]
    fn ewma_prefers_the_faster_endpoint_and_forgets_slowness_over_time() {
        let be = backend(&[1, 2]);
        let now = Instant::now();
        let mut balancer = Balancer::default();
        balancer.observed(addr(1), Duration::from_millis(200), now);
        balancer.observed(addr(2), Duration::from_millis(5), now);
        // Two endpoints: both are drawn, the faster wins every time.
        for _ in 0..50 {
            assert_eq!(
                balancer.pick(&be, LoadBalance::Ewma, &[], now),
                Some(addr(2))
            );
        }
        // A tried endpoint is passed over whatever its score.
        assert_eq!(
            balancer.pick(&be, LoadBalance::Ewma, &[addr(2)], now),
            Some(addr(1))
        );
        // A new sample moves the average by the share the elapsed time decayed.
        let later = now + Duration::from_secs(10);
        balancer.observed(addr(1), Duration::from_millis(0), later);
        let (average, _) = balancer.ewma[&addr(1)];
        assert!((average - 0.2 * (-1f64).exp()).abs() < 1e-9, "{average}");
        // An endpoint added to a backend already picked from starts at the others' average
        // (slow start), not at 0, so it is not flooded for having no history.
        let be = backend(&[1, 2]);
        balancer.pick(&be, LoadBalance::Ewma, &[], later);
        be.set_endpoints(EndpointSet {
            ready: [1, 2, 3].map(addr).to_vec(),
            ..EndpointSet::default()
        });
        balancer.pick(&be, LoadBalance::Ewma, &[], later);
        let (start, _) = balancer.ewma[&addr(3)];
        let (one, _) = balancer.ewma[&addr(1)];
        let (two, _) = balancer.ewma[&addr(2)];
        // `two` was last updated ten seconds before `later`: it counts decayed.
        let expected = (one + two * (-1f64).exp()) / 2.0;
        assert!((start - expected).abs() < 1e-9, "{start} vs {expected}");
        // Averages untouched for ten decay times are dropped.
        balancer.expire(later + Duration::from_secs(101));
        assert!(balancer.ewma.is_empty());
    }
}
