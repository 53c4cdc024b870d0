//! A worker thread: its current-thread runtime, its accept loops (HTTP, HTTPS, TCP services),
//! its UDP receive loops, housekeeping and the admin's stats requests. Nothing here is shared
//! with other workers.
//!
//! ```text
//!  accept (TCP service ports, opened and closed by `listen`) ─▶ stream::serve (splice)
//!  receive (UDP service ports, the same way) ─▶ udp::serve_port (a session per client)
//!  accept (http, https) ─▶ front_door::serve (a task per connection)
//!     └─ max-worker-connections open: `room_for_one` (evict the longest-idle, or pause).
//!        EMFILE: pause until a connection ends, at most EXHAUSTED_PAUSE.
//!  shutdown: the shared stop signal is watched by one task per worker (`run`), which sets
//!            the worker's own `stopping` flag and wakes its connections: connections never
//!            touch anything another worker touches.
//!  housekeeping (its own task, `housekeeping::run`): woken by publish/endpoints_changed ─▶
//!                drop idle connections to vanished endpoints; every second ─▶ drop idle
//!                connections past their age
//!  stats: admin asks ─▶ snapshot of this worker's counters
//! ```

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http::HeaderValue;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::LocalSet;

use crate::conn_cap::ConnCap;
use crate::listen::StartError;
use crate::shared::Shared;
use crate::sites::FrontDoor;
use crate::stream::ListenerChange;
use crate::upstreams::Upstreams;
use crate::worker::{Drain, OpenConnection, StatsRequest, Worker};

/// Pause after an accept error that is neither about one connection nor about descriptors,
/// so the loop does not spin while the condition lasts.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// Out of file descriptors: accepting waits for a connection of this worker to end, or this
/// long (nginx disables accepting for 500 ms), since other workers may free descriptors too.
const EXHAUSTED_PAUSE: Duration = Duration::from_millis(500);

/// Everything a worker thread starts from.
pub(crate) struct WorkerSetup {
    pub(crate) id: usize,
    pub(crate) shared: Arc<Shared>,
    pub(crate) http: std::net::TcpListener,
    pub(crate) https: std::net::TcpListener,
    pub(crate) http_port: u16,
    pub(crate) https_port: u16,
    pub(crate) stop: watch::Receiver<bool>,
    pub(crate) stats: mpsc::Receiver<StatsRequest>,
    /// `max-worker-connections: 0` means this (derived from the open-files limit).
    pub(crate) derived_max_connections: usize,
    /// TCP service ports to accept on, and to stop accepting on.
    pub(crate) stream_listeners: mpsc::UnboundedReceiver<crate::stream::ListenerChange>,
}

/// What a listening socket is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listener {
    Http,
    Https,
    /// A TCP service's port (`stream`).
    TcpService(u16),
    /// A port a Gateway listener declares (`declared_ports`).
    Declared(u16, model::sites::DeclaredPort),
}

impl Listener {
    /// The listener a connection accepted here came in on, as Gateway API sees it: Sluice's
    /// own two declare 80 and 443 whatever port their sockets have.
    fn door(self) -> FrontDoor {
        match self {
            Listener::Declared(port, declared) => FrontDoor {
                https: declared.tls,
                on: declared.on,
                port,
            },
            Listener::Https => FrontDoor {
                https: true,
                on: model::routes::Listeners::HTTPS,
                port: 443,
            },
            // A TCP service's connections never reach the front door.
            Listener::Http | Listener::TcpService(_) => FrontDoor {
                https: false,
                on: model::routes::Listeners::HTTP,
                port: 80,
            },
        }
    }
}

/// Starts a worker thread. Sockets are registered with the worker's runtime here, so any
/// failure is reported by `Proxy::start`.
pub(crate) fn spawn(setup: WorkerSetup) -> Result<JoinHandle<()>, StartError> {
    let what = |part: &str| format!("worker {}: {part}", setup.id);
    let thread_error = |part: &str, source: io::Error| StartError::Thread {
        what: what(part),
        source,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| thread_error("runtime", e))?;
    let (http, https) = {
        let _entered = runtime.enter();
        (
            TcpListener::from_std(setup.http).map_err(|e| thread_error("HTTP listener", e))?,
            TcpListener::from_std(setup.https).map_err(|e| thread_error("HTTPS listener", e))?,
        )
    };
    // Made for the defaults; the first handshake remakes it if the settings differ.
    let handshakes = crate::tls::Handshakes::of(&model::Settings::default());
    let tls = crate::tls::server_config(setup.shared.clone(), &handshakes, None, None)
        .map_err(StartError::Tls)?;
    let id = setup.id;
    let shared = setup.shared;
    let http_port = HeaderValue::from(setup.http_port);
    let https_port = HeaderValue::from(setup.https_port);
    let stop = setup.stop;
    let stats = setup.stats;
    let derived_max_connections = setup.derived_max_connections;
    let stream_listeners = setup.stream_listeners;
    std::thread::Builder::new()
        .name(format!("sluice-worker-{id}"))
        .spawn(move || {
            let local = LocalSet::new();
            local.block_on(&runtime, async move {
                let upstreams = Rc::new(Upstreams::default());
                let worker = Rc::new(Worker {
                    shared,
                    config: RefCell::new(None),
                    settings_copy: RefCell::new(None),
                    stats_config: Cell::new(0),
                    stats: upstreams.stats.clone(),
                    upstreams,
                    tls: RefCell::new((handshakes, tls)),
                    host_tls: RefCell::default(),
                    site_tls: RefCell::default(),
                    http_port,
                    https_port,
                    stop,
                    stopping: Cell::new(false),
                    stopped: Notify::new(),
                    drain: Drain::default(),
                    connections: RefCell::default(),
                    cap: ConnCap::new(derived_max_connections),
                    log: RefCell::default(),
                    spans: RefCell::default(),
                    connections_seen: Cell::new(0),
                    streams: RefCell::default(),
                });
                worker.run(http, https, stats, stream_listeners).await;
            });
            // Dropping the LocalSet here cancels whatever outlived the grace period.
            tracing::debug!(worker = id, "worker stopped");
        })
        .map_err(|e| thread_error("thread", e))
}

/// Applies the control plane's listener changes to this worker until it stops.
pub(crate) async fn listen(
    worker: Rc<Worker>,
    mut changes: mpsc::UnboundedReceiver<ListenerChange>,
) {
    while let Some(change) = changes.recv().await {
        match change {
            ListenerChange::Open { port, socket } => {
                let listener = match TcpListener::from_std(socket) {
                    Ok(listener) => listener,
                    Err(e) => {
                        tracing::warn!(port, error = %e, "TCP service port: cannot register the socket");
                        continue;
                    }
                };
                let accept = worker
                    .clone()
                    .accept_loop(listener, Listener::TcpService(port));
                let task = tokio::task::spawn_local(accept);
                if let Some(old) = worker.streams.borrow_mut().accepting.insert(port, task) {
                    old.abort();
                }
            }
            ListenerChange::OpenDeclared {
                port,
                declared,
                socket,
            } => {
                let listener = match TcpListener::from_std(socket) {
                    Ok(listener) => listener,
                    Err(e) => {
                        tracing::warn!(port, error = %e, "Gateway listener port: cannot register the socket");
                        continue;
                    }
                };
                let role = Listener::Declared(port, declared);
                let task = tokio::task::spawn_local(worker.clone().accept_loop(listener, role));
                // Keyed by port with the TCP services' loops: `declared_ports` never binds one
                // of their ports.
                if let Some(old) = worker.streams.borrow_mut().accepting.insert(port, task) {
                    old.abort();
                }
            }
            ListenerChange::Close { port } => {
                if let Some(task) = worker.streams.borrow_mut().accepting.remove(&port) {
                    task.abort();
                }
            }
            ListenerChange::OpenUdp { addr, socket } => {
                let socket = match tokio::net::UdpSocket::from_std(socket) {
                    Ok(socket) => socket,
                    Err(e) => {
                        tracing::warn!(%addr, error = %e, "UDP service port: cannot register the socket");
                        continue;
                    }
                };
                let task =
                    tokio::task::spawn_local(crate::udp::serve_port(worker.clone(), socket, addr));
                if let Some(old) = worker.streams.borrow_mut().receiving.insert(addr, task) {
                    old.abort();
                }
            }
            ListenerChange::CloseUdp { addr } => {
                if let Some(task) = worker.streams.borrow_mut().receiving.remove(&addr) {
                    task.abort();
                }
            }
        }
    }
}

/// The worker's loops. Methods of `Worker` kept here, not in `worker.rs`: they start what sits
/// above the worker's state (the front door, the TCP and UDP services), and only this module
/// calls them.
impl Worker {
    async fn run(
        self: &Rc<Self>,
        http: TcpListener,
        https: TcpListener,
        stats: mpsc::Receiver<StatsRequest>,
        stream_listeners: mpsc::UnboundedReceiver<crate::stream::ListenerChange>,
    ) {
        tokio::task::spawn_local(listen(self.clone(), stream_listeners));
        tokio::task::spawn_local(self.clone().accept_loop(http, Listener::Http));
        tokio::task::spawn_local(self.clone().accept_loop(https, Listener::Https));
        tokio::task::spawn_local(crate::housekeeping::run(self.clone()));
        // TLS handshakes' key operations take turns with everything else (`heavy`).
        tokio::task::spawn_local(crate::heavy::pump());
        tokio::task::spawn_local(self.clone().serve_stats(stats));

        // The one place this worker reads the signal all workers share.
        let mut stop = self.stop.clone();
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                break;
            }
        }
        self.begin_stop();
        // No new connections; idle ones closing, busy ones finishing their current request.
        let grace = self.settings().worker_shutdown_timeout;
        if tokio::time::timeout(grace, self.drain.wait())
            .await
            .is_err()
        {
            let tunnels = self.drain.tunnels.get();
            self.shared
                .tunnels_closed_at_shutdown
                .fetch_add(tunnels as u64, Ordering::Relaxed);
            tracing::info!(
                connections = self.drain.open.get() - tunnels,
                tunnels,
                ?grace,
                "worker-shutdown-timeout elapsed, closing what is still open"
            );
        }
        self.upstreams.pool.borrow_mut().clear();
        self.flush_log();
    }

    async fn accept_loop(self: Rc<Self>, listener: TcpListener, role: Listener) {
        loop {
            self.room_for_one(false).await;
            let accepted = tokio::select! {
                // Stopping must win over a full backlog.
                biased;
                () = self.until_stopping() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    // Counted now, so the other listener's loop sees it at once.
                    let open = OpenConnection::new(&self);
                    self.room_for_one(true).await;
                    match role {
                        Listener::Http | Listener::Https | Listener::Declared(..) => {
                            tokio::task::spawn_local(crate::front_door::serve(
                                self.clone(),
                                stream,
                                peer,
                                role.door(),
                                open,
                            ));
                        }
                        Listener::TcpService(port) => {
                            let serve =
                                crate::stream::serve(self.clone(), stream, peer, port, open);
                            tokio::task::spawn_local(serve);
                        }
                    }
                }
                // The peer gave up before we accepted: nothing wrong with the listener.
                Err(e) if is_per_connection(&e) => {}
                Err(e) if crate::fds::is_exhaustion(&e) => {
                    self.stats.borrow_mut().limits.fd_exhausted += 1;
                    self.note_limit(|log| log.exhausted += 1);
                    // No idle connection is closed here: Linux allocates the descriptor before
                    // it looks for a pending connection, so EMFILE does not mean that anyone
                    // is waiting. The cap is what keeps descriptors free; this only waits.
                    let room = self.cap.room.notified();
                    self.cap.accept_waiting.set(true);
                    tokio::select! {
                        () = room => {}
                        () = tokio::time::sleep(EXHAUSTED_PAUSE) => {}
                        () = self.until_stopping() => {}
                    }
                    self.cap.accept_waiting.set(false);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed, backing off");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }

    async fn serve_stats(self: Rc<Self>, mut requests: mpsc::Receiver<StatsRequest>) {
        while let Some(reply) = requests.recv().await {
            let mut snapshot = self.stats.borrow_mut().snapshot();
            snapshot.accepted = self.connections_seen.get();
            self.streams
                .borrow()
                .add_open_traffic(&mut snapshot.streams);
            for conn in self.connections.borrow().iter() {
                let protocol = match (conn.https, conn.h2) {
                    (false, false) => 0,
                    (true, false) => 1,
                    (true, true) => 2,
                    (false, true) => 3,
                };
                snapshot
                    .connections
                    .count(protocol, conn.in_flight.get() > 0);
            }
            let _ = reply.send(snapshot);
        }
    }
}

/// An accept error about the one connection (the peer gave up before it was accepted), not
/// about the listener.
pub(crate) fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}
