//! Gateway API status writes, the leader's: what the compile decided ([`GatewayStatuses`])
//! merged into each object's current status and patched into its status subresource.
//!
//! ```text
//!  Published.gateway ──▶ desired status (no times) ──changed since last written?──▶ GET object
//!     ──▶ lastTransitionTime kept where a condition's status did not change, other controllers'
//!         route parents kept ──▶ merge patch of status (with resourceVersion) unless equal
//! ```
//! What was last written is remembered per object, so a pass costs nothing for objects whose
//! decisions did not change; a new leader starts with an empty memory and reads every object
//! once. The resourceVersion in the patch makes a concurrent write (another controller's parent
//! entry) a conflict, retried at the next pass, instead of a lost update.

use std::collections::BTreeMap;
use std::net::IpAddr;

use futures_util::StreamExt;
use k8s_openapi::api::networking::v1::IngressLoadBalancerIngress;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::{Api, Client};
use model::gateway_status::GatewayStatuses;
use model::{Kind, NamespacedName};
use serde_json::{json, Value};

use super::gateway::{ApiObject, GatewayClasses, Gateways, HttpRoutes};

/// Objects read and written at once during a pass (as many as Ingress status writes).
const WRITES_IN_FLIGHT: usize = 8;

/// What this replica wrote last, per object, while leading.
#[derive(Debug, Default)]
pub(super) struct GatewayWrites {
    written: BTreeMap<(Kind, NamespacedName), Value>,
}

impl GatewayWrites {
    /// A new term as leader: read and compare every object again.
    pub(super) fn forget(&mut self) {
        self.written.clear();
    }

    /// Writes every status that differs from what was written last. `addresses`: the Gateway
    /// addresses (Ingress status's, `None` when neither publish flag is given). True when
    /// everything was written; `leads` is asked before each write.
    pub(super) async fn reconcile(
        &mut self,
        client: &Client,
        field_manager: &str,
        statuses: &GatewayStatuses,
        addresses: Option<&[IngressLoadBalancerIngress]>,
        leads: impl Fn() -> bool,
    ) -> bool {
        let mut wanted = desired(statuses, addresses);
        // A route Sluice wrote parents into and no longer serves (it names another Gateway
        // now): its entries go, the other controllers' stay.
        for key in self.written.keys() {
            if key.0 == Kind::HTTPRoute && !wanted.contains_key(key) {
                wanted.insert(key.clone(), json!({"parents": []}));
            }
        }
        self.written.retain(|key, _| wanted.contains_key(key));
        wanted.retain(|key, want| self.written.get(key) != Some(want));
        // A few at a time, as Ingress status: a new leader may have thousands to read and write.
        let leads = &leads;
        let mut results = futures_util::stream::iter(wanted)
            .map(|((kind, key), want)| async move {
                if !leads() {
                    // Lost the Lease mid-pass: the new leader takes it from here.
                    return ((kind, key), Outcome::Failed);
                }
                let outcome = match write(client, field_manager, kind, &key, &want).await {
                    Ok(()) => Outcome::Written(want),
                    // Deleted meanwhile: nothing to write, nothing to remember.
                    Err(kube::Error::Api(status)) if status.code == 404 => Outcome::Gone,
                    Err(error) => {
                        tracing::warn!(%kind, object = %key, "writing Gateway API status failed: {error}");
                        Outcome::Failed
                    }
                };
                ((kind, key), outcome)
            })
            .buffer_unordered(WRITES_IN_FLIGHT);
        let mut complete = true;
        while let Some((key, outcome)) = results.next().await {
            match outcome {
                Outcome::Written(want) => {
                    self.written.insert(key, want);
                }
                Outcome::Gone => {
                    self.written.remove(&key);
                }
                Outcome::Failed => complete = false,
            }
        }
        complete
    }
}

enum Outcome {
    Written(Value),
    Gone,
    Failed,
}

/// Each object's status as the compile decided it, without transition times.
fn desired(
    statuses: &GatewayStatuses,
    addresses: Option<&[IngressLoadBalancerIngress]>,
) -> BTreeMap<(Kind, NamespacedName), Value> {
    let mut wanted = BTreeMap::new();
    for (name, status) in &statuses.classes {
        let key = NamespacedName::new("", name.as_str());
        wanted.insert((Kind::GatewayClass, key), to_json(status));
    }
    for (key, status) in &statuses.gateways {
        let own = !status.addresses.is_empty();
        let mut status = to_json(status);
        // A Gateway with an address of its own (--gateway-address-pool) keeps it.
        if let (false, Some(addresses)) = (own, addresses) {
            status["addresses"] = addresses.iter().filter_map(gateway_address).collect();
        }
        wanted.insert((Kind::Gateway, key.clone()), status);
    }
    for (key, status) in &statuses.http_routes {
        wanted.insert((Kind::HTTPRoute, key.clone()), to_json(status));
    }
    wanted
}

fn to_json(status: &impl serde::Serialize) -> Value {
    serde_json::to_value(status).unwrap_or_default()
}

/// A Gateway's `status.addresses` entry for one of the addresses Ingress status gets.
fn gateway_address(address: &IngressLoadBalancerIngress) -> Option<Value> {
    if let Some(ip) = address.ip.as_deref() {
        return Some(json!({"type": "IPAddress", "value": ip}));
    }
    let name = address.hostname.as_deref()?;
    Some(match name.parse::<IpAddr>() {
        Ok(_) => json!({"type": "IPAddress", "value": name}),
        Err(_) => json!({"type": "Hostname", "value": name}),
    })
}

/// Reads the object, merges `want` into its status and patches it when that differs.
async fn write(
    client: &Client,
    field_manager: &str,
    kind: Kind,
    key: &NamespacedName,
    want: &Value,
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = match kind {
        Kind::GatewayClass => Api::all_with(
            client.clone(),
            &ApiResource::erase::<ApiObject<GatewayClasses>>(&()),
        ),
        Kind::Gateway => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<Gateways>>(&()),
        ),
        _ => Api::namespaced_with(
            client.clone(),
            &key.namespace,
            &ApiResource::erase::<ApiObject<HttpRoutes>>(&()),
        ),
    };
    let current = api.get(&key.name).await?;
    let now = Timestamp::now().to_string();
    let current_status = current.data.get("status").cloned().unwrap_or(Value::Null);
    let status = merged(kind, want, &current_status, &now);
    if status == current_status {
        return Ok(());
    }
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "status": status,
    });
    let params = PatchParams {
        field_manager: Some(field_manager.to_owned()),
        ..PatchParams::default()
    };
    api.patch_status(&key.name, &params, &Patch::Merge(&patch))
        .await?;
    tracing::debug!(%kind, object = %key, "Gateway API status written");
    Ok(())
}

/// `want` with transition times (kept from `current` where a condition's status is the same)
/// and, for a route, the other controllers' parent entries from `current` in front of ours.
fn merged(kind: Kind, want: &Value, current: &Value, now: &str) -> Value {
    let mut status = want.clone();
    stamp(&mut status["conditions"], &current["conditions"], now);
    if let Some(listeners) = status.get_mut("listeners").and_then(Value::as_array_mut) {
        for listener in listeners {
            let before = same_named(&current["listeners"], &listener["name"]);
            stamp(&mut listener["conditions"], &before["conditions"], now);
        }
    }
    if kind == Kind::HTTPRoute {
        let ours = status["parents"].as_array().cloned().unwrap_or_default();
        let controller = translate::gateway::GATEWAY_CONTROLLER;
        let mut parents: Vec<Value> = current["parents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["controllerName"] != controller)
            .cloned()
            .collect();
        for mut parent in ours {
            let before = current["parents"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| {
                    p["controllerName"] == controller && p["parentRef"] == parent["parentRef"]
                })
                .cloned()
                .unwrap_or(Value::Null);
            stamp(&mut parent["conditions"], &before["conditions"], now);
            parents.push(parent);
        }
        status["parents"] = Value::Array(parents);
    }
    status
}

/// Sets each condition's `lastTransitionTime`: the current one's when the status is the same.
fn stamp(conditions: &mut Value, current: &Value, now: &str) {
    let Some(conditions) = conditions.as_array_mut() else {
        return;
    };
    for condition in conditions {
        let before = current
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == condition["type"]);
        let time = match before {
            Some(before) if before["status"] == condition["status"] => {
                before["lastTransitionTime"].clone()
            }
            _ => Value::String(now.to_owned()),
        };
        condition["lastTransitionTime"] = time;
    }
}

fn same_named<'a>(list: &'a Value, name: &Value) -> &'a Value {
    static NULL: Value = Value::Null;
    list.as_array()
        .into_iter()
        .flatten()
        .find(|item| item["name"] == *name)
        .unwrap_or(&NULL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_times_stay_while_a_status_holds_and_other_controllers_parents_stay() {
        let want = json!({"parents": [{
            "parentRef": {"name": "edge"},
            "controllerName": "sluice.dev/gateway-controller",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "observedGeneration": 2},
                {"type": "ResolvedRefs", "status": "False", "reason": "BackendNotFound",
                 "message": "gone", "observedGeneration": 2},
            ],
        }]});
        let theirs = json!({"parentRef": {"name": "other"}, "controllerName": "example.com/x",
                            "conditions": []});
        let current = json!({"parents": [theirs.clone(), {
            "parentRef": {"name": "edge"},
            "controllerName": "sluice.dev/gateway-controller",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                 "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs",
                 "message": "", "observedGeneration": 1,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ],
        }]});
        let now = "2026-11-27T16:00:00Z";
        let status = merged(Kind::HTTPRoute, &want, &current, now);
        assert_eq!(status["parents"][0], theirs);
        let ours = &status["parents"][1]["conditions"];
        assert_eq!(ours[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(ours[0]["observedGeneration"], 2);
        assert_eq!(ours[1]["lastTransitionTime"], now);
        // Written again unchanged: the same status, so no write.
        let again = merged(Kind::HTTPRoute, &want, &status, "2026-11-27T17:00:00Z");
        assert_eq!(again, status);
    }

    #[test]
    fn gateway_addresses_say_whether_they_are_ips_or_names() {
        let ip = IngressLoadBalancerIngress {
            ip: Some("198.18.0.200".into()),
            ..Default::default()
        };
        let name = IngressLoadBalancerIngress {
            hostname: Some("lb.example.com".into()),
            ..Default::default()
        };
        assert_eq!(
            gateway_address(&ip),
            Some(json!({"type": "IPAddress", "value": "198.18.0.200"}))
        );
        assert_eq!(
            gateway_address(&name),
            Some(json!({"type": "Hostname", "value": "lb.example.com"}))
        );
    }
}
