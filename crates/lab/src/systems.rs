//! Systems under test, each driven the way its real controller drives it.
//!
//! ```text
//!  endpoints ──publish──▶ sluice:  rewrite the EndpointSlice file (temp + rename); sluice swaps
//!                       ├▶ nginx:   regenerate the upstream block, SIGHUP the master (= nginx -s reload)
//!                       └▶ haproxy: runtime API on the stats socket (set server addr / state); no reload
//! ```
//!
//! Adding a system is one more [`System`] implementation and one line in [`make`].

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use rustix::process::Signal;

use crate::host::{free_port, wait_until, HOST};
use crate::procs::{pinned, Proc};

/// What every system gets: the same certificates, CPUs, worker count and directory layout.
#[derive(Clone, Debug)]
pub(crate) struct SutEnv {
    /// This system's own working directory.
    pub(crate) dir: PathBuf,
    /// One certificate per virtual host, chosen by SNI; the first is also the default.
    pub(crate) certs: Vec<Cert>,
    /// CPUs the system is pinned to (`taskset -c`), when pinning.
    pub(crate) cpus: Option<String>,
    /// The `sluice` binary.
    pub(crate) exe: PathBuf,
    /// Worker processes or threads: nginx `worker_processes`, HAProxy `nbthread`, Sluice
    /// `--workers`.
    pub(crate) workers: u32,
    /// The pods speak gRPC: clients come over HTTP/2 and the route is what ingress-nginx makes of
    /// `backend-protocol: GRPC` (Sluice: that annotation; nginx: `grpc_pass`; HAProxy: `proto h2`).
    pub(crate) grpc: bool,
}

/// A virtual host and the certificate it serves (PEM files).
#[derive(Clone, Debug)]
pub(crate) struct Cert {
    pub(crate) host: String,
    pub(crate) cert_pem: PathBuf,
    pub(crate) key_pem: PathBuf,
}

/// Where a started system listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listeners {
    pub(crate) http: SocketAddr,
    pub(crate) https: SocketAddr,
}

/// A system under test: a TLS-terminating L7 proxy in front of the pods.
pub(crate) trait System {
    fn name(&self) -> &'static str;
    /// Starts it with these endpoints; returns its addresses once it accepts connections.
    fn start(&mut self, env: &SutEnv, endpoints: &[SocketAddr]) -> anyhow::Result<Listeners>;
    /// Makes `endpoints` the backend's endpoints, the way its controller would.
    fn publish(&mut self, endpoints: &[SocketAddr]) -> anyhow::Result<()>;
    /// The process group of all its processes while it runs (for CPU accounting).
    fn process_group(&self) -> Option<i32>;
    /// Stops it (and all its processes).
    fn stop(&mut self);
}

/// The known systems' names, in report order.
pub(crate) const ALL: [&str; 3] = ["sluice", "nginx", "haproxy"];

/// A system by name, or why it cannot run here.
pub(crate) fn make(name: &str) -> anyhow::Result<Box<dyn System>> {
    match name {
        "sluice" => Ok(Box::new(Sluice::default())),
        "nginx" => {
            let bin = find_program("nginx", &["/usr/sbin/nginx"]).context(
                "nginx is not installed: install the Debian package nginx-light (or nginx)",
            )?;
            Ok(Box::new(Nginx {
                bin,
                ..Nginx::default()
            }))
        }
        "haproxy" => {
            let bin = find_program("haproxy", &["/usr/sbin/haproxy"])
                .context("haproxy is not installed: install the Debian package haproxy")?;
            Ok(Box::new(Haproxy {
                bin,
                ..Haproxy::default()
            }))
        }
        other => bail!("unknown system '{other}' (known: {})", ALL.join(", ")),
    }
}

/// The version a system reports, for the report (`sluice` is the running binary's).
pub(crate) fn version(name: &str) -> String {
    let run = |bin: PathBuf, arg: &str| -> Option<String> {
        let out = std::process::Command::new(bin).arg(arg).output().ok()?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
    };
    let found = match name {
        "sluice" => Some(format!("sluice {}", env!("CARGO_PKG_VERSION"))),
        "nginx" => find_program("nginx", &["/usr/sbin/nginx"]).and_then(|b| run(b, "-v")),
        "haproxy" => find_program("haproxy", &["/usr/sbin/haproxy"]).and_then(|b| run(b, "-v")),
        _ => None,
    };
    found.unwrap_or_else(|| format!("{name} (version unknown)"))
}

fn find_program(name: &str, fallbacks: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .chain(fallbacks.iter().map(PathBuf::from))
        .find(|p| p.is_file())
}

fn write_atomically(path: &Path, content: &str) -> anyhow::Result<()> {
    let name = path.file_name().context("no file name")?.to_string_lossy();
    // A hidden temp name: the file provider skips hidden entries, so it only sees the rename.
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, content).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

fn wait_for_port(proc: &mut Proc, addr: SocketAddr, log: &Path) -> anyhow::Result<()> {
    wait_until(Duration::from_secs(15), || {
        if let Some(status) = proc.try_wait() {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            bail!(
                "{} exited ({status}) before listening:\n{tail}",
                proc.name()
            );
        }
        Ok(std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())
    })
    .with_context(|| format!("waiting for {} on {addr}", proc.name()))
}

// --- sluice -------------------------------------------------------------------------------------

#[derive(Default)]
struct Sluice {
    proc: Option<Proc>,
    slice: PathBuf,
}

impl Sluice {
    /// The first certificate's Secret keeps the name the dynamic lab always used.
    fn secret_name(i: usize) -> String {
        if i == 0 {
            "app-tls".to_owned()
        } else {
            format!("app-tls-{i}")
        }
    }

    fn slice_yaml(endpoints: &[SocketAddr]) -> String {
        let port = endpoints.first().map_or(8080, SocketAddr::port);
        let mut yaml = format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: app-lab\n  \
             namespace: default\n  labels:\n    kubernetes.io/service-name: app\naddressType: IPv4\n\
             ports:\n  - name: http\n    port: {port}\n    protocol: TCP\nendpoints:\n"
        );
        for ep in endpoints {
            let _ = write!(
                yaml,
                "  - addresses:\n      - {}\n    conditions:\n      ready: true\n",
                ep.ip()
            );
        }
        yaml
    }
}

impl System for Sluice {
    fn name(&self) -> &'static str {
        "sluice"
    }

    fn start(&mut self, env: &SutEnv, endpoints: &[SocketAddr]) -> anyhow::Result<Listeners> {
        let config = env.dir.join("config");
        std::fs::create_dir_all(&config)?;
        let indent = |path: &Path| -> anyhow::Result<String> {
            Ok(std::fs::read_to_string(path)?
                .lines()
                .map(|l| format!("    {l}\n"))
                .collect())
        };
        let port = endpoints.first().map_or(8080, SocketAddr::port);
        let mut files = vec![
            (
                "ingressclass.yaml".to_owned(),
                "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: sluice\n\
                 spec:\n  controller: sluice.dev/ingress-controller\n"
                    .to_owned(),
            ),
            (
                // The seeds' ConfigMap, in Sluice's (ingress-nginx) key names. No access log,
                // as the lab's nginx has none: the seeds measure proxying, not logging. Session
                // tickets on, as the lab's nginx and HAProxy have them by default (ingress-nginx
                // turns them off, and so does Sluice's default).
                "configmap.yaml".to_owned(),
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sluice\n  namespace: sluice\n\
                 data:\n  keepalive: \"100\"\n  keep-alive-requests: \"100000000\"\n  \
                 ssl-redirect: \"false\"\n  disable-access-log: \"true\"\n  \
                 ssl-session-tickets: \"true\"\n"
                    .to_owned(),
            ),
            (
                "service.yaml".to_owned(),
                format!(
                    "apiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  namespace: default\n\
                     spec:\n  ports:\n    - name: http\n      port: 80\n      protocol: TCP\n      \
                     targetPort: {port}\n"
                ),
            ),
            ("endpointslice.yaml".to_owned(), Self::slice_yaml(endpoints)),
        ];
        let mut tls = String::new();
        let mut rules = String::new();
        for (i, cert) in env.certs.iter().enumerate() {
            let secret = Self::secret_name(i);
            files.push((
                format!("secret-{i}.yaml"),
                format!(
                    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {secret}\n  namespace: default\n\
                     type: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
                    indent(&cert.cert_pem)?,
                    indent(&cert.key_pem)?
                ),
            ));
            let host = &cert.host;
            let _ = write!(
                tls,
                "    - hosts:\n        - {host}\n      secretName: {secret}\n"
            );
            let _ = write!(
                rules,
                "    - host: {host}\n      http:\n        paths:\n          - path: /\n            \
                 pathType: Prefix\n            backend:\n              service:\n                \
                 name: app\n                port:\n                  number: 80\n"
            );
        }
        let annotations = if env.grpc {
            "  annotations:\n    nginx.ingress.kubernetes.io/backend-protocol: GRPC\n"
        } else {
            ""
        };
        files.push((
            "ingress.yaml".to_owned(),
            format!(
                "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: app\n  \
                 namespace: default\n{annotations}spec:\n  ingressClassName: sluice\n  tls:\n{tls}  \
                 rules:\n{rules}"
            ),
        ));
        for (name, content) in files {
            write_atomically(&config.join(name), &content)?;
        }
        self.slice = config.join("endpointslice.yaml");

        let https = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let mut cmd = pinned(env.cpus.as_deref(), &env.exe);
        cmd.arg("serve")
            .arg("--config")
            .arg(&config)
            .arg("--https-listen")
            .arg(https.to_string())
            .arg("--http-listen")
            .arg(http.to_string())
            .arg("--admin-listen")
            .arg(admin.to_string())
            // Not read by the lab; port 0 so a fixed port never clashes with another run.
            .arg("--status-listen")
            .arg("127.0.0.1:0")
            .arg("--workers")
            .arg(env.workers.to_string())
            // Clients without (matching) SNI get the first certificate, as nginx's first server.
            .arg("--default-tls-secret")
            .arg(format!("default/{}", Self::secret_name(0)))
            .env("SLUICE_LOG", "warn");
        let log = env.dir.join("sluice.log");
        let mut proc = Proc::spawn("sluice serve", cmd, &log)?;
        wait_until(Duration::from_secs(15), || {
            if let Some(status) = proc.try_wait() {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                bail!("sluice serve exited ({status}):\n{tail}");
            }
            Ok(crate::host::http_get_ok(admin, "/ready"))
        })
        .context("waiting for sluice serve to be ready")?;
        self.proc = Some(proc);
        Ok(Listeners { http, https })
    }

    fn publish(&mut self, endpoints: &[SocketAddr]) -> anyhow::Result<()> {
        write_atomically(&self.slice, &Self::slice_yaml(endpoints))
    }

    fn process_group(&self) -> Option<i32> {
        self.proc.as_ref().map(Proc::pgid)
    }

    fn stop(&mut self) {
        if let Some(proc) = self.proc.take() {
            proc.stop(Duration::from_secs(5));
        }
    }
}

// --- nginx --------------------------------------------------------------------------------------

#[derive(Default)]
struct Nginx {
    bin: PathBuf,
    proc: Option<Proc>,
    conf: PathBuf,
    template: String,
}

/// Where the upstream servers go in [`Nginx::template`].
const UPSTREAM_SERVERS: &str = "@UPSTREAM_SERVERS@";

impl Nginx {
    fn render(&self, endpoints: &[SocketAddr]) -> String {
        let servers: String = endpoints
            .iter()
            .map(|ep| format!("        server {ep};\n"))
            .collect();
        self.template.replace(UPSTREAM_SERVERS, &servers)
    }
}

impl System for Nginx {
    fn name(&self) -> &'static str {
        "nginx"
    }

    fn start(&mut self, env: &SutEnv, endpoints: &[SocketAddr]) -> anyhow::Result<Listeners> {
        let dir = &env.dir;
        std::fs::create_dir_all(dir.join("tmp"))?;
        let https = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let d = dir.display();
        // One server block per certificate (nginx chooses the certificate by SNI through the
        // server name); the first is the default server and also takes plain HTTP.
        let mut servers = String::new();
        for (i, cert) in env.certs.iter().enumerate() {
            let listen_http = if i == 0 {
                format!("        listen {http};\n")
            } else {
                String::new()
            };
            // gRPC: what ingress-nginx renders for backend-protocol GRPC (grpc_pass, HTTP/2
            // listener); otherwise its proxy_pass with pooled HTTP/1.1.
            let (http2, pass, set) = if env.grpc {
                (" http2", "grpc_pass grpc://app;\n", "grpc_set_header")
            } else {
                (
                    "",
                    "proxy_pass http://app;\n            proxy_http_version 1.1;\n            \
                     proxy_set_header Connection \"\";\n",
                    "proxy_set_header",
                )
            };
            let _ = write!(
                servers,
                "    server {{\n{listen_http}        listen {https} ssl{http2};\n        server_name {};\n\
                 \x20       ssl_certificate {};\n        ssl_certificate_key {};\n\
                 \x20       ssl_protocols TLSv1.2 TLSv1.3;\n\n\
                 \x20       location / {{\n            {pass}\
                 \x20           {set} Host $host;\n\
                 \x20           {set} X-Request-ID $request_id;\n\
                 \x20           {set} X-Real-IP $remote_addr;\n\
                 \x20           {set} X-Forwarded-For $proxy_add_x_forwarded_for;\n\
                 \x20           {set} X-Forwarded-Proto $scheme;\n        }}\n    }}\n",
                cert.host,
                cert.cert_pem.display(),
                cert.key_pem.display(),
            );
        }
        // Mirrors the seeds' ConfigMap (worker-connections 10000, worker-rlimit-nofile 10240,
        // keepalive 100, keepalive-requests 100000000), with as many workers as the others.
        self.template = format!(
            "daemon off;\nmaster_process on;\nworker_processes {};\nworker_rlimit_nofile 10240;\n\
             pid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\n\
             events {{\n    worker_connections 10000;\n}}\n\n\
             http {{\n    access_log off;\n    server_tokens off;\n\
             \x20   client_body_temp_path {d}/tmp/body;\n    proxy_temp_path {d}/tmp/proxy;\n\
             \x20   fastcgi_temp_path {d}/tmp/fastcgi;\n    uwsgi_temp_path {d}/tmp/uwsgi;\n\
             \x20   scgi_temp_path {d}/tmp/scgi;\n\
             \x20   keepalive_timeout 75s;\n    keepalive_requests 100000000;\n\n\
             \x20   upstream app {{\n{UPSTREAM_SERVERS}        keepalive 100;\n        \
             keepalive_requests 100000000;\n    }}\n\n{servers}}}\n",
            env.workers,
        );
        self.conf = dir.join("nginx.conf");
        write_atomically(&self.conf, &self.render(endpoints))?;
        let log = dir.join("stdout.log");
        let check = std::process::Command::new(&self.bin)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&self.conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-t")
            .output()
            .context("running nginx -t")?;
        if !check.status.success() {
            bail!(
                "nginx rejected its config: {}",
                String::from_utf8_lossy(&check.stderr)
            );
        }
        let mut cmd = pinned(env.cpus.as_deref(), &self.bin);
        cmd.arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&self.conf)
            .arg("-e")
            .arg(dir.join("error.log"));
        let mut proc = Proc::spawn("nginx", cmd, &log)?;
        wait_for_port(&mut proc, https, &dir.join("error.log"))?;
        wait_for_port(&mut proc, http, &dir.join("error.log"))?;
        self.proc = Some(proc);
        Ok(Listeners { http, https })
    }

    fn publish(&mut self, endpoints: &[SocketAddr]) -> anyhow::Result<()> {
        write_atomically(&self.conf, &self.render(endpoints))?;
        // `nginx -s reload` is SIGHUP to the master; sending it directly needs no pid file.
        self.proc
            .as_ref()
            .context("nginx is not running")?
            .signal_leader(Signal::HUP)
    }

    fn process_group(&self) -> Option<i32> {
        self.proc.as_ref().map(Proc::pgid)
    }

    fn stop(&mut self) {
        if let Some(proc) = self.proc.take() {
            // SIGTERM to the group is nginx's fast shutdown, master and workers alike.
            proc.stop(Duration::from_secs(5));
        }
    }
}

// --- haproxy ------------------------------------------------------------------------------------

/// Server slots in the backend; more than the deployment ever has, terminating pods included.
const HAPROXY_SLOTS: usize = 16;

#[derive(Default)]
struct Haproxy {
    bin: PathBuf,
    proc: Option<Proc>,
    socket: PathBuf,
    /// Which endpoint each server slot holds (`None`: in maintenance, free).
    slots: Vec<Option<SocketAddr>>,
}

impl Haproxy {
    fn command(&self, line: &str) -> anyhow::Result<String> {
        let mut stream = UnixStream::connect(&self.socket)
            .with_context(|| format!("connecting to {}", self.socket.display()))?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.write_all(format!("{line}\n").as_bytes())?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let answer = answer.trim().to_owned();
        // Successful `set server` commands answer nothing (or a note on a changed address).
        if answer.contains("No such") || answer.contains("Unknown") || answer.contains("Require") {
            bail!("haproxy runtime API: '{line}': {answer}");
        }
        Ok(answer)
    }
}

impl System for Haproxy {
    fn name(&self) -> &'static str {
        "haproxy"
    }

    fn start(&mut self, env: &SutEnv, endpoints: &[SocketAddr]) -> anyhow::Result<Listeners> {
        let dir = &env.dir;
        std::fs::create_dir_all(dir)?;
        if endpoints.len() > HAPROXY_SLOTS {
            bail!(
                "haproxy has {HAPROXY_SLOTS} server slots, asked for {}",
                endpoints.len()
            );
        }
        // HAProxy wants certificate and key in one file; with several, it picks by SNI among
        // their names, and the first is the default.
        let mut crts = String::new();
        for (i, cert) in env.certs.iter().enumerate() {
            let pem = dir.join(format!("cert-{i}.pem"));
            std::fs::write(
                &pem,
                std::fs::read_to_string(&cert.cert_pem)? + &std::fs::read_to_string(&cert.key_pem)?,
            )?;
            let _ = write!(crts, " crt {}", pem.display());
        }
        self.socket = dir.join("admin.sock");
        let https = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        self.slots = (0..HAPROXY_SLOTS)
            .map(|i| endpoints.get(i).copied())
            .collect();
        // maxconn 9000 keeps HAProxy's own FD need (about 2 × maxconn) under a 20000 limit, and
        // like nginx's worker_connections 10000 it is far above the 1000 clients.
        // Every slot exists from the start; free ones are disabled (maintenance), as API-driven
        // controllers pre-allocate them. Changes go through the runtime API only.
        // gRPC: HTTP/2 to the pods (cleartext, prior knowledge) and h2 offered to clients.
        let (proto, alpn) = if env.grpc {
            (" proto h2", " alpn h2,http/1.1")
        } else {
            ("", "")
        };
        let mut servers = String::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let _ = match slot {
                Some(ep) => writeln!(servers, "    server slot{} {ep}{proto}", i + 1),
                None => writeln!(
                    servers,
                    "    server slot{} 127.0.0.1:1{proto} disabled",
                    i + 1
                ),
            };
        }
        let config = format!(
            "global\n    nbthread {}\n    maxconn 9000\n    \
             stats socket {} mode 600 level admin\n    \
             ssl-default-bind-options ssl-min-ver TLSv1.2\n\n\
             defaults\n    mode http\n    timeout connect 5s\n    timeout client 75s\n    \
             timeout server 60s\n    timeout http-keep-alive 75s\n    option http-keep-alive\n\n\
             frontend fe\n    bind {https} ssl{crts}{alpn}\n    bind {http}\n    maxconn 9000\n    \
             default_backend be\n\n\
             backend be\n    balance roundrobin\n{servers}",
            env.workers,
            self.socket.display(),
        );
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, config)?;
        let log = dir.join("haproxy.log");
        let mut cmd = pinned(env.cpus.as_deref(), &self.bin);
        cmd.arg("-db").arg("-f").arg(&cfg);
        let mut proc = Proc::spawn("haproxy", cmd, &log)?;
        wait_for_port(&mut proc, https, &log)?;
        wait_for_port(&mut proc, http, &log)?;
        wait_until(Duration::from_secs(5), || Ok(self.socket.exists()))?;
        self.proc = Some(proc);
        Ok(Listeners { http, https })
    }

    fn publish(&mut self, endpoints: &[SocketAddr]) -> anyhow::Result<()> {
        // Removals first, so their slots can be reused.
        for i in 0..self.slots.len() {
            if let Some(ep) = self.slots[i] {
                if !endpoints.contains(&ep) {
                    self.command(&format!("set server be/slot{} state maint", i + 1))?;
                    self.slots[i] = None;
                }
            }
        }
        for ep in endpoints {
            if self.slots.contains(&Some(*ep)) {
                continue;
            }
            let i = self
                .slots
                .iter()
                .position(Option::is_none)
                .context("haproxy: no free server slot")?;
            self.command(&format!(
                "set server be/slot{} addr {} port {}",
                i + 1,
                ep.ip(),
                ep.port()
            ))?;
            self.command(&format!("set server be/slot{} state ready", i + 1))?;
            self.slots[i] = Some(*ep);
        }
        Ok(())
    }

    fn process_group(&self) -> Option<i32> {
        self.proc.as_ref().map(Proc::pgid)
    }

    fn stop(&mut self) {
        if let Some(proc) = self.proc.take() {
            proc.stop(Duration::from_secs(5));
        }
    }
}

/// The RSA-2048 certificate every system serves (self-signed; the load generator trusts it).
pub(crate) fn make_cert(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cert = make_cert_for(dir, HOST, KeyKind::Rsa2048)?;
    Ok((cert.cert_pem, cert.key_pem))
}

/// The key types the lab's certificates use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Rsa2048,
    EcdsaP256,
}

/// A self-signed certificate for `host` with a fresh key of `kind`, written to `dir`.
pub(crate) fn make_cert_for(dir: &Path, host: &str, kind: KeyKind) -> anyhow::Result<Cert> {
    let (key, tag) = match kind {
        KeyKind::Rsa2048 => (
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
                .context("generating an RSA-2048 key")?,
            "",
        ),
        KeyKind::EcdsaP256 => (
            rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                .context("generating an ECDSA P-256 key")?,
            "-ecdsa",
        ),
    };
    let params = rcgen::CertificateParams::new(vec![host.to_owned()])?;
    let cert = params.self_signed(&key)?;
    let cert_pem = dir.join(format!("tls{tag}.crt"));
    let key_pem = dir.join(format!("tls{tag}.key"));
    std::fs::write(&cert_pem, cert.pem())?;
    std::fs::write(&key_pem, key.serialize_pem())?;
    Ok(Cert {
        host: host.to_owned(),
        cert_pem,
        key_pem,
    })
}
