//! TCP services (`--tcp-services-configmap`): a port per entry, its connections spliced to an
//! endpoint of the entry's Service. Gateway TCP listeners (TCPRoute) are the same: their ports
//! bound here too, a connection's service found by its local address's site and port
//! (`Compiled::stream_service`), a weighted share drawn per connection.
//!
//! ```text
//!  publish(config) ─▶ Listeners::apply: ports added ─▶ bind (SO_REUSEPORT, one socket per
//!                     worker) ─▶ each worker's channel ─▶ accept loop on that port
//!                     ports removed ─▶ Close ─▶ the accept loops end (their sockets close);
//!                     a bind failure is logged and shown on /config, retried at each publish
//!                     and every port_retry_interval (`ports`)
//!  accepted ─▶ current config's service for the port (none: closed)
//!           ─▶ (:PROXY) PROXY header read, within client-header-timeout; bad ─▶ closed
//!           ─▶ pick an endpoint (the backend's balancer, least_request counting open
//!              connections; next one on a failed connect, as proxy-stream-next-upstream*
//!              allow, each within proxy-connect-timeout)
//!           ─▶ (:PROXY:PROXY) PROXY v1 header to the upstream
//!           ─▶ splice(2) both ways (`zero_copy`; a half-close goes through) until both
//!              sides closed, or
//!              proxy-stream-timeout without a byte, or its endpoint left every backend
//!              worker-shutdown-timeout ago
//!           ─▶ counters (per port and service) and a log line (ingress-nginx's stream format)
//! ```
//! Endpoint churn: a new connection goes to an endpoint of the current set; an established one
//! stays on its endpoint while any backend holds it. When no backend holds it any more (its pod
//! went away), the connection is closed `worker-shutdown-timeout` later, as nginx would close it
//! when its old worker process exits after a reload. It is reprieved if the endpoint returns.
//!
//! A port removed from the ConfigMap stops accepting; its established connections go on while
//! their endpoint is in some backend of the configuration (another port or an Ingress uses the
//! Service), else they are given the same grace: nothing follows that endpoint any more.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use std::sync::Arc;

use model::streams::StreamProtocol;
use model::{Compiled, StreamService};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

use crate::access_log::StreamLine;
use crate::deadline::within;
use crate::listen::{NotOpen, Why};
use crate::metrics::StreamKey;
use crate::proxy_protocol;
use crate::spliced::Spliced;
use crate::tunnel::Traffic;
use crate::upstreams::Upstreams;
use crate::worker::{OpenConnection, Worker};

/// What a worker is told about TCP service ports.
#[derive(Debug)]
pub(crate) enum ListenerChange {
    /// Accept on this socket (this worker's one of the port's SO_REUSEPORT group).
    Open {
        port: u16,
        socket: std::net::TcpListener,
    },
    /// Stop accepting on this port (a TCP service's or a Gateway listener's).
    Close { port: u16 },
    /// Accept on this socket as a Gateway listener's declared port (`declared_ports`).
    OpenDeclared {
        port: u16,
        declared: model::sites::DeclaredPort,
        socket: std::net::TcpListener,
    },
    /// Receive this UDP port's datagrams on this socket (this worker's one), bound at `addr`.
    OpenUdp {
        addr: SocketAddr,
        socket: std::net::UdpSocket,
    },
    /// Stop receiving on this UDP address and port (its sessions end).
    CloseUdp { addr: SocketAddr },
}

/// The control plane's side: which TCP service ports are bound, on the HTTP listener's
/// address, one socket per worker.
pub(crate) struct Listeners {
    ip: IpAddr,
    /// The HTTP and HTTPS listeners' ports as bound (port 0 in the flags resolved): their
    /// sockets are SO_REUSEPORT too, so binding one again would not fail but share its
    /// connections. The model refuses the ports the flags name; this catches the rest.
    own: [(u16, &'static str); 2],
    workers: Vec<mpsc::UnboundedSender<ListenerChange>>,
    /// Ports bound and handed to the workers.
    open: BTreeSet<u16>,
    /// Ports whose bind failed, and why (retried at every publish and by `ports`' retry thread;
    /// shown on /config).
    failed: BTreeMap<u16, Why>,
    /// UDP ports bound (at `ip`, or at a Gateway's own address), and the ones that failed.
    udp_open: BTreeSet<SocketAddr>,
    udp_failed: BTreeMap<SocketAddr, Why>,
}

impl Listeners {
    pub(crate) fn new(
        ip: IpAddr,
        own: [(u16, &'static str); 2],
        workers: Vec<mpsc::UnboundedSender<ListenerChange>>,
    ) -> Self {
        Listeners {
            ip,
            own,
            workers,
            open: BTreeSet::new(),
            failed: BTreeMap::new(),
            udp_open: BTreeSet::new(),
            udp_failed: BTreeMap::new(),
        }
    }

    /// Opens the ports `config` has and this has not, closes the ones it no longer has.
    /// Returns the ports that could not be bound, with why.
    pub(crate) fn apply(&mut self, config: &Compiled) -> Vec<NotOpen> {
        // The ConfigMap's ports and Gateway TCP listeners' (every site's: a connection's
        // local address tells them apart, `Compiled::stream_service`).
        let wanted = config.stream_ports(StreamProtocol::Tcp);
        for port in self.open.iter().filter(|port| !wanted.contains_key(port)) {
            for worker in &self.workers {
                let _ = worker.send(ListenerChange::Close { port: *port });
            }
            tracing::info!(
                port,
                "TCP service port closed (left the ConfigMap or the Gateways)"
            );
        }
        self.open.retain(|port| wanted.contains_key(port));
        self.failed.retain(|port, _| wanted.contains_key(port));
        for (port, service) in &wanted {
            if self.open.contains(port) {
                continue;
            }
            let addr = SocketAddr::new(self.ip, *port);
            if let Some((_, listener)) = self.own.iter().find(|(own, _)| own == port) {
                let why = Why::conflict(format!("it is the {listener}'s port"));
                if self.failed.get(port) != Some(&why) {
                    tracing::warn!(
                        port,
                        "TCP service port not opened: {}; the configuration must change (the \
                         ConfigMap's port or the listener's flag)",
                        why.text
                    );
                }
                self.failed.insert(*port, why);
                continue;
            }
            match crate::listen::bind_reuseport(
                "TCP service",
                "--tcp-services-configmap",
                addr,
                self.workers.len(),
            ) {
                Ok(bound) => {
                    for (worker, socket) in self.workers.iter().zip(bound.sockets) {
                        let _ = worker.send(ListenerChange::Open {
                            port: *port,
                            socket,
                        });
                    }
                    self.open.insert(*port);
                    self.failed.remove(port);
                    tracing::info!(%addr, upstream = %service.upstream_name, "TCP service port open");
                }
                Err(e) => {
                    let why = Why::bind_failed(crate::error::Chain(&e).to_string());
                    let new = self.failed.get(port) != Some(&why);
                    if new {
                        tracing::warn!(
                            port,
                            upstream = %service.upstream_name,
                            "TCP service port not opened: {}; the other ports serve, and \
                             it is tried again every few seconds and at each configuration change",
                            why.text
                        );
                    }
                    self.failed.insert(*port, why);
                }
            }
        }
        self.apply_udp(config);
        let tcp = self.failed.iter().map(|(port, why)| NotOpen {
            port: format!("TCP service port {port}"),
            why: why.clone(),
        });
        let udp = self.udp_failed.iter().map(|(addr, why)| NotOpen {
            port: format!("UDP service port {addr}"),
            why: why.clone(),
        });
        tcp.chain(udp).collect()
    }

    /// `apply` for UDP ports (no listener of Sluice's own is UDP).
    fn apply_udp(&mut self, config: &Compiled) {
        let wanted = self.udp_addresses(config);
        for addr in self.udp_open.iter().filter(|a| !wanted.contains_key(a)) {
            for worker in &self.workers {
                let _ = worker.send(ListenerChange::CloseUdp { addr: *addr });
            }
            tracing::info!(%addr, "UDP service port closed (left the ConfigMap or the Gateways)");
        }
        self.udp_open.retain(|addr| wanted.contains_key(addr));
        self.udp_failed.retain(|addr, _| wanted.contains_key(addr));
        for (addr, service) in &wanted {
            let addr = *addr;
            if self.udp_open.contains(&addr) {
                continue;
            }
            match crate::listen::bind_udp_reuseport(addr, self.workers.len()) {
                Ok(sockets) => {
                    for (worker, socket) in self.workers.iter().zip(sockets) {
                        let _ = worker.send(ListenerChange::OpenUdp { addr, socket });
                    }
                    self.udp_open.insert(addr);
                    self.udp_failed.remove(&addr);
                    tracing::info!(%addr, upstream = %service.upstream_name, "UDP service port open");
                }
                Err(e) => {
                    let why = Why::bind_failed(e.to_string());
                    if self.udp_failed.get(&addr) != Some(&why) {
                        tracing::warn!(
                            %addr,
                            upstream = %service.upstream_name,
                            "UDP service port not opened: {}; the other ports serve, and \
                             it is tried again every few seconds and at each configuration change",
                            why.text
                        );
                    }
                    self.udp_failed.insert(addr, why);
                }
            }
        }
    }

    /// Where UDP ports are bound: the ConfigMap's and the shared site's Gateway listeners'
    /// at the listening address; a Gateway's own address's at that address when the
    /// listening address is a wildcard (a reply must leave from the address the client
    /// sent to, which a wildcard socket does not choose), else at the listening address too.
    fn udp_addresses<'c>(
        &self,
        config: &'c Compiled,
    ) -> BTreeMap<SocketAddr, &'c Arc<StreamService>> {
        let mut wanted = BTreeMap::new();
        let shared = (config.gateway_streams.udp.iter()).chain(&config.udp_services);
        for (port, service) in shared {
            wanted
                .entry(SocketAddr::new(self.ip, *port))
                .or_insert(service);
        }
        for (ip, site) in &config.sites {
            let ip = if self.ip.is_unspecified() {
                *ip
            } else {
                self.ip
            };
            for (port, service) in &site.streams.udp {
                wanted.entry(SocketAddr::new(ip, *port)).or_insert(service);
            }
        }
        wanted
    }
}

/// Takes a connection out of the registry when it ends.
struct Registration {
    worker: Rc<Worker>,
    endpoint: SocketAddr,
    serial: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut streams = self.worker.streams.borrow_mut();
        if let Some(connections) = streams.by_endpoint.get_mut(&self.endpoint) {
            connections.remove(&self.serial);
            if connections.is_empty() {
                streams.by_endpoint.remove(&self.endpoint);
            }
        }
    }
}

/// What became of a connection, as nginx's stream `$status` says it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Spliced,
    Refused,
    NoEndpoint,
}

/// Serves one accepted connection to the TCP service on `port`; `_open` counts it (metrics,
/// max-worker-connections, the shutdown drain) until it ends. One function (~85 lines): the
/// PROXY header and the splice are helpers; what remains is the order of the connection's
/// steps, each a few lines.
pub(crate) async fn serve(
    worker: Rc<Worker>,
    mut client: TcpStream,
    peer: SocketAddr,
    port: u16,
    _open: OpenConnection,
) {
    let started = Instant::now();
    let serial = worker.next_connection_serial();
    let Some(config) = worker.config() else {
        return;
    };
    // A Gateway's own address (a site) has its own TCP listeners' routes.
    let local = (config.has_sites())
        .then(|| client.local_addr().ok().map(|a| a.ip()))
        .flatten();
    let Some(service) = config
        .stream_service(StreamProtocol::Tcp, local, port)
        .cloned()
    else {
        // The port left the configuration while this connection waited to be accepted.
        return;
    };
    let settings = worker.settings();
    let key: StreamKey = (port, service.upstream_name.clone());
    worker.count_stream(&key, |c| {
        c.accepted += 1;
        c.active += 1;
    });
    // TCP_NODELAY: inherited from the listening socket (`listen::socket`).
    let mut source = peer;
    let mut announced = None;
    let (mut received, mut sent) = (0, 0);
    let mut outcome = Outcome::Spliced;
    let mut removed = false;
    if service.decode_proxy_protocol {
        match read_proxy_header(&mut client, peer, port, &settings).await {
            Some((from, said)) => (source, announced) = (from, said),
            None => outcome = Outcome::Refused,
        }
    }
    let mut tried = Vec::new();
    let mut connected = None;
    if outcome == Outcome::Spliced {
        let reached = reach_and_splice(
            &worker,
            &mut client,
            (source, &service, &settings),
            &key,
            &mut tried,
        )
        .await;
        match reached {
            None => outcome = Outcome::NoEndpoint,
            Some((at, spliced)) => {
                connected = Some(at.saturating_duration_since(started));
                (removed, received, sent) = spliced;
            }
        }
    }
    worker.count_stream(&key, |c| {
        c.active -= 1;
        c.bytes_received += received;
        c.bytes_sent += sent;
        match outcome {
            Outcome::Spliced => c.endpoint_removed += u64::from(removed),
            Outcome::Refused => c.refused += 1,
            Outcome::NoEndpoint => c.failed += 1,
        }
    });
    if let Some(format) = &config.stream_access_log {
        let server = client
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], port)));
        let line = StreamLine {
            remote: source,
            proxy_protocol_addr: announced,
            server,
            protocol: "TCP",
            status: outcome.status(),
            bytes_sent: sent,
            bytes_received: received,
            session: started.elapsed(),
            upstreams: &tried,
            upstream_connect: connected,
            serial,
        };
        worker.log_stream(format, &line);
    }
}

/// Connects to an endpoint of the service (`tried` gathers the endpoints tried) and splices
/// until the connection ends: when it connected, then whether its endpoint's removal ended it
/// and the bytes each way; `None`: no endpoint could be reached.
async fn reach_and_splice(
    worker: &Rc<Worker>,
    client: &mut TcpStream,
    (source, service, settings): (SocketAddr, &StreamService, &model::Settings),
    key: &StreamKey,
    tried: &mut Vec<SocketAddr>,
) -> Option<(Instant, (bool, u64, u64))> {
    // A Gateway route's weighted shares: this connection's drawn here.
    let backend = service.pick_backend(|total| fastrand::u32(1..=total));
    let (mut upstream, endpoint) = connect(
        &worker.upstreams,
        backend,
        settings,
        settings.proxy_connect_timeout,
        tried,
        &service.upstream_name,
    )
    .await?;
    let connected = Instant::now();
    // Least request counts open connections here: the long-lived ones are the load.
    let least = settings.load_balance == model::LoadBalance::LeastRequest;
    if least {
        worker.upstreams.balancer.borrow_mut().started(endpoint);
    }
    let spliced = splice(
        worker,
        client,
        &mut upstream,
        endpoint,
        (source, service, settings),
        key,
    )
    .await;
    if least {
        worker.upstreams.balancer.borrow_mut().finished(endpoint);
    }
    Some((connected, spliced))
}

impl Outcome {
    /// nginx's stream `$status`.
    fn status(self) -> u16 {
        match self {
            Outcome::Spliced => 200,
            Outcome::Refused => 400,
            Outcome::NoEndpoint => 502,
        }
    }
}

/// A TCP service connection's PROXY protocol header (within client-header-timeout): the
/// client it names when the peer is a trusted proxy (else the peer), and the address it
/// announced; `None` when there is no valid header (the connection is refused).
async fn read_proxy_header(
    client: &mut TcpStream,
    peer: SocketAddr,
    port: u16,
    settings: &model::Settings,
) -> Option<(SocketAddr, Option<IpAddr>)> {
    let header = within(
        settings.client_header_timeout,
        proxy_protocol::read_header(client),
    )
    .await;
    match header {
        Some(Ok(proxy_protocol::Header::Proxied { source, .. })) => {
            let announced = Some(source.ip().to_canonical());
            if settings.is_trusted_proxy(peer.ip().to_canonical()) {
                Some((source, announced))
            } else {
                Some((peer, announced))
            }
        }
        Some(Ok(proxy_protocol::Header::Local)) => Some((peer, None)),
        failed => {
            tracing::debug!(%peer, port, ?failed, "TCP service: no valid PROXY protocol header; closed");
            None
        }
    }
}

/// Connects to an endpoint of `backend` for a TCP-level proxy (TCP services, TLS
/// passthrough); a failed connect goes to the next one as `proxy-stream-next-upstream*` allow,
/// each within `connect_timeout`. `tried` gathers every endpoint tried, in order; `what`
/// names the connection in logs.
pub(crate) async fn connect(
    upstreams: &Upstreams,
    backend: &model::Backend,
    settings: &model::Settings,
    connect_timeout: Duration,
    tried: &mut Vec<SocketAddr>,
    what: &str,
) -> Option<(TcpStream, SocketAddr)> {
    // 0 is nginx's "no limit": here every endpoint once.
    let tries = match settings.proxy_stream_next_upstream_tries {
        _ if !settings.proxy_stream_next_upstream => 1,
        0 => usize::MAX,
        n => n as usize,
    };
    let timeout = settings.proxy_stream_next_upstream_timeout;
    let first = Instant::now();
    while tried.len() < tries {
        let now = Instant::now();
        if !tried.is_empty() && !timeout.is_zero() && now.duration_since(first) >= timeout {
            return None;
        }
        let picked =
            upstreams
                .balancer
                .borrow_mut()
                .pick(backend, settings.load_balance, tried, now);
        let addr = picked.filter(|a| !tried.contains(a))?;
        tried.push(addr);
        match within(connect_timeout, TcpStream::connect(addr)).await {
            Some(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                let _ = socket2::SockRef::from(&stream)
                    .set_tcp_keepalive(&crate::listen::tcp_keepalive());
                return Some((stream, addr));
            }
            failed => {
                upstreams.stats.borrow_mut().connect_errors += 1;
                upstreams
                    .balancer
                    .borrow_mut()
                    .set_aside(addr, Instant::now());
                tracing::debug!(%addr, ?failed, what, "connect failed");
            }
        }
    }
    None
}

/// Splices until both sides are done, the idle timeout, or the endpoint's removal grace ends.
/// Returns whether the endpoint's removal ended it, and the bytes from the client and to it.
async fn splice(
    worker: &Rc<Worker>,
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    endpoint: SocketAddr,
    (source, service, settings): (SocketAddr, &StreamService, &model::Settings),
    key: &StreamKey,
) -> (bool, u64, u64) {
    if service.encode_proxy_protocol {
        let destination = client.local_addr().unwrap_or(source);
        let header = proxy_protocol::v1_header(source, destination);
        if let Err(e) = upstream.write_all(header.as_bytes()).await {
            tracing::debug!(%endpoint, error = %e, "TCP service: writing the PROXY header failed");
            return (false, 0, 0);
        }
    }
    let spliced = Rc::new(Spliced {
        key: key.clone(),
        traffic: Traffic::default(),
        deadline: std::cell::Cell::new(None),
        changed: Notify::new(),
    });
    let _registration = {
        let mut streams = worker.streams.borrow_mut();
        streams.serial += 1;
        let serial = streams.serial;
        streams
            .by_endpoint
            .entry(endpoint)
            .or_default()
            .insert(serial, spliced.clone());
        Registration {
            worker: worker.clone(),
            endpoint,
            serial,
        }
    };
    // An endpoint removed between the pick and now: the same grace as any other.
    if !worker.is_live_endpoint(&endpoint) {
        let grace = worker.settings().worker_shutdown_timeout;
        spliced.deadline.set(Some(Instant::now() + grace));
    }
    let idle = settings.proxy_stream_timeout;
    let traffic = &spliced.traffic;
    let removed = tokio::select! {
        ended = crate::zero_copy::relay(client, upstream, idle, traffic) => {
            if let Err(e) = ended {
                tracing::debug!(%endpoint, error = %e, "TCP service connection ended");
            }
            false
        }
        () = spliced.until_closed() => {
            tracing::debug!(%endpoint, "TCP service connection closed: its endpoint left the Service");
            true
        }
    };
    // Read before the registration goes (with no await between that and the caller's
    // counting, so no scrape sees these bytes twice or not at all).
    (
        removed,
        traffic.from_client.get(),
        traffic.from_upstream.get(),
    )
}
