//! Session resumption for the client-facing handshake: the session cache clients resume by
//! ID from (`ssl-session-cache`, `-size`, `-timeout`) and the tickets they resume by
//! (`ssl-session-tickets`, `ssl-session-ticket-key`).
//!
//! ```text
//!  ServerConfig.session_storage ─▶ SessionCache: one for every worker (nginx's shared
//!      cache), 16 shards by session ID so workers rarely meet on a lock; an entry older than
//!      ssl-session-timeout is not resumed; full: the oldest goes
//!  ServerConfig.ticketer ─▶ TimedTickets (issue time sealed inside; older than
//!      ssl-session-timeout: not resumed) over
//!        KeyedTickets (ssl-session-ticket-key: AES-256-GCM, key made by HKDF from the key
//!          file's bytes, so every replica with it opens the others' tickets)
//!        or rustls' Ticketer (this process's keys, rotated every 6 hours)
//! ```
//! rustls keeps no lifetime of its own for either: its memory cache and its tickets resume
//! whatever they still hold, so the timeout is kept here.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf::{Salt, HKDF_SHA256};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use rustls::server::{ProducesTickets, StoresServerSessions};

/// Shards of the session cache: workers handshaking at once rarely take the same lock.
const SHARDS: usize = 16;

/// Sessions clients resume by ID, for every worker at once, each resumable for `timeout`.
#[derive(Debug)]
pub(crate) struct SessionCache {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    timeout: Duration,
}

#[derive(Debug, Default)]
struct Shard {
    entries: HashMap<Vec<u8>, (Instant, Vec<u8>)>,
    /// Keys, oldest first: who goes when the shard is full.
    order: VecDeque<Vec<u8>>,
}

impl SessionCache {
    /// A cache of about `sessions` sessions.
    pub(crate) fn new(sessions: usize, timeout: Duration) -> SessionCache {
        SessionCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: sessions.div_ceil(SHARDS).max(1),
            timeout,
        }
    }

    /// What it was made for: the proxy keeps it across configurations that ask the same.
    pub(crate) fn is_for(&self, sessions: usize, timeout: Duration) -> bool {
        self.per_shard == sessions.div_ceil(SHARDS).max(1) && self.timeout == timeout
    }

    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, Shard> {
        // Session IDs are random: their first byte spreads them.
        let index = key.first().map_or(0, |b| *b as usize % SHARDS);
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fresh(&self, stored: Instant) -> bool {
        stored.elapsed() < self.timeout
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut shard = self.shard(&key);
        while shard.entries.len() >= self.per_shard {
            let Some(oldest) = shard.order.pop_front() else {
                break;
            };
            shard.entries.remove(&oldest);
        }
        if shard
            .entries
            .insert(key.clone(), (Instant::now(), value))
            .is_none()
        {
            shard.order.push_back(key);
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let shard = self.shard(key);
        let (stored, value) = shard.entries.get(key)?;
        self.fresh(*stored).then(|| value.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mut shard = self.shard(key);
        let (stored, value) = shard.entries.remove(key)?;
        shard.order.retain(|k| k != key);
        self.fresh(stored).then_some(value)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// Tickets sealed with keys made from `ssl-session-ticket-key` (nginx's 48 or 80 byte key
/// file: its first 16 bytes name the key). The tickets are Sluice's own (rustls' session
/// state, not OpenSSL's), so replicas share them with each other, not with nginx.
pub(crate) struct KeyedTickets {
    name: [u8; 16],
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for KeyedTickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedTickets").finish_non_exhaustive()
    }
}

/// The HKDF salt: keys made here are for this use only.
const TICKET_SALT: &[u8] = b"sluice ssl-session-ticket-key v1";

impl KeyedTickets {
    /// `None`: fewer than 32 bytes (the ConfigMap key takes 48 or 80).
    pub(crate) fn new(file: &[u8]) -> Option<KeyedTickets> {
        if file.len() < 32 {
            return None;
        }
        let (name_bytes, secret) = file.split_at(16);
        let mut name = [0u8; 16];
        name.copy_from_slice(name_bytes);
        let prk = Salt::new(HKDF_SHA256, TICKET_SALT).extract(secret);
        let mut bytes = [0u8; 32];
        prk.expand(&[b"aes-256-gcm"], &AES_256_GCM)
            .ok()?
            .fill(&mut bytes)
            .ok()?;
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &bytes).ok()?);
        Some(KeyedTickets {
            name,
            key,
            random: SystemRandom::new(),
        })
    }
}

impl ProducesTickets for KeyedTickets {
    fn enabled(&self) -> bool {
        true
    }

    /// The key never rotates (it is the operator's): `TimedTickets` bounds the tickets.
    fn lifetime(&self) -> u32 {
        u32::MAX
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let mut ticket = Vec::with_capacity(16 + NONCE_LEN + plain.len() + 16);
        ticket.extend_from_slice(&self.name);
        ticket.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&self.name),
                &mut sealed,
            )
            .ok()?;
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let (name, rest) = ticket.split_at_checked(16)?;
        if name != self.name {
            return None;
        }
        let (nonce, sealed) = rest.split_at_checked(NONCE_LEN)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut opened = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(&self.name), &mut opened)
            .ok()?;
        let len = plain.len();
        opened.truncate(len);
        Some(opened)
    }
}

/// Tickets that resume for `lifetime` after they were issued (nginx's ssl_session_timeout):
/// the issue time (Unix seconds, so another replica reads it alike) is sealed inside.
#[derive(Debug)]
pub(crate) struct TimedTickets {
    pub(crate) inner: Arc<dyn ProducesTickets>,
    pub(crate) lifetime: Duration,
}

/// Clocks of two replicas may differ by this much.
const CLOCK_SKEW: u64 = 60;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl ProducesTickets for TimedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        let own = u32::try_from(self.lifetime.as_secs()).unwrap_or(u32::MAX);
        own.min(self.inner.lifetime())
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut stamped = Vec::with_capacity(8 + plain.len());
        stamped.extend_from_slice(&unix_now().to_be_bytes());
        stamped.extend_from_slice(plain);
        self.inner.encrypt(&stamped)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let mut stamped = self.inner.decrypt(ticket)?;
        let (issued, _) = stamped.split_first_chunk::<8>()?;
        let issued = u64::from_be_bytes(*issued);
        let now = unix_now();
        let age = now.saturating_sub(issued);
        if issued > now + CLOCK_SKEW || age >= self.lifetime.as_secs().max(1) {
            return None;
        }
        stamped.drain(..8);
        Some(stamped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_forgets_sessions_past_their_timeout_and_its_oldest_when_full() {
        let cache = SessionCache::new(SHARDS, Duration::from_secs(600));
        assert!(cache.put(vec![1, 1], b"one".to_vec()));
        assert_eq!(cache.get(&[1, 1]), Some(b"one".to_vec()));
        // One per shard: the next of shard 1 pushes the first out.
        cache.put(vec![1, 2], b"two".to_vec());
        assert_eq!(cache.get(&[1, 1]), None);
        assert_eq!(cache.take(&[1, 2]), Some(b"two".to_vec()));
        assert_eq!(cache.take(&[1, 2]), None);
        let expired = SessionCache::new(64, Duration::ZERO);
        expired.put(vec![3], b"three".to_vec());
        assert_eq!(expired.get(&[3]), None);
        assert!(cache.is_for(SHARDS, Duration::from_secs(600)));
        assert!(!cache.is_for(SHARDS * 10, Duration::from_secs(600)));
    }

    #[test]
    fn tickets_of_one_key_open_anywhere_with_it_and_nowhere_else() {
        let file = [7u8; 80];
        let one = KeyedTickets::new(&file).unwrap();
        let other_replica = KeyedTickets::new(&file).unwrap();
        let ticket = one.encrypt(b"session").unwrap();
        assert_eq!(other_replica.decrypt(&ticket), Some(b"session".to_vec()));
        let mut other_file = file;
        other_file[40] ^= 1;
        assert_eq!(
            KeyedTickets::new(&other_file).unwrap().decrypt(&ticket),
            None
        );
        let mut tampered = ticket.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(one.decrypt(&tampered), None);
        assert_eq!(one.decrypt(&ticket[..20]), None);
        assert_ne!(
            one.encrypt(b"session"),
            Some(ticket),
            "a fresh nonce each time"
        );
    }

    #[test]
    fn timed_tickets_expire() {
        let keyed: Arc<dyn ProducesTickets> = Arc::new(KeyedTickets::new(&[9u8; 48]).unwrap());
        let timed = TimedTickets {
            inner: keyed.clone(),
            lifetime: Duration::from_secs(600),
        };
        assert_eq!(timed.lifetime(), 600);
        let ticket = timed.encrypt(b"session").unwrap();
        assert_eq!(timed.decrypt(&ticket), Some(b"session".to_vec()));
        // Issued 601 seconds ago.
        let mut old = (unix_now() - 601).to_be_bytes().to_vec();
        old.extend_from_slice(b"session");
        let old = keyed.encrypt(&old).unwrap();
        assert_eq!(timed.decrypt(&old), None);
    }
}
