//! Gateway TCP and UDP listeners' routes (TCPRoute, UDPRoute) as the proxy serves them: per
//! site and listener port, the [`StreamService`] its connections (datagrams) go to, the same
//! type a `--tcp-services-configmap` entry compiles to, so one stream proxy serves both.
//!
//! ```text
//!  connection to port P at address A ─▶ Compiled::stream_service(protocol, A, P)
//!      A is a Gateway's own address (a site) ─▶ that site's GatewayStreams[P]
//!      else ─▶ the shared GatewayStreams[P] (Gateways without an address of their own)
//!      neither ─▶ the ConfigMap's entry for P (tcp_services, udp_services)
//!  StreamService { backend, route: Some(weighted shares) } ─▶ pick_backend per connection
//! ```
//! Which route keeps a listener port (the oldest), and which ports collide with Sluice's own
//! listeners or a ConfigMap entry, is the translation's decision; here it is data.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::streams::{StreamProtocol, StreamService, StreamServiceView};

/// The TCP and UDP listener ports of one site, each with where its traffic goes.
#[derive(Debug, Default)]
pub struct GatewayStreams {
    pub tcp: BTreeMap<u16, Arc<StreamService>>,
    pub udp: BTreeMap<u16, Arc<StreamService>>,
}

/// What `/config` shows of one site's Gateway TCP and UDP ports.
#[derive(Debug, Default, serde::Serialize)]
pub struct GatewayStreamsView {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tcp: BTreeMap<u16, StreamServiceView>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub udp: BTreeMap<u16, StreamServiceView>,
}

impl GatewayStreamsView {
    pub fn is_empty(&self) -> bool {
        self.tcp.is_empty() && self.udp.is_empty()
    }
}

impl GatewayStreams {
    pub fn of(&self, protocol: StreamProtocol) -> &BTreeMap<u16, Arc<StreamService>> {
        match protocol {
            StreamProtocol::Tcp => &self.tcp,
            StreamProtocol::Udp => &self.udp,
        }
    }

    pub fn of_mut(&mut self, protocol: StreamProtocol) -> &mut BTreeMap<u16, Arc<StreamService>> {
        match protocol {
            StreamProtocol::Tcp => &mut self.tcp,
            StreamProtocol::Udp => &mut self.udp,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tcp.is_empty() && self.udp.is_empty()
    }

    pub fn view(&self) -> GatewayStreamsView {
        let view = |map: &BTreeMap<u16, Arc<StreamService>>| {
            (map.iter())
                .map(|(port, service)| (*port, service.view()))
                .collect()
        };
        GatewayStreamsView {
            tcp: view(&self.tcp),
            udp: view(&self.udp),
        }
    }
}
