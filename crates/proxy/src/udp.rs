//! UDP services (`--udp-services-configmap`): a port per entry; a client's datagrams are a
//! session with one endpoint of the entry's Service, as nginx's stream module proxies UDP.
//! Gateway UDP listeners (UDPRoute) are the same, their ports bound at the Gateway's own
//! address when it has one (`stream::Listeners::udp_addresses`): a reply leaves from the
//! address the client sent to.
//!
//! ```text
//!  datagram from client C on port P (this worker's SO_REUSEPORT socket: the kernel keeps C
//!  on one worker) ─▶ C's session on P, unless its endpoint left every backend
//!     none ─▶ room under max-worker-connections? no ─▶ dropped (limit)
//!           ─▶ pick an endpoint (the backend's balancer), a socket connected to it, a task
//!              reading what it answers
//!  ─▶ forwarded; the session now expects proxy-stream-responses more answers (0: it ends)
//!  answer from the endpoint ─▶ sent to C from P ─▶ all expected answers came ─▶ it ends
//!  no datagram either way for proxy-stream-timeout ─▶ it ends
//!  the endpoint refuses (ICMP unreachable) ─▶ it ends; the endpoint is set aside, so C's
//!     next datagram (a resolver retries) starts a session with another
//!  port removed from the ConfigMap ─▶ its receive loop ends, and every session with it
//! ```
//! Datagrams are read into one scratch buffer per worker (a session holds no buffer), and a
//! datagram that cannot be sent at once (a full socket buffer) is dropped, as UDP may drop it.
//! Sessions are counted against max-worker-connections, as nginx counts them against
//! `worker_connections`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use model::StreamService;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::access_log::StreamLine;
use crate::metrics::StreamKey;
use crate::worker::{OpenConnection, Worker};

/// The largest UDP payload (IPv4: 65,535 − 8 − 20).
const MAX_DATAGRAM: usize = 65_507;

thread_local! {
    /// The worker's one receive buffer: filled and sent on without an `.await` in between.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; MAX_DATAGRAM]);
}

/// Sends a datagram now, straight to the kernel: tokio's `try_send` answers WouldBlock until its
/// driver has seen the socket writable, which a fresh socket has not. A nonblocking send of a
/// datagram fails only when the socket buffer is full, and then the datagram is dropped, as UDP
/// may drop it.
fn send(socket: &UdpSocket, datagram: &[u8], to: Option<SocketAddr>) -> io::Result<usize> {
    let socket = socket2::SockRef::from(socket);
    match to {
        Some(to) => socket.send_to(datagram, &to.into()),
        None => socket.send(datagram),
    }
}

/// One client's session with one endpoint.
struct Session {
    client: SocketAddr,
    endpoint: SocketAddr,
    upstream: UdpSocket,
    /// Answers still expected (`proxy-stream-responses` per datagram forwarded).
    expected: Cell<u64>,
    last_active: Cell<Instant>,
    from_client: Cell<u64>,
    to_client: Cell<u64>,
    /// Told to end (its endpoint left, or no answer is expected).
    end: Notify,
    ended: Cell<bool>,
    started: Instant,
    serial: u64,
    /// The endpoint refused before answering.
    refused: Cell<bool>,
    /// Where it is counted: the session is uncounted when dropped, also when its port's task
    /// is aborted with it.
    worker: Rc<Worker>,
    key: StreamKey,
    _open: OpenConnection,
}

/// What a session ended with, for its counters and log line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Answered as expected, idle, or moved on.
    Done,
    /// The endpoint refused (ICMP port unreachable) before answering.
    Refused,
}

type Sessions = Rc<RefCell<HashMap<SocketAddr, Rc<Session>>>>;

/// Receives port `port`'s datagrams on this worker's socket until the task is aborted (the
/// port left the configuration, or the worker stops); its sessions end with it.
pub(crate) async fn serve_port(worker: Rc<Worker>, socket: UdpSocket, addr: SocketAddr) {
    let port = addr.port();
    // Bound at a Gateway's own address: that site's UDP listeners' routes.
    let local = Some(addr.ip()).filter(|ip| !ip.is_unspecified());
    let socket = Rc::new(socket);
    let sessions: Sessions = Rc::default();
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            ready = socket.readable() => {
                if let Err(e) = ready {
                    tracing::warn!(port, error = %e, "UDP service port: receiving failed");
                    return;
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            () = worker.until_stopping() => return,
        }
        // Everything waiting, each datagram handled before the next is read.
        loop {
            let handled = SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                match socket.try_recv_from(&mut scratch) {
                    Ok((len, client)) => {
                        forward(
                            &worker,
                            &socket,
                            &sessions,
                            &mut tasks,
                            (port, local),
                            client,
                            &scratch[..len],
                        );
                        true
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                    Err(e) => {
                        tracing::debug!(port, error = %e, "UDP service port: receive error");
                        true
                    }
                }
            });
            if !handled {
                break;
            }
        }
    }
}

/// Sends one client datagram on in its session, starting one if it has none.
fn forward(
    worker: &Rc<Worker>,
    listener: &Rc<UdpSocket>,
    sessions: &Sessions,
    tasks: &mut JoinSet<()>,
    (port, local): (u16, Option<std::net::IpAddr>),
    client: SocketAddr,
    datagram: &[u8],
) {
    let Some(config) = worker.config() else {
        return;
    };
    // The port left the configuration while this datagram waited.
    let found = config.stream_service(model::streams::StreamProtocol::Udp, local, port);
    let Some(service) = found.cloned() else {
        return;
    };
    let settings = worker.settings();
    let key: StreamKey = (port, service.upstream_name.clone());
    let existing = sessions.borrow().get(&client).cloned();
    let session = match existing {
        Some(session) if worker.is_live_endpoint(&session.endpoint) => session,
        stale => {
            if let Some(stale) = stale {
                // Its pod went away: this client's datagrams go to a current endpoint.
                worker.count_stream(&key, |c| c.endpoint_removed += 1);
                stale.finish();
            }
            if worker.counted_connections() >= worker.max_connections() {
                worker.count_stream(&key, |c| c.refused += 1);
                tracing::debug!(%client, port, "UDP service: at max-worker-connections; datagram dropped");
                return;
            }
            let Some(session) = open(worker, &service, client, key.clone()) else {
                worker.count_stream(&key, |c| c.failed += 1);
                return;
            };
            sessions.borrow_mut().insert(client, session.clone());
            tasks.spawn_local(run(
                worker.clone(),
                listener.clone(),
                sessions.clone(),
                session.clone(),
                settings.proxy_stream_timeout,
            ));
            session
        }
    };
    session.last_active.set(Instant::now());
    match send(&session.upstream, datagram, None) {
        Ok(_) => {
            session
                .from_client
                .set(session.from_client.get() + datagram.len() as u64);
            let responses = u64::from(settings.proxy_stream_responses);
            session.expected.set(session.expected.get() + responses);
            if responses == 0 {
                // nginx's `proxy_responses 0`: no answer is expected.
                session.finish();
            }
        }
        Err(e) => {
            tracing::debug!(%client, endpoint = %session.endpoint, error = %e, "UDP service: datagram not sent");
        }
    }
}

/// A session for `client`: an endpoint picked by the backend's balancer, and a socket
/// connected to it.
fn open(
    worker: &Rc<Worker>,
    service: &StreamService,
    client: SocketAddr,
    key: StreamKey,
) -> Option<Rc<Session>> {
    let settings = worker.settings();
    // A Gateway route's weighted shares: this session's drawn here.
    let backend = service.pick_backend(|total| fastrand::u32(1..=total));
    let endpoint = worker.upstreams.balancer.borrow_mut().pick(
        backend,
        settings.load_balance,
        &[],
        Instant::now(),
    )?;
    let local: SocketAddr = if endpoint.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let upstream = std::net::UdpSocket::bind(local)
        .and_then(|socket| {
            socket.connect(endpoint)?;
            socket.set_nonblocking(true)?;
            UdpSocket::from_std(socket)
        })
        .map_err(
            |e| tracing::debug!(%endpoint, error = %e, "UDP service: no socket to the endpoint"),
        )
        .ok()?;
    if settings.load_balance == model::LoadBalance::LeastRequest {
        worker.upstreams.balancer.borrow_mut().started(endpoint);
    }
    let now = Instant::now();
    worker.count_stream(&key, |c| {
        c.accepted += 1;
        c.active += 1;
    });
    Some(Rc::new(Session {
        client,
        endpoint,
        upstream,
        expected: Cell::new(0),
        last_active: Cell::new(now),
        from_client: Cell::new(0),
        to_client: Cell::new(0),
        end: Notify::new(),
        ended: Cell::new(false),
        started: now,
        serial: worker.next_connection_serial(),
        refused: Cell::new(false),
        worker: worker.clone(),
        key,
        _open: OpenConnection::new(worker),
    }))
}

impl Session {
    fn finish(&self) {
        self.ended.set(true);
        self.end.notify_one();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let (received, sent) = (self.from_client.get(), self.to_client.get());
        let refused = self.refused.get();
        self.worker.count_stream(&self.key, |c| {
            c.active -= 1;
            c.bytes_received += received;
            c.bytes_sent += sent;
            c.failed += u64::from(refused);
        });
        if self.worker.settings().load_balance == model::LoadBalance::LeastRequest {
            self.worker
                .upstreams
                .balancer
                .borrow_mut()
                .finished(self.endpoint);
        }
    }
}

/// Passes the endpoint's answers to the client until the session ends, then counts and logs
/// it.
async fn run(
    worker: Rc<Worker>,
    listener: Rc<UdpSocket>,
    sessions: Sessions,
    session: Rc<Session>,
    idle: Duration,
) {
    let ending = answers(&listener, &session, idle).await;
    {
        let mut sessions = sessions.borrow_mut();
        if sessions
            .get(&session.client)
            .is_some_and(|s| Rc::ptr_eq(s, &session))
        {
            sessions.remove(&session.client);
        }
    }
    if ending == Ending::Refused {
        session.refused.set(true);
        worker
            .upstreams
            .balancer
            .borrow_mut()
            .set_aside(session.endpoint, Instant::now());
    }
    let (received, sent) = (session.from_client.get(), session.to_client.get());
    if let Some(config) = worker.config() {
        if let Some(format) = &config.stream_access_log {
            let server = listener
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], session.key.0)));
            worker.log_stream(
                format,
                &StreamLine {
                    remote: session.client,
                    proxy_protocol_addr: None,
                    server,
                    protocol: "UDP",
                    status: match ending {
                        Ending::Done => 200,
                        Ending::Refused => 502,
                    },
                    bytes_sent: sent,
                    bytes_received: received,
                    session: session.started.elapsed(),
                    upstreams: &[session.endpoint],
                    upstream_connect: Some(Duration::ZERO),
                    serial: session.serial,
                },
            );
        }
    }
}

/// Relays answers until the expected ones came, the session idled for `idle`, it was told to
/// end, or the endpoint refused.
async fn answers(listener: &UdpSocket, session: &Session, idle: Duration) -> Ending {
    loop {
        if session.ended.get() {
            return Ending::Done;
        }
        let idle_until = session.last_active.get() + idle;
        tokio::select! {
            // An ICMP port unreachable is an error on the socket, not data: asked for too.
            ready = session.upstream.ready(Interest::READABLE | Interest::ERROR) => {
                match ready {
                    Ok(ready) if ready.is_error() => {
                        let refused = session.upstream.take_error().ok().flatten().is_some();
                        return if refused && session.to_client.get() == 0 {
                            Ending::Refused
                        } else {
                            Ending::Done
                        };
                    }
                    Ok(_) => {}
                    Err(_) => return Ending::Refused,
                }
            }
            () = tokio::time::sleep_until(idle_until.into()) => {
                if session.last_active.get() + idle <= Instant::now() {
                    return Ending::Done;
                }
                continue;
            }
            () = session.end.notified() => return Ending::Done,
        }
        loop {
            let received = SCRATCH.with(|scratch| {
                let mut scratch = scratch.borrow_mut();
                let len = session.upstream.try_recv(&mut scratch)?;
                // A full socket buffer toward the client: the answer is dropped, as UDP may.
                if send(listener, &scratch[..len], Some(session.client)).is_ok() {
                    session.to_client.set(session.to_client.get() + len as u64);
                }
                Ok::<_, io::Error>(len)
            });
            match received {
                Ok(_) => {
                    session.last_active.set(Instant::now());
                    let expected = session.expected.get().saturating_sub(1);
                    session.expected.set(expected);
                    if expected == 0 {
                        return Ending::Done;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ECONNREFUSED: the endpoint's port is closed (ICMP unreachable).
                Err(_) if session.to_client.get() == 0 => return Ending::Refused,
                Err(_) => return Ending::Done,
            }
        }
    }
}
