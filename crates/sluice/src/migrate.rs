//! `sluice migrate`: what Sluice would make of an ingress-nginx configuration, one verdict per
//! Ingress, before switching.
//!
//! ```text
//!  --config PATH ──controller::load_files──┐
//!  --kubernetes ──controller::load_kubernetes (one list)──┴─▶ compile ─▶ migrate::Report
//!     ─▶ Markdown on stdout, --json FILE; exit 1 when some Ingress is not served as written,
//!        or when none is of the judged class (the skipped ones are counted, by class)
//!     --to gateway-api ─▶ translate::to_gateway ─▶ YAML on stdout, the gaps on stderr
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use controller::migrate::{Report, SkippedIngress};
use model::NamespacedName;
use translate::CompileOptions;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["config", "kubernetes"])))]
pub(crate) struct MigrateArgs {
    /// A YAML (or JSON) file, or a folder of them, holding the Kubernetes objects.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// List the objects from a Kubernetes API server instead.
    #[arg(long)]
    kubernetes: bool,
    /// kubeconfig to use (default: in-cluster service account, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "PATH", requires = "kubernetes")]
    kubeconfig: Option<PathBuf>,
    /// Only this namespace (default: all).
    #[arg(long, value_name = "NS", requires = "kubernetes")]
    watch_namespace: Option<String>,
    /// The ingress-nginx IngressClass name (and legacy annotation value) to judge.
    #[arg(long, value_name = "NAME", default_value = "nginx")]
    ingress_class: String,
    /// The spec.controller of the IngressClasses to judge.
    #[arg(long, value_name = "NAME", default_value = "k8s.io/ingress-nginx")]
    controller_class: String,
    /// Judge Ingresses that name no class too (ingress-nginx's --watch-ingress-without-class).
    #[arg(long)]
    watch_ingress_without_class: bool,
    /// ingress-nginx's ConfigMap (its chart's default name).
    #[arg(long, value_name = "NS/NAME", default_value = "ingress-nginx/ingress-nginx-controller", value_parser = namespaced_name)]
    configmap: NamespacedName,
    /// Also write the verdicts (with --to: the objects and gaps) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Instead of verdicts, write the served Ingresses as objects of this API on stdout (YAML),
    /// and list on stderr what has no equivalent.
    #[arg(long, value_enum, value_name = "API")]
    to: Option<MigrateTo>,
    /// With --to gateway-api: the Gateway to write and attach every route to.
    #[arg(long, value_name = "NS/NAME", default_value = "default/sluice", value_parser = namespaced_name, requires = "to")]
    gateway: NamespacedName,
    /// With --to gateway-api: the Gateway's class (written too, with Sluice's controllerName).
    #[arg(long, value_name = "NAME", default_value = "sluice", requires = "to")]
    gateway_class: String,
}

/// What `--to` converts into.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum MigrateTo {
    /// Gateway API (gateway.networking.k8s.io): a Gateway, HTTPRoutes, ReferenceGrants.
    GatewayApi,
}

fn namespaced_name(text: &str) -> Result<NamespacedName, String> {
    NamespacedName::parse(text).ok_or_else(|| format!("expected NAMESPACE/NAME, got {text:?}"))
}

/// Exit code: 0 when every Ingress is served (with or without differences), 1 when one is not
/// served as written, or when Ingresses were read and none is of the judged class.
pub(crate) fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let options = CompileOptions {
        ingress_class: args.ingress_class.clone(),
        controller_class: args.controller_class.clone(),
        config_map: args.configmap.clone(),
        watch_ingress_without_class: args.watch_ingress_without_class,
        ..CompileOptions::default()
    };
    let (store, compiled, source_errors) = match &args.config {
        Some(path) => controller::load_files(path, &options)?,
        None => {
            let kube = controller::KubeOptions {
                kubeconfig: args.kubeconfig.clone(),
                watch_namespace: args.watch_namespace.clone(),
                ..controller::KubeOptions::default()
            };
            let store = controller::load_kubernetes(&kube, &options)?;
            let compiled = translate::compile(&store, &options);
            (store, compiled, Vec::new())
        }
    };
    if args.to.is_some() {
        return to_gateway_api(&args, &store, &compiled);
    }
    let mut report = Report::new(&compiled);
    report.other.extend(source_errors);
    report.skipped = translate::ingress::not_ours(&store, &options)
        .into_iter()
        .map(|(name, class)| SkippedIngress {
            ingress: name.to_string(),
            class: class.map(str::to_owned),
        })
        .collect();
    print!("{}", report.markdown());
    if let Some(path) = &args.json {
        let json = serde_json::to_vec_pretty(&report).context("serialising the report")?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    if report.judged_nothing() {
        eprintln!(
            "sluice migrate: no Ingress is of the judged class ({} / {}); see the options above",
            args.ingress_class, args.controller_class
        );
        return Ok(ExitCode::from(1));
    }
    Ok(if report.any_not_served() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--to gateway-api`: the objects on stdout, the gaps on stderr. Exit code 0 (a gap is
/// something to read, not a failure), 1 when no Ingress is of the judged class.
fn to_gateway_api(
    args: &MigrateArgs,
    store: &translate::Store,
    compiled: &model::Compiled,
) -> anyhow::Result<ExitCode> {
    if compiled.ingresses.is_empty() {
        eprintln!(
            "sluice migrate: no Ingress is of the judged class ({} / {}); nothing to convert",
            args.ingress_class, args.controller_class
        );
        return Ok(ExitCode::from(1));
    }
    let target = translate::to_gateway::Target {
        gateway: args.gateway.clone(),
        class: args.gateway_class.clone(),
    };
    let conversion = translate::to_gateway::to_gateway_api(store, compiled, &target);
    print!("{}", conversion.yaml());
    if conversion.gaps.is_empty() {
        eprintln!("sluice migrate: every served Ingress converted with nothing left out");
    } else {
        eprintln!(
            "sluice migrate: {} things are not said the same way in Gateway API:\n{}",
            conversion.gaps.len(),
            conversion.gaps_markdown()
        );
    }
    if let Some(path) = &args.json {
        let json = serde_json::json!({"objects": conversion.objects, "gaps": conversion.gaps});
        let json = serde_json::to_vec_pretty(&json).context("serialising the conversion")?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
