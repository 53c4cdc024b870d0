//! ingress-nginx's chart's certificate Jobs run with Sluice's image: the two commands of its
//! kube-webhook-certgen, done as that tool does them (facts read from its v1.4 source), under
//! the RBAC the chart grants them (Secrets: get, create; webhook configurations: get, update).
//!
//! ```text
//!  create --host H1,H2 --namespace NS --secret-name S [--cert-name cert] [--key-name key]
//!     Secret NS/S exists? ─yes─▶ kept as it is (the chart grants no update; a pair that does not
//!                         │      serve H1,H2 for 30 more days is reported, not replaced)
//!                         └no──▶ generate(): a new CA and a leaf for H1,H2 (IPs as IP names)
//!                                ─▶ create {ca, cert, key}
//!  patch --webhook-name W --namespace NS --secret-name S [--patch-validating] [--patch-mutating]
//!        [--patch-failure-policy Fail|Ignore] [--apiservice-name A]
//!     ca = Secret NS/S's `ca` ─▶ get + update (resourceVersion; a conflict is read again) of
//!        ValidatingWebhookConfiguration W, MutatingWebhookConfiguration W: every webhook's
//!        clientConfig.caBundle = ca (and failurePolicy when given); APIService A:
//!        spec.caBundle = ca, insecureSkipTLSVerify = false
//! ```
//! Sluice's own Job (`webhook_cert`) renews what is due and patches by merge; this one keeps
//! kube-webhook-certgen's contract, so the chart's hooks, values and RBAC work unchanged.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::Api;

use crate::webhook_cert::{check, generate, pair_under, CertError};

/// The key kube-webhook-certgen keeps the CA under (not configurable there either).
pub const CA_KEY: &str = "ca";

/// `create`'s inputs.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    pub namespace: String,
    pub secret: String,
    /// DNS names and IP addresses the certificate serves (`--host`, split at commas).
    pub hosts: Vec<String>,
    /// The Secret's keys for the certificate and its key (`--cert-name`, `--key-name`).
    pub cert_key: String,
    pub private_key_key: String,
}

/// What `create` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    Created,
    /// The Secret existed and was left alone; `Some` says why its contents would not serve
    /// the hosts (what an operator must know: the webhook will fail TLS until it is deleted
    /// and the Job runs again).
    Existed(Option<String>),
}

/// `patch`'s inputs.
#[derive(Clone, Debug, Default)]
pub struct PatchOptions {
    pub namespace: String,
    pub secret: String,
    /// `--webhook-name`: the Validating and the Mutating configuration share it.
    pub webhook: Option<String>,
    pub validating: bool,
    pub mutating: bool,
    /// `Fail` or `Ignore`, set on every webhook patched.
    pub failure_policy: Option<FailurePolicy>,
    pub api_service: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

impl FailurePolicy {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "Fail" => Ok(Self::Fail),
            "Ignore" => Ok(Self::Ignore),
            other => Err(format!(
                "patch-failure-policy {other} is not valid: expected Fail or Ignore"
            )),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}

/// One object `patch` updated, and how many webhooks it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patched {
    pub kind: &'static str,
    pub name: String,
    pub webhooks: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum CertgenError {
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("no secret with '{secret}' in '{namespace}' (run `create` first)")]
    NoSecret { secret: String, namespace: String },
    #[error("got Secret {namespace}/{secret}, but it holds no '{CA_KEY}' key")]
    NoCa { secret: String, namespace: String },
    #[error(
        "patch-validating=false, patch-mutating=false and no apiservice-name: nothing to patch"
    )]
    NothingToPatch,
    #[error("--webhook-name is required to patch webhook configurations")]
    NoWebhookName,
    #[error("{0} {1} kept changing under 3 updates in a row")]
    Conflicts(&'static str, String),
}

fn api_error(what: String) -> impl FnOnce(kube::Error) -> CertgenError {
    move |source| CertgenError::Api { what, source }
}

/// kube-webhook-certgen `create`: the Secret, made once.
pub async fn create(
    client: kube::Client,
    options: &CreateOptions,
) -> Result<Created, CertgenError> {
    let secrets: Api<Secret> = Api::namespaced(client, &options.namespace);
    let name = format!("{}/{}", options.namespace, options.secret);
    if let Some(existing) = (secrets.get_opt(&options.secret).await)
        .map_err(api_error(format!("reading Secret {name}")))?
    {
        return Ok(Created::Existed(unusable(&existing, options)));
    }
    let pair = generate(&options.hosts, SystemTime::now())?;
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(options.secret.clone()),
            namespace: Some(options.namespace.clone()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (CA_KEY.to_owned(), bytes(&pair.ca)),
            (options.cert_key.clone(), bytes(&pair.certificate)),
            (options.private_key_key.clone(), bytes(&pair.key)),
        ])),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(Created::Created),
        // Another Job's run created it between the get and the create: theirs stands.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Created::Existed(None)),
        Err(e) => Err(api_error(format!("creating Secret {name}"))(e)),
    }
}

/// Why an existing Secret's pair would not serve every host for 30 more days; `None`: it would.
fn unusable(secret: &Secret, options: &CreateOptions) -> Option<String> {
    let keys = [CA_KEY, &options.cert_key, &options.private_key_key];
    let pair = match pair_under(secret, keys) {
        Ok(pair) => pair,
        Err(why) => return Some(why),
    };
    let now = SystemTime::now();
    options
        .hosts
        .iter()
        .find_map(|host| check(&pair, host, now).err())
}

/// kube-webhook-certgen `patch`: the Secret's CA into the objects that name the webhook.
pub async fn patch(
    client: kube::Client,
    options: &PatchOptions,
) -> Result<Vec<Patched>, CertgenError> {
    if !options.validating && !options.mutating && options.api_service.is_none() {
        return Err(CertgenError::NothingToPatch);
    }
    let webhook = match (&options.webhook, options.validating || options.mutating) {
        (Some(name), true) => Some(name.as_str()),
        (None, true) => return Err(CertgenError::NoWebhookName),
        (_, false) => None,
    };
    let ca = ca_of(client.clone(), &options.namespace, &options.secret).await?;
    let bundle = ByteString(ca);
    let policy = options.failure_policy.map(|p| p.as_str().to_owned());
    let mut patched = Vec::new();
    // The two configuration kinds hold webhooks of two types with the same two fields.
    macro_rules! patch_webhooks {
        ($kind:ty, $name:literal, $wanted:expr) => {
            if let (Some(name), true) = (webhook, $wanted) {
                let api: Api<$kind> = Api::all(client.clone());
                let webhooks = update(&api, $name, name, |object| {
                    let mut hooks: Vec<_> = object.webhooks.iter_mut().flatten().collect();
                    for hook in hooks.iter_mut() {
                        hook.client_config.ca_bundle = Some(bundle.clone());
                        hook.failure_policy = policy.clone().or(hook.failure_policy.take());
                    }
                    hooks.len()
                })
                .await?;
                patched.push(Patched {
                    kind: $name,
                    name: name.to_owned(),
                    webhooks,
                });
            }
        };
    }
    patch_webhooks!(
        ValidatingWebhookConfiguration,
        "ValidatingWebhookConfiguration",
        options.validating
    );
    patch_webhooks!(
        MutatingWebhookConfiguration,
        "MutatingWebhookConfiguration",
        options.mutating
    );
    if let Some(name) = &options.api_service {
        let api: Api<APIService> = Api::all(client);
        update(&api, "APIService", name, |object| {
            let spec = object.spec.get_or_insert_with(Default::default);
            spec.ca_bundle = Some(bundle.clone());
            spec.insecure_skip_tls_verify = Some(false);
            0
        })
        .await?;
        patched.push(Patched {
            kind: "APIService",
            name: name.clone(),
            webhooks: 0,
        });
    }
    Ok(patched)
}

async fn ca_of(
    client: kube::Client,
    namespace: &str,
    secret: &str,
) -> Result<Vec<u8>, CertgenError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let found = (secrets.get_opt(secret).await)
        .map_err(api_error(format!("reading Secret {namespace}/{secret}")))?
        .ok_or_else(|| CertgenError::NoSecret {
            secret: secret.to_owned(),
            namespace: namespace.to_owned(),
        })?;
    found
        .data
        .and_then(|mut data| data.remove(CA_KEY))
        .filter(|ca| !ca.0.is_empty())
        .map(|ca| ca.0)
        .ok_or_else(|| CertgenError::NoCa {
            secret: secret.to_owned(),
            namespace: namespace.to_owned(),
        })
}

/// Get, change, update (the verbs the chart grants: no patch). The update carries the read's
/// resourceVersion, so a concurrent writer makes it fail with 409; then it reads again (3
/// tries). Returns what `change` returned.
async fn update<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
    mut change: impl FnMut(&mut K) -> usize,
) -> Result<usize, CertgenError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    for _ in 0..3 {
        let mut object =
            (api.get(name).await).map_err(api_error(format!("reading {kind} {name}")))?;
        let changed = change(&mut object);
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(changed),
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => return Err(api_error(format!("updating {kind} {name}"))(e)),
        }
    }
    Err(CertgenError::Conflicts(kind, name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook_cert::CertificatePair;

    fn options(hosts: &[&str]) -> CreateOptions {
        CreateOptions {
            namespace: "ingress-nginx".into(),
            secret: "ingress-nginx-admission".into(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            cert_key: "cert".into(),
            private_key_key: "key".into(),
        }
    }

    fn secret_of(pair: &CertificatePair, keys: [&str; 3]) -> Secret {
        let values = [&pair.ca, &pair.certificate, &pair.key];
        Secret {
            data: Some(
                keys.iter()
                    .zip(values)
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn an_existing_pair_is_judged_for_every_host_dns_names_and_ips_alike() {
        let hosts = [
            "ingress-nginx-controller-admission",
            "ingress-nginx-controller-admission.ingress-nginx.svc",
            "10.96.0.10",
        ];
        let pair = generate(&hosts.map(String::from), SystemTime::now()).unwrap();
        let secret = secret_of(&pair, ["ca", "cert", "key"]);
        assert_eq!(unusable(&secret, &options(&hosts)), None);

        let more = [&hosts[..], &["other.ingress-nginx.svc"]].concat();
        let why = unusable(&secret, &options(&more)).unwrap();
        assert!(
            why.contains("not valid for other.ingress-nginx.svc"),
            "{why}"
        );

        // Sluice's own Job's keys are not kube-webhook-certgen's.
        let sluice_keys = secret_of(&pair, ["ca.crt", "tls.crt", "tls.key"]);
        let why = unusable(&sluice_keys, &options(&hosts)).unwrap();
        assert!(why.contains("data.ca missing"), "{why}");
    }

    #[test]
    fn the_failure_policy_is_fail_or_ignore() {
        assert_eq!(FailurePolicy::parse("Fail"), Ok(FailurePolicy::Fail));
        assert_eq!(FailurePolicy::parse("Ignore"), Ok(FailurePolicy::Ignore));
        let error = FailurePolicy::parse("fail").unwrap_err();
        assert!(error.contains("expected Fail or Ignore"), "{error}");
    }
}
