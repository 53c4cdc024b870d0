//! `sluice migrate`: one verdict per Ingress on what Sluice would make of an ingress-nginx
//! configuration, from the same `compile()` that serves it.
//!
//! ```text
//!  Store (files or one list of the API) ─▶ compile() ─▶ diagnostics grouped by Ingress
//!     any Error or Unsupported ─▶ NotServedAsWritten (each listed)
//!     else any Difference      ─▶ ServedWithDifferences (each listed)
//!     else                     ─▶ Served (Notices, ingress-nginx's own traps, are listed)
//!  ─▶ Report { ingresses, other (ConfigMap, Services, Secrets…) } ─▶ Markdown / JSON
//! ```

use std::collections::{BTreeMap, BTreeSet};

use model::{Compiled, Diagnostic, Kind, NamespacedName, ObjectRef, Severity};
use serde::Serialize;

/// What Sluice does with one Ingress, compared with ingress-nginx.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Served as ingress-nginx would.
    Served,
    /// Served, with documented differences.
    ServedWithDifferences,
    /// Something in it is invalid, refused or not implemented.
    NotServedAsWritten,
}

/// One Ingress and why it got its verdict.
#[derive(Clone, Debug, Serialize)]
pub struct IngressVerdict {
    pub ingress: String,
    pub verdict: Verdict,
    pub diagnostics: Vec<Finding>,
}

/// One diagnostic, as the report shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub reason: String,
}

/// Every Ingress Sluice would serve, and the diagnostics about other objects.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub ingresses: Vec<IngressVerdict>,
    /// Diagnostics about the ConfigMap, Services, Secrets…: `Kind ns/name: reason`.
    pub other: Vec<String>,
    /// Ingresses not judged: they name another class, or none (`class: null`).
    pub skipped: Vec<SkippedIngress>,
}

/// An Ingress of the objects read that the judged class does not cover.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedIngress {
    pub ingress: String,
    pub class: Option<String>,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Served => "served as ingress-nginx would",
            Verdict::ServedWithDifferences => "served with differences",
            Verdict::NotServedAsWritten => "not served as written",
        }
    }

    fn of(findings: &[Finding]) -> Verdict {
        let worst = |severity| findings.iter().any(|f| f.severity == severity);
        if worst(Severity::Error) || worst(Severity::Unsupported) {
            Verdict::NotServedAsWritten
        } else if worst(Severity::Difference) {
            Verdict::ServedWithDifferences
        } else {
            Verdict::Served
        }
    }
}

impl Report {
    /// The verdicts on everything `compiled` serves.
    pub fn new(compiled: &Compiled) -> Report {
        let mut by_object: BTreeMap<&ObjectRef, Vec<&Diagnostic>> = BTreeMap::new();
        for diagnostic in &compiled.diagnostics {
            by_object
                .entry(&diagnostic.object)
                .or_default()
                .push(diagnostic);
        }
        // A route refused for a reason set elsewhere (the ConfigMap's global-auth-url or
        // access list, another Ingress's auth-tls-secret on the host) leaves no diagnostic on
        // its own Ingress: the compiled routes say it.
        let mut refused: BTreeMap<&NamespacedName, BTreeSet<&str>> = BTreeMap::new();
        let routes = compiled.routes.hosts();
        let paths = routes.iter().flat_map(|(_, host)| &host.paths);
        let all = paths
            .map(|path| &path.route)
            .chain(routes.iter().filter_map(|(_, host)| host.root.as_ref()))
            .chain(compiled.routes.default_backend());
        for route in all {
            if let Some(why) = &route.policy.denied {
                refused.entry(&route.ingress).or_default().insert(why);
            }
        }
        let ingresses = compiled
            .ingresses
            .iter()
            .map(|name| {
                let object = ObjectRef::new(Kind::Ingress, &*name.namespace, &*name.name);
                let mut findings: Vec<Finding> = by_object
                    .remove(&object)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|d| Finding {
                        severity: d.severity,
                        reason: d.reason.clone(),
                    })
                    .collect();
                let explained = findings.iter().any(|f| f.severity == Severity::Error);
                if let Some(why) = refused
                    .get(name)
                    .and_then(|w| w.first())
                    .filter(|_| !explained)
                {
                    findings.push(Finding {
                        severity: Severity::Error,
                        reason: format!("routes answer 503: {why}"),
                    });
                }
                IngressVerdict {
                    ingress: name.to_string(),
                    verdict: Verdict::of(&findings),
                    diagnostics: findings,
                }
            })
            .collect();
        let other = by_object
            .into_values()
            .flatten()
            .map(ToString::to_string)
            .collect();
        Report {
            ingresses,
            other,
            skipped: Vec::new(),
        }
    }

    /// Whether some Ingress is not served as written (`sluice migrate` exits 1).
    pub fn any_not_served(&self) -> bool {
        self.ingresses
            .iter()
            .any(|i| i.verdict == Verdict::NotServedAsWritten)
    }

    /// How many Ingresses got `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.ingresses
            .iter()
            .filter(|i| i.verdict == verdict)
            .count()
    }

    /// A Markdown summary and table, one row per Ingress.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "{} Ingresses: {} served as ingress-nginx would, {} served with differences, {} not served as written.\n\n",
            self.ingresses.len(),
            self.count(Verdict::Served),
            self.count(Verdict::ServedWithDifferences),
            self.count(Verdict::NotServedAsWritten),
        ));
        out.push_str(&self.skipped_summary());
        out.push_str("| Ingress | verdict | diagnostics |\n|---|---|---|\n");
        for ingress in &self.ingresses {
            let details: Vec<String> = ingress
                .diagnostics
                .iter()
                .map(|f| format!("{}: {}", f.severity.as_str(), cell(&f.reason)))
                .collect();
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                ingress.ingress,
                ingress.verdict.as_str(),
                details.join("<br>")
            ));
        }
        if !self.other.is_empty() {
            out.push_str("\nOther objects:\n\n");
            for line in &self.other {
                out.push_str(&format!("- {}\n", cell(line)));
            }
        }
        out
    }
}

impl Report {
    /// Nothing was judged although Ingresses were read: every one names another class (or
    /// none), so the options do not describe this cluster (`sluice migrate` exits 1).
    pub fn judged_nothing(&self) -> bool {
        self.ingresses.is_empty() && !self.skipped.is_empty()
    }

    /// How many Ingresses were not judged and why, with the option that would judge them.
    fn skipped_summary(&self) -> String {
        if self.skipped.is_empty() {
            return String::new();
        }
        let mut by_class: BTreeMap<Option<&str>, usize> = BTreeMap::new();
        for skipped in &self.skipped {
            *by_class.entry(skipped.class.as_deref()).or_default() += 1;
        }
        let mut out = format!(
            "{} Ingresses not judged: they are not of the judged class.\n\n",
            self.skipped.len()
        );
        for (class, n) in by_class {
            out.push_str(&match class {
                None => format!("- {n} name no class: `--watch-ingress-without-class` judges them (ingress-nginx serves them only with that flag, or with a default IngressClass)\n"),
                Some(class) => format!("- {n} of class `{}`: `--ingress-class {}` judges them (and `--controller-class` set to that IngressClass's spec.controller, if it is not k8s.io/ingress-nginx)\n", cell(class), cell(class)),
            });
        }
        out.push('\n');
        out
    }
}

/// Text safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use translate::{compile, parse_documents, CompileOptions, Store};

    use super::*;

    /// A route refused for a reason set outside its Ingress (the ConfigMap's global-auth-url,
    /// another Ingress's auth-tls-secret on its host) is "not served as written" too.
    #[test]
    fn ingresses_refused_from_elsewhere_are_not_served_as_written() {
        let text = "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: sluice}
spec: {controller: sluice.dev/ingress-controller}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: sluice, namespace: sluice}
data: {global-auth-url: 'http://missing.nowhere.svc/check'}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: covered, namespace: shop}
spec:
  ingressClassName: sluice
  rules: [{host: a.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: opted-out
  namespace: shop
  annotations: {nginx.ingress.kubernetes.io/enable-global-auth: 'false'}
spec:
  ingressClassName: sluice
  rules: [{host: b.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
";
        let mut store = Store::default();
        store.replace_all(parse_documents("t.yaml", text).unwrap().objects);
        let report = Report::new(&compile(&store, &CompileOptions::default()));
        let verdict = |name: &str| {
            let found = report.ingresses.iter().find(|i| i.ingress == name);
            found.map(|i| {
                (
                    i.verdict,
                    i.diagnostics
                        .iter()
                        .map(|d| d.reason.as_str())
                        .collect::<Vec<_>>(),
                )
            })
        };
        assert_eq!(
            verdict("shop/covered"),
            Some((
                Verdict::NotServedAsWritten,
                vec!["routes answer 503: data.global-auth-url cannot be used"]
            )),
            "{report:?}"
        );
        assert_eq!(verdict("shop/opted-out"), Some((Verdict::Served, vec![])));
    }
}
