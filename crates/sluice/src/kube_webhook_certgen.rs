//! `sluice kube-webhook-certgen create|patch`: ingress-nginx's chart's admission certificate
//! Jobs with Sluice's image in place of kube-webhook-certgen's. The chart runs that image with
//! args `create …` and `patch …`; `ingress_nginx_entry` turns `sluice create …` (and an argv[0]
//! named `kube-webhook-certgen`) into this command. Flags and their defaults are that tool's
//! (pflag's syntax: `--flag=false` for booleans); the work is `controller::kube_webhook_certgen`.

use std::path::PathBuf;

use anyhow::Context;
use controller::kube_webhook_certgen::{
    self as certgen, CreateOptions, Created, FailurePolicy, PatchOptions,
};
use controller::webhook_cert::with_client;

#[derive(clap::Args, Debug)]
pub(crate) struct CertgenArgs {
    #[command(subcommand)]
    command: CertgenCommand,
    /// Log level: panic|fatal|error|warn|info|debug|trace (messages below it are not printed).
    #[arg(long, global = true, default_value = "info", value_parser = LEVELS)]
    log_level: String,
    /// Log format: text|json (one JSON object a line, as kube-webhook-certgen logs).
    #[arg(long, global = true, default_value = "json", value_parser = ["text", "json"])]
    log_format: String,
    /// kubeconfig to use (default: in-cluster service account, else $KUBECONFIG).
    #[arg(long, global = true, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
}

const LEVELS: [&str; 7] = ["panic", "fatal", "error", "warn", "info", "debug", "trace"];

#[derive(clap::Subcommand, Debug)]
enum CertgenCommand {
    /// Generate a CA and a server certificate and key, and store them in Secret NAMESPACE/
    /// SECRET-NAME (keys `ca`, CERT-NAME, KEY-NAME), unless that Secret exists.
    Create(CreateArgs),
    /// Put the CA of Secret NAMESPACE/SECRET-NAME into the webhook configurations named
    /// WEBHOOK-NAME (and an APIService).
    Patch(PatchArgs),
}

#[derive(clap::Args, Debug)]
struct CreateArgs {
    /// Comma-separated host names and IPs to generate a certificate for.
    #[arg(long, required = true, value_delimiter = ',')]
    host: Vec<String>,
    /// Name of the Secret the certificate is written to.
    #[arg(long, required = true)]
    secret_name: String,
    /// Namespace of that Secret.
    #[arg(long, required = true)]
    namespace: String,
    /// The Secret's key for the certificate.
    #[arg(long, default_value = "cert")]
    cert_name: String,
    /// The Secret's key for the private key.
    #[arg(long, default_value = "key")]
    key_name: String,
}

#[derive(clap::Args, Debug)]
struct PatchArgs {
    /// Name of the Secret the CA is read from.
    #[arg(long, required = true)]
    secret_name: String,
    /// Namespace of that Secret.
    #[arg(long, required = true)]
    namespace: String,
    /// Name of the ValidatingWebhookConfiguration and MutatingWebhookConfiguration to update.
    #[arg(long)]
    webhook_name: Option<String>,
    /// Name of an APIService to patch.
    #[arg(long = "apiservice-name")]
    api_service_name: Option<String>,
    /// Patch the ValidatingWebhookConfiguration.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    patch_validating: bool,
    /// Patch the MutatingWebhookConfiguration.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool)]
    patch_mutating: bool,
    /// Set this failure policy on every webhook patched: Fail or Ignore.
    #[arg(long, value_parser = FailurePolicy::parse)]
    patch_failure_policy: Option<FailurePolicy>,
}

/// A boolean as Go's strconv.ParseBool reads it (pflag's `--flag=value`).
fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("{other:?}: expected true or false")),
    }
}

/// Where the lines go: stdout, as kube-webhook-certgen's logrus writes them.
struct Say {
    json: bool,
    /// Index in LEVELS of the least severe level printed.
    threshold: usize,
}

impl Say {
    fn line(&self, level: &str, message: &str) {
        let rank = LEVELS.iter().position(|l| *l == level).unwrap_or(0);
        if rank > self.threshold {
            return;
        }
        if self.json {
            let line = serde_json::json!({"level": level, "msg": message});
            println!("{line}");
        } else {
            println!("level={level} msg={message:?}");
        }
    }
}

pub(crate) fn run(args: CertgenArgs) -> anyhow::Result<()> {
    let say = Say {
        json: args.log_format == "json",
        threshold: LEVELS
            .iter()
            .position(|l| *l == args.log_level)
            .unwrap_or(4),
    };
    let kubeconfig = args.kubeconfig.as_deref();
    match args.command {
        CertgenCommand::Create(create) => {
            let options = CreateOptions {
                namespace: create.namespace,
                secret: create.secret_name,
                hosts: create.host.into_iter().filter(|h| !h.is_empty()).collect(),
                cert_key: create.cert_name,
                private_key_key: create.key_name,
            };
            anyhow::ensure!(!options.hosts.is_empty(), "--host names no host");
            let secret = format!("{}/{}", options.namespace, options.secret);
            let outcome = with_client(kubeconfig, |client| async move {
                certgen::create(client, &options).await
            })
            .with_context(|| format!("create: Secret {secret}"))?;
            match outcome {
                Created::Created => say.line("info", &format!("Secret {secret}: created")),
                Created::Existed(None) => {
                    say.line("info", &format!("Secret {secret}: already exists"))
                }
                Created::Existed(Some(why)) => say.line(
                    "warn",
                    &format!(
                        "Secret {secret}: already exists, kept as it is, but it will not serve \
                         the webhook: {why}. Delete the Secret and run the Job again"
                    ),
                ),
            }
        }
        CertgenCommand::Patch(patch) => {
            let options = PatchOptions {
                namespace: patch.namespace,
                secret: patch.secret_name,
                webhook: patch.webhook_name,
                validating: patch.patch_validating,
                mutating: patch.patch_mutating,
                failure_policy: patch.patch_failure_policy,
                api_service: patch.api_service_name,
            };
            let secret = format!("{}/{}", options.namespace, options.secret);
            let patched = with_client(kubeconfig, |client| async move {
                certgen::patch(client, &options).await
            })
            .with_context(|| format!("patch: the CA of Secret {secret}"))?;
            for object in patched {
                say.line(
                    "info",
                    &format!(
                        "{} {}: caBundle set on {} webhook(s)",
                        object.kind, object.name, object.webhooks
                    ),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: CertgenArgs,
    }

    fn parse(args: &[&str]) -> Result<CertgenArgs, String> {
        Cli::try_parse_from([&["certgen"], args].concat())
            .map(|cli| cli.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_charts_create_and_patch_args_parse_with_kube_webhook_certgens_defaults() {
        let create = parse(&[
            "create",
            "--host=ingress-nginx-controller-admission,ingress-nginx-controller-admission.ingress-nginx.svc",
            "--namespace=ingress-nginx",
            "--secret-name=ingress-nginx-admission",
        ])
        .unwrap();
        let CertgenCommand::Create(c) = create.command else {
            panic!("{create:?}")
        };
        assert_eq!(c.host.len(), 2);
        assert_eq!((c.cert_name.as_str(), c.key_name.as_str()), ("cert", "key"));

        let patch = parse(&[
            "patch",
            "--webhook-name=ingress-nginx-admission",
            "--namespace=ingress-nginx",
            "--patch-mutating=false",
            "--secret-name=ingress-nginx-admission",
            "--patch-failure-policy=Fail",
            "--log-level=debug",
        ])
        .unwrap();
        assert_eq!(patch.log_level, "debug");
        let CertgenCommand::Patch(p) = patch.command else {
            panic!("{patch:?}")
        };
        assert!(p.patch_validating && !p.patch_mutating);
        assert_eq!(p.patch_failure_policy, Some(FailurePolicy::Fail));

        // A bare boolean flag is true, as in pflag.
        let bare = parse(&[
            "patch",
            "--namespace=n",
            "--secret-name=s",
            "--patch-mutating",
        ])
        .unwrap();
        let CertgenCommand::Patch(p) = bare.command else {
            panic!()
        };
        assert!(p.patch_mutating);
    }

    #[test]
    fn bad_values_are_refused_with_what_was_expected() {
        let error = parse(&[
            "patch",
            "--namespace=n",
            "--secret-name=s",
            "--patch-failure-policy=fail",
        ])
        .unwrap_err();
        assert!(error.contains("expected Fail or Ignore"), "{error}");
        let error = parse(&[
            "patch",
            "--namespace=n",
            "--secret-name=s",
            "--patch-mutating=no",
        ])
        .unwrap_err();
        assert!(error.contains("expected true or false"), "{error}");
        let error = parse(&["create", "--namespace=n", "--secret-name=s"]).unwrap_err();
        assert!(error.contains("--host"), "{error}");
    }
}
