//! Gateways' addresses in the compile: with `--gateway-address-pool` each Gateway of Sluice's
//! class is a site of its own (`model::sites`), so two Gateways with a route for the same host
//! and path, or a certificate for the same name, never meet; `pool` decides who gets which.
//!
//! ```text
//!  pool::assign ─▶ Place per Gateway ─▶ open_sites (a site per address, even without routes)
//!     routes_at / certificates_at (Place) ─▶ the site's RouteTable and Certificates, the shared
//!     ones, or none (a Gateway without the address it asked for serves nowhere)
//!  no pool: spec.addresses by value ─▶ a difference (had only if published); two Gateways'
//!     listeners on one port with overlapping hostnames ─▶ a notice (their routes meet on the
//!     shared site)
//! ```
//! The operator makes the pool's addresses reach the node (on its interface, or announced);
//! Sluice's sockets stay where `--http-listen`/`--https-listen` put them and the proxy tells
//! the Gateways apart by a connection's local address.

use std::collections::{BTreeMap, BTreeSet};

use model::routes::RouteTable;
use model::tls::Certificates;
use model::{NamespacedName, Severity};

use super::objects::Gateway;
use super::pool::{AddressPool, Assignment, Place};
use super::{gateway_ref, ListenerSlot};
use crate::compiler::Compiler;

impl Compiler<'_> {
    /// Where a Gateway's rules go: its site's table, the shared one, or none.
    pub(super) fn routes_at(&mut self, place: Place) -> Option<&mut RouteTable> {
        match place {
            Place::Shared => Some(&mut self.out.routes),
            Place::Own(ip) => Some(&mut self.out.sites.entry(ip).or_default().routes),
            Place::Nowhere => None,
        }
    }

    /// Where a Gateway's certificates go.
    pub(super) fn certificates_at(&mut self, place: Place) -> Option<&mut Certificates> {
        match place {
            Place::Shared => Some(&mut self.out.certificates),
            Place::Own(ip) => Some(&mut self.out.sites.entry(ip).or_default().certificates),
            Place::Nowhere => None,
        }
    }

    /// Every Gateway with an address gets its site, served even before it has routes: a
    /// connection to its address must never reach the shared site's.
    pub(super) fn open_sites(&mut self, assignments: &BTreeMap<NamespacedName, Assignment>) {
        for assignment in assignments.values() {
            if let Place::Own(ip) = assignment.place {
                self.out.sites.entry(ip).or_default();
            }
        }
    }

    /// Addresses asked for by value without a pool: every Gateway is on the shared listeners,
    /// so such an address is had only when it is one of the shared ones (the provider's to
    /// tell, in `AddressesAssigned`); from files there is no status to say so.
    pub(super) fn unpooled_addresses(
        &mut self,
        pool: Option<&AddressPool>,
        gateways: &[(&NamespacedName, &Gateway)],
    ) {
        if pool.is_some() {
            return;
        }
        for (key, gateway) in gateways {
            let valued = (gateway.spec.addresses.iter().enumerate())
                .find(|(_, a)| !a.value.is_empty() && a.routability.as_deref() != Some("Cluster"));
            if let Some((a, address)) = valued {
                self.diagnose_with(
                    Severity::Difference,
                    gateway_ref(key),
                    format!("spec.addresses[{a}] {}: without --gateway-address-pool every Gateway is served on Sluice's shared listeners; the address is had only if it is one of the addresses Sluice publishes (--publish-service, --publish-status-address)", address.value),
                );
            }
        }
    }

    /// A Gateway refused for its addresses is served nowhere: said where there is no status.
    pub(super) fn refused_addresses(&mut self, assignments: &BTreeMap<NamespacedName, Assignment>) {
        for (key, assignment) in assignments {
            if let Some(why) = &assignment.plan.refused {
                self.diagnose_with(
                    Severity::Error,
                    gateway_ref(key),
                    format!("{why}; the Gateway is served nowhere"),
                );
            }
        }
    }

    /// Sorts the sites' tables, as compile does the shared one's.
    pub(super) fn finish_sites(&mut self) {
        for site in self.out.sites.values_mut() {
            site.routes.finish();
        }
    }

    /// On the shared site, two Gateways' listeners on one port with overlapping hostnames
    /// meet: the routes of both answer there, whichever matches first. Said once per pair.
    pub(super) fn shared_collisions(&mut self, listeners: &[ListenerSlot]) {
        let shared: Vec<&ListenerSlot> = listeners
            .iter()
            // TCP and UDP listeners never share a port (`claim_stream_port`).
            .filter(|l| l.place == Place::Shared && l.stream.is_none())
            .collect();
        let mut said = BTreeSet::new();
        for (i, later) in shared.iter().enumerate() {
            for earlier in &shared[..i] {
                if earlier.gateway == later.gateway
                    || earlier.port != later.port
                    || earlier.host.intersect(&later.host).is_none()
                    || !said.insert((earlier.gateway.clone(), later.gateway.clone()))
                {
                    continue;
                }
                let host = later.host.pattern();
                self.diagnose_with(
                    Severity::Difference,
                    gateway_ref(&later.gateway),
                    format!("listener {} (port {}, {host}) shares Sluice's listeners with Gateway {}'s listener {}: requests for either reach the routes of both; --gateway-address-pool gives each Gateway an address of its own", later.name, later.port, earlier.gateway, earlier.name),
                );
            }
        }
    }
}
