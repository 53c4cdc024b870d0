//! What one translation produces and the proxy serves: [`Compiled`], plain data swapped in
//! whole, and the [`Diagnostic`]s that say what was left out or served differently.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use serde::Serialize;

use crate::endpoints::{Backend, BackendKey, EndpointSet, NodeLocalEndpoints};
use crate::names::{Kind, NamespacedName, ObjectRef};
use crate::policy::{ProxyProtocolVersion, RoutePolicy};
use crate::routes::{PathKind, PathRoute, Route, RouteTable};
use crate::settings::Settings;
use crate::streams::{StreamService, StreamServiceView};
use crate::tls::Certificates;

/// Something about one object an operator must know: it is invalid, or uses what Sluice does
/// not implement, or is served differently than ingress-nginx would. The rest still serves.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    pub object: ObjectRef,
    pub reason: String,
    pub severity: Severity,
}

/// How much a diagnostic changes what is served. The admission webhook refuses `Error`s and
/// returns the others as warnings; `sluice migrate` calls an Ingress with an `Error` or
/// `Unsupported` one "not served as written".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Invalid or refused: the object, rule or annotation is left out (or, where leaving it out
    /// would open access, its routes answer 503).
    Error,
    /// Input Sluice does not implement (yet): ignored, so behaviour differs from ingress-nginx.
    Unsupported,
    /// Names an object that does not exist (yet): a Service (its paths answer 503) or a Secret
    /// (the default certificate is served) until it appears. Valid input: applying a folder, or
    /// cert-manager making the Secret after the Ingress, passes through this state.
    Missing,
    /// Served, but not exactly as ingress-nginx would (a documented, deliberate difference).
    Difference,
    /// Served as ingress-nginx would, in a way that surprises (its documented traps).
    Notice,
    /// Served now, failing soon: a certificate that expires within `tls::EXPIRY_WARNING` or
    /// has expired (clients refuse it).
    Expiring,
}

/// The product of one compile. Immutable; the proxy swaps it in whole.
#[derive(Debug, Default)]
pub struct Compiled {
    pub routes: RouteTable,
    /// Every resolved backend, for the endpoint fast path.
    pub backends: BTreeMap<BackendKey, Arc<Backend>>,
    /// `service-upstream` backends: the Service's cluster IP, changed only by a compile.
    pub service_upstreams: BTreeMap<BackendKey, Arc<Backend>>,
    pub certificates: Certificates,
    pub settings: Settings,
    /// `settings.hsts_header()`, made once here rather than per response.
    pub hsts_header: Option<String>,
    /// `block-cidrs`, `block-user-agents`, `block-referers`: `None` without them.
    pub blocklist: Option<Box<crate::edge::Blocklist>>,
    /// `hide-headers`, `server-tokens`, `allow-backend-server-header`: every answer's.
    pub response_filter: crate::edge::ResponseFilter,
    /// The access log's format and filters; `None`: `disable-access-log` or
    /// `disable-http-access-log`.
    pub access_log: Option<crate::access_log::AccessLog>,
    /// TCP services' line format (`log-format-stream`); `None`: `disable-access-log` or
    /// `disable-stream-access-log`.
    pub stream_access_log: Option<crate::access_log::StreamLogFormat>,
    /// Some route traces (`enable-opentelemetry`, ConfigMap or annotation): requests keep a
    /// record for a span. `false`: tracing costs a request this one check.
    pub tracing: bool,
    /// The ConfigMap's `custom-http-errors`, for requests no rule matches.
    pub custom_errors: Option<Arc<crate::policy::CustomErrors>>,
    /// Some route (or the ConfigMap) has custom errors: the proxy keeps a copy of each
    /// request's head for the error request only then.
    pub any_custom_errors: bool,
    pub diagnostics: Vec<Diagnostic>,
    /// Ingresses this configuration serves.
    pub ingresses: Vec<NamespacedName>,
    /// `ssl-passthrough` hosts (exact names, lower case) → the route of their `/` path: TLS
    /// connections naming the host in SNI go to its backend undecrypted.
    pub passthrough: HashMap<String, Arc<Route>>,
    /// Gateway TLS listeners' routes (TLSRoute): listener port → routes by server name.
    pub tls_routes: crate::tls_routes::TlsRoutes,
    /// The policy its backends' endpoints were read with; the fast path keeps applying it.
    pub node_local_endpoints: NodeLocalEndpoints,
    /// TCP services (`--tcp-services-configmap`): listen port → where its connections go.
    /// Their backends are in `backends` too, so endpoint changes reach them on the fast path.
    pub tcp_services: BTreeMap<u16, Arc<StreamService>>,
    /// UDP services (`--udp-services-configmap`): listen port ─▶ where its datagrams go.
    pub udp_services: BTreeMap<u16, Arc<StreamService>>,
    /// Every ConfigMap this compile looked up, found or not: a change to any other (Sluice
    /// watches every ConfigMap of its scope) needs no compile.
    pub config_maps_read: BTreeSet<NamespacedName>,
    /// Every ClusterTrustBundle this compile looked up, found or not (by name): a change to
    /// any other needs no compile.
    pub cluster_trust_bundles_read: BTreeSet<String>,
    /// Some Gateway listener selects route namespaces by label: a change to a Namespace's
    /// labels needs a compile (otherwise none does).
    pub namespace_selectors: bool,
    /// Gateway API status as this compile decided it (empty without Gateway API objects).
    pub gateway_status: Arc<crate::gateway_status::GatewayStatuses>,
    /// Gateways with an address of their own (`--gateway-address-pool`): address → what is
    /// served there instead of the routes, certificates and passthrough hosts above.
    pub sites: crate::sites::Sites,
    /// Ports Gateway listeners declare beyond 80 and 443 (see `sites::DeclaredPort`).
    pub declared_ports: crate::sites::DeclaredPorts,
    /// Gateway TCP and UDP listeners' routes of the shared site (`gateway_streams`); a
    /// Gateway with an address of its own has them in its site.
    pub gateway_streams: crate::gateway_streams::GatewayStreams,
}

impl Diagnostic {
    /// An [`Severity::Error`].
    pub fn new(object: ObjectRef, reason: impl Into<String>) -> Diagnostic {
        Diagnostic::with_severity(Severity::Error, object, reason)
    }

    pub fn with_severity(
        severity: Severity,
        object: ObjectRef,
        reason: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            object,
            reason: reason.into(),
            severity,
        }
    }
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Unsupported => "unsupported",
            Severity::Missing => "missing",
            Severity::Difference => "difference",
            Severity::Notice => "notice",
            Severity::Expiring => "expiring",
        }
    }
}

impl fmt::Display for Diagnostic {
    /// Errors read as before; the other kinds say what they are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.severity {
            Severity::Error => write!(f, "{}: {}", self.object, self.reason),
            other => write!(f, "{}: {}: {}", self.object, other.as_str(), self.reason),
        }
    }
}

/// A serialisable picture of a compiled configuration: what `/config` shows and golden files
/// hold. Endpoints are read as they are now.
#[derive(Debug, Serialize)]
pub struct CompiledView {
    pub hosts: BTreeMap<String, HostView>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub www_redirects: BTreeMap<String, String>,
    pub default_backend: Option<RouteView>,
    /// Where known hosts' unmatched paths go when the host has no root of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_default: Option<RouteView>,
    /// Where a request no host, rule or default backend takes goes (ingress-nginx's `_`
    /// server): only when the http level has a policy for it (the ConfigMap's `add-headers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_server: Option<RouteView>,
    /// Rules tried before the default backend (its canary's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub default_rules: Vec<RouteView>,
    pub backends: BTreeMap<String, EndpointSet>,
    pub certificates: BTreeMap<String, String>,
    /// Hosts whose handshake asks for a client certificate → the CA names it lists.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub client_cert_requests: BTreeMap<String, usize>,
    /// Hosts with a cipher list or order of their own (`ssl-ciphers` annotations).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub host_ciphers: BTreeMap<String, String>,
    /// Listener ports whose handshakes a Gateway's frontend validation sets (`frontend_tls`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub port_tls: BTreeMap<u16, String>,
    /// `ssl-passthrough` hosts → the backend their TLS connections go to (and the PROXY
    /// protocol version written to it, if any).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub passthrough: BTreeMap<String, String>,
    /// TLS listeners' routes: port → server name → backend (passthrough or terminate).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tls_routes: BTreeMap<u16, BTreeMap<String, String>>,
    /// TCP services: listen port → Service port and PROXY protocol flags.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tcp_services: BTreeMap<u16, StreamServiceView>,
    /// UDP services: listen port ─▶ Service port.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub udp_services: BTreeMap<u16, StreamServiceView>,
    pub settings: Settings,
    pub ingresses: Vec<String>,
    pub diagnostics: Vec<String>,
    /// Gateways' own addresses → their hosts and certificates (see `sites`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sites: BTreeMap<String, SiteView>,
    /// Ports Gateway listeners declare beyond 80 and 443 → `http` or `https`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub declared_ports: BTreeMap<u16, &'static str>,
    /// Gateway TCP and UDP listeners' ports (TCPRoute, UDPRoute) of the shared site.
    #[serde(skip_serializing_if = "crate::gateway_streams::GatewayStreamsView::is_empty")]
    pub gateway_streams: crate::gateway_streams::GatewayStreamsView,
}

/// What one Gateway's own address serves.
#[derive(Debug, Serialize)]
pub struct SiteView {
    pub hosts: BTreeMap<String, HostView>,
    pub certificates: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tls_routes: BTreeMap<u16, BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "crate::gateway_streams::GatewayStreamsView::is_empty")]
    pub streams: crate::gateway_streams::GatewayStreamsView,
}

#[derive(Debug, Serialize)]
pub struct HostView {
    pub tls: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regex: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_root: Option<String>,
    pub paths: Vec<RouteView>,
    /// The host's root location, where its unmatched paths go (see `routes::HostRoutes`);
    /// absent: the host default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<RouteView>,
}

#[derive(Debug, Serialize)]
pub struct RouteView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<PathKind>,
    pub ingress: String,
    pub service: String,
    /// `None` when the backend could not be resolved (requests answer 503).
    pub backend: Option<String>,
    /// No upstream: Sluice answers 404 once the policy's phases let the request through.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub not_found: bool,
    /// On a regex host: the regex the path is matched with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// What the route's policy changes from the ConfigMap's default policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<serde_json::Value>,
    /// The rule's conditions beyond its path, one per line (`header x-canary = "always"`).
    #[serde(rename = "when", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<String>,
    /// The one listener the rule answers on (`http`, `https`); absent: both.
    #[serde(rename = "listener", skip_serializing_if = "Option::is_none")]
    pub listener: Option<&'static str>,
    /// This route is the alternative upstream of a rule (a canary): its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alternative: Option<String>,
    /// The alternatives that take a share of this rule's requests.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<SplitView>,
}

/// One alternative of a split: `weight` requests in `total` go to `route`.
#[derive(Debug, Serialize)]
pub struct SplitView {
    pub weight: u32,
    pub total: u32,
    pub route: RouteView,
}

impl RouteView {
    fn new(path: Option<&PathRoute>, route: &Route, default: &RoutePolicy) -> RouteView {
        let traffic = route.traffic.as_deref();
        RouteView {
            path: path.map(|p| p.written.to_string()),
            kind: path.map(|p| p.kind),
            // The host default's 404 belongs to no Ingress.
            ingress: if route.ingress.name.is_empty() {
                String::new()
            } else {
                route.ingress.to_string()
            },
            service: route.service.to_string(),
            backend: route.backend.key().map(ToString::to_string),
            not_found: route.not_found,
            regex: path.and_then(|p| p.pattern.as_ref()).map(|r| r.to_string()),
            policy: route.policy.difference(default),
            conditions: path.map_or_else(Vec::new, |p| {
                p.when.iter().map(ToString::to_string).collect()
            }),
            listener: path.and_then(|p| p.listeners.only()),
            alternative: route.alternative_name().map(ToString::to_string),
            split: traffic.map_or_else(Vec::new, |t| {
                // A weightless alternative is there for its affinity cookie only.
                t.alternatives
                    .iter()
                    .filter(|a| a.weight > 0)
                    .map(|a| SplitView {
                        weight: a.weight,
                        total: t.total,
                        route: RouteView::new(None, &a.route, default),
                    })
                    .collect()
            }),
        }
    }
}

impl Compiled {
    pub fn view(&self) -> CompiledView {
        // What a route without annotations has: the ConfigMap's, custom errors included.
        let default = RoutePolicy {
            custom_errors: self.custom_errors.clone(),
            ..RoutePolicy::from_settings(&self.settings)
        };
        CompiledView {
            www_redirects: self
                .routes
                .www_redirects()
                .iter()
                .map(|(from, to)| (from.clone(), to.clone()))
                .collect(),
            hosts: hosts_view(&self.routes, &default),
            default_backend: self
                .routes
                .default_backend()
                .map(|r| RouteView::new(None, r, &default)),
            host_default: self
                .routes
                .host_default()
                .map(|r| RouteView::new(None, r, &default)),
            default_server: self
                .routes
                .default_server()
                .map(|r| RouteView::new(None, r, &default)),
            default_rules: self
                .routes
                .default_rules()
                .iter()
                .map(|rule| RouteView::new(Some(rule), &rule.route, &default))
                .collect(),
            backends: self
                .backends
                .iter()
                .map(|(key, backend)| (key.to_string(), (*backend.endpoints()).clone()))
                .collect(),
            certificates: self.certificates.sources().clone(),
            client_cert_requests: self.certificates.client_cert_requests(),
            host_ciphers: self.certificates.host_ciphers(),
            port_tls: self.certificates.port_tls_view(),
            passthrough: self
                .passthrough
                .iter()
                .map(|(host, route)| {
                    let backend = route
                        .backend
                        .key()
                        .map_or_else(|| "(unresolved)".to_owned(), ToString::to_string);
                    let backend = match route.policy.passthrough_proxy_protocol {
                        None => backend,
                        Some(ProxyProtocolVersion::V1) => format!("{backend} (PROXY protocol v1)"),
                        Some(ProxyProtocolVersion::V2) => format!("{backend} (PROXY protocol v2)"),
                    };
                    (host.clone(), backend)
                })
                .collect(),
            tls_routes: tls_routes_view(&self.tls_routes),
            tcp_services: self
                .tcp_services
                .iter()
                .map(|(port, service)| (*port, service.view()))
                .collect(),
            udp_services: self
                .udp_services
                .iter()
                .map(|(port, service)| (*port, service.view()))
                .collect(),
            settings: self.settings.clone(),
            ingresses: self.ingresses.iter().map(ToString::to_string).collect(),
            diagnostics: self.diagnostics.iter().map(ToString::to_string).collect(),
            sites: self
                .sites
                .iter()
                .map(|(address, site)| {
                    let view = SiteView {
                        hosts: hosts_view(&site.routes, &default),
                        certificates: site.certificates.sources().clone(),
                        tls_routes: tls_routes_view(&site.tls_routes),
                        streams: site.streams.view(),
                    };
                    (address.to_string(), view)
                })
                .collect(),
            declared_ports: (self.declared_ports.iter())
                .map(|(port, d)| (*port, if d.tls { "https" } else { "http" }))
                .collect(),
            gateway_streams: self.gateway_streams.view(),
        }
    }
}

fn tls_routes_view(
    routes: &crate::tls_routes::TlsRoutes,
) -> BTreeMap<u16, BTreeMap<String, String>> {
    (routes.iter())
        .map(|(port, table)| (*port, table.view()))
        .collect()
}

/// A route table's hosts, as `/config` shows them.
fn hosts_view(routes: &RouteTable, default: &RoutePolicy) -> BTreeMap<String, HostView> {
    routes
        .hosts()
        .into_iter()
        .map(|(host, routes)| {
            let paths = routes
                .paths
                .iter()
                .map(|p| RouteView::new(Some(p), &p.route, default))
                .collect();
            (
                host.to_string(),
                HostView {
                    tls: routes.tls,
                    regex: routes.regex,
                    app_root: routes
                        .app_root
                        .as_ref()
                        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned()),
                    paths,
                    root: routes
                        .root
                        .as_ref()
                        .map(|r| RouteView::new(None, r, default)),
                },
            )
        })
        .collect()
}

impl Compiled {
    /// One diagnostic per served Ingress and refused address of its backends (see
    /// [`NodeLocalEndpoints`]), and per served Ingress and backend whose host name did not
    /// resolve plainly (`EndpointSet::resolution`), as the endpoints are now; sorted. Not part
    /// of `diagnostics`, because the fast path changes endpoints without a compile.
    /// O(routes): call it when such endpoints are involved, not on every endpoint change.
    pub fn endpoint_diagnostics(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        // Each backend once first: with nothing to say (the usual case) the routes, thousands
        // of them sharing few backends, are not walked (this runs at every publish).
        let any =
            (self.backends.values()).any(|backend| backend.with_endpoints(|set| set.has_notes()));
        if !any {
            return out;
        }
        let mut visit = |route: &Route| {
            let Some(key) = route.backend.key() else {
                return;
            };
            route.backend.with_endpoints(|set| {
                for refused in &set.refused {
                    out.push(Diagnostic::new(
                        ingress_ref(&route.ingress),
                        format!(
                            "backend {key}: endpoint {} ({}) not used: {}; \
                             --allow-loopback-endpoints allows it",
                            refused.address, refused.source, refused.reason
                        ),
                    ));
                }
                if let Some(resolution) = &set.resolution {
                    out.push(Diagnostic::new(
                        ingress_ref(&route.ingress),
                        format!("backend {key}: {resolution}"),
                    ));
                }
            });
        };
        for route in self.routes.routes() {
            visit(route);
        }
        out.sort();
        out.dedup();
        out
    }
}

/// The Ingress `name` as a diagnostic's object.
pub fn ingress_ref(name: &NamespacedName) -> ObjectRef {
    ObjectRef::new(Kind::Ingress, &*name.namespace, &*name.name)
}

impl Compiled {
    /// Some Gateway has an address of its own: connections must say which address they came
    /// in on.
    pub fn has_sites(&self) -> bool {
        !self.sites.is_empty()
    }

    /// Where a connection (datagram) to `port` at `local` (its local address; `None`: not
    /// read, as without sites) goes: a Gateway TCP/UDP listener's route of the site that owns
    /// the address (else of the shared site), else the services ConfigMap's entry.
    pub fn stream_service(
        &self,
        protocol: crate::streams::StreamProtocol,
        local: Option<IpAddr>,
        port: u16,
    ) -> Option<&Arc<StreamService>> {
        let site = local.and_then(|ip| self.sites.get(&ip.to_canonical()));
        let streams = site.map_or(&self.gateway_streams, |site| &site.streams);
        let services = match protocol {
            crate::streams::StreamProtocol::Tcp => &self.tcp_services,
            crate::streams::StreamProtocol::Udp => &self.udp_services,
        };
        (streams.of(protocol).get(&port)).or_else(|| services.get(&port))
    }

    /// Every port of `protocol` with a stream service somewhere (the ConfigMap's, the shared
    /// site's and every site's Gateway listeners), each with one of its services (for logs):
    /// the proxy binds them on its listening address, where `stream_service` tells sites apart.
    pub fn stream_ports(
        &self,
        protocol: crate::streams::StreamProtocol,
    ) -> BTreeMap<u16, &Arc<StreamService>> {
        let services = match protocol {
            crate::streams::StreamProtocol::Tcp => &self.tcp_services,
            crate::streams::StreamProtocol::Udp => &self.udp_services,
        };
        let gateways = std::iter::once(&self.gateway_streams)
            .chain(self.sites.values().map(|site| &site.streams));
        let mut ports: BTreeMap<u16, &Arc<StreamService>> = BTreeMap::new();
        for (port, service) in gateways.flat_map(|g| g.of(protocol)).chain(services) {
            ports.entry(*port).or_insert(service);
        }
        ports
    }

    /// What a connection to `local` (its local address; `None`: not read, as without sites)
    /// is served with: the site of the Gateway that owns the address, else the shared one.
    pub fn site(&self, local: Option<IpAddr>) -> crate::sites::SiteRef<'_> {
        match local.and_then(|ip| self.sites.get(&ip.to_canonical())) {
            Some(site) => crate::sites::SiteRef {
                routes: &site.routes,
                certificates: &site.certificates,
                passthrough: &site.passthrough,
                tls_routes: &site.tls_routes,
            },
            None => crate::sites::SiteRef {
                routes: &self.routes,
                certificates: &self.certificates,
                passthrough: &self.passthrough,
                tls_routes: &self.tls_routes,
            },
        }
    }
}

#[cfg(test)]
mod site_tests {
    use super::*;
    use crate::routes::{HostPattern, PathKind, PathRoute, RouteSite};
    use crate::sites::Site;
    use crate::Backend;

    fn route(name: &str) -> Arc<Route> {
        Arc::new(Route {
            ingress: crate::NamespacedName::new("default", name),
            service: Arc::from(name),
            backend: Arc::new(Backend::unresolved()),
            policy: Arc::default(),
            site: RouteSite::default(),
            traffic: None,
            not_found: false,
        })
    }

    #[test]
    fn a_connection_gets_the_site_of_its_address_else_the_shared_one() {
        let mut compiled = Compiled::default();
        let own: IpAddr = "192.0.2.7".parse().unwrap();
        let mut site = Site::default();
        site.routes.host_mut(&HostPattern::Any).add(PathRoute::new(
            PathKind::Prefix,
            "/",
            route("gateway"),
        ));
        site.routes.finish();
        compiled.sites.insert(own, site);
        compiled
            .routes
            .host_mut(&HostPattern::Any)
            .add(PathRoute::new(PathKind::Prefix, "/", route("ingress")));
        compiled.routes.finish();
        assert!(compiled.has_sites());
        let head = http::Request::new(()).into_parts().0;
        let served_by = |local: Option<IpAddr>| {
            let found = compiled.site(local).routes.route("x.com", "/", &head);
            found.map(|m| m.route.ingress.name.to_string())
        };
        assert_eq!(served_by(Some(own)).as_deref(), Some("gateway"));
        // A dual-stack socket reports an IPv4 client's address mapped into IPv6.
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(served_by(Some(mapped)).as_deref(), Some("gateway"));
        assert_eq!(
            served_by(Some("192.0.2.8".parse().unwrap())).as_deref(),
            Some("ingress")
        );
        assert_eq!(served_by(None).as_deref(), Some("ingress"));
    }
}
