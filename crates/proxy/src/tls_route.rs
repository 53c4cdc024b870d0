//! Gateway TLS listeners (TLSRoute): the server name a ClientHello asks for, peeked as for
//! `ssl-passthrough` (`passthrough`), chooses a route of the listener port's table
//! (`model::tls_routes`); a Passthrough route's connection is spliced as a passthrough host's
//! is, a Terminate route's is decrypted here and its bytes relayed to the backend over TCP.
//!
//! ```text
//!  front_door: TLS port with a table ─▶ peek SNI ─▶ decide(site, port, name)
//!     Pass(route)      ─▶ passthrough::pass (splice, still encrypted)
//!     Terminate(route) ─▶ terminate: handshake with the site's certificates (before the
//!                         connection's client-header-timeout) ─▶ the route's access lists
//!                         ─▶ an endpoint (stream::connect: next one on a failed connect)
//!                         ─▶ bytes both ways until both sides closed or proxy-stream-timeout
//!                            of silence (tunnel)
//!     Refuse           ─▶ closed (no route has the name and no HTTPS listener shares the port)
//!     Https            ─▶ the port's HTTPS listeners, as before
//! ```

use std::rc::Rc;
use std::sync::Arc;

use model::sites::SiteRef;
use model::tls::HostTls;
use model::{Route, Settings};
use tokio::net::TcpStream;

use crate::worker::{Origin, Worker};

/// What a TLS listener port does with a connection, by its server name.
pub(crate) enum Sni {
    Pass(Arc<Route>),
    Terminate(Arc<Route>),
    Refuse,
    Https,
}

/// Whether connections to `port` of `site` are TLS routes' business (the ClientHello must be
/// peeked).
pub(crate) fn wanted(site: &SiteRef<'_>, port: u16) -> bool {
    site.tls_routes.contains_key(&port)
}

/// The route (a weighted split's share drawn here) for `name` on `port` of `site`.
pub(crate) fn decide(site: &SiteRef<'_>, port: u16, name: Option<&str>) -> Sni {
    let Some(table) = site.tls_routes.get(&port) else {
        return Sni::Https;
    };
    match table.find(name) {
        Some(target) => {
            let route = target.route.pick(|total| fastrand::u32(1..=total)).clone();
            match target.terminate {
                true => Sni::Terminate(route),
                false => Sni::Pass(route),
            }
        }
        None if table.https => Sni::Https,
        None => Sni::Refuse,
    }
}

/// Terminates the client's TLS with the site's certificate for its name and relays the
/// decrypted bytes to an endpoint of `route`'s backend.
pub(crate) async fn terminate(
    worker: Rc<Worker>,
    stream: TcpStream,
    origin: Origin,
    settings: &Settings,
    host_tls: Option<Arc<HostTls>>,
    route: Arc<Route>,
) {
    let peer = origin.peer;
    let handshake =
        crate::handshake::handshake(&worker, stream, &origin, settings, host_tls.as_ref());
    let Some(mut client) = handshake.await else {
        return;
    };
    if let Some(why) = crate::passthrough::refusal(&route, peer) {
        tracing::info!(%peer, route = %route.ingress, why, "TLSRoute: client refused; closed");
        return;
    }
    let mut tried = Vec::new();
    let connect_timeout = route.policy.upstream.connect_timeout;
    let what = "TLSRoute (terminated)";
    let connected = crate::stream::connect(
        &worker.upstreams,
        &route.backend,
        settings,
        connect_timeout,
        &mut tried,
        what,
    )
    .await;
    let Some((mut upstream, endpoint)) = connected else {
        tracing::debug!(%peer, route = %route.ingress, "TLSRoute: no endpoint could be reached; closed");
        return;
    };
    let idle = settings.proxy_stream_timeout;
    let ended = match route.policy.upstream_tls.as_ref() {
        None => crate::tunnel::splice(&mut client, &mut upstream, idle).await,
        // A BackendTLSPolicy on the backend: TLS again to the endpoint, verified as for
        // HTTP routes (the same client per setting).
        Some(tls) => {
            let tls = match worker.upstreams.tls_client(Some(tls)) {
                Ok(Some(tls)) => tls,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(%peer, route = %route.ingress, error = %e, "TLSRoute: upstream TLS settings unusable; closed");
                    return;
                }
            };
            let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
            let handshake = connector.connect(tls.name.clone(), upstream);
            let mut upstream = match crate::deadline::within(connect_timeout, handshake).await {
                Some(Ok(upstream)) => upstream,
                Some(Err(e)) => {
                    tracing::info!(%peer, %endpoint, route = %route.ingress, error = %e, "TLSRoute: TLS with the upstream failed; closed");
                    return;
                }
                None => {
                    tracing::info!(%peer, %endpoint, route = %route.ingress, "TLSRoute: TLS with the upstream timed out; closed");
                    return;
                }
            };
            crate::tunnel::splice(&mut client, &mut upstream, idle).await
        }
    };
    if let Err(e) = ended {
        tracing::debug!(%peer, error = %e, "TLSRoute connection ended");
    }
}
