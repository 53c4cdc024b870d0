//! The seeds' test application: the "pods" behind Sluice in the demo, the tests and the lab.
//!
//! ```text
//!  BackendConfig.listen ──bind──▶ TcpListener ×N, one accept loop each
//!                                    │ accept, TCP_NODELAY
//!                                    ▼
//!                        task per connection: hyper HTTP/1.1, keep-alive
//!                                    │ request
//!                                    ▼
//!                        routes::handle ─▶ /                   ~1 KB of server metadata
//!                                          /healthz            "ok"
//!                                          /{0kb,1kb,1mb}.bin  slices of one static buffer
//!                                          /echo, /echo/…      the request it saw, as JSON
//!                                          /status/NNN         that status
//!                                          /slow?ms=N          200 after N ms
//!
//!  shutdown(grace) ─▶ Phase::Draining: accept loops drop their listeners; connections finish
//!                     the request in flight, then close (hyper graceful_shutdown); idle ones
//!                     close at once. Still open after `grace`: Phase::Aborted.
//!  abort(), drop   ─▶ Phase::Aborted: every connection is dropped where it stands.
//! ```
//!
//! `Phase` is one `watch` channel that every accept loop and connection task selects on. A drain
//! behaves like a deleted pod, an abort like a crashed one; that difference is what the lab's
//! churn experiments are about, so both are first-class.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::routes::{Conn, Site};

mod body;
mod routes;

/// How long `run_until_signal` lets in-flight requests finish: Kubernetes' default
/// `terminationGracePeriodSeconds`, after which the kubelet would kill the pod.
const SIGNAL_DRAIN_GRACE: Duration = Duration::from_secs(30);

/// Pause after an accept error that is not about one connection (such as running out of file
/// descriptors), so the loop does not spin while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// Where a backend listens and what it calls itself in `/` and `/echo`.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// Addresses to bind; port 0 picks a free port (see [`Backend::local_addrs`]).
    pub listen: Vec<SocketAddr>,
    pub name: String,
}

/// A running backend. Dropping it without [`Backend::shutdown`] stops it like [`Backend::abort`].
#[derive(Debug)]
pub struct Backend {
    addrs: Vec<SocketAddr>,
    phase: watch::Sender<Phase>,
    accept_loops: Vec<JoinHandle<()>>,
    site: Arc<Site>,
}

/// The lifecycle every accept loop and connection follows. Only ever moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Serving,
    /// Accept loops stop; connections finish their current request and close.
    Draining,
    /// Connections are dropped where they stand.
    Aborted,
}

impl Backend {
    /// Binds every address (port 0 allowed), spawns the accept loops on the current tokio runtime,
    /// returns at once.
    ///
    /// Every address is bound before anything is spawned, so an error leaves nothing running.
    pub async fn start(config: BackendConfig) -> io::Result<Backend> {
        if config.listen.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "backend: no listen address",
            ));
        }
        let mut listeners = Vec::with_capacity(config.listen.len());
        for addr in &config.listen {
            let listener = TcpListener::bind(addr).await.map_err(|e| {
                io::Error::new(e.kind(), format!("backend: cannot listen on {addr}: {e}"))
            })?;
            listeners.push(listener);
        }
        let addrs = listeners
            .iter()
            .map(TcpListener::local_addr)
            .collect::<io::Result<Vec<_>>>()?;

        let site = Arc::new(Site::new(config.name));
        let mut http = http1::Builder::new();
        http.keep_alive(true);
        let (phase, phase_rx) = watch::channel(Phase::Serving);
        let accept_loops = listeners
            .into_iter()
            .map(|listener| {
                tokio::spawn(accept_loop(
                    listener,
                    site.clone(),
                    http.clone(),
                    phase_rx.clone(),
                ))
            })
            .collect();
        // Only tasks may hold receivers: `shutdown` waits for the last one to go.
        drop(phase_rx);

        tracing::debug!(name = %site.name, ?addrs, "backend started");
        Ok(Backend {
            addrs,
            phase,
            accept_loops,
            site,
        })
    }

    /// The bound addresses, in `config.listen` order, with real ports where port 0 was asked for.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Requests being handled right now. Tests use it to know a request has reached the handler
    /// before they start a drain.
    pub fn in_flight(&self) -> usize {
        self.site.in_flight.load(Ordering::Relaxed)
    }

    /// Graceful drain like a deleted pod: stop accepting at once, let in-flight requests finish,
    /// close idle keep-alive connections (hyper graceful_shutdown), resolve when all connections
    /// are done or `grace` elapsed (then drop the rest).
    ///
    /// When this resolves, every listener and connection socket is closed. Dropping the future
    /// before then drops the remaining connections, like [`Backend::abort`].
    pub async fn shutdown(self, grace: Duration) {
        let Backend {
            phase,
            accept_loops,
            site,
            ..
        } = self;
        phase.send_replace(Phase::Draining);
        // An accept loop drops its listener as it returns, so after this new connects are refused.
        for task in accept_loops {
            let _ = task.await;
        }
        if tokio::time::timeout(grace, phase.closed()).await.is_err() {
            tracing::info!(name = %site.name, ?grace, "drain grace elapsed, dropping the rest");
            phase.send_replace(Phase::Aborted);
            phase.closed().await;
        }
        tracing::debug!(name = %site.name, "backend drained");
    }

    /// Stops like a crash: close listener and every connection immediately (no graceful close).
    ///
    /// The sockets close as soon as their tasks next run, which on a current-thread runtime is the
    /// caller's next `.await`.
    pub fn abort(self) {
        self.phase.send_replace(Phase::Aborted);
        for task in &self.accept_loops {
            task.abort();
        }
    }
}

/// Runs until SIGTERM/SIGINT then drains (used by `sluice backend`): prints one line to stdout
/// `sluice backend listening on ADDR[,ADDR...]` once bound.
///
/// The drain lasts at most 30 s; a second signal during it drops the remaining connections.
pub async fn run_until_signal(config: BackendConfig) -> io::Result<()> {
    // Handlers go in before the line is printed: whoever reads it may signal us right away.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let backend = Backend::start(config).await?;
    let addrs: Vec<String> = backend
        .local_addrs()
        .iter()
        .map(ToString::to_string)
        .collect();
    println!("sluice backend listening on {}", addrs.join(","));

    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("signal received, draining");
    tokio::select! {
        () = backend.shutdown(SIGNAL_DRAIN_GRACE) => {}
        _ = term.recv() => tracing::info!("second signal, dropping connections"),
        _ = int.recv() => tracing::info!("second signal, dropping connections"),
    }
    Ok(())
}

async fn accept_loop(
    listener: TcpListener,
    site: Arc<Site>,
    http: http1::Builder,
    mut phase: watch::Receiver<Phase>,
) {
    loop {
        let accepted = tokio::select! {
            // A drain must win over a full backlog, or "stop accepting at once" would not hold.
            biased;
            changed = phase.changed() => {
                if changed.is_err() || *phase.borrow_and_update() != Phase::Serving {
                    return;
                }
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                // Responses are written whole; Nagle would only hold back their last segment.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "set TCP_NODELAY");
                }
                tokio::spawn(serve_connection(
                    stream,
                    site.clone(),
                    http.clone(),
                    phase.clone(),
                ));
            }
            // The peer gave up before we accepted: nothing wrong with the listener.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                tracing::warn!(error = %e, "accept failed, backing off");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    site: Arc<Site>,
    http: http1::Builder,
    mut phase: watch::Receiver<Phase>,
) {
    // The address the client reached, which differs from the listener's on a wildcard bind.
    let local = match stream.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            tracing::debug!(error = %e, "connection gone before it was served");
            return;
        }
    };
    let conn = Arc::new(Conn { local, site });
    let service = service_fn(move |req| {
        let conn = conn.clone();
        async move { Ok::<_, Infallible>(routes::handle(req, &conn).await) }
    });
    let connection = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);

    loop {
        // `phase` was cloned from the accept loop's receiver, so a drain that began between accept
        // and here is still unseen and acted on by the first pass.
        let now = *phase.borrow_and_update();
        match now {
            Phase::Serving => {}
            Phase::Draining => connection.as_mut().graceful_shutdown(),
            Phase::Aborted => return,
        }
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            changed = phase.changed() => {
                // The Backend was dropped without a shutdown: stop like an abort.
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}
