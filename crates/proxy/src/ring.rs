//! Consistent hashing for `upstream-hash-by`: a ring of points, many per endpoint, so a key
//! goes to the endpoint owning the first point at or after the key's hash.
//!
//! ```text
//!  endpoints ─▶ POINTS_PER_ENDPOINT points each, hash(addr, i) ─▶ sorted ring
//!  key hash ─▶ first point ≥ it (wrapping) ─▶ its endpoint; skipped (tried, set aside) ─▶ the
//!  next distinct endpoint along the ring
//! ```
//! When an endpoint leaves, only the keys its points owned move (to the next points along the
//! ring); when one comes, it takes about 1/N of the keys from the others. With 160 points per
//! endpoint (ketama's number) the shares stay within a few percent of 1/N.
//!
//! The hash is FNV-1a with a final mix, written here and never changed: every replica and
//! every version of Sluice must put a key on the same endpoint (std's `DefaultHasher` does
//! not promise that across releases).

use std::net::SocketAddr;

/// Points on the ring per endpoint.
const POINTS_PER_ENDPOINT: u32 = 160;

/// A ring over one endpoint set.
#[derive(Debug)]
pub(crate) struct Ring {
    /// (point, index into `endpoints`), sorted by point.
    points: Box<[(u64, u32)]>,
    endpoints: Box<[SocketAddr]>,
}

impl Ring {
    pub(crate) fn new(endpoints: &[SocketAddr]) -> Ring {
        let mut points = Vec::with_capacity(endpoints.len() * POINTS_PER_ENDPOINT as usize);
        let mut name = Vec::with_capacity(64);
        for (index, endpoint) in endpoints.iter().enumerate() {
            for point in 0..POINTS_PER_ENDPOINT {
                name.clear();
                // The endpoint as text, so the ring does not depend on the address's memory
                // layout: `10.0.0.1:8080-17`.
                use std::io::Write as _;
                let _ = write!(name, "{endpoint}-{point}");
                points.push((stable_hash(&name), index as u32));
            }
        }
        // Equal points (vanishingly rare) are ordered by endpoint, so the ring is the same
        // whatever order the endpoints came in.
        points.sort_unstable_by_key(|&(point, index)| (point, endpoints[index as usize]));
        Ring {
            points: points.into_boxed_slice(),
            endpoints: endpoints.into(),
        }
    }

    /// The endpoints in ring order from `hash`'s point, each once: the first is the key's
    /// endpoint, the others are where the key goes when the ones before are passed over.
    pub(crate) fn walk(&self, hash: u64) -> impl Iterator<Item = SocketAddr> + '_ {
        let start = self.points.partition_point(|&(point, _)| point < hash);
        // The first endpoint is nearly always taken: the set of those seen is made only when a
        // second one is asked for, so the common request allocates nothing here.
        let mut first: Option<usize> = None;
        let mut seen: Vec<bool> = Vec::new();
        let mut left = self.endpoints.len();
        (0..self.points.len())
            .map(move |i| self.points[(start + i) % self.points.len()].1 as usize)
            .filter(move |&index| {
                if left == 0 {
                    return false;
                }
                match first {
                    None => first = Some(index),
                    Some(first) => {
                        if seen.is_empty() {
                            seen = vec![false; self.endpoints.len()];
                            seen[first] = true;
                        }
                        if seen[index] {
                            return false;
                        }
                        seen[index] = true;
                    }
                }
                left -= 1;
                true
            })
            .map(|index| self.endpoints[index])
    }

    /// The endpoints the ring was made from (to tell whether it is still current).
    pub(crate) fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }
}

/// A 64-bit hash that never changes between versions or machines: FNV-1a, then splitmix64's
/// finaliser so that keys differing in their last byte land far apart on the ring.
pub(crate) fn stable_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoints(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([10, 0, (i / 200) as u8, (i % 200) as u8], 8080)))
            .collect()
    }

    fn owner(ring: &Ring, key: u32) -> SocketAddr {
        ring.walk(stable_hash(format!("/user/{key}").as_bytes()))
            .next()
            .unwrap()
    }

    #[test]
    fn the_hash_is_fixed() {
        // Changing the hash moves every key of every running cluster: these values are a
        // contract.
        // (Checked against an independent computation of FNV-1a + splitmix64's finaliser.)
        assert_eq!(stable_hash(b""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(stable_hash(b"/user/1"), 0x6e4d_2057_a1a8_3a36);
    }

    #[test]
    fn removing_or_adding_one_endpoint_moves_about_one_nth_of_the_keys() {
        const KEYS: u32 = 20_000;
        for n in [3u16, 5, 10, 25] {
            let all = endpoints(n);
            let ring = Ring::new(&all);
            // Remove each endpoint in turn: only its keys move, and they were about 1/N.
            for gone in 0..n as usize {
                let mut fewer = all.clone();
                let removed = fewer.remove(gone);
                let smaller = Ring::new(&fewer);
                let mut moved = 0;
                for key in 0..KEYS {
                    let before = owner(&ring, key);
                    let after = owner(&smaller, key);
                    if before != after {
                        assert_eq!(before, removed, "a key of a staying endpoint moved");
                        moved += 1;
                    }
                }
                let share = f64::from(moved) / f64::from(KEYS);
                let bound = 1.0 / f64::from(n) + 0.05;
                assert!(
                    share <= bound,
                    "n={n}: {share:.3} of the keys moved (bound {bound:.3})"
                );
            }
            // Add one: it takes about 1/(N+1), and only for itself.
            let more = endpoints(n + 1);
            let larger = Ring::new(&more);
            let added = more[n as usize];
            let mut moved = 0;
            for key in 0..KEYS {
                let after = owner(&larger, key);
                if owner(&ring, key) != after {
                    assert_eq!(after, added, "a key moved between staying endpoints");
                    moved += 1;
                }
            }
            let share = f64::from(moved) / f64::from(KEYS);
            let bound = 1.0 / f64::from(n + 1) + 0.05;
            assert!(
                share <= bound,
                "n={n}+1: {share:.3} moved (bound {bound:.3})"
            );
        }
    }

    #[test]
    fn keys_spread_over_every_endpoint() {
        let all = endpoints(10);
        let ring = Ring::new(&all);
        let mut counts = std::collections::HashMap::new();
        for key in 0..10_000 {
            *counts.entry(owner(&ring, key)).or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 10);
        for (endpoint, count) in counts {
            assert!(
                (600..=1400).contains(&count),
                "{endpoint}: {count} of 10,000"
            );
        }
    }

    #[test]
    fn the_ring_does_not_depend_on_endpoint_order() {
        let all = endpoints(7);
        let mut reversed = all.clone();
        reversed.reverse();
        let (a, b) = (Ring::new(&all), Ring::new(&reversed));
        for key in 0..1000 {
            assert_eq!(owner(&a, key), owner(&b, key));
        }
    }

    #[test]
    fn a_walk_names_every_endpoint_once() {
        let all = endpoints(6);
        let ring = Ring::new(&all);
        let mut walked: Vec<SocketAddr> = ring.walk(stable_hash(b"k")).collect();
        walked.sort();
        assert_eq!(walked, all);
    }
}
