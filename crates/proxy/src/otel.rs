//! OpenTelemetry tracing, the worker's side: one SERVER span per sampled request encoded (OTLP
//! protobuf) into the worker's own buffer. The trace context and sampling are
//! `trace_context`'s; the export (a thread, OTLP/gRPC or OTLP/HTTP) is `otlp`'s.
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

use http::header::HeaderValue;
use http::{Method, Version};

use crate::access_log::{Record, RequestId};
use crate::current::Current;
use crate::otlp::{any_value, SpanSink, KEY_VALUE_KEY, KEY_VALUE_VALUE};
use crate::protobuf;
use crate::trace_context::Trace;

/// A worker hands its spans over once it holds this many, or this many bytes of them.
const SPANS_PER_BATCH: u32 = 64;
pub(crate) const BATCH_BYTES: usize = 64 * 1024;
/// A string attribute is cut to this many bytes (a request head may be 32 KiB), so a span
/// stays under ~8 KiB and the queues' memory is bounded by their span counts.
const MAX_ATTRIBUTE_BYTES: usize = 2048;
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
        sink.hand_over(Arc::clone(config.arc()), encoded, spans);
    }
}

/// One span as an OTLP `Span` message, written as field 2 of `ScopeSpans` (so spans are
/// simply concatenated; `otlp` wraps them), with the HTTP semantic conventions' stable names.
pub(crate) fn write_span(out: &mut Vec<u8>, record: &Record, trace: &Trace, context: &SpanContext) {
    protobuf::message(out, SCOPE_SPANS_SPANS, |span| {
        write_span_fields(span, record, trace, context)
    });
}

/// A span's OTLP fields and attributes (~95 lines: one field or attribute a line or two, in
/// one place, so the span can be checked against OpenTelemetry's HTTP server conventions by
/// reading down).
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
