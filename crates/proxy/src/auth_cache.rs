//! The auth cache (`auth-cache-key`): answers of auth servers kept per key for every worker
//! of the process, and the one sub-request in flight per key (single flight). The phase that
//! fills it is `auth.rs`.
//!
//! ```text
//!  lookup(key) ─▶ Hit (kept, not expired) │ Flight: the key's OnceCell, new or in flight;
//!     the first caller's sub-request fills it, the others wait on it
//!  bounded by auth-cache-max-entries: the least recently used key goes first (`order`
//!  holds each use; stale ones are skipped, and dropped once they outnumber the keys)
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{HeaderMap, StatusCode};
use tokio::sync::OnceCell;

/// An answer in the cache: its status and the headers the phase reads from it.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) expires: Instant,
}

/// One key's answer, asked once: `None` inside when it could not be kept.
pub(crate) type Flight = OnceCell<Option<Arc<Kept>>>;

pub(crate) enum Lookup {
    Hit(Arc<Kept>),
    Flight(Arc<Flight>),
}

/// The auth cache of the process: every worker's requests share it, so N workers make one
/// sub-request per key, not N.
#[derive(Default)]
pub(crate) struct AuthCache {
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    entries: HashMap<Box<str>, (Arc<Flight>, u64)>,
    /// Keys in the order they were last used, with the use's tick; an older tick of a key
    /// used since is skipped when evicting.
    order: VecDeque<(Box<str>, u64)>,
    tick: u64,
}

impl AuthCache {
    pub(crate) fn lookup(&self, key: &str, capacity: usize, now: Instant) -> Lookup {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((flight, used)) = inner.entries.get_mut(key) {
            match flight.get() {
                Some(Some(kept)) if kept.expires > now => {
                    let kept = kept.clone();
                    *used = tick;
                    inner.order.push_back((key.into(), tick));
                    inner.compact();
                    return Lookup::Hit(kept);
                }
                // In flight: wait for it.
                None => {
                    let flight = flight.clone();
                    *used = tick;
                    inner.order.push_back((key.into(), tick));
                    inner.compact();
                    return Lookup::Flight(flight);
                }
                // Expired, or an answer that was not kept: ask again.
                Some(_) => {}
            }
        }
        let flight = Arc::new(Flight::new());
        inner.entries.insert(key.into(), (flight.clone(), tick));
        inner.order.push_back((key.into(), tick));
        while inner.entries.len() > capacity.max(1) {
            let Some((old, old_tick)) = inner.order.pop_front() else {
                break;
            };
            if inner
                .entries
                .get(&old)
                .is_some_and(|(_, used)| *used == old_tick)
            {
                inner.entries.remove(&old);
            }
        }
        inner.compact();
        Lookup::Flight(flight)
    }

    /// Keys kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }
}

impl CacheInner {
    /// Drops the stale ticks once they outnumber the keys, so `order` stays bounded.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.entries.len() + 64 {
            return;
        }
        let entries = &self.entries;
        self.order
            .retain(|(key, tick)| entries.get(key).is_some_and(|(_, used)| used == tick));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_cache_keeps_at_most_its_capacity_least_recently_used_out() {
        let cache = AuthCache::default();
        let now = Instant::now();
        let keep = |flight: &Arc<Flight>| {
            let kept = Kept {
                status: StatusCode::OK,
                headers: HeaderMap::new(),
                expires: now + Duration::from_secs(60),
            };
            flight.set(Some(Arc::new(kept))).unwrap();
        };
        for key in ["a", "b", "c"] {
            let Lookup::Flight(flight) = cache.lookup(key, 3, now) else {
                panic!("{key} is new")
            };
            keep(&flight);
        }
        // `a` used again: `b` is now the least recent.
        assert!(matches!(cache.lookup("a", 3, now), Lookup::Hit(_)));
        let Lookup::Flight(flight) = cache.lookup("d", 3, now) else {
            panic!("d is new")
        };
        keep(&flight);
        assert_eq!(cache.len(), 3);
        assert!(matches!(cache.lookup("a", 3, now), Lookup::Hit(_)));
        assert!(matches!(cache.lookup("c", 3, now), Lookup::Hit(_)));
        assert!(matches!(cache.lookup("b", 3, now), Lookup::Flight(_)));
        // Expired answers are asked again.
        let later = now + Duration::from_secs(61);
        assert!(matches!(cache.lookup("a", 3, later), Lookup::Flight(_)));
        // Many uses of one key leave `order` bounded.
        for _ in 0..10_000 {
            let _ = cache.lookup("c", 3, now);
        }
        assert!(cache.inner.lock().unwrap().order.len() < 100);
    }
}
