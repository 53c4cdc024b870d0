//! Gateway API's pre-routing filters (GEP-5224, a listener's `filters.requests`): what runs on
//! every request a Gateway listener takes, before any route is matched.
//!
//! ```text
//!  request ─▶ Host (or the handshake's server name) + the port's bit
//!      ─▶ ListenerHosts::select: the listener it belongs to (listener_hosts.rs)
//!      ─▶ that listener's ListenerStage, if it has one (RouteTable::listener_stage)
//!            filters Ok: each in order (auth.rs's ExternalAuth with GatewayAuth); a deny
//!               answers, the rest never run; header changes seen by route matching (never Host)
//!            filters Err: some filter cannot run ─▶ 500 (fail closed, never skipped)
//!      ─▶ route matching, once
//! ```
//! Listeners of one hostname on one port are one listener to the route table (on the shared
//! site, Gateways meet as their routes do): the compile gives such a key one stage, or a
//! failing one when their filter lists differ.

use std::sync::Arc;

use serde::Serialize;

use crate::auth::ExternalAuth;
use crate::policy::UpstreamPolicy;

/// One Gateway listener's pre-routing stage.
#[derive(Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ListenerStage {
    /// The listener (or listeners) it belongs to, as logs name it: `Gateway infra/edge
    /// listener https`.
    #[serde(serialize_with = "text")]
    pub listener: Arc<str>,
    /// The filters in list order; `Err`: why they cannot all run (every request answers 500).
    #[serde(serialize_with = "filters_or_why")]
    pub filters: Result<Box<[PreRoutingFilter]>, Arc<str>>,
    /// Timeouts and retries of the sub-requests (the Gateway's routes' defaults).
    #[serde(skip)]
    pub upstream: UpstreamPolicy,
}

/// A filter of the request phase.
#[derive(Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreRoutingFilter {
    /// `ExternalAuth`, `protocol: HTTP` (its `gateway` part is always set).
    ExternalAuth(ExternalAuth),
}

fn filters_or_why<S: serde::Serializer>(
    value: &Result<Box<[PreRoutingFilter]>, Arc<str>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Ok(filters) => serializer.collect_seq(filters.iter()),
        Err(why) => serializer.serialize_str(&format!("fails closed: {why}")),
    }
}

fn text<S: serde::Serializer>(value: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value)
}
