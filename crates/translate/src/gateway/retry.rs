//! HTTPRoute `rules[].retry` onto the rule's upstream policy: the retry rules ingress-nginx's
//! `proxy-next-upstream*` keys set (`UpstreamPolicy`), plus what only Gateway API has
//! (`model::retry`).
//!
//! ```text
//!  retry.attempts N (default 1) ─▶ tries N + 1 (0: the one try, no retry)
//!  retry.codes [500, 503, …]    ─▶ next_upstream.statuses (400-599; others: a warning)
//!  retry present                ─▶ next_upstream error + timeout (a connection refused or
//!                                  timed out is tried again; non_idempotent stays off)
//!  retry.backoff B              ─▶ a pause of B, 2B, 4B … (at most 10 B) before each retry
//!  no retry                     ─▶ the ConfigMap's proxy-next-upstream* (as for Ingresses)
//!  backoff not a GEP-2257 duration ─▶ a diagnostic naming the field; the rule answers 503
//! ```

use std::sync::Arc;

use model::policy::RoutePolicy;
use model::retry::RetryExtras;
use model::settings::NextUpstream;
use model::{ObjectRef, Severity};

use super::objects::HttpRouteRetry;
use super::timeouts::parse_duration;
use crate::compiler::Compiler;

/// A rule's retry, read and checked once (a rule may compile into one route per match).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct RuleRetry {
    /// `None`: no `retry` (the ConfigMap's retries stay).
    retry: Option<(u32, NextUpstream, RetryExtras)>,
    /// Why the rule is refused (an invalid backoff): it answers 503.
    refused: Option<String>,
}

impl Compiler<'_> {
    pub(super) fn rule_retry(
        &mut self,
        object: &ObjectRef,
        field: &str,
        retry: Option<&HttpRouteRetry>,
    ) -> RuleRetry {
        let Some(retry) = retry else {
            return RuleRetry::default();
        };
        let (rule, problems) = read(field, retry);
        for (severity, reason) in problems {
            self.diagnose_with(severity, object.clone(), reason);
        }
        rule
    }
}

/// A rule's `retry` and what is wrong in it (diagnostics to be).
fn read(field: &str, retry: &HttpRouteRetry) -> (RuleRetry, Vec<(Severity, String)>) {
    let mut problems = Vec::new();
    let mut conditions = NextUpstream {
        error: true,
        timeout: true,
        ..NextUpstream::default()
    };
    for (i, code) in retry.codes.iter().enumerate() {
        let added = u16::try_from(*code).is_ok_and(|code| conditions.statuses.insert(code));
        if !added {
            problems.push((
                Severity::Unsupported,
                format!("{field}.retry.codes[{i}] {code}: not a status of 400-599; ignored"),
            ));
        }
    }
    // `attempts` counts retries after the first try; the tries count the first one too.
    let attempts = retry
        .attempts
        .unwrap_or(1)
        .clamp(0, i64::from(u32::MAX - 1));
    let tries = u32::try_from(attempts).unwrap_or(u32::MAX - 1) + 1;
    let mut extras = RetryExtras {
        backoff: std::time::Duration::ZERO,
        ask_again: true,
    };
    let mut refused = None;
    if let Some(text) = retry.backoff.as_deref() {
        match parse_duration(text) {
            Some(backoff) => extras.backoff = backoff,
            None => {
                let why = format!("{field}.retry.backoff {text:?}: not a duration of Gateway API (GEP-2257, e.g. 100ms, 1s)");
                problems.push((Severity::Error, format!("{why}; the rule answers 503")));
                refused = Some(why);
            }
        }
    }
    let rule = RuleRetry {
        retry: Some((tries, conditions, extras)),
        refused,
    };
    (rule, problems)
}

impl RuleRetry {
    /// `policy` with this retry (the same `Arc` when there is none).
    pub(super) fn apply(&self, policy: Arc<RoutePolicy>) -> Arc<RoutePolicy> {
        let Some((tries, conditions, extras)) = self.retry else {
            return policy;
        };
        let mut policy = (*policy).clone();
        if let Some(why) = &self.refused {
            policy.denied.get_or_insert_with(|| why.clone());
        }
        policy.upstream.tries = tries;
        policy.upstream.next_upstream = conditions;
        policy.upstream.retry = extras;
        Arc::new(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(retry: HttpRouteRetry) -> (Arc<RoutePolicy>, Vec<String>) {
        let (rule, problems) = read("spec.rules[0]", &retry);
        let policy = rule.apply(Arc::new(RoutePolicy::default()));
        (policy, problems.into_iter().map(|(_, why)| why).collect())
    }

    #[test]
    fn attempts_codes_and_backoff_land_on_the_upstream_policy() {
        let (policy, reasons) = applied(HttpRouteRetry {
            codes: vec![500, 503, 418, 200],
            attempts: Some(3),
            backoff: Some("100ms".into()),
            ..HttpRouteRetry::default()
        });
        let upstream = &policy.upstream;
        assert_eq!(upstream.tries, 4);
        assert_eq!(
            upstream.next_upstream.to_string(),
            "error timeout http_500 http_503 http_418"
        );
        assert_eq!(
            upstream.retry.backoff,
            std::time::Duration::from_millis(100)
        );
        assert!(upstream.retry.ask_again);
        assert!(policy.denied.is_none());
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].contains("retry.codes[3] 200"), "{reasons:?}");
    }

    #[test]
    fn zero_attempts_is_one_try_and_no_attempts_is_the_default_of_one_retry() {
        let (zero, _) = applied(HttpRouteRetry {
            attempts: Some(0),
            ..HttpRouteRetry::default()
        });
        assert_eq!(zero.upstream.tries, 1);
        let (default, _) = applied(HttpRouteRetry::default());
        assert_eq!(default.upstream.tries, 2);
        assert!(default.upstream.next_upstream.statuses.is_empty());
        let none = RuleRetry::default();
        let base = Arc::new(RoutePolicy::default());
        assert!(Arc::ptr_eq(&none.apply(base.clone()), &base));
    }

    #[test]
    fn a_backoff_that_is_not_a_duration_refuses_the_rule() {
        let (policy, reasons) = applied(HttpRouteRetry {
            backoff: Some("1.5s".into()),
            ..HttpRouteRetry::default()
        });
        assert!(policy.denied.as_deref().unwrap().contains("retry.backoff"));
        assert!(reasons[0].contains("answers 503"), "{reasons:?}");
    }
}
