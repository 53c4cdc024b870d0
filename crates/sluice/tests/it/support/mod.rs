//! End-to-end test support: real `sluice` processes (serve, backend) on 127.0.0.1 port 0, a
//! small blocking HTTP/1.1 client (plain or TLS with certificate verification). The process
//! harness, `eventually` and certificates are `testkit`'s, re-exported here.

pub(crate) mod bench;
pub(crate) mod kube;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use testkit::process::Process;
pub(crate) use testkit::tls::{self_signed, self_signed_until, Leaf};
pub(crate) use testkit::{eventually, free_udp_port};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_sluice");

/// `serve`'s (and `demo`'s) four listeners, each on loopback port 0.
pub(crate) const LOOPBACK_LISTENERS: [&str; 8] = [
    "--http-listen",
    "127.0.0.1:0",
    "--https-listen",
    "127.0.0.1:0",
    "--admin-listen",
    "127.0.0.1:0",
    "--status-listen",
    "127.0.0.1:0",
];

/// [`LOOPBACK_LISTENERS`] with `flag`'s address replaced by `addr`.
pub(crate) fn loopback_listeners_but<'a>(flag: &str, addr: &'a str) -> Vec<&'a str> {
    let mut args = LOOPBACK_LISTENERS.to_vec();
    let at = args
        .iter()
        .position(|a| *a == flag)
        .unwrap_or_else(|| panic!("{flag} is not a listener flag"));
    args[at + 1] = addr;
    args
}

/// `sluice ARGS` with a quiet log (warnings on the test's stderr).
pub(crate) fn sluice_command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("SLUICE_LOG", "warn")
        .stderr(Stdio::inherit());
    command
}

/// Starts `sluice ARGS` and waits (bounded) for its first stdout line.
pub(crate) fn run_sluice(args: &[&str]) -> Process {
    Process::spawn(sluice_command(args), &format!("sluice {args:?}"))
}

/// A `sluice serve` with the addresses it bound.
pub(crate) struct Serve {
    pub(crate) process: Process,
    pub(crate) http: SocketAddr,
    pub(crate) https: SocketAddr,
    pub(crate) admin: SocketAddr,
    /// The loopback status listener (`/config`).
    pub(crate) status: SocketAddr,
}

/// A `sluice backend` "pod".
pub(crate) struct Pod {
    pub(crate) process: Process,
    pub(crate) addr: SocketAddr,
    pub(crate) name: String,
}

pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn addr_after(line: &str, key: &str) -> SocketAddr {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key))
        .and_then(|a| a.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no {key} address in {line:?}"))
}

impl Serve {
    /// `sluice serve --config DIR` on port 0 everywhere, plus `extra` flags.
    pub(crate) fn start(config: &Path, extra: &[&str]) -> Serve {
        Serve::from_process(run_sluice(&Serve::args(config, extra)))
    }

    /// The arguments of [`Serve::start`].
    pub(crate) fn args<'a>(config: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
        let config = config.to_str().unwrap();
        let mut args = vec!["serve", "--config", config];
        args.extend(LOOPBACK_LISTENERS);
        args.extend(["--workers", "2"]);
        args.extend_from_slice(extra);
        args
    }

    pub(crate) fn from_process(process: Process) -> Serve {
        let line = process.stdout_line.clone();
        assert!(line.starts_with("sluice serve: listening"), "{line}");
        Serve {
            http: addr_after(&line, "http="),
            https: addr_after(&line, "https="),
            admin: addr_after(&line, "admin="),
            status: addr_after(&line, "status="),
            process,
        }
    }

    pub(crate) fn get(&self, host: &str, path: &str) -> Response {
        get(self.http, host, path).unwrap_or_else(|e| panic!("GET {host}{path}: {e}"))
    }

    pub(crate) fn admin(&self, path: &str) -> Response {
        get(self.admin, "admin", path).unwrap()
    }

    /// `GET path` on the status listener.
    pub(crate) fn status_page(&self, path: &str) -> Response {
        get(self.status, "status", path).unwrap()
    }

    pub(crate) fn config_json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.status_page("/config").body).unwrap()
    }
}

impl Pod {
    pub(crate) fn start(name: &str) -> Pod {
        Pod::start_at(name, "127.0.0.1:0")
    }

    /// A backend listening on `listen` (e.g. `198.18.0.11:8080` inside a test's own network
    /// namespace, see `kube::Cluster::add_address`).
    pub(crate) fn start_at(name: &str, listen: &str) -> Pod {
        let process = run_sluice(&["backend", "--listen", listen, "--name", name]);
        let addr = process
            .stdout_line
            .rsplit(' ')
            .next()
            .and_then(|a| a.split(',').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {:?}", process.stdout_line));
        Pod {
            process,
            addr,
            name: name.to_owned(),
        }
    }
}

/// A fresh, empty folder for one test. The folders of earlier runs of the same test whose process
/// is gone are removed first (a test leaves its folder for a look after a failure; without this
/// they piled up by the hundred).
pub(crate) fn temp_dir(test: &str) -> PathBuf {
    let prefix = format!("sluice-e2e-{test}-");
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
                continue;
            };
            let ended = pid
                .parse::<u32>()
                .is_ok_and(|pid| !Path::new("/proc").join(pid.to_string()).exists());
            if ended {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a file the way careful tools do: a temporary file renamed over the target.
pub(crate) fn write_atomically(path: &Path, content: &str) {
    let temp = path.with_extension("tmp~");
    std::fs::write(&temp, content).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// The IngressClass `sluice`, Sluice's.
pub(crate) fn class_yaml() -> &'static str {
    "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: sluice}\n\
     spec: {controller: sluice.dev/ingress-controller}\n"
}

/// A fresh folder for `test` with the IngressClass, `app.test` → `upstream`, and the
/// ConfigMap `data`.
pub(crate) fn config_dir(test: &str, upstream: SocketAddr, data: &[(&str, &str)]) -> PathBuf {
    let dir = temp_dir(test);
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    std::fs::write(
        dir.join("app.yaml"),
        app_yaml("app", "app.test", &[upstream]),
    )
    .unwrap();
    let data: String = data
        .iter()
        .map(|(k, v)| format!("  {k}: \"{v}\"\n"))
        .collect();
    std::fs::write(
        dir.join("configmap.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: sluice, namespace: sluice}}\n\
             data:\n{data}"
        ),
    )
    .unwrap();
    dir
}

/// Service + EndpointSlice (one port named http) + Ingress routing `host` to it.
pub(crate) fn app_yaml(name: &str, host: &str, endpoints: &[SocketAddr]) -> String {
    // One slice per port: the test backends each listen on their own port.
    let mut slices = String::new();
    for (i, endpoint) in endpoints.iter().enumerate() {
        slices.push_str(&format!(
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: {name}-{i}, labels: {{kubernetes.io/service-name: {name}}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {}}}]\n\
             endpoints: [{{addresses: [\"{}\"]}}]\n",
            endpoint.port(),
            endpoint.ip()
        ));
    }
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80}}]}}\n\
         {slices}---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}}}\n\
         spec:\n  ingressClassName: sluice\n  rules:\n  - host: {host}\n    http:\n      paths:\n\
         \x20     - {{path: /, pathType: Prefix, backend: {{service: {{name: {name}, port: {{name: http}}}}}}}}\n"
    )
}

/// The IngressClass `sluice`, for the controller Sluice is.
pub(crate) const CLASS_YAML: &str =
    "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: sluice}\n\
     spec: {controller: sluice.dev/ingress-controller}\n";

/// [`app_yaml`] with TLS for `host` from the Secret `secret`.
pub(crate) fn tls_app_yaml(
    name: &str,
    host: &str,
    endpoints: &[SocketAddr],
    secret: &str,
) -> String {
    app_yaml(name, host, endpoints).replace(
        "  rules:\n",
        &format!("  tls: [{{hosts: [{host}], secretName: {secret}}}]\n  rules:\n"),
    )
}

/// `GET path` with `Host: host` over a new connection.
pub(crate) fn get(addr: SocketAddr, host: &str, path: &str) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    request(&mut stream, "GET", host, path, &[])
}

/// `GET /` through a TCP service on 127.0.0.1:`port` (its backend speaks HTTP): the body, or
/// `None` when the port refused or closed without answering.
pub(crate) fn through_tcp_service(port: u16) -> Option<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    get(addr, "tcp.test", "/")
        .ok()
        .map(|response| response.text())
}

/// `GET` over TLS, verifying the server's certificate against `ca_pem` for `server_name`.
pub(crate) fn get_tls(
    addr: SocketAddr,
    server_name: &str,
    ca_pem: &[u8],
    path: &str,
) -> std::io::Result<Response> {
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned()).unwrap();
    let connection = rustls::ClientConnection::new(tls_client(ca_pem), name).unwrap();
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    request(&mut stream, "GET", server_name, path, &[])
}

/// Sends one request with `Connection: close` and reads the whole response.
pub(crate) fn request(
    stream: &mut (impl Read + Write),
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // rustls reports a peer that closed without close_notify; the body is complete anyway.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e),
    }
    parse_response(&raw)
}

/// A Service `name` (port 80) whose one endpoint is `addr`.
pub(crate) fn service_at(name: &str, addr: SocketAddr) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n\
         spec: {{ports: [{{name: http, port: 80}}]}}\n\
         ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{name: {name}, labels: {{kubernetes.io/service-name: {name}}}}}\n\
         addressType: IPv4\nports: [{{name: http, port: {}}}]\n\
         endpoints: [{{addresses: [\"{}\"]}}]\n",
        addr.port(),
        addr.ip()
    )
}

/// One HTTP/1.1 request with `body` (a POST, or a GET when empty, with its Content-Length)
/// and `Connection: close`; the whole response.
pub(crate) fn send_body(
    to: SocketAddr,
    host: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut stream = TcpStream::connect(to).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let method = if body.is_empty() { "GET" } else { "POST" };
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse_response(&raw).unwrap()
}

fn parse_response(raw: &[u8]) -> std::io::Result<Response> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of head"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| bad("head not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body).ok_or_else(|| bad("bad chunked body"))?;
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// A TLS client config trusting exactly `ca_pem`.
pub(crate) fn tls_client(ca_pem: &[u8]) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// A kept-alive TLS connection: several requests, one handshake.
pub(crate) struct TlsConnection {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    host: String,
}

impl TlsConnection {
    /// Connects and completes the handshake (so certificate problems surface here).
    pub(crate) fn open(
        addr: SocketAddr,
        server_name: &str,
        config: Arc<rustls::ClientConfig>,
    ) -> std::io::Result<TlsConnection> {
        let name = rustls::pki_types::ServerName::try_from(server_name.to_owned()).unwrap();
        let connection = rustls::ClientConnection::new(config, name).unwrap();
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut stream = rustls::StreamOwned::new(connection, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsConnection {
            stream,
            host: server_name.to_owned(),
        })
    }

    /// Whether the handshake was a full one or resumed a session.
    pub(crate) fn handshake_kind(&self) -> Option<rustls::HandshakeKind> {
        self.stream.conn.handshake_kind()
    }

    /// The certificate the server presented (DER), leaf first.
    pub(crate) fn peer_certificate(&self) -> Vec<u8> {
        self.stream
            .conn
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|cert| cert.as_ref().to_vec())
            .expect("a peer certificate after the handshake")
    }

    /// `GET path` on this connection; the response must carry Content-Length.
    pub(crate) fn get(&mut self, path: &str) -> std::io::Result<Response> {
        let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.host);
        self.stream.write_all(head.as_bytes())?;
        let mut raw = Vec::new();
        let mut byte = [0u8; 1];
        while !raw.ends_with(b"\r\n\r\n") {
            self.stream.read_exact(&mut byte)?;
            raw.push(byte[0]);
        }
        let mut response = parse_response(&raw)?;
        let length: usize = response
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| std::io::Error::other("no content-length"))?;
        response.body = vec![0; length];
        self.stream.read_exact(&mut response.body)?;
        Ok(response)
    }
}

/// The first certificate in `pem`, as DER.
pub(crate) fn pem_to_der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("a certificate in the PEM")
        .as_ref()
        .to_vec()
}

/// A `kubernetes.io/tls` Secret in YAML.
pub(crate) fn tls_secret_yaml(name: &str, cert_pem: &str, key_pem: &str) -> String {
    let indent = |pem: &str| {
        pem.lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    };
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}}}\ntype: kubernetes.io/tls\n\
         stringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert_pem),
        indent(key_pem)
    )
}

/// `sluice load` running in the background (killed on drop unless finished).
pub(crate) struct Load {
    child: Child,
    json: PathBuf,
    output: PathBuf,
}

/// What a finished `sluice load` reported.
pub(crate) struct LoadResult {
    pub(crate) code: Option<i32>,
    pub(crate) json: serde_json::Value,
    /// Its stdout and stderr.
    pub(crate) output: String,
}

impl Load {
    /// `sluice load ARGS --json DIR/NAME.json`; stdout and stderr go to DIR/NAME.out.
    pub(crate) fn start(args: &[&str], dir: &Path, name: &str) -> Load {
        let json = dir.join(format!("{name}.json"));
        let output = dir.join(format!("{name}.out"));
        let file = std::fs::File::create(&output).unwrap();
        let child = Command::new(BIN)
            .arg("load")
            .args(args)
            .arg("--json")
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("spawn sluice load");
        Load {
            child,
            json,
            output,
        }
    }

    /// Waits (bounded) for it to finish and reads its results.
    pub(crate) fn finish(mut self, limit: Duration) -> LoadResult {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "sluice load did not finish within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let output = std::fs::read_to_string(&self.output).unwrap_or_default();
        let json = std::fs::read(&self.json)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_else(|| panic!("sluice load wrote no results ({status}):\n{output}"));
        LoadResult {
            code: status.code(),
            json,
            output,
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl LoadResult {
    /// No failed request of any class, no unsent request, every status 2xx, at least `min`.
    pub(crate) fn assert_clean(&self, min_requests: u64) {
        let results = &self.json;
        let summary = format!(
            "requests {} status_codes {} errors {} unsent {}\n{}",
            results["requests"],
            results["status_codes"],
            results["errors"],
            results["unsent"],
            self.output
        );
        for class in ["connect", "read", "write", "timeout", "status"] {
            assert_eq!(results["errors"][class], 0, "{class} errors: {summary}");
        }
        assert_eq!(results["unsent"], 0, "unsent requests: {summary}");
        let codes = results["status_codes"].as_object().expect("status_codes");
        for (code, count) in codes {
            assert!(code.starts_with('2'), "{count} responses {code}: {summary}");
        }
        let requests = results["requests"].as_u64().unwrap_or(0);
        assert!(
            requests >= min_requests,
            "only {requests} requests: {summary}"
        );
        assert_eq!(self.code, Some(0), "exit code: {summary}");
    }
}

/// A kept-alive plain HTTP/1.1 connection that reconnects when the server closes it: for tight
/// polling loops where a new connection per request would dominate what is measured.
pub(crate) struct HttpClient {
    addr: SocketAddr,
    host: String,
    stream: Option<BufReader<TcpStream>>,
}

impl HttpClient {
    pub(crate) fn new(addr: SocketAddr, host: &str) -> HttpClient {
        HttpClient {
            addr,
            host: host.to_owned(),
            stream: None,
        }
    }

    /// `GET path`; the response must carry Content-Length. Reconnects once on a stale connection.
    pub(crate) fn get(&mut self, path: &str) -> std::io::Result<Response> {
        match self.try_get(path) {
            Ok(response) => Ok(response),
            Err(_) => {
                self.stream = None;
                self.try_get(path)
            }
        }
    }

    fn try_get(&mut self, path: &str) -> std::io::Result<Response> {
        if self.stream.is_none() {
            let tcp = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
            tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
            tcp.set_nodelay(true)?;
            self.stream = Some(BufReader::new(tcp));
        }
        let stream = self.stream.as_mut().unwrap();
        let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.host);
        stream.get_mut().write_all(head.as_bytes())?;
        let mut raw = Vec::new();
        while !raw.ends_with(b"\r\n\r\n") {
            let before = raw.len();
            stream.read_until(b'\n', &mut raw)?;
            if raw.len() == before {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        let mut response = parse_response(&raw)?;
        let length: usize = response
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| std::io::Error::other("no content-length"))?;
        response.body = vec![0; length];
        stream.read_exact(&mut response.body)?;
        if response
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            self.stream = None;
        }
        Ok(response)
    }
}

/// A UDP backend on `addr` answering each datagram with `dns:` and the datagram (a thread,
/// for the test's life). Returns its port.
pub(crate) fn udp_echo(addr: SocketAddr) -> u16 {
    let socket = std::net::UdpSocket::bind(addr).unwrap();
    let port = socket.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 1500];
        while let Ok((len, from)) = socket.recv_from(&mut buffer) {
            let mut answer = b"dns:".to_vec();
            answer.extend_from_slice(&buffer[..len]);
            let _ = socket.send_to(&answer, from);
        }
    });
    port
}

/// Sends `query` to 127.0.0.1:`port` and waits (bounded) until a datagram answers it.
pub(crate) fn udp_ask(port: u16, query: &[u8]) -> Vec<u8> {
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    eventually(Duration::from_secs(10), "the UDP service to answer", || {
        client.send_to(query, ("127.0.0.1", port)).ok()?;
        let mut buffer = [0u8; 1500];
        let (len, _) = client.recv_from(&mut buffer).ok()?;
        Some(buffer[..len].to_vec())
    })
}
