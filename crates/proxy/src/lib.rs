//! Sluice's data plane: listeners, TLS, the HTTP server, the upstream pool, load balancing,
//! retries, and the admin endpoints.
//!
//! ```text
//!  control plane ──publish(Arc<Compiled>)──▶ Shared.config (ArcSwap) ──wake──▶ every worker
//!                 ─endpoints_changed()────▶ (endpoint sets swapped in place)   (pool sweep)
//!
//!  worker 1..N (own thread, own current-thread runtime, own SO_REUSEPORT sockets, own pool)
//!   :http  accept ─▶ HTTP/1.1 ───────────────────────────┐
//!   :https accept ─▶ TLS (cert by SNI from the current  ─┤─▶ respond(request)
//!                    config) ─ALPN─▶ HTTP/2 | HTTP/1.1 ──┘        │
//!   (ports Gateway listeners declare: bound per publish, `declared_ports`, with TCP/UDP
//!    service ports under one lock, a failed bind retried every few seconds, `ports`; a
//!    connection to a Gateway's own address: that Gateway's routes and certificates, `sites`)
//!   HTTP/1.1: Sluice's inline server; hyper takes a connection over at its first request
//!   with a body, an expectation or an upgrade (or HTTP/1.0, or a bad head). HTTP/2: Sluice's
//!   own server (`h2_server`: no buffer held by an idle connection; what each poll of a
//!   connection writes leaves in one TLS record and one write).
//!        one pipeline, fixed phases, each reading the matched route's policy (`forward`):
//!        method, Host, path decoded + normalised (model::target) ─ bad ─▶ 400/405 ┐
//!        a Gateway listener's pre-routing filters (`pre_routing`: ExternalAuth      │
//!        sub-requests in order; deny ─▶ the auth server's answer; unusable ─▶ 500) ┤
//!        route(host, normalised path) on the current config ─ none ─▶ 404 ───────┤
//!        access (refused route ─▶ 503, CORS preflight ─▶ 204, allow/deny ─▶ 403) │
//!        limits (limit-rps/-rpm/-connections, zones shared by workers ─▶ 503/429) │
//!        ─▶ redirects (app-root, permanent/temporal, https) ─▶ rewrite-target    │
//!        ─▶ header edits                                                         │
//!        no endpoint ─▶ 503 │ too big ─▶ 413 │ slow ─▶ 408 ──────────────────────┤ ProxyError
//!                                     (status + source: client/upstream/proxy/config)
//!        request headers: X-Forwarded-*, X-Real-IP (the real client address: the peer, or
//!        whom a peer in proxy-real-ip-cidr names), X-Request-ID, X-Original-*
//!        request body read whole first (memory, else an unnamed temporary file: `buffer`)
//!        unless proxy-request-buffering is off, then streamed
//!        pick endpoint (round robin | least request | upstream-hash-by ring, set-aside)
//!        ─▶ pooled or fresh HTTP/1.1 upstream connection, plain or TLS (the route's
//!           UpstreamTls: one rustls client per setting per worker, `upstream_tls`)
//!           ─ fail (proxy-next-upstream: error, timeout, listed statuses)
//!           ─▶ next endpoint (bounded by tries and timeout; a Gateway route's
//!           `timeouts.request` bounds all of it: 504, `request_timeout`)
//!           (Sluice's own client, run inside the request's future: no task, no channels)
//!        ─▶ or, on gRPC / h2c routes, a stream on a shared HTTP/2 connection (Sluice's
//!           own client, `h2_client`, on the server's codecs; its connection task on this
//!           worker; refused streams sent again; grpc-timeout; `upstream_h2`)
//!        (traced routes: traceparent upstream, a span per sampled request ─▶ `otel`, `otlp`)
//!        ─▶ response head (+ HSTS) ─▶ client; the body is read off the upstream socket as the
//!           client side polls it; connection back to the pool at its end; 101 ─▶ spliced
//!           tunnel (closed after proxy-read-timeout without a byte)
//!   every client socket: client-send-timeout on writes, lingering close, TCP keepalive
//!   TCP service ports (opened/closed by publish) ─▶ splice to an endpoint (`stream`; the
//!   bytes move by splice(2), socket to pipe to socket: `zero_copy`, as for TLS passthrough)
//!   UDP service ports (opened/closed by publish) ─▶ a session per client with one endpoint,
//!   its answers sent back from the port (`udp`)
//!
//!  exporter thread: spans ─▶ OTLP/HTTP ─▶ otlp-collector-host (`otlp`)
//!  admin thread (--admin-listen): /healthz /ready /metrics (sums per-worker counters at scrape)
//!  status thread (--status-listen, loopback only): / (the status page: routes, endpoints,
//!                 certificates, diagnostics, swaps, request rates per Ingress) and /config
//!
//!  SIGTERM ─▶ Proxy::terminating(): /ready 503, listeners still serve (--shutdown-grace-period,
//!             timed by the caller), each response ends its connection (HTTP/1 `Connection:
//!             close`, HTTP/2 GOAWAY) so clients move to ready replicas
//!          ─▶ Proxy::shutdown(): stop signal ─▶ each worker's own flag
//!             ─▶ stop accepting, drain within worker-shutdown-timeout ─▶ admin stops last
//! ```
//!
//! Nothing on a request's path is shared between workers except immutable configuration,
//! read through `ArcSwap` without touching a shared reference count (see `worker::Worker::config`).

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::watch;

mod access_log;
mod admin;
mod affinity;
mod answer;
mod answer_here;
mod attempts;
mod auth;
mod auth_cache;
mod balance;
mod basic_auth;
mod body;
mod buffer;
mod client;
mod client_addr;
mod client_cert;
mod compress;
mod conn_cap;
mod cors;
mod current;
mod date;
mod deadline;
mod declared_ports;
mod digest_auth;
mod error;
mod errors;
mod ext_authz;
mod fallback_cert;
mod fds;
mod forward;
mod front_door;
#[doc(hidden)]
pub mod fuzz;
mod h2_client;
mod h2_replay;
mod h2_server;
mod h2_socket;
mod handshake;
mod hash_key;
mod headers;
mod heavy;
mod history;
mod housekeeping;
mod limits;
mod linger;
mod listen;
mod live_endpoints;
mod metrics;
mod mirror;
mod normalise;
mod otel;
mod otlp;
mod passthrough;
mod peek;
mod pipeline;
mod pool;
mod ports;
mod pre_routing;
mod protobuf;
mod proxy_protocol;
mod request_body;
mod request_timeout;
mod response_body;
mod response_headers;
mod resumption;
mod rewrite;
mod ring;
mod runtime;
mod server;
mod shared;
mod sites;
mod spliced;
mod stall;
mod status_page;
mod stream;
mod tee;
mod tls;
mod tls_route;
mod tls_server;
mod trace_context;
mod tunnel;
mod udp;
mod upstream;
mod upstream_h2;
mod upstream_tls;
mod upstreams;
mod worker;
mod zero_copy;

pub use access_log::AccessLogOutput;
pub use admin::HealthCheck;
pub use fds::{raise_open_files_limit, set_open_files_limit, OpenFilesLimit};
pub use listen::StartError;
pub use metrics::{MetricIdentity, MetricOptions, SOCKET_METRICS};
pub use ports::DEFAULT_PORT_RETRY_INTERVAL;

use shared::Shared;

/// Where the proxy listens and how many workers serve.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Port 0 is allowed: the first worker's socket learns the port, the others bind that one.
    /// TCP service ports (`Compiled::tcp_services`) are bound on this address too.
    pub http_listen: SocketAddr,
    pub https_listen: SocketAddr,
    /// Probes and metrics only: the port deployments expose.
    pub admin_listen: SocketAddr,
    /// What the admin listener's `/healthz` answers, and where else.
    pub health: HealthCheck,
    /// The status page and `/config`, which describe every tenant: must be a loopback address.
    pub status_listen: SocketAddr,
    pub workers: NonZeroUsize,
    /// Where access log lines go (the ConfigMap says whether and how they are written).
    pub access_log: AccessLogOutput,
    /// ingress-nginx's constant labels on its metric families.
    pub metric_identity: MetricIdentity,
    /// ingress-nginx's flags that shape its request families.
    pub metric_options: MetricOptions,
    /// How often a TCP/UDP service port or Gateway listener port that could not be bound is
    /// tried again ([`DEFAULT_PORT_RETRY_INTERVAL`]).
    pub port_retry_interval: std::time::Duration,
}

/// The running data plane. Dropping it without [`Proxy::shutdown`] tells every thread to stop
/// but does not wait for them.
pub struct Proxy {
    shared: Arc<Shared>,
    http_addr: SocketAddr,
    https_addr: SocketAddr,
    admin_addr: SocketAddr,
    status_addr: SocketAddr,
    stop: watch::Sender<bool>,
    /// The admin server stops after the workers, so probes and scrapes answer during the drain.
    stop_admin: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
    /// TCP/UDP service ports and the ports Gateway listeners declare beyond 80 and 443, opened
    /// and closed as published configurations ask.
    ports: Arc<std::sync::Mutex<ports::Ports>>,
    /// Binds again, every `port_retry_interval`, the ports that could not be bound.
    port_retry: ports::PortRetry,
    /// The admin and status threads.
    admin_threads: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// Binds every listener, starts `workers` threads (each: its own current-thread tokio
    /// runtime, its own SO_REUSEPORT listeners for HTTP and HTTPS, its own upstream pool) and
    /// the admin and status servers (a thread each). Before the first `publish`, data-plane
    /// requests answer 503 and /ready answers 503. A non-loopback `status_listen` is refused.
    ///
    /// One function (~125 lines): every listener is bound before any thread starts, so a
    /// failure is one `StartError` with nothing to unwind; the steps read in the order they run.
    pub fn start(config: ProxyConfig) -> Result<Proxy, StartError> {
        if !config.status_listen.ip().to_canonical().is_loopback() {
            return Err(StartError::StatusNotLoopback {
                addr: config.status_listen,
            });
        }
        let workers = config.workers.get();
        let http = listen::bind_reuseport(
            "HTTP listener",
            "--http-listen",
            config.http_listen,
            workers,
        )?;
        let https = listen::bind_reuseport(
            "HTTPS listener",
            "--https-listen",
            config.https_listen,
            workers,
        )?;
        let admin = listen::bind_single("admin listener", "--admin-listen", config.admin_listen)?;
        let status =
            listen::bind_single("status listener", "--status-listen", config.status_listen)?;
        let http_addr = http.addr;
        let https_addr = https.addr;
        let admin_addr = admin.addr;
        let status_addr = status.addr;

        let shared = Arc::new(Shared::new(
            &config.access_log,
            config.metric_identity,
            config.metric_options,
        )?);
        let (stop, stop_rx) = watch::channel(false);
        let (stop_admin, stop_admin_rx) = watch::channel(false);
        let open_files = fds::open_files_limit();
        let derived_max_connections = fds::derived_max_connections(open_files, workers);

        let mut stats_senders = Vec::with_capacity(workers);
        let mut stream_senders = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for (id, (http, https)) in http.sockets.into_iter().zip(https.sockets).enumerate() {
            let (stats_tx, stats_rx) = tokio::sync::mpsc::channel(4);
            stats_senders.push(stats_tx);
            let (stream_tx, stream_rx) = tokio::sync::mpsc::unbounded_channel();
            stream_senders.push(stream_tx);
            let spawned = runtime::spawn(runtime::WorkerSetup {
                id,
                shared: shared.clone(),
                http,
                https,
                http_port: http_addr.port(),
                https_port: https_addr.port(),
                stop: stop_rx.clone(),
                stats: stats_rx,
                derived_max_connections,
                stream_listeners: stream_rx,
            });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    // Threads already running see the stop signal when `stop` drops.
                    stop.send_replace(true);
                    return Err(e);
                }
            }
        }
        let admin_socket = admin.sockets.into_iter().next().expect("one admin socket");
        let status_socket = status
            .sockets
            .into_iter()
            .next()
            .expect("one status socket");
        let servers = [
            (admin::Surface::Admin, admin_socket, stats_senders.clone()),
            // The status page shows request rates per Ingress.
            (admin::Surface::Status, status_socket, stats_senders),
        ];
        let mut admin_threads = Vec::with_capacity(servers.len());
        for (surface, socket, stats) in servers {
            let health = config.health.clone();
            match admin::spawn(
                (surface, health),
                socket,
                shared.clone(),
                stats,
                stop_admin_rx.clone(),
            ) {
                Ok(handle) => admin_threads.push(handle),
                Err(e) => {
                    stop.send_replace(true);
                    stop_admin.send_replace(true);
                    return Err(e);
                }
            }
        }
        tracing::info!(
            %http_addr,
            %https_addr,
            %admin_addr,
            %status_addr,
            workers,
            open_files,
            derived_max_connections,
            "proxy started (derived_max_connections: per worker, when max-worker-connections is 0)"
        );
        let own_ports = [
            (http_addr.port(), "HTTP listener"),
            (https_addr.port(), "HTTPS listener"),
        ];
        let ports = Arc::new(std::sync::Mutex::new(ports::Ports {
            // TCP service ports and Gateway listeners' ports listen on the HTTP listener's
            // address.
            streams: stream::Listeners::new(
                config.http_listen.ip(),
                own_ports,
                stream_senders.clone(),
            ),
            declared: declared_ports::DeclaredListeners::new(
                config.http_listen.ip(),
                own_ports,
                stream_senders,
            ),
            retry_interval: config.port_retry_interval,
            retry_wanted: false,
        }));
        let port_retry =
            ports::PortRetry::spawn(ports.clone(), shared.clone()).map_err(|source| {
                stop.send_replace(true);
                stop_admin.send_replace(true);
                StartError::Thread {
                    what: "the port retry thread".to_owned(),
                    source,
                }
            })?;
        Ok(Proxy {
            shared,
            http_addr,
            https_addr,
            admin_addr,
            status_addr,
            stop,
            stop_admin,
            workers: handles,
            ports,
            port_retry,
            admin_threads,
        })
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    pub fn https_addr(&self) -> SocketAddr {
        self.https_addr
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Where the status page (`/`) and `/config` are served (a loopback address).
    pub fn status_addr(&self) -> SocketAddr {
        self.status_addr
    }

    /// Atomic swap of the whole configuration. Also records the swap for metrics, marks the
    /// proxy ready, wakes the workers so they close idle pooled connections to endpoints no
    /// longer present, and binds the TCP service ports it adds and closes the ones it drops
    /// (a port that cannot be bound is logged and shown on `/config`, not an error).
    pub fn publish(&self, compiled: Arc<model::Compiled>) {
        self.publish_with(compiled, None);
    }

    /// [`Proxy::publish`], with the provider's problems that came with this change (`Some`:
    /// they replace those shown in /config), so that one change is one call.
    pub fn publish_with(&self, compiled: Arc<model::Compiled>, source_errors: Option<Vec<String>>) {
        if let Some(errors) = source_errors {
            self.set_source_errors(errors);
        }
        self.shared.publish(compiled.clone());
        // After the swap, so a connection on a new port finds its service.
        shared::lock(&self.ports).apply(&compiled, &self.shared);
    }

    /// The current configuration (the control plane runs `translate::refresh_endpoints(..)` on
    /// it: the endpoint fast path).
    pub fn current(&self) -> Option<Arc<model::Compiled>> {
        self.shared.config.load_full()
    }

    /// Call after the control plane swapped these backends' endpoint sets in place (what
    /// `translate::refresh_endpoints` returned): counts an endpoint swap and tells the workers,
    /// which close idle pooled connections to vanished endpoints. Costs O(those backends), not
    /// O(every endpoint), so it stays cheap in large clusters.
    pub fn endpoints_changed(&self, backends: Vec<Arc<model::Backend>>) {
        self.shared.endpoints_changed(backends);
    }

    /// The control plane's leader election (Kubernetes mode: the status writer's Lease):
    /// `nginx_ingress_controller_leader_election_status{name}` says whether this process leads.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.shared.set_leader(name, leading);
    }

    /// Provider-level problems (e.g. "app.yaml: not valid YAML ...") shown in /config next to
    /// the compile diagnostics.
    pub fn set_source_errors(&self, errors: Vec<String>) {
        *self
            .shared
            .source_errors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = errors;
    }

    /// The first step of a graceful stop: /ready answers 503 from now on, so load balancers
    /// and Endpoints stop sending new connections, while every listener keeps serving; each
    /// response from now on ends its connection, so clients reconnect (to ready replicas). Call
    /// [`Proxy::shutdown`] after the grace period.
    pub fn terminating(&self) {
        self.shared
            .terminating
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Stops accepting now; lets in-flight requests finish within the current
    /// `worker-shutdown-timeout`, closes idle connections (HTTP/1 after the current response,
    /// HTTP/2 with GOAWAY) and, at the end of the timeout, whatever is left (tunnels counted),
    /// then joins every thread; the admin server stops last. Blocks until everything has
    /// stopped, so call it from a plain thread or `spawn_blocking`, not from an async task.
    pub fn shutdown(mut self) {
        self.terminating();
        // No port opens once the stop has begun.
        self.port_retry.stop();
        self.stop.send_replace(true);
        for handle in self.workers.drain(..) {
            if handle.join().is_err() {
                tracing::error!("a worker thread panicked");
            }
        }
        // The workers' last lines, unless the output is stuck.
        self.shared
            .access_log
            .wait_written(std::time::Duration::from_secs(2));
        // And their last spans, unless the Collector does not answer.
        self.shared
            .spans
            .wait_exported(std::time::Duration::from_secs(2));
        self.stop_admin.send_replace(true);
        for thread in self.admin_threads.drain(..) {
            if thread.join().is_err() {
                tracing::error!("an admin thread panicked");
            }
        }
        tracing::info!("proxy stopped");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.stop_admin.send_replace(true);
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("http_addr", &self.http_addr)
            .field("https_addr", &self.https_addr)
            .field("admin_addr", &self.admin_addr)
            .field("status_addr", &self.status_addr)
            .field("workers", &self.workers.len())
            .finish()
    }
}
