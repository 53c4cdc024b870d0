//! Which site a connection is served with (`model::sites`): Gateways with an address of their
//! own are told apart by the connection's local address.
//!
//! ```text
//!  accepted ─▶ local_site: the configuration has sites? ─ no ─▶ None (no syscall)
//!                                                     └ yes ─▶ getsockname ─▶ Some(local ip)
//!  Origin.local ─▶ ConnCtx.local ─▶ Compiled::site(local): routes (forward), certificates and
//!                                   passthrough hosts (front_door, tls)
//!  FrontDoor: the listener it came in on (its Listeners bit and declared port) ─▶ ConnCtx
//!  TLS: site_tls_config ─▶ a ServerConfig per (site, host handshake), made on first use per
//!       worker, whose certificate resolver looks in that site's certificates
//! ```

use std::net::IpAddr;
use std::sync::Arc;

use model::tls::HostTls;
use model::Compiled;
use tokio::net::TcpStream;

/// A worker keeps at most this many sites' TLS configurations; past it, it starts over.
const SITE_TLS_CONFIGS: usize = 256;

/// The TLS configurations a worker made for sites: (site address, host handshake) → config.
#[derive(Default)]
pub(crate) struct SiteTlsConfigs {
    made: Vec<(SiteHandshake, Arc<rustls::ServerConfig>)>,
}

/// A site's address and the host handshake (`None`: the listener's) a configuration is for.
type SiteHandshake = (IpAddr, Option<Arc<HostTls>>);

/// The listener a connection came in on, as Gateway API sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrontDoor {
    /// TLS is terminated here.
    pub(crate) https: bool,
    /// Its bit: the rules that answer on it.
    pub(crate) on: model::routes::Listeners,
    /// The port it declares (80 and 443 for Sluice's own two, whatever their sockets' are).
    pub(crate) port: u16,
}

/// The connection's local address when it is a site's; read only when `config` has sites.
pub(crate) fn local_site(config: Option<&Compiled>, stream: &TcpStream) -> Option<IpAddr> {
    let config = config.filter(|c| c.has_sites())?;
    let local = stream.local_addr().ok()?.ip().to_canonical();
    config.sites.contains_key(&local).then_some(local)
}

impl SiteTlsConfigs {
    /// The configuration for `site` with `host`'s handshake: made by `make` on first use.
    pub(crate) fn get_or_make(
        &mut self,
        site: IpAddr,
        host: Option<&Arc<HostTls>>,
        make: impl FnOnce() -> Result<Arc<rustls::ServerConfig>, rustls::Error>,
    ) -> Option<Arc<rustls::ServerConfig>> {
        // Compared by value: each compile makes new `Arc`s of the same settings.
        let same = |(ip, h): &SiteHandshake| *ip == site && h.as_deref() == host.map(|h| &**h);
        if let Some((_, config)) = self.made.iter().find(|(key, _)| same(key)) {
            return Some(config.clone());
        }
        match make() {
            Ok(config) => {
                if self.made.len() >= SITE_TLS_CONFIGS {
                    self.made.clear();
                }
                self.made.push(((site, host.cloned()), config.clone()));
                Some(config)
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot build a site's TLS configuration");
                None
            }
        }
    }

    /// Forgets every configuration (the `ssl-*` settings changed).
    pub(crate) fn clear(&mut self) {
        self.made.clear();
    }
}
