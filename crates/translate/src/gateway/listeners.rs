//! A Gateway's listeners as Sluice serves them: HTTP on port 80, HTTPS on port 443 with its
//! certificate, HTTP or HTTPS on any other port (`ports`), TLS (TLSRoutes, `tls_route`) on
//! any port, and which routes each admits.
//!
//! ```text
//!  Listener { protocol, port, hostname, tls, allowedRoutes } ─▶ ListenerSlot { Listeners, host,
//!      namespaces (namespaces.rs), kinds, programmed, refs } │ None + a diagnostic (other
//!      protocols, a protocol conflict: not accepted)
//!  no usable certificate ─▶ kept, not programmed, ResolvedRefs False (InvalidCertificateRef,
//!      RefNotPermitted): routes attach and are counted, nothing is served for it
//!  tls.certificateRefs ─(ReferenceGrant across namespaces)─▶ Secret ─▶ Certificates[hostname]
//!  TLS: mode Passthrough (no certificate) │ Terminate (certificateRefs as HTTPS); its port is
//!      a TLS port like HTTPS's; it admits TLSRoutes only (HTTP and HTTPS: no TLSRoutes)
//! ```
//! A ListenerSet's listeners go through the same function with the ListenerSet as their
//! owner (`(Kind::ListenerSet, its name)`): its diagnostics, its ReferenceGrants (`from` kind ListenerSet), its namespace
//! for `allowedRoutes` Same.

use model::routes::Listeners;
use model::streams::StreamProtocol;
use model::{Kind, NamespacedName, ObjectRef, Severity};

use super::namespaces::{AllowedFrom, NamespaceSelector};
use super::objects::{self, ListenerTls};
use super::stream_route::stream_protocol;
use super::tls_objects::TlsMode;
use super::{GatewayHost, ListenerSlot, Place, GROUP};
use crate::compiler::Compiler;

/// The object a listener is written in: its Gateway, or a ListenerSet attached to it.
type Owner<'a> = (Kind, &'a NamespacedName);

fn owner_ref((kind, key): Owner) -> ObjectRef {
    ObjectRef::new(kind, &*key.namespace, &*key.name)
}

impl Compiler<'_> {
    /// One listener of one of our Gateways (written in the Gateway or in a ListenerSet of it,
    /// `owner`), or `None` (with a diagnostic) when Sluice does not serve it.
    pub(super) fn listener(
        &mut self,
        (gateway, place): (&NamespacedName, Place),
        owner: Owner,
        i: usize,
        listener: &objects::Listener,
    ) -> Option<ListenerSlot> {
        let object = owner_ref(owner);
        let field = format!("spec.listeners[{i}]");
        let on = match (listener.protocol.as_str(), listener.port) {
            (protocol @ ("HTTP" | "HTTPS" | "TLS"), port) => {
                match self.declare_port(port, protocol != "HTTP") {
                    Ok(on) => on,
                    Err(why) => {
                        self.diagnose(object, format!("{field}: {protocol}: {why}"));
                        return None;
                    }
                }
            }
            (protocol @ ("TCP" | "UDP"), port) => {
                let stream = stream_protocol(protocol).expect("TCP or UDP");
                let holder = format!("Gateway {gateway}'s listener {}", listener.name);
                if let Err(why) = self.claim_stream_port(place, stream, port, holder) {
                    self.diagnose(
                        object,
                        format!("{field}: {protocol}: {why}; listener ignored"),
                    );
                    return None;
                }
                Listeners::NONE
            }
            (protocol, port) => {
                self.diagnose_with(
                    Severity::Unsupported,
                    object,
                    format!("{field}: {protocol} on port {port}: Sluice serves HTTP, HTTPS, TLS, TCP and UDP listeners only; listener ignored"),
                );
                return None;
            }
        };
        let stream = stream_protocol(&listener.protocol);
        // A TCP or UDP listener's hostname matches nothing (the spec ignores it there).
        let hostname = listener.hostname.as_deref().filter(|_| stream.is_none());
        let host = match GatewayHost::parse(hostname) {
            Ok(host) => host,
            Err(why) => {
                self.diagnose(
                    object,
                    format!(
                        "{field}.hostname {:?}: {why}; listener ignored",
                        listener.hostname.as_deref().unwrap_or("")
                    ),
                );
                return None;
            }
        };
        let mode = TlsMode::of(listener);
        let tls = listener.protocol == "HTTPS" || mode == Some(TlsMode::Terminate);
        if listener.protocol == "HTTP" && listener.tls.is_some() {
            self.diagnose(
                object.clone(),
                format!("{field}.tls: an HTTP listener has no TLS; ignored"),
            );
        }
        // An unusable certificate leaves the listener in place, not programmed, with
        // ResolvedRefs False (routes still attach to it and are counted).
        let refs = if tls {
            self.listener_tls((owner, place), &field, listener.tls.as_ref(), &host)?
                .err()
        } else {
            None
        };
        let programmed = refs.is_none();
        let allowed = listener.allowed_routes.as_ref();
        let from = allowed
            .and_then(|a| a.namespaces.as_ref())
            .and_then(|n| n.from.as_deref())
            .unwrap_or("Same");
        let from = match from {
            "Same" => AllowedFrom::Same,
            "All" => AllowedFrom::All,
            "Selector" => {
                let at = format!("{field}.allowedRoutes.namespaces");
                let namespaces = allowed.and_then(|a| a.namespaces.as_ref());
                let refused = "the listener admits no routes";
                self.namespace_selector(&object, &at, namespaces, refused)
            }
            other => {
                self.diagnose(
                    object.clone(),
                    format!("{field}.allowedRoutes.namespaces.from {other:?}: must be Same, All or Selector; the listener admits no routes"),
                );
                AllowedFrom::Nobody
            }
        };
        let mut kinds_refused = false;
        // A TLS listener takes TLSRoutes; HTTP and HTTPS ones HTTPRoutes and GRPCRoutes; TCP
        // and UDP ones TCPRoutes and UDPRoutes.
        let plain = mode.is_none() && stream.is_none();
        let (tcp, udp) = (
            stream == Some(StreamProtocol::Tcp),
            stream == Some(StreamProtocol::Udp),
        );
        let tls_listener = mode.is_some();
        let kinds = allowed.and_then(|a| a.kinds.as_deref());
        let (http_routes, grpc_routes, tls_routes, tcp_routes, udp_routes) = match kinds {
            None | Some([]) => (plain, plain, tls_listener, tcp, udp),
            Some(kinds) => {
                let mut admits = (false, false, false, false, false);
                for (k, kind) in kinds.iter().enumerate() {
                    let group = kind.group.as_deref().unwrap_or(GROUP);
                    match (group == GROUP, kind.kind.as_str()) {
                        (true, "HTTPRoute") if plain => admits.0 = true,
                        (true, "GRPCRoute") if plain => admits.1 = true,
                        (true, "TLSRoute") if tls_listener => admits.2 = true,
                        (true, "TCPRoute") if tcp => admits.3 = true,
                        (true, "UDPRoute") if udp => admits.4 = true,
                        _ => {
                            kinds_refused = true;
                            let served = match (plain, tcp, udp) {
                                (true, _, _) => "HTTPRoutes and GRPCRoutes",
                                (_, true, _) => "TCPRoutes",
                                (_, _, true) => "UDPRoutes",
                                _ => "TLSRoutes",
                            };
                            self.diagnose_with(
                                Severity::Unsupported,
                                object.clone(),
                                format!("{field}.allowedRoutes.kinds[{k}]: {group}/{}: Sluice serves {served} only on {} listeners, yet; ignored", kind.kind, listener.protocol),
                            );
                        }
                    }
                }
                admits
            }
        };
        Some(ListenerSlot {
            gateway: gateway.clone(),
            set: (owner.0 == Kind::ListenerSet).then(|| owner.1.clone()),
            place,
            name: listener.name.clone(),
            port: listener.port,
            on,
            host,
            from,
            http_routes,
            grpc_routes,
            tls_routes,
            tls: mode,
            tcp_routes,
            udp_routes,
            stream,
            attached: 0,
            claims: Vec::new(),
            programmed,
            refs: refs.or(kinds_refused.then_some("InvalidRouteKinds")),
            index: i,
            filters: listener.filters.clone().filter(|f| !f.requests.is_empty()),
            filter_fault: None,
        })
    }

    /// `from: Selector` at `at` (a listener's `allowedRoutes.namespaces`, a Gateway's
    /// `allowedListeners.namespaces`): the selector, validated; a missing or malformed one
    /// admits nothing (`refused` says what that means).
    pub(super) fn namespace_selector(
        &mut self,
        object: &ObjectRef,
        at: &str,
        namespaces: Option<&objects::RouteNamespaces>,
        refused: &str,
    ) -> AllowedFrom {
        self.out.namespace_selectors = true;
        let Some(selector) = namespaces.and_then(|n| n.selector.as_ref()) else {
            self.diagnose(
                object.clone(),
                format!("{at}.selector: required with from Selector; {refused}"),
            );
            return AllowedFrom::Nobody;
        };
        match NamespaceSelector::parse(selector) {
            Ok(selector) => AllowedFrom::Selector(Box::new(selector)),
            Err(why) => {
                self.diagnose(object.clone(), format!("{at}.{why}; {refused}"));
                AllowedFrom::Nobody
            }
        }
    }

    /// An HTTPS listener's certificate: the first usable `certificateRefs` Secret, served for
    /// the listener's hostname. `Some(Err(reason))` (with diagnostics): no usable certificate,
    /// the listener stays with `ResolvedRefs` False for that reason (RefNotPermitted when a
    /// Secret in another namespace is not granted, else InvalidCertificateRef) and is not
    /// programmed. `None`: a TLS mode Sluice does not serve; the listener is not accepted.
    pub(super) fn listener_tls(
        &mut self,
        (owner, place): (Owner, Place),
        field: &str,
        tls: Option<&ListenerTls>,
        host: &GatewayHost,
    ) -> Option<Result<(), &'static str>> {
        let object = owner_ref(owner);
        let home = &owner.1.namespace;
        let Some(tls) = tls else {
            self.diagnose(object, format!("{field}.tls: required on an HTTPS listener (mode Terminate with certificateRefs); listener not programmed"));
            return Some(Err("InvalidCertificateRef"));
        };
        let mode = tls.mode.as_deref().unwrap_or("Terminate");
        if mode != "Terminate" {
            self.diagnose_with(
                Severity::Unsupported,
                object,
                format!(
                    "{field}.tls.mode {mode}: Sluice terminates TLS only, yet; listener ignored"
                ),
            );
            return None;
        }
        let mut reason = "InvalidCertificateRef";
        for (c, reference) in tls.certificate_refs.iter().enumerate() {
            let at = format!("{field}.tls.certificateRefs[{c}]");
            let group = reference.group.as_deref().unwrap_or("");
            let kind = reference.kind.as_deref().unwrap_or("Secret");
            if !group.is_empty() || kind != "Secret" {
                self.diagnose_with(
                    Severity::Unsupported,
                    object.clone(),
                    format!("{at}: {group}/{kind}: certificates come from Secrets only; ignored"),
                );
                continue;
            }
            let namespace = reference.namespace.as_deref().unwrap_or(home);
            if namespace != &**home
                && !self.granted(
                    (owner.0.as_str(), home),
                    ("Secret", namespace, &reference.name),
                )
            {
                self.diagnose(
                    object.clone(),
                    format!("{at}: Secret {namespace}/{} is in another namespace and no ReferenceGrant there allows it (RefNotPermitted); ignored", reference.name),
                );
                reason = "RefNotPermitted";
                continue;
            }
            let secret = NamespacedName::new(namespace, reference.name.as_str());
            match self.load_secret(&secret) {
                Ok((key, info)) => {
                    // The certificate store's wildcards are one label deep (TLS's own rule
                    // for `*.` names): deeper names get the default certificate.
                    let pattern = host.pattern();
                    // An Ingress's certificate for the name (or --default-tls-secret for a
                    // listener without hostname) came first and stays, as its rules win ties.
                    // A Gateway that serves nowhere (its address) has its certificate checked.
                    let Some(certificates) = self.certificates_at(place) else {
                        return Some(Ok(()));
                    };
                    let kept = certificates.sources().get(&pattern.to_string()).cloned();
                    if let Some(kept) = kept {
                        self.diagnose_with(
                            Severity::Notice,
                            object,
                            format!("{at}: {pattern} already has the certificate of Secret {kept} (an Ingress's or --default-tls-secret), which is served"),
                        );
                        return Some(Ok(()));
                    }
                    if tls.certificate_refs.len() > c + 1 {
                        self.diagnose_with(
                            Severity::Unsupported,
                            object.clone(),
                            format!("{field}.tls.certificateRefs: Sluice serves one certificate per listener, the first usable ({secret}); the others are ignored"),
                        );
                    }
                    if let Some(certificates) = self.certificates_at(place) {
                        certificates.insert(&pattern, key, secret.to_string(), info);
                    }
                    return Some(Ok(()));
                }
                Err(why) => self.diagnose_with(
                    why.severity(),
                    object.clone(),
                    format!("{at}: Secret {secret}: {why}"),
                ),
            }
        }
        self.diagnose(
            object,
            format!("{field}.tls.certificateRefs: no usable certificate ({reason}); listener not programmed"),
        );
        Some(Err(reason))
    }

    /// A ReferenceGrant in the target's namespace lets `from` (a kind of Gateway API's group
    /// in a namespace) refer to `to` (a core kind, its namespace and name).
    pub(super) fn granted(
        &self,
        (from_kind, from_namespace): (&str, &str),
        (to_kind, to_namespace, to_name): (&str, &str, &str),
    ) -> bool {
        self.store.reference_grants_by_name().any(|(key, grant)| {
            &*key.namespace == to_namespace
                && grant.spec.from.iter().any(|f| {
                    f.group == GROUP && f.kind == from_kind && f.namespace == from_namespace
                })
                && grant.spec.to.iter().any(|t| {
                    t.group.is_empty()
                        && t.kind == to_kind
                        && t.name.as_deref().is_none_or(|name| name == to_name)
                })
        })
    }
}
