//! Which namespaces' routes a listener admits: `allowedRoutes.namespaces.from` Same, All, or
//! Selector — a label selector over the labels of the route's Namespace.
//!
//! ```text
//!  allowedRoutes.namespaces { from, selector { matchLabels, matchExpressions } } ─▶ AllowedFrom
//!  route's namespace ─▶ Store's Namespace labels (or only kubernetes.io/metadata.name) ─▶ admits?
//! ```
//! The labels come in as data (the Store's Namespaces: watched in Kubernetes mode, described in
//! a file standalone); a namespace the Store does not have carries the one label the API
//! server sets on every Namespace, `kubernetes.io/metadata.name: <name>`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub use crate::objects::NAMESPACE_NAME_LABEL;
use crate::store::Store;

/// Which namespaces' routes a listener admits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum AllowedFrom {
    Same,
    All,
    Selector(Box<NamespaceSelector>),
    Nobody,
}

/// A validated label selector: every `matchLabels` pair and every expression must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct NamespaceSelector {
    labels: BTreeMap<String, String>,
    expressions: Vec<Expression>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Expression {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl AllowedFrom {
    /// Whether a route in `route_namespace` may attach to a listener of a Gateway in
    /// `gateway_namespace`.
    pub(super) fn admits(
        &self,
        store: &Store,
        gateway_namespace: &str,
        route_namespace: &str,
    ) -> bool {
        match self {
            AllowedFrom::Same => gateway_namespace == route_namespace,
            AllowedFrom::All => true,
            AllowedFrom::Selector(selector) => selector.matches(&labels_of(store, route_namespace)),
            AllowedFrom::Nobody => false,
        }
    }
}

/// A namespace's labels: the Store's Namespace, else the label every Namespace has.
fn labels_of<'a>(store: &'a Store, namespace: &str) -> Cow<'a, BTreeMap<String, String>> {
    match store.namespace_labels(namespace) {
        Some(labels) => Cow::Borrowed(labels),
        None => Cow::Owned(BTreeMap::from([(
            NAMESPACE_NAME_LABEL.to_owned(),
            namespace.to_owned(),
        )])),
    }
}

impl NamespaceSelector {
    /// Validates a selector as the API server does for its own: `In`/`NotIn` need values,
    /// `Exists`/`DoesNotExist` take none. `Err` names the field and the problem.
    pub(super) fn parse(selector: &LabelSelector) -> Result<NamespaceSelector, String> {
        let mut expressions = Vec::new();
        for (e, requirement) in selector.match_expressions.iter().flatten().enumerate() {
            let at = format!("selector.matchExpressions[{e}]");
            let operator = match requirement.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(format!(
                        "{at}.operator {other:?}: must be In, NotIn, Exists or DoesNotExist"
                    ))
                }
            };
            let values = requirement.values.clone().unwrap_or_default();
            let needs_values = matches!(operator, Operator::In | Operator::NotIn);
            if needs_values == values.is_empty() {
                let why = if needs_values {
                    "needs values"
                } else {
                    "takes no values"
                };
                return Err(format!("{at}: {} {why}", requirement.operator));
            }
            expressions.push(Expression {
                key: requirement.key.clone(),
                operator,
                values,
            });
        }
        Ok(NamespaceSelector {
            labels: selector.match_labels.clone().unwrap_or_default(),
            expressions,
        })
    }

    /// An empty selector selects every namespace (Kubernetes' rule for label selectors).
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
            && self.expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator {
                    Operator::In => value.is_some_and(|v| e.values.contains(v)),
                    Operator::NotIn => value.is_none_or(|v| !e.values.contains(v)),
                    Operator::Exists => value.is_some(),
                    Operator::DoesNotExist => value.is_none(),
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn labels_and_expressions_must_all_hold_and_an_empty_selector_selects_all() {
        let selector = NamespaceSelector::parse(&LabelSelector {
            match_labels: Some(labels(&[("team", "web")])),
            match_expressions: Some(vec![
                requirement("env", "In", &["prod", "staging"]),
                requirement("frozen", "DoesNotExist", &[]),
                requirement("tier", "NotIn", &["db"]),
                requirement("owner", "Exists", &[]),
            ]),
        })
        .unwrap();
        let good = [("team", "web"), ("env", "prod"), ("owner", "x")];
        assert!(selector.matches(&labels(&good)));
        let cases: [&[(&str, &str)]; 5] = [
            &[("team", "web"), ("env", "dev"), ("owner", "x")],
            &[("team", "api"), ("env", "prod"), ("owner", "x")],
            &[
                ("team", "web"),
                ("env", "prod"),
                ("owner", "x"),
                ("frozen", ""),
            ],
            &[
                ("team", "web"),
                ("env", "prod"),
                ("owner", "x"),
                ("tier", "db"),
            ],
            &[("team", "web"), ("env", "prod")],
        ];
        for case in cases {
            assert!(!selector.matches(&labels(case)), "{case:?}");
        }
        let all = NamespaceSelector::parse(&LabelSelector::default()).unwrap();
        assert!(all.matches(&labels(&[])));
    }

    #[test]
    fn malformed_expressions_are_refused_naming_the_field() {
        let refused = |r| {
            NamespaceSelector::parse(&LabelSelector {
                match_expressions: Some(vec![r]),
                ..LabelSelector::default()
            })
            .unwrap_err()
        };
        assert_eq!(
            refused(requirement("a", "In", &[])),
            "selector.matchExpressions[0]: In needs values"
        );
        assert_eq!(
            refused(requirement("a", "Exists", &["x"])),
            "selector.matchExpressions[0]: Exists takes no values"
        );
        assert!(refused(requirement("a", "Gt", &["1"])).contains("operator \"Gt\""));
    }

    #[test]
    fn a_namespace_the_store_does_not_have_carries_its_name_label() {
        let store = Store::default();
        let selector = AllowedFrom::Selector(Box::new(NamespaceSelector {
            labels: labels(&[(NAMESPACE_NAME_LABEL, "infra")]),
            expressions: Vec::new(),
        }));
        assert!(selector.admits(&store, "gw", "infra"));
        assert!(!selector.admits(&store, "gw", "other"));
        assert!(AllowedFrom::Same.admits(&store, "gw", "gw"));
        assert!(!AllowedFrom::Nobody.admits(&store, "gw", "gw"));
    }
}
