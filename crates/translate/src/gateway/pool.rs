//! Gateways' addresses, decided: `--gateway-address-pool` read, and each Gateway's place
//! (plain data and pure functions; `addresses` puts the result into the compile).
//!
//! ```text
//!  --gateway-address-pool 198.18.0.64/26,10.0.0.5-10.0.0.9 ─▶ AddressPool (sorted, ≤ 4096)
//!  Gateways, oldest first, then by namespace/name:
//!    1. spec.addresses IPAddress in the pool and free ─▶ Own(ip)
//!       (outside the pool, or taken ─▶ Nowhere, Programmed=False AddressNotUsable;
//!        Hostname/NamedAddress ─▶ Nowhere, Accepted=False UnsupportedAddress)
//!    2. status.addresses[] in the pool and free (a restart or a new leader keeps it) ─▶ Own
//!    3. the address this process gave it in its last compile, when free ─▶ Own (its status may
//!       not have come back yet: without this, a Gateway created in the same second with a name
//!       sorting first would take the address just written into the other's status)
//!    4. the first free address of the pool ─▶ Own; none left ─▶ Nowhere, AddressNotAssigned
//!  no pool ─▶ every Gateway Shared (Sluice's one site, with the Ingresses)
//!  before both, each spec.addresses entry read (`requests`): routability "" or the sentinel ─▶
//!    an address it is served on; Cluster ─▶ its generated Service's ClusterIP (none from
//!    files); another scope, a second address of its own ─▶ Nowhere, Programmed=False
//!  ─▶ Assignment.plan: what status.addresses will report (model::gateway_status::AddressPlan)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use model::gateway_status::{
    AddressPlan, AddressSource, Condition, PlannedAddress, ROUTABILITY_CLUSTER,
    ROUTABILITY_DEFAULT, ROUTABILITY_SENTINEL,
};
use model::NamespacedName;

use super::objects::Gateway;

/// The most addresses a pool may hold: far more Gateways than one node serves, and the pool is
/// kept as a sorted list.
pub const MAX_POOL_ADDRESSES: usize = 4096;

/// `--gateway-address-pool`: the addresses Gateways get, in the order they are handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressPool {
    addresses: Vec<IpAddr>,
}

/// Why a pool's text is refused (the flag's name is the caller's to add).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("{0:?}: not an IP address, a range `a-b` or a CIDR")]
    Entry(String),
    #[error("{0:?}: a range's ends must be of one family, the first not above the last")]
    Range(String),
    #[error("more than {MAX_POOL_ADDRESSES} addresses")]
    TooLarge,
    #[error("no address")]
    Empty,
}

/// Where a Gateway is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Place {
    /// Sluice's shared site: every Gateway without a pool, with the Ingresses.
    Shared,
    /// Its own address.
    Own(IpAddr),
    /// Nowhere: it asked for an address it cannot have (its status says why).
    Nowhere,
}

/// A Gateway's address, decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub(crate) place: Place,
    /// Why it has none: (`Accepted` or `Programmed`, reason, message).
    pub(crate) problem: Option<Problem>,
    /// What its status will say of its addresses.
    pub(crate) plan: AddressPlan,
}

impl FromStr for AddressPool {
    type Err = PoolError;

    /// Comma-separated IPs, ranges `a-b` and CIDRs (a CIDR's every address, network and
    /// broadcast included: they are the operator's to hand out).
    fn from_str(text: &str) -> Result<AddressPool, PoolError> {
        let mut addresses = BTreeSet::new();
        let mut add = |ip: IpAddr| {
            addresses.insert(ip);
            if addresses.len() > MAX_POOL_ADDRESSES {
                return Err(PoolError::TooLarge);
            }
            Ok(())
        };
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if let Some((first, last)) = entry.split_once('-') {
                let parse = |t: &str| t.trim().parse::<IpAddr>();
                let (Ok(first), Ok(last)) = (parse(first), parse(last)) else {
                    return Err(PoolError::Entry(entry.to_owned()));
                };
                if first.is_ipv4() != last.is_ipv4() || first > last {
                    return Err(PoolError::Range(entry.to_owned()));
                }
                let mut ip = first;
                loop {
                    add(ip)?;
                    if ip == last {
                        break;
                    }
                    ip = next(ip);
                }
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                add(ip)?;
            } else if let Ok(net) = entry.parse::<IpNet>() {
                // Counted before walking: a /8 must not be listed to be refused.
                let bits = net.max_prefix_len() - net.prefix_len();
                if bits >= 13 {
                    return Err(PoolError::TooLarge);
                }
                for ip in net.hosts_including_ends() {
                    add(ip)?;
                }
            } else {
                return Err(PoolError::Entry(entry.to_owned()));
            }
        }
        if addresses.is_empty() {
            return Err(PoolError::Empty);
        }
        Ok(AddressPool {
            addresses: addresses.into_iter().collect(),
        })
    }
}

impl fmt::Display for AddressPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (first, last) = (self.addresses[0], self.addresses[self.addresses.len() - 1]);
        write!(f, "{} addresses, {first} to {last}", self.addresses.len())
    }
}

impl AddressPool {
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.addresses.binary_search(&ip).is_ok()
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }
}

/// Every address of a network, its first and last included.
trait HostsIncludingEnds {
    fn hosts_including_ends(&self) -> Box<dyn Iterator<Item = IpAddr>>;
}

impl HostsIncludingEnds for IpNet {
    fn hosts_including_ends(&self) -> Box<dyn Iterator<Item = IpAddr>> {
        let (first, last) = (self.network(), self.broadcast());
        let mut ip = Some(first);
        Box::new(std::iter::from_fn(move || {
            let now = ip?;
            ip = (now != last).then(|| next(now));
            Some(now)
        }))
    }
}

/// The address after `ip` (never called on the family's last).
fn next(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => std::net::Ipv4Addr::from(u32::from(v4).wrapping_add(1)).into(),
        IpAddr::V6(v6) => std::net::Ipv6Addr::from(u128::from(v6).wrapping_add(1)).into(),
    }
}

/// Each Gateway's place and addresses (see the module doc). `gateways`: Sluice's, in any
/// order; `given`: the addresses the last compile gave them (empty when there was none);
/// `generated`: a Service is generated for each served Gateway (Kubernetes mode), so a
/// `Cluster` address can be had.
pub(crate) fn assign(
    pool: Option<&AddressPool>,
    gateways: &[(&NamespacedName, &Gateway)],
    given: &BTreeMap<NamespacedName, IpAddr>,
    generated: bool,
) -> BTreeMap<NamespacedName, Assignment> {
    let mut out = BTreeMap::new();
    let mut ordered = Vec::new();
    for (key, gateway) in gateways {
        match requests(gateway, pool.is_some(), generated) {
            Ok(requests) => ordered.push((*key, *gateway, requests)),
            Err(problem) => {
                out.insert((*key).clone(), refused(problem));
            }
        }
    }
    let Some(pool) = pool else {
        for (key, _, requests) in ordered {
            out.insert(key.clone(), placed(Place::Shared, &requests));
        }
        return out;
    };
    ordered.sort_by(|(a_key, a, _), (b_key, b, _)| {
        (a.metadata.creation_timestamp.as_ref())
            .cmp(&b.metadata.creation_timestamp.as_ref())
            .then_with(|| a_key.cmp(b_key))
    });
    let mut taken = BTreeSet::new();
    let mut waiting = Vec::new();
    for (key, gateway, requests) in ordered {
        match asked(pool, &requests, &taken) {
            Ok(Some(ip)) => {
                taken.insert(ip);
                out.insert(key.clone(), placed(Place::Own(ip), &requests));
            }
            Ok(None) => waiting.push((key, gateway, requests)),
            Err(problem) => {
                out.insert(key.clone(), refused(problem));
            }
        }
    }
    // The address a Gateway was given before, when nobody asked for it since: the one its
    // status shows first (a leader's word, which a follower follows), then the one this
    // process gave it last (its status write may still be on its way back).
    let mut unplaced = Vec::new();
    for (key, gateway, requests) in waiting {
        let kept = (gateway.status_addresses.iter())
            .filter_map(|text| text.parse::<IpAddr>().ok())
            .find(|ip| pool.contains(*ip) && !taken.contains(ip));
        match kept {
            Some(ip) => {
                taken.insert(ip);
                out.insert(key.clone(), placed(Place::Own(ip), &requests));
            }
            None => unplaced.push((key, requests)),
        }
    }
    let mut new = Vec::new();
    for (key, requests) in unplaced {
        match given.get(key) {
            Some(ip) if pool.contains(*ip) && !taken.contains(ip) => {
                taken.insert(*ip);
                out.insert(key.clone(), placed(Place::Own(*ip), &requests));
            }
            _ => new.push((key, requests)),
        }
    }
    let mut free = pool.addresses.iter().filter(|ip| !taken.contains(*ip));
    for (key, requests) in new {
        let assignment = match free.next() {
            Some(ip) => placed(Place::Own(*ip), &requests),
            None => refused((
                "Programmed",
                "AddressNotAssigned",
                format!("every address of --gateway-address-pool ({pool}) is taken"),
            )),
        };
        out.insert(key.clone(), assignment);
    }
    out
}

/// Why a Gateway has no address: (`Accepted` or `Programmed`, reason, message).
type Problem = (&'static str, &'static str, String);

/// One `spec.addresses` entry, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Request {
    entry: usize,
    /// The address asked for by value.
    value: Option<IpAddr>,
    /// `Cluster`: the generated Service's ClusterIP; else an address Sluice serves on.
    cluster: bool,
    /// As reported in status.
    routability: &'static str,
}

/// `spec.addresses`, entry by entry. An entry Sluice cannot satisfy refuses the Gateway: it
/// does not program a part of what was asked (GatewayStaticAddresses expects a Gateway asking
/// for an unusable address among usable ones not to be programmed; GEP-5093 allows it).
fn requests(gateway: &Gateway, pooled: bool, generated: bool) -> Result<Vec<Request>, Problem> {
    let mut requests = Vec::new();
    for (a, address) in gateway.spec.addresses.iter().enumerate() {
        let kind = address.type_.as_deref().unwrap_or("IPAddress");
        if kind != "IPAddress" {
            return Err((
                "Accepted",
                "UnsupportedAddress",
                format!("spec.addresses[{a}]: Sluice assigns addresses of type IPAddress only, not {kind}"),
            ));
        }
        let routability = match address.routability.as_deref().unwrap_or_default() {
            "" => ROUTABILITY_DEFAULT,
            ROUTABILITY_SENTINEL => ROUTABILITY_SENTINEL,
            ROUTABILITY_CLUSTER if generated => ROUTABILITY_CLUSTER,
            ROUTABILITY_CLUSTER => {
                return Err((
                    "Programmed",
                    "AddressNotAssigned",
                    format!("spec.addresses[{a}] routability Cluster: a ClusterIP is the one of the Service Sluice generates in Kubernetes mode; a configuration from files has none"),
                ))
            }
            other => {
                return Err((
                    "Programmed",
                    "AddressNotAssigned",
                    format!("spec.addresses[{a}] routability {other:?}: Sluice provides \"\" (its own or the shared addresses) and Cluster (the generated Service's ClusterIP) only"),
                ))
            }
        };
        let value = match address.value.as_str() {
            "" => None,
            text => match text.parse::<IpAddr>() {
                Ok(ip) => Some(ip),
                Err(_) => {
                    return Err((
                        "Programmed",
                        "AddressNotUsable",
                        format!("spec.addresses[{a}] {text:?}: not an IP address"),
                    ))
                }
            },
        };
        let cluster = routability == ROUTABILITY_CLUSTER;
        if pooled && !cluster {
            if let Some(first) = requests.iter().find(|r: &&Request| !r.cluster) {
                return Err((
                    "Programmed",
                    "AddressNotUsable",
                    format!(
                        "spec.addresses[{a}]: Sluice gives a Gateway one address of its own, which spec.addresses[{}] asks for",
                        first.entry
                    ),
                ));
            }
        }
        requests.push(Request {
            entry: a,
            value,
            cluster,
            routability,
        });
    }
    Ok(requests)
}

fn refused(problem: Problem) -> Assignment {
    let plan = AddressPlan {
        refused: Some(problem.2.clone()),
        ..AddressPlan::default()
    };
    Assignment {
        place: Place::Nowhere,
        problem: Some(problem),
        plan,
    }
}

/// A Gateway served at `place`, its status addresses planned from `requests`.
fn placed(place: Place, requests: &[Request]) -> Assignment {
    let own = match place {
        Place::Own(ip) => Some(ip),
        Place::Shared | Place::Nowhere => None,
    };
    let here = |value: Option<IpAddr>| match own {
        Some(ip) => AddressSource::Own(ip),
        None => AddressSource::Shared(value),
    };
    let entries = if requests.is_empty() {
        vec![PlannedAddress {
            entry: None,
            source: here(None),
            routability: ROUTABILITY_DEFAULT,
        }]
    } else {
        (requests.iter())
            .map(|r| PlannedAddress {
                entry: Some(r.entry),
                source: match r.cluster {
                    true => AddressSource::ClusterIp(r.value),
                    false => here(r.value),
                },
                routability: r.routability,
            })
            .collect()
    };
    Assignment {
        place,
        problem: None,
        plan: AddressPlan {
            requested: !requests.is_empty(),
            own,
            entries,
            refused: None,
        },
    }
}

/// The address of its own `requests` ask for: `None` when they ask for none (or only for "any
/// IPAddress", an entry without value, or for a ClusterIP).
fn asked(
    pool: &AddressPool,
    requests: &[Request],
    taken: &BTreeSet<IpAddr>,
) -> Result<Option<IpAddr>, Problem> {
    let Some(ip) = (requests.iter()).find_map(|r| r.value.filter(|_| !r.cluster)) else {
        return Ok(None);
    };
    if !pool.contains(ip) {
        return Err((
            "Programmed",
            "AddressNotUsable",
            format!("{ip} is not in --gateway-address-pool ({pool})"),
        ));
    }
    if taken.contains(&ip) {
        return Err((
            "Programmed",
            "AddressNotUsable",
            format!("{ip} is another Gateway's (an older one asked for it)"),
        ));
    }
    Ok(Some(ip))
}

impl Assignment {
    /// Replaces the condition its problem is about in `conditions` (made as if it were served).
    pub(super) fn overrule(&self, conditions: &mut [Condition], generation: i64) {
        let Some((type_, reason, message)) = &self.problem else {
            return;
        };
        for condition in conditions.iter_mut() {
            if condition.type_ == *type_
                || (*type_ == "Accepted" && condition.type_ == "Programmed")
            {
                *condition =
                    Condition::new(condition.type_, false, reason, message.clone(), generation);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(text: &str) -> AddressPool {
        text.parse().unwrap()
    }

    #[test]
    fn pools_read_addresses_ranges_and_networks() {
        let p = pool("10.0.0.9, 10.0.0.1-10.0.0.3,192.0.2.4/31,::1");
        let all: Vec<String> = p.addresses.iter().map(ToString::to_string).collect();
        let expected = [
            "10.0.0.1",
            "10.0.0.2",
            "10.0.0.3",
            "10.0.0.9",
            "192.0.2.4",
            "192.0.2.5",
            "::1",
        ];
        assert_eq!(all, expected);
        assert_eq!(pool("198.18.0.64/26").len(), 64);
        assert_eq!(
            pool("198.18.0.64/26").to_string(),
            "64 addresses, 198.18.0.64 to 198.18.0.127"
        );
        assert_eq!(
            "10.0.0.1,nope".parse::<AddressPool>(),
            Err(PoolError::Entry("nope".into()))
        );
        assert_eq!(
            "10.0.0.5-10.0.0.1".parse::<AddressPool>(),
            Err(PoolError::Range("10.0.0.5-10.0.0.1".into()))
        );
        assert_eq!(
            "10.0.0.1-::2".parse::<AddressPool>(),
            Err(PoolError::Range("10.0.0.1-::2".into()))
        );
        assert_eq!(
            "10.0.0.0/8".parse::<AddressPool>(),
            Err(PoolError::TooLarge)
        );
        assert_eq!(
            "10.0.0.0-10.0.16.0".parse::<AddressPool>(),
            Err(PoolError::TooLarge)
        );
        assert!("10.0.0.0/20".parse::<AddressPool>().is_ok());
        assert_eq!(" , ".parse::<AddressPool>(), Err(PoolError::Empty));
    }
}
