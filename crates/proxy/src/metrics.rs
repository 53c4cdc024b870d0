//! Metrics without sharing: each worker counts in its own plain (non-atomic) `Stats`, and the
//! admin server asks every worker for a snapshot at scrape time and sums them.
//!
//! ```text
//!  request ─▶ RequestGuard.measure (method, status, sizes, the last upstream attempt's times)
//!          ─▶ guard dropped (the response is over) ─▶ RouteMetrics of its route, in this
//!             worker (Rc, no atomics): a Series per (method, status): count + histograms
//!  admin:  GET /metrics ─▶ ask each worker ─▶ Σ snapshots (keyed by route labels)
//!          + control-plane counters ─▶ text (`exposition`)
//! ```
//!
//! The series are ingress-nginx's (`nginx_ingress_controller_requests`, its request, upstream
//! and size histograms, with its buckets and labels) so its Grafana dashboards work unchanged;
//! label values come from the route (the Ingress's host and path as written), never from the
//! request, so a client cannot create series.
//!
//! The exposition text is written here directly instead of through `prometheus-client`: that
//! crate wants to own live metric objects (shared atomics, a lock around each label family)
//! that the hot path would update, which is exactly the cross-worker sharing we avoid; feeding
//! it a summed snapshot through a custom collector would only wrap the same series in a
//! second data model. The Prometheus text format is short and easy to audit.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use http::Method;
use model::Route;

use crate::buffer::Place;
use crate::error::ErrorSource;

mod exposition;

pub(crate) use exposition::render;

/// ingress-nginx's `--time-buckets` default (Prometheus' default buckets), seconds.
pub(crate) const DEFAULT_TIME_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// ingress-nginx's `--length-buckets` default (10, 20, … 100), bytes: request and response
/// sizes.
pub(crate) const DEFAULT_LENGTH_BUCKETS: [f64; 10] =
    [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0];
/// ingress-nginx's `--size-buckets` default (10 ¹ … 10 ⁷), bytes: `bytes_sent`.
pub(crate) const DEFAULT_SIZE_BUCKETS: [f64; 7] = [10.0, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7];

/// ingress-nginx's request ("socket") families, the names `--exclude-socket-metrics` takes
/// (with or without the `nginx_ingress_controller_` prefix).
pub const SOCKET_METRICS: [&str; 8] = [
    "requests",
    "request_duration_seconds",
    "response_duration_seconds",
    "connect_duration_seconds",
    "header_duration_seconds",
    "request_size",
    "response_size",
    "bytes_sent",
];

/// How often each worker's loop-lag probe (a timer, `housekeeping`) is due.
pub(crate) const LOOP_LAG_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);
/// `sluice_worker_loop_lag_seconds`' upper bounds: from the timer wheel's 1 ms granularity
/// (an idle worker's lag) to a second.
pub(crate) const LOOP_LAG_BOUNDS: [f64; 10] = [
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    f64::INFINITY,
];

/// The histograms' upper bounds, `+Inf` last: from the flags, made once at start.
#[derive(Debug)]
pub(crate) struct Bounds {
    pub(crate) time: Box<[f64]>,
    pub(crate) length: Box<[f64]>,
    pub(crate) size: Box<[f64]>,
}

impl Bounds {
    pub(crate) fn new(options: &MetricOptions) -> Bounds {
        let with_infinity = |bounds: &[f64]| -> Box<[f64]> {
            bounds
                .iter()
                .copied()
                .filter(|b| b.is_finite())
                .chain([f64::INFINITY])
                .collect()
        };
        Bounds {
            time: with_infinity(&options.time_buckets),
            length: with_infinity(&options.length_buckets),
            size: with_infinity(&options.size_buckets),
        }
    }
}

/// The `method` label's values: the methods of RFC 9110 and PATCH, then everything else as
/// `OTHER` (a method is a client's free text: it must not make series).
pub(crate) const METHODS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "OTHER",
];

/// The index of `method` in [`METHODS`].
pub(crate) fn method_label(method: &Method) -> u8 {
    match *method {
        Method::GET => 0,
        Method::HEAD => 1,
        Method::POST => 2,
        Method::PUT => 3,
        Method::DELETE => 4,
        Method::CONNECT => 5,
        Method::OPTIONS => 6,
        Method::TRACE => 7,
        Method::PATCH => 8,
        _ => 9,
    }
}

/// nginx's `$request_length` without the body: request line, header lines, blank line.
pub(crate) fn request_head_length(head: &http::request::Parts) -> u64 {
    let line =
        head.method.as_str().len() + head.uri.path_and_query().map_or(1, |p| p.as_str().len()) + 12;
    let headers: usize = head
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    (line + headers + 2) as u64
}

/// The status counted for a request whose client left before a response: nginx's 499.
pub(crate) const CLIENT_CLOSED: u16 = 499;

/// One worker's counters. Only that worker's thread touches it.
#[derive(Default)]
pub(crate) struct Stats {
    /// Keyed by the address of the route's `Arc`, which the entry keeps alive (so the address
    /// cannot be reused by another route while we count under it). Key 0: no route.
    by_route: HashMap<usize, RouteCounts, BuildHasherDefault<AddressHasher>>,
    /// Routes of replaced configurations that requests in flight still count under.
    retiring: Vec<Rc<RouteMetrics>>,
    /// Counts of routes of replaced configurations, by label, while their Ingress exists.
    retired: HashMap<RouteKey, SeriesList>,
    errors: BTreeMap<(u16, ErrorSource), u64>,
    pub(crate) connect_errors: u64,
    pub(crate) retries: u64,
    pub(crate) open_connections: u64,
    pub(crate) limits: LimitCounts,
    pub(crate) bodies_buffered: BufferedCounts,
    pub(crate) mirrors: MirrorCounts,
    pub(crate) auth: AuthCounts,
    /// Connections closed for a missing or invalid PROXY protocol header.
    pub(crate) proxy_protocol_refused: u64,
    pub(crate) passthrough: PassthroughCounts,
    /// TCP services, by port and upstream.
    pub(crate) streams: BTreeMap<StreamKey, StreamCounts>,
    /// How late the loop-lag probe ran, seconds, over [`LOOP_LAG_BOUNDS`].
    pub(crate) loop_lag: Buckets,
}

/// TLS passthrough connections, by outcome.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PassthroughCounts {
    /// Spliced to an endpoint.
    pub(crate) passed: u64,
    /// Closed: no endpoint could be reached.
    pub(crate) failed: u64,
    /// Closed unspliced: the route's allow- or deny-list refused the client, or the route is
    /// refused.
    pub(crate) refused: u64,
}

/// What the worker did about `max-worker-connections` and the open-files limit.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LimitCounts {
    /// Idle keep-alive connections closed to make room for a new one.
    pub(crate) idle_closed: u64,
    /// Times accepting paused because every connection was busy.
    pub(crate) accept_paused: u64,
    /// Accepts and upstream connects that failed for want of a file descriptor.
    pub(crate) fd_exhausted: u64,
}

/// Request bodies read whole before an upstream was chosen, by where they were kept.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BufferedCounts {
    pub(crate) memory: u64,
    pub(crate) file: u64,
}

/// External auth (`auth-url`): how each request's answer was found.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AuthCounts {
    /// A sub-request was sent.
    pub(crate) misses: u64,
    /// The auth cache held the answer.
    pub(crate) hits: u64,
    /// Another request's sub-request with the same cache key was in flight; its answer was
    /// shared (single-flight).
    pub(crate) shared: u64,
}

/// Mirrored copies of requests (`mirror-target`), by outcome.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MirrorCounts {
    /// The mirror answered (its answer was dropped).
    pub(crate) sent: u64,
    /// The copy failed on the way: no endpoint, connect, timeout, the body dropped.
    pub(crate) failed: u64,
    /// Not sent: mirror-max-in-flight reached, or its target expanded to no valid target.
    pub(crate) dropped: u64,
}

/// What a worker hands to the admin server.
#[derive(Debug, Default, Clone)]
pub(crate) struct Snapshot {
    /// Client connections by protocol and state, counted when the snapshot is taken.
    pub(crate) connections: ConnectionCounts,
    /// By route labels, method (index in [`METHODS`]) and status.
    pub(crate) series: BTreeMap<(RouteKey, u8, u16), Series>,
    pub(crate) errors: BTreeMap<(u16, ErrorSource), u64>,
    pub(crate) connect_errors: u64,
    pub(crate) retries: u64,
    pub(crate) open_connections: u64,
    /// Client connections accepted since start (set by the worker).
    pub(crate) accepted: u64,
    pub(crate) limits: LimitCounts,
    pub(crate) bodies_buffered: BufferedCounts,
    pub(crate) mirrors: MirrorCounts,
    pub(crate) auth: AuthCounts,
    pub(crate) proxy_protocol_refused: u64,
    pub(crate) passthrough: PassthroughCounts,
    pub(crate) streams: BTreeMap<StreamKey, StreamCounts>,
    pub(crate) loop_lag: Buckets,
}

/// Open client connections: `[protocol][state]`, protocol as [`PROTOCOLS`], state
/// `0` active (a request in flight), `1` idle.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionCounts(pub(crate) [[u64; 2]; 4]);

/// The `protocol` label values of `sluice_client_connections`.
pub(crate) const PROTOCOLS: [&str; 4] = ["http1", "https1", "h2", "h2c"];

impl ConnectionCounts {
    /// Counts one connection; `protocol` indexes [`PROTOCOLS`].
    pub(crate) fn count(&mut self, protocol: usize, active: bool) {
        self.0[protocol][usize::from(!active)] += 1;
    }
}

/// A histogram over fixed `bounds` (the last one `+Inf`): per-bucket counts, not cumulative.
#[derive(Debug, Default, Clone)]
pub(crate) struct Buckets {
    /// Per bucket of its bounds (sized at the first observation).
    pub(crate) counts: Vec<u64>,
    pub(crate) sum: f64,
}

impl Buckets {
    fn observe(&mut self, bounds: &[f64], value: f64) {
        if self.counts.len() != bounds.len() {
            self.counts.resize(bounds.len(), 0);
        }
        let bucket = bounds
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(bounds.len() - 1);
        self.counts[bucket] += 1;
        self.sum += value;
    }

    fn add(&mut self, other: &Self) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }
}

/// Everything counted for one route, method and status: ingress-nginx's request families.
#[derive(Debug, Default, Clone)]
pub(crate) struct Series {
    pub(crate) requests: u64,
    /// `$request_time`: the request head's arrival to the end of the response.
    pub(crate) request_time: Buckets,
    /// `$upstream_response_time`, `$upstream_connect_time`, `$upstream_header_time` of the
    /// last upstream attempt (the one whose answer the client got); requests that reached no
    /// upstream are not observed.
    pub(crate) upstream_response_time: Buckets,
    pub(crate) upstream_connect_time: Buckets,
    pub(crate) upstream_header_time: Buckets,
    /// `$request_length`: request line, headers and body.
    pub(crate) request_size: Buckets,
    /// `$bytes_sent`: status line, headers and body (ingress-nginx observes it twice, as
    /// `response_size` and the deprecated `bytes_sent`, with different buckets).
    pub(crate) response_size: Buckets,
    pub(crate) bytes_sent: Buckets,
}

impl Series {
    fn add(&mut self, other: &Series) {
        self.requests += other.requests;
        self.request_time.add(&other.request_time);
        self.upstream_response_time
            .add(&other.upstream_response_time);
        self.upstream_connect_time.add(&other.upstream_connect_time);
        self.upstream_header_time.add(&other.upstream_header_time);
        self.request_size.add(&other.request_size);
        self.response_size.add(&other.response_size);
        self.bytes_sent.add(&other.bytes_sent);
    }
}

/// A route's series by `(method, status)`: few per route, so a short vector beats a map.
type SeriesList = Vec<((u8, u16), Series)>;

fn add_series(list: &mut SeriesList, key: (u8, u16), series: &Series) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, mine)) => mine.add(series),
        None => list.push((key, series.clone())),
    }
}

/// What one request measured, gathered as it goes through the pipeline and counted when its
/// response is over (`RequestGuard`'s drop).
pub(crate) struct Measure {
    /// Where it is counted: set once the request is routed (or answered without a route).
    pub(crate) route: Option<Rc<RouteMetrics>>,
    /// Index in [`METHODS`].
    pub(crate) method: u8,
    /// [`CLIENT_CLOSED`] until a response head is chosen.
    pub(crate) status: u16,
    pub(crate) request_bytes: u64,
    pub(crate) response_head_bytes: u64,
    pub(crate) response_body_bytes: u64,
    /// The last upstream attempt.
    pub(crate) upstream: Option<UpstreamTimes>,
}

impl Default for Measure {
    fn default() -> Self {
        Measure {
            route: None,
            method: 0,
            status: CLIENT_CLOSED,
            request_bytes: 0,
            response_head_bytes: 0,
            response_body_bytes: 0,
            upstream: None,
        }
    }
}

/// When an upstream attempt started, had its connection and got its response head (or failed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpstreamTimes {
    pub(crate) start: Instant,
    pub(crate) connected: Option<Instant>,
    pub(crate) answered: Option<Instant>,
}

impl Measure {
    /// Status line, header lines and the blank line, as HTTP/1.1 writes them.
    pub(crate) fn responded(&mut self, status: u16, headers: &http::HeaderMap) {
        self.status = status;
        self.response_head_bytes = 17
            + headers
                .iter()
                .map(|(name, value)| (name.as_str().len() + value.len() + 4) as u64)
                .sum::<u64>();
    }
}

/// A route's labels and this worker's series for it. Requests in flight hold it (an `Rc`:
/// the worker's own), so a request that ends after a configuration swap still counts.
pub(crate) struct RouteMetrics {
    pub(crate) labels: RouteLabels,
    series: RefCell<SeriesList>,
}

impl RouteMetrics {
    /// Counts a finished request.
    pub(crate) fn finished(
        &self,
        measure: &Measure,
        end: Instant,
        start: Instant,
        bounds: &Bounds,
    ) {
        let mut list = self.series.borrow_mut();
        let key = (measure.method, measure.status);
        let index = match list.iter().position(|(k, _)| *k == key) {
            Some(index) => index,
            None => {
                list.push((key, Series::default()));
                list.len() - 1
            }
        };
        let series = &mut list[index].1;
        series.requests += 1;
        series.request_time.observe(
            &bounds.time,
            end.saturating_duration_since(start).as_secs_f64(),
        );
        if let Some(upstream) = &measure.upstream {
            let since = |t: Instant| t.saturating_duration_since(upstream.start).as_secs_f64();
            series
                .upstream_response_time
                .observe(&bounds.time, since(end));
            if let Some(connected) = upstream.connected {
                series
                    .upstream_connect_time
                    .observe(&bounds.time, since(connected));
                if let Some(answered) = upstream.answered {
                    series
                        .upstream_header_time
                        .observe(&bounds.time, since(answered));
                }
            }
        }
        series
            .request_size
            .observe(&bounds.length, measure.request_bytes as f64);
        let sent = (measure.response_head_bytes + measure.response_body_bytes) as f64;
        series.response_size.observe(&bounds.length, sent);
        series.bytes_sent.observe(&bounds.size, sent);
    }
}

struct RouteCounts {
    /// Keeps the route's address (the key) from being reused while counted under.
    _route: Option<Arc<Route>>,
    metrics: Rc<RouteMetrics>,
}

/// One worker's counters for one TCP service (port and upstream).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StreamCounts {
    pub(crate) accepted: u64,
    pub(crate) active: u64,
    /// Closed without reaching an endpoint (none, or none answered).
    pub(crate) failed: u64,
    /// Closed for a missing or invalid PROXY protocol header.
    pub(crate) refused: u64,
    /// Closed because their endpoint left the Service (after worker-shutdown-timeout).
    pub(crate) endpoint_removed: u64,
    /// Bytes from clients: of ended connections (a scrape adds the open ones').
    pub(crate) bytes_received: u64,
    /// Bytes to clients.
    pub(crate) bytes_sent: u64,
}

/// Per TCP service: (listen port, `tcp-NAMESPACE-NAME-PORT`).
pub(crate) type StreamKey = (u16, String);

/// ingress-nginx's flags that shape its request families: `--metrics-per-host`,
/// `--report-status-classes`, `--time-buckets`, `--length-buckets`, `--size-buckets` and
/// `--exclude-socket-metrics`.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricOptions {
    /// The request families carry the `host` label (ingress-nginx's default: true).
    pub per_host: bool,
    /// `status` is the class (`2xx`, `4xx`, …) instead of the code (default: false).
    pub status_classes: bool,
    /// Upper bounds of the request families' histograms (`+Inf` is implied), each strictly
    /// increasing: durations in seconds, request and response lengths, bytes sent.
    pub time_buckets: Vec<f64>,
    pub length_buckets: Vec<f64>,
    pub size_buckets: Vec<f64>,
    /// Request families not exported, by name without the `nginx_ingress_controller_` prefix
    /// (`requests`, `request_duration_seconds`, …).
    pub excluded: Vec<String>,
}

impl Default for MetricOptions {
    fn default() -> Self {
        MetricOptions {
            per_host: true,
            status_classes: false,
            time_buckets: DEFAULT_TIME_BUCKETS.to_vec(),
            length_buckets: DEFAULT_LENGTH_BUCKETS.to_vec(),
            size_buckets: DEFAULT_SIZE_BUCKETS.to_vec(),
            excluded: Vec::new(),
        }
    }
}

/// Who this controller is, in ingress-nginx's metric labels `controller_namespace`,
/// `controller_class` and `controller_pod` (dashboards select on them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricIdentity {
    /// The pod's namespace (`$POD_NAMESPACE`), empty outside Kubernetes.
    pub namespace: String,
    /// The IngressClass controller value served (`--controller-class`).
    pub class: String,
    /// The pod's name (`$POD_NAME`), else the host name.
    pub pod: String,
}

/// Hashes a pointer-sized key with one multiplication; the keys are addresses, already unique.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Stats {
    /// The loop-lag probe ran `late` after it was due.
    pub(crate) fn loop_lag(&mut self, late: std::time::Duration) {
        self.loop_lag.observe(&LOOP_LAG_BOUNDS, late.as_secs_f64());
    }

    /// Where requests on `route` (or on none) are counted: made once per route and worker.
    pub(crate) fn route(&mut self, route: Option<&Arc<Route>>) -> &Rc<RouteMetrics> {
        let key = route.map_or(0, |r| Arc::as_ptr(r) as usize);
        &self
            .by_route
            .entry(key)
            .or_insert_with(|| RouteCounts {
                _route: route.cloned(),
                metrics: Rc::new(RouteMetrics {
                    labels: RouteLabels::of(route.map(|r| &**r)),
                    series: RefCell::default(),
                }),
            })
            .metrics
    }

    /// Counts a response the proxy produced itself (404, 502, 503, 504, 413, 431, ...), by
    /// whose fault it was.
    pub(crate) fn error(&mut self, status: u16, source: ErrorSource) {
        *self.errors.entry((status, source)).or_default() += 1;
    }

    pub(crate) fn body_buffered(&mut self, place: Place) {
        match place {
            Place::Memory => self.bodies_buffered.memory += 1,
            Place::File => self.bodies_buffered.file += 1,
        }
    }

    /// A new configuration: releases the old one's routes, keeps their counts under their
    /// labels while `live` (the Ingresses it serves) still has their Ingress; an Ingress
    /// that is gone takes its series with it, as in ingress-nginx.
    pub(crate) fn retire_routes(&mut self, live: &HashSet<(&str, &str)>) {
        let drained: Vec<_> = self.by_route.drain().map(|(_, c)| c.metrics).collect();
        self.retiring.extend(drained);
        self.settle();
        self.retired.retain(|key, _| {
            key.ingress.is_empty() || live.contains(&(key.namespace.as_str(), key.ingress.as_str()))
        });
    }

    /// Folds retired routes no request holds any more into the label-keyed counts.
    fn settle(&mut self) {
        let retired = &mut self.retired;
        self.retiring.retain(|metrics| {
            if Rc::strong_count(metrics) > 1 {
                return true;
            }
            let list = retired.entry(RouteKey::of(&metrics.labels)).or_default();
            for (key, series) in metrics.series.borrow().iter() {
                add_series(list, *key, series);
            }
            false
        });
    }

    pub(crate) fn snapshot(&mut self) -> Snapshot {
        self.settle();
        let mut series = BTreeMap::new();
        let mut add = |route: &RouteKey, list: &SeriesList| {
            for ((method, status), s) in list {
                series
                    .entry((route.clone(), *method, *status))
                    .or_insert_with(Series::default)
                    .add(s);
            }
        };
        for (route, list) in &self.retired {
            add(route, list);
        }
        for metrics in self
            .by_route
            .values()
            .map(|c| &c.metrics)
            .chain(&self.retiring)
        {
            add(&RouteKey::of(&metrics.labels), &metrics.series.borrow());
        }
        Snapshot {
            connections: ConnectionCounts::default(),
            series,
            errors: self.errors.clone(),
            connect_errors: self.connect_errors,
            retries: self.retries,
            open_connections: self.open_connections,
            accepted: 0,
            limits: self.limits,
            bodies_buffered: self.bodies_buffered,
            mirrors: self.mirrors,
            auth: self.auth,
            proxy_protocol_refused: self.proxy_protocol_refused,
            passthrough: self.passthrough,
            streams: self.streams.clone(),
            loop_lag: self.loop_lag.clone(),
        }
    }
}

/// The labels a route's series are kept under across configurations.
#[derive(Debug, Default, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct RouteKey {
    pub(crate) namespace: String,
    pub(crate) ingress: String,
    pub(crate) service: String,
    pub(crate) host: String,
    pub(crate) path: String,
    /// Empty, or the canary the requests went to.
    pub(crate) canary: String,
}

impl RouteKey {
    fn of(labels: &RouteLabels) -> RouteKey {
        RouteKey {
            namespace: labels.namespace.clone(),
            ingress: labels.ingress.clone(),
            service: labels.service.clone(),
            host: labels.host.clone(),
            path: labels.path.clone(),
            canary: labels.canary.clone(),
        }
    }
}

/// What logs (and metric labels) say about a route, made once per route and worker.
#[derive(Debug, Default)]
pub(crate) struct RouteLabels {
    pub(crate) namespace: String,
    pub(crate) ingress: String,
    pub(crate) service: String,
    pub(crate) service_port: String,
    /// The rule's host and path as written.
    pub(crate) host: String,
    pub(crate) path: String,
    /// ingress-nginx's `$proxy_upstream_name`: `NAMESPACE-SERVICE-PORT`.
    pub(crate) upstream_name: String,
    /// The canary's upstream name when the request went to one (ingress-nginx's
    /// `$proxy_alternative_upstream_name` and `canary` label); empty otherwise.
    pub(crate) canary: String,
    /// `enable-access-log`.
    pub(crate) access_log: bool,
}

impl RouteLabels {
    fn of(route: Option<&Route>) -> RouteLabels {
        let Some(route) = route else {
            return RouteLabels {
                access_log: true,
                ..RouteLabels::default()
            };
        };
        let upstream_name = route.upstream_name().unwrap_or_default();
        RouteLabels {
            namespace: route.ingress.namespace.to_string(),
            ingress: route.ingress.name.to_string(),
            service: route.service.to_string(),
            service_port: route.site.service_port.to_string(),
            host: route.site.host.to_string(),
            path: route.site.path.to_string(),
            upstream_name,
            canary: route
                .alternative_name()
                .map_or_else(String::new, ToString::to_string),
            access_log: route.policy.access_log,
        }
    }
}

impl Snapshot {
    pub(crate) fn add(&mut self, other: &Snapshot) {
        for (key, series) in &other.series {
            self.series.entry(key.clone()).or_default().add(series);
        }
        for (key, n) in &other.errors {
            *self.errors.entry(*key).or_default() += n;
        }
        self.connect_errors += other.connect_errors;
        self.retries += other.retries;
        self.open_connections += other.open_connections;
        self.accepted += other.accepted;
        for (mine, theirs) in self.connections.0.iter_mut().zip(other.connections.0) {
            mine[0] += theirs[0];
            mine[1] += theirs[1];
        }
        self.limits.idle_closed += other.limits.idle_closed;
        self.limits.accept_paused += other.limits.accept_paused;
        self.limits.fd_exhausted += other.limits.fd_exhausted;
        self.bodies_buffered.memory += other.bodies_buffered.memory;
        self.bodies_buffered.file += other.bodies_buffered.file;
        self.mirrors.sent += other.mirrors.sent;
        self.mirrors.failed += other.mirrors.failed;
        self.mirrors.dropped += other.mirrors.dropped;
        self.auth.misses += other.auth.misses;
        self.auth.hits += other.auth.hits;
        self.auth.shared += other.auth.shared;
        self.proxy_protocol_refused += other.proxy_protocol_refused;
        self.passthrough.passed += other.passthrough.passed;
        self.passthrough.failed += other.passthrough.failed;
        self.passthrough.refused += other.passthrough.refused;
        self.loop_lag.add(&other.loop_lag);
        for (key, theirs) in &other.streams {
            let mine = self.streams.entry(key.clone()).or_default();
            mine.accepted += theirs.accepted;
            mine.active += theirs.active;
            mine.failed += theirs.failed;
            mine.refused += theirs.refused;
            mine.endpoint_removed += theirs.endpoint_removed;
            mine.bytes_received += theirs.bytes_received;
            mine.bytes_sent += theirs.bytes_sent;
        }
    }
}

// The status page's one view of the counters (admin.rs): kept in its own block so the
// exposition can change without touching it.
impl Snapshot {
    /// Requests answered and how many of them were 5xx, by Ingress (`namespace/name`; empty
    /// for requests no route matched).
    pub(crate) fn by_ingress(&self) -> BTreeMap<String, (u64, u64)> {
        let mut by_ingress = BTreeMap::<String, (u64, u64)>::new();
        for ((route, _method, status), series) in &self.series {
            let ingress = if route.ingress.is_empty() {
                String::new()
            } else {
                format!("{}/{}", route.namespace, route.ingress)
            };
            let (total, server_errors) = by_ingress.entry(ingress).or_default();
            *total += series.requests;
            if *status >= 500 {
                *server_errors += series.requests;
            }
        }
        by_ingress
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::Shared;
    use model::{Backend, NamespacedName, RouteSite};

    fn route(namespace: &str, name: &str) -> Arc<Route> {
        Arc::new(Route {
            ingress: NamespacedName::new(namespace, name),
            service: format!("{name}-svc").into(),
            backend: Arc::new(Backend::unresolved()),
            policy: Default::default(),
            site: RouteSite {
                host: "shop.example".into(),
                path: "/api".into(),
                service_port: "80".into(),
            },
            traffic: None,
            not_found: false,
        })
    }

    /// Counts one request on `route` as the pipeline does: routed, answered, finished.
    fn request(stats: &mut Stats, route: Option<&Arc<Route>>, status: u16, millis: u64) {
        let bounds = Bounds::new(&MetricOptions::default());
        request_with(stats, route, status, millis, &bounds)
    }

    fn request_with(
        stats: &mut Stats,
        route: Option<&Arc<Route>>,
        status: u16,
        millis: u64,
        bounds: &Bounds,
    ) {
        let start = Instant::now();
        let mut measure = Measure {
            route: Some(stats.route(route).clone()),
            request_bytes: 15,
            ..Measure::default()
        };
        measure.responded(status, &http::HeaderMap::new());
        measure.response_body_bytes = 983;
        measure.upstream = Some(UpstreamTimes {
            start,
            connected: Some(start),
            answered: Some(start + Duration::from_millis(millis / 2)),
        });
        let end = start + Duration::from_millis(millis);
        measure
            .route
            .clone()
            .unwrap()
            .finished(&measure, end, start, bounds);
    }

    use std::time::Duration;

    fn live<'a>(names: &'a [(&'a str, &'a str)]) -> HashSet<(&'a str, &'a str)> {
        names.iter().copied().collect()
    }

    #[test]
    fn counts_survive_a_swap_while_their_ingress_exists_and_sum_across_workers() {
        let web = route("default", "web");
        let gone = route("default", "gone");
        let mut a = Stats::default();
        request(&mut a, Some(&web), 200, 3);
        request(&mut a, Some(&gone), 200, 3);
        request(&mut a, None, 404, 1);
        // A request still in flight on the old configuration's route when it is replaced.
        let in_flight = a.route(Some(&web)).clone();
        a.retire_routes(&live(&[("default", "web")]));
        let mut measure = Measure {
            route: Some(in_flight.clone()),
            ..Measure::default()
        };
        measure.responded(200, &http::HeaderMap::new());
        let bounds = Bounds::new(&MetricOptions::default());
        in_flight.finished(&measure, Instant::now(), Instant::now(), &bounds);
        drop((measure, in_flight));
        request(&mut a, Some(&web), 200, 3);

        let mut b = Stats::default();
        request(&mut b, Some(&route("default", "web")), 200, 20);

        let mut total = Snapshot::default();
        total.add(&a.snapshot());
        total.add(&b.snapshot());
        let key = |ingress: &str, status| {
            let labels = RouteLabels::of(Some(&route("default", ingress)));
            (RouteKey::of(&labels), 0u8, status)
        };
        let web_200 = &total.series[&key("web", 200)];
        assert_eq!(web_200.requests, 4);
        assert_eq!(web_200.request_time.counts.iter().sum::<u64>(), 4);
        // 3 ms, 3 ms, 0 ms: the first bucket (5 ms); 20 ms: the third (25 ms).
        assert_eq!(web_200.request_time.counts[0], 3);
        assert_eq!(web_200.request_time.counts[2], 1);
        // 17 + 983 bytes sent: above every length bucket, in the 1 kB size bucket.
        assert_eq!(web_200.response_size.counts[10], 3);
        assert_eq!(web_200.bytes_sent.counts[2], 3);
        assert_eq!(web_200.request_size.counts[1], 3);
        assert!(
            !total.series.contains_key(&key("gone", 200)),
            "an Ingress that is gone takes its series with it"
        );
        let unrouted = (RouteKey::default(), 0u8, 404);
        assert_eq!(total.series[&unrouted].requests, 1);
    }

    #[test]
    fn the_exposition_has_ingress_nginx_families_cumulative_and_escaped() {
        let identity = crate::MetricIdentity {
            namespace: "ingress".into(),
            class: "k8s.io/ingress-nginx".into(),
            pod: "sluice-1".into(),
        };
        let shared = Shared::new(
            &crate::access_log::AccessLogOutput::Stdout,
            identity,
            Default::default(),
        )
        .unwrap();
        let mut stats = Stats::default();
        let odd = route("ns", "a\"b");
        request(&mut stats, Some(&odd), 502, 1);
        request(&mut stats, Some(&odd), 502, 100_000);
        request(&mut stats, None, 404, 1);
        let text = render(&stats.snapshot(), &shared, 2);
        let labels = r#"canary="",controller_class="k8s.io/ingress-nginx",controller_namespace="ingress",controller_pod="sluice-1",host="shop.example",ingress="a\"b",method="GET",namespace="ns",path="/api",service="a\"b-svc",status="502""#;
        for line in [
            format!("nginx_ingress_controller_requests{{{labels}}} 2"),
            format!("nginx_ingress_controller_request_duration_seconds_bucket{{{labels},le=\"0.005\"}} 1"),
            format!("nginx_ingress_controller_request_duration_seconds_bucket{{{labels},le=\"10\"}} 1"),
            format!("nginx_ingress_controller_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} 2"),
            format!("nginx_ingress_controller_request_duration_seconds_count{{{labels}}} 2"),
            format!("nginx_ingress_controller_response_duration_seconds_count{{{labels}}} 2"),
            format!("nginx_ingress_controller_bytes_sent_bucket{{{labels},le=\"1000\"}} 2"),
            r#"sluice_requests_total{ingress="ns/a\"b",service="a\"b-svc",status="502"} 2"#.to_owned(),
            r#"sluice_requests_total{ingress="",service="",status="404"} 1"#.to_owned(),
            "nginx_ingress_controller_config_last_reload_successful{controller_class=\"k8s.io/ingress-nginx\",controller_namespace=\"ingress\",controller_pod=\"sluice-1\"} 0".to_owned(),
            "sluice_ready 0".to_owned(),
            "sluice_workers 2".to_owned(),
        ] {
            assert!(text.contains(&format!("{line}\n")), "missing {line}\n{text}");
        }
        assert!(
            !text.contains("status=\"404\"}") || !text.contains("nginx_ingress_controller_requests{canary=\"\",controller_class=\"k8s.io/ingress-nginx\",controller_namespace=\"ingress\",controller_pod=\"sluice-1\",host=\"\""),
            "requests no rule matched stay out of ingress-nginx's families"
        );
    }

    #[test]
    fn loop_lag_sums_workers_into_one_cumulative_histogram() {
        let shared = shared_with(MetricOptions::default());
        let ms = std::time::Duration::from_millis;
        let mut first = Stats::default();
        first.loop_lag(ms(1));
        first.loop_lag(ms(30));
        let mut second = Stats::default();
        second.loop_lag(ms(1));
        second.loop_lag(ms(2_000));
        let mut total = first.snapshot();
        total.add(&second.snapshot());
        let text = render(&total, &shared, 2);
        for line in [
            "sluice_worker_loop_lag_seconds_bucket{le=\"0.002\"} 2",
            "sluice_worker_loop_lag_seconds_bucket{le=\"0.025\"} 2",
            "sluice_worker_loop_lag_seconds_bucket{le=\"0.05\"} 3",
            "sluice_worker_loop_lag_seconds_bucket{le=\"1\"} 3",
            "sluice_worker_loop_lag_seconds_bucket{le=\"+Inf\"} 4",
            "sluice_worker_loop_lag_seconds_sum 2.032",
            "sluice_worker_loop_lag_seconds_count 4",
        ] {
            assert!(
                text.contains(&format!("{line}\n")),
                "missing {line}\n{text}"
            );
        }
    }

    /// The proxy's shared state with these metric flags and no identity.
    fn shared_with(options: MetricOptions) -> Shared {
        Shared::new(
            &crate::access_log::AccessLogOutput::Stdout,
            Default::default(),
            options,
        )
        .unwrap()
    }

    #[test]
    fn bucket_flags_set_the_bounds_and_excluded_families_are_not_exported() {
        let options = MetricOptions {
            time_buckets: vec![0.05, 2.0],
            size_buckets: vec![500.0],
            excluded: vec!["request_size".into(), "requests".into()],
            ..Default::default()
        };
        let shared = shared_with(options);
        let mut stats = Stats::default();
        let web = route("ns", "web");
        for millis in [10, 100, 3000] {
            request_with(&mut stats, Some(&web), 200, millis, &shared.bounds);
        }
        let text = render(&stats.snapshot(), &shared, 1);
        let labels = r#"canary="",controller_class="",controller_namespace="",controller_pod="",host="shop.example",ingress="web",method="GET",namespace="ns",path="/api",service="web-svc",status="200""#;
        let family = "nginx_ingress_controller_request_duration_seconds_bucket";
        let buckets: Vec<&str> = text.lines().filter(|l| l.starts_with(family)).collect();
        assert_eq!(
            buckets,
            [
                format!("{family}{{{labels},le=\"0.05\"}} 1"),
                format!("{family}{{{labels},le=\"2\"}} 2"),
                format!("{family}{{{labels},le=\"+Inf\"}} 3"),
            ],
            "{text}"
        );
        // 17 + 983 bytes: above the one size bound.
        assert!(text.contains(&format!(
            "nginx_ingress_controller_bytes_sent_bucket{{{labels},le=\"500\"}} 0\n"
        )));
        assert!(
            !text.contains("nginx_ingress_controller_request_size"),
            "{text}"
        );
        assert!(
            !text.contains("nginx_ingress_controller_requests{"),
            "{text}"
        );
        assert!(text.contains("nginx_ingress_controller_response_size_count{"));
    }

    #[test]
    fn status_classes_and_no_host_label_sum_series_as_ingress_nginx_flags_ask() {
        let options = MetricOptions {
            per_host: false,
            status_classes: true,
            ..Default::default()
        };
        let shared = shared_with(options);
        let mut stats = Stats::default();
        let web = route("ns", "web");
        request(&mut stats, Some(&web), 502, 1);
        request(&mut stats, Some(&web), 503, 1);
        request(&mut stats, Some(&web), 200, 1);
        let text = render(&stats.snapshot(), &shared, 1);
        let labels = r#"canary="",controller_class="",controller_namespace="",controller_pod="",ingress="web",method="GET",namespace="ns",path="/api",service="web-svc""#;
        assert!(
            text.contains(&format!(
                "nginx_ingress_controller_requests{{{labels},status=\"5xx\"}} 2\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "nginx_ingress_controller_requests{{{labels},status=\"2xx\"}} 1\n"
            )),
            "{text}"
        );
        assert!(!text.contains("host=\"shop.example\""), "{text}");
    }

    #[test]
    fn methods_outside_the_standard_set_share_one_label() {
        assert_eq!(METHODS[usize::from(method_label(&Method::PATCH))], "PATCH");
        let custom = Method::from_bytes(b"PROPFIND").unwrap();
        assert_eq!(METHODS[usize::from(method_label(&custom))], "OTHER");
    }
}
