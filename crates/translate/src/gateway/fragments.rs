//! Route fragments: what one HTTPRoute or GRPCRoute compiled to, kept from one compile to the
//! next, so that a change costs what it changes and not what is configured (issue 27 item 6:
//! a route created → its first 200 in < 30 ms with 3,000 routes configured).
//!
//! ```text
//!  compile N:   route ─attach_route─▶ parents, hosts, listeners ─rules─▶ PathRoutes, status,
//!               diagnostics, backends used  ──▶ Fragment (kept in Fragments, by the object)
//!  compile N+1: the same route object (the Store's Arc: an unchanged route is the same one),
//!               the same context (Store::context: no Service, Secret, ConfigMap, Gateway,
//!               Namespace, policy, grant, ... changed), no route of the other kind holding
//!               one of its hostnames, its backends still the configuration's
//!                 ─▶ the fragment replayed: attached counts and hostname claims on its
//!                    listeners, its PathRoutes on its hosts, its diagnostics said again, its
//!                    backends registered (endpoints re-read), its BackendTLSPolicy uses
//!               anything else ─▶ compiled as before, and kept for the next compile
//! ```
//! The compile's side (making and replaying a fragment) is `replay.rs`. A replayed fragment's output is the same as compiling the route again: the golden tests
//! compile each case twice through one `Fragments`, and `tests/translate/fragments.rs` builds
//! every Gateway case object by object, takes each object away and back, comparing with a
//! full compile at every step.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use model::endpoints::NodeLocalEndpoints;
use model::gateway_status::RouteStatus;
use model::routes::PathRoute;
use model::{Backend, BackendKey, Diagnostic, Kind, NamespacedName, ObjectRef};

use super::grpc_objects::GrpcRoute;
use super::hosts::{GatewayHost, PlacedHost};
use super::objects::HttpRoute;

/// The fragments of the last compile, for the next one (`translate::compile_reusing`). Owned
/// by whoever compiles the same Store again and again: the control plane.
#[derive(Default)]
pub struct Fragments {
    /// This compile's fragments, as they are made or reused, by the route object's address.
    pub(super) routes: ByAddress,
    /// The last compile's, taken from during this one.
    pub(super) previous: ByAddress,
    /// Of the last compile: routes whose fragment was reused, and routes compiled.
    pub(super) counts: FragmentCounts,
    /// The last compile's backends: this one's for the same Service ports, so that a route
    /// compiled again (or an Ingress) shares its backend with the fragments kept.
    backends: BTreeMap<BackendKey, Arc<Backend>>,
    /// The addresses the last compile gave Gateways (`--gateway-address-pool`): kept by the
    /// next until the Gateway's status shows it, so a newer Gateway cannot take it meanwhile.
    gateway_addresses: BTreeMap<NamespacedName, IpAddr>,
    /// For each kept backend, the `Store::endpoints_version` of its Service when its endpoints
    /// were last read, with `endpoints_policy`: a compile reads again only what moved (with a
    /// Service per route, reading every backend's endpoints was most of a compile that
    /// reused every route). Keyed by the backend's address (a kept backend is alive, so its
    /// address is its own; the entries of backends the last compile dropped go at its end):
    /// hashing and cloning thousands of Service names per compile was a tenth of a compile
    /// that reused them.
    endpoints_read: HashMap<usize, u64, BuildHasherDefault<AddressHasher>>,
    endpoints_policy: Option<NodeLocalEndpoints>,
}

/// How many routes' rules the last compile reused and how many it compiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragmentCounts {
    pub reused: usize,
    pub compiled: usize,
}

impl Fragments {
    /// Of the last compile through these fragments.
    pub fn counts(&self) -> FragmentCounts {
        self.counts
    }

    /// How many routes' fragments are kept.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// At the start of a compile: the last compile's fragments become the ones to reuse.
    pub(crate) fn begin(&mut self, policy: NodeLocalEndpoints) {
        // The emptied map of two compiles ago takes this one's fragments: its room is kept.
        std::mem::swap(&mut self.previous, &mut self.routes);
        self.routes.clear();
        self.counts = FragmentCounts::default();
        if self.endpoints_policy != Some(policy) {
            self.endpoints_read.clear();
            self.endpoints_policy = Some(policy);
        }
    }

    /// At the end: fragments of routes this compile did not reach are dropped; the
    /// compile's backends are the next one's.
    pub(crate) fn end(&mut self, compiled: &model::Compiled) {
        self.previous.clear();
        self.backends = compiled.backends.clone();
        let live: HashSet<usize, BuildHasherDefault<AddressHasher>> =
            (compiled.backends.values()).map(address).collect();
        (self.endpoints_read).retain(|backend, _| live.contains(backend));
        self.gateway_addresses = (compiled.gateway_status.gateways.iter())
            .filter_map(|(key, gateway)| {
                let ip = gateway.addresses.own?;
                Some((key.clone(), ip))
            })
            .collect();
    }

    /// The addresses the last compile gave Gateways of their own.
    pub(crate) fn gateway_addresses(&self) -> &BTreeMap<NamespacedName, IpAddr> {
        &self.gateway_addresses
    }

    /// Whether `backend`'s endpoints must be read (they were not read at `version`); notes
    /// that they are read at it.
    pub(crate) fn endpoints_stale(&mut self, backend: &Arc<Backend>, version: u64) -> bool {
        self.endpoints_read.insert(address(backend), version) != Some(version)
    }

    /// The last compile's backend for `key`.
    pub(crate) fn last_backend(&self, key: &BackendKey) -> Option<&Arc<Backend>> {
        self.backends.get(key)
    }
}

fn address(backend: &Arc<Backend>) -> usize {
    Arc::as_ptr(backend) as usize
}

/// Fragments by the address of the route object they were compiled from. The fragment keeps
/// its object alive, so no other object has that address while the fragment exists (the last
/// compile's are kept until the end of the compile that may reuse them).
/// Boxed: the maps move entries when they grow, and a fragment is a few hundred bytes.
pub(super) type ByAddress = HashMap<usize, Box<Fragment>, BuildHasherDefault<AddressHasher>>;

/// An address is already unique: spread its bits, do not digest them.
#[derive(Default)]
pub(super) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 << 8 | u64::from(*byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, address: usize) {
        // Allocations are 8- or 16-byte aligned: the low bits carry nothing.
        self.0 = ((address >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The route being compiled, as the Store shares it.
pub(super) enum Source<'a> {
    Http(&'a Arc<HttpRoute>),
    Grpc(&'a Arc<GrpcRoute>),
}

/// A fragment's own reference to its [`Source`]: it keeps the object (and so its address).
pub(super) enum Kept {
    Http(#[allow(dead_code)] Arc<HttpRoute>),
    Grpc(#[allow(dead_code)] Arc<GrpcRoute>),
}

impl Source<'_> {
    pub(super) fn address(&self) -> usize {
        match self {
            Source::Http(route) => Arc::as_ptr(route) as usize,
            Source::Grpc(route) => Arc::as_ptr(route) as usize,
        }
    }

    pub(super) fn kind(&self) -> Kind {
        match self {
            Source::Http(_) => Kind::HTTPRoute,
            Source::Grpc(_) => Kind::GRPCRoute,
        }
    }

    pub(super) fn kept(&self) -> Kept {
        match self {
            Source::Http(route) => Kept::Http(Arc::clone(route)),
            Source::Grpc(route) => Kept::Grpc(Arc::clone(route)),
        }
    }
}

/// What compiling one route made: its status (`None`: it names none of our Gateways) and
/// what a replay needs to put it in place again.
#[derive(Default)]
pub(super) struct RouteOutcome {
    pub(super) status: Option<Arc<RouteStatus>>,
    /// The hosts it answers for, as the table keys them (see `Compiler::placed_hosts`).
    pub(super) placed: Vec<PlacedHost>,
    /// (listener slot, host) pairs it attached to: the listeners it counts on, and the
    /// hostnames it holds there against routes of the other kind.
    pub(super) pairs: Vec<(usize, GatewayHost)>,
    /// See `Attached::contested`: such an outcome is not kept.
    pub(super) contested: bool,
    pub(super) rules: Vec<PathRoute>,
}

/// What one route compiled to, and what it was compiled from.
pub(super) struct Fragment {
    pub(super) _source: Kept,
    /// `Store::context` when it was compiled.
    pub(super) context: u64,
    pub(super) outcome: RouteOutcome,
    /// The slots of `outcome.pairs`, once each (a listener's `attachedRoutes`).
    pub(super) listeners: Vec<usize>,
    /// Everything said while compiling it (attachment and rules).
    pub(super) diagnostics: Vec<Diagnostic>,
    /// Every backend its rules resolved (the configuration must hold these, not others, for
    /// the same Service ports: the endpoint fast path refreshes the configuration's).
    pub(super) backends: Vec<Arc<Backend>>,
    /// The Service ports whose BackendTLSPolicy its rules looked up, and by which route (the
    /// policy's ancestors).
    pub(super) backend_tls_uses: Vec<((NamespacedName, String), ObjectRef)>,
}

/// What the rules of the route being compiled resolved, beyond their PathRoutes and
/// diagnostics (the hooks are in `Compiler::backend_of` and `backend_tls_for`).
#[derive(Default)]
pub(crate) struct Recording {
    pub(crate) backends: Vec<Arc<Backend>>,
    pub(crate) backend_tls_uses: Vec<((NamespacedName, String), ObjectRef)>,
}
