//! OpenTelemetry tracing, the worker's side: W3C trace context in and out, the sampling
//! decision, and one SERVER span per sampled request encoded (OTLP protobuf) into the worker's
//! own buffer. The export (a thread, OTLP/gRPC or OTLP/HTTP) is `otlp`.
//!
//! ```text
//!  forward(): the route traces ─▶ Trace::begin: the client's traceparent (strictly parsed,
//!     only when the route trusts incoming spans; malformed ─▶ a new trace) ─▶ sampler
//!     ─▶ traceparent 00-TRACE-OURSPAN-FLAGS (+ the client's tracestate) on the upstream request
//!  respond(): answered without an upstream (404, redirect, 403, 413 …) ─▶ Trace::begin, no header
//!  RequestGuard dropped ─▶ sampled: write_span from the access log's Record (route labels,
//!     upstream attempts, status) ─▶ SpanBuffer (per worker, encoded `Span` messages)
//!  ≥ 64 spans or 64 KiB, or every 100 ms (with the access log) ─▶ otlp::SpanSink::hand_over
//! ```
//! A configuration without tracing pays one `bool` check per request (`Compiled::tracing`);
//! a route without it, one more.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Version};
use model::policy::Tracing;
use model::settings::{OpenTelemetry, Sampler};

use crate::access_log::{Record, RequestId};
use crate::otlp::SpanSink;
use crate::protobuf;
use crate::worker::Current;

/// A worker hands its spans over once it holds this many, or this many bytes of them.
const SPANS_PER_BATCH: u32 = 64;
pub(crate) const BATCH_BYTES: usize = 64 * 1024;
/// A string attribute is cut to this many bytes (a request head may be 32 KiB), so a span
/// stays under ~8 KiB and the queues' memory is bounded by their span counts.
const MAX_ATTRIBUTE_BYTES: usize = 2048;
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
    tracestate: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
}

/// A valid `traceparent`'s fields.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TraceParent {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) flags: u8,
}

/// What a span needs from the connection and the moment.
pub(crate) struct SpanContext {
    pub(crate) https: bool,
    pub(crate) server_port: u16,
    pub(crate) start: SystemTime,
    pub(crate) end: SystemTime,
}

/// One worker's spans not yet handed to the exporter, encoded (`ScopeSpans.spans` fields).
#[derive(Default)]
pub(crate) struct SpanBuffer {
    spans_encoded: Vec<u8>,
    spans: u32,
    /// The configuration of the latest span: the exporter reads where and how to send from it.
    config: Option<Current>,
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

impl SpanBuffer {
    /// Adds a finished request's span (it is sampled); hands the buffer over when full.
    pub(crate) fn write(
        &mut self,
        record: &Record,
        trace: &Trace,
        context: &SpanContext,
        sink: &SpanSink,
    ) {
        write_span(&mut self.spans_encoded, record, trace, context);
        self.spans += 1;
        if !self
            .config
            .as_ref()
            .is_some_and(|c| Rc::ptr_eq(c, &record.log))
        {
            self.config = Some(record.log.clone());
        }
        if self.spans >= SPANS_PER_BATCH || self.spans_encoded.len() >= BATCH_BYTES {
            self.flush(sink);
        }
    }

    /// Hands the spans to the exporter thread; never blocks.
    pub(crate) fn flush(&mut self, sink: &SpanSink) {
        let Some(config) = self.config.take() else {
            return;
        };
        let encoded = std::mem::take(&mut self.spans_encoded);
        let spans = std::mem::take(&mut self.spans);
        sink.hand_over(Arc::clone(&config), encoded, spans);
    }
}

/// One span as an OTLP `Span` message, written as field 2 of `ScopeSpans` (so spans are
/// simply concatenated; `otlp` wraps them), with the HTTP semantic conventions' stable names.
pub(crate) fn write_span(out: &mut Vec<u8>, record: &Record, trace: &Trace, context: &SpanContext) {
    protobuf::message(out, SCOPE_SPANS_SPANS, |span| {
        write_span_fields(span, record, trace, context)
    });
}

fn write_span_fields(out: &mut Vec<u8>, record: &Record, trace: &Trace, context: &SpanContext) {
    let route = record.route.as_deref().map(|r| &r.labels);
    protobuf::bytes(out, span::TRACE_ID, &trace.trace_id);
    protobuf::bytes(out, span::SPAN_ID, &trace.span_id);
    if let Some(state) = &trace.tracestate {
        protobuf::string(out, span::TRACE_STATE, state.as_bytes());
    }
    if let Some(parent) = &trace.parent {
        protobuf::bytes(out, span::PARENT_SPAN_ID, parent);
    }
    // The W3C flags, and whether the parent is remote (bits 8 and 9).
    let flags = u32::from(trace.sampled) | 0x100 | if trace.parent.is_some() { 0x200 } else { 0 };
    protobuf::fixed32(out, span::FLAGS, flags);
    // The span's name: "METHOD ROUTE" (OpenTelemetry's HTTP server span name).
    let method = known_method(&record.method);
    let http_route = route.map_or("", |r| r.path.as_str());
    let mut name = String::with_capacity(8 + http_route.len());
    name.push_str(method.unwrap_or("HTTP"));
    if !http_route.is_empty() {
        name.push(' ');
        name.push_str(http_route);
    }
    protobuf::string(out, span::NAME, name.as_bytes());
    protobuf::uint(out, span::KIND, SPAN_KIND_SERVER);
    protobuf::fixed64(out, span::START_TIME, unix_nanos(context.start));
    protobuf::fixed64(out, span::END_TIME, unix_nanos(context.end));

    let mut attributes = Attributes { out };
    match method {
        Some(method) => attributes.string("http.request.method", method.as_bytes()),
        None => {
            attributes.string("http.request.method", b"_OTHER");
            attributes.string(
                "http.request.method_original",
                record.method.as_str().as_bytes(),
            );
        }
    }
    attributes.string("url.path", record.target.path().as_bytes());
    attributes.string("url.scheme", if context.https { b"https" } else { b"http" });
    // HTTP/2 names the host in `:authority` (the target), HTTP/1.1 in `Host`.
    let host = record.host.as_ref().map(HeaderValue::as_bytes);
    if let Some(host) = host.or(record.target.host().map(str::as_bytes)) {
        // OpenTelemetry names an IPv6 server address without the URL's brackets.
        let name = model::target::strip_port(host);
        let name = name
            .strip_prefix(b"[")
            .and_then(|inner| inner.strip_suffix(b"]"))
            .unwrap_or(name);
        attributes.string("server.address", name);
    }
    attributes.int("server.port", i64::from(context.server_port));
    attributes.int("http.response.status_code", i64::from(record.status));
    attributes.string("network.protocol.version", protocol(record.version));
    attributes.string("client.address", record.client.to_string().as_bytes());
    if let Some(agent) = &trace.user_agent {
        attributes.string("user_agent.original", agent.as_bytes());
    }
    if let Some(route) = route {
        if !route.path.is_empty() {
            attributes.string("http.route", route.path.as_bytes());
        }
        if !route.ingress.is_empty() {
            attributes.string("k8s.namespace.name", route.namespace.as_bytes());
            attributes.string("sluice.ingress.name", route.ingress.as_bytes());
        }
        if !route.service.is_empty() {
            attributes.string("sluice.service.name", route.service.as_bytes());
            attributes.string("sluice.service.port", route.service_port.as_bytes());
            attributes.string("sluice.upstream.name", route.upstream_name.as_bytes());
        }
    }
    if !record.attempts.is_empty() {
        let retries = record.attempts.len() - 1;
        attributes.int("http.request.resend_count", retries as i64);
        attributes.array("sluice.upstream.addresses", &record.attempts, |value, a| {
            protobuf::string(value, any_value::STRING, a.addr.to_string().as_bytes())
        });
        attributes.array(
            "sluice.upstream.status_codes",
            &record.attempts,
            |value, a| protobuf::uint(value, any_value::INT, u64::from(a.status)),
        );
    }
    match &record.request_id {
        RequestId::Generated(id) => attributes.string("sluice.request_id", id),
        RequestId::Client(id) => attributes.string("sluice.request_id", id.as_bytes()),
        RequestId::None => {}
    }
    // OpenTelemetry's HTTP server rule: only 5xx is an error (a 4xx is the client's).
    if record.status >= 500 {
        protobuf::message(out, span::STATUS, |status| {
            protobuf::uint(status, STATUS_CODE, STATUS_CODE_ERROR)
        });
    }
}

/// Writes `KeyValue` attributes (field 9 of `Span`).
struct Attributes<'a> {
    out: &'a mut Vec<u8>,
}

impl Attributes<'_> {
    /// One `KeyValue` whose `AnyValue` `value` writes.
    fn entry(&mut self, key: &str, value: impl FnOnce(&mut Vec<u8>)) {
        protobuf::message(self.out, span::ATTRIBUTES, |kv| {
            protobuf::string(kv, KEY_VALUE_KEY, key.as_bytes());
            protobuf::message(kv, KEY_VALUE_VALUE, value);
        });
    }

    fn string(&mut self, key: &str, value: &[u8]) {
        let value = &value[..value.len().min(MAX_ATTRIBUTE_BYTES)];
        self.entry(key, |v| protobuf::string(v, any_value::STRING, value));
    }

    fn int(&mut self, key: &str, value: i64) {
        // int64 is a varint of the two's complement (every value here is positive).
        self.entry(key, |v| protobuf::uint(v, any_value::INT, value as u64));
    }

    /// An `ArrayValue`, one `AnyValue` per item, which `element` writes.
    fn array<T>(&mut self, key: &str, items: &[T], mut element: impl FnMut(&mut Vec<u8>, &T)) {
        self.entry(key, |v| {
            protobuf::message(v, any_value::ARRAY, |array| {
                for item in items {
                    protobuf::message(array, ARRAY_VALUES, |value| element(value, item));
                }
            })
        });
    }
}

/// `ScopeSpans.spans`.
pub(crate) const SCOPE_SPANS_SPANS: u32 = 2;
const SPAN_KIND_SERVER: u64 = 2;
/// `Status.code`, and its `STATUS_CODE_ERROR`.
const STATUS_CODE: u32 = 3;
const STATUS_CODE_ERROR: u64 = 2;
/// `KeyValue`'s fields.
pub(crate) const KEY_VALUE_KEY: u32 = 1;
pub(crate) const KEY_VALUE_VALUE: u32 = 2;
/// `ArrayValue.values`.
const ARRAY_VALUES: u32 = 1;

/// `Span`'s fields (opentelemetry/proto/trace/v1/trace.proto).
mod span {
    pub(super) const TRACE_ID: u32 = 1;
    pub(super) const SPAN_ID: u32 = 2;
    pub(super) const TRACE_STATE: u32 = 3;
    pub(super) const PARENT_SPAN_ID: u32 = 4;
    pub(super) const NAME: u32 = 5;
    pub(super) const KIND: u32 = 6;
    pub(super) const START_TIME: u32 = 7;
    pub(super) const END_TIME: u32 = 8;
    pub(super) const ATTRIBUTES: u32 = 9;
    pub(super) const STATUS: u32 = 15;
    pub(super) const FLAGS: u32 = 16;
}

/// `AnyValue`'s cases (opentelemetry/proto/common/v1/common.proto).
pub(crate) mod any_value {
    pub(crate) const STRING: u32 = 1;
    pub(crate) const INT: u32 = 3;
    pub(crate) const ARRAY: u32 = 5;
}

fn hex_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
}

fn unix_nanos(at: SystemTime) -> u64 {
    let nanos = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos();
    u64::try_from(nanos).unwrap_or(u64::MAX)
}

/// The method's name when it is one HTTP defines (RFC 9110, PATCH); `None` for others, which
/// OpenTelemetry reports as `_OTHER` (a client cannot grow the span names' cardinality).
fn known_method(method: &Method) -> Option<&'static str> {
    Some(match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => return None,
    })
}

fn protocol(version: Version) -> &'static [u8] {
    match version {
        Version::HTTP_09 => b"0.9",
        Version::HTTP_10 => b"1.0",
        Version::HTTP_2 => b"2",
        Version::HTTP_3 => b"3",
        _ => b"1.1",
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
