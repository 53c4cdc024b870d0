//! The control plane as a library: provider events → Store → compile → publish to the proxy.
//! `sluice serve` maps its flags to [`Options`] and calls [`run`]; tests, the admission webhook
//! and `sluice migrate` use the same pieces ([`ControlPlane`], [`load_files`]).
//!
//! ```text
//!  Source::Files:      FileWatch ──▶ debounce ──▶ FileSource::reload ──▶ Store::replace_all ─┐
//!  Source::Kubernetes: Watchers ──Update (apply, delete, relist)──▶ Store::apply/remove ──────┤
//!                                                                                       ChangeSet
//!        config changed ──▶ compile(&Store) ──▶ Proxy::publish (atomic swap) ◀──────────────┤
//!        endpoints only ──▶ translate::refresh_endpoints ──▶ Proxy::endpoints_changed ◀──────┘
//!  Kubernetes only: recompiled ──▶ StatusWriter::publish(served, diagnostics) (leader only)
//!                   recompiled ──▶ Webhook::publish(&Store) ─▶ its thread: AdmissionReview ──▶
//!                   webhook::review(snapshot + candidate) ──▶ allowed/denied
//! ```
//! All of this runs on one current-thread runtime; workers never wait for it, and neither does
//! it wait for the admission webhook, which serves and compiles on threads of its own.
//! [`webhook_cert`] is apart: `sluice webhook-cert` (deploy/'s Job) makes the webhook's
//! certificate Secret and sets its CA as the webhook configuration's `caBundle`; so is
//! [`kube_webhook_certgen`], the same for ingress-nginx's chart's Jobs (`sluice create`/`patch`).
//!
//! ```text
//!  start ─▶ ConfigMap read ─▶ soft RLIMIT_NOFILE: max-worker-open-files × workers, else the
//!           hard limit (logged) ─▶ Proxy::start ─▶ announce (one stdout line)
//!  SIGTERM ─▶ Proxy::terminating (/ready 503; still serving, still applying changes; each
//!            response ends its connection)
//!          ─ shutdown_grace_period, or a second signal ─▶ Proxy::shutdown (drain)
//! ```

mod control;
mod error;
mod files;
pub mod kube_webhook_certgen;
mod kubernetes;
mod limits;
pub mod migrate;
mod options;
mod signals;
mod start;
pub mod webhook;
pub mod webhook_cert;

pub use control::ControlPlane;
pub use error::Error;
pub use files::load_files;
pub use kubernetes::{apply_update, load_kubernetes};
pub use options::{
    KubeOptions, Listen, Options, Source, DEFAULT_ELECTION_ID, DEFAULT_LEASE_DURATION,
    DEFAULT_STATUS_LISTEN,
};
pub use signals::{Step, Termination};
pub use webhook::{WebhookLimits, WebhookOptions};

/// Runs until SIGTERM or SIGINT, then drains and returns.
pub fn run(options: Options) -> Result<(), Error> {
    match &options.source {
        Source::Files(path) => files::run(path.clone(), &options),
        Source::Kubernetes(kube) => kubernetes::run(kube.clone(), &options),
    }
}
