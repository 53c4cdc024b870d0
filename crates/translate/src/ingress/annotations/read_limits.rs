//! Parsers of the rate and connection limits (`limit-*`), as ingress-nginx's ratelimit
//! annotation parser reads them: the burst is the limit times `limit-burst-multiplier`, the
//! rates and sizes are whole numbers, `limit-rate` is KB/s and `limit-rate-after` KB.

use std::sync::Arc;

use model::limits::{Limits, Per, RequestRate, DEFAULT_BURST_MULTIPLIER};
use model::policy::RoutePolicy;
use model::Severity;

use super::reader::Reader;
use crate::configmap::parse_cidrs;

/// ingress-nginx's name of the exemption list, and the older one it still reads.
const ALLOWLIST: &str = "limit-allowlist";
const WHITELIST: &str = "limit-whitelist";

impl Reader<'_> {
    /// The `limit-*` family into `policy.limits` (which holds the ConfigMap's `limit-rate`
    /// already). A bad value leaves that one limit out with an error naming the default; the
    /// others apply.
    pub(super) fn limits(&mut self, policy: &mut RoutePolicy) {
        let inherited = policy.limits.as_deref();
        let rps = self.limit_count("limit-rps", "no limit");
        let rpm = self.limit_count("limit-rpm", "no limit");
        let connections = self
            .limit_count("limit-connections", "no limit")
            .unwrap_or(0);
        let multiplier = self
            .limit_count("limit-burst-multiplier", "the default multiplier (5)")
            .unwrap_or(DEFAULT_BURST_MULTIPLIER);
        let kilobytes = |n: u32| u64::from(n) * 1024;
        let settings = self.settings;
        let annotated_rate = self.limit_count("limit-rate", "the ConfigMap's limit-rate");
        let rate = annotated_rate.map_or(settings.limit_rate, kilobytes);
        let rate_after = self
            .limit_count("limit-rate-after", "the ConfigMap's limit-rate-after")
            .map_or(settings.limit_rate_after, kilobytes);
        let request_rate = |limit: Option<u32>, per| {
            limit.filter(|n| *n > 0).map(|limit| RequestRate {
                limit,
                burst: limit.saturating_mul(multiplier),
                per,
            })
        };
        let exempt = self.limit_exempt();
        let mut limits = Limits {
            zone: Arc::from(format!("{}_{}", self.object.namespace, self.object.name)),
            rps: request_rate(rps, Per::Second),
            rpm: request_rate(rpm, Per::Minute),
            connections,
            exempt: exempt.into(),
            rate,
            rate_after,
        };
        if !limits.keyed() {
            self.no_effect_without(
                &[ALLOWLIST, WHITELIST, "limit-burst-multiplier"],
                "limit-rps, limit-rpm or limit-connections",
            );
            // Unkeyed (limit-rate alone): as the ConfigMap's, no zone.
            limits.zone = Arc::from("");
            limits.exempt = Box::default();
        }
        if annotated_rate.is_some_and(|n| n > 0) && self.get("proxy-buffering") != Some("on") {
            let key = self.key("limit-rate");
            self.diagnose(
                Severity::Difference,
                format!("annotation {key}: ingress-nginx documents that limit-rate needs proxy-buffering \"on\" (without it nginx's unbuffered responses are not kept to the rate); Sluice paces the response either way"),
            );
        }
        if limits.rate == 0 && limits.rate_after > 0 {
            self.no_effect_without(&["limit-rate-after"], "limit-rate");
        }
        policy.limits = match limits.any() {
            false => None,
            true if inherited == Some(&limits) => policy.limits.take(),
            true => Some(Arc::new(limits)),
        };
    }

    /// A whole number ≥ 0; `default` names what applies instead of a bad value.
    fn limit_count(&mut self, name: &str, default: &str) -> Option<u32> {
        let value = self.get(name)?;
        let parsed = value.parse().ok();
        if parsed.is_none() {
            let key = self.key(name);
            self.diagnose(
                Severity::Error,
                format!("annotation {key}: invalid value {value:?}: expected a whole number (0 or more); {default} applies"),
            );
        }
        parsed
    }

    /// `limit-allowlist`, or its older name `limit-whitelist` (the newer wins, as in
    /// ingress-nginx). A list that cannot be read exempts nobody: a limit is never widened
    /// by a typo.
    fn limit_exempt(&mut self) -> Vec<ipnet::IpNet> {
        let name = if self.get(ALLOWLIST).is_some() {
            if self.get(WHITELIST).is_some() {
                let key = self.key(WHITELIST);
                self.diagnose(
                    Severity::Notice,
                    format!("annotation {key}: ignored, {ALLOWLIST} is set too and wins"),
                );
            }
            ALLOWLIST
        } else {
            WHITELIST
        };
        let Some(value) = self.get(name) else {
            return Vec::new();
        };
        match parse_cidrs(value) {
            Ok(nets) => nets,
            Err(why) => {
                let key = self.key(name);
                self.diagnose(
                    Severity::Error,
                    format!("annotation {key}: {why}; nobody is exempt from the limits (the default) until it is fixed"),
                );
                Vec::new()
            }
        }
    }
}
