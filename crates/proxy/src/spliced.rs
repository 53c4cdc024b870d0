//! One worker's TCP and UDP service registry: the accept and receive loops by port, and the
//! connections spliced to each endpoint, so that an endpoint's removal reaches them and a
//! scrape counts their bytes while they last. Plain data below `stream`, which fills it, and
//! the worker, which holds it.
//!
//! ```text
//!  runtime::listen ─▶ accepting / receiving (by port)
//!  stream::serve ─▶ by_endpoint[endpoint][serial] = Spliced ◀── endpoint_changed (housekeeping)
//! ```

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::metrics::{StreamCounts, StreamKey};
use crate::tunnel::Traffic;

/// One worker's TCP service state: its accept loops and its spliced connections by endpoint.
#[derive(Default)]
pub(crate) struct Streams {
    pub(crate) accepting: HashMap<u16, JoinHandle<()>>,
    /// UDP service ports' receive loops (each owns its port's sessions).
    /// Keyed by the address bound: a Gateway's own address has its UDP ports bound there.
    pub(crate) receiving: HashMap<SocketAddr, JoinHandle<()>>,
    /// Endpoint → the connections spliced to it (by serial).
    pub(crate) by_endpoint: HashMap<SocketAddr, HashMap<u64, Rc<Spliced>>>,
    pub(crate) serial: u64,
}

/// A spliced connection, as endpoint removal and the metrics see it.
pub(crate) struct Spliced {
    pub(crate) key: StreamKey,
    /// Its bytes so far: scrapes count them while it lasts, not only when it ends.
    pub(crate) traffic: Traffic,
    /// Set when its endpoint left every backend: closed at this moment.
    pub(crate) deadline: std::cell::Cell<Option<Instant>>,
    pub(crate) changed: Notify,
}

impl Streams {
    /// Adds the bytes of the connections still open to `counts` (a scrape's snapshot, which
    /// holds those of ended connections).
    pub(crate) fn add_open_traffic(&self, counts: &mut BTreeMap<StreamKey, StreamCounts>) {
        for spliced in self.by_endpoint.values().flat_map(HashMap::values) {
            let entry = counts.entry(spliced.key.clone()).or_default();
            entry.bytes_received += spliced.traffic.from_client.get();
            entry.bytes_sent += spliced.traffic.from_upstream.get();
        }
    }

    /// The endpoints that connections are spliced to, for the worker's endpoint checks.
    pub(crate) fn endpoints(&self) -> Vec<SocketAddr> {
        self.by_endpoint.keys().copied().collect()
    }

    /// `endpoint` left every backend (`live: false`) or is back (`true`): its connections are
    /// given `grace` to finish, or reprieved.
    pub(crate) fn endpoint_changed(&self, endpoint: SocketAddr, live: bool, grace: Duration) {
        let Some(connections) = self.by_endpoint.get(&endpoint) else {
            return;
        };
        let now = Instant::now();
        for spliced in connections.values() {
            match (live, spliced.deadline.get()) {
                (true, Some(_)) => spliced.deadline.set(None),
                (false, None) => spliced.deadline.set(Some(now + grace)),
                _ => continue,
            }
            spliced.changed.notify_one();
        }
        if !live {
            tracing::debug!(
                %endpoint,
                connections = connections.len(),
                ?grace,
                "TCP service endpoint removed; its connections close after worker-shutdown-timeout"
            );
        }
    }
}

impl Spliced {
    /// Resolves when the connection must close: its endpoint has been gone for the grace time.
    pub(crate) async fn until_closed(&self) {
        loop {
            match self.deadline.get() {
                None => self.changed.notified().await,
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at.into()) => {
                            if self.deadline.get().is_some_and(|d| d <= Instant::now()) {
                                return;
                            }
                        }
                        () = self.changed.notified() => {}
                    }
                }
            }
        }
    }
}
