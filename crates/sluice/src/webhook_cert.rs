//! `sluice webhook-cert`: makes the admission webhook's certificate Secret and puts its CA into
//! the ValidatingWebhookConfiguration, so `deploy/` needs no cert-manager. Run by a Job under a
//! ServiceAccount of its own; the logic is `controller::webhook_cert`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use controller::webhook_cert::{self, CertOptions};

#[derive(clap::Args, Debug)]
pub(crate) struct WebhookCertArgs {
    /// kubeconfig to use (default: in-cluster service account, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the Secret and of the webhook's Service.
    #[arg(long, value_name = "NS", env = "POD_NAMESPACE")]
    namespace: String,
    /// The Secret that gets `ca.crt`, `tls.crt` and `tls.key` (created, or replaced when it does
    /// not hold a valid pair for the Service for 30 more days).
    #[arg(long, value_name = "NAME", default_value = "sluice-admission")]
    secret: String,
    /// The webhook's Service: the certificate is for SERVICE.NS.svc.
    #[arg(long, value_name = "NAME", default_value = "sluice-admission")]
    service: String,
    /// The ValidatingWebhookConfiguration whose webhooks get the CA as caBundle. Without it only
    /// the Secret is made (Helm's pre-install step).
    #[arg(long, value_name = "NAME")]
    webhook_configuration: Option<String>,
    /// How long to wait for the ValidatingWebhookConfiguration to exist.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = duration)]
    wait: Duration,
}

fn duration(text: &str) -> Result<Duration, String> {
    translate::configmap::parse_duration(text)
        .ok_or_else(|| format!("{text:?}: expected a duration like 120, 120s or 2m"))
}

pub(crate) fn run(args: WebhookCertArgs) -> anyhow::Result<()> {
    let options = CertOptions {
        namespace: args.namespace,
        secret: args.secret,
        service: args.service,
        webhook_configuration: args.webhook_configuration,
        wait: args.wait,
    };
    let outcome = webhook_cert::run(args.kubeconfig.as_deref(), &options).with_context(|| {
        format!(
            "ensuring the webhook certificate in Secret {}/{}",
            options.namespace, options.secret
        )
    })?;
    println!(
        "Secret {}/{}: {}",
        options.namespace, options.secret, outcome.secret
    );
    if let Some(configuration) = &options.webhook_configuration {
        println!(
            "ValidatingWebhookConfiguration {configuration}: caBundle set on {} webhook(s)",
            outcome.patched_webhooks
        );
    }
    Ok(())
}
