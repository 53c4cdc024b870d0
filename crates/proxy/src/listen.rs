//! Binding the listening sockets, the errors a person starting the proxy can act on, and why a
//! port the configuration asks for is not open (a conflict, or a bind that is tried again).
//!
//! Every worker gets its own socket on the same port (SO_REUSEPORT): the kernel spreads new
//! connections over them, so workers never contend on one accept queue.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, TcpKeepalive, Type};

/// Pending connections the kernel may queue per socket before refusing more.
const BACKLOG: i32 = 4096;

/// Why a port the configuration asks for is not open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Why {
    pub(crate) text: String,
    /// A bind that failed (another program holds the port, a permission): tried again. A
    /// conflict with a port Sluice itself uses is not: only a configuration change resolves it,
    /// and every change applies the ports anew.
    pub(crate) retried: bool,
}

impl Why {
    pub(crate) fn conflict(text: String) -> Why {
        Why {
            text,
            retried: false,
        }
    }

    pub(crate) fn bind_failed(text: String) -> Why {
        Why {
            text,
            retried: true,
        }
    }
}

/// A port that is not open: what /config names it ("TCP service port 5432"), and why.
pub(crate) struct NotOpen {
    pub(crate) port: String,
    pub(crate) why: Why,
}

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "cannot listen on {addr} for the {role}: permission denied; ports below 1024 need privileges: \
         run as root, grant CAP_NET_BIND_SERVICE (in a container: securityContext.capabilities.add \
         NET_BIND_SERVICE; elsewhere `setcap cap_net_bind_service=+ep <binary>`), or choose a \
         port ≥ 1024 with {flag}"
    )]
    PrivilegedPort {
        role: &'static str,
        flag: &'static str,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("cannot listen on {addr} for the {role} (set with {flag})")]
    Bind {
        role: &'static str,
        flag: &'static str,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error(
        "--status-listen {addr} is not a loopback address: the status listener serves /config, \
         which shows every tenant's hosts, paths, endpoint addresses and Secret names; bind it to \
         127.0.0.1 or [::1] and read it from the node, with `kubectl exec`, or through \
         `kubectl port-forward`"
    )]
    StatusNotLoopback { addr: SocketAddr },
    #[error("cannot build the TLS server configuration")]
    Tls(#[source] rustls::Error),
    #[error("cannot open the access log")]
    AccessLog(#[source] io::Error),
    #[error("cannot generate the fallback self-signed certificate: {0}")]
    SelfSigned(String),
    #[error("cannot start {what}")]
    Thread {
        what: String,
        #[source]
        source: io::Error,
    },
}

/// Sockets bound for one role, all on `addr`.
pub(crate) struct Bound {
    pub(crate) addr: SocketAddr,
    pub(crate) sockets: Vec<TcpListener>,
}

/// Binds `count` sockets on `addr` with SO_REUSEPORT. With port 0, the first socket picks the
/// port and the rest bind the port it got.
pub(crate) fn bind_reuseport(
    role: &'static str,
    flag: &'static str,
    addr: SocketAddr,
    count: usize,
) -> Result<Bound, StartError> {
    bind(role, flag, addr, count, true)
}

/// Binds one socket without SO_REUSEPORT, so a second process cannot silently share it.
pub(crate) fn bind_single(
    role: &'static str,
    flag: &'static str,
    addr: SocketAddr,
) -> Result<Bound, StartError> {
    bind(role, flag, addr, 1, false)
}

fn bind(
    role: &'static str,
    flag: &'static str,
    addr: SocketAddr,
    count: usize,
    reuse_port: bool,
) -> Result<Bound, StartError> {
    let error = |source: io::Error| {
        if source.kind() == io::ErrorKind::PermissionDenied && addr.port() < 1024 {
            StartError::PrivilegedPort {
                role,
                flag,
                addr,
                source,
            }
        } else {
            StartError::Bind {
                role,
                flag,
                addr,
                source,
            }
        }
    };
    let first = socket(addr, reuse_port).map_err(error)?;
    let bound = first.local_addr().map_err(error)?;
    let mut sockets = Vec::with_capacity(count);
    sockets.push(first);
    for _ in 1..count {
        sockets.push(socket(bound, reuse_port).map_err(error)?);
    }
    Ok(Bound {
        addr: bound,
        sockets,
    })
}

/// `count` UDP sockets on `addr` sharing its port (SO_REUSEPORT: the kernel keeps a client's
/// datagrams on one socket, so one worker sees all of a client's session). Port 0 is learned
/// from the first.
pub(crate) fn bind_udp_reuseport(
    addr: SocketAddr,
    count: usize,
) -> io::Result<Vec<std::net::UdpSocket>> {
    let udp = |addr: SocketAddr| -> io::Result<std::net::UdpSocket> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        Ok(socket.into())
    };
    let first = udp(addr)?;
    let bound = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..count {
        sockets.push(udp(bound)?);
    }
    Ok(sockets)
}

/// TCP keepalive on client and upstream sockets: a peer that vanished without a FIN or RST (a
/// node lost, a NAT entry dropped) is found after about two minutes of silence instead of
/// holding its connection, tunnel or pooled slot until the kernel's two-hour default.
pub(crate) fn tcp_keepalive() -> TcpKeepalive {
    TcpKeepalive::new()
        .with_time(Duration::from_secs(60))
        .with_interval(Duration::from_secs(10))
        .with_retries(6)
}

fn socket(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // A restarted proxy must be able to bind while old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    // Accepted sockets inherit both (Linux): no system call per connection
    // (`accepted_sockets_inherit_nodelay_and_keepalive`).
    socket.set_tcp_nodelay(true)?;
    socket.set_tcp_keepalive(&tcp_keepalive())?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_is_learned_once_and_shared() {
        let bound = bind_reuseport(
            "HTTP listener",
            "--http-listen",
            "127.0.0.1:0".parse().unwrap(),
            3,
        )
        .unwrap();
        assert_ne!(bound.addr.port(), 0);
        assert_eq!(bound.sockets.len(), 3);
        for socket in &bound.sockets {
            assert_eq!(socket.local_addr().unwrap(), bound.addr);
        }
    }

    #[test]
    fn accepted_sockets_inherit_nodelay_and_keepalive() {
        // The servers set neither per connection: they rely on this.
        let bound = bind_reuseport(
            "HTTP listener",
            "--http-listen",
            "127.0.0.1:0".parse().unwrap(),
            1,
        )
        .unwrap();
        let listener = &bound.sockets[0];
        listener.set_nonblocking(false).unwrap();
        let client = std::net::TcpStream::connect(bound.addr).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(accepted.nodelay().unwrap());
        let accepted = socket2::SockRef::from(&accepted);
        assert!(accepted.keepalive().unwrap());
        assert_eq!(
            accepted.tcp_keepalive_time().unwrap(),
            Duration::from_secs(60)
        );
        assert_eq!(
            accepted.tcp_keepalive_interval().unwrap(),
            Duration::from_secs(10)
        );
        assert_eq!(accepted.tcp_keepalive_retries().unwrap(), 6);
        // ...and a socket that is not accepted has neither.
        assert!(!client.nodelay().unwrap());
    }

    #[test]
    fn a_taken_port_names_the_role_and_the_flag() {
        let taken = bind_single(
            "admin listener",
            "--admin-listen",
            "127.0.0.1:0".parse().unwrap(),
        )
        .unwrap();
        let err = bind_single("admin listener", "--admin-listen", taken.addr)
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(text.contains("admin listener"), "{text}");
        assert!(text.contains("--admin-listen"), "{text}");
        assert!(text.contains(&taken.addr.to_string()), "{text}");
    }

    #[test]
    fn permission_denied_below_1024_explains_the_remedies() {
        let err = StartError::PrivilegedPort {
            role: "HTTPS listener",
            flag: "--https-listen",
            addr: "0.0.0.0:443".parse().unwrap(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        let text = err.to_string();
        assert!(text.contains("CAP_NET_BIND_SERVICE"), "{text}");
        assert!(text.contains("setcap cap_net_bind_service=+ep"), "{text}");
        assert!(text.contains("--https-listen"), "{text}");
    }
}
