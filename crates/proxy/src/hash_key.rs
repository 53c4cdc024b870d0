//! `upstream-hash-by`: the request's key, filled from the route's nginx variables, and its
//! hash, which `balance` turns into an endpoint through a `ring::Ring`.
//!
//! ```text
//!  HashBy { segments } × (request head, client address, scheme, host, rule host) ─▶ key bytes
//!  ─▶ ring::stable_hash ─▶ u64 ─▶ Attempts ─▶ Balancer::pick_hashed
//! ```
//! A variable the request does not have (no such header, cookie or parameter) adds nothing, as
//! in nginx: a key made only of it is empty, and every such request goes to one endpoint.

use std::io::Write as _;
use std::net::IpAddr;

use http::header;
use http::request::Parts;
use model::access_log::{Segment, Variable};
use model::HashBy;

use crate::headers::{self, OriginalTarget};
use crate::ring::stable_hash;

/// What a key can be made of, beside the request head.
pub(crate) struct KeyInputs<'a> {
    pub(crate) client: IpAddr,
    pub(crate) client_port: u16,
    pub(crate) https: bool,
    /// The request's host, lowercased, without port (`$host`).
    pub(crate) host: &'a str,
    /// The rule's host as written (`$server_name`).
    pub(crate) server_name: &'a str,
}

/// The hash of the request's key.
pub(crate) fn request_hash(hash_by: &HashBy, head: &Parts, inputs: &KeyInputs<'_>) -> u64 {
    let mut key = Vec::with_capacity(64);
    for segment in hash_by.segments.iter() {
        match segment {
            Segment::Literal(text) => key.extend_from_slice(text.as_bytes()),
            Segment::Variable(variable) => fill(&mut key, variable, head, inputs),
        }
    }
    stable_hash(&key)
}

/// Appends `variable`'s value in this request (nothing when it has none); also what a mirror's
/// target template is filled with.
pub(crate) fn fill(key: &mut Vec<u8>, variable: &Variable, head: &Parts, inputs: &KeyInputs<'_>) {
    match variable {
        Variable::RemoteAddr => {
            let _ = write!(key, "{}", inputs.client);
        }
        Variable::RemotePort => {
            let _ = write!(key, "{}", inputs.client_port);
        }
        Variable::RemoteUser => {
            let user = head
                .headers
                .get(header::AUTHORIZATION)
                .and_then(|value| headers::basic_user(value.as_bytes()));
            if let Some(user) = user {
                key.extend_from_slice(&user);
            }
        }
        Variable::RequestMethod => key.extend_from_slice(head.method.as_str().as_bytes()),
        // As the client sent it: before normalisation and rewrite.
        Variable::RequestUri => {
            let target = head
                .extensions
                .get::<OriginalTarget>()
                .map(|original| original.0.as_str())
                .or_else(|| head.uri.path_and_query().map(|p| p.as_str()))
                .unwrap_or("/");
            key.extend_from_slice(target.as_bytes());
        }
        Variable::Uri => key.extend_from_slice(head.uri.path().as_bytes()),
        Variable::Args => key.extend_from_slice(head.uri.query().unwrap_or("").as_bytes()),
        Variable::Arg(name) => {
            if let Some(value) = head.uri.query().and_then(|q| headers::query_arg(q, name)) {
                key.extend_from_slice(value.as_bytes());
            }
        }
        Variable::Scheme => key.extend_from_slice(if inputs.https { b"https" } else { b"http" }),
        Variable::Host => key.extend_from_slice(inputs.host.as_bytes()),
        Variable::ServerName => key.extend_from_slice(inputs.server_name.as_bytes()),
        Variable::RequestHeader(name) => {
            if let Some(value) = head.headers.get(name) {
                key.extend_from_slice(value.as_bytes());
            }
        }
        // HTTP/2 clients may split cookies over several headers.
        Variable::Cookie(name) => {
            let value = head
                .headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|value| value.to_str().ok())
                .find_map(|value| headers::cookie(value, name));
            if let Some(value) = value {
                key.extend_from_slice(value.as_bytes());
            }
        }
        // The request's ID: the client's, or the one the proxy put on the request for it.
        Variable::ReqId => {
            if let Some(id) = head.headers.get(headers::X_REQUEST_ID_NAME) {
                key.extend_from_slice(id.as_bytes());
            }
        }
        // The model accepts only the variables above in a key.
        _ => {}
    }
}
