//! The worker's upstream side as one value: connections at rest, TLS clients, balancer state,
//! the index of live endpoints, the mirrored copies in flight, and the counters they bump. The worker owns it
//! (`Rc<Upstreams>`) and hands it down to the transports with the request's settings, so that
//! no transport reaches the worker itself.
//!
//! ```text
//!  worker ──&Rc<Upstreams>, &Settings──▶ upstream / upstream_h2 / attempts
//!     └── housekeeping: live endpoints rebuilt or updated ─▶ pool.keep_only / forget,
//!                       balancer.keep_only / expire
//! ```

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use model::UpstreamTls;

use crate::balance::Balancer;
use crate::error::ProxyError;
use crate::live_endpoints::LiveEndpoints;
use crate::metrics::Stats;
use crate::pool::Pool;
use crate::upstream_tls::{TlsClient, TlsClients};

#[derive(Default)]
pub(crate) struct Upstreams {
    pub(crate) pool: RefCell<Pool>,
    /// TLS client configurations for HTTPS routes (their session caches included).
    pub(crate) tls_clients: RefCell<TlsClients>,
    /// Shared with the in-flight counts of least-request routes (`balance::InFlight`).
    pub(crate) balancer: Rc<RefCell<Balancer>>,
    /// Which endpoints the current configuration's backends hold, as this worker last saw them.
    pub(crate) live: RefCell<LiveEndpoints>,
    /// The worker's counters (the worker holds them too: admin and the pipeline count there).
    pub(crate) stats: Rc<RefCell<Stats>>,
    /// Mirrored requests in flight (`mirror-max-in-flight`).
    pub(crate) mirrors: MirrorSlots,
}

impl Upstreams {
    /// The TLS client for an HTTPS route's settings (`None`: plain TCP). Only HTTPS routes
    /// look anything up: the plain path pays one branch.
    #[inline]
    pub(crate) fn tls_client(
        &self,
        tls: Option<&Arc<UpstreamTls>>,
    ) -> Result<Option<Rc<TlsClient>>, ProxyError> {
        match tls {
            None => Ok(None),
            Some(tls) => self
                .tls_clients
                .borrow_mut()
                .get(tls)
                .map(Some)
                .map_err(ProxyError::UpstreamTlsSetup),
        }
    }

    /// Whether some backend of the current configuration holds `endpoint`.
    pub(crate) fn is_live_endpoint(&self, endpoint: &SocketAddr) -> bool {
        self.live.borrow().counts.contains_key(endpoint)
    }
}

/// One worker's mirrored requests in flight, against `mirror-max-in-flight`.
#[derive(Default)]
pub(crate) struct MirrorSlots(Rc<Cell<u32>>);

/// A place in flight, given back when the copy ends.
pub(crate) struct MirrorSlot(Rc<Cell<u32>>);

impl MirrorSlots {
    /// A place for one more copy, unless `max` are in flight.
    pub(crate) fn take(&self, max: u32) -> Option<MirrorSlot> {
        let n = self.0.get();
        (n < max).then(|| {
            self.0.set(n + 1);
            MirrorSlot(self.0.clone())
        })
    }

    #[cfg(test)]
    fn count(&self) -> u32 {
        self.0.get()
    }
}

impl Drop for MirrorSlot {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_flight_cap_gives_places_back() {
        let in_flight = MirrorSlots::default();
        let a = in_flight.take(2).unwrap();
        let _b = in_flight.take(2).unwrap();
        assert!(in_flight.take(2).is_none());
        drop(a);
        assert_eq!(in_flight.count(), 1);
        assert!(in_flight.take(2).is_some());
        assert!(in_flight.take(0).is_none());
    }
}
