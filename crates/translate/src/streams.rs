//! TCP and UDP services: ingress-nginx's `--tcp-services-configmap` and
//! `--udp-services-configmap`, whose entries open a port each and forward its TCP connections
//! (UDP datagrams) to a Service's endpoints.
//!
//! ```text
//!  ConfigMap data  "9000": "app/db:5432:PROXY:PROXY"
//!       │  parse_entry: port number, NAMESPACE/NAME, Service port (number or name),
//!       │               3rd part PROXY = decode from the client, 4th = send to the upstream
//!       ▼  resolve: Service exists, has that port with the protocol (TCP, UDP), not a
//!          listener's port
//!  Compiled.tcp_services / udp_services: listen port ─▶ StreamService { backend (EndpointSlices,
//!                                         the same Backend as HTTP routes: swapped on the fast path),
//!                                         PROXY flags }
//!  every bad entry ─▶ Diagnostic on the ConfigMap naming the key; the other entries serve
//! ```
//! The syntax and its checks follow ingress-nginx's `getStreamServices`
//! (internal/ingress/controller/controller.go), for both protocols; PROXY parts are TCP only
//! (ingress-nginx ignores them on UDP entries; here that is a notice).

use std::collections::BTreeMap;
use std::sync::Arc;

use model::streams::StreamProtocol;
use model::{
    Backend, BackendKey, Diagnostic, Kind, NamespacedName, NodeLocalEndpoints, ObjectRef, Severity,
    StreamService,
};

use crate::backends::{self, ExternalNames, Problem};
use crate::store::Store;

/// An entry's text, checked: what ingress-nginx's parser accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    port: u16,
    service: NamespacedName,
    service_port: String,
    decode: bool,
    encode: bool,
    /// Parts ingress-nginx reads and ignores (not `PROXY`, or past the fourth).
    ignored: Vec<String>,
}

/// Reads the TCP (UDP) services ConfigMap `name`: each good entry becomes a [`StreamService`]
/// (its backend added to `backends`, shared with HTTP routes to the same Service port), each
/// bad one a diagnostic on the ConfigMap. `reserved`: the ports Sluice's own listeners use,
/// and which (refused for both protocols, as ingress-nginx refuses them).
pub fn stream_services(
    protocol: StreamProtocol,
    store: &Store,
    name: &NamespacedName,
    reserved: &BTreeMap<u16, String>,
    (node_local, external_names): (NodeLocalEndpoints, ExternalNames),
    backends: &mut BTreeMap<BackendKey, Arc<Backend>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> BTreeMap<u16, Arc<StreamService>> {
    let object = ObjectRef::new(Kind::ConfigMap, &*name.namespace, &*name.name);
    let mut out = BTreeMap::new();
    let kind = protocol.name();
    let Some(config_map) = store.config_map(name) else {
        diagnostics.push(Diagnostic::with_severity(
            Severity::Missing,
            object,
            format!(
                "{}: no such ConfigMap; no {kind} service ports are open until it exists",
                protocol.flag()
            ),
        ));
        return out;
    };
    // Keys are visited in order, so of two keys naming one port ("080", "80") the first wins
    // (ingress-nginx takes them in Go's random map order, and nginx then refuses the twice
    // listened port).
    let mut claimed: BTreeMap<u16, String> = BTreeMap::new();
    for (key, value) in config_map.data.iter().flatten() {
        let mut problem = |severity: Severity, reason: String| {
            diagnostics.push(Diagnostic::with_severity(
                severity,
                object.clone(),
                format!("data.{key}: {reason}"),
            ))
        };
        let entry = match parse_entry(key, value, kind) {
            Ok(entry) => entry,
            Err(why) => {
                problem(Severity::Error, format!("{why}; this port is not opened"));
                continue;
            }
        };
        if let Some(listener) = reserved.get(&entry.port) {
            problem(
                Severity::Error,
                format!(
                    "port {} is {listener}'s; it cannot be a {kind} service (ingress-nginx \
                     reserves its own ports the same way)",
                    entry.port
                ),
            );
            continue;
        }
        if let Some(first) = claimed.get(&entry.port) {
            problem(
                Severity::Error,
                format!(
                    "port {} is already the {kind} service of key {first:?}; this key is ignored",
                    entry.port
                ),
            );
            continue;
        }
        for part in &entry.ignored {
            problem(
                Severity::Notice,
                format!(
                    "{part:?} is ignored (ingress-nginx reads only PROXY in the third and fourth \
                     parts: <namespace>/<service>:<port>[:PROXY][:PROXY])"
                ),
            );
        }
        let (decode, encode) = match protocol {
            StreamProtocol::Tcp => (entry.decode, entry.encode),
            StreamProtocol::Udp => {
                if entry.decode || entry.encode {
                    problem(
                        Severity::Notice,
                        "PROXY is ignored: the PROXY protocol is for TCP services only (as in \
                         ingress-nginx)"
                            .to_owned(),
                    );
                }
                (false, false)
            }
        };
        let port = (entry.service_port.as_str(), kind);
        let key_found = match resolve_port(store, &entry.service, port, external_names) {
            Ok(key) => key,
            Err(why) => {
                problem(why.severity(), format!("{why}; this port is not opened"));
                continue;
            }
        };
        claimed.insert(entry.port, key.clone());
        let backend = crate::backends::backend(store, &key_found, node_local, backends);
        let upstream_name = format!(
            "{}-{}-{}-{}",
            protocol.prefix(),
            entry.service.namespace,
            entry.service.name,
            entry.service_port
        );
        out.insert(
            entry.port,
            Arc::new(StreamService {
                port: entry.port,
                service: entry.service,
                service_port: entry.service_port,
                backend,
                decode_proxy_protocol: decode,
                encode_proxy_protocol: encode,
                upstream_name,
                route: None,
            }),
        );
    }
    out
}

/// `"<port>": "<namespace>/<service>:<port>[:PROXY][:PROXY]"`, as ingress-nginx reads it:
/// the key a decimal port; the value split at `:`, at least two parts; `PROXY` (any case) as
/// the third part decodes the PROXY protocol, as the fourth (of exactly four) encodes it.
fn parse_entry(key: &str, value: &str, kind: &str) -> Result<Entry, String> {
    let port = parse_port(key)
        .ok_or_else(|| format!("{key:?} is not a port number (1 to 65535) for a {kind} service"))?;
    let parts: Vec<&str> = value.split(':').collect();
    if parts.len() < 2 {
        return Err(format!(
            "{value:?} is not a Service reference: expected <namespace>/<service>:<port>[:PROXY][:PROXY]"
        ));
    }
    let service = match parts[0].split('/').collect::<Vec<_>>().as_slice() {
        [namespace, name] if !namespace.is_empty() && !name.is_empty() => {
            NamespacedName::new(*namespace, *name)
        }
        _ => {
            return Err(format!(
                "{:?} is not <namespace>/<service> (in {value:?})",
                parts[0]
            ))
        }
    };
    if parts[1].is_empty() {
        return Err(format!("{value:?} names no Service port"));
    }
    let is_proxy = |part: &str| part.eq_ignore_ascii_case("PROXY");
    let decode = parts.len() >= 3 && is_proxy(parts[2]);
    let encode = parts.len() == 4 && is_proxy(parts[3]);
    let mut ignored = Vec::new();
    for (at, part) in parts.iter().enumerate().skip(2) {
        let read = (at == 2 && decode) || (at == 3 && encode);
        // An empty third part (`svc:80::PROXY`) only makes room for the fourth.
        let placeholder = part.is_empty() && at < 4;
        if !(read || placeholder) {
            ignored.push((*part).to_owned());
        }
    }
    Ok(Entry {
        port,
        service,
        service_port: parts[1].to_owned(),
        decode,
        encode,
        ignored,
    })
}

/// Go's `strconv.Atoi` as ingress-nginx uses it on the key (an optional sign, decimal digits),
/// and then a port nginx can listen on.
fn parse_port(key: &str) -> Option<u16> {
    let digits = key.strip_prefix('+').unwrap_or(key);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u16>().ok().filter(|port| *port > 0)
}

/// The key of the Service port an entry names (by number, else by name), which must carry
/// `kind` (TCP or UDP); or of the port dialled at an ExternalName Service's name.
fn resolve_port(
    store: &Store,
    service: &NamespacedName,
    (written, kind): (&str, &str),
    external_names: ExternalNames,
) -> Result<BackendKey, Problem> {
    if store
        .service(service)
        .and_then(crate::objects::Service::external_name)
        .is_some()
    {
        // A name to dial at the port written (ingress-nginx's stream balancer resolves these
        // too); its ports, if it lists any, say nothing the name's host must honour.
        return backends::resolve(
            store,
            service,
            written.parse().ok(),
            written,
            external_names,
        );
    }
    let port = backends::service_port(store, service, written.parse().ok(), written)?;
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    if protocol != kind {
        return Err(Problem::invalid(format!(
            "Service {service} port {written} is {protocol}, not {kind}"
        )));
    }
    Ok(backends::key_of(service, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::parse_documents;

    fn entry(key: &str, value: &str) -> Result<Entry, String> {
        parse_entry(key, value, "TCP")
    }

    #[test]
    fn entries_read_as_ingress_nginx_reads_them() {
        let plain = entry("9000", "app/db:5432").unwrap();
        assert_eq!(plain.port, 9000);
        assert_eq!(plain.service, NamespacedName::new("app", "db"));
        assert_eq!(plain.service_port, "5432");
        assert!(!plain.decode && !plain.encode && plain.ignored.is_empty());

        let both = entry("22", "app/git:ssh:PROXY:proxy").unwrap();
        assert!(both.decode && both.encode);
        assert_eq!(both.service_port, "ssh");
        // An empty third part: only the upstream gets the header.
        let encode_only = entry("22", "app/git:ssh::PROXY").unwrap();
        assert!(!encode_only.decode && encode_only.encode);
        assert!(encode_only.ignored.is_empty());
        // A fifth part turns the fourth off (ingress-nginx: encode only with exactly four).
        let five = entry("22", "app/git:ssh:PROXY:PROXY:x").unwrap();
        assert!(five.decode && !five.encode);
        assert_eq!(five.ignored, ["PROXY", "x"]);
        let other = entry("22", "app/git:ssh:TLS").unwrap();
        assert!(!other.decode);
        assert_eq!(other.ignored, ["TLS"]);
        // Go's Atoi takes a sign and leading zeros.
        assert_eq!(entry("+080", "a/b:1").unwrap().port, 80);
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        for (key, value, says) in [
            ("http", "a/b:80", "not a port number"),
            ("0", "a/b:80", "not a port number"),
            ("65536", "a/b:80", "not a port number"),
            ("-1", "a/b:80", "not a port number"),
            ("9000", "a/b", "not a Service reference"),
            ("9000", "b:80", "not <namespace>/<service>"),
            ("9000", "a/b/c:80", "not <namespace>/<service>"),
            ("9000", "a/b:", "names no Service port"),
        ] {
            let error = entry(key, value).unwrap_err();
            assert!(error.contains(says), "{key}: {value}: {error}");
        }
    }

    const OBJECTS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: db, namespace: app}
spec:
  ports:
  - {name: pg, port: 5432, targetPort: 5432}
  - {name: dns, port: 53, protocol: UDP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: app, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: pg, port: 15432}]
endpoints: [{addresses: [10.0.0.7]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tcp, namespace: ingress}
data:
  "9000": app/db:5432
  "09000": app/db:pg
  "9001": app/db:pg:PROXY:PROXY
  "80": app/db:5432
  "53": app/db:dns
  "9002": app/missing:1
  "9003": app/db:6543
  "x": app/db:5432
"#;

    #[test]
    fn good_entries_serve_and_each_bad_one_is_a_diagnostic_naming_its_key() {
        let mut store = Store::default();
        store.replace_all(parse_documents("t.yaml", OBJECTS).unwrap().objects);
        let reserved = BTreeMap::from([(80, "the HTTP listener (--http-listen)".to_owned())]);
        let mut backends = BTreeMap::new();
        let mut diagnostics = Vec::new();
        let services = stream_services(
            StreamProtocol::Tcp,
            &store,
            &NamespacedName::new("ingress", "tcp"),
            &reserved,
            (NodeLocalEndpoints::Allow, ExternalNames::Follow),
            &mut backends,
            &mut diagnostics,
        );
        assert_eq!(services.keys().copied().collect::<Vec<_>>(), [9000, 9001]);
        let db = &services[&9000];
        // "09000" sorts first, so it holds port 9000 and "9000" is the duplicate.
        assert_eq!(db.upstream_name, "tcp-app-db-pg");
        assert_eq!(
            db.backend.endpoints().ready,
            ["10.0.0.7:15432".parse().unwrap()]
        );
        // Both ports share the one backend of the Service port (the endpoint fast path).
        assert!(Arc::ptr_eq(&db.backend, &services[&9001].backend));
        assert_eq!(backends.len(), 1);
        assert!(services[&9001].decode_proxy_protocol && services[&9001].encode_proxy_protocol);

        let text: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
        let expect = [
            ("data.9000:", "already the TCP service of key \"09000\""),
            ("data.80:", "the HTTP listener"),
            ("data.53:", "is UDP, not TCP"),
            ("data.9002:", "Service app/missing not found"),
            ("data.9003:", "has no port 6543"),
            ("data.x:", "not a port number"),
        ];
        for (key, says) in expect {
            assert!(
                text.iter().any(|d| d.contains(key) && d.contains(says)),
                "{key} {says}: {text:#?}"
            );
        }
        assert_eq!(text.len(), expect.len(), "{text:#?}");
        assert!(text.iter().all(|d| d.starts_with("ConfigMap ingress/tcp")));
    }

    #[test]
    fn entries_follow_external_name_services_unless_refused() {
        let text = r#"
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: app}
spec: {type: ExternalName, externalName: 192.0.2.53}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: udp, namespace: ingress}
data: {"53": "app/dns:5353"}
"#;
        let mut store = Store::default();
        store.replace_all(parse_documents("t.yaml", text).unwrap().objects);
        for (external_names, served) in [
            (ExternalNames::Follow, true),
            (ExternalNames::Refuse("refused here"), false),
        ] {
            let mut diagnostics = Vec::new();
            let services = stream_services(
                StreamProtocol::Udp,
                &store,
                &NamespacedName::new("ingress", "udp"),
                &BTreeMap::new(),
                (NodeLocalEndpoints::Allow, external_names),
                &mut BTreeMap::new(),
                &mut diagnostics,
            );
            if served {
                assert!(diagnostics.is_empty(), "{diagnostics:?}");
                // The address, at the port the entry names (the Service lists none).
                assert_eq!(
                    services[&53].backend.endpoints().ready,
                    ["192.0.2.53:5353".parse().unwrap()]
                );
            } else {
                assert!(services.is_empty());
                assert!(diagnostics[0].to_string().contains("refused here"));
            }
        }
    }

    #[test]
    fn a_missing_config_map_is_missing_and_udp_entries_need_udp_ports() {
        let mut store = Store::default();
        store.replace_all(parse_documents("t.yaml", OBJECTS).unwrap().objects);
        let mut diagnostics = Vec::new();
        let services = stream_services(
            StreamProtocol::Tcp,
            &store,
            &NamespacedName::new("ingress", "nope"),
            &BTreeMap::new(),
            (NodeLocalEndpoints::Allow, ExternalNames::Follow),
            &mut BTreeMap::new(),
            &mut diagnostics,
        );
        assert!(services.is_empty());
        assert_eq!(diagnostics[0].severity, Severity::Missing);
        diagnostics.clear();
        // The same entries as UDP services: only the UDP port serves; PROXY is a notice.
        let services = stream_services(
            StreamProtocol::Udp,
            &store,
            &NamespacedName::new("ingress", "tcp"),
            &BTreeMap::new(),
            (NodeLocalEndpoints::Allow, ExternalNames::Follow),
            &mut BTreeMap::new(),
            &mut diagnostics,
        );
        assert_eq!(services.keys().copied().collect::<Vec<_>>(), [53]);
        assert_eq!(services[&53].upstream_name, "udp-app-db-dns");
        assert!(!services[&53].decode_proxy_protocol);
        let text: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|d| d.contains("data.9000:") && d.contains("is TCP, not UDP")),
            "{text:#?}"
        );
        assert!(
            text.iter()
                .any(|d| d.contains("data.9001:") && d.contains("PROXY is ignored")),
            "{text:#?}"
        );
    }
}
