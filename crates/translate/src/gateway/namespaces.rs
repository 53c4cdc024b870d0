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
pub struct NamespaceSelector {
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

/// `text` cut at the commas outside parentheses.
fn split_requirements(text: &str) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0u32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or(format!("{text:?}: unbalanced )"))?
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("{text:?}: unbalanced ("));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

/// `key <operator> (…)`: the key and what follows the operator.
fn set_operator<'t>(requirement: &'t str, operator: &str) -> Option<(&'t str, &'t str)> {
    let (key, rest) = requirement.split_once(operator)?;
    Some((key.trim(), rest.trim()))
}

/// `(a, b)`: its values.
fn set_values(text: &str) -> Result<Vec<String>, String> {
    let inner = (text.strip_prefix('('))
        .and_then(|t| t.strip_suffix(')'))
        .ok_or(format!(
            "{text:?}: expected values in parentheses, like (a, b)"
        ))?;
    let values: Vec<String> = (inner.split(','))
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        return Err(format!("{text:?}: no values"));
    }
    Ok(values)
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

    /// A selector as `kubectl -l` and ingress-nginx's `--watch-namespace-selector` write
    /// it: comma-separated requirements `key=value` (or `==`), `key!=value`, `key in (a,b)`,
    /// `key notin (a,b)`, `key` (exists), `!key` (does not exist). `Err` says what is wrong.
    pub fn parse_text(text: &str) -> Result<NamespaceSelector, String> {
        let mut selector = NamespaceSelector::default();
        for requirement in split_requirements(text)? {
            let requirement = requirement.trim();
            if requirement.is_empty() {
                continue;
            }
            let (key, operator, values) = if let Some(key) = requirement.strip_prefix('!') {
                (key.trim(), Operator::DoesNotExist, Vec::new())
            } else if let Some((key, value)) = requirement.split_once("!=") {
                (key.trim(), Operator::NotIn, vec![value.trim().to_owned()])
            } else if let Some((key, value)) = requirement
                .split_once("==")
                .or_else(|| requirement.split_once('='))
            {
                (key.trim(), Operator::In, vec![value.trim().to_owned()])
            } else if let Some((key, rest)) = set_operator(requirement, " notin ") {
                (key, Operator::NotIn, set_values(rest)?)
            } else if let Some((key, rest)) = set_operator(requirement, " in ") {
                (key, Operator::In, set_values(rest)?)
            } else {
                (requirement, Operator::Exists, Vec::new())
            };
            let label = |b: u8| b.is_ascii_alphanumeric() || b"-_./".contains(&b);
            if key.is_empty() || !key.bytes().all(label) {
                return Err(format!("{requirement:?}: {key:?} is not a label key"));
            }
            if values.iter().any(|v| !v.bytes().all(label)) {
                return Err(format!("{requirement:?}: a value is not a label value"));
            }
            selector.expressions.push(Expression {
                key: key.to_owned(),
                operator,
                values,
            });
        }
        Ok(selector)
    }

    /// Whether it selects `namespace` (its labels in the Store, else the one every Namespace
    /// has).
    pub fn selects(&self, store: &Store, namespace: &str) -> bool {
        self.matches(&labels_of(store, namespace))
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

    #[test]
    fn a_selector_reads_as_kubectl_writes_it() {
        let selector = NamespaceSelector::parse_text(
            "team=web, env in (prod, staging),tier!=db,owner,!frozen",
        )
        .unwrap();
        assert!(selector.matches(&labels(&[("team", "web"), ("env", "prod"), ("owner", "x")])));
        let misses: [&[(&str, &str)]; 4] = [
            &[("team", "api"), ("env", "prod"), ("owner", "x")],
            &[("team", "web"), ("env", "dev"), ("owner", "x")],
            &[
                ("team", "web"),
                ("env", "prod"),
                ("owner", "x"),
                ("tier", "db"),
            ],
            &[
                ("team", "web"),
                ("env", "prod"),
                ("owner", "x"),
                ("frozen", ""),
            ],
        ];
        for labels_ in misses {
            assert!(!selector.matches(&labels(labels_)), "{labels_:?}");
        }
        let double = NamespaceSelector::parse_text("team==web,env notin (dev)").unwrap();
        assert!(double.matches(&labels(&[("team", "web")])));
        assert!(!double.matches(&labels(&[("team", "web"), ("env", "dev")])));
        assert_eq!(
            NamespaceSelector::parse_text("").unwrap(),
            NamespaceSelector::default()
        );
        for bad in ["env in prod", "env in (", "env in ()", "a b=c", "team=we b"] {
            assert!(NamespaceSelector::parse_text(bad).is_err(), "{bad}");
        }
    }
}
