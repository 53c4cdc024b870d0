//! Backends and their endpoints: the one piece of routing state that changes without a compile.
//!
//! ```text
//!  EndpointSlices of a Service ──translate::backends──▶ EndpointSet ──Backend::set_endpoints──▶ ArcSwap
//!                                                                         ▲ read per request
//!                                                           route table ──┘ (Arc<Backend>)
//! ```
//! A route holds an `Arc<Backend>`; the control plane swaps the backend's `EndpointSet` when
//! slices change, so endpoint churn costs O(that Service), however many Ingresses exist.
//!
//! Both paths (compile and the fast path) read slices through `translate::backends`, so the
//! [`NodeLocalEndpoints`] policy holds on both: in Kubernetes mode an address that points at the
//! node itself (loopback, link-local such as the metadata service, unspecified) is left out and
//! kept in `EndpointSet::refused`, which `/config`, the metrics and the log show.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Serialize;

use crate::names::NamespacedName;

/// Which endpoints serve one Service port: namespace, Service and the *name* of the Service
/// port, which is also the name of the EndpointSlice port carrying the pods' target port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BackendKey {
    pub service: NamespacedName,
    /// Empty for a Service's single unnamed port, as in the API.
    pub port_name: String,
}

/// The prefix of the service part of a [`BackendKey::named`]: no Service has an empty
/// namespace, and a Service name has no `:`, so such a key meets no Service's.
const NAMED_HOST: &str = "dns:";

impl BackendKey {
    /// The key of the backend that dials host name `host` at `port`: a URL annotation's
    /// destination (`auth-url`, `mirror-target`) that is neither an address nor a Service.
    /// Its endpoints are what the control plane's resolver finds for the name.
    pub fn named(host: &str, port: u16) -> BackendKey {
        BackendKey {
            service: NamespacedName::new("", format!("{NAMED_HOST}{host}")),
            port_name: port.to_string(),
        }
    }

    /// The host name a [`BackendKey::named`] key's `service` part stands for (`None`: a
    /// Service, or an address's backend).
    pub fn named_host(service: &NamespacedName) -> Option<&str> {
        if !service.namespace.is_empty() {
            return None;
        }
        service.name.strip_prefix(NAMED_HOST)
    }
}

/// The endpoints of one backend at one moment. Immutable; replaced whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EndpointSet {
    /// `ready` endpoints: these take traffic.
    pub ready: Vec<SocketAddr>,
    /// `serving` and `terminating`: used only while no ready endpoint is left, so a Service
    /// whose pods are all rolling over keeps answering.
    pub terminating: Vec<SocketAddr>,
    /// Addresses the slices list but the [`NodeLocalEndpoints`] policy left out: never traffic.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedEndpoint>,
    /// Endpoints that come from a host name (an ExternalName Service's, a URL annotation's
    /// host): what the resolver last said when it was no plain answer: the name has no
    /// address (so there are no endpoints), or no name server answers (so they are the last
    /// ones found). `None` otherwise, and before its first answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Box<str>>,
    /// Topology-aware routing: only the endpoints hinted for this zone (this replica's) are
    /// listed. `None`: every zone's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<Box<str>>,
    /// `PreferSameNode`: only the endpoints hinted for this node (this replica's) are listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Box<str>>,
}

/// Whether EndpointSlice addresses that point at the node itself may take traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeLocalEndpoints {
    /// Standalone (`--config`): the demo, tests and the lab run their backends on loopback.
    #[default]
    Allow,
    /// Kubernetes mode (unless `--allow-loopback-endpoints`). No Pod has such an address; a slice
    /// that lists one (written by hand, or stored before the API server validated them) would
    /// let a tenant's Ingress reach the node's own services or the cloud metadata service with
    /// the proxy's network identity (it runs with the host network in `deploy/`).
    Refuse,
}

/// An address left out of a backend, and why.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RefusedEndpoint {
    pub address: SocketAddr,
    /// Where it came from: `EndpointSlice namespace/name`, or the ExternalName (and its
    /// Service) that resolved to it.
    pub source: String,
    pub reason: &'static str,
}

/// A backend a route points at. Identity is stable for one compiled configuration; its
/// endpoints are swapped in place.
pub struct Backend {
    key: Option<BackendKey>,
    endpoints: ArcSwap<EndpointSet>,
}

impl fmt::Display for BackendKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.port_name.is_empty() {
            write!(f, "{}", self.service)
        } else {
            write!(f, "{}:{}", self.service, self.port_name)
        }
    }
}

impl Serialize for BackendKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl EndpointSet {
    /// Whether there is something to report about these endpoints: refused addresses, or a
    /// host name that did not resolve plainly.
    pub fn has_notes(&self) -> bool {
        !self.refused.is_empty() || self.resolution.is_some()
    }
}

impl EndpointSet {
    /// The endpoints that take traffic now.
    pub fn active(&self) -> &[SocketAddr] {
        if self.ready.is_empty() {
            &self.terminating
        } else {
            &self.ready
        }
    }

    /// Every endpoint that may still have requests in flight or connections pooled.
    pub fn all(&self) -> impl Iterator<Item = &SocketAddr> {
        self.ready.iter().chain(self.terminating.iter())
    }
}

impl Backend {
    /// A backend fed by EndpointSlices.
    pub fn new(key: BackendKey, endpoints: EndpointSet) -> Backend {
        Backend {
            key: Some(key),
            endpoints: ArcSwap::from_pointee(endpoints),
        }
    }

    /// A backend that could not be resolved (missing Service or port): it never has
    /// endpoints, so its routes answer 503 while the rest of the table works.
    pub fn unresolved() -> Backend {
        Backend {
            key: None,
            endpoints: ArcSwap::from_pointee(EndpointSet::default()),
        }
    }

    pub fn key(&self) -> Option<&BackendKey> {
        self.key.as_ref()
    }

    /// The current endpoints. Lock-free; cheap enough for every request.
    pub fn endpoints(&self) -> Arc<EndpointSet> {
        self.endpoints.load_full()
    }

    /// Runs `f` on the current endpoints without taking a reference count. The proxy calls this
    /// on every request from every worker; `endpoints()` would make all of them bump one shared
    /// counter, bouncing its cache line between cores.
    pub fn with_endpoints<R>(&self, f: impl FnOnce(&EndpointSet) -> R) -> R {
        f(&self.endpoints.load())
    }

    /// Publishes a new endpoint set; false when it is equal to the current one.
    pub fn set_endpoints(&self, endpoints: EndpointSet) -> bool {
        if **self.endpoints.load() == endpoints {
            return false;
        }
        self.endpoints.store(Arc::new(endpoints));
        true
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("key", &self.key)
            .field("endpoints", &self.endpoints.load())
            .finish()
    }
}

/// Why `ip` points at the node itself rather than at a Pod, if it does. IPv4-mapped IPv6
/// addresses (`::ffff:127.0.0.1`) count as the IPv4 address they carry.
pub fn node_local_reason(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) if v4.is_unspecified() => {
            Some("unspecified address (0.0.0.0): connects to the node itself")
        }
        IpAddr::V4(v4) if v4.is_loopback() => {
            Some("loopback address (127.0.0.0/8): the node itself")
        }
        IpAddr::V4(v4) if v4.is_link_local() => Some(
            "link-local address (169.254.0.0/16, e.g. the cloud metadata service 169.254.169.254)",
        ),
        IpAddr::V6(v6) if v6.is_unspecified() => {
            Some("unspecified address (::): connects to the node itself")
        }
        IpAddr::V6(v6) if v6.is_loopback() => Some("loopback address (::1): the node itself"),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some("link-local address (fe80::/10)"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port_name: &str) -> BackendKey {
        BackendKey {
            service: NamespacedName::new("default", "web"),
            port_name: port_name.into(),
        }
    }

    #[test]
    fn addresses_of_the_node_itself_are_recognised() {
        for node_local in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "169.254.169.254",
            "169.254.0.1",
            "::1",
            "::",
            "fe80::1",
            "febf::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            let ip: IpAddr = node_local.parse().unwrap();
            assert!(node_local_reason(ip).is_some(), "{node_local}");
        }
        for pod in [
            "10.0.0.1",
            "192.168.1.1",
            "198.18.0.11",
            "100.64.0.1",
            "0.0.0.1",
            "fd00::1",
            "fec0::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
        ] {
            let ip: IpAddr = pod.parse().unwrap();
            assert_eq!(node_local_reason(ip), None, "{pod}");
        }
    }

    #[test]
    fn terminating_endpoints_serve_only_when_nothing_is_ready() {
        let set = EndpointSet {
            ready: vec![],
            terminating: vec!["10.0.0.2:80".parse().unwrap()],
            refused: Vec::new(),
            ..EndpointSet::default()
        };
        assert_eq!(set.active(), set.terminating.as_slice());
    }

    #[test]
    fn publishing_an_equal_set_is_not_a_change() {
        let backend = Backend::new(key(""), EndpointSet::default());
        assert!(!backend.set_endpoints(EndpointSet::default()));
        let one = EndpointSet {
            ready: vec!["10.0.0.1:80".parse().unwrap()],
            terminating: vec![],
            refused: Vec::new(),
            ..EndpointSet::default()
        };
        assert!(backend.set_endpoints(one.clone()));
        assert_eq!(*backend.endpoints(), one);
    }
}
