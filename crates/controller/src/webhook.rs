//! The validating admission webhook (`--validating-webhook`): the API server asks, before it
//! stores an Ingress, what Sluice would make of it, and refuses it when that is an error.
//!
//! ```text
//!  kube-apiserver ──HTTPS POST AdmissionReview──▶ accept task (TLS: certificate files, re-read
//!                                                  when they change) ──▶ channel
//!  control loop (owns the Store) ◀─────────────────────────────────────────┘
//!     review(): Store + candidate Ingress ─▶ compile() ─▶ the candidate's diagnostics
//!        Error ─▶ denied, the diagnostics as the message (an object it names that does not
//!                 exist yet is a warning instead: Services and Secrets may come later)
//!        Unsupported, Difference, Notice ─▶ allowed, as warnings
//!  ◀──AdmissionReview { response: allowed, status.message, warnings }──
//! ```
//! The review runs on the control plane's thread with its Store, so it sees exactly what
//! Sluice serves (other Ingresses' paths included: a path an older Ingress routes is an error on
//! the newer one). DELETE, and Ingresses of another class, are allowed without a compile.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use model::{compile, CompileOptions, Kind, Object, ObjectRef, Severity, Store};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::Error;

/// An AdmissionReview larger than this is refused (Kubernetes objects are at most 1.5 MiB; a
/// review carries the object and the old one).
const MAX_REVIEW_BYTES: usize = 4 * 1024 * 1024;

/// `--validating-webhook ADDR --validating-webhook-certificate PATH --validating-webhook-key PATH`.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    pub listen: SocketAddr,
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// What the webhook decided about one Ingress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The errors, one per line, when refused.
    pub message: String,
    pub warnings: Vec<String>,
}

/// One review waiting for the control loop.
pub(crate) struct Pending {
    body: Bytes,
    reply: oneshot::Sender<Bytes>,
}

/// The running webhook's side of the control loop.
pub(crate) struct Webhook {
    requests: mpsc::Receiver<Pending>,
    pub(crate) addr: SocketAddr,
}

impl Webhook {
    /// Binds `options.listen`, loads the certificate and starts accepting on the current
    /// runtime.
    pub(crate) async fn start(options: &WebhookOptions) -> Result<Webhook, Error> {
        let resolver = Arc::new(FileCertificate::load(&options.certificate, &options.key)?);
        let mut tls =
            rustls::ServerConfig::builder_with_provider(model::tls::crypto_provider().clone())
                .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
                .map_err(|e| webhook_error(format!("TLS configuration: {e}")))?
                .with_no_client_auth()
                .with_cert_resolver(resolver);
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| webhook_error(format!("--validating-webhook {}: {e}", options.listen)))?;
        let addr = listener.local_addr().map_err(|source| Error::Io {
            what: "reading the webhook's address",
            source,
        })?;
        let (sender, requests) = mpsc::channel(64);
        tokio::spawn(accept(listener, acceptor, sender));
        Ok(Webhook { requests, addr })
    }

    /// The next review to answer (cancel-safe).
    pub(crate) async fn next(&mut self) -> Option<Pending> {
        self.requests.recv().await
    }
}

impl Pending {
    /// Answers with what `store` makes of the request; before the first sync the Store is
    /// incomplete, so the request is allowed with a warning saying it was not checked.
    pub(crate) fn answer(self, store: &Store, options: &CompileOptions, synced: bool) {
        let reply = respond(&self.body, |request| {
            if synced {
                review(store, options, request)
            } else {
                Verdict {
                    allowed: true,
                    message: String::new(),
                    warnings: vec![
                        "Sluice has not finished its first sync with the API; not checked".into(),
                    ],
                }
            }
        });
        let _ = self.reply.send(reply);
    }
}

fn webhook_error(message: String) -> Error {
    Error::Webhook(message)
}

async fn accept(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    sender: mpsc::Sender<Pending>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "webhook accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let sender = sender.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |request| handle(request, sender.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

async fn handle(
    request: Request<hyper::body::Incoming>,
    sender: mpsc::Sender<Pending>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let plain = |status: StatusCode, text: &str| {
        let mut response = Response::new(Full::new(Bytes::from(text.to_owned())));
        *response.status_mut() = status;
        Ok(response)
    };
    if request.method() != hyper::Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "POST an AdmissionReview\n");
    }
    let body = match Limited::new(request.into_body(), MAX_REVIEW_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "review too large\n"),
    };
    let (reply, answer) = oneshot::channel();
    if sender.send(Pending { body, reply }).await.is_err() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    }
    match answer.await {
        Ok(json) => {
            let mut response = Response::new(Full::new(json));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            Ok(response)
        }
        Err(_) => plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
    }
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
