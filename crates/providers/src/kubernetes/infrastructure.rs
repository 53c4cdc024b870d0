//! Generated infrastructure, the leader's: the Service and EndpointSlices the compile decided
//! for each served Gateway ([`GatewayStatuses::infrastructure`]) applied into the Gateway's
//! namespace, and deleted once nothing wants them.
//!
//! ```text
//!  Published.gateway.infrastructure ─▶ apply configurations: Service <gateway>-<class>, and an
//!     EndpointSlice per address family (<service>-ipv4, -ipv6) of the Gateway's addresses (its
//!     own, or the shared ones resolved here), owned by the Gateway (ownerReference, for GC)
//!  changed since this term applied it? ─▶ GET ─▶ absent: apply │ Sluice's: apply unless up to date
//!                                             │ anyone else's: left alone, NameInUse (no slice
//!                                               either: it would join that Service)
//!  applied this term (or found by the term's sweep) and no longer wanted ─▶ DELETE (its uid)
//!  outcomes ─▶ each Gateway's `sluice.dev/GeneratedService` condition (gateway_status writes it)
//! ```
//! Server-side apply, one field manager for every replica: the API server remembers which
//! labels and annotations Sluice set, so one removed from `spec.infrastructure` goes at the next
//! apply, while labels and annotations others set stay. A failed write is logged and tried
//! again at the next pass; nothing here touches traffic.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::core::ApiResource;
use kube::{Api, Client};
use model::gateway_status::{
    Condition, GatewayService, GatewayStatuses, Generated, ServiceAddresses,
};
use model::{Kind, NamespacedName};
use serde_json::{json, Value};
use translate::gateway::GATEWAY_NAME_LABEL;

/// The field manager of every apply, the same on every replica: what one leader set, the next
/// may take away.
const FIELD_MANAGER: &str = "sluice-gateway-infrastructure";

/// `endpointslice.kubernetes.io/managed-by` on the generated EndpointSlices (a label value: no
/// `/`), so that Kubernetes' own EndpointSlice controllers leave them alone.
pub(super) const SLICES_MANAGED_BY: &str = "gateway-controller.sluice.dev";

/// The Gateway condition saying what became of its generated Service (a type of Sluice's own,
/// prefixed as the spec asks of implementation-specific types).
pub(super) const CONDITION: &str = "sluice.dev/GeneratedService";

/// Gateways whose objects are read and written at once during a pass.
const GATEWAYS_IN_FLIGHT: usize = 4;

/// A generated object's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Made {
    Service,
    EndpointSlice,
}

type Target = (Made, NamespacedName);

/// What this replica applied while leading, and what it found.
#[derive(Debug, Default)]
pub(super) struct InfrastructureWrites {
    /// Each object applied (or found up to date) this term, with its apply configuration;
    /// `Null`: Sluice's, found by the sweep, not applied this term.
    applied: BTreeMap<Target, Value>,
    /// This term listed the objects Sluice generated before it (another replica's, or this
    /// one's in an earlier term), for the ones nothing wants any more.
    swept: bool,
    /// Per Gateway, what the last pass that got an answer found.
    outcomes: BTreeMap<NamespacedName, Outcome>,
    /// Per Gateway, its generated Service's ClusterIPs (`spec.clusterIPs`) as last read or
    /// written: the addresses `routability: Cluster` reports.
    cluster_ips: BTreeMap<NamespacedName, Vec<IpAddr>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Sluice's Service (and slices) are there as wanted, with this many endpoints.
    Generated { endpoints: usize },
    /// The Service or a slice is someone else's: why.
    NameInUse(String),
}

/// One Gateway's objects: its Service first (a slice is written only once the Service is
/// Sluice's), then its EndpointSlices.
#[derive(Debug)]
struct GatewayObjects {
    gateway: NamespacedName,
    objects: Vec<(Target, Value)>,
    endpoints: usize,
}

/// How one object's write went.
enum Written {
    /// Applied, or already as wanted: remember it (a Service's ClusterIPs as the API server
    /// has them).
    Done(Option<Vec<IpAddr>>),
    /// Another's object under that name: why.
    Taken(String),
    Failed,
}

impl InfrastructureWrites {
    /// A new term as leader: read every object again.
    pub(super) fn forget(&mut self) {
        self.applied.clear();
        self.swept = false;
    }

    /// Applies what `statuses` wants and deletes what it no longer does. `shared`: the addresses
    /// of a Gateway without one of its own (the Ingress status addresses). True when
    /// everything was written; `leads` is asked before each write.
    pub(super) async fn reconcile(
        &mut self,
        client: &Client,
        statuses: &GatewayStatuses,
        shared: &[IpAddr],
        leads: impl Fn() -> bool,
    ) -> bool {
        let wanted = desired(statuses, shared);
        let targets: BTreeSet<Target> = (wanted.iter())
            .flat_map(|g| g.objects.iter().map(|(target, _)| target.clone()))
            .collect();
        let served: BTreeSet<NamespacedName> = wanted.iter().map(|g| g.gateway.clone()).collect();
        if !self.swept {
            // Tried once a term: a namespace-scoped deployment may not list across namespaces.
            self.swept = true;
            match generated_before(client).await {
                Ok(found) => {
                    for target in found.into_iter().filter(|t| !targets.contains(t)) {
                        self.applied.entry(target).or_insert(Value::Null);
                    }
                }
                Err(error) => {
                    tracing::debug!("listing the Services Sluice generated failed: {error}");
                }
            }
        }
        let mut complete = true;
        let stale: Vec<Target> = (self.applied.keys())
            .filter(|target| !targets.contains(target))
            .cloned()
            .collect();
        for target in stale {
            if !leads() {
                return false;
            }
            match delete(client, &target).await {
                Ok(()) => {
                    self.applied.remove(&target);
                }
                Err(error) => {
                    complete = false;
                    let (made, key) = &target;
                    tracing::warn!(object = %key, "deleting the generated {made:?} failed: {error}");
                }
            }
        }
        let applied = &self.applied;
        let leads = &leads;
        let mut results = futures_util::stream::iter(wanted)
            .map(|objects| async move {
                let mut done = Vec::new();
                let mut cluster_ips = None;
                for (target, config) in &objects.objects {
                    if applied.get(target) == Some(config) {
                        continue;
                    }
                    if !leads() {
                        // Lost the Lease mid-pass: the new leader takes it from here.
                        return (objects, done, Written::Failed);
                    }
                    match apply(client, target, config, &objects.gateway).await {
                        Written::Done(ips) => {
                            done.push(target.clone());
                            cluster_ips = cluster_ips.or(ips);
                        }
                        other => return (objects, done, other),
                    }
                }
                (objects, done, Written::Done(cluster_ips))
            })
            .buffer_unordered(GATEWAYS_IN_FLIGHT);
        let mut finished = Vec::new();
        while let Some(result) = results.next().await {
            finished.push(result);
        }
        drop(results);
        for (objects, done, last) in finished {
            for target in done {
                let config = (objects.objects.iter())
                    .find(|(t, _)| *t == target)
                    .map(|(_, config)| config.clone());
                self.applied.insert(target, config.unwrap_or_default());
            }
            let outcome = match last {
                Written::Done(cluster_ips) => {
                    if let Some(ips) = cluster_ips {
                        self.cluster_ips.insert(objects.gateway.clone(), ips);
                    }
                    Outcome::Generated {
                        endpoints: objects.endpoints,
                    }
                }
                Written::Taken(why) => Outcome::NameInUse(why),
                Written::Failed => {
                    complete = false;
                    continue;
                }
            };
            // Said when it starts, not at every pass that finds it again.
            let before = (self.outcomes).insert(objects.gateway.clone(), outcome.clone());
            if let (Outcome::NameInUse(why), true) = (&outcome, before.as_ref() != Some(&outcome)) {
                tracing::warn!(gateway = %objects.gateway, "{why}");
            }
        }
        self.outcomes.retain(|gateway, _| served.contains(gateway));
        let outcomes = &self.outcomes;
        (self.cluster_ips)
            .retain(|gateway, _| matches!(outcomes.get(gateway), Some(Outcome::Generated { .. })));
        complete
    }

    /// The ClusterIPs of the Service generated for each Gateway whose Service is there as
    /// wanted.
    pub(super) fn cluster_ips(&self) -> &BTreeMap<NamespacedName, Vec<IpAddr>> {
        &self.cluster_ips
    }

    /// Each Gateway's `sluice.dev/GeneratedService` condition: what became of its Service, or
    /// why it has none (nothing for a Gateway whose first write has not been answered yet).
    pub(super) fn conditions(
        &self,
        statuses: &GatewayStatuses,
    ) -> BTreeMap<NamespacedName, Condition> {
        let mut conditions = BTreeMap::new();
        for (key, generated) in &statuses.infrastructure {
            let generation = (statuses.gateways.get(key))
                .and_then(|s| s.conditions.first())
                .map_or(0, |c| c.observed_generation);
            let condition = match (generated, self.outcomes.get(key)) {
                (Generated::Refused(why), _) => {
                    Condition::new(CONDITION, false, "NotGenerated", why.clone(), generation)
                }
                (Generated::Service(service), Some(Outcome::Generated { endpoints })) => {
                    Condition::new(
                        CONDITION,
                        true,
                        "Generated",
                        generated_message(service, *endpoints),
                        generation,
                    )
                }
                (Generated::Service(_), Some(Outcome::NameInUse(why))) => {
                    Condition::new(CONDITION, false, "NameInUse", why.clone(), generation)
                }
                (Generated::Service(_), None) => continue,
            };
            conditions.insert(key.clone(), condition);
        }
        conditions
    }
}

fn generated_message(service: &GatewayService, endpoints: usize) -> String {
    let ports: Vec<String> = (service.ports.iter())
        .map(|p| format!("{}/{}", p.port, p.protocol.name()))
        .collect();
    let reach = format!(
        "Service {} (ports {}) reaches this Gateway from inside the cluster",
        service.name,
        ports.join(", ")
    );
    match endpoints {
        0 => format!("{reach} once it has an address: it has none yet (--gateway-address-pool, --publish-service or --publish-status-address give one)"),
        _ => format!("{reach}; its endpoints are the Gateway's addresses"),
    }
}

/// The objects every Gateway in `statuses` wants, as apply configurations. A Gateway without a
/// uid (not from an API server) has nothing: it could not own them.
fn desired(statuses: &GatewayStatuses, shared: &[IpAddr]) -> Vec<GatewayObjects> {
    let mut wanted = Vec::new();
    for (key, generated) in &statuses.infrastructure {
        let Generated::Service(service) = generated else {
            continue;
        };
        let Some(uid) = statuses.uids.get(&(Kind::Gateway, key.clone())) else {
            continue;
        };
        let owner = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "name": &*key.name,
            "uid": &**uid,
            "controller": true,
            "blockOwnerDeletion": true,
        });
        let metadata = |name: &str, labels: &BTreeMap<String, String>| {
            let mut metadata = json!({
                "name": name,
                "namespace": &*key.namespace,
                "labels": labels,
                "ownerReferences": [owner.clone()],
            });
            // None at all rather than an empty map, which the API server does not keep (the
            // object would never read as up to date).
            if !service.annotations.is_empty() {
                metadata["annotations"] = json!(service.annotations);
            }
            metadata
        };
        let ports: Vec<Value> = (service.ports.iter())
            .map(|p| {
                json!({
                    "name": p.name, "port": p.port, "protocol": p.protocol.name(),
                    "targetPort": p.target,
                })
            })
            .collect();
        let service_config = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(&service.name, &service.labels),
            "spec": {"type": "ClusterIP", "ports": ports},
        });
        let service_key = NamespacedName::new(&*key.namespace, service.name.as_str());
        let mut objects = vec![((Made::Service, service_key), service_config)];
        let addresses: Vec<IpAddr> = match service.addresses {
            ServiceAddresses::Own(ip) => vec![ip],
            ServiceAddresses::Shared => shared.to_vec(),
        };
        // The API server refuses endpoints that point at a node itself.
        let addresses: BTreeSet<IpAddr> = (addresses.into_iter())
            .map(|ip| ip.to_canonical())
            .filter(|ip| model::node_local_reason(*ip).is_none())
            .collect();
        let slice_ports: Vec<Value> = (service.ports.iter())
            .map(|p| json!({"name": p.name, "port": p.target, "protocol": p.protocol.name()}))
            .collect();
        let mut labels = service.labels.clone();
        labels.insert("kubernetes.io/service-name".into(), service.name.clone());
        labels.insert(
            "endpointslice.kubernetes.io/managed-by".into(),
            SLICES_MANAGED_BY.into(),
        );
        for (family, address_type) in [("ipv4", "IPv4"), ("ipv6", "IPv6")] {
            let endpoints: Vec<Value> = (addresses.iter())
                .filter(|ip| ip.is_ipv4() == (family == "ipv4"))
                .map(|ip| {
                    json!({
                        "addresses": [ip.to_string()],
                        "conditions": {"ready": true, "serving": true, "terminating": false},
                    })
                })
                .collect();
            if endpoints.is_empty() {
                continue;
            }
            let name = format!("{}-{family}", service.name);
            let config = json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": metadata(&name, &labels),
                "addressType": address_type,
                "endpoints": endpoints,
                "ports": slice_ports,
            });
            let slice_key = NamespacedName::new(&*key.namespace, name.as_str());
            objects.push(((Made::EndpointSlice, slice_key), config));
        }
        wanted.push(GatewayObjects {
            gateway: key.clone(),
            objects,
            endpoints: addresses.len(),
        });
    }
    wanted
}

fn api(client: &Client, made: Made, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = match made {
        Made::Service => ApiResource::erase::<Service>(&()),
        Made::EndpointSlice => ApiResource::erase::<EndpointSlice>(&()),
    };
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Reads the object; applies `config` unless it is someone else's or already as wanted.
async fn apply(
    client: &Client,
    target: &Target,
    config: &Value,
    gateway: &NamespacedName,
) -> Written {
    let (made, key) = target;
    let api = api(client, *made, Some(&key.namespace));
    let result = async {
        let current = api.get_opt(&key.name).await?;
        let current = current.map(|c| serde_json::to_value(c).unwrap_or_default());
        if let Some(current) = &current {
            if !ours(current, Some(&gateway.name)) {
                return Ok(Err(format!(
                    "{made:?} {key} exists and is not the one Sluice generates for this Gateway (no controller ownerReference to it, or not applied by {FIELD_MANAGER}): left as it is, and the Gateway has no generated Service until it is renamed or deleted"
                )));
            }
            if up_to_date(current, config) {
                return Ok(Ok(cluster_ips(*made, current)));
            }
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let written = api.patch(&key.name, &params, &Patch::Apply(config)).await?;
        match current {
            None => tracing::info!(%gateway, object = %key, "generated {made:?}"),
            Some(_) => tracing::info!(%gateway, object = %key, "generated {made:?} updated"),
        }
        let written = serde_json::to_value(written).unwrap_or_default();
        Ok::<_, kube::Error>(Ok(cluster_ips(*made, &written)))
    }
    .await;
    match result {
        Ok(Ok(ips)) => Written::Done(ips),
        Ok(Err(why)) => Written::Taken(why),
        Err(error) => {
            tracing::warn!(%gateway, object = %key, "writing the generated {made:?} failed: {error}");
            Written::Failed
        }
    }
}

/// A Service's `spec.clusterIPs` (`None` for a slice; empty for a headless Service).
fn cluster_ips(made: Made, object: &Value) -> Option<Vec<IpAddr>> {
    if made != Made::Service {
        return None;
    }
    let spec = &object["spec"];
    let texts = match spec["clusterIPs"].as_array() {
        Some(ips) => ips.iter().filter_map(Value::as_str).collect(),
        None => spec["clusterIP"].as_str().into_iter().collect::<Vec<_>>(),
    };
    Some(texts.iter().filter_map(|t| t.parse().ok()).collect())
}

/// Deletes the object if it is Sluice's (a precondition on its uid: not one made since).
async fn delete(client: &Client, (made, key): &Target) -> Result<(), kube::Error> {
    let api = api(client, *made, Some(&key.namespace));
    let Some(current) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    let value = serde_json::to_value(&current).unwrap_or_default();
    if !ours(&value, None) {
        return Ok(());
    }
    let params = DeleteParams::default().preconditions(Preconditions {
        uid: current.metadata.uid.clone(),
        resource_version: None,
    });
    match api.delete(&key.name, &params).await {
        Ok(_) => {
            tracing::info!(object = %key, "deleted the generated {made:?}: no Gateway wants it");
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}

/// Every Service and EndpointSlice Sluice applied, in any namespace.
async fn generated_before(client: &Client) -> Result<Vec<Target>, kube::Error> {
    let mut found = Vec::new();
    let selectors = [
        (Made::Service, GATEWAY_NAME_LABEL.to_owned()),
        (
            Made::EndpointSlice,
            format!("endpointslice.kubernetes.io/managed-by={SLICES_MANAGED_BY}"),
        ),
    ];
    for (made, selector) in selectors {
        let list = api(client, made, None)
            .list(&ListParams::default().labels(&selector))
            .await?;
        for object in list.items {
            let value = serde_json::to_value(&object).unwrap_or_default();
            if !ours(&value, None) {
                continue;
            }
            let namespace = object.metadata.namespace.as_deref().unwrap_or_default();
            let name = object.metadata.name.as_deref().unwrap_or_default();
            found.push((made, NamespacedName::new(namespace, name)));
        }
    }
    Ok(found)
}

/// Whether `object` is one Sluice generated (applied by its field manager, controlled by a
/// Gateway), for Gateway `gateway` when given.
fn ours(object: &Value, gateway: Option<&str>) -> bool {
    let metadata = &object["metadata"];
    let owned = (metadata["ownerReferences"].as_array().into_iter().flatten()).any(|owner| {
        owner["controller"] == true
            && owner["kind"] == "Gateway"
            && (owner["apiVersion"].as_str())
                .is_some_and(|v| v.starts_with("gateway.networking.k8s.io/"))
            && gateway.is_none_or(|name| owner["name"] == name)
    });
    let applied = (metadata["managedFields"].as_array().into_iter().flatten())
        .any(|entry| entry["manager"] == FIELD_MANAGER);
    owned && applied
}

/// Whether `current` already is what applying `config` would make it: everything `config` says
/// is there, and no label or annotation Sluice applied before is left that `config` drops.
fn up_to_date(current: &Value, config: &Value) -> bool {
    if !contains(current, config) {
        return false;
    }
    ["f:labels", "f:annotations"].iter().all(|field| {
        let wanted = &config["metadata"][&field[2..]];
        applied_keys(current, field).all(|key| wanted.get(key).is_some())
    })
}

/// The keys of `metadata.<field>` this field manager applied (`f:labels`, `f:annotations`).
fn applied_keys<'a>(current: &'a Value, field: &'a str) -> impl Iterator<Item = &'a str> {
    (current["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten())
    .filter(|entry| entry["manager"] == FIELD_MANAGER && entry["operation"] == "Apply")
    .filter_map(move |entry| entry["fieldsV1"]["f:metadata"][field].as_object())
    .flat_map(|keys| keys.keys())
    .filter_map(|key| key.strip_prefix("f:"))
}

/// Whether `have` holds everything `want` says: objects by key, lists item by item (as many
/// items, each held by one of `have`'s), values equal.
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(have), Value::Object(want)) => {
            (want.iter()).all(|(key, value)| have.get(key).is_some_and(|h| contains(h, value)))
        }
        (Value::Array(have), Value::Array(want)) => {
            have.len() == want.len() && want.iter().all(|w| have.iter().any(|h| contains(h, w)))
        }
        _ => have == want,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::gateway_status::ServicePort;
    use model::streams::StreamProtocol;
    use std::sync::Arc;

    fn statuses(addresses: ServiceAddresses) -> GatewayStatuses {
        let key = NamespacedName::new("app", "edge");
        let service = GatewayService {
            name: "edge-sluice".into(),
            labels: BTreeMap::from([
                (GATEWAY_NAME_LABEL.into(), "edge".into()),
                ("key2".into(), "value2".into()),
            ]),
            annotations: BTreeMap::from([("key1".into(), "value1".into())]),
            ports: vec![
                ServicePort {
                    name: "tcp-80".into(),
                    protocol: StreamProtocol::Tcp,
                    port: 80,
                    target: 8080,
                },
                ServicePort {
                    name: "udp-53".into(),
                    protocol: StreamProtocol::Udp,
                    port: 53,
                    target: 53,
                },
            ],
            addresses,
            generation: 2,
        };
        let mut statuses = GatewayStatuses::default();
        (statuses.infrastructure).insert(key.clone(), Generated::Service(service));
        (statuses.uids).insert((Kind::Gateway, key), Arc::from("uid-1"));
        statuses
    }

    #[test]
    fn a_gateway_wants_its_service_and_a_slice_per_address_family_owned_by_it() {
        let shared: Vec<IpAddr> = [
            "198.18.0.200",
            "127.0.0.1",
            "2001:db8::1",
            "::ffff:198.18.0.201",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let wanted = desired(&statuses(ServiceAddresses::Shared), &shared);
        let [edge] = &wanted[..] else {
            panic!("{wanted:?}")
        };
        // Loopback left out (the API server refuses it), a v4-mapped address as IPv4.
        assert_eq!(edge.endpoints, 3);
        let names: Vec<String> = (edge.objects.iter())
            .map(|((made, key), _)| format!("{made:?} {key}"))
            .collect();
        assert_eq!(
            names,
            [
                "Service app/edge-sluice",
                "EndpointSlice app/edge-sluice-ipv4",
                "EndpointSlice app/edge-sluice-ipv6"
            ]
        );
        let service = &edge.objects[0].1;
        assert_eq!(service["metadata"]["labels"]["key2"], "value2");
        assert_eq!(service["metadata"]["annotations"]["key1"], "value1");
        let owner = &service["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                &owner["kind"],
                &owner["name"],
                &owner["uid"],
                &owner["controller"]
            ),
            (
                &json!("Gateway"),
                &json!("edge"),
                &json!("uid-1"),
                &json!(true)
            )
        );
        assert_eq!(
            service["spec"]["ports"],
            json!([
                {"name": "tcp-80", "port": 80, "protocol": "TCP", "targetPort": 8080},
                {"name": "udp-53", "port": 53, "protocol": "UDP", "targetPort": 53},
            ])
        );
        let v4 = &edge.objects[1].1;
        assert_eq!(v4["addressType"], "IPv4");
        let addresses: Vec<&Value> = (v4["endpoints"].as_array().unwrap().iter())
            .map(|e| &e["addresses"][0])
            .collect();
        assert_eq!(addresses, [&json!("198.18.0.200"), &json!("198.18.0.201")]);
        assert_eq!(
            v4["ports"][0],
            json!({"name": "tcp-80", "port": 8080, "protocol": "TCP"})
        );
        let labels = &v4["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/service-name"], "edge-sluice");
        assert_eq!(
            labels["endpointslice.kubernetes.io/managed-by"],
            SLICES_MANAGED_BY
        );
        assert_eq!(labels["key2"], "value2");
        // Its own address: one slice; no uid (a file's Gateway): nothing at all.
        let own = desired(
            &statuses(ServiceAddresses::Own("192.0.2.9".parse().unwrap())),
            &shared,
        );
        assert_eq!(own[0].objects.len(), 2);
        let mut without_uid = statuses(ServiceAddresses::Shared);
        without_uid.uids.clear();
        assert!(desired(&without_uid, &shared).is_empty());
    }

    fn managed(labels: &[&str]) -> Value {
        let keys: serde_json::Map<String, Value> = (labels.iter())
            .map(|k| (format!("f:{k}"), json!({})))
            .collect();
        json!([{"manager": FIELD_MANAGER, "operation": "Apply",
                "fieldsV1": {"f:metadata": {"f:labels": keys}}}])
    }

    #[test]
    fn an_object_is_up_to_date_when_it_holds_the_config_and_no_label_sluice_dropped() {
        let config = json!({"metadata": {"name": "s", "labels": {"key2": "value2"}},
                            "spec": {"ports": [{"port": 80}]}});
        let mut current = json!({
            "metadata": {"name": "s", "labels": {"key2": "value2", "theirs": "x"},
                         "managedFields": managed(&["key2"])},
            "spec": {"ports": [{"port": 80, "targetPort": 80}], "clusterIP": "10.96.0.9"},
        });
        // Someone else's label and the API server's defaults do not matter.
        assert!(up_to_date(&current, &config));
        // A label Sluice applied and no longer wants: an apply takes it away.
        current["metadata"]["labels"]["old"] = json!("1");
        current["metadata"]["managedFields"] = managed(&["key2", "old"]);
        assert!(!up_to_date(&current, &config));
        current["metadata"]["managedFields"] = managed(&["key2"]);
        assert!(up_to_date(&current, &config));
        // A value changed, a port more: not up to date.
        current["metadata"]["labels"]["key2"] = json!("other");
        assert!(!up_to_date(&current, &config));
        current["metadata"]["labels"]["key2"] = json!("value2");
        current["spec"]["ports"] = json!([{"port": 80}, {"port": 81}]);
        assert!(!up_to_date(&current, &config));
    }

    #[test]
    fn only_objects_sluice_applied_for_a_gateway_are_its_own() {
        let owner = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                           "name": "edge", "uid": "u", "controller": true});
        let mut object = json!({"metadata": {"ownerReferences": [owner],
                                             "managedFields": managed(&[])}});
        assert!(ours(&object, Some("edge")));
        assert!(ours(&object, None));
        assert!(!ours(&object, Some("other")));
        // Made by someone else for the Gateway, or by Sluice's manager without the owner.
        object["metadata"]["managedFields"] =
            json!([{"manager": "kubectl", "operation": "Update"}]);
        assert!(!ours(&object, Some("edge")));
        let unowned = json!({"metadata": {"managedFields": managed(&[])}});
        assert!(!ours(&unowned, None));
    }

    #[test]
    fn the_condition_says_what_became_of_the_service() {
        let mut statuses = statuses(ServiceAddresses::Shared);
        let key = NamespacedName::new("app", "edge");
        let mut writes = InfrastructureWrites::default();
        // Not answered yet: no condition rather than a guess.
        assert!(writes.conditions(&statuses).is_empty());
        writes
            .outcomes
            .insert(key.clone(), Outcome::Generated { endpoints: 0 });
        let generated = &writes.conditions(&statuses)[&key];
        assert_eq!(
            (generated.type_, generated.status, generated.reason),
            (CONDITION, true, "Generated")
        );
        assert!(
            generated
                .message
                .contains("Service edge-sluice (ports 80/TCP, 53/UDP)"),
            "{}",
            generated.message
        );
        assert!(
            generated.message.contains("it has none yet"),
            "{}",
            generated.message
        );
        writes
            .outcomes
            .insert(key.clone(), Outcome::NameInUse("taken".into()));
        let taken = &writes.conditions(&statuses)[&key];
        assert_eq!(
            (taken.status, taken.reason, taken.message.as_str()),
            (false, "NameInUse", "taken")
        );
        statuses
            .infrastructure
            .insert(key.clone(), Generated::Refused("too long".into()));
        let refused = &writes.conditions(&statuses)[&key];
        assert_eq!((refused.status, refused.reason), (false, "NotGenerated"));
    }
}
