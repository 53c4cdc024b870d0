//! The admin server: health, readiness, the configuration as served, and metrics. Its own
//! thread and runtime, so a scrape or a large /config never delays traffic.

use std::convert::Infallible;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use crate::fds::{self, Reserve};
use crate::listen::StartError;
use crate::metrics::{self, Snapshot};
use crate::shared::Shared;
use crate::worker::StatsRequest;

/// A worker busy for longer than this is left out of one scrape rather than stalling it.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the accept loop waits when the process has no descriptor left, even spare.
const EXHAUSTED_PAUSE: Duration = Duration::from_millis(100);

/// Admin connections are few and short; they get a short head timeout.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

struct Admin {
    shared: Arc<Shared>,
    workers: Vec<mpsc::Sender<StatsRequest>>,
}

pub(crate) fn spawn(
    socket: std::net::TcpListener,
    shared: Arc<Shared>,
    workers: Vec<mpsc::Sender<StatsRequest>>,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, StartError> {
    let thread_error = |what: &str, source| StartError::Thread {
        what: format!("admin server: {what}"),
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
    let admin = Arc::new(Admin { shared, workers });
    std::thread::Builder::new()
        .name("sluice-admin".into())
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
        match request.uri().path() {
            "/healthz" => text_response(StatusCode::OK, Bytes::from_static(b"ok\n")),
            "/ready" if self.shared.is_ready() => {
                text_response(StatusCode::OK, Bytes::from_static(b"ready\n"))
            }
            "/ready" if self.shared.is_terminating() => text_response(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"not ready: shutting down\n"),
            ),
            "/ready" => text_response(
                StatusCode::SERVICE_UNAVAILABLE,
                Bytes::from_static(b"not ready: no configuration published yet\n"),
            ),
            "/config" => self.config(),
            "/metrics" => self.metrics().await,
            _ => text_response(
                StatusCode::NOT_FOUND,
                Bytes::from_static(b"try /healthz, /ready, /config or /metrics\n"),
            ),
        }
    }

    fn config(&self) -> Response<Full<Bytes>> {
        let config = self.shared.config.load_full();
        let document = serde_json::json!({
            "ready": config.is_some(),
            "config": config.as_ref().map(|c| c.view()),
            "source_errors": self.shared.source_errors(),
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

    async fn metrics(&self) -> Response<Full<Bytes>> {
        let mut total = Snapshot::default();
        for worker in &self.workers {
            let (reply, answer) = oneshot::channel();
            if worker.send(reply).await.is_err() {
                continue; // stopped
            }
            match tokio::time::timeout(SNAPSHOT_TIMEOUT, answer).await {
                Ok(Ok(snapshot)) => total.add(&snapshot),
                _ => tracing::warn!("a worker did not report its metrics in time"),
            }
        }
        let text = metrics::render(&total, &self.shared, self.workers.len());
        let mut response = Response::new(Full::new(Bytes::from(text)));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        response
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
