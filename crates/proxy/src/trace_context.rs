//! W3C trace context, in and out, and the sampling decision: what a request's place in a trace
//! is. The span made from it when the request is over is `otel`'s.
//!
//! ```text
//!  request headers ─▶ the client's traceparent (strictly parsed, only when the route trusts
//!     incoming spans; malformed ─▶ a new trace) ─▶ sampler ─▶ Trace
//!  Trace ─▶ traceparent 00-TRACE-OURSPAN-FLAGS (+ the client's tracestate) upstream
//! ```

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use model::policy::Tracing;
use model::settings::{OpenTelemetry, Sampler};

/// `tracestate` kept for the span at most (W3C: 512 is what a vendor must propagate).
const MAX_TRACESTATE: usize = 512;

pub(crate) static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub(crate) static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// One request's place in a trace.
#[derive(Debug)]
pub(crate) struct Trace {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    /// The client's span, when its `traceparent` was valid and trusted.
    pub(crate) parent: Option<[u8; 8]>,
    pub(crate) sampled: bool,
    pub(crate) tracestate: Option<HeaderValue>,
    pub(crate) user_agent: Option<HeaderValue>,
}

/// A valid `traceparent`'s fields.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TraceParent {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) flags: u8,
}

impl Trace {
    /// Joins (or starts) a trace for a request with these headers. `propagate`: the request
    /// goes upstream, so its `traceparent` becomes ours (and a `tracestate` that belongs to a
    /// trace we did not continue is removed).
    pub(crate) fn begin(
        headers: &mut HeaderMap,
        route: Tracing,
        settings: &OpenTelemetry,
        propagate: bool,
    ) -> Trace {
        let parent = if route.trust_incoming_span {
            incoming(headers)
        } else {
            None
        };
        let trace_id = parent
            .as_ref()
            .map_or_else(|| fastrand::u128(1..).to_be_bytes(), |p| p.trace_id);
        let sampled = sample(settings, &trace_id, parent.as_ref());
        let tracestate = parent
            .as_ref()
            .and_then(|_| headers.get(&TRACESTATE).cloned());
        let trace = Trace {
            trace_id,
            // Never all zero: an invalid ID for W3C.
            span_id: fastrand::u64(1..).to_be_bytes(),
            parent: parent.map(|p| p.span_id),
            sampled,
            tracestate: tracestate.filter(|s| s.len() <= MAX_TRACESTATE),
            user_agent: headers.get(header::USER_AGENT).cloned(),
        };
        if propagate {
            headers.insert(TRACEPARENT.clone(), trace.traceparent());
            if trace.parent.is_none() {
                headers.remove(&TRACESTATE);
            }
        }
        trace
    }

    /// `00-TRACE-SPAN-FLAGS`: this request's span as the upstream's parent.
    fn traceparent(&self) -> HeaderValue {
        let mut text = Vec::with_capacity(55);
        text.extend_from_slice(b"00-");
        hex_into(&mut text, &self.trace_id);
        text.push(b'-');
        hex_into(&mut text, &self.span_id);
        text.extend_from_slice(if self.sampled { b"-01" } else { b"-00" });
        HeaderValue::from_bytes(&text).expect("hex digits and dashes are a valid header value")
    }
}

/// The client's trace context: exactly one valid `traceparent` (W3C Trace Context §3.2), else
/// `None` (a new trace starts, as the spec says for a malformed one).
fn incoming(headers: &HeaderMap) -> Option<TraceParent> {
    let mut values = headers.get_all(&TRACEPARENT).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    parse_traceparent(value.as_bytes())
}

/// `VERSION-TRACEID-PARENTID-FLAGS`, lowercase hex. Version `00` is exactly 55 bytes; a later
/// version may carry more after a `-` (read as 00, as the spec asks); `ff` is invalid, and so
/// are all-zero IDs.
pub(crate) fn parse_traceparent(value: &[u8]) -> Option<TraceParent> {
    if value.len() < 55 {
        return None;
    }
    let version = hex_byte(&value[0..2])?;
    match version {
        0xff => return None,
        0 if value.len() != 55 => return None,
        _ if value.len() > 55 && value[55] != b'-' => return None,
        _ => {}
    }
    if value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
        return None;
    }
    let mut trace_id = [0u8; 16];
    for (i, byte) in trace_id.iter_mut().enumerate() {
        *byte = hex_byte(&value[3 + 2 * i..5 + 2 * i])?;
    }
    let mut span_id = [0u8; 8];
    for (i, byte) in span_id.iter_mut().enumerate() {
        *byte = hex_byte(&value[36 + 2 * i..38 + 2 * i])?;
    }
    let flags = hex_byte(&value[53..55])?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(TraceParent {
        trace_id,
        span_id,
        flags,
    })
}

/// Two lowercase hex digits (W3C: uppercase is invalid).
fn hex_byte(two: &[u8]) -> Option<u8> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    Some(digit(two[0])? << 4 | digit(two[1])?)
}

/// The sampler's decision, OpenTelemetry's rules: parent-based follows a (trusted) parent's
/// sampled flag; a new trace asks `otel-sampler`. The ratio test is the SDKs' one (the trace
/// ID's last 8 bytes, shifted right once, below ratio × 2^63), so every service with the same
/// ratio keeps the same traces.
pub(crate) fn sample(
    settings: &OpenTelemetry,
    trace_id: &[u8; 16],
    parent: Option<&TraceParent>,
) -> bool {
    if let (true, Some(parent)) = (settings.sampler_parent_based, parent) {
        return parent.flags & 1 == 1;
    }
    match settings.sampler {
        Sampler::AlwaysOn => true,
        Sampler::AlwaysOff => false,
        Sampler::TraceIdRatioBased => {
            let bound = (settings.sampler_ratio * (1u64 << 63) as f64) as u64;
            let low = u64::from_be_bytes(trace_id[8..].try_into().expect("8 bytes"));
            (low >> 1) < bound
        }
    }
}

/// Lowercase hex, as W3C trace context writes IDs.
fn hex_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_is_parsed_strictly() {
        let parsed = parse_traceparent(VALID.as_bytes()).unwrap();
        assert_eq!(parsed.trace_id[0], 0x4b);
        assert_eq!(parsed.span_id[7], 0xb7);
        assert_eq!(parsed.flags, 1);
        // A later version may carry more fields after a dash; version 00 may not.
        let future = format!("cc{}-what-comes-next", &VALID[2..]);
        assert!(parse_traceparent(future.as_bytes()).is_some());
        for bad in [
            format!("{VALID}-x"), // 00 too long
            VALID.to_uppercase(), // uppercase hex
            VALID.replace("4bf92f3577b34da6a3ce929d0e0e4736", &"0".repeat(32)), // zero trace
            VALID.replace("00f067aa0ba902b7", "0000000000000000"), // zero span
            format!("ff{}", &VALID[2..]), // version ff
            VALID.replacen('-', "_", 1),
            VALID[..54].to_owned(),
            format!("cc{}x", &VALID[2..]), // more without a dash
            VALID.replace("-01", "-0g"),
        ] {
            assert_eq!(parse_traceparent(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn a_trusted_parent_is_continued_and_propagated_with_our_span() {
        let mut headers = HeaderMap::new();
        headers.insert(&TRACEPARENT, HeaderValue::from_static(VALID));
        headers.insert(&TRACESTATE, HeaderValue::from_static("congo=t61rcWkgMzE"));
        let settings = OpenTelemetry::default();
        let route = Tracing {
            enabled: true,
            trust_incoming_span: true,
        };
        let trace = Trace::begin(&mut headers, route, &settings, true);
        assert!(trace.sampled);
        assert_eq!(trace.parent, Some(0x00f067aa0ba902b7u64.to_be_bytes()));
        let sent = headers.get(&TRACEPARENT).unwrap().to_str().unwrap();
        assert_eq!(&sent[..36], &VALID[..36]);
        assert_ne!(&sent[36..52], &VALID[36..52]);
        assert!(sent.ends_with("-01"));
        assert_eq!(headers.get(&TRACESTATE).unwrap(), "congo=t61rcWkgMzE");

        // Not trusted: a new trace, and the client's tracestate goes with its trace.
        let mut headers = HeaderMap::new();
        headers.insert(&TRACEPARENT, HeaderValue::from_static(VALID));
        headers.insert(&TRACESTATE, HeaderValue::from_static("congo=t61rcWkgMzE"));
        let untrusted = Tracing {
            trust_incoming_span: false,
            ..route
        };
        let trace = Trace::begin(&mut headers, untrusted, &settings, true);
        assert_eq!(trace.parent, None);
        assert!(!headers[&TRACEPARENT]
            .to_str()
            .unwrap()
            .contains(&VALID[3..35]));
        assert!(headers.get(&TRACESTATE).is_none());
    }

    #[test]
    fn samplers_decide_new_traces_and_parents_decide_theirs() {
        let mut settings = OpenTelemetry::default();
        let unsampled = TraceParent {
            trace_id: [7; 16],
            span_id: [1; 8],
            flags: 0,
        };
        assert!(!sample(&settings, &[7; 16], Some(&unsampled)));
        settings.sampler_parent_based = false;
        assert!(sample(&settings, &[7; 16], Some(&unsampled)));
        settings.sampler = Sampler::AlwaysOff;
        assert!(!sample(&settings, &[7; 16], None));
        settings.sampler = Sampler::TraceIdRatioBased;
        settings.sampler_ratio = 0.5;
        let mut low = [0u8; 16];
        low[8] = 0x7f;
        let mut high = [0u8; 16];
        high[8] = 0x80;
        assert!(sample(&settings, &low, None));
        assert!(!sample(&settings, &high, None));
        settings.sampler_ratio = 1.0;
        assert!(sample(&settings, &[0xff; 16], None));
        settings.sampler_ratio = 0.0;
        assert!(!sample(&settings, &[0; 16], None));
    }
}
