//! The validating admission webhook (`--validating-webhook`): the API server asks, before it
//! stores an Ingress, what Sluice would make of it, and refuses it when that is an error.
//!
//! ```text
//!  control loop: synced, then every configuration change ──▶ Webhook::publish(Store without
//!                EndpointSlices: shared objects, no copy) ──▶ the snapshot cell
//!  thread sluice-webhook (a runtime of its own):
//!   accept ─ MAX_CONNECTIONS open? ─▶ closed at once (one WARN a minute with counts)
//!    └▶ TLS handshake + first request head, one REQUEST_HEAD_TIMEOUT from the accept ─▶ closed
//!       └▶ HTTP/1.1 (hyper; later heads: KEEP_ALIVE_TIMEOUT after the previous response)
//!          POST? ─ no ─▶ 405;  Content-Length > MAX_REVIEW_BYTES ─▶ 413 (nothing read)
//!          a review slot (MAX_REVIEWS: one compiling, the rest waiting) ─ none ─▶ 503 at once
//!          body: MAX_REVIEW_BYTES ─▶ 413, BODY_TIMEOUT ─▶ 408
//!          one compile at a time, on a blocking thread: review(snapshot + candidate Ingress)
//!             Error ─▶ denied, the diagnostics as the message (an object it names that does
//!                      not exist yet is a warning instead: Services and Secrets may come later)
//!             Unsupported, Difference, Notice ─▶ allowed, as warnings
//!  ◀──AdmissionReview { response: allowed, status.message, warnings }──
//! ```
//! The snapshot is the Store Sluice compiled last, so a review sees exactly what Sluice serves
//! (other Ingresses' paths included: a path an older Ingress routes is an error on the newer
//! one). Reviews never reach the control loop: endpoint updates are not delayed behind them, and
//! a flood of them costs at most the webhook's thread and one compiling thread. A 503 or a
//! closed connection is a failed call, for which the API server applies the configuration's
//! `failurePolicy` (deploy/: `Ignore`). DELETE, and Ingresses of another class, are allowed
//! without a compile.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Incoming};
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use model::{Kind, ObjectRef, Severity};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use translate::{compile, CompileOptions, Object, Store};

use crate::error::Error;

/// From the accept to the first request's complete head, TLS handshake included. The API
/// server gives a whole webhook call `timeoutSeconds` (default 10, at most 30); a client
/// slower than this to say what it wants is not one the API server is waiting for.
pub const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// From the end of a request's head to the end of its body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// After a response, until the next request's head on that connection is complete.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once; a new one past this is closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// An AdmissionReview larger than this is answered 413. The API server accepts no write whose
/// body is larger (its request limit, 3 MiB), and etcd stores no object over 1.5 MiB; a review
/// carries the object and, on UPDATE, the old one, so this holds every review of a CREATE and
/// of any Ingress under half the limit. A larger one is a failed call (`failurePolicy`).
pub const MAX_REVIEW_BYTES: usize = 3 * 1024 * 1024;
/// Reviews admitted at once (their bodies are the only ones buffered): one compiling, the rest
/// waiting their turn. Past it a review is answered 503 before its body is read.
pub const MAX_REVIEWS: usize = 8;
/// What one connection may buffer of a request head (hyper's read buffer); more is 431.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How often the WARN about refused connections and reviews may be written.
const LIMIT_LOG_PERIOD: Duration = Duration::from_secs(60);
/// How long the accept loop waits after an accept error (out of descriptors).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// `--validating-webhook ADDR --validating-webhook-certificate PATH --validating-webhook-key PATH`.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    pub listen: SocketAddr,
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub limits: WebhookLimits,
}

/// What one client may hold of the webhook (defaults: the constants of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebhookLimits {
    pub request_head_timeout: Duration,
    pub body_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub max_connections: usize,
    pub max_review_bytes: usize,
    pub max_reviews: usize,
}

/// What the webhook decided about one Ingress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The errors, one per line, when refused.
    pub message: String,
    pub warnings: Vec<String>,
}

/// The running webhook: its thread, and the cell the control loop publishes the Store to.
/// Dropping it stops the thread.
pub struct Webhook {
    addr: SocketAddr,
    snapshot: watch::Sender<Option<Arc<Store>>>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

/// What every connection of one webhook shares.
struct Shared {
    limits: WebhookLimits,
    compile: CompileOptions,
    /// `None` until the control loop's first sync.
    snapshot: watch::Receiver<Option<Arc<Store>>>,
    reviews: Arc<Semaphore>,
    /// One compile at a time: held by the blocking task that runs it.
    compiling: Arc<Semaphore>,
    refusals: Refusals,
}

/// Counts of what the limits refused since the last WARN.
#[derive(Default)]
struct Refusals {
    last_log: Mutex<Option<Instant>>,
    connections: AtomicU64,
    reviews: AtomicU64,
}

impl Default for WebhookLimits {
    fn default() -> WebhookLimits {
        WebhookLimits {
            request_head_timeout: REQUEST_HEAD_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            keep_alive_timeout: KEEP_ALIVE_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_review_bytes: MAX_REVIEW_BYTES,
            max_reviews: MAX_REVIEWS,
        }
    }
}

impl Webhook {
    /// Binds `options.listen`, loads the certificate and starts serving on a thread of its own.
    /// Until [`Webhook::publish`], reviews are allowed with a warning that nothing was checked.
    pub fn start(options: &WebhookOptions, compile: CompileOptions) -> Result<Webhook, Error> {
        let resolver = Arc::new(FileCertificate::load(&options.certificate, &options.key)?);
        let mut tls =
            rustls::ServerConfig::builder_with_provider(model::tls::crypto_provider().clone())
                .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
                .map_err(|e| webhook_error(format!("TLS configuration: {e}")))?
                .with_no_client_auth()
                .with_cert_resolver(resolver);
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let io_error = |what| move |source| Error::Io { what, source };
        let socket = bind(options.listen)
            .map_err(|e| webhook_error(format!("--validating-webhook {}: {e}", options.listen)))?;
        socket
            .set_nonblocking(true)
            .map_err(io_error("setting up the webhook's listener"))?;
        let addr = socket
            .local_addr()
            .map_err(io_error("reading the webhook's address"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io_error("starting the webhook's runtime"))?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(socket).map_err(io_error("setting up the webhook's listener"))?
        };
        let (snapshot, snapshot_cell) = watch::channel(None);
        let (stop, stopped) = watch::channel(false);
        let limits = options.limits;
        let shared = Arc::new(Shared {
            limits,
            compile,
            snapshot: snapshot_cell,
            reviews: Arc::new(Semaphore::new(limits.max_reviews)),
            compiling: Arc::new(Semaphore::new(1)),
            refusals: Refusals::default(),
        });
        let thread = std::thread::Builder::new()
            .name("sluice-webhook".into())
            .spawn(move || {
                runtime.block_on(accept(listener, acceptor, shared, stopped));
                // A compile still running finishes on its own; nothing waits for it.
                runtime.shutdown_background();
            })
            .map_err(io_error("starting the webhook's thread"))?;
        Ok(Webhook {
            addr,
            snapshot,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (the port is known when `listen` had port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Reviews from now on are made against `store` (its EndpointSlices left out: no
    /// diagnostic depends on them). Costs the caller reference counts, never a compile.
    pub fn publish(&self, store: &Store) {
        self.snapshot
            .send_replace(Some(Arc::new(store.without_endpoint_slices())));
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Refusals {
    /// Counts one refusal and writes the WARN if the last one is old enough.
    fn note(&self, limits: &WebhookLimits, count: &AtomicU64) {
        count.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut last = self.last_log.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|last| now.saturating_duration_since(last) < LIMIT_LOG_PERIOD) {
            return;
        }
        *last = Some(now);
        tracing::warn!(
            connections_refused = self.connections.swap(0, Ordering::Relaxed),
            reviews_refused = self.reviews.swap(0, Ordering::Relaxed),
            max_connections = limits.max_connections,
            max_reviews = limits.max_reviews,
            "admission webhook at its limits: connections closed at once, reviews answered 503 \
             (the API server applies failurePolicy); counts since the last such line"
        );
    }
}

fn webhook_error(message: String) -> Error {
    Error::Webhook(message)
}

async fn accept(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let connections = Arc::new(Semaphore::new(shared.limits.max_connections));
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.changed() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "webhook accept failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            drop(stream);
            shared
                .refusals
                .note(&shared.limits, &shared.refusals.connections);
            continue;
        };
        tokio::spawn(serve(stream, acceptor.clone(), shared.clone(), permit));
    }
}

/// One connection: TLS and the first head within `request_head_timeout` of the accept, then
/// HTTP/1.1 until the client or a timeout ends it.
async fn serve(
    stream: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
    _permit: OwnedSemaphorePermit,
) {
    let deadline = tokio::time::Instant::now() + shared.limits.request_head_timeout;
    let Ok(Ok(tls)) = tokio::time::timeout_at(deadline, acceptor.accept(stream)).await else {
        return;
    };
    let asked = Arc::new(AtomicBool::new(false));
    let service = hyper::service::service_fn({
        let asked = asked.clone();
        let shared = shared.clone();
        move |request| {
            asked.store(true, Ordering::Relaxed);
            handle(request, shared.clone())
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.keep_alive_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    let connection = builder.serve_connection(TokioIo::new(tls), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        () = tokio::time::sleep_until(deadline) => {}
    }
    // No head by the deadline: dropping the connection closes it.
    if asked.load(Ordering::Relaxed) {
        let _ = connection.await;
    }
}

type Answer = Response<Full<Bytes>>;

async fn handle(request: Request<Incoming>, shared: Arc<Shared>) -> Result<Answer, Infallible> {
    let limits = &shared.limits;
    if request.method() != hyper::Method::POST {
        return Ok(plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST an AdmissionReview\n",
        ));
    }
    let too_large = || closing(StatusCode::PAYLOAD_TOO_LARGE, "review too large\n");
    if request.body().size_hint().lower() > limits.max_review_bytes as u64 {
        return Ok(too_large());
    }
    let Ok(_slot) = shared.reviews.clone().try_acquire_owned() else {
        shared.refusals.note(limits, &shared.refusals.reviews);
        return Ok(closing(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy with other reviews\n",
        ));
    };
    let body = Limited::new(request.into_body(), limits.max_review_bytes).collect();
    let body = match tokio::time::timeout(limits.body_timeout, body).await {
        Ok(Ok(body)) => body.to_bytes(),
        Ok(Err(e)) if e.is::<LengthLimitError>() => return Ok(too_large()),
        Ok(Err(_)) => return Ok(closing(StatusCode::BAD_REQUEST, "unreadable body\n")),
        Err(_) => return Ok(closing(StatusCode::REQUEST_TIMEOUT, "body too slow\n")),
    };
    let Ok(turn) = shared.compiling.clone().acquire_owned().await else {
        return Ok(closing(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"));
    };
    // The newest snapshot, taken when this review's turn comes.
    let snapshot = shared.snapshot.borrow().clone();
    let compile = shared.compile.clone();
    let answered = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        respond(&body, |request| match &snapshot {
            Some(store) => review(store, &compile, request),
            None => Verdict {
                allowed: true,
                message: String::new(),
                warnings: vec![
                    "Sluice has not finished its first sync with the API; not checked".into(),
                ],
            },
        })
    })
    .await;
    Ok(match answered {
        Ok(json) => {
            let mut response = Response::new(Full::new(json));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(_) => closing(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
    })
}

fn plain(status: StatusCode, text: &'static str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}

/// An answer after which the connection closes (a body may be left unread).
fn closing(status: StatusCode, text: &'static str) -> Answer {
    let mut response = plain(status, text);
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// The AdmissionReview answering `body`: `decide` is asked about the request in it.
pub fn respond(body: &[u8], decide: impl FnOnce(&Value) -> Verdict) -> Bytes {
    let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let request = &review["request"];
    let verdict = if request.is_object() {
        decide(request)
    } else {
        Verdict {
            allowed: false,
            message: "not an admission.k8s.io/v1 AdmissionReview with a request".into(),
            warnings: Vec::new(),
        }
    };
    let mut response = json!({
        "uid": request["uid"].clone(),
        "allowed": verdict.allowed,
    });
    if !verdict.allowed {
        response["status"] =
            json!({"code": 400, "reason": "BadRequest", "message": verdict.message});
    }
    if !verdict.warnings.is_empty() {
        response["warnings"] = json!(verdict.warnings);
    }
    let api_version = review["apiVersion"]
        .as_str()
        .unwrap_or("admission.k8s.io/v1")
        .to_owned();
    Bytes::from(
        serde_json::to_vec(&json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "response": response,
        }))
        .unwrap_or_default(),
    )
}

/// What compiling `store` with the request's Ingress in it says about that Ingress.
pub fn review(store: &Store, options: &CompileOptions, request: &Value) -> Verdict {
    let allow = Verdict {
        allowed: true,
        ..Verdict::default()
    };
    if request["operation"] == "DELETE" || request["kind"]["kind"] != "Ingress" {
        return allow;
    }
    let mut ingress: Ingress = match serde_json::from_value(request["object"].clone()) {
        Ok(ingress) => ingress,
        Err(e) => {
            return Verdict {
                allowed: false,
                message: format!("not a networking.k8s.io/v1 Ingress: {e}"),
                warnings: Vec::new(),
            }
        }
    };
    let metadata = &mut ingress.metadata;
    if metadata.namespace.as_deref().unwrap_or("").is_empty() {
        metadata.namespace = request["namespace"].as_str().map(str::to_owned);
    }
    if metadata.name.as_deref().unwrap_or("").is_empty() {
        // generateName: the API server names it after admission.
        metadata.name = Some(format!(
            "{}(generated)",
            metadata.generate_name.as_deref().unwrap_or("")
        ));
    }
    // A new Ingress is the newest: it loses a path conflict to the ones already stored.
    if metadata.creation_timestamp.is_none() {
        metadata.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    }
    let object = ObjectRef::new(
        Kind::Ingress,
        metadata.namespace.clone().unwrap_or_default(),
        metadata.name.clone().unwrap_or_default(),
    );
    let strict_paths = translate::ingress::strict_path_type_violations(ingress.spec.as_ref());
    let mut candidate = store.clone();
    candidate.apply(Object::from(ingress));
    let compiled = compile(&candidate, options);
    let name = model::NamespacedName::new(object.namespace.clone(), object.name.clone());
    if !compiled.ingresses.contains(&name) {
        // Another controller's Ingress.
        return allow;
    }
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    // ingress-nginx's webhook: denied with strict-validate-path-type (its default), warned
    // otherwise; Ingresses already stored are served either way.
    if compiled.settings.strict_validate_path_type {
        errors.extend(strict_paths);
    } else {
        warnings.extend(strict_paths);
    }
    for diagnostic in compiled.diagnostics.iter().filter(|d| d.object == object) {
        match diagnostic.severity {
            // A Service or Secret that does not exist yet (`Missing`) is a warning: applying a
            // folder, or cert-manager making the Secret after the Ingress, is normal.
            Severity::Error => errors.push(diagnostic.reason.clone()),
            _ => warnings.push(diagnostic.to_string()),
        }
    }
    Verdict {
        allowed: errors.is_empty(),
        message: if errors.is_empty() {
            String::new()
        } else {
            format!("Sluice refuses Ingress {name}: {}", errors.join("; "))
        },
        warnings,
    }
}

/// The webhook's certificate, read again when the certificate file changes (a Secret volume
/// is updated in place by the kubelet).
#[derive(Debug)]
struct FileCertificate {
    certificate: PathBuf,
    key: PathBuf,
    loaded: Mutex<(Option<SystemTime>, Arc<CertifiedKey>)>,
}

impl FileCertificate {
    fn load(certificate: &Path, key: &Path) -> Result<FileCertificate, Error> {
        let modified = modified(certificate);
        let current = read_certified(certificate, key).map_err(webhook_error)?;
        Ok(FileCertificate {
            certificate: certificate.to_owned(),
            key: key.to_owned(),
            loaded: Mutex::new((modified, current)),
        })
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn read_certified(certificate: &Path, key: &Path) -> Result<Arc<CertifiedKey>, String> {
    let read = |path: &Path, flag: &str| {
        std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
    };
    let cert_pem = read(certificate, "--validating-webhook-certificate")?;
    let key_pem = read(key, "--validating-webhook-key")?;
    model::tls::certified_key_from_pem(&cert_pem, &key_pem)
        .map_err(|e| format!("--validating-webhook-certificate/-key: {e}"))
}

impl ResolvesServerCert for FileCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let now = modified(&self.certificate);
        if now != loaded.0 {
            match read_certified(&self.certificate, &self.key) {
                Ok(fresh) => *loaded = (now, fresh),
                Err(e) => tracing::warn!("webhook certificate not reloaded: {e}"),
            }
        }
        Some(loaded.1.clone())
    }
}

/// The webhook's socket, with SO_REUSEPORT: a Gateway listener may declare the webhook's port
/// number (the conformance suite's TLS listeners use 8443, the webhook's port in the
/// manifests); with an address of its own (`--gateway-address-pool`) its SO_REUSEPORT socket
/// on every address then shares the number, and connections to the webhook's address still
/// come here (the more specific bind wins). Only this process's user can share it.
fn bind(addr: std::net::SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}
