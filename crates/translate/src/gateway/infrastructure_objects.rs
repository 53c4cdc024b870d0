//! A Gateway's infrastructure as data and pure decisions (`infrastructure` puts them into the
//! compile): the labels GEP-1762 names, the rules for `spec.infrastructure`'s label and
//! annotation keys, the generated Service's name, and `parametersRef`, which Sluice has none of.
//!
//! ```text
//!  GatewayClass spec.parametersRef ─▶ class_parameters ─▶ Accepted=False InvalidParameters
//!  Gateway spec.infrastructure.parametersRef (or its class's) ─▶ gateway_parameters
//!      ─▶ refuse_for_parameters: Accepted=False InvalidParameters, Programmed=False Invalid
//!  <gateway>-<class> ─▶ service_name (a Service name: as it is, else made one, with a hash)
//!  infrastructure.labels / annotations ─▶ key_problem, label_value_problem (or kept)
//! ```

use model::gateway_status::Condition;
use model::NamespacedName;

use super::objects::{Gateway, GatewayClass, ObjectReference};

/// The label every generated object carries: its Gateway's name (GEP-1762, a MUST).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// The label naming the Gateway's class (GEP-1762, a SHOULD).
pub const GATEWAY_CLASS_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";

/// Keys of Gateway API's own (GEP-1762 reserves the prefix for `gateway-name` and what may
/// follow): not for `spec.infrastructure` to set.
const GATEWAY_API_PREFIX: &str = "gateway.networking.k8s.io/";

/// Labels Kubernetes reads on the generated EndpointSlices (which Service they belong to, who
/// manages them): a Gateway's labels may not change them.
const KUBERNETES_KEYS: [&str; 2] = [
    "kubernetes.io/service-name",
    "endpointslice.kubernetes.io/managed-by",
];

/// The longest Service name, label value and label name segment Kubernetes takes.
pub(super) const MAX_NAME: usize = 63;

/// The longest prefix (a DNS subdomain) of a label or annotation key.
const MAX_KEY_PREFIX: usize = 253;

/// Why a GatewayClass is refused: its `parametersRef` (Sluice takes none), if it has one.
pub(super) fn class_parameters(class: &GatewayClass) -> Option<String> {
    let reference = class.spec.parameters_ref.as_ref()?;
    Some(format!(
        "spec.parametersRef ({}): Sluice takes no parameters; remove it (InvalidParameters)",
        shown(reference)
    ))
}

/// Why a Gateway is refused for `parametersRef`: its own, or its class's.
pub(super) fn gateway_parameters(gateway: &Gateway, class_refused: bool) -> Option<String> {
    let own = (gateway.spec.infrastructure.as_ref()).and_then(|i| i.parameters_ref.as_ref());
    match own {
        Some(reference) => Some(format!(
            "spec.infrastructure.parametersRef ({}): Sluice takes no parameters; the Gateway is not served until it is removed (InvalidParameters)",
            shown(reference)
        )),
        None => class_refused.then(|| {
            format!(
                "its GatewayClass {} has a spec.parametersRef, which Sluice does not take: the class is not accepted and the Gateway is not served (InvalidParameters)",
                gateway.spec.gateway_class_name
            )
        }),
    }
}

/// A Gateway refused for a `parametersRef`: `Accepted` False with the spec's reason,
/// `Programmed` False `Invalid` (it is not served), in place of what its listeners made.
pub(super) fn refuse_for_parameters(conditions: &mut [Condition], why: &str, generation: i64) {
    for condition in conditions {
        let reason = match condition.type_ {
            "Accepted" => "InvalidParameters",
            "Programmed" => "Invalid",
            _ => continue,
        };
        *condition = Condition::new(condition.type_, false, reason, why, generation);
    }
}

fn shown(reference: &ObjectReference) -> String {
    let group = reference.group.as_deref().unwrap_or_default();
    let kind = reference.kind.as_deref().unwrap_or_default();
    let namespace = (reference.namespace.as_deref()).map_or(String::new(), |ns| format!("{ns}/"));
    format!("{group}/{kind} {namespace}{}", reference.name)
}

/// GEP-1762's `<gateway>-<class>` when that is a Service name (a DNS-1035 label: at most 63
/// lower-case letters, digits and `-`, starting with a letter, not ending with `-`); else that
/// text made into one (other characters as `-`, cut to fit) and a hash of the Gateway's and
/// class's names, so that two Gateways' names never meet.
pub(super) fn service_name(key: &NamespacedName, class: &str) -> String {
    let natural = format!("{}-{class}", key.name);
    if is_dns_1035_label(&natural) {
        return natural;
    }
    let mut base: String = natural
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            _ => '-',
        })
        .collect();
    if !base.starts_with(|c: char| c.is_ascii_lowercase()) {
        base.insert_str(0, "gw-");
    }
    let hash = stable_hash(&format!("{}/{class}", key.name));
    // Room for `-` and eight hex digits.
    base.truncate(MAX_NAME - 9);
    format!("{}-{hash:08x}", base.trim_end_matches('-'))
}

fn is_dns_1035_label(name: &str) -> bool {
    name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && (name.bytes()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Why `key` cannot be a label or annotation key on the generated objects, if it cannot:
/// Kubernetes' rule for keys (an optional DNS subdomain prefix and `/`, then a name of up to
/// 63 characters), and the keys Gateway API and Kubernetes keep for themselves.
pub(super) fn key_problem(key: &str) -> Option<&'static str> {
    if key.starts_with(GATEWAY_API_PREFIX) {
        return Some("keys under gateway.networking.k8s.io/ are Gateway API's own (GEP-1762)");
    }
    if KUBERNETES_KEYS.contains(&key) {
        return Some("Kubernetes reads this key on the generated EndpointSlices");
    }
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= MAX_KEY_PREFIX
            && p.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && (label.bytes())
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    });
    let name_ok = !name.is_empty() && name.len() <= MAX_NAME && is_label_text(name);
    (!(prefix_ok && name_ok)).then_some(
        "not a Kubernetes key (an optional DNS subdomain and `/`, then up to 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)",
    )
}

/// Why `value` cannot be a label value, if it cannot (empty, or up to 63 characters as a
/// key's name).
pub(super) fn label_value_problem(value: &str) -> Option<&'static str> {
    let ok = value.is_empty() || (value.len() <= MAX_NAME && is_label_text(value));
    (!ok).then_some("its value is not a label value (up to 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)")
}

fn is_label_text(text: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    text.starts_with(alphanumeric)
        && text.ends_with(alphanumeric)
        && (text.bytes()).all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// FNV-1a of `text`: a name derived from it (a generated Service's, a session cookie's) is the
/// same on every replica and release.
pub(super) fn stable_hash(text: &str) -> u32 {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    hash as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_is_named_gateway_dash_class_or_made_a_service_name() {
        let key = |name: &str| NamespacedName::new("app", name);
        assert_eq!(service_name(&key("edge"), "sluice"), "edge-sluice");
        // A dot, a leading digit, too long: each a name of its own, with a hash.
        let dotted = service_name(&key("edge.v2"), "sluice");
        assert!(dotted.starts_with("edge-v2-sluice-"), "{dotted}");
        assert_ne!(dotted, service_name(&key("edge-v2"), "sluice.x"));
        assert!(service_name(&key("9lives"), "sluice").starts_with("gw-9lives-sluice-"));
        let long = service_name(&key(&"a".repeat(63)), "sluice");
        assert_eq!(long.len(), 63, "{long}");
        assert!(is_dns_1035_label(&long));
        assert_ne!(long, service_name(&key(&"a".repeat(62)), "sluice"));
    }

    #[test]
    fn keys_and_values_follow_kubernetes_rules_and_reserved_keys_are_refused() {
        for good in ["key2", "example.com/team", "a_b.c-d", "x/Y9"] {
            assert_eq!(key_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Example.com/x",
            "a/b/c",
            "example.com/",
            &"k".repeat(64),
        ] {
            assert!(key_problem(bad).is_some(), "{bad:?}");
        }
        assert!(key_problem("gateway.networking.k8s.io/gateway-name")
            .unwrap()
            .contains("Gateway API"));
        assert!(key_problem("kubernetes.io/service-name").is_some());
        assert_eq!(label_value_problem(""), None);
        assert_eq!(label_value_problem("value2"), None);
        assert!(label_value_problem("has space").is_some());
        assert!(label_value_problem(&"v".repeat(64)).is_some());
    }
}
