//! Parsers of what reaches the upstream: body limits, timeouts and retries, the protocol
//! spoken, upstream TLS, consistent hashing, the Host sent.

use std::sync::Arc;

use http::HeaderValue;

use model::policy::{
    ConnectionHeader, HashBy, ProxyProtocolVersion, RoutePolicy, TlsVersions, UpstreamProtocol,
};
use model::server_tls::{CipherSuites, HostCiphers};
use model::settings::NextUpstream;
use model::upstream_tls::ProtocolWords;
use model::LoadBalance;
use model::Severity;

use super::parsed::{BackendProtocol, ProxySsl};
use super::reader::Reader;

impl Reader<'_> {
    pub(super) fn body(&mut self, policy: &mut RoutePolicy) {
        if let Some(size) = self.size("proxy-body-size") {
            policy.body.max_size = size;
        }
        if let Some(value) = self.get("proxy-request-buffering") {
            match value {
                "on" => policy.body.request_buffering = true,
                "off" => policy.body.request_buffering = false,
                _ => self.invalid("proxy-request-buffering", value, "on or off"),
            }
        }
        if let Some(size) = self.size("client-body-buffer-size") {
            match usize::try_from(size) {
                Ok(size) if size > 0 => policy.body.buffer_size = size,
                _ => {
                    let value = self.get("client-body-buffer-size").unwrap_or_default();
                    self.invalid(
                        "client-body-buffer-size",
                        value,
                        "a size of at least 1 byte",
                    );
                }
            }
        }
    }

    pub(super) fn upstream(&mut self, policy: &mut RoutePolicy) {
        let upstream = &mut policy.upstream;
        if let Some(d) = self.duration("proxy-connect-timeout") {
            upstream.connect_timeout = d;
        }
        if let Some(d) = self.duration("proxy-send-timeout") {
            upstream.send_timeout = d;
        }
        if let Some(d) = self.duration("proxy-read-timeout") {
            upstream.read_timeout = d;
        }
        if let Some(tries) = self.number("proxy-next-upstream-tries") {
            upstream.tries = tries;
        }
        if let Some(d) = self.duration("proxy-next-upstream-timeout") {
            upstream.next_upstream_timeout = d;
        }
        if let Some(value) = self.get("proxy-next-upstream") {
            match NextUpstream::parse(value) {
                Ok(mut conditions) => {
                    // ingress-nginx appends the ConfigMap's retry-non-idempotent to each.
                    conditions.non_idempotent |= self.settings.retry_non_idempotent;
                    upstream.next_upstream = conditions;
                }
                Err(why) => self.invalid("proxy-next-upstream", value, &why),
            }
        }
    }

    /// `backend-protocol`, upper-cased as ingress-nginx reads it. A protocol Sluice cannot
    /// speak refuses the routes (503): HTTP sent to a FastCGI or AJP server fails anyway,
    /// only later, less clearly, and possibly after the request had effects.
    pub(super) fn backend_protocol(&mut self, policy: &mut RoutePolicy) -> Option<BackendProtocol> {
        let value = self.get("backend-protocol")?;
        let key = self.key("backend-protocol");
        let protocol = value.to_ascii_uppercase();
        let (protocol, tls) = match protocol.as_str() {
            "HTTP" => (UpstreamProtocol::Http1, false),
            "HTTPS" => (UpstreamProtocol::Http1, true),
            "GRPC" => (UpstreamProtocol::Grpc, false),
            "GRPCS" => (UpstreamProtocol::Grpc, true),
            "AUTO_HTTP" => {
                self.diagnose(
                    Severity::Unsupported,
                    format!("annotation {key}: AUTO_HTTP (the client's scheme towards the upstream) is not supported; HTTP is used"),
                );
                (UpstreamProtocol::Http1, false)
            }
            "FCGI" | "AJP" => {
                self.diagnose(
                    Severity::Unsupported,
                    format!("annotation {key}: {protocol}: Sluice speaks HTTP to upstreams; the Ingress's routes answer 503 rather than send HTTP to such a server"),
                );
                policy.denied = Some(format!("{key} {protocol} is not supported"));
                return None;
            }
            _ => {
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: invalid value {value:?}: expected HTTP, HTTPS, AUTO_HTTP, GRPC, GRPCS, FCGI or AJP; HTTP applies (as in ingress-nginx)"),
                );
                (UpstreamProtocol::Http1, false)
            }
        };
        Some(BackendProtocol { protocol, tls })
    }

    /// `sluice.dev/ssl-passthrough-proxy-protocol`: `v1`, `v2` or `off` (any case).
    pub(super) fn passthrough_proxy_protocol(
        &mut self,
        ssl_passthrough: bool,
    ) -> Option<ProxyProtocolVersion> {
        const NAME: &str = "ssl-passthrough-proxy-protocol";
        let value = self.get(NAME)?;
        let version = match value.to_ascii_lowercase().as_str() {
            "v1" => ProxyProtocolVersion::V1,
            "v2" => ProxyProtocolVersion::V2,
            "off" => return None,
            _ => {
                self.invalid(NAME, value, "v1, v2 or off");
                return None;
            }
        };
        if !ssl_passthrough {
            let key = self.key(NAME);
            self.diagnose(
                Severity::Notice,
                format!("annotation {key}: has no effect without the ssl-passthrough annotation (it is for passed-through TLS connections only)"),
            );
            return None;
        }
        Some(version)
    }

    pub(super) fn on_off(&mut self, name: &str) -> Option<bool> {
        match self.get(name)? {
            "on" => Some(true),
            "off" => Some(false),
            value => {
                self.invalid(name, value, "on or off");
                None
            }
        }
    }

    /// The `proxy-ssl-*` annotations, with ingress-nginx's defaults and validation.
    pub(super) fn proxy_ssl(&mut self) -> ProxySsl {
        const OTHERS: [&str; 6] = [
            "proxy-ssl-verify",
            "proxy-ssl-verify-depth",
            "proxy-ssl-name",
            "proxy-ssl-server-name",
            "proxy-ssl-protocols",
            "proxy-ssl-ciphers",
        ];
        let mut ssl = ProxySsl::default();
        let Some(secret) = self.get("proxy-ssl-secret") else {
            self.no_effect_without(&OTHERS, "proxy-ssl-secret");
            return ssl;
        };
        ssl.secret = Some(secret.to_owned());
        if let Some(on) = self.on_off("proxy-ssl-verify") {
            ssl.verify = on;
        }
        if let Some(value) = self.get("proxy-ssl-verify-depth") {
            match value.parse::<u32>() {
                // ingress-nginx: 0 means the default.
                Ok(0) => {}
                Ok(depth) => ssl.verify_depth = depth,
                Err(_) => self.invalid("proxy-ssl-verify-depth", value, "a whole number"),
            }
        }
        if let Some(name) = self.get("proxy-ssl-name") {
            let valid = !name.contains('$')
                && rustls::pki_types::ServerName::try_from(name.to_ascii_lowercase()).is_ok();
            if valid {
                ssl.name = Some(name.to_ascii_lowercase());
            } else {
                self.invalid("proxy-ssl-name", name, "a DNS name or an IP address");
            }
        }
        if let Some(on) = self.on_off("proxy-ssl-server-name") {
            ssl.server_name = on;
        }
        if let Some(value) = self.get("proxy-ssl-protocols") {
            if let Some(versions) = self.tls_versions(value) {
                ssl.versions = versions;
            }
        }
        if let Some(value) = self.get("proxy-ssl-ciphers") {
            let valid = value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+:_-!".contains(&b));
            if !valid {
                self.invalid("proxy-ssl-ciphers", value, "an OpenSSL cipher list");
            } else if !value.is_empty() && value != "DEFAULT" {
                let key = self.key("proxy-ssl-ciphers");
                self.diagnose(
                    Severity::Difference,
                    format!("annotation {key}: cipher lists are not supported; rustls's cipher suites apply (AES-GCM and ChaCha20-Poly1305 with forward secrecy)"),
                );
            }
        }
        ssl
    }

    /// `proxy-ssl-protocols`: nginx's names, separated by spaces.
    pub(super) fn tls_versions(&mut self, value: &str) -> Option<TlsVersions> {
        let ProtocolWords::Read { versions, dropped } = TlsVersions::parse_nginx(value) else {
            self.invalid("proxy-ssl-protocols", value, TlsVersions::EXPECTED);
            return None;
        };
        let key = self.key("proxy-ssl-protocols");
        if versions.is_empty() {
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: {value:?}: Sluice speaks only TLSv1.2 and TLSv1.3 to upstreams; both apply"),
            );
            return None;
        }
        if !dropped.is_empty() {
            self.diagnose(
                Severity::Difference,
                format!("annotation {key}: {} dropped: Sluice speaks only TLSv1.2 and TLSv1.3 to upstreams", dropped.join(" ")),
            );
        }
        Some(versions)
    }

    /// `ssl-ciphers` and `ssl-prefer-server-ciphers`: the host's own handshake (server level
    /// in ingress-nginx).
    pub(super) fn ssl_ciphers(&mut self) -> HostCiphers {
        let prefer_server = self.bool("ssl-prefer-server-ciphers");
        let Some(value) = self.get("ssl-ciphers").filter(|v| !v.is_empty()) else {
            return HostCiphers {
                suites: None,
                prefer_server,
            };
        };
        let list = match crate::openssl_ciphers::parse(value) {
            Ok(list) => list,
            Err(expected) => {
                self.invalid("ssl-ciphers", value, expected);
                return HostCiphers {
                    suites: None,
                    prefer_server,
                };
            }
        };
        let key = self.key("ssl-ciphers");
        for (severity, text) in list.notes() {
            self.diagnose(severity, format!("annotation {key}: {text}"));
        }
        if list.suites.is_empty() {
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: {value:?} leaves no TLS 1.2 suite Sluice speaks; the ConfigMap's ssl-ciphers apply"),
            );
        }
        let suites = (!list.suites.is_empty()).then(|| CipherSuites::of(&list.suites));
        HostCiphers {
            suites,
            prefer_server,
        }
    }

    /// `upstream-hash-by`: nginx variables and literals; a variable the proxy cannot know
    /// before the request goes upstream is refused by name, and the ConfigMap's load-balance
    /// applies. With `upstream-hash-by-subset`, the subset's size (`-size`, default 3).
    pub(super) fn hash_by(&mut self) -> Option<Arc<HashBy>> {
        let value = self.get("upstream-hash-by")?;
        match HashBy::parse(value) {
            Ok(mut hash_by) => {
                // ingress-nginx's subset size: 3 unless set to another whole number (0 is 3).
                if self.bool("upstream-hash-by-subset") == Some(true) {
                    let size = self.number("upstream-hash-by-subset-size");
                    hash_by.subset = Some(size.filter(|n| *n > 0).unwrap_or(3));
                }
                Some(Arc::new(hash_by))
            }
            Err(why) => {
                let key = self.key("upstream-hash-by");
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: invalid value {value:?}: {why}; the ConfigMap's load-balance applies"),
                );
                None
            }
        }
    }

    /// `load-balance` for this Ingress's routes (ingress-nginx's values, and Sluice's
    /// `least_request`); `None`: the ConfigMap's.
    pub(super) fn load_balance(&mut self) -> Option<LoadBalance> {
        let value = self.get("load-balance")?;
        match value {
            "round_robin" => Some(LoadBalance::RoundRobin),
            "ewma" => Some(LoadBalance::Ewma),
            "least_request" => Some(LoadBalance::LeastRequest),
            "chash" | "chashsubset" | "sticky_balanced" | "sticky_persistent" => {
                let key = self.key("load-balance");
                self.diagnose(
                    Severity::Notice,
                    format!("annotation {key}: {value:?} is what upstream-hash-by or affinity sets, not a value of its own; the ConfigMap's load-balance applies (use those annotations)"),
                );
                None
            }
            _ => {
                self.invalid(
                    "load-balance",
                    value,
                    "round_robin or ewma (or Sluice's least_request); the ConfigMap's load-balance applies",
                );
                None
            }
        }
    }

    pub(super) fn upstream_vhost(&mut self) -> Option<HeaderValue> {
        let value = self.header_value("upstream-vhost")?;
        let text = value.to_str().unwrap_or_default();
        let host = text.rsplit_once(':').map_or(text, |(host, _)| host);
        if model::target::validate_host(text.as_bytes()).is_err() || host.is_empty() {
            self.invalid(
                "upstream-vhost",
                text,
                "a host name, optionally with a port",
            );
            return None;
        }
        Some(value)
    }

    /// `connection-proxy-header`: `close` or `keep-alive` (ingress-nginx's validator, spaces
    /// removed); anything else leaves the default (`Connection: upgrade` for upgrades,
    /// nothing otherwise).
    pub(super) fn connection_header(&mut self) -> Option<ConnectionHeader> {
        let value = self.get("connection-proxy-header")?;
        match value.replace(' ', "").as_str() {
            "close" => Some(ConnectionHeader::Close),
            "keep-alive" => Some(ConnectionHeader::KeepAlive),
            _ => {
                self.invalid("connection-proxy-header", value, "close or keep-alive");
                None
            }
        }
    }
}
