//! The admin servers: two listeners, each on a thread and runtime of its own, so neither a
//! scrape nor a large /config delays traffic or the other listener.
//!
//! ```text
//!  --admin-listen  (exposed: probes, Prometheus)   /healthz  /ready  /metrics
//!        /metrics ─▶ one scrape at a time (semaphore) ─▶ ask each worker for its counters
//!                 ─▶ render on the blocking pool, so probes never wait behind a render
//!  --status-listen (loopback only: describes tenants)  /  /config
//!        /        ─▶ one view at a time (a semaphore) ─▶ ask each worker for its counters
//!                 ─▶ rates since the previous view ─▶ HTML rendered on the blocking pool
//! ```
//! The status page (`/`, see `status_page.rs`) and `/config` show every tenant's hosts, paths,
//! endpoint addresses and Secret names: they never share a port with what the manifests expose,
//! and their listener refuses non-loopback addresses (see `lib.rs`), as ingress-nginx keeps its
//! status server on 127.0.0.1:10246.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};

use crate::fds::{self, Reserve};
use crate::listen::StartError;
use crate::metrics::{self, Snapshot};
use crate::shared::Shared;
use crate::status_page::{self, Page, Totals, Traffic};
use crate::worker::StatsRequest;

/// A worker busy for longer than this is left out of one scrape rather than stalling it.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the accept loop waits when the process has no descriptor left, even spare.
const EXHAUSTED_PAUSE: Duration = Duration::from_millis(100);

/// Admin connections are few and short; they get a short head timeout.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Which paths a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Surface {
    /// `--admin-listen`, the port the manifests expose and probe: nothing that describes tenants.
    Admin,
    /// `--status-listen`, loopback only: the configuration as served, as a page and as JSON.
    Status,
}

/// The admin listener's liveness answer (`/healthz`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HealthCheck {
    /// Another path answered as `/healthz` (ingress-nginx's `--health-check-path`, where its
    /// manifests' probes then look).
    pub extra_path: Option<String>,
    /// `/healthz` answers as `/ready` does: 503 until the first configuration is published and
    /// while terminating. That is ingress-nginx's `/healthz`, which its chart probes for
    /// readiness as well as liveness (kubelets stop liveness probes once a pod terminates).
    pub as_ready: bool,
}

struct Admin {
    surface: Surface,
    health: HealthCheck,
    shared: Arc<Shared>,
    workers: Vec<mpsc::Sender<StatsRequest>>,
    /// One scrape at a time: concurrent scrapes queue here instead of each asking every worker
    /// for a snapshot (work on the data plane's threads) and each holding a rendering thread.
    scrape: Semaphore,
    /// The status page's previous view: when, and the per-Ingress totals then (rates are the
    /// difference). One entry per Ingress that answered a request.
    previous_view: Mutex<Option<(Instant, Totals)>>,
}

impl Surface {
    fn thread_name(self) -> &'static str {
        match self {
            Surface::Admin => "sluice-admin",
            Surface::Status => "sluice-status",
        }
    }
}

/// Starts `surface`'s server on `socket` on a thread of its own. `workers` are asked for their
/// counters at each /metrics scrape (admin) or status page view (status).
pub(crate) fn spawn(
    (surface, health): (Surface, HealthCheck),
    socket: std::net::TcpListener,
    shared: Arc<Shared>,
    workers: Vec<mpsc::Sender<StatsRequest>>,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, StartError> {
    let thread_error = |what: &str, source| StartError::Thread {
        what: format!("{} server: {what}", surface.thread_name()),
        source,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| thread_error("runtime", e))?;
    let listener = {
        let _entered = runtime.enter();
        TcpListener::from_std(socket).map_err(|e| thread_error("listener", e))?
    };
    let admin = Arc::new(Admin {
        surface,
        health,
        shared,
        workers,
        scrape: Semaphore::new(1),
        previous_view: Mutex::new(None),
    });
    std::thread::Builder::new()
        .name(surface.thread_name().into())
        .spawn(move || runtime.block_on(serve(listener, admin, stop)))
        .map_err(|e| thread_error("thread", e))
}

async fn serve(listener: TcpListener, admin: Arc<Admin>, mut stop: watch::Receiver<bool>) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let mut connections = tokio::task::JoinSet::new();
    // Probes must be answered when the process is out of descriptors (see `fds::Reserve`).
    let mut spares = Reserve::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.changed() => break,
            // A connection's end frees its descriptor: take spares back at once, before a
            // worker does.
            Some(_) = connections.join_next(), if !spares.is_full() => {
                spares.refill();
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if fds::is_exhaustion(&e) => {
                if !spares.release_one() {
                    // Nothing left to give: wait for descriptors rather than spin.
                    tokio::time::sleep(EXHAUSTED_PAUSE).await;
                }
                continue;
            }
            Err(_) => continue,
        };
        let admin = admin.clone();
        let builder = builder.clone();
        let mut stop = stop.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let admin = admin.clone();
                async move { Ok::<_, Infallible>(admin.handle(request).await) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = stop.changed() => connection.as_mut().graceful_shutdown(),
            }
            let _ = connection.await;
        });
        // Reap finished connections so the set does not grow with every scrape.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
}

impl Admin {
    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return text_response(
                StatusCode::METHOD_NOT_ALLOWED,
                Bytes::from_static(b"only GET and HEAD\n"),
            );
        }
        let path = request.uri().path();
        let health = path == "/healthz" || self.health.extra_path.as_deref() == Some(path);
        // With `as_ready`, the liveness paths take /ready's answers below.
        let path = if health && self.health.as_ready {
            "/ready"
        } else {
            path
        };
        match (self.surface, path) {
            (Surface::Admin, _) if health && !self.health.as_ready => {
                text_response(StatusCode::OK, Bytes::from_static(b"ok\n"))
            }
            (Surface::Admin, "/ready") if self.shared.is_ready() => {
                text_response(StatusCode::OK, Bytes::from_static(b"ready\n"))
            }
            (Surface::Admin, "/ready") if self.shared.is_terminating() => text_response(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"not ready: shutting down\n"),
            ),
            (Surface::Admin, "/ready") => text_response(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"not ready: no configuration published yet\n"),
            ),
            (Surface::Admin, "/metrics") => self.metrics().await,
            (Surface::Admin, "/config") => text_response(
                StatusCode::NOT_FOUND,
                Bytes::from_static(
                    b"/config is served on the loopback-only status listener (--status-listen)\n",
                ),
            ),
            (Surface::Admin, _) => text_response(
                StatusCode::NOT_FOUND,
                Bytes::from_static(b"try /healthz, /ready or /metrics\n"),
            ),
            (Surface::Status, "/") => self.status_page().await,
            (Surface::Status, "/config") => self.config(),
            (Surface::Status, _) => text_response(
                StatusCode::NOT_FOUND,
                Bytes::from_static(b"try / (the status page) or /config\n"),
            ),
        }
    }

    fn config(&self) -> Response<Full<Bytes>> {
        let config = self.shared.config.load_full();
        let document = serde_json::json!({
            "ready": config.is_some(),
            "config": config.as_ref().map(|c| c.view()),
            "source_errors": self.shared.source_errors(),
            "tcp_service_errors": self.shared.stream_errors(),
        });
        match serde_json::to_vec_pretty(&document) {
            Ok(mut text) => {
                text.push(b'\n');
                let mut response = Response::new(Full::new(Bytes::from(text)));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Err(e) => text_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from(format!("cannot render the configuration: {e}\n")),
            ),
        }
    }

    /// Every worker's counters summed, and how many workers answered in time. Call with a
    /// `scrape` permit held.
    async fn collect(&self) -> (Snapshot, usize) {
        let mut total = Snapshot::default();
        let mut answered = 0;
        for worker in &self.workers {
            let (reply, answer) = oneshot::channel();
            if worker.send(reply).await.is_err() {
                continue; // stopped
            }
            match tokio::time::timeout(SNAPSHOT_TIMEOUT, answer).await {
                Ok(Ok(snapshot)) => {
                    total.add(&snapshot);
                    answered += 1;
                }
                _ => tracing::warn!("a worker did not report its metrics in time"),
            }
        }
        (total, answered)
    }

    async fn status_page(&self) -> Response<Full<Bytes>> {
        // Held (inside the Ok) until the page is rendered; the semaphore is never closed.
        let _permit = self.scrape.acquire().await;
        let (snapshot, workers_answered) = self.collect().await;
        let totals = snapshot.by_ingress();
        let now = Instant::now();
        let traffic = {
            let mut previous_view = self
                .previous_view
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let traffic = Traffic::since(
                previous_view
                    .as_ref()
                    .map(|(at, totals)| (now.duration_since(*at), totals)),
                &totals,
            );
            *previous_view = Some((now, totals));
            traffic
        };
        let shared = &self.shared;
        let (config_swaps, endpoint_swaps) = {
            let history = shared.history();
            (history.config_swaps(), history.endpoint_swaps())
        };
        let page = Page {
            now: SystemTime::now(),
            ready: shared.is_ready(),
            terminating: shared.is_terminating(),
            config: shared.config.load_full(),
            source_errors: shared.source_errors(),
            config_swaps_total: shared.config_swaps.load(Ordering::Relaxed),
            endpoint_swaps_total: shared.endpoint_swaps.load(Ordering::Relaxed),
            config_swaps,
            endpoint_swaps,
            traffic,
            workers: self.workers.len(),
            workers_answered,
            fallback_not_after: shared
                .fallback_cert
                .cert
                .first()
                .and_then(|der| model::tls::certificate_info(der).ok())
                .map(|info| info.not_after),
        };
        // Proportional to the routes, like /metrics: off this thread.
        let mut response = rendered("the status page", "text/html; charset=utf-8", move || {
            status_page::render(&page)
        })
        .await;
        let headers = response.headers_mut();
        // Tenants' text is escaped; should that ever fail, no script runs and nothing is
        // fetched from anywhere: the page needs only its own inline style.
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; \
                 form-action 'none'; frame-ancestors 'none'",
            ),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }

    async fn metrics(&self) -> Response<Full<Bytes>> {
        // Held (inside the Ok) until the response is built; the semaphore is never closed.
        let _permit = self.scrape.acquire().await;
        let (total, _) = self.collect().await;
        // Rendering is plain CPU work proportional to the routes: off this thread, so a probe
        // arriving meanwhile is answered at once.
        let shared = self.shared.clone();
        let workers = self.workers.len();
        rendered(
            "the metrics",
            "text/plain; version=0.0.4; charset=utf-8",
            move || metrics::render(&total, &shared, workers),
        )
        .await
    }
}

/// The response `render` makes, run on the blocking pool so that a probe arriving meanwhile is
/// answered at once; `what` names it in the 500 should rendering panic.
async fn rendered(
    what: &str,
    content_type: &'static str,
    render: impl FnOnce() -> String + Send + 'static,
) -> Response<Full<Bytes>> {
    match tokio::task::spawn_blocking(render).await {
        Ok(text) => {
            let mut response = Response::new(Full::new(Bytes::from(text)));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            response
        }
        Err(e) => text_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Bytes::from(format!("cannot render {what}: {e}\n")),
        ),
    }
}

fn text_response(status: StatusCode, text: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
