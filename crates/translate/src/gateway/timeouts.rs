//! HTTPRoute `rules[].timeouts` onto the rule's upstream policy: the same timeouts
//! ingress-nginx's `proxy-*-timeout` annotations set, plus a deadline for the whole exchange.
//!
//! ```text
//!  timeouts.backendRequest B ─▶ upstream connect (at most B), send and read timeouts = B:
//!                                one attempt's bound (504 when it passes); "0s": none
//!  timeouts.request R        ─▶ upstream.request_timeout = R: from the client's request to the
//!                                response head, every attempt included (504); "0s": none
//!  B > R, or not a GEP-2257 duration ─▶ a diagnostic naming the field; the rule answers 503
//! ```

use std::sync::Arc;
use std::time::Duration;

use model::policy::RoutePolicy;
use model::{ObjectRef, Severity};

use super::objects::HttpRouteTimeouts;
use crate::compiler::Compiler;

/// A rule's timeouts, read and checked once (a rule may compile into one route per match).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct RuleTimeouts {
    /// `None`: not given (the ConfigMap's timeouts stay); `Some(ZERO)`: disabled.
    request: Option<Duration>,
    backend_request: Option<Duration>,
    /// Why the rule is refused (invalid timeouts): it answers 503.
    refused: Option<String>,
}

impl Compiler<'_> {
    /// Invalid timeouts refuse the rule (it answers 503, after a diagnostic), as a filter
    /// Sluice cannot honour does, rather than serve it without the bound it asks for.
    pub(super) fn rule_timeouts(
        &mut self,
        object: &ObjectRef,
        field: &str,
        timeouts: Option<&HttpRouteTimeouts>,
    ) -> RuleTimeouts {
        let Some(timeouts) = timeouts else {
            return RuleTimeouts::default();
        };
        let read = |name: &str, text: Option<&str>| -> Result<Option<Duration>, String> {
            text.map(|text| {
                parse_duration(text).ok_or_else(|| {
                    format!("{field}.timeouts.{name} {text:?}: not a duration of Gateway API (GEP-2257: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms, e.g. 1h30m, 500ms, 0s)")
                })
            })
            .transpose()
        };
        let checked = read("request", timeouts.request.as_deref()).and_then(|request| {
            let backend_request = read("backendRequest", timeouts.backend_request.as_deref())?;
            match (request, backend_request) {
                (Some(r), Some(b)) if !r.is_zero() && (b.is_zero() || b > r) => Err(format!(
                    "{field}.timeouts.backendRequest {:?}: must not exceed timeouts.request {:?} (and may not be disabled while it is set)",
                    timeouts.backend_request.as_deref().unwrap_or_default(),
                    timeouts.request.as_deref().unwrap_or_default()
                )),
                _ => Ok(RuleTimeouts {
                    request,
                    backend_request,
                    refused: None,
                }),
            }
        });
        checked.unwrap_or_else(|why| {
            self.diagnose_with(
                Severity::Error,
                object.clone(),
                format!("{why}; the rule answers 503"),
            );
            RuleTimeouts {
                refused: Some(why),
                ..RuleTimeouts::default()
            }
        })
    }
}

impl RuleTimeouts {
    /// `policy` with these timeouts (the same `Arc` when there are none).
    pub(super) fn apply(&self, policy: Arc<RoutePolicy>) -> Arc<RoutePolicy> {
        if *self == RuleTimeouts::default() {
            return policy;
        }
        let mut policy = (*policy).clone();
        if let Some(why) = &self.refused {
            policy.denied.get_or_insert_with(|| why.clone());
        }
        let upstream = &mut policy.upstream;
        if let Some(backend) = self.backend_request {
            // One attempt: connecting, sending and waiting for the head each within it (a
            // zero limit is no limit, as for the ConfigMap's timeouts).
            if !backend.is_zero()
                && (upstream.connect_timeout.is_zero() || backend < upstream.connect_timeout)
            {
                upstream.connect_timeout = backend;
            }
            upstream.send_timeout = backend;
            upstream.read_timeout = backend;
        }
        if let Some(request) = self.request {
            upstream.request_timeout = request;
        }
        Arc::new(policy)
    }
}

/// A duration as Gateway API writes them (GEP-2257): one to four parts, each 1 to 5 digits
/// and a unit `h`, `m`, `s` or `ms` (`1h`, `500ms`, `1m30s`, `0s`).
pub(super) fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = Duration::ZERO;
    let mut parts = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 5 {
            return None;
        }
        let number: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else {
            match rest.bytes().next()? {
                b'h' => (Duration::from_secs(3600), 1),
                b'm' => (Duration::from_secs(60), 1),
                b's' => (Duration::from_secs(1), 1),
                _ => return None,
            }
        };
        rest = &rest[len..];
        total += unit * u32::try_from(number).ok()?;
        parts += 1;
    }
    (1..=4).contains(&parts).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_gep_2257_writes_them() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("0s", Some(Duration::ZERO)),
            ("500ms", Some(ms(500))),
            ("1h30m", Some(ms(5_400_000))),
            ("1h1m1s1ms", Some(ms(3_661_001))),
            ("99999ms", Some(ms(99_999))),
            ("", None),
            ("1", None),
            ("1.5s", None),
            ("100000s", None),
            ("1h1m1s1ms1h", None),
            ("10d", None),
            ("-1s", None),
            ("1s ", None),
        ] {
            assert_eq!(parse_duration(text), expected, "{text:?}");
        }
    }

    #[test]
    fn backend_request_bounds_each_attempt_and_request_the_whole_exchange() {
        let policy = Arc::new(RoutePolicy::default());
        let timeouts = RuleTimeouts {
            request: Some(Duration::from_secs(10)),
            backend_request: Some(Duration::from_secs(2)),
            refused: None,
        };
        let applied = timeouts.apply(policy.clone());
        assert_eq!(applied.upstream.request_timeout, Duration::from_secs(10));
        assert_eq!(applied.upstream.read_timeout, Duration::from_secs(2));
        assert_eq!(applied.upstream.send_timeout, Duration::from_secs(2));
        assert!(applied.upstream.connect_timeout <= Duration::from_secs(2));
        assert!(Arc::ptr_eq(
            &RuleTimeouts::default().apply(policy.clone()),
            &policy
        ));
        let disabled = RuleTimeouts {
            request: None,
            backend_request: Some(Duration::ZERO),
            refused: None,
        }
        .apply(policy.clone());
        assert!(disabled.upstream.read_timeout.is_zero());
        assert_eq!(
            disabled.upstream.connect_timeout,
            policy.upstream.connect_timeout
        );
    }
}
