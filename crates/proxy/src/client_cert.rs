//! Client certificates (`auth-tls-*`): the handshake asks for one on the hosts that want it and
//! accepts whatever comes; the route's policy decides per request, in HTTP, as ingress-nginx
//! answers (400, a redirect to `auth-tls-error-page`, 403 for `auth-tls-match-cn`), and its
//! verdict's headers go upstream.
//!
//! ```text
//!  ClientHello (SNI of a host with client_cert_request; none, or one naming no host, when the
//!    rules without host have one: the catch-all, nginx's default server `_`) ─▶
//!    CertificateRequest (optional, the CAs named) ─▶ tls::RequestAny: any chain whose key signed the handshake ─▶
//!    ConnCtx.client_cert (a PeerCert)
//!  forward: route ─▶ decide(): model::client_cert::check, once per connection and policy
//!    (PeerCert's cache) ─▶ 400 │ 302 error page │ 403 │ on
//!  request headers: ssl-client-* set from the verdict (the client's own always removed)
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use http::request::Parts;
use http::uri::PathAndQuery;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Uri};
use model::client_cert::{Checked, ClientCertPolicy, Verdict};
use rustls::pki_types::CertificateDer;

use crate::error::ProxyError;
use crate::headers::OriginalTarget;

/// Verdicts a connection remembers (one per policy it met: a host's, a path's; a new
/// configuration makes new policies).
const REMEMBERED: usize = 4;

static SSL_CLIENT_CERT: HeaderName = HeaderName::from_static("ssl-client-cert");
static SSL_CLIENT_VERIFY: HeaderName = HeaderName::from_static("ssl-client-verify");
static SSL_CLIENT_SUBJECT_DN: HeaderName = HeaderName::from_static("ssl-client-subject-dn");
static SSL_CLIENT_ISSUER_DN: HeaderName = HeaderName::from_static("ssl-client-issuer-dn");

/// A connection whose handshake asked for a client certificate: the server name it asked
/// for, the chain the client presented (empty: none), and the verdicts made of it so far.
pub(crate) struct PeerCert {
    server_name: Box<str>,
    chain: Box<[CertificateDer<'static>]>,
    checked: RefCell<Vec<(Arc<ClientCertPolicy>, Rc<Checked>)>>,
}

impl PeerCert {
    /// From a finished handshake for `server_name`.
    pub(crate) fn of(session: &rustls::CommonState, server_name: Box<str>) -> Box<PeerCert> {
        let chain = session.peer_certificates().unwrap_or_default();
        Box::new(PeerCert {
            server_name,
            chain: chain.iter().map(|c| c.clone().into_owned()).collect(),
            checked: RefCell::default(),
        })
    }
}

/// What a request's connection presented: its certificate (`None`: none), and whether it is
/// HTTPS at all.
#[derive(Clone, Copy)]
pub(crate) struct Presented<'c> {
    pub(crate) peer: Option<&'c PeerCert>,
    pub(crate) https: bool,
}

impl Presented<'_> {
    /// Whether this connection's handshake asked for a client certificate for `host`.
    pub(crate) fn asked_for(&self, host: &str) -> bool {
        self.peer
            .is_some_and(|p| p.server_name.eq_ignore_ascii_case(host))
    }
}

/// The connection's certificate checked against `policy`: once per connection and policy.
fn checked(conn: Presented<'_>, policy: &Arc<ClientCertPolicy>) -> Rc<Checked> {
    let Some(peer) = conn.peer.filter(|p| !p.chain.is_empty()) else {
        return Rc::new(policy.check(None, conn.https));
    };
    let mut remembered = peer.checked.borrow_mut();
    if let Some((_, checked)) = remembered.iter().find(|(p, _)| Arc::ptr_eq(p, policy)) {
        return checked.clone();
    }
    let checked = Rc::new(policy.check(Some(&peer.chain), conn.https));
    if remembered.len() >= REMEMBERED {
        remembered.remove(0);
    }
    remembered.push((policy.clone(), checked.clone()));
    checked
}

/// What the access decision is: on, a redirect to the error page, or a refusal.
pub(crate) enum Decision {
    Pass,
    ErrorPage(HeaderValue),
    Refuse(ProxyError),
}

/// The route's certificate rules for this request (nginx: 495/496 before anything of the
/// server, then the server's `match-cn` check).
pub(crate) fn decide(conn: Presented<'_>, policy: &Arc<ClientCertPolicy>) -> Decision {
    let checked = checked(conn, policy);
    let error = match checked.verdict {
        Verdict::Pass => return Decision::Pass,
        Verdict::Missing => ProxyError::ClientCertMissing,
        Verdict::Invalid => ProxyError::ClientCertInvalid,
        Verdict::Unauthorized => return Decision::Refuse(ProxyError::ClientCertUnauthorized),
    };
    match &policy.error_page {
        Some(page) => Decision::ErrorPage(page.clone()),
        None => Decision::Refuse(error),
    }
}

/// The request was sent to `auth-tls-error-page`'s path: its certificate is not checked again
/// (nginx checks it once, as the request's head is read) and it goes on without its body.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ToErrorPath;

/// `auth-tls-error-page` as a path (`/cert-error.html`): nginx's `error_page 495 496 = /path`
/// is an internal redirect, not a 302: the same server's location for the path answers, with
/// its own status, the request made a GET (a HEAD stays one) without a body or a query.
/// `false`: not a path (a URL is answered 302; `@name` too, no Ingress makes one).
pub(crate) fn to_error_path(head: &mut Parts, page: &HeaderValue) -> bool {
    if !page.as_bytes().starts_with(b"/") {
        return false;
    }
    let Ok(target) = PathAndQuery::try_from(page.as_bytes()) else {
        return false;
    };
    let mut parts = std::mem::take(&mut head.uri).into_parts();
    let original = parts.path_and_query.replace(target);
    if let Some(original) = original {
        if head.extensions.get::<OriginalTarget>().is_none() {
            head.extensions.insert(OriginalTarget(original));
        }
    }
    head.uri = Uri::from_parts(parts).unwrap_or_default();
    if head.method != Method::HEAD {
        head.method = Method::GET;
    }
    head.headers.remove(header::CONTENT_LENGTH);
    head.headers.remove(header::TRANSFER_ENCODING);
    head.extensions.insert(ToErrorPath);
    true
}

/// nginx's `proxy_set_header ssl-client-*`: the client's own values never pass; an empty
/// variable (plain HTTP, no certificate) sends no header.
pub(crate) fn set_headers(
    conn: Presented<'_>,
    policy: &Arc<ClientCertPolicy>,
    headers: &mut HeaderMap,
) {
    for name in [
        &SSL_CLIENT_CERT,
        &SSL_CLIENT_VERIFY,
        &SSL_CLIENT_SUBJECT_DN,
        &SSL_CLIENT_ISSUER_DN,
    ] {
        headers.remove(name);
    }
    let checked = checked(conn, policy);
    if !checked.verify.is_empty() {
        headers.insert(&SSL_CLIENT_VERIFY, checked.verify.clone());
    }
    let values = [
        (&SSL_CLIENT_SUBJECT_DN, &checked.subject_dn),
        (&SSL_CLIENT_ISSUER_DN, &checked.issuer_dn),
        (&SSL_CLIENT_CERT, &checked.escaped_cert),
    ];
    for (name, value) in values {
        if let Some(value) = value {
            headers.insert(name, value.clone());
        }
    }
}
