//! Which Gateway listener a request belongs to: Gateway API's listener isolation, its 421 for
//! a misdirected request, and its precedence of a route's own hostname, as plain data.
//!
//! ```text
//!  Host (or SNI) + the port's bit ─▶ ListenerHosts::select: the most specific listener
//!      hostname of the site on that port that matches (exact, then the longest wildcard,
//!      then the hostname-less listener) ─▶ Selected { rank, name }
//!  route_on: a Gateway rule answers only when it came through that listener
//!      (PathRoute.via.listener == rank; a rule of a less specific listener is skipped;
//!      Ingress rules came through none: Via::INGRESS, always answer)
//!  HTTPS: select(SNI) ≠ select(Host), the Host's being a listener ─▶ misdirected: 421
//!  within one host: the rules whose route named the host itself first (via.host_gap 0),
//!      then those that got it by intersection, the route's hostname the closer the sooner
//! ```
//! Ranks only need to tell apart the listener hostnames that match one name: exact ones
//! (`u8::MAX`) are that name, wildcards are its suffixes (ranked by their label count) and
//! there is one hostname-less listener (0). So a byte says which listener a rule came through;
//! with the hostname gap that is two bytes in [`PathRoute`](crate::routes::PathRoute), which
//! the padding beside its kind did not hold: a rule is 88 bytes instead of 80 (80 KB at 10,000
//! rules).
//! A port without Gateway listeners (every port of an Ingress-only table) is not isolated:
//! `route_on` pays one bit test for it and takes the lookup it always did.

use std::collections::HashMap;
use std::sync::Arc;

use crate::listeners::Listeners;
use crate::pre_routing::ListenerStage;

/// How specific a hostname is (Gateway API's listener order; `HostPattern::rank`): the
/// hostname-less one 0, `*.<suffix>` one more than the suffix's labels, an exact name
/// [`EXACT`].
pub fn suffix_rank(suffix: &str) -> u8 {
    // At most 127 labels in 253 characters: never reaches the exact rank.
    u8::try_from(suffix.split('.').count() + 1).unwrap_or(EXACT - 1)
}

/// The rank of an exact hostname.
pub const EXACT: u8 = u8::MAX;

/// The Gateway listener a rule came through, and how far its route's own hostname is from the
/// host it is on. Ingress rules: [`Via::INGRESS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Via {
    /// The rank of the listener's hostname (`HostPattern::rank`); `u8::MAX` for Ingress rules, which answer
    /// whatever listener a request belongs to (an exact listener has it too: no listener is
    /// more specific, so its rules always pass the same test).
    pub listener: u8,
    /// The host's rank minus the route's hostname's (0: the route named this host; more: it
    /// got it by intersection with a more specific listener hostname, or named none). Rules
    /// with the smaller gap come first on a host, before any path comparison.
    pub host_gap: u8,
}

impl Via {
    pub const INGRESS: Via = Via {
        listener: u8::MAX,
        host_gap: 0,
    };

    /// A Gateway rule on a host of rank `host`, through a listener whose hostname has rank
    /// `listener`, of a route whose own hostname that gave the host has rank `route_host` (0
    /// when it has none). Ranks: `HostPattern::rank`.
    pub fn gateway(listener: u8, route_host: u8, host: u8) -> Via {
        Via {
            listener,
            host_gap: host.saturating_sub(route_host),
        }
    }
}

impl Default for Via {
    fn default() -> Via {
        Via::INGRESS
    }
}

/// The listener a name selected: its rank and its hostname (the exact name, the wildcard's
/// suffix, or empty for the hostname-less listener).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selected<'a> {
    pub rank: u8,
    pub name: &'a str,
}

/// A site's Gateway HTTP and HTTPS listener hostnames, with the ports (listener bits) each is
/// on. Listeners of one hostname on one port are one listener here, whatever Gateway declared
/// them (on the shared site, Gateways meet as their routes do).
#[derive(Debug)]
pub struct ListenerHosts {
    exact: HashMap<Arc<str>, Listeners>,
    suffix: HashMap<Arc<str>, Listeners>,
    any: Listeners,
    /// Every port some listener is on.
    ports: Listeners,
    /// Pre-routing stages (`pre_routing`) by listener hostname (`Selected::name`), each with
    /// its ports and rank. Empty without listener `filters`: a request then pays one check.
    stages: HashMap<Arc<str>, Vec<StageEntry>>,
}

/// A listener's stage, with the ports and hostname rank that tell it from others of its name.
#[derive(Debug)]
struct StageEntry {
    on: Listeners,
    rank: u8,
    stage: Arc<ListenerStage>,
}

impl Default for ListenerHosts {
    fn default() -> ListenerHosts {
        ListenerHosts {
            exact: HashMap::new(),
            suffix: HashMap::new(),
            any: Listeners::NONE,
            ports: Listeners::NONE,
            stages: HashMap::new(),
        }
    }
}

impl ListenerHosts {
    /// A listener with the exact hostname `name` on the ports `on`
    /// (`RouteTable::add_listener_host` takes any pattern).
    pub fn add_exact(&mut self, name: &Arc<str>, on: Listeners) {
        self.ports = self.ports.union(on);
        let ports = self.exact.entry(name.clone()).or_insert(Listeners::NONE);
        *ports = ports.union(on);
    }

    /// A listener with hostname `*.<suffix>` on the ports `on`.
    pub fn add_suffix(&mut self, suffix: &Arc<str>, on: Listeners) {
        self.ports = self.ports.union(on);
        let ports = self.suffix.entry(suffix.clone()).or_insert(Listeners::NONE);
        *ports = ports.union(on);
    }

    /// A listener without hostname on the ports `on`.
    pub fn add_any(&mut self, on: Listeners) {
        self.ports = self.ports.union(on);
        self.any = self.any.union(on);
    }

    pub fn is_empty(&self) -> bool {
        self.ports == Listeners::NONE
    }

    /// The pre-routing stage of the listener with hostname `name` (`Selected::name`) and
    /// `rank` on the ports `on`. A second stage for the same listener replaces the first.
    pub fn add_stage(
        &mut self,
        name: &Arc<str>,
        rank: u8,
        on: Listeners,
        stage: Arc<ListenerStage>,
    ) {
        let stages = self.stages.entry(name.clone()).or_default();
        stages.retain(|e| !(e.rank == rank && e.on.meets(on)));
        stages.push(StageEntry { on, rank, stage });
    }

    /// Some listener has a pre-routing stage.
    pub fn has_stages(&self) -> bool {
        !self.stages.is_empty()
    }

    /// The stage of the listener `selected` on `on`, if it has one.
    pub fn stage(&self, on: Listeners, selected: Selected<'_>) -> Option<&Arc<ListenerStage>> {
        let stages = self.stages.get(selected.name)?;
        stages
            .iter()
            .find(|e| e.rank == selected.rank && e.on.meets(on))
            .map(|e| &e.stage)
    }

    /// Some Gateway listener is on port `on`: its requests are isolated (a port only Ingresses
    /// serve takes the plain lookup).
    pub fn on(&self, on: Listeners) -> bool {
        self.ports.meets(on)
    }

    /// The most specific listener on `on` whose hostname matches `name` (lower case, without
    /// port: `route_on`'s normalised host): an exact one, else the longest wildcard suffix,
    /// else the hostname-less one. `None`: no listener there matches (then no Gateway rule
    /// on that port can match the name either).
    pub fn select<'a>(&'a self, on: Listeners, name: &'a str) -> Option<Selected<'a>> {
        if self.exact.get(name).is_some_and(|ports| ports.meets(on)) {
            return Some(Selected { rank: EXACT, name });
        }
        if !self.suffix.is_empty() {
            for parent in parents(name) {
                if self.suffix.get(parent).is_some_and(|ports| ports.meets(on)) {
                    let rank = suffix_rank(parent);
                    return Some(Selected { rank, name: parent });
                }
            }
        }
        self.any.meets(on).then_some(Selected { rank: 0, name: "" })
    }

    /// The lowest [`Via::listener`] a rule needs to answer a request for `name` on `on`: the
    /// selected listener's rank (0 when none is, or the table has no Gateway listener).
    pub fn floor(&self, on: Listeners, name: &str) -> u8 {
        if !self.on(on) {
            return 0;
        }
        self.select(on, name).map_or(0, |s| s.rank)
    }

    /// Gateway API's misdirected request: over HTTPS, the request's `host` belongs to a
    /// listener, and not to the one the handshake's `sni` did (both normalised: lower case,
    /// no port; `RouteTable::misdirected` does that). No server name, or no Gateway listener
    /// on the port: never.
    pub fn misdirected(&self, on: Listeners, sni: Option<&str>, host: &str) -> bool {
        let Some(sni) = sni.filter(|_| self.on(on)) else {
            return false;
        };
        match self.select(on, host) {
            Some(by_host) => self.select(on, sni) != Some(by_host),
            None => false,
        }
    }
}

/// The parent names of `name`, nearest first: `a.b.c` gives `b.c`, then `c`.
fn parents(name: &str) -> impl Iterator<Item = &str> {
    fn parent(name: &str) -> Option<&str> {
        name.split_once('.').map(|(_, parent)| parent)
    }
    std::iter::successors(parent(name), |above| parent(above))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conformance suite's four listeners on one port.
    fn isolation() -> ListenerHosts {
        let mut hosts = ListenerHosts::default();
        hosts.add_any(Listeners::HTTP);
        hosts.add_suffix(&"example.com".into(), Listeners::HTTP);
        hosts.add_suffix(&"foo.example.com".into(), Listeners::HTTP);
        hosts.add_exact(&"abc.foo.example.com".into(), Listeners::HTTP);
        hosts
    }

    #[test]
    fn a_name_selects_the_most_specific_listener_that_matches_it() {
        let hosts = isolation();
        let on = Listeners::HTTP;
        let name = |n: &str| hosts.select(on, n).map(|s| (s.rank, s.name.to_owned()));
        assert_eq!(name("bar.com"), Some((0, String::new())));
        assert_eq!(name("bar.example.com"), Some((3, "example.com".into())));
        assert_eq!(name("a.b.example.com"), Some((3, "example.com".into())));
        assert_eq!(
            name("bar.foo.example.com"),
            Some((4, "foo.example.com".into()))
        );
        assert_eq!(
            name("abc.foo.example.com"),
            Some((EXACT, "abc.foo.example.com".into()))
        );
        // A wildcard does not match its own suffix.
        assert_eq!(name("example.com"), Some((0, String::new())));
        // Listeners on another port are not this one's.
        assert_eq!(hosts.select(Listeners::HTTPS, "bar.example.com"), None);
        assert_eq!(hosts.floor(Listeners::HTTPS, "bar.example.com"), 0);
    }

    #[test]
    fn ranks_order_listeners_as_gateway_api_does() {
        assert!(EXACT > suffix_rank("foo.example.com"));
        assert!(suffix_rank("foo.example.com") > suffix_rank("example.com"));
        assert!(suffix_rank("com") > 0);
        let deepest = format!("{}z", "a.".repeat(126));
        assert!(suffix_rank(&deepest) < EXACT);
        let via = Via::gateway(EXACT, suffix_rank("example.com"), EXACT);
        assert_eq!((via.listener, via.host_gap), (EXACT, EXACT - 3));
    }

    #[test]
    fn a_host_another_listener_owns_is_misdirected_over_its_sni() {
        // The conformance suite's HTTPS listeners (httproute-https-listener-detect-misdirected-requests).
        let mut hosts = ListenerHosts::default();
        let on = Listeners::HTTPS;
        hosts.add_any(on);
        hosts.add_exact(&"second-example.org".into(), on);
        hosts.add_suffix(&"wildcard.org".into(), on);
        hosts.add_exact(&"fourth-example.wildcard.org".into(), on);
        let cases = [
            ("example.org", "example.org", false),
            ("example.org", "second-example.org", true),
            ("example.org", "unknown-example.org", false),
            ("second-example.org", "example.org", true),
            ("second-example.org", "unknown-example.org", true),
            (
                "third-example.wildcard.org",
                "fith-example.wildcard.org",
                false,
            ),
            (
                "third-example.wildcard.org",
                "fourth-example.wildcard.org",
                true,
            ),
            (
                "fourth-example.wildcard.org",
                "fith-example.wildcard.org",
                true,
            ),
        ];
        for (sni, host, misdirected) in cases {
            assert_eq!(
                hosts.misdirected(on, Some(sni), host),
                misdirected,
                "SNI {sni}, Host {host}"
            );
        }
        assert!(!hosts.misdirected(on, None, "second-example.org"));
        assert!(!hosts.misdirected(Listeners::HTTP, Some("example.org"), "second-example.org"));
        assert!(!ListenerHosts::default().misdirected(on, Some("a.org"), "b.org"));
    }
}
