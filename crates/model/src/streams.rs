//! TCP and UDP services (ingress-nginx's `--tcp-services-configmap` and
//! `--udp-services-configmap`) as the proxy serves them: listen port ─▶ [`StreamService`]
//! (a Backend shared with HTTP routes, so endpoint changes reach it on the fast path).
//! Reading the ConfigMaps is `translate::streams`.

use std::sync::Arc;

use serde::Serialize;

use crate::endpoints::Backend;
use crate::names::NamespacedName;
use crate::routes::Route;

/// The protocol of a stream services ConfigMap (and of a generated Service's port; TCP sorts
/// first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StreamProtocol {
    Tcp,
    Udp,
}

impl StreamProtocol {
    /// As Kubernetes writes it (a Service port's `protocol`).
    pub fn name(self) -> &'static str {
        match self {
            StreamProtocol::Tcp => "TCP",
            StreamProtocol::Udp => "UDP",
        }
    }

    /// The `sluice serve` flag that names its ConfigMap.
    pub fn flag(self) -> &'static str {
        match self {
            StreamProtocol::Tcp => "--tcp-services-configmap",
            StreamProtocol::Udp => "--udp-services-configmap",
        }
    }

    /// The upstream name's prefix, as ingress-nginx's (`tcp-…`, `udp-…`).
    pub fn prefix(self) -> &'static str {
        match self {
            StreamProtocol::Tcp => "tcp",
            StreamProtocol::Udp => "udp",
        }
    }
}

/// One TCP (or UDP) service: what connections (datagrams) to `port` are forwarded to.
#[derive(Debug)]
pub struct StreamService {
    pub port: u16,
    pub service: NamespacedName,
    /// The Service port as written in the entry (a number or a name).
    pub service_port: String,
    pub backend: Arc<Backend>,
    /// `:PROXY` (third part): every connection starts with a PROXY protocol header (v1 or
    /// v2) from a load balancer; one without a valid header is closed.
    pub decode_proxy_protocol: bool,
    /// `:PROXY:PROXY` (fourth part): a PROXY protocol v1 header goes to the upstream first.
    pub encode_proxy_protocol: bool,
    /// ingress-nginx's `$proxy_upstream_name` for it: `tcp-NAMESPACE-NAME-PORT` (`udp-…`).
    pub upstream_name: String,
    /// A Gateway TCPRoute's or UDPRoute's backendRefs (`gateway_streams`): each connection (UDP
    /// session) draws its share, whose backend it goes to; `backend` is the first share's.
    /// `None`: a ConfigMap entry, one backend.
    pub route: Option<Arc<Route>>,
}

/// What `/config` shows of a TCP service.
#[derive(Debug, Serialize)]
pub struct StreamServiceView {
    pub service: String,
    pub backend: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub decode_proxy_protocol: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub encode_proxy_protocol: bool,
}

impl StreamService {
    /// The backend a new connection (UDP session) goes to: a weighted share's when the
    /// service is a Gateway route with several (`draw(total)` returns a number in
    /// `1..=total`), else `backend`.
    pub fn pick_backend(&self, draw: impl FnOnce(u32) -> u32) -> &Arc<Backend> {
        match &self.route {
            Some(route) => &route.pick(draw).backend,
            None => &self.backend,
        }
    }

    pub fn view(&self) -> StreamServiceView {
        StreamServiceView {
            service: format!("{}:{}", self.service, self.service_port),
            backend: self.backend.key().map(ToString::to_string),
            decode_proxy_protocol: self.decode_proxy_protocol,
            encode_proxy_protocol: self.encode_proxy_protocol,
        }
    }
}
