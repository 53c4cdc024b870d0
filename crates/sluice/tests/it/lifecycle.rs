//! A `sluice serve` process at its limits and through its stop: `max-worker-connections`, the
//! open-files limit (under util-linux `prlimit`), SIGTERM with `--shutdown-grace-period`.
//! The upstream is hand-rolled, so each test knows when a request is in flight and holds it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

/// An upstream that answers `/slow` only once its gate opens, `/ws` with a 101 (then holds the
/// tunnel open), anything else at once; keep-alive, one thread per connection.
struct Upstream {
    addr: SocketAddr,
    gate: Arc<(Mutex<bool>, Condvar)>,
    /// A path, each time a request for it arrives.
    arrived: Receiver<String>,
}

impl Upstream {
    fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let (tell, arrived) = channel();
        let shared_gate = gate.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (gate, tell) = (shared_gate.clone(), tell.clone());
                std::thread::spawn(move || serve_upstream(conn, &gate, &tell));
            }
        });
        Upstream {
            addr,
            gate,
            arrived,
        }
    }

    fn wait_for(&self, path: &str) {
        loop {
            let seen = self
                .arrived
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("{path} did not reach the upstream"));
            if seen == path {
                return;
            }
        }
    }

    fn open_gate(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }
}

fn serve_upstream(
    mut conn: TcpStream,
    gate: &(Mutex<bool>, Condvar),
    tell: &std::sync::mpsc::Sender<String>,
) {
    let mut buffer = Vec::new();
    loop {
        let Some(end) = read_head(&mut conn, &mut buffer) else {
            return;
        };
        let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
        buffer.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("").to_owned();
        let _ = tell.send(path.clone());
        if path == "/ws" {
            let _ = conn.write_all(
                b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n",
            );
            // Hold the tunnel until the proxy closes it.
            let mut sink = [0u8; 1024];
            while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
            return;
        }
        if path == "/slow" {
            let mut open = gate.0.lock().unwrap();
            while !*open {
                open = gate.1.wait(open).unwrap();
            }
        }
        let body = if path == "/slow" { "slow" } else { "fast" };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if conn.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Reads until a complete head is in `buffer`; returns its length (with the blank line).
fn read_head(conn: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(end + 4);
        }
        let mut chunk = [0u8; 4096];
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A keep-alive client connection.
struct Client {
    stream: TcpStream,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, WAIT).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        Client { stream }
    }

    fn send(&mut self, path: &str) {
        let head = format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n\r\n");
        self.stream.write_all(head.as_bytes()).unwrap();
    }

    /// One response with a `content-length` body: (status, body).
    fn response(&mut self) -> (u16, String) {
        let mut buffer = Vec::new();
        let end = read_head(&mut self.stream, &mut buffer).expect("a response head");
        let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buffer.len() < end + length {
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed inside a body");
            buffer.extend_from_slice(&chunk[..n]);
        }
        let body = String::from_utf8_lossy(&buffer[end..end + length]).into_owned();
        (status, body)
    }

    fn get(&mut self, path: &str) -> (u16, String) {
        self.send(path);
        self.response()
    }

    /// True when the proxy closed the connection (EOF or reset) within `WAIT`.
    fn closed_by_proxy(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Err(e) => e.kind() == ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }

    /// True when nothing arrives within `quiet`.
    fn silent_for(&mut self, quiet: Duration) -> bool {
        self.stream.set_read_timeout(Some(quiet)).unwrap();
        let mut byte = [0u8; 1];
        let silent = matches!(
            self.stream.read(&mut byte),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
        );
        self.stream.set_read_timeout(Some(WAIT)).unwrap();
        silent
    }
}

/// `sluice serve` on port 0 with one worker, logging at info into `DIR/serve.log`, under
/// `prlimit --nofile=SOFT:HARD` when given.
fn serve(dir: &Path, nofile: Option<(u64, u64)>, extra: &[&str]) -> Serve {
    let mut command = match nofile {
        Some((soft, hard)) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={soft}:{hard}")).arg("--").arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    command
        .args(["serve", "--config", dir.to_str().unwrap()])
        .args(LOOPBACK_LISTENERS)
        .args(["--workers", "1"])
        .args(extra)
        .env("SLUICE_LOG", "info")
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("serve.log")).unwrap(),
        ));
    Serve::from_process(Process::spawn(command, "sluice serve"))
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("serve.log")).unwrap()
}

/// The value of an unlabelled series in /metrics.
fn metric(serve: &Serve, name: &str) -> f64 {
    let text = serve.admin("/metrics").text();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn at_max_worker_connections_idle_connections_close_first_then_accepting_pauses() {
    let upstream = Upstream::start();
    let dir = config_dir(
        "connection-cap",
        upstream.addr,
        &[("max-worker-connections", "2")],
    );
    // A soft limit of 512 under a hard one of 1024, as a container runtime might set them.
    let serve = serve(&dir, Some((512, 1024)), &[]);
    let raised = log(&dir);
    assert!(
        raised.contains(
            "raised the open-files limit (RLIMIT_NOFILE) from 512 to the hard limit 1024"
        ),
        "{raised}"
    );

    // The cap: one idle keep-alive connection and one busy one.
    let mut idle = Client::connect(serve.http);
    assert_eq!(idle.get("/fast"), (200, "fast".into()));
    let mut busy = Client::connect(serve.http);
    busy.send("/slow");
    upstream.wait_for("/slow");

    // A third: the idle one is closed for it, the busy one is not.
    let mut third = Client::connect(serve.http);
    assert_eq!(third.get("/fast"), (200, "fast".into()));
    assert!(idle.closed_by_proxy(), "the idle connection stayed open");

    // Now both are busy: a fourth is not served until one of them finishes...
    third.send("/slow");
    upstream.wait_for("/slow");
    let mut fourth = Client::connect(serve.http);
    fourth.send("/fast");
    assert!(
        fourth.silent_for(Duration::from_millis(500)),
        "served above max-worker-connections"
    );
    // ...while the admin server answers probes.
    assert_eq!(serve.admin("/healthz").status, 200);
    assert_eq!(serve.admin("/ready").status, 200);

    upstream.open_gate();
    assert_eq!(busy.response(), (200, "slow".into()));
    assert_eq!(third.response(), (200, "slow".into()));
    assert_eq!(fourth.response(), (200, "fast".into()));

    // The idle one for the third, then whichever of the first two finished first for the
    // fourth.
    assert_eq!(
        metric(
            &serve,
            "sluice_client_connections_closed_idle_at_limit_total"
        ),
        2.0
    );
    assert!(metric(&serve, "sluice_accept_paused_total") >= 1.0);
    let logged = log(&dir);
    let line = logged
        .lines()
        .find(|l| l.contains("connection limit reached"))
        .unwrap_or_else(|| panic!("no limit line in\n{logged}"));
    assert!(line.contains("idle_closed=1"), "{line}");
    assert!(line.contains("max_worker_connections=2"), "{line}");
}

/// Descriptors the process holds now, of those the limit counts: numbers below it (one
/// inherited from the test's parent can sit above, and then does not count).
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<usize>().ok())
                .filter(|fd| *fd < LIMIT)
                .count()
        })
        .unwrap_or(0)
}

/// The open-files limit the descriptor test runs under (soft = hard: nothing to raise), small
/// enough to fill.
const LIMIT: usize = 96;

#[test]
fn out_of_descriptors_an_upstream_connect_answers_503_without_blaming_the_endpoint() {
    let upstream = Upstream::start();
    let dir = config_dir(
        "emfile",
        upstream.addr,
        // No pooling: every request connects afresh. No cap short of the limit.
        &[("keepalive", "0"), ("max-worker-connections", "10000")],
    );
    let serve = serve(&dir, Some((LIMIT as u64, LIMIT as u64)), &[]);
    let pid = serve.process.pid();
    let mut warm = Client::connect(serve.http);
    assert_eq!(warm.get("/fast"), (200, "fast".into()));
    drop(warm);
    // Settled: the warm-up's sockets closed, the admin thread's spares opened.
    let mut last = 0;
    eventually(WAIT, "the descriptor count settles", || {
        std::thread::sleep(Duration::from_millis(200));
        let now = open_fds(pid);
        (std::mem::replace(&mut last, now) == now).then_some(())
    });

    // Fill the table but one descriptor with connections that send nothing...
    let mut held = Vec::new();
    while open_fds(pid) < LIMIT - 1 {
        let before = open_fds(pid);
        held.push(TcpStream::connect(serve.http).unwrap());
        eventually(WAIT, "the connection accepted", || {
            (open_fds(pid) > before).then_some(())
        });
    }
    eventually(WAIT, "all but one descriptor in use", || {
        (open_fds(pid) == LIMIT - 1).then_some(())
    });
    // ...so this client takes the last one, and its upstream connect finds none.
    let mut last = Client::connect(serve.http);
    let (status, body) = last.get("/fast");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("out of file descriptors"), "{body}");

    // With every descriptor taken (again: the 503 may have closed its connection)...
    while open_fds(pid) < LIMIT {
        let before = open_fds(pid);
        held.push(TcpStream::connect(serve.http).unwrap());
        eventually(WAIT, "the connection accepted", || {
            (open_fds(pid) > before).then_some(())
        });
    }
    // ...the liveness probe is still answered (a spare descriptor of the admin thread).
    assert_eq!(serve.admin("/healthz").status, 200);

    drop(held);
    drop(last);
    eventually(WAIT, "descriptors free again", || {
        (open_fds(pid) < LIMIT / 2).then_some(())
    });
    // The endpoint was not blamed: no connect error counted, and it serves.
    assert_eq!(metric(&serve, "sluice_upstream_connect_errors_total"), 0.0);
    assert!(metric(&serve, "sluice_open_files_exhausted_total") >= 1.0);
    let mut again = Client::connect(serve.http);
    assert_eq!(again.get("/fast"), (200, "fast".into()));
}

#[test]
fn sigterm_fails_ready_serves_through_the_grace_period_then_drains() {
    let upstream = Upstream::start();
    let dir = config_dir("grace", upstream.addr, &[("worker-shutdown-timeout", "3s")]);
    let mut serve = serve(&dir, None, &["--shutdown-grace-period", "4s"]);
    let http = serve.http;
    assert_eq!(serve.admin("/ready").status, 200);

    // In flight across the whole stop: a slow request and a WebSocket tunnel.
    let mut slow = Client::connect(http);
    slow.send("/slow");
    upstream.wait_for("/slow");
    let mut tunnel = open_tunnel(http);

    serve.process.signal("TERM");
    // /ready fails at once, while new connections are still served.
    eventually(WAIT, "/ready answers 503 after SIGTERM", || {
        (serve.admin("/ready").status == 503).then_some(())
    });
    let (status, body) = Client::connect(http).get("/fast");
    assert_eq!((status, body.as_str()), (200, "fast"));
    assert_eq!(serve.admin("/healthz").status, 200);

    // After the grace period the listeners close...
    eventually(WAIT, "listener closed after the grace period", || {
        TcpStream::connect(http).is_err().then_some(())
    });
    // ...the request in flight still completes...
    upstream.open_gate();
    assert_eq!(slow.response(), (200, "slow".into()));
    // ...and the tunnel still open at the end of worker-shutdown-timeout is closed and counted.
    assert!(tunnel.closed_by_proxy(), "the tunnel stayed open");
    assert_eq!(serve.process.wait_exit(WAIT), 0);
    let logged = log(&dir);
    let line = logged
        .lines()
        .find(|l| l.contains("worker-shutdown-timeout elapsed"))
        .unwrap_or_else(|| panic!("no drain line in\n{logged}"));
    assert!(line.contains("tunnels=1"), "{line}");
}

#[test]
fn a_websocket_tunnel_keeps_its_place_under_max_worker_connections() {
    let upstream = Upstream::start();
    let dir = config_dir(
        "tunnel-cap",
        upstream.addr,
        &[("max-worker-connections", "1")],
    );
    let serve = serve(&dir, None, &[]);
    let tunnel = open_tunnel(serve.http);

    // The tunnel is busy, not idle: a newcomer waits...
    let mut newcomer = Client::connect(serve.http);
    newcomer.send("/fast");
    assert!(
        newcomer.silent_for(Duration::from_millis(500)),
        "served above max-worker-connections while a tunnel was open"
    );
    // ...until the tunnel ends.
    tunnel.stream.shutdown(std::net::Shutdown::Both).unwrap();
    assert_eq!(newcomer.response(), (200, "fast".into()));
}

/// A WebSocket upgrade through the proxy, answered with 101.
fn open_tunnel(http: SocketAddr) -> Client {
    let mut tunnel = Client::connect(http);
    tunnel
        .stream
        .write_all(
            b"GET /ws HTTP/1.1\r\nHost: app.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        )
        .unwrap();
    let mut head = Vec::new();
    read_head(&mut tunnel.stream, &mut head).expect("a 101 head");
    assert!(head.starts_with(b"HTTP/1.1 101"), "{head:?}");
    tunnel
}

/// The soft and hard open-files limits of process `pid`.
fn nofile_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut numbers = line.split_whitespace().skip(3);
    (
        numbers.next().unwrap().to_owned(),
        numbers.next().unwrap().to_owned(),
    )
}

#[test]
fn max_worker_open_files_sets_the_process_limit_at_start() {
    let upstream = Upstream::start();
    // Per worker, as nginx's worker_rlimit_nofile: one worker here.
    let dir = config_dir(
        "max-worker-open-files",
        upstream.addr,
        &[("max-worker-open-files", "300")],
    );
    let first = serve(&dir, Some((1024, 4096)), &[]);
    assert_eq!(
        nofile_limits(first.process.pid()),
        ("300".into(), "4096".into())
    );
    assert_eq!(first.get("app.test", "/").status, 200);

    // NGINX Inc.'s name; without either key the soft limit goes to the hard one.
    let dir = config_dir(
        "worker-rlimit-nofile",
        upstream.addr,
        &[("worker-rlimit-nofile", "500")],
    );
    let alias = serve(&dir, Some((1024, 4096)), &[]);
    assert_eq!(nofile_limits(alias.process.pid()).0, "500");
    let dir = config_dir("open-files-default", upstream.addr, &[]);
    let default = serve(&dir, Some((1024, 4096)), &[]);
    assert_eq!(nofile_limits(default.process.pid()).0, "4096");
}

/// The ingress-nginx chart's preStop hook, `/wait-shutdown`, with Sluice's image: `sluice
/// wait-shutdown` (what the image's `/wait-shutdown` link runs) stops the container's `sluice
/// serve` and returns once it has drained, as ingress-nginx's does; another sluice process is
/// left alone. In a PID namespace of its own (util-linux `unshare`, as root), as a container is:
/// it must not touch the other tests' servers.
#[test]
fn wait_shutdown_stops_the_containers_server_and_waits_for_it() {
    let dir = class_only_dir("wait-shutdown");
    let script = r#"
"$BIN" serve --config "$DIR" --http-listen 127.0.0.1:0 --https-listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 --status-listen 127.0.0.1:0 --workers 1 \
    >"$DIR/serve.out" 2>"$DIR/serve.err" &
serve=$!
for _ in $(seq 1 100); do grep -q listening "$DIR/serve.out" && break; sleep 0.1; done
grep -q listening "$DIR/serve.out" || { echo "serve never listened"; exit 3; }
# Not a server: left alone.
"$BIN" backend --listen 127.0.0.1:0 >/dev/null 2>&1 &
backend=$!
"$BIN" wait-shutdown
echo "wait-shutdown=$?"
# Returned only once the server had drained: its last line is written before it tells waiters.
grep -q ' stopped$' "$DIR/serve.err" || echo "returned before the drain ended"
wait "$serve"
echo "serve=$?"
kill -0 "$backend" && echo "backend alive"
kill "$backend"
# No server left: an error, as ingress-nginx's pkill finds nothing.
"$BIN" wait-shutdown 2>/dev/null
echo "again=$?"
"#;
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "bash", "-c", script])
        .env("BIN", BIN)
        .env("DIR", &dir)
        .output()
        .expect("util-linux unshare runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let log = std::fs::read_to_string(dir.join("serve.err")).unwrap_or_default();
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["wait-shutdown=0", "serve=0", "backend alive", "again=1"],
        "stderr: {}\nserve's log: {log}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(log.contains("shutting down"), "{log}");
}

/// In a container the server is its PID namespace's init, and when init exits the kernel kills
/// every other process of the namespace: a hook that waited for the exit itself was killed
/// (exit 137, "PreStop hook failed" and a Warning Event on each pod stop, seen on a real node).
/// It returns 0 as the drained server waits for it.
#[test]
fn wait_shutdown_exits_0_when_the_server_is_its_pid_namespaces_init() {
    let dir = class_only_dir("wait-shutdown-init");
    let out = std::fs::File::create(dir.join("serve.out")).unwrap();
    let err = std::fs::File::create(dir.join("serve.err")).unwrap();
    let mut unshare = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", BIN, "serve", "--config"])
        .arg(&dir)
        .args(LOOPBACK_LISTENERS)
        .args(["--workers", "1"])
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("util-linux unshare runs");
    let listening = || {
        std::fs::read_to_string(dir.join("serve.out")).is_ok_and(|text| text.contains("listening"))
    };
    for _ in 0..100 {
        if listening() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(listening(), "serve never listened");
    // unshare's one child is the server, PID 1 inside.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", unshare.id())).unwrap();
    let init = children.split_whitespace().next().expect("unshare's child");
    let hook = Command::new("nsenter")
        .args(["--target", init, "--pid", "--mount", BIN, "wait-shutdown"])
        .output()
        .expect("util-linux nsenter runs");
    let served = unshare.wait().unwrap();
    let log = std::fs::read_to_string(dir.join("serve.err")).unwrap_or_default();
    assert!(
        hook.status.success(),
        "wait-shutdown: {:?} {}\nserve's log: {log}",
        hook.status,
        String::from_utf8_lossy(&hook.stderr)
    );
    assert!(served.success(), "serve: {served:?}\n{log}");
    assert!(log.contains("shutting down"), "{log}");
}

/// A config folder holding Sluice's IngressClass and nothing else: a server with no routes.
fn class_only_dir(name: &str) -> std::path::PathBuf {
    let dir = temp_dir(name);
    std::fs::write(
        dir.join("class.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: sluice}\nspec: {controller: sluice.dev/ingress-controller}\n",
    )
    .unwrap();
    dir
}
