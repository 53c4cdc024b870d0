//! A listener's pre-routing filters (`filters.requests`, GEP-5224) into the stage the proxy runs
//! on every request of the listener before route matching (`model::pre_routing`).
//!
//! ```text
//!  ExternalAuth, protocol HTTP or GRPC ─▶ backendRef: a Service port (ReferenceGrant across
//!      namespaces, from the Gateway or ListenerSet; BackendTLSPolicy as for any backend)
//!      + http (path prefix, allowedHeaders, allowedResponseHeaders) or grpc (allowedHeaders)
//!      + forwardBody.maxSize ─▶ ExternalAuth { gateway }
//!  missing Service or port, not a Service, ExtensionRef ─▶ ResolvedRefs False
//!      InvalidListenerFilterRef │ another namespace, not granted ─▶ RefNotPermitted
//!  another type, a GRPC forwardBody over 4 MiB ─▶ Accepted False UnsupportedValue │
//!      malformed, the other protocol's stanza, Host among allowedResponseHeaders, a
//!      TLS/TCP/UDP listener ─▶ Accepted False InvalidListenerFilter
//!  any of these ─▶ the stage fails closed: every request of the listener answers 500
//!  listeners of one hostname on one port of one site (one listener to the route table) whose
//!      filter lists differ ─▶ a failing stage for that key, InvalidListenerFilter
//! ```
//! Listeners without `filters` get no stage and none of these reasons.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use model::auth::{AuthDestination, AuthProtocol, AuthUri, ExternalAuth, GatewayAuth};
use model::pre_routing::{ListenerStage, PreRoutingFilter};
use model::routes::HostPattern;
use model::{Kind, NamespacedName, ObjectRef};

use super::objects::{ExternalAuthFilter, ListenerFilter};
use super::status::FilterFault;
use super::{ListenerSlot, Place};
use crate::compiler::Compiler;

/// `forwardBody.maxSize`'s ceiling: the API's own (an `int32`).
const FORWARD_BODY_MAX: u32 = i32::MAX as u32;

/// `forwardBody.maxSize`'s ceiling with `protocol: GRPC`: the body travels inside one
/// `CheckRequest`, held in memory, and grpc-go, grpc-java and Envoy refuse a message over
/// 4 MiB unless told otherwise; room is left for the request's other attributes.
const GRPC_FORWARD_BODY_MAX: u32 = 4 * 1024 * 1024 - 64 * 1024;

/// One filter's problem: the condition it falls on and its reason.
struct Problem {
    refs: bool,
    reason: &'static str,
    message: String,
}

impl Problem {
    fn accepted(reason: &'static str, message: String) -> Problem {
        Problem {
            refs: false,
            reason,
            message,
        }
    }

    fn refs(reason: &'static str, message: String) -> Problem {
        Problem {
            refs: true,
            reason,
            message,
        }
    }
}

impl Compiler<'_> {
    /// Every listener's filters compiled, and each HTTP and HTTPS listener key's stage into its
    /// site's route table. Runs after BackendTLSPolicies are read.
    pub(super) fn listener_filters(&mut self, listeners: &mut [ListenerSlot]) {
        if listeners.iter().all(|l| l.filters.is_none()) {
            return;
        }
        let upstream = self.default_policy.upstream;
        let mut stages: Vec<Option<Arc<ListenerStage>>> = Vec::with_capacity(listeners.len());
        for slot in listeners.iter_mut() {
            let Some(filters) = slot.filters.clone() else {
                stages.push(None);
                continue;
            };
            let (object, from) = slot_owner(slot);
            let field = format!("spec.listeners[{}].filters.requests", slot.index);
            let mut compiled = Vec::new();
            let mut problems = Vec::new();
            if slot.tls.is_some() || slot.stream.is_some() {
                problems.push(Problem::accepted(
                    "InvalidListenerFilter",
                    format!("spec.listeners[{}].filters: only HTTP and HTTPS listeners have pre-routing filters", slot.index),
                ));
            }
            for (i, filter) in filters.requests.iter().enumerate() {
                let at = format!("{field}[{i}]");
                match self.listener_filter((&object, from), &at, filter) {
                    Ok(filter) => compiled.push(filter),
                    Err(problem) => problems.push(problem),
                }
            }
            let listener: Arc<str> = format!("{} listener {}", describe(&object), slot.name).into();
            let filters = if problems.is_empty() {
                Ok(compiled.into_boxed_slice())
            } else {
                let mut fault = FilterFault::default();
                for problem in &problems {
                    let reason = Some(problem.reason);
                    if problem.refs {
                        fault.refs = fault.refs.or(reason);
                    } else {
                        fault.accepted = fault.accepted.or(reason);
                    }
                }
                fault.message = problems
                    .iter()
                    .map(|p| p.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ");
                let why: Arc<str> = fault.message.as_str().into();
                for problem in problems {
                    self.diagnose(
                        object.clone(),
                        format!(
                            "{}; the listener's requests answer 500 (its filters never skipped)",
                            problem.message
                        ),
                    );
                }
                slot.filter_fault = Some(fault);
                Err(why)
            };
            stages.push(Some(Arc::new(ListenerStage {
                listener,
                filters,
                upstream,
            })));
        }
        self.index_stages(listeners, stages);
    }

    /// Each (site, port, hostname) key's one stage: the listeners there are one listener to
    /// the route table, so their filter lists must agree (or the key fails closed).
    fn index_stages(
        &mut self,
        listeners: &mut [ListenerSlot],
        stages: Vec<Option<Arc<ListenerStage>>>,
    ) {
        type Key = (Place, u16, HostPattern);
        let mut keys: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
        for (s, slot) in listeners.iter().enumerate() {
            let served = slot.programmed && slot.tls.is_none() && slot.stream.is_none();
            if served && slot.place != Place::Nowhere {
                let key = (slot.place, slot.on.bits(), slot.host.pattern());
                keys.entry(key).or_default().push(s);
            }
        }
        for ((place, _, host), slots) in keys {
            let found: Vec<_> = slots.iter().map(|s| stages[*s].as_ref()).collect();
            let Some(some) = found.iter().flatten().next().map(|s| Arc::clone(s)) else {
                continue; // No listener here has filters.
            };
            let agree = (found.iter()).all(|f| f.is_some_and(|st| st.filters == some.filters));
            let stage = if agree {
                some
            } else {
                self.disagree(listeners, &slots, &host);
                disagreement(listeners, &slots, &host, &some)
            };
            if let Some(table) = self.routes_at(place) {
                table.add_listener_stage(&host, listeners[slots[0]].on, stage);
            }
        }
    }

    /// Listeners of one key whose filter lists differ: a diagnostic, and the ones with filters
    /// not accepted.
    fn disagree(&mut self, listeners: &mut [ListenerSlot], slots: &[usize], host: &HostPattern) {
        let names = listener_names(listeners, slots);
        let why = format!("the listeners {names} share port {} and hostname {host} on one address and their filters differ: Sluice cannot tell their requests apart, so every request there answers 500 (filters are never skipped)", listeners[slots[0]].port);
        for s in slots {
            let slot = &mut listeners[*s];
            let (object, _) = slot_owner(slot);
            if slot.filters.is_some() {
                let fault = slot.filter_fault.get_or_insert_with(FilterFault::default);
                fault.accepted = fault.accepted.or(Some("InvalidListenerFilter"));
                if !fault.message.is_empty() {
                    fault.message.push_str("; ");
                }
                fault.message.push_str(&why);
            }
            self.diagnose(object, format!("spec.listeners[{}]: {why}", slot.index));
        }
    }

    /// One filter of a listener: `(object, from)` is the Gateway or ListenerSet it is written in
    /// and the kind its ReferenceGrants name.
    fn listener_filter(
        &mut self,
        (object, from): (&ObjectRef, &str),
        at: &str,
        filter: &ListenerFilter,
    ) -> Result<PreRoutingFilter, Problem> {
        match filter.type_.as_str() {
            "ExternalAuth" => {
                let Some(auth) = &filter.external_auth else {
                    return Err(Problem::accepted(
                        "InvalidListenerFilter",
                        format!("{at}: type ExternalAuth without externalAuth"),
                    ));
                };
                self.external_auth_filter((object, from), at, auth)
                    .map(PreRoutingFilter::ExternalAuth)
            }
            "ExtensionRef" => {
                let named = filter
                    .extension_ref
                    .as_ref()
                    .map(|r| {
                        let get = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("");
                        format!(" {}/{} {}", get("group"), get("kind"), get("name"))
                    })
                    .unwrap_or_default();
                Err(Problem::refs(
                    "InvalidListenerFilterRef",
                    format!("{at}: ExtensionRef{named}: Sluice implements no extension kinds"),
                ))
            }
            other => Err(Problem::accepted(
                "UnsupportedValue",
                format!(
                    "{at}: type {other:?}: Sluice runs ExternalAuth filters before routing only"
                ),
            )),
        }
    }

    /// An HTTPRoute rule's `ExternalAuth` filter (`filters.rs`), as a listener's is built;
    /// `Err`: why the rule cannot run it (it is refused).
    pub(super) fn gateway_external_auth(
        &mut self,
        (object, from): (&ObjectRef, &str),
        at: &str,
        auth: &ExternalAuthFilter,
    ) -> Result<ExternalAuth, String> {
        self.external_auth_filter((object, from), at, auth)
            .map_err(|problem| problem.message)
    }

    /// An `ExternalAuth` payload (GEP-1494) written in `object` (`from`: the kind its
    /// ReferenceGrants name), at `at`.
    fn external_auth_filter(
        &mut self,
        (object, from): (&ObjectRef, &str),
        at: &str,
        auth: &ExternalAuthFilter,
    ) -> Result<ExternalAuth, Problem> {
        let invalid = |why: String| {
            Problem::accepted("InvalidListenerFilter", format!("{at}: ExternalAuth {why}"))
        };
        let protocol = match auth.protocol.as_str() {
            "HTTP" => AuthProtocol::Http,
            "GRPC" => AuthProtocol::Grpc,
            other => return Err(invalid(format!("protocol {other:?}: must be HTTP or GRPC"))),
        };
        // The API server's validation, for objects from files: each protocol its own stanza.
        match (protocol, &auth.http, &auth.grpc) {
            (AuthProtocol::Http, _, Some(_)) => {
                return Err(invalid("grpc: set, but protocol is HTTP".to_owned()))
            }
            (AuthProtocol::Grpc, Some(_), _) => {
                return Err(invalid("http: set, but protocol is GRPC".to_owned()))
            }
            _ => {}
        }
        let forward_body = match auth.forward_body.as_ref().and_then(|b| b.max_size) {
            None => 0,
            Some(size) => u32::try_from(size)
                .ok()
                .filter(|size| *size <= FORWARD_BODY_MAX)
                .ok_or_else(|| {
                    invalid(format!(
                        "forwardBody.maxSize {size}: must be 0 to {FORWARD_BODY_MAX} (int32)"
                    ))
                })?,
        };
        if protocol == AuthProtocol::Grpc && forward_body > GRPC_FORWARD_BODY_MAX {
            return Err(Problem::accepted(
                "UnsupportedValue",
                format!(
                    "{at}: ExternalAuth forwardBody.maxSize {forward_body}: a GRPC auth server gets \
                     the body inside one Check message, which Sluice holds in memory and gRPC \
                     servers refuse above 4 MiB by default; at most {GRPC_FORWARD_BODY_MAX}"
                ),
            ));
        }
        let names = |list: &[String], field: &str| -> Result<Box<[HeaderName]>, Problem> {
            list.iter()
                .map(|name| {
                    HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| invalid(format!("{field}: {name:?} is not a header name")))
                })
                .collect()
        };
        let http = auth.http.clone().unwrap_or_default();
        let path_prefix = GatewayAuth::path_prefix(http.path.as_deref().unwrap_or(""))
            .map_err(|why| invalid(format!("http.{why}")))?;
        let allowed_request_headers = match protocol {
            AuthProtocol::Http => names(&http.allowed_headers, "http.allowedHeaders")?,
            AuthProtocol::Grpc => {
                let grpc = auth.grpc.clone().unwrap_or_default();
                names(&grpc.allowed_headers, "grpc.allowedHeaders")?
            }
        };
        let allowed_response_headers = names(
            &http.allowed_response_headers,
            "http.allowedResponseHeaders",
        )?;
        if let Some(host) = allowed_response_headers
            .iter()
            .find(|n| *n == http::header::HOST)
        {
            return Err(invalid(format!(
                "http.allowedResponseHeaders: {host}: a pre-routing filter never changes Host"
            )));
        }
        let reference = &auth.backend_ref;
        let field = format!("{at}: ExternalAuth.backendRef");
        let group = reference.group.as_deref().unwrap_or("");
        let kind = reference.kind.as_deref().unwrap_or("Service");
        let unresolved =
            |why: String| Problem::refs("InvalidListenerFilterRef", format!("{field}: {why}"));
        if !group.is_empty() || kind != "Service" {
            return Err(unresolved(format!(
                "{group}/{kind}: auth servers are Services only"
            )));
        }
        let Some(port) = reference.port else {
            return Err(unresolved("port: required for a Service".to_owned()));
        };
        let home = object.namespace.as_str();
        let namespace = reference.namespace.as_deref().unwrap_or(home);
        if namespace != home && !self.granted((from, home), ("Service", namespace, &reference.name))
        {
            return Err(Problem::refs(
                "RefNotPermitted",
                format!("{field}: Service {namespace}/{} is in another namespace and no ReferenceGrant there allows it", reference.name),
            ));
        }
        let service = NamespacedName::new(namespace, reference.name.as_str());
        let written = port.to_string();
        let backend = (self
            .refusing_external_names(|this| this.resolve_backend(&service, Some(port), &written)))
        .map_err(|why| unresolved(format!("refers to Service {service} port {port}: {why}")))?;
        let tls = match self.backend_tls_for(object, &backend) {
            None => None,
            Some(Ok(tls)) => Some(tls),
            Some(Err(why)) => return Err(unresolved(format!("Service {service}: {why}"))),
        };
        let url = format!("Service {service}:{port}{path_prefix}");
        Ok(ExternalAuth {
            url,
            global: false,
            // HTTP: the sub-request carries the client's Host (GEP-1494's always-sent
            // headers). GRPC: the call's :authority names the Service, as a client of it would.
            host: match protocol {
                AuthProtocol::Http => HeaderValue::from_static(""),
                AuthProtocol::Grpc => HeaderValue::from_str(&format!(
                    "{}.{}.svc:{port}",
                    service.name, service.namespace
                ))
                .map_err(|_| unresolved(format!("Service {service}: not a host name")))?,
            },
            uri: AuthUri::Fixed(if path_prefix.is_empty() {
                "/".to_owned()
            } else {
                path_prefix.clone()
            }),
            method: None,
            destination: AuthDestination::Backend {
                upstream_name: format!("{service}:{port}").into(),
                backend,
                tls,
            },
            signin: None,
            request_redirect: None,
            response_headers: Box::new([]),
            proxy_set_headers: Box::new([]),
            always_set_cookie: false,
            cache: None,
            gateway: Some(Box::new(GatewayAuth {
                protocol,
                path_prefix,
                allowed_request_headers,
                allowed_response_headers,
                forward_body,
            })),
        })
    }
}

/// The object a slot's listener is written in, and the kind its ReferenceGrants name.
fn slot_owner(slot: &ListenerSlot) -> (ObjectRef, &'static str) {
    match &slot.set {
        Some(set) => (
            ObjectRef::new(Kind::ListenerSet, &*set.namespace, &*set.name),
            "ListenerSet",
        ),
        None => (
            ObjectRef::new(Kind::Gateway, &*slot.gateway.namespace, &*slot.gateway.name),
            "Gateway",
        ),
    }
}

fn describe(object: &ObjectRef) -> String {
    format!(
        "{} {}/{}",
        object.kind.as_str(),
        object.namespace,
        object.name
    )
}

fn listener_names(listeners: &[ListenerSlot], slots: &[usize]) -> String {
    slots
        .iter()
        .map(|s| {
            let slot = &listeners[*s];
            format!("{} ({})", slot.name, describe(&slot_owner(slot).0))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The failing stage of a key whose listeners' filters differ.
fn disagreement(
    listeners: &[ListenerSlot],
    slots: &[usize],
    host: &HostPattern,
    some: &Arc<ListenerStage>,
) -> Arc<ListenerStage> {
    let names = listener_names(listeners, slots);
    Arc::new(ListenerStage {
        listener: names.clone().into(),
        filters: Err(
            format!("the listeners {names} on hostname {host} have different filters").into(),
        ),
        upstream: some.upstream,
    })
}
