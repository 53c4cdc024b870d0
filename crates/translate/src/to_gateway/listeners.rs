//! The Gateway's listeners: `http` on port 80 for every host, and an HTTPS listener on port 443
//! for each host an Ingress lists under `spec.tls`, with that entry's Secret (the oldest
//! Ingress's, as the compile chooses); a ReferenceGrant lets the Gateway read a Secret of
//! another namespace.

use std::collections::BTreeMap;

use model::NamespacedName;
use serde_json::{json, Value};

use super::source::{host_slug, Gap, Source, Target};
use crate::Store;

/// Gateway API allows no more listeners on one Gateway.
const MAX_LISTENERS: usize = 64;

/// The name of the plain listener every route may attach to.
pub(super) const HTTP_LISTENER: &str = "http";

/// One HTTPS listener: a host (`None`: every host) and its certificate's Secret.
struct Https {
    name: String,
    hostname: Option<String>,
    secret: NamespacedName,
}

pub(super) struct Listeners {
    https: Vec<Https>,
    /// Hosts whose Secret is not in the Store: (Ingress, host, Secret).
    missing: Vec<(NamespacedName, Option<String>, NamespacedName)>,
}

impl Listeners {
    /// The HTTPS listeners the Ingresses' `spec.tls` ask for, oldest Ingress first.
    pub(super) fn of(primaries: &[Source], store: &Store) -> Listeners {
        let mut missing = Vec::new();
        let mut by_host: BTreeMap<Option<String>, NamespacedName> = BTreeMap::new();
        for source in primaries {
            for tls in source.spec.tls.iter().flatten() {
                let Some(secret) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) else {
                    continue;
                };
                let secret = NamespacedName::new(source.namespace(), secret);
                // An entry without hosts covers the Ingress's own hosts (as the compile reads it).
                let hosts: Vec<Option<String>> = match tls.hosts.as_ref() {
                    Some(hosts) if !hosts.is_empty() => hosts.iter().cloned().map(Some).collect(),
                    _ => source
                        .spec
                        .rules
                        .iter()
                        .flatten()
                        .map(|r| r.host.clone())
                        .collect(),
                };
                for host in hosts {
                    if by_host.contains_key(&host) {
                        continue;
                    }
                    if store.secret(&secret).is_none() {
                        missing.push((source.key.clone(), host.clone(), secret.clone()));
                    }
                    by_host.insert(host, secret.clone());
                }
            }
        }
        let https = by_host
            .into_iter()
            .map(|(hostname, secret)| Https {
                name: match &hostname {
                    Some(h) => format!("https-{}", host_slug(Some(h))),
                    None => "https".to_string(),
                },
                hostname,
                secret,
            })
            .collect();
        Listeners { https, missing }
    }

    /// The HTTPS listeners that serve `host`: its own, a wildcard's covering it, the one for
    /// every host.
    pub(super) fn https_for(&self, host: Option<&str>) -> Vec<&str> {
        self.https
            .iter()
            .filter(|l| match (l.hostname.as_deref(), host) {
                (None, _) => true,
                (Some(l), Some(h)) if l == h => true,
                (Some(l), Some(h)) => l
                    .strip_prefix("*.")
                    .and_then(|suffix| h.strip_suffix(suffix))
                    .is_some_and(|head| head.ends_with('.') && head.len() > 1),
                (Some(_), None) => false,
            })
            .map(|l| l.name.as_str())
            .collect()
    }

    /// Some Ingress lists `host` under `spec.tls` (so ingress-nginx redirects its plain HTTP).
    pub(super) fn is_tls(&self, host: Option<&str>) -> bool {
        !self.https_for(host).is_empty()
    }

    /// The Gateway, the ReferenceGrants its certificates need, and the gaps (too many
    /// listeners for one Gateway).
    pub(super) fn objects(&self, target: &Target) -> (Value, Vec<Value>, Vec<Gap>) {
        let namespace = &*target.gateway.namespace;
        let mut listeners = vec![json!({
            "name": HTTP_LISTENER,
            "port": 80,
            "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "All"}},
        })];
        let mut grants: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for l in &self.https {
            let mut reference = json!({"kind": "Secret", "name": &*l.secret.name});
            if &*l.secret.namespace != namespace {
                reference["namespace"] = json!(&*l.secret.namespace);
                grants
                    .entry(&l.secret.namespace)
                    .or_default()
                    .push(&l.secret.name);
            }
            let mut listener = json!({
                "name": l.name,
                "port": 443,
                "protocol": "HTTPS",
                "tls": {"mode": "Terminate", "certificateRefs": [reference]},
                "allowedRoutes": {"namespaces": {"from": "All"}},
            });
            if let Some(hostname) = &l.hostname {
                listener["hostname"] = json!(hostname);
            }
            listeners.push(listener);
        }
        let mut gaps = Vec::new();
        for (ingress, host, secret) in &self.missing {
            let host = host.as_deref().unwrap_or("*");
            let why = format!("Secret {secret} does not exist: ingress-nginx serves HTTPS with its default certificate (and redirects plain HTTP); the Gateway's listener for {host} has no certificate (ResolvedRefs=False) until the Secret exists");
            for object in [ingress.to_string(), target.gateway.to_string()] {
                gaps.push(Gap {
                    object,
                    what: format!("host {host}"),
                    why: why.clone(),
                });
            }
        }
        if listeners.len() > MAX_LISTENERS {
            gaps.push(Gap {
                object: target.gateway.to_string(),
                what: "spec.listeners".into(),
                why: format!("{} listeners (one per TLS host), Gateway API allows {MAX_LISTENERS} on one Gateway: split the HTTPS listeners over several Gateways, or use a ListenerSet", listeners.len()),
            });
        }
        let gateway = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": &*target.gateway.name, "namespace": namespace},
            "spec": {"gatewayClassName": target.class, "listeners": listeners},
        });
        let grants = grants
            .into_iter()
            .map(|(secret_namespace, mut names)| {
                names.sort_unstable();
                names.dedup();
                json!({
                    "apiVersion": "gateway.networking.k8s.io/v1beta1",
                    "kind": "ReferenceGrant",
                    "metadata": {"name": format!("{}-certificates", target.gateway.name), "namespace": secret_namespace},
                    "spec": {
                        "from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": namespace}],
                        "to": names.iter().map(|n| json!({"group": "", "kind": "Secret", "name": n})).collect::<Vec<_>>(),
                    },
                })
            })
            .collect();
        (gateway, grants, gaps)
    }
}
