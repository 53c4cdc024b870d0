//! The TLS handshake of a connection Sluice terminates (HTTPS, a TLSRoute of mode Terminate):
//! the configuration of its site and server name, before its client-header-timeout.
//!
//! ```text
//!  accepted (front_door) ─▶ ServerConfig: the shared one or its site's (sites), with the
//!      name's own handshake settings ─▶ tls_server::accept ─▶ TlsStream │ None (logged)
//! ```

use std::sync::Arc;

use model::tls::HostTls;
use model::Settings;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::deadline::before;
use crate::worker::{Origin, Worker};

/// The TLS handshake with the connection's site's certificates (`host_tls`: the name's own
/// handshake settings). `None`: it failed or timed out (logged).
pub(crate) async fn handshake<I>(
    worker: &Worker,
    stream: I,
    origin: &Origin,
    settings: &Settings,
    host_tls: Option<&Arc<HostTls>>,
) -> Option<crate::tls_server::TlsStream<I>>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let peer = origin.peer;
    let config = match origin.local {
        None => worker.tls_config(settings, host_tls),
        Some(site) => worker.site_tls_config(site, settings, host_tls),
    }?;
    // A client that stalls its handshake is as slow as one that stalls its header: both
    // share the connection's one client-header-timeout.
    let handshake = crate::tls_server::accept(config, stream);
    match before(origin.header_deadline(settings), handshake).await {
        Some(Ok(tls)) => Some(tls),
        Some(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        None => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}
