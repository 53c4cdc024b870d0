//! TLS listeners' routes (Gateway API TLSRoute) as the proxy serves them: per listener port,
//! the server name a ClientHello asks for chooses a route, the same [`Route`] an
//! `ssl-passthrough` host has; the route's backend is reached as TLS passthrough does it.
//!
//! ```text
//!  connection on port P of a site ─▶ TlsRoutes[P] ─▶ SniTable::find(server name)
//!      exact name ─▶ else the longest `*.suffix` covering it ─▶ else the any-name entry
//!      found: TlsTarget { route, terminate }
//!          terminate false (Passthrough) ─▶ bytes as they come, still encrypted
//!          terminate true  (Terminate)   ─▶ TLS ends here (the site's certificates) and the
//!                                          decrypted bytes go to the backend over TCP
//!      none: the port's HTTPS listeners (`https`) take the connection, else it is closed
//! ```
//! Names are data here (no sockets); which route keeps a name when several want it is the
//! translation's decision (`SniTable::insert` keeps the first it is given).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::routes::Route;

/// The TLS routes of one site, by the listener port they answer on.
pub type TlsRoutes = BTreeMap<u16, SniTable>;

/// Where a TLS connection goes.
#[derive(Clone, Debug)]
pub struct TlsTarget {
    pub route: Arc<Route>,
    /// Terminated here (a listener of `tls.mode: Terminate`), else passed through.
    pub terminate: bool,
}

/// One port's TLS routes by server name.
#[derive(Debug, Default)]
pub struct SniTable {
    exact: HashMap<String, TlsTarget>,
    /// `*.<suffix>` names: one or more labels in front of the suffix; the longest first.
    suffixes: Vec<(String, TlsTarget)>,
    /// Every name (and a ClientHello without one).
    any: Option<TlsTarget>,
    /// HTTPS listeners share the port: a name no TLS route has is terminated for them.
    pub https: bool,
}

/// A server name pattern of a TLS route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SniName<'a> {
    Exact(&'a str),
    /// `*.<suffix>`, given without `*.`.
    Suffix(&'a str),
    Any,
}

impl SniTable {
    /// Adds `target` for `name` unless the name has one already (then `false`).
    pub fn insert(&mut self, name: SniName<'_>, target: TlsTarget) -> bool {
        match name {
            SniName::Exact(host) => match self.exact.entry(host.to_ascii_lowercase()) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(target);
                    true
                }
            },
            SniName::Suffix(suffix) => {
                let suffix = suffix.to_ascii_lowercase();
                if self.suffixes.iter().any(|(s, _)| *s == suffix) {
                    return false;
                }
                let at = (self.suffixes.iter())
                    .position(|(s, _)| s.len() < suffix.len())
                    .unwrap_or(self.suffixes.len());
                self.suffixes.insert(at, (suffix, target));
                true
            }
            SniName::Any if self.any.is_some() => false,
            SniName::Any => {
                self.any = Some(target);
                true
            }
        }
    }

    /// The route for a ClientHello's server name (lower case; `None`: it named none).
    pub fn find(&self, name: Option<&str>) -> Option<&TlsTarget> {
        let Some(name) = name else {
            return self.any.as_ref();
        };
        if let Some(target) = self.exact.get(name) {
            return Some(target);
        }
        let covered = |suffix: &str| {
            name.strip_suffix(suffix)
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|labels| !labels.is_empty())
        };
        (self.suffixes.iter())
            .find(|(suffix, _)| covered(suffix))
            .map(|(_, target)| target)
            .or(self.any.as_ref())
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.suffixes.is_empty() && self.any.is_none()
    }

    /// Name pattern → backend and mode, sorted, as `/config` shows them.
    pub fn view(&self) -> BTreeMap<String, String> {
        let shown = |target: &TlsTarget| {
            let backend = (target.route.backend.key())
                .map_or_else(|| "(unresolved)".to_owned(), ToString::to_string);
            let mode = if target.terminate {
                "terminate"
            } else {
                "passthrough"
            };
            format!("{backend} ({mode})")
        };
        let exact = (self.exact.iter()).map(|(name, t)| (name.clone(), shown(t)));
        let suffixes = (self.suffixes.iter()).map(|(s, t)| (format!("*.{s}"), shown(t)));
        let any = self.any.iter().map(|t| ("*".to_owned(), shown(t)));
        exact.chain(suffixes).chain(any).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::RouteSite;
    use crate::{Backend, NamespacedName};

    fn target(name: &str, terminate: bool) -> TlsTarget {
        TlsTarget {
            route: Arc::new(Route {
                ingress: NamespacedName::new("default", name),
                service: Arc::from(name),
                backend: Arc::new(Backend::unresolved()),
                policy: Arc::default(),
                site: RouteSite::default(),
                traffic: None,
                not_found: false,
            }),
            terminate,
        }
    }

    #[test]
    fn a_name_finds_its_exact_entry_then_the_longest_suffix_then_any() {
        let mut table = SniTable::default();
        assert!(table.insert(SniName::Suffix("com"), target("com", false)));
        assert!(table.insert(SniName::Suffix("example.com"), target("example", false)));
        assert!(table.insert(SniName::Exact("ABC.example.com"), target("abc", true)));
        assert!(!table.insert(SniName::Exact("abc.example.com"), target("late", true)));
        assert!(!table.insert(SniName::Suffix("com"), target("late", true)));
        fn found(table: &SniTable, name: Option<&str>) -> Option<(String, bool)> {
            (table.find(name)).map(|t| (t.route.ingress.name.to_string(), t.terminate))
        }
        assert_eq!(
            found(&table, Some("abc.example.com")),
            Some(("abc".into(), true))
        );
        assert_eq!(
            found(&table, Some("x.y.example.com")),
            Some(("example".into(), false))
        );
        assert_eq!(
            found(&table, Some("other.com")),
            Some(("com".into(), false))
        );
        assert_eq!(
            found(&table, Some("example.com")),
            Some(("com".into(), false))
        );
        assert_eq!(found(&table, Some("com")), None);
        assert_eq!(found(&table, Some("example.org")), None);
        assert_eq!(found(&table, None), None);
        assert!(table.insert(SniName::Any, target("any", false)));
        assert_eq!(
            found(&table, Some("example.org")),
            Some(("any".into(), false))
        );
        assert_eq!(found(&table, None), Some(("any".into(), false)));
        assert_eq!(table.view().len(), 4);
    }
}
