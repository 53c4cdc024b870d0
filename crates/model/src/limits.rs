//! Rate and connection limits (`limit-rps`, `limit-rpm`, `limit-burst-multiplier`,
//! `limit-connections`, `limit-allowlist` / `limit-whitelist`, `limit-rate`,
//! `limit-rate-after`) as ingress-nginx renders them: one zone per Ingress, keyed by the
//! ConfigMap's `limit-conn-zone-variable` (the trusted client address by default).
//!
//! ```text
//!  Ingress ns/name/uid ─▶ zone ─┬ rps: limit_req rate=N r/s burst=N×multiplier nodelay
//!                               ├ rpm: limit_req rate=N r/m burst=N×multiplier nodelay
//!                               └ connections: limit_conn N
//!  client address in `exempt` ─▶ no key: neither limit counts it (ingress-nginx's geo map)
//!  limit-rate / limit-rate-after: per response, no key, no exemption (nginx's limit_rate)
//! ```
//! Plain data: the proxy's `limits.rs` keeps the counters, per zone, across configurations.

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use ipnet::IpNet;
use serde::{Serialize, Serializer};

/// ingress-nginx's `limit-burst-multiplier` default.
pub const DEFAULT_BURST_MULTIPLIER: u32 = 5;

/// What one Ingress's routes are limited by. Behind an `Arc` in the policy; `None` there
/// when nothing is limited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Limits {
    /// The zone: ingress-nginx's `<namespace>_<name>_<uid>`. Every path of one Ingress shares
    /// it; two Ingresses never do (nor an Ingress deleted and made again: a new uid).
    /// Empty when nothing is keyed (`limit-rate` alone).
    #[serde(skip_serializing_if = "str::is_empty", serialize_with = "text")]
    pub zone: Arc<str>,
    /// `limit-rps`: requests per second per key (nginx's limit_req, burst and nodelay).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rps: Option<RequestRate>,
    /// `limit-rpm`: requests per minute per key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpm: Option<RequestRate>,
    /// `limit-connections`: requests in progress per key (nginx's limit_conn); 0: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub connections: u32,
    /// `limit-allowlist` (`limit-whitelist`): client addresses no request or connection
    /// limit counts.
    #[serde(skip_serializing_if = "<[_]>::is_empty", serialize_with = "nets")]
    pub exempt: Box<[IpNet]>,
    /// `limit-rate` (KB/s in the annotation, bytes per second here): each response is sent
    /// no faster; 0: no limit.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub rate: u64,
    /// `limit-rate-after` (KB in the annotation, bytes here): sent before `rate` applies.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub rate_after: u64,
}

impl Limits {
    /// The ConfigMap's `limit-rate` / `limit-rate-after` (bytes), which ingress-nginx renders
    /// in every location without the annotations; `None` without a rate.
    pub fn rate_only(rate: u64, rate_after: u64) -> Option<Arc<Limits>> {
        (rate > 0).then(|| {
            Arc::new(Limits {
                zone: Arc::from(""),
                rps: None,
                rpm: None,
                connections: 0,
                exempt: Box::default(),
                rate,
                rate_after,
            })
        })
    }

    /// Whether a request is keyed (a request or connection limit is set).
    pub fn keyed(&self) -> bool {
        self.rps.is_some() || self.rpm.is_some() || self.connections > 0
    }

    /// Whether anything at all is limited.
    pub fn any(&self) -> bool {
        self.keyed() || self.rate > 0
    }
}

/// One limit_req: `limit` requests per `per`, `burst` more in excess, answered at once
/// (ingress-nginx always renders `nodelay`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RequestRate {
    pub limit: u32,
    pub burst: u32,
    pub per: Per,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Per {
    Second,
    Minute,
}

impl RequestRate {
    /// nginx's zone rate: milli-requests per second (`rate=5r/m` is 5000 / 60 = 83, truncated
    /// as nginx does, so the same requests pass).
    pub fn millis_per_second(&self) -> u64 {
        let scale = match self.per {
            Per::Second => 1,
            Per::Minute => 60,
        };
        u64::from(self.limit) * 1000 / scale
    }
}

/// `limit-conn-zone-variable`: what a limit is keyed by. nginx accepts any variable; Sluice
/// the ones that name a client.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum LimitKey {
    /// `$binary_remote_addr` (the default) or `$remote_addr`: the client address Sluice
    /// trusts (PROXY protocol, or forwarded headers from a trusted proxy).
    #[default]
    RemoteAddr,
    /// `$http_<name>`: a request header's value; a request without it is not limited (nginx
    /// counts no empty key).
    Header(HeaderName),
}

impl LimitKey {
    /// Reads an nginx variable; `None` for those Sluice does not key by.
    pub fn parse(variable: &str) -> Option<LimitKey> {
        match variable {
            "$binary_remote_addr" | "$remote_addr" => Some(LimitKey::RemoteAddr),
            _ => {
                let name = variable.strip_prefix("$http_")?;
                if name.is_empty() {
                    return None;
                }
                let name = name.replace('_', "-").to_ascii_lowercase();
                HeaderName::from_bytes(name.as_bytes())
                    .ok()
                    .map(LimitKey::Header)
            }
        }
    }
}

impl fmt::Display for LimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitKey::RemoteAddr => f.write_str("$binary_remote_addr"),
            LimitKey::Header(name) => write!(f, "$http_{}", name.as_str().replace('-', "_")),
        }
    }
}

impl Serialize for LimitKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn text<S: Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

fn nets<S: Serializer>(nets: &[IpNet], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(nets.iter().map(ToString::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_rates_are_nginx_milli_requests() {
        let rps = RequestRate {
            limit: 3,
            burst: 15,
            per: Per::Second,
        };
        assert_eq!(rps.millis_per_second(), 3000);
        let rpm = RequestRate {
            limit: 5,
            burst: 25,
            per: Per::Minute,
        };
        assert_eq!(rpm.millis_per_second(), 83);
    }

    #[test]
    fn keys_are_client_variables() {
        assert_eq!(
            LimitKey::parse("$binary_remote_addr"),
            Some(LimitKey::RemoteAddr)
        );
        assert_eq!(LimitKey::parse("$remote_addr"), Some(LimitKey::RemoteAddr));
        let header = LimitKey::parse("$http_x_api_key").unwrap();
        assert_eq!(
            header,
            LimitKey::Header(HeaderName::from_static("x-api-key"))
        );
        assert_eq!(header.to_string(), "$http_x_api_key");
        for refused in ["$server_name", "$http_", "binary_remote_addr", "$uri", ""] {
            assert_eq!(LimitKey::parse(refused), None, "{refused}");
        }
    }
}
