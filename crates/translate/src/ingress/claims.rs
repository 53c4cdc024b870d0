//! What Ingresses contend for while they are read, and the host-level annotations kept until
//! every Ingress is in: plain data, below the translation that fills it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use model::policy::{HashBy, HeaderEdit};
use model::routes::{HostPattern, PathKind};
use model::NamespacedName;

use crate::ingress::annotations::Canary;

/// Who holds each contested thing, so later (newer) claimants can be told who won.
#[derive(Default)]
pub(crate) struct Claims {
    /// (host, kind, path as matched) → the Ingress that routes it. The path is the compile's
    /// shared copy (for most paths the route's own string).
    pub(crate) paths: HashMap<(HostPattern, PathKind, Arc<str>), NamespacedName>,
    pub(crate) default_backend: Option<NamespacedName>,
    /// Host → (Secret, claiming Ingress).
    pub(crate) tls: BTreeMap<HostPattern, (NamespacedName, NamespacedName)>,
    /// Some served Ingress is a canary: `locations` is filled.
    pub(crate) record_locations: bool,
    /// Every served path of an ordinary Ingress: (host, path as written, pathType as written)
    /// → its backend's upstream name, which canary Ingresses are matched against.
    pub(crate) locations: HashMap<(HostPattern, String, String), String>,
    /// Canary Ingresses, oldest first, merged once every ordinary Ingress is in.
    pub(crate) canaries: Vec<PendingCanary>,
}

/// A canary Ingress as read, waiting for the ordinary Ingresses it joins.
pub(crate) struct PendingCanary {
    pub(crate) ingress: NamespacedName,
    pub(crate) canary: Canary,
    /// The two of its other annotations that still apply (to its own backend): ingress-nginx
    /// keeps them per upstream, not per location.
    pub(crate) hash_by: Option<Arc<HashBy>>,
    pub(crate) service_upstream: bool,
    /// `affinity-canary-behavior: legacy`: the canary's own affinity (maybe none) applies to
    /// its requests. `None`: sticky, the main route's.
    pub(crate) legacy_affinity: Option<Option<Arc<model::affinity::Affinity>>>,
}
/// Host-level annotations, applied once every Ingress has been read.
#[derive(Default)]
pub(crate) struct HostExtras {
    /// `server-alias`: alias → (host, Ingress that asked).
    pub(crate) aliases: BTreeMap<HostPattern, (HostPattern, NamespacedName)>,
    /// `from-to-www-redirect`: hosts whose www/non-www twin redirects to them.
    pub(crate) www: Vec<(String, NamespacedName)>,
    /// `server-snippet` header edits: host → (request, response) edits.
    pub(crate) edits: BTreeMap<HostPattern, (Vec<HeaderEdit>, Vec<HeaderEdit>)>,
    /// `app-root` → the Ingress that set it first.
    pub(crate) app_roots: BTreeMap<HostPattern, NamespacedName>,
    /// Hosts whose every route is refused (`auth-tls-secret`) → why.
    pub(crate) refused: BTreeMap<HostPattern, String>,
    /// `auth-tls-*` per host.
    pub(crate) client_certs: BTreeMap<HostPattern, HostClientCerts>,
    /// `ssl-ciphers` / `ssl-prefer-server-ciphers` per host: each from the oldest Ingress
    /// that sets it (and that Ingress).
    pub(crate) ciphers: BTreeMap<HostPattern, HostCipherClaims>,
}

/// One host's cipher annotations, as the Ingresses were read.
#[derive(Default)]
pub(crate) struct HostCipherClaims {
    pub(crate) suites: Option<(model::server_tls::CipherSuites, NamespacedName)>,
    pub(crate) prefer_server: Option<(bool, NamespacedName)>,
}

/// One host's client certificate rules, as the Ingresses were read.
#[derive(Default)]
pub(crate) struct HostClientCerts {
    /// Scope host: the oldest Ingress's rules (and that Ingress), for every path of the host.
    pub(crate) host: Option<(Arc<model::client_cert::ClientCertPolicy>, NamespacedName)>,
    /// Newer Ingresses whose scope-host rules are ignored.
    pub(crate) ignored: Vec<NamespacedName>,
    /// The CA names the handshake lists; empty: no certificate is asked for.
    pub(crate) names: std::collections::BTreeSet<Vec<u8>>,
}
