//! Real servers on 127.0.0.1:0 made to misbehave in one specific way each, and a way to run the
//! generator from a command line as a user would type it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Parser;
use rustls::HandshakeKind;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Behavior {
    /// 200 with a 5-byte body, keep-alive.
    Ok,
    /// This status, empty body.
    Status(u16),
    /// Holds every response while `(now - start) mod period` is in `[offset, offset + freeze)`.
    Freeze {
        period: Duration,
        offset: Duration,
        freeze: Duration,
    },
    /// Sends part of a response, then resets the connection (SO_LINGER 0).
    ResetMidResponse,
    /// Reads the request and never answers.
    NeverAnswer,
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) accepted: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) full_handshakes: AtomicU64,
    pub(crate) resumed_handshakes: AtomicU64,
    pub(crate) server_names: Mutex<Vec<String>>,
}

pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    pub(crate) stats: Arc<Stats>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// A self-signed certificate for `localhost`, its PEM file (for `--cacert`) and a server config.
pub(crate) struct TestTls {
    pub(crate) cacert: PathBuf,
    pub(crate) server_config: Arc<rustls::ServerConfig>,
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: load::LoadArgs,
}

/// Parses a `sluice load` command line (without the program name).
pub(crate) fn args(argv: &[&str]) -> load::LoadArgs {
    Cli::try_parse_from(std::iter::once("load").chain(argv.iter().copied()))
        .expect("valid command line")
        .args
}

/// Validates and runs a command line, returning its results.
pub(crate) fn run(argv: &[&str]) -> load::Results {
    let config = load::Config::try_from(args(argv)).expect("valid config");
    load::run(&config).expect("run starts")
}

/// A path under the system temp dir that no other test uses.
pub(crate) fn temp_path(name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sluice-load-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{n}-{name}"))
}

/// Removes a file made under [`temp_path`], and its directory once empty.
pub(crate) fn remove_temp(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

impl TestTls {
    pub(crate) fn new() -> TestTls {
        let leaf = testkit::tls::self_signed(&["localhost"]);
        let cacert = temp_path("ca.pem");
        std::fs::write(&cacert, &leaf.cert_pem).unwrap();
        TestTls {
            cacert,
            server_config: leaf.server_config(&[b"http/1.1"]),
        }
    }
}

impl Drop for TestTls {
    fn drop(&mut self) {
        remove_temp(&self.cacert);
    }
}

impl TestServer {
    pub(crate) fn start(behavior: Behavior) -> TestServer {
        TestServer::start_with(behavior, None)
    }

    pub(crate) fn start_tls(behavior: Behavior, tls: &TestTls) -> TestServer {
        TestServer::start_with(behavior, Some(tls.server_config.clone()))
    }

    fn start_with(behavior: Behavior, tls: Option<Arc<rustls::ServerConfig>>) -> TestServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let (stop, mut stopped) = oneshot::channel();
        let thread_stats = stats.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
                let started = Instant::now();
                loop {
                    tokio::select! {
                        _ = &mut stopped => break,
                        accepted = listener.accept() => {
                            let Ok((socket, _)) = accepted else { continue };
                            tokio::spawn(handle(
                                socket,
                                behavior,
                                acceptor.clone(),
                                thread_stats.clone(),
                                started,
                            ));
                        }
                    }
                }
            });
        });
        TestServer {
            addr,
            stats,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}/", self.addr)
    }

    pub(crate) fn count(&self, counter: fn(&Stats) -> &AtomicU64) -> u64 {
        counter(&self.stats).load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A server on a thread of its own that hands each accepted connection to `serve` (the HTTP/2
/// tests' hyper servers); stopped and joined on drop.
pub(crate) struct ConnServer {
    pub(crate) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ConnServer {
    pub(crate) fn start<F, Fut>(serve: F) -> ConnServer
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                let accept = async {
                    loop {
                        let (socket, _) = listener.accept().await.unwrap();
                        tokio::spawn(serve(socket));
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        ConnServer {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for ConnServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn handle(
    socket: TcpStream,
    behavior: Behavior,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    stats: Arc<Stats>,
    started: Instant,
) {
    stats.accepted.fetch_add(1, Ordering::SeqCst);
    if matches!(behavior, Behavior::ResetMidResponse) {
        socket.set_zero_linger().unwrap();
    }
    match acceptor {
        None => serve(socket, behavior, &stats, started).await,
        Some(acceptor) => {
            let Ok(tls) = acceptor.accept(socket).await else {
                return;
            };
            let session = tls.get_ref().1;
            match session.handshake_kind() {
                Some(HandshakeKind::Resumed) => &stats.resumed_handshakes,
                _ => &stats.full_handshakes,
            }
            .fetch_add(1, Ordering::SeqCst);
            if let Some(name) = session.server_name() {
                stats.server_names.lock().unwrap().push(name.to_owned());
            }
            serve(tls, behavior, &stats, started).await;
        }
    }
}

/// A minimal HTTP/1.1 server loop: requests without bodies, keep-alive unless asked to close.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut io: S,
    behavior: Behavior,
    stats: &Stats,
    started: Instant,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match io.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        buf.drain(..head_end);
        let close = head.contains("\r\nconnection: close\r\n");
        stats.requests.fetch_add(1, Ordering::SeqCst);
        let response: Vec<u8> = match behavior {
            Behavior::Ok => ok_response(close),
            Behavior::Status(code) => format!(
                "HTTP/1.1 {code} Test\r\nContent-Length: 0\r\n{}\r\n",
                if close { "Connection: close\r\n" } else { "" }
            )
            .into_bytes(),
            Behavior::Freeze {
                period,
                offset,
                freeze,
            } => {
                let phase =
                    Duration::from_nanos((started.elapsed().as_nanos() % period.as_nanos()) as u64);
                if phase >= offset && phase < offset + freeze {
                    tokio::time::sleep(offset + freeze - phase).await;
                }
                ok_response(close)
            }
            Behavior::ResetMidResponse => {
                let _ = io
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
                    .await;
                let _ = io.flush().await;
                // Let the bytes leave before the reset discards anything unsent.
                tokio::time::sleep(Duration::from_millis(5)).await;
                return;
            }
            Behavior::NeverAnswer => std::future::pending().await,
        };
        if io.write_all(&response).await.is_err() || io.flush().await.is_err() {
            return;
        }
        if close {
            let _ = io.shutdown().await;
            return;
        }
    }
}

fn ok_response(close: bool) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n{}\r\nhello",
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes()
}
