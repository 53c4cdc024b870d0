//! `sluice webhook-cert`: the admission webhook's certificate without cert-manager. Run once per
//! install or upgrade by a Job under a ServiceAccount of its own, so the controller itself never
//! needs to write Secrets.
//!
//! ```text
//!  Secret NS/--secret ──get──▶ ca.crt, tls.crt, tls.key valid for SERVICE.NS.svc (signed by
//!     │                        ca.crt, key matches, not expiring within RENEW_BEFORE)?
//!     ├─ yes ─▶ kept
//!     └─ no / absent ─▶ generate(): a new CA (key thrown away) and a leaf it signs
//!                       ─▶ create (absent) or replace (resourceVersion: a concurrent run loses)
//!  ValidatingWebhookConfiguration --webhook-configuration (optional) ──get (waits for it to
//!     exist)──▶ strategic merge patch keyed by webhook name: every webhook's
//!     clientConfig.caBundle = ca.crt (skipped when already equal)
//!  controller pods: the Secret as a volume ─▶ --validating-webhook-certificate/-key (re-read
//!     when the kubelet updates the files)
//! ```
//! Helm runs it twice, as ingress-nginx's chart runs its certgen: before install or upgrade
//! without `--webhook-configuration` (the Secret exists before the pods that mount it, so
//! `helm install --wait` cannot deadlock), and after it with (the configuration exists by then).
//! The plain manifests run it once, with, and it waits for the configuration.
//!
//! The Secret is `Opaque` with `ca.crt`, `tls.crt` and `tls.key`: not of type `kubernetes.io/tls`,
//! so the controller's Secret watch (which asks only for that type) never holds the webhook's key.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

/// The Secret's keys.
pub const CA_KEY: &str = "ca.crt";
pub const CERTIFICATE_KEY: &str = "tls.crt";
pub const PRIVATE_KEY_KEY: &str = "tls.key";

/// A certificate valid for less than this is replaced.
pub const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long a generated certificate lasts: long, like ingress-nginx's kube-webhook-certgen,
/// because nothing renews it on a schedule (running the Job again renews one that is due).
pub const VALIDITY_YEARS: i32 = 10;

/// What to make and where.
#[derive(Clone, Debug)]
pub struct CertOptions {
    /// Namespace of the Secret and of the webhook's Service.
    pub namespace: String,
    /// The Secret holding `ca.crt`, `tls.crt`, `tls.key`.
    pub secret: String,
    /// The Service the API server calls the webhook through: the certificate names
    /// `SERVICE`, `SERVICE.NS` and `SERVICE.NS.svc` (the name the API server checks).
    pub service: String,
    /// The ValidatingWebhookConfiguration whose webhooks get the CA as `caBundle`; `None`:
    /// only the Secret.
    pub webhook_configuration: Option<String>,
    /// How long to wait for the ValidatingWebhookConfiguration to exist (installers create
    /// objects in an order of their own).
    pub wait: Duration,
}

/// A CA and a leaf it signed, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificatePair {
    pub ca: String,
    pub certificate: String,
    pub key: String,
}

/// What `ensure` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub secret: SecretAction,
    /// Webhooks whose `caBundle` was changed (0: all were already right).
    pub patched_webhooks: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretAction {
    Kept,
    Created,
    /// The old contents were not usable, for this reason.
    Replaced(String),
}

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("generating the certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {0} exists but is not usable ({1}), and another run replaced it meanwhile")]
    Race(String, String),
    #[error(transparent)]
    Connect(#[from] providers::kubernetes::ConnectError),
    #[error("starting a runtime: {0}")]
    Runtime(#[from] std::io::Error),
    #[error("ValidatingWebhookConfiguration {name} did not appear within {wait:?}")]
    NoWebhookConfiguration { name: String, wait: Duration },
}

impl std::fmt::Display for SecretAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretAction::Kept => f.write_str("kept (valid)"),
            SecretAction::Created => f.write_str("created"),
            SecretAction::Replaced(why) => write!(f, "replaced ({why})"),
        }
    }
}

/// The names the certificate is valid for; the last is the one the API server checks.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
    ]
}

/// A new CA and a leaf for `names` signed by it, valid from a day ago for [`VALIDITY_YEARS`].
/// The CA's key is not kept: a renewal makes a new CA and patches the bundle again.
pub fn generate(names: &[String], now: SystemTime) -> Result<CertificatePair, CertError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let since_epoch = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let not_before = rcgen::date_time_ymd(1970, 1, 1)
        + Duration::from_secs(since_epoch.as_secs().saturating_sub(24 * 3600));
    let not_after = not_before + Duration::from_secs(VALIDITY_YEARS as u64 * 365 * 24 * 3600);

    let mut ca = CertificateParams::default();
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "sluice admission webhook CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    (ca.not_before, ca.not_after) = (not_before, not_after);
    let ca_key = KeyPair::generate()?;
    let ca_certificate = ca.self_signed(&ca_key)?;

    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name.push(
        DnType::CommonName,
        names.last().cloned().unwrap_or_default(),
    );
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    (leaf.not_before, leaf.not_after) = (not_before, not_after);
    let leaf_key = KeyPair::generate()?;
    let leaf_certificate = leaf.signed_by(&leaf_key, &Issuer::new(ca, ca_key))?;

    Ok(CertificatePair {
        ca: ca_certificate.pem(),
        certificate: leaf_certificate.pem(),
        key: leaf_key.serialize_pem(),
    })
}

/// Whether `pair` serves `server_name` to a client trusting only `pair.ca`, now and for
/// [`RENEW_BEFORE`] more: the chain verifies (signature, names, server use, dates) and the key
/// belongs to the certificate. `Err` says why not.
pub fn check(pair: &CertificatePair, server_name: &str, now: SystemTime) -> Result<(), String> {
    let certified =
        model::tls::certified_key_from_pem(pair.certificate.as_bytes(), pair.key.as_bytes())?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(pair.ca.as_bytes()) {
        let ca = ca.map_err(|e| format!("{CA_KEY}: not PEM certificates: {e}"))?;
        roots
            .add(ca)
            .map_err(|e| format!("{CA_KEY}: not a usable CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("{CA_KEY}: no CERTIFICATE block found"));
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        model::tls::crypto_provider().clone(),
    )
    .build()
    .map_err(|e| format!("{CA_KEY}: {e}"))?;
    let name = ServerName::try_from(server_name.to_owned())
        .map_err(|e| format!("{server_name:?} is not a DNS name: {e}"))?;
    let (leaf, intermediates) = certified
        .cert
        .split_first()
        .ok_or_else(|| format!("{CERTIFICATE_KEY}: empty"))?;
    for (when, at) in [("now", now), ("within 30 days", now + RENEW_BEFORE)] {
        let at = UnixTime::since_unix_epoch(
            at.duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default(),
        );
        verifier
            .verify_server_cert(leaf, intermediates, &name, &[], at)
            .map_err(|e| format!("{CERTIFICATE_KEY} is not valid for {server_name} {when}: {e}"))?;
    }
    Ok(())
}

/// [`ensure`] with a client from `kubeconfig`, on a runtime of its own: what `sluice
/// webhook-cert` runs.
pub fn run(
    kubeconfig: Option<&std::path::Path>,
    options: &CertOptions,
) -> Result<Outcome, CertError> {
    with_client(kubeconfig, |client| ensure(client, options))
}

/// `job(client)` with a client from `kubeconfig` (`None`: in-cluster, else `$KUBECONFIG`), on
/// a current-thread runtime of its own: the certificate Jobs' commands.
pub fn with_client<T, E, F>(
    kubeconfig: Option<&std::path::Path>,
    job: impl FnOnce(kube::Client) -> F,
) -> Result<T, E>
where
    E: From<CertError>,
    F: std::future::Future<Output = Result<T, E>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CertError::from)?;
    runtime.block_on(async {
        let client = (providers::kubernetes::connect(kubeconfig).await).map_err(CertError::from)?;
        job(client).await
    })
}

/// Makes sure the Secret holds a valid pair for the Service and that every webhook of the
/// configuration trusts its CA. Safe to run again and concurrently.
pub async fn ensure(client: kube::Client, options: &CertOptions) -> Result<Outcome, CertError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let secret_name = format!("{}/{}", options.namespace, options.secret);
    let api_error = |what: String| move |source| CertError::Api { what, source };
    let names = service_names(&options.service, &options.namespace);
    let server_name = names.last().cloned().unwrap_or_default();

    let existing = secrets
        .get_opt(&options.secret)
        .await
        .map_err(api_error(format!("reading Secret {secret_name}")))?;
    let (pair, action) = match existing {
        Some(secret) => {
            let current = pair_of(&secret);
            match current
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|pair| check(pair, &server_name, SystemTime::now()))
            {
                Ok(()) => (current.expect("checked"), SecretAction::Kept),
                Err(why) => {
                    let pair = generate(&names, SystemTime::now())?;
                    let mut replacement = secret_with(options, &pair);
                    // resourceVersion: if another run replaced it first, this one fails
                    // instead of making the bundle and the Secret disagree.
                    replacement.metadata.resource_version = secret.metadata.resource_version;
                    match secrets
                        .replace(&options.secret, &PostParams::default(), &replacement)
                        .await
                    {
                        Ok(_) => (pair, SecretAction::Replaced(why)),
                        Err(kube::Error::Api(status)) if status.code == 409 => {
                            return Err(CertError::Race(secret_name, why))
                        }
                        Err(e) => {
                            return Err(api_error(format!("replacing Secret {secret_name}"))(e))
                        }
                    }
                }
            }
        }
        None => {
            let pair = generate(&names, SystemTime::now())?;
            match secrets
                .create(&PostParams::default(), &secret_with(options, &pair))
                .await
            {
                Ok(_) => (pair, SecretAction::Created),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    // Another run created it between our get and create: use theirs.
                    let theirs = secrets
                        .get(&options.secret)
                        .await
                        .map_err(api_error(format!("reading Secret {secret_name}")))?;
                    let pair = pair_of(&theirs)
                        .and_then(|pair| {
                            check(&pair, &server_name, SystemTime::now()).map(|()| pair)
                        })
                        .map_err(|why| CertError::Race(secret_name.clone(), why))?;
                    (pair, SecretAction::Kept)
                }
                Err(e) => return Err(api_error(format!("creating Secret {secret_name}"))(e)),
            }
        }
    };

    let patched_webhooks = match &options.webhook_configuration {
        Some(name) => patch_ca_bundle(client, name, options.wait, &pair.ca).await?,
        None => 0,
    };
    Ok(Outcome {
        secret: action,
        patched_webhooks,
    })
}

/// Sets every webhook's `caBundle` to `ca`; returns how many changed.
async fn patch_ca_bundle(
    client: kube::Client,
    name: &str,
    wait: Duration,
    ca: &str,
) -> Result<usize, CertError> {
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client);
    let what = format!("ValidatingWebhookConfiguration {name}");
    let deadline = tokio::time::Instant::now() + wait;
    let configuration = loop {
        match configurations.get_opt(name).await {
            Ok(Some(configuration)) => break configuration,
            Ok(None) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_secs(1)).await
            }
            Ok(None) => {
                return Err(CertError::NoWebhookConfiguration {
                    name: name.to_owned(),
                    wait,
                })
            }
            Err(source) => {
                return Err(CertError::Api {
                    what: format!("reading {what}"),
                    source,
                })
            }
        }
    };
    let bundle = ByteString(ca.as_bytes().to_vec());
    // Keyed by name (the list's merge key), not by index: a webhook added or removed since the
    // read cannot receive another one's bundle.
    let changed: Vec<serde_json::Value> = configuration
        .webhooks
        .iter()
        .flatten()
        .filter(|webhook| webhook.client_config.ca_bundle.as_ref() != Some(&bundle))
        .map(|webhook| {
            serde_json::json!({"name": webhook.name, "clientConfig": {"caBundle": bundle}})
        })
        .collect();
    if !changed.is_empty() {
        configurations
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Strategic(serde_json::json!({ "webhooks": changed })),
            )
            .await
            .map_err(|source| CertError::Api {
                what: format!("patching {what}"),
                source,
            })?;
    }
    Ok(changed.len())
}

/// The pair a Secret holds under this Job's keys, or what is missing.
fn pair_of(secret: &Secret) -> Result<CertificatePair, String> {
    pair_under(secret, [CA_KEY, CERTIFICATE_KEY, PRIVATE_KEY_KEY])
}

/// The pair a Secret holds under the keys `[ca, certificate, key]`, or what is missing.
pub(crate) fn pair_under(
    secret: &Secret,
    [ca, certificate, key]: [&str; 3],
) -> Result<CertificatePair, String> {
    let data = secret.data.as_ref();
    let field = |key: &str| {
        data.and_then(|d| d.get(key))
            .filter(|b| !b.0.is_empty())
            .ok_or_else(|| format!("data.{key} missing or empty"))
            .and_then(|b| {
                String::from_utf8(b.0.clone()).map_err(|_| format!("data.{key} is not PEM text"))
            })
    };
    Ok(CertificatePair {
        ca: field(ca)?,
        certificate: field(certificate)?,
        key: field(key)?,
    })
}

fn secret_with(options: &CertOptions, pair: &CertificatePair) -> Secret {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(options.secret.clone()),
            namespace: Some(options.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/component".to_owned(),
                "admission-webhook".to_owned(),
            )])),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([
            (CA_KEY.to_owned(), bytes(&pair.ca)),
            (CERTIFICATE_KEY.to_owned(), bytes(&pair.certificate)),
            (PRIVATE_KEY_KEY.to_owned(), bytes(&pair.key)),
        ])),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        service_names("sluice-admission", "sluice")
    }

    #[test]
    fn a_generated_pair_serves_the_service_name_the_api_server_checks() {
        let now = SystemTime::now();
        let pair = generate(&names(), now).unwrap();
        assert_eq!(check(&pair, "sluice-admission.sluice.svc", now), Ok(()));
        assert_eq!(check(&pair, "sluice-admission", now), Ok(()));
    }

    #[test]
    fn a_pair_for_another_service_expiring_or_mismatched_is_not_usable() {
        let now = SystemTime::now();
        let pair = generate(&names(), now).unwrap();
        let other = check(&pair, "other.sluice.svc", now).unwrap_err();
        assert!(other.contains("not valid for other.sluice.svc"), "{other}");

        // Due for renewal: less than RENEW_BEFORE left.
        let later = now + Duration::from_secs(VALIDITY_YEARS as u64 * 365 * 24 * 3600)
            - Duration::from_secs(24 * 3600);
        let due = check(&pair, "sluice-admission.sluice.svc", later).unwrap_err();
        assert!(due.contains("within 30 days"), "{due}");

        // Another pair's key, or another CA.
        let second = generate(&names(), now).unwrap();
        let foreign_key = CertificatePair {
            key: second.key.clone(),
            ..pair.clone()
        };
        let error = check(&foreign_key, "sluice-admission.sluice.svc", now).unwrap_err();
        assert!(error.contains("does not belong"), "{error}");
        let foreign_ca = CertificatePair {
            ca: second.ca,
            ..pair
        };
        let error = check(&foreign_ca, "sluice-admission.sluice.svc", now).unwrap_err();
        assert!(error.contains("not valid"), "{error}");
    }
}
