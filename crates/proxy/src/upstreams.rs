//! The worker's upstream side as one value: connections at rest, TLS clients, balancer state,
//! the index of live endpoints, and the counters they bump. The worker owns it
//! (`Rc<Upstreams>`) and hands it down to the transports with the request's settings, so that
//! no transport reaches the worker itself.
//!
//! ```text
//!  worker ──&Rc<Upstreams>, &Settings──▶ upstream / upstream_h2 / attempts
//!     └── housekeeping: live endpoints rebuilt or updated ─▶ pool.keep_only / forget,
//!                       balancer.keep_only / expire
//! ```

use std::cell::RefCell;
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
    pub(crate) mirrors: crate::mirror::InFlight,
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
