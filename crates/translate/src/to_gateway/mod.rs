//! `sluice migrate --to gateway-api`: the Ingresses a configuration serves, written as Gateway
//! API objects that Sluice serves the same way, and a list of what has no equivalent.
//!
//! ```text
//!  Store + Compiled (which Ingresses are served, the ConfigMap's settings)
//!    ├─▶ listeners: one Gateway; `http` :80, an HTTPS listener :443 per TLS host (its Secret;
//!    │              a ReferenceGrant where the Secret is in another namespace)
//!    ├─▶ per Ingress and host: an HTTPRoute (rules.rs: paths, canary rules and weights,
//!    │              rewrite, redirects, app-root, the Ingress's default backend as `/`)
//!    │              + one on the `http` listener redirecting to HTTPS (ssl-redirect)
//!    └─▶ Gaps: every annotation, field or trap without an equivalent, by Ingress
//! ```
//! It converts from the objects, not from the compiled table: the result is meant to be read,
//! kept and edited by the people who own the Ingresses. The compiled configuration decides
//! which Ingresses count (class, validity) and supplies the ConfigMap's defaults.
//! Files: `source` (an Ingress with its parsed annotations; the target; a gap), `listeners`
//! (the Gateway), `rules` (the HTTPRoutes), this file (the order, and what spans Ingresses:
//! www redirects, global auth, hosts that fall through).

mod listeners;
mod rules;
mod source;

use std::collections::{BTreeMap, BTreeSet};

use model::{Compiled, NamespacedName};
use serde_json::{json, Value};

use source::{host_slug, Source};
pub use source::{Gap, Target};

use crate::Store;

/// The objects to apply and the gaps to read first.
#[derive(Debug, Default)]
pub struct Conversion {
    pub objects: Vec<Value>,
    pub gaps: Vec<Gap>,
}

impl Conversion {
    /// The objects as one YAML stream (`---` between documents).
    pub fn yaml(&self) -> String {
        let mut out = String::new();
        for object in &self.objects {
            out.push_str("---\n");
            out.push_str(&serde_yaml::to_string(object).expect("JSON values serialise"));
        }
        out
    }

    /// The gaps as a Markdown list, one line each.
    pub fn gaps_markdown(&self) -> String {
        let mut out = String::new();
        for gap in &self.gaps {
            out.push_str(&format!("- {} `{}`: {}\n", gap.object, gap.what, gap.why));
        }
        out
    }
}

/// The conversion's shared state: sources, hosts' facts and what is written so far.
struct Converter<'a> {
    store: &'a Store,
    compiled: &'a Compiled,
    target: &'a Target,
    primaries: Vec<Source<'a>>,
    canaries: Vec<Source<'a>>,
    /// Hosts on which some Ingress asks for regex paths (`use-regex`, `rewrite-target`):
    /// ingress-nginx matches every path of such a host as a regex.
    regex_hosts: BTreeSet<String>,
    listeners: listeners::Listeners,
    out: Conversion,
}

/// The served Ingresses of `store` as Gateway API objects attached to `target`.
pub fn to_gateway_api(store: &Store, compiled: &Compiled, target: &Target) -> Conversion {
    let served: BTreeSet<&NamespacedName> = compiled.ingresses.iter().collect();
    let mut sources: Vec<(Option<_>, Source)> = store
        .ingresses_by_name()
        .filter(|(key, _)| served.contains(key))
        .filter_map(|(key, ingress)| {
            let age = ingress.metadata.creation_timestamp.as_ref().map(|t| t.0);
            Some((age, Source::new(key.clone(), ingress, &compiled.settings)?))
        })
        .collect();
    // Oldest first, as the compile orders them: the first Ingress of a host decides its
    // certificate and its `/`.
    sources.sort_by(|a, b| (a.0, &a.1.key).cmp(&(b.0, &b.1.key)));
    let (canaries, primaries): (Vec<_>, Vec<_>) = sources
        .into_iter()
        .map(|(_, s)| s)
        .partition(Source::is_canary);
    let regex_hosts = primaries
        .iter()
        .flat_map(|s| s.spec.rules.iter().flatten().map(move |r| (s, r)))
        .filter(|(s, r)| {
            s.flag("use-regex") == Some(true)
                || s.annotation("rewrite-target").is_some_and(|target| {
                    // A rewrite to the path itself is no rewrite (and no regex).
                    r.http
                        .iter()
                        .flat_map(|h| &h.paths)
                        .any(|p| p.path.as_deref().unwrap_or("/") != target)
                })
        })
        .filter_map(|(_, r)| r.host.clone())
        .collect();
    let mut converter = Converter {
        store,
        compiled,
        target,
        listeners: listeners::Listeners::of(&primaries, store),
        primaries,
        canaries,
        regex_hosts,
        out: Conversion::default(),
    };
    converter.convert();
    converter.out.gaps.sort();
    converter.out.gaps.dedup();
    converter.out
}

impl Converter<'_> {
    fn convert(&mut self) {
        self.out.objects.push(json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": self.target.class},
            "spec": {"controllerName": crate::gateway::GATEWAY_CONTROLLER},
        }));
        let (gateway, grants, gaps) = self.listeners.objects(self.target);
        self.out.objects.push(gateway);
        self.out.objects.extend(grants);
        self.out.gaps.extend(gaps);
        let mut first_of_host: BTreeMap<Option<&str>, &NamespacedName> = BTreeMap::new();
        for source in &self.primaries {
            for host in rules::hosts_of(source) {
                first_of_host.entry(host).or_insert(&source.key);
            }
        }
        let first = |host: Option<&str>| first_of_host.get(&host).copied();
        let ctx = rules::Context {
            store: self.store,
            settings: &self.compiled.settings,
            target: self.target,
            listeners: &self.listeners,
            regex_hosts: &self.regex_hosts,
            primaries: &self.primaries,
            canaries: &self.canaries,
            first_of_host: &first,
        };
        for source in &self.primaries {
            let (objects, gaps) = rules::convert_ingress(&ctx, source);
            self.out.objects.extend(objects);
            self.out.gaps.extend(gaps);
        }
        self.www_redirects();
        self.global_auth_gaps();
        self.fall_through_gaps();
        self.canaries_without_main();
    }

    fn gap(&mut self, source: &NamespacedName, what: impl Into<String>, why: impl Into<String>) {
        self.out.gaps.push(Gap {
            object: source.to_string(),
            what: what.into(),
            why: why.into(),
        });
    }

    /// `from-to-www-redirect`: a route for the other name (when it has no rules of its own,
    /// as the compile decided) redirecting to the Ingress's host.
    fn www_redirects(&mut self) {
        let code = self.compiled.settings.http_redirect_code;
        let code = if [301, 302, 303, 307, 308].contains(&code) {
            code
        } else {
            308
        };
        let mut routes = Vec::new();
        for source in &self.primaries {
            if source.flag("from-to-www-redirect") != Some(true) {
                continue;
            }
            for host in rules::hosts_of(source).into_iter().flatten() {
                let other = match host.strip_prefix("www.") {
                    Some(bare) => bare.to_string(),
                    None => format!("www.{host}"),
                };
                if self.compiled.routes.www_redirect(&other) != Some(host) {
                    continue;
                }
                routes.push((source.key.clone(), json!({
                    "apiVersion": "gateway.networking.k8s.io/v1",
                    "kind": "HTTPRoute",
                    "metadata": {"name": format!("{}-www-redirect-{}", source.key.name, host_slug(Some(&other))), "namespace": source.namespace()},
                    "spec": {
                        "parentRefs": [{"name": &*self.target.gateway.name, "namespace": &*self.target.gateway.namespace}],
                        "hostnames": [other],
                        "rules": [{"filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": host, "statusCode": code}}]}],
                    },
                })));
            }
        }
        for (key, route) in routes {
            self.out.objects.push(route);
            self.gap(&key, "from-to-www-redirect", "converted to a RequestRedirect route for the other name; ingress-nginx also drops a trailing / of the path");
        }
    }

    /// The ConfigMap's `global-auth-url` covers Ingresses, not Gateway API routes.
    fn global_auth_gaps(&mut self) {
        if self.compiled.settings.global_auth.is_empty() {
            return;
        }
        let covered: Vec<NamespacedName> = self
            .primaries
            .iter()
            .filter(|s| s.flag("enable-global-auth") != Some(false))
            .map(|s| s.key.clone())
            .collect();
        for key in covered {
            self.gap(&key, "global-auth-url (ConfigMap)", "the external authentication every Ingress gets is not applied to Gateway API routes: not converted");
        }
    }

    /// ingress-nginx settles a request by its host first (a host's unmatched paths get that
    /// host's 404 or default backend); Gateway API matches across every route of the
    /// listener, so a host without a `/` of its own lets them through to a wildcard's or a
    /// host-less rule. Listed where such a rule exists.
    fn fall_through_gaps(&mut self) {
        let mut catchers: Vec<Option<String>> = Vec::new();
        let mut rootless: Vec<(NamespacedName, String)> = Vec::new();
        for source in &self.primaries {
            let hosts = rules::hosts_of(source);
            if hosts.is_empty() && source.spec.default_backend.is_some() {
                catchers.push(None);
            }
            for host in hosts {
                match host {
                    None => catchers.push(None),
                    Some(h) if h.starts_with("*.") => catchers.push(Some(h.to_string())),
                    Some(h) => {
                        let root = self.primaries.iter().any(|p| {
                            rules::paths_of(p, Some(h)).any(|q| {
                                q.path.as_deref().unwrap_or("/") == "/" && q.path_type != "Exact"
                            })
                        }) || source.spec.default_backend.is_some();
                        if !root {
                            rootless.push((source.key.clone(), h.to_string()));
                        }
                    }
                }
            }
        }
        for (key, host) in rootless {
            let caught = catchers.iter().find(|c| match c {
                None => true,
                Some(w) => host
                    .strip_suffix(&w[1..])
                    .is_some_and(|head| !head.is_empty() && !head.contains('.')),
            });
            if let Some(catcher) = caught {
                let by = catcher.as_deref().unwrap_or("the rules without a host");
                self.gap(
                    &key,
                    format!("host {host}"),
                    format!("its paths do not cover /: requests for other paths go to {by}'s routes in Gateway API, where ingress-nginx answers 404 (add a PathPrefix / rule to keep the 404)"),
                );
            }
        }
    }

    /// A canary Ingress whose host and path no main Ingress has: ingress-nginx ignores it too,
    /// but its owner should know it converts to nothing.
    fn canaries_without_main(&mut self) {
        let mut orphans = Vec::new();
        for canary in &self.canaries {
            for host in rules::hosts_of(canary) {
                for path in rules::paths_of(canary, host) {
                    let main = self
                        .primaries
                        .iter()
                        .any(|p| rules::paths_of(p, host).any(|q| q.path == path.path));
                    if !main {
                        let written = path.path.clone().unwrap_or_default();
                        orphans.push((
                            canary.key.clone(),
                            format!("canary rule {}{written}", host.unwrap_or("*")),
                        ));
                    }
                }
            }
        }
        for (key, what) in orphans {
            self.gap(
                &key,
                what,
                "no main Ingress has this host and path: nothing to split, not converted (ingress-nginx ignores it too)",
            );
        }
    }
}
