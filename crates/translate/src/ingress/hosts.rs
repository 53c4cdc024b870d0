//! Host-level annotations (`server-alias`, `from-to-www-redirect`, `server-snippet`, `app-root`,
//! `auth-tls-secret`) and `ssl-passthrough`: applied once every Ingress has been read.

use std::collections::BTreeSet;
use std::sync::Arc;

use model::compiled::ingress_ref;
use model::policy::RoutePolicy;
use model::routes::{HostPattern, PathKind};
use model::{Diagnostic, NamespacedName, Severity};

use crate::compiler::{CompileOptions, Compiler};
use crate::ingress::annotations::IngressAnnotations;
use crate::ingress::roots::{routes_of_server, takes_every_path};
impl Compiler<'_> {
    /// Records the host-level annotations of one Ingress for one of its hosts.
    pub(crate) fn host_annotations(
        &mut self,
        ingress: &NamespacedName,
        host: &HostPattern,
        parsed: &IngressAnnotations,
    ) {
        let object = ingress_ref(ingress);
        if let Some(root) = &parsed.app_root {
            match self.hosts.app_roots.get(host) {
                Some(owner) if owner != ingress => self.diagnose(
                    object.clone(),
                    format!("annotation app-root: host {host} already has one from Ingress {owner}, which is older; ignored"),
                ),
                Some(_) => {}
                None => {
                    self.hosts.app_roots.insert(host.clone(), ingress.clone());
                    self.out.routes.host_mut(host).app_root = Some(Box::new(root.clone()));
                }
            }
        }
        for alias in &parsed.server_aliases {
            self.hosts
                .aliases
                .entry(alias.clone())
                .or_insert_with(|| (host.clone(), ingress.clone()));
        }
        self.host_client_cert(ingress, host, parsed);
        self.host_ciphers(ingress, host, parsed);
        if let Some(why) = &parsed.hosts_refused {
            self.hosts
                .refused
                .entry(host.clone())
                .or_insert_with(|| format!("{why} (Ingress {ingress}, for the whole host)"));
        }
        if parsed.from_to_www {
            if let HostPattern::Exact(name) = host {
                self.hosts.www.push((name.to_string(), ingress.clone()));
            }
        }
        if !parsed.server_request_headers.is_empty() || !parsed.server_response_headers.is_empty() {
            let edits = self.hosts.edits.entry(host.clone()).or_default();
            edits
                .0
                .extend(parsed.server_request_headers.iter().cloned());
            edits
                .1
                .extend(parsed.server_response_headers.iter().cloned());
        }
    }

    /// `ssl-passthrough`, as ingress-nginx: per host, the `/` path's backend takes the host's
    /// TLS connections undecrypted; its other paths and annotations apply only to plain HTTP.
    pub(crate) fn passthrough(&mut self, options: &CompileOptions) {
        let asked = std::mem::take(&mut self.passthrough_ingresses);
        if asked.is_empty() {
            return;
        }
        if !options.enable_ssl_passthrough {
            for ingress in asked {
                self.diagnose_with(
                    Severity::Notice,
                    ingress_ref(&ingress),
                    "annotation nginx.ingress.kubernetes.io/ssl-passthrough: needs --enable-ssl-passthrough (as in ingress-nginx); TLS is terminated here",
                );
            }
            return;
        }
        let mut diagnostics = Vec::new();
        for (host, routes) in self.out.routes.hosts() {
            let mut owners = routes
                .paths
                .iter()
                .filter(|p| asked.contains(&p.route.ingress))
                .peekable();
            let Some(first) = owners.peek() else { continue };
            let ingress = first.route.ingress.clone();
            let HostPattern::Exact(name) = &host else {
                diagnostics.push(Diagnostic::with_severity(
                    Severity::Unsupported,
                    ingress_ref(&ingress),
                    format!("annotation nginx.ingress.kubernetes.io/ssl-passthrough: host {host}: only exact host names are passed through (SNI is matched exactly, as in ingress-nginx); TLS is terminated"),
                ));
                continue;
            };
            let root = routes
                .paths
                .iter()
                .find(|p| asked.contains(&p.route.ingress) && &*p.written == "/");
            match root {
                Some(path) => {
                    self.out.passthrough.insert(name.to_string(), path.route.clone());
                }
                None => diagnostics.push(Diagnostic::new(
                    ingress_ref(&ingress),
                    format!("annotation nginx.ingress.kubernetes.io/ssl-passthrough: host {host}: no path / to pass TLS through to (only the / path's backend is used, as in ingress-nginx); TLS is terminated"),
                )),
            }
            for other in routes
                .paths
                .iter()
                .filter(|p| asked.contains(&p.route.ingress) && &*p.written != "/")
            {
                diagnostics.push(Diagnostic::with_severity(
                    Severity::Notice,
                    ingress_ref(&other.route.ingress),
                    format!("annotation nginx.ingress.kubernetes.io/ssl-passthrough: host {host}: path {:?} is served over plain HTTP only; TLS connections all go to the / path's backend (as in ingress-nginx)", other.written),
                ));
            }
        }
        self.out.diagnostics.extend(diagnostics);
    }

    /// Host-level passes once every Ingress is in: regex hosts, server-snippet edits,
    /// aliases and www redirects.
    pub(crate) fn finish_hosts(&mut self) {
        let mut diagnostics = Vec::new();
        let edits = std::mem::take(&mut self.hosts.edits);
        let refused = std::mem::take(&mut self.hosts.refused);
        let host_default = self.host_default.clone();
        for (host, routes) in self.out.routes.hosts_mut() {
            if takes_every_path(routes) {
                routes.root = None;
            }
            // Server-wide: every path of the host, and its root (nginx's server directives).
            if let Some(why) = refused.get(&host) {
                let mut told = BTreeSet::new();
                for route in routes_of_server(routes, &host_default) {
                    if route.policy.denied.is_none() {
                        if told.insert(route.ingress.clone()) {
                            diagnostics.push(Diagnostic::new(
                                ingress_ref(&route.ingress),
                                format!("host {host}: every route answers 503: {why}"),
                            ));
                        }
                        let policy = RoutePolicy {
                            denied: Some(why.clone()),
                            ..(*route.policy).clone()
                        };
                        *route = Arc::new(route.with_policy(Arc::new(policy)));
                    }
                }
            }
            if let Some((request, response)) = edits.get(&host) {
                for route in routes_of_server(routes, &host_default) {
                    let mut policy = (*route.policy).clone();
                    policy.request_headers = request
                        .iter()
                        .chain(policy.request_headers.iter())
                        .cloned()
                        .collect();
                    policy.response_headers = response
                        .iter()
                        .chain(policy.response_headers.iter())
                        .cloned()
                        .collect();
                    *route = Arc::new(route.with_policy(Arc::new(policy)));
                }
            }
            let Some(asker) = routes
                .paths
                .iter()
                .find(|p| p.kind == PathKind::Regex)
                .map(|p| p.route.ingress.clone())
            else {
                continue;
            };
            for (path, why) in routes.make_regex() {
                diagnostics.push(Diagnostic::new(
                    ingress_ref(&path.route.ingress),
                    format!("path {:?} on host {host}: not a regular expression Sluice can match: {why}; path ignored", path.written),
                ));
            }
            let mut noted = std::collections::BTreeSet::new();
            for path in &routes.paths {
                if path.kind != PathKind::Regex && noted.insert(path.route.ingress.clone()) {
                    diagnostics.push(Diagnostic::with_severity(
                        Severity::Notice,
                        ingress_ref(&path.route.ingress),
                        format!("host {host}: this Ingress's Exact and Prefix paths are matched as case-insensitive regexes anchored at the start only (^<path>), because Ingress {asker} uses use-regex or rewrite-target on this host (as ingress-nginx does)"),
                    ));
                }
            }
        }
        self.out.diagnostics.extend(diagnostics);

        for (alias, (host, ingress)) in std::mem::take(&mut self.hosts.aliases) {
            if self
                .out
                .routes
                .host(&alias)
                .is_some_and(|r| !r.paths.is_empty())
            {
                self.diagnose(
                    ingress_ref(&ingress),
                    format!("annotation server-alias: {alias} has rules of its own; alias ignored"),
                );
                continue;
            }
            if let Some(routes) = self.out.routes.host(&host).cloned() {
                *self.out.routes.host_mut(&alias) = routes;
            }
        }
        for (name, ingress) in std::mem::take(&mut self.hosts.www) {
            let twin = match name.strip_prefix("www.") {
                Some(bare) => bare.to_owned(),
                None => format!("www.{name}"),
            };
            // A twin named only in `spec.tls` has an entry without rules: ingress-nginx makes
            // no server of it, so it is redirected (with its certificate).
            let has_rules = self
                .out
                .routes
                .host(&HostPattern::Exact(twin.as_str().into()))
                .is_some_and(|routes| !routes.paths.is_empty());
            if has_rules {
                // ingress-nginx too: a twin with its own server is left alone.
                self.diagnose_with(
                    Severity::Notice,
                    ingress_ref(&ingress),
                    format!("annotation from-to-www-redirect: {twin} has rules of its own, so it is not redirected"),
                );
                continue;
            }
            self.out.routes.add_www_redirect(twin, name);
        }
    }
}
