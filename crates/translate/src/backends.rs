//! Backend references: a Service and a port (number or name), as an Ingress backend, a TCP/UDP
//! services entry or the default backend names it, resolved to a [`BackendKey`], and the
//! endpoints of that key read from the Store's EndpointSlices. One function per step, shared by
//! every source (Ingress today, Gateway API's `backendRefs` next), so a port or an endpoint is
//! read the same way whatever named it.
//!
//! ```text
//!  (Service, port number | port name) ──resolve──▶ BackendKey { service, port name }
//!  BackendKey + Store's EndpointSlices ──endpoints_for──▶ EndpointSet ──backend──▶ Backend
//!  (the two together: `Compiler::resolve_backend`, what Ingress and Gateway API references
//!   go through, with the compile's ExternalName rule)
//!  changed Services ──refresh_endpoints──▶ Backend::set_endpoints (the fast path, no compile)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use model::{
    node_local_reason, Backend, BackendKey, Compiled, EndpointSet, NamespacedName,
    NodeLocalEndpoints, RefusedEndpoint, Severity,
};

use crate::objects::{EndpointSlice, Service};
use crate::store::Store;

/// Why a referenced object cannot be used: it does not exist (yet), or it is unusable.
#[derive(Clone, Debug)]
pub struct Problem {
    pub text: String,
    /// `true`: the object does not exist (yet), a [`Severity::Missing`] diagnostic.
    pub missing: bool,
}

impl Problem {
    pub fn missing(text: impl Into<String>) -> Problem {
        Problem {
            text: text.into(),
            missing: true,
        }
    }

    pub fn invalid(text: impl Into<String>) -> Problem {
        Problem {
            text: text.into(),
            missing: false,
        }
    }

    pub fn severity(&self) -> Severity {
        if self.missing {
            Severity::Missing
        } else {
            Severity::Error
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The port of Service `service` a reference names: by `number` when it is written as one,
/// otherwise by the name `written`.
pub fn service_port<'s>(
    store: &'s Store,
    service: &NamespacedName,
    number: Option<i32>,
    written: &str,
) -> Result<&'s ServicePort, Problem> {
    let found = store
        .service(service)
        .ok_or_else(|| Problem::missing(format!("Service {service} not found")))?;
    if let Some(name) = found.external_name() {
        // Its port is a number to dial at that name, not a port of endpoints: references to
        // an ExternalName Service go through `resolve`, which knows that.
        return Err(Problem::invalid(format!(
            "Service {service} is of type ExternalName ({name}): it has no port of its own \
             endpoints"
        )));
    }
    let ports: &[ServicePort] = found
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    ports
        .iter()
        .find(|p| match number {
            Some(n) => p.port == n,
            None => p.name.as_deref() == Some(written),
        })
        .ok_or_else(|| Problem::invalid(format!("Service {service} has no port {written}")))
}

/// The port of Service `service` an Ingress backend names, read as ingress-nginx reads it: the
/// first port whose number, `targetPort` or name is the reference as written (`80`, `8080`,
/// `http`). The Ingress API means a port's own number or name; ingress-nginx also takes a
/// port's targetPort, and Ingresses written against it rely on that. `None`: no port matches.
pub fn ingress_nginx_port<'s>(
    store: &'s Store,
    service: &NamespacedName,
    written: &str,
) -> Option<&'s ServicePort> {
    let ports = store.service(service)?.spec.as_ref()?.ports.as_ref()?;
    ports
        .iter()
        .find(|p| names_port(p, written) || target_port_text(p).as_deref() == Some(written))
}

/// Whether `written` is the port's own number or name (not its targetPort).
pub fn names_port(port: &ServicePort, written: &str) -> bool {
    port.port.to_string() == written || port.name.as_deref() == Some(written)
}

/// A port's `targetPort` as written: its number or its name.
pub fn target_port_text(port: &ServicePort) -> Option<String> {
    match port.target_port.as_ref()? {
        IntOrString::Int(number) => Some(number.to_string()),
        IntOrString::String(name) => Some(name.clone()),
    }
}

/// Whether a backend reference may name a Service of type ExternalName: ingress-nginx's
/// sources follow them (unless `--disable-svc-external-name`); Gateway API leaves them to the
/// implementation and Sluice does not follow them for routes (a route would otherwise reach
/// any name its author picks, past the ReferenceGrant model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExternalNames {
    Follow,
    /// Refused, with the end of the diagnostic saying why.
    Refuse(&'static str),
}

/// Service port (by number or name) → the key of its endpoints: the port's name, which
/// EndpointSlices use for it. A Service of type ExternalName, where `external_names` allows
/// it: the key of the port dialled at its name (see [`external_name_port`]).
pub fn resolve(
    store: &Store,
    service: &NamespacedName,
    number: Option<i32>,
    written: &str,
    external_names: ExternalNames,
) -> Result<BackendKey, Problem> {
    if let Some(name) = store.service(service).and_then(Service::external_name) {
        return match external_names {
            ExternalNames::Follow => external_name_key(store, service, name, number, written),
            ExternalNames::Refuse(why) => Err(Problem::invalid(format!(
                "Service {service} is of type ExternalName ({name}): {why}"
            ))),
        };
    }
    let port = service_port(store, service, number, written)?;
    Ok(key_of(service, port))
}

/// The key of a reference to ExternalName Service `service` (its name `name`): its port of
/// that number or name when it lists one, else (it need list none) the number itself, whose
/// key is the number written out (a port name always has a letter, so the two never meet).
/// The name must be one Sluice can dial (see [`check_external_name`]).
fn external_name_key(
    store: &Store,
    service: &NamespacedName,
    name: &str,
    number: Option<i32>,
    written: &str,
) -> Result<BackendKey, Problem> {
    check_external_name(name).map_err(|why| {
        Problem::invalid(format!(
            "Service {service} is of type ExternalName: externalName {name:?} {why}"
        ))
    })?;
    let ports = store
        .service(service)
        .and_then(|s| s.spec.as_ref()?.ports.as_deref())
        .unwrap_or_default();
    let listed = ports.iter().find(|p| match number {
        Some(n) => p.port == n,
        None => p.name.as_deref() == Some(written),
    });
    let port_name = match (listed, number) {
        (Some(port), _) => port.name.clone().unwrap_or_default(),
        (None, Some(n)) if (1..=65535).contains(&n) => n.to_string(),
        (None, _) => {
            return Err(Problem::invalid(format!(
                "Service {service} (ExternalName {name}) has no port {written}"
            )))
        }
    };
    Ok(BackendKey {
        service: service.clone(),
        port_name,
    })
}

/// Whether an ExternalName can be dialled: an IP address, or a DNS-1123 subdomain (one
/// trailing dot allowed), as the API server and ingress-nginx require. `Err`: why not.
pub fn check_external_name(name: &str) -> Result<(), String> {
    if name.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let bare = name.strip_suffix('.').unwrap_or(name);
    if bare.is_empty() {
        return Err("is empty".into());
    }
    if bare.len() > 253 {
        return Err("is longer than 253 characters".into());
    }
    for label in bare.split('.') {
        let valid = (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !valid {
            return Err(format!(
                "is not a DNS-1123 subdomain (label {label:?}: 1 to 63 lowercase letters, \
                 digits or '-', starting and ending with a letter or digit)"
            ));
        }
    }
    Ok(())
}

/// The name whose addresses are `key`'s endpoints, and the port they are dialled at: an
/// ExternalName Service's (see [`external_name_port`]), or a [`BackendKey::named`]'s.
fn dialled_name<'s>(store: &'s Store, key: &'s BackendKey) -> Option<(&'s str, Option<u16>)> {
    if let Some(host) = BackendKey::named_host(&key.service) {
        return Some((host, key.port_name.parse().ok().filter(|p| *p != 0)));
    }
    let service = store.service(&key.service)?;
    let name = service.external_name()?;
    Some((name, external_name_port(service, key)))
}

/// The port dialled for `key` of an ExternalName Service: its port's numeric `targetPort`
/// (else the port itself, as ingress-nginx), or the number the key is when it lists none.
fn external_name_port(service: &Service, key: &BackendKey) -> Option<u16> {
    let ports = service.spec.as_ref()?.ports.as_deref().unwrap_or_default();
    let number = match ports
        .iter()
        .find(|p| p.name.as_deref().unwrap_or("") == key.port_name)
    {
        Some(port) => match &port.target_port {
            Some(IntOrString::Int(target)) if *target != 0 => *target,
            _ => port.port,
        },
        None => key.port_name.parse().ok()?,
    };
    u16::try_from(number).ok().filter(|n| *n != 0)
}

/// The addresses a host name stands for without asking a name server: an IP address itself,
/// `localhost` the loopback addresses (RFC 6761: never asked of one). `None`: a name to ask.
fn addresses_without_asking(name: &str) -> Option<Vec<IpAddr>> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Some(vec![ip]);
    }
    let bare = name.strip_suffix('.').unwrap_or(name);
    (bare == "localhost" || bare.ends_with(".localhost"))
        .then(|| vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()])
}

/// The addresses a host name stands for: what it is without asking (see
/// [`addresses_without_asking`]), else what the resolver last found for it (none until it has
/// answered), with what it said when that was no plain answer.
fn external_name_addresses<'s>(
    store: &'s Store,
    name: &str,
) -> (std::borrow::Cow<'s, [IpAddr]>, Option<&'s str>) {
    use std::borrow::Cow;
    if let Some(addresses) = addresses_without_asking(name) {
        return (Cow::Owned(addresses), None);
    }
    match store.resolved(name) {
        Some(resolved) => (
            Cow::Borrowed(&resolved.addresses[..]),
            resolved.problem.as_deref(),
        ),
        None => (Cow::Borrowed(&[][..]), None),
    }
}

/// The names the backends of `compiled` need resolved: the ExternalNames of their Services and
/// the hosts of [`BackendKey::named`] keys, except addresses and `localhost` (which need no name server).
pub fn names_to_resolve(store: &Store, compiled: &Compiled) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut last: Option<&NamespacedName> = None;
    for key in compiled.backends.keys() {
        if last == Some(&key.service) {
            continue;
        }
        last = Some(&key.service);
        let Some((name, _)) = dialled_name(store, key) else {
            continue;
        };
        if addresses_without_asking(name).is_none() && check_external_name(name).is_ok() {
            names.insert(name.to_owned());
        }
    }
    names
}

/// The key of `port` of `service`.
pub fn key_of(service: &NamespacedName, port: &ServicePort) -> BackendKey {
    BackendKey {
        service: service.clone(),
        port_name: port.name.clone().unwrap_or_default(),
    }
}

/// The one Backend of `key` in this configuration, made with its endpoints on first use:
/// every route and stream service to one Service port shares it, so one endpoint swap on the
/// fast path reaches all of them.
pub fn backend(
    store: &Store,
    key: &BackendKey,
    policy: NodeLocalEndpoints,
    backends: &mut BTreeMap<BackendKey, Arc<Backend>>,
) -> Arc<Backend> {
    backends
        .entry(key.clone())
        .or_insert_with(|| Arc::new(Backend::new(key.clone(), endpoints_for(store, key, policy))))
        .clone()
}

/// The endpoint fast path: re-reads the endpoints of every backend of these Services and
/// swaps the ones that changed. Returns those backends. O(those Services' slices). Uses the
/// node-local endpoint policy `compiled` was made with.
pub fn refresh_endpoints<'a>(
    compiled: &Compiled,
    store: &Store,
    services: impl IntoIterator<Item = &'a NamespacedName>,
) -> Vec<Arc<Backend>> {
    let mut changed = Vec::new();
    for service in services {
        let from = BackendKey {
            service: service.clone(),
            port_name: String::new(),
        };
        for (key, backend) in compiled.backends.range(from..) {
            if key.service != *service {
                break;
            }
            let endpoints = endpoints_for(store, key, compiled.node_local_endpoints);
            if backend.set_endpoints(endpoints) {
                changed.push(backend.clone());
            }
        }
    }
    changed
}

/// The endpoints of `key` as the Store's EndpointSlices describe them: deduplicated and sorted,
/// so equal inputs give equal sets and no-op updates are recognised. Addresses `policy` does not
/// allow go to `refused` instead.
pub fn endpoints_for(store: &Store, key: &BackendKey, policy: NodeLocalEndpoints) -> EndpointSet {
    let mut set = EndpointSet::default();
    if let Some((name, port)) = dialled_name(store, key) {
        // Its name's addresses, all ready: a name server says nothing of readiness.
        let (addresses, problem) = external_name_addresses(store, name);
        set.resolution = problem.map(Into::into);
        for &ip in port.map_or(&[][..], |_| &addresses[..]) {
            let address = SocketAddr::new(ip, port.unwrap_or_default());
            let refusal = match policy {
                NodeLocalEndpoints::Allow => None,
                NodeLocalEndpoints::Refuse => node_local_reason(ip),
            };
            match refusal {
                None => set.ready.push(address),
                Some(reason) => set.refused.push(RefusedEndpoint {
                    address,
                    source: match BackendKey::named_host(&key.service) {
                        Some(_) => format!("the addresses of {name}"),
                        None => format!("ExternalName {name} of Service {}", key.service),
                    },
                    reason,
                }),
            }
        }
    } else {
        let target_port = numeric_target_port(store, key);
        let locality = locality(store, &key.service);
        match locality {
            Some(Locality::Node(node)) => set.node = Some(Box::from(node)),
            Some(Locality::Zone(zone)) => set.zone = Some(Box::from(zone)),
            None => {}
        }
        for slice in store.endpoint_slices_of(&key.service) {
            collect_slice(
                slice,
                &key.port_name,
                target_port,
                (policy, locality),
                &mut set,
            );
        }
    }
    for list in [&mut set.ready, &mut set.terminating] {
        list.sort_unstable();
        list.dedup();
    }
    set.refused.sort_unstable();
    set.refused.dedup();
    // An address both ready (in one slice) and terminating (in another, mid-update) is ready.
    let ready = set.ready.clone();
    set.terminating.retain(|a| ready.binary_search(a).is_err());
    // Kept until the Service's slices change: no room beyond the addresses.
    set.ready.shrink_to_fit();
    set.terminating.shrink_to_fit();
    set.refused.shrink_to_fit();
    set
}

/// Topology-aware routing: which endpoints alone take `service`'s traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Locality<'s> {
    /// Those hinted for this node (`PreferSameNode`).
    Node(&'s str),
    /// Those hinted for this zone.
    Zone(&'s str),
}

impl Locality<'_> {
    fn admits(self, endpoint: &crate::objects::Endpoint) -> bool {
        let Some(hints) = &endpoint.hints else {
            return false;
        };
        match self {
            Locality::Node(node) => hints.nodes.iter().any(|name| name == node),
            Locality::Zone(zone) => hints.zones.iter().any(|name| name == zone),
        }
    }
}

/// Topology-aware routing, as kube-proxy decides it over all the Service's slices:
/// - this node, for a `PreferSameNode` Service, when every endpoint has node hints and some
///   ready endpoint is hinted for this node;
/// - else this zone, for a Service that asks for it (`PreferSameNode` included), when every
///   endpoint has zone hints (the EndpointSlice controller gives all or none) and some ready
///   endpoint is hinted for this zone;
/// - else every endpoint: where ingress-nginx, for `topology-mode: Auto`, would serve none
///   (all hinted, none for its zone), Sluice serves the others rather than answer 503.
fn locality<'s>(store: &'s Store, service: &NamespacedName) -> Option<Locality<'s>> {
    let spec = store.service(service)?.spec.as_ref()?;
    let endpoints = || {
        store
            .endpoint_slices_of(service)
            .filter(|s| s.address_type == "IPv4" || s.address_type == "IPv6")
            .flat_map(|s| &s.endpoints)
    };
    let usable = |locality: Locality<'s>, hinted: fn(&crate::objects::Hints) -> bool| {
        let all_hinted = endpoints().all(|e| e.hints.as_deref().is_some_and(hinted));
        let one_here = endpoints().any(|e| {
            let conditions = e.conditions.clone().unwrap_or_default();
            conditions.ready.unwrap_or(true)
                && !conditions.terminating.unwrap_or(false)
                && locality.admits(e)
        });
        all_hinted && one_here
    };
    if let Some(node) = store.topology_node().filter(|_| spec.prefers_same_node) {
        let here = Locality::Node(node);
        if usable(here, |h| !h.nodes.is_empty()) {
            return Some(here);
        }
    }
    let zone = store.topology_zone().filter(|_| spec.prefers_same_zone)?;
    let here = Locality::Zone(zone);
    usable(here, |h| !h.zones.is_empty()).then_some(here)
}

/// The Service port's `targetPort` when it is a number (omitted, it is the port itself): where
/// the endpoints of a slice that does not list the port by name listen.
fn numeric_target_port(store: &Store, key: &BackendKey) -> Option<u16> {
    let ports = store.service(&key.service)?.spec.as_ref()?.ports.as_ref()?;
    let port = ports
        .iter()
        .find(|p| p.name.as_deref().unwrap_or("") == key.port_name)?;
    let number = match &port.target_port {
        None => port.port,
        Some(IntOrString::Int(number)) => *number,
        Some(IntOrString::String(_)) => return None,
    };
    u16::try_from(number).ok().filter(|n| *n != 0)
}

fn collect_slice(
    slice: &EndpointSlice,
    port_name: &str,
    target_port: Option<u16>,
    (policy, locality): (NodeLocalEndpoints, Option<Locality>),
    set: &mut EndpointSet,
) {
    // FQDN slices name hosts, not addresses; Sluice does not resolve DNS on the data path.
    if slice.address_type != "IPv4" && slice.address_type != "IPv6" {
        return;
    }
    // The slice's port of the Service port's name. A slice without one (no ports at all, or
    // other names: hand-made slices of a selector-less Service often leave the name out) gets
    // the Service port's numeric targetPort, as ingress-nginx does; kube-proxy would drop it.
    let named = (slice.ports.iter().flatten())
        .find(|p| p.name.as_deref().unwrap_or("") == port_name)
        .map(|p| {
            p.port
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0)
        });
    let Some(port) = named.unwrap_or(target_port) else {
        return;
    };
    for endpoint in &slice.endpoints {
        if locality.is_some_and(|here| !here.admits(endpoint)) {
            continue;
        }
        let conditions = endpoint.conditions.clone().unwrap_or_default();
        // The API says: nil ready or serving means true, nil terminating means false.
        let ready = conditions.ready.unwrap_or(true);
        let serving = conditions.serving.unwrap_or(true);
        let terminating = conditions.terminating.unwrap_or(false);
        let list = if ready && !terminating {
            &mut set.ready
        } else if serving && terminating {
            &mut set.terminating
        } else {
            continue;
        };
        for &ip in &endpoint.addresses {
            let refusal = match policy {
                NodeLocalEndpoints::Allow => None,
                NodeLocalEndpoints::Refuse => node_local_reason(ip),
            };
            match refusal {
                None => list.push(SocketAddr::new(ip, port)),
                Some(reason) => set.refused.push(RefusedEndpoint {
                    address: SocketAddr::new(ip, port),
                    source: format!(
                        "EndpointSlice {}/{}",
                        slice.metadata.namespace.as_deref().unwrap_or(""),
                        slice.metadata.name.as_deref().unwrap_or("")
                    ),
                    reason,
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::parse_documents;

    fn store(text: &str) -> Store {
        let mut store = Store::default();
        store.replace_all(parse_documents("t", text).unwrap().objects);
        store
    }

    fn key(port_name: &str) -> BackendKey {
        BackendKey {
            service: NamespacedName::new("default", "web"),
            port_name: port_name.into(),
        }
    }

    fn endpoints_for_allowing(store: &Store, key: &BackendKey) -> EndpointSet {
        endpoints_for(store, key, NodeLocalEndpoints::Allow)
    }

    #[test]
    fn refused_addresses_are_kept_apart_and_the_others_still_serve() {
        let store = store(
            r#"
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-a, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- {addresses: ["10.0.0.1", "127.0.0.1"]}
- {addresses: ["169.254.169.254"], conditions: {ready: false, serving: true, terminating: true}}
- {addresses: ["127.0.0.1"]}
"#,
        );
        let allowed = endpoints_for(&store, &key("http"), NodeLocalEndpoints::Allow);
        assert_eq!(allowed.ready.len(), 2);
        assert_eq!(allowed.terminating.len(), 1);
        assert!(allowed.refused.is_empty());

        let refused = endpoints_for(&store, &key("http"), NodeLocalEndpoints::Refuse);
        assert_eq!(refused.ready, ["10.0.0.1:8080".parse().unwrap()]);
        assert!(refused.terminating.is_empty());
        let listed: Vec<(String, &str)> = refused
            .refused
            .iter()
            .map(|r| (r.address.to_string(), r.source.as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                ("127.0.0.1:8080".to_owned(), "EndpointSlice default/web-a"),
                (
                    "169.254.169.254:8080".to_owned(),
                    "EndpointSlice default/web-a"
                ),
            ]
        );
        assert!(refused.refused[0].reason.contains("loopback"));
        assert!(refused.refused[1].reason.contains("metadata"));
    }

    #[test]
    fn a_slice_without_the_port_by_name_uses_the_services_numeric_target_port() {
        let store = store(
            r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: admin, port: 81, targetPort: admin}
  - {name: plain, port: 82}
  - {name: zero, port: 83, targetPort: 8083}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-no-ports, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: ["10.0.0.1"]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-unnamed, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 9999}]
endpoints: [{addresses: ["10.0.0.2"]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-named, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8443}, {name: zero, port: 0}]
endpoints: [{addresses: ["10.0.0.3"]}]
"#,
        );
        let ready = |port: &str| -> Vec<String> {
            (endpoints_for_allowing(&store, &key(port)).ready.iter())
                .map(|a| a.to_string())
                .collect()
        };
        // Named in the slice: its port; not named there: the targetPort, not the unnamed 9999.
        assert_eq!(
            ready("http"),
            ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8443"]
        );
        // A named targetPort says nothing about the number: only slices naming the port count.
        assert!(ready("admin").is_empty());
        // No targetPort (a manifest may leave it out): the port itself.
        assert_eq!(
            ready("plain"),
            ["10.0.0.1:82", "10.0.0.2:82", "10.0.0.3:82"]
        );
        // A slice that names the port with an unusable number does not fall back.
        assert_eq!(ready("zero"), ["10.0.0.1:8083", "10.0.0.2:8083"]);
    }

    #[test]
    fn external_names_must_be_addresses_or_dns_1123_subdomains() {
        for good in [
            "api.example.com",
            "api.example.com.",
            "a",
            "x-1.y",
            "192.0.2.1",
            "2001:db8::1",
        ] {
            assert_eq!(check_external_name(good), Ok(()), "{good}");
        }
        let long = format!("{}.com", vec!["a".repeat(63); 4].join("."));
        for (bad, says) in [
            ("", "empty"),
            (".", "empty"),
            ("Api.example.com", "label \"Api\""),
            ("a_b.example.com", "label \"a_b\""),
            ("a..b", "label \"\""),
            ("-a.b", "label \"-a\""),
            ("a b", "label \"a b\""),
            (&long, "longer than 253"),
        ] {
            let error = check_external_name(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn conditions_decide_which_endpoints_take_traffic() {
        let store = store(
            r#"
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-a, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: admin, port: 9000}]
endpoints:
- {addresses: ["10.0.0.3"]}
- {addresses: ["10.0.0.1"], conditions: {ready: true}}
- {addresses: ["10.0.0.2"], conditions: {ready: false, serving: true, terminating: true}}
- {addresses: ["10.0.0.4"], conditions: {ready: false, serving: false, terminating: true}}
- {addresses: ["10.0.0.5"], conditions: {ready: false}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-b, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: ["10.0.0.1"]}]
"#,
        );
        let set = endpoints_for_allowing(&store, &key("http"));
        let addrs =
            |v: &[&str]| -> Vec<SocketAddr> { v.iter().map(|a| a.parse().unwrap()).collect() };
        assert_eq!(set.ready, addrs(&["10.0.0.1:8080", "10.0.0.3:8080"]));
        assert_eq!(set.terminating, addrs(&["10.0.0.2:8080"]));
        assert_eq!(set.active(), set.ready.as_slice());
        assert_eq!(endpoints_for_allowing(&store, &key("admin")).ready.len(), 2);
        assert_eq!(
            endpoints_for_allowing(&store, &key("other")),
            EndpointSet::default()
        );
    }

    /// `--enable-topology-aware-routing`: a Service that asks for it gets the endpoints hinted
    /// for this replica's zone, while every endpoint is hinted and one ready one is for it.
    #[test]
    fn a_zone_aware_service_keeps_its_traffic_in_the_replicas_zone() {
        let yaml = |service_extra: &str, hints_b: &str, ready_a: bool| {
            format!(
                r#"
apiVersion: v1
kind: Service
metadata: {{name: web, annotations: {{{service_extra}}}}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints:
- {{addresses: ["10.0.0.1"], conditions: {{ready: {ready_a}}}, hints: {{forZones: [{{name: zone-a}}]}}}}
- {{addresses: ["10.0.0.2"], hints: {hints_b}}}
"#
            )
        };
        let zoned = |text: &str, zone: Option<&str>| {
            let mut store = store(text);
            store.set_topology_zone(zone);
            endpoints_for_allowing(&store, &key("http"))
        };
        let addrs =
            |v: &[&str]| -> Vec<SocketAddr> { v.iter().map(|a| a.parse().unwrap()).collect() };
        let auto = "service.kubernetes.io/topology-mode: auto";
        let hinted_b = "{forZones: [{name: zone-b}]}";
        let here = zoned(&yaml(auto, hinted_b, true), Some("zone-a"));
        assert_eq!(here.ready, addrs(&["10.0.0.1:8080"]));
        assert_eq!(here.zone.as_deref(), Some("zone-a"));
        // The same without a zone, or for a Service that does not ask: every zone's.
        let all = addrs(&["10.0.0.1:8080", "10.0.0.2:8080"]);
        assert_eq!(zoned(&yaml(auto, hinted_b, true), None).ready, all);
        assert_eq!(zoned(&yaml("", hinted_b, true), Some("zone-a")).ready, all);
        // An endpoint without hints: hints are not used (the EndpointSlice controller gives
        // all or none).
        let unhinted = zoned(&yaml(auto, "{}", true), Some("zone-a"));
        assert_eq!((unhinted.ready, unhinted.zone), (all.clone(), None));
        // No ready endpoint for this zone: every zone's serve (ingress-nginx: none).
        let elsewhere = zoned(&yaml(auto, hinted_b, false), Some("zone-a"));
        assert_eq!(elsewhere.ready, addrs(&["10.0.0.2:8080"]));
        // trafficDistribution: PreferClose asks for it too.
        let prefer_close = yaml("", hinted_b, true).replace(
            "spec: {ports: [{name: http, port: 80}]}",
            "spec: {ports: [{name: http, port: 80}], trafficDistribution: PreferClose}",
        );
        assert_eq!(
            zoned(&prefer_close, Some("zone-b")).ready,
            addrs(&["10.0.0.2:8080"])
        );
        let same_zone = prefer_close.replace("PreferClose", "PreferSameZone");
        assert_eq!(
            zoned(&same_zone, Some("zone-b")).ready,
            addrs(&["10.0.0.2:8080"])
        );
        // PreferSameNode without node hints: its zone's.
        let same_node = prefer_close.replace("PreferClose", "PreferSameNode");
        assert_eq!(
            zoned(&same_node, Some("zone-b")).ready,
            addrs(&["10.0.0.2:8080"])
        );
    }

    /// `trafficDistribution: PreferSameNode`: the endpoints hinted for this replica's node,
    /// else (none ready there, or not every endpoint hinted) its zone's, else every one.
    #[test]
    fn a_prefer_same_node_service_keeps_its_traffic_on_the_replicas_node() {
        let yaml = |ready_a: bool, hints_b: &str| {
            format!(
                r#"
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec: {{ports: [{{name: http, port: 80}}], trafficDistribution: PreferSameNode}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: web-1, labels: {{kubernetes.io/service-name: web}}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints:
- {{addresses: ["10.0.0.1"], conditions: {{ready: {ready_a}}}, hints: {{forNodes: [{{name: node-a}}], forZones: [{{name: zone-1}}]}}}}
- {{addresses: ["10.0.0.2"], hints: {hints_b}}}
- {{addresses: ["10.0.0.3"], hints: {{forNodes: [{{name: node-c}}], forZones: [{{name: zone-2}}]}}}}
"#
            )
        };
        let placed = |text: &str, node: Option<&str>, zone: Option<&str>| {
            let mut store = store(text);
            store.set_topology_node(node);
            store.set_topology_zone(zone);
            endpoints_for_allowing(&store, &key("http"))
        };
        let addrs =
            |v: &[&str]| -> Vec<SocketAddr> { v.iter().map(|a| a.parse().unwrap()).collect() };
        let hinted_b = "{forNodes: [{name: node-b}], forZones: [{name: zone-1}]}";
        let here = placed(&yaml(true, hinted_b), Some("node-a"), Some("zone-1"));
        assert_eq!(here.ready, addrs(&["10.0.0.1:8080"]));
        assert_eq!((here.node.as_deref(), here.zone), (Some("node-a"), None));
        // Its node's endpoint not ready: the zone's ready ones.
        let zone = placed(&yaml(false, hinted_b), Some("node-a"), Some("zone-1"));
        assert_eq!(zone.ready, addrs(&["10.0.0.2:8080"]));
        assert_eq!((zone.node, zone.zone.as_deref()), (None, Some("zone-1")));
        // An endpoint without node hints: node hints are not used; zone hints are.
        let zone_hinted_b = "{forZones: [{name: zone-2}]}";
        let zoned = placed(&yaml(true, zone_hinted_b), Some("node-a"), Some("zone-2"));
        assert_eq!(zoned.ready, addrs(&["10.0.0.2:8080", "10.0.0.3:8080"]));
        // No node known: the zone's; neither known: every endpoint.
        let no_node = placed(&yaml(true, hinted_b), None, Some("zone-2"));
        assert_eq!(no_node.ready, addrs(&["10.0.0.3:8080"]));
        let all = addrs(&["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]);
        assert_eq!(placed(&yaml(true, hinted_b), None, None).ready, all);
    }
}
