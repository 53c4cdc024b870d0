//! `sluice serve`: its flags, checked, mapped to the `controller` crate's typed options.
//!
//! ```text
//!  argv ──clap──▶ ServeArgs ──ServeArgs::options──▶ controller::Options ──▶ controller::run
//! ```

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use controller::{KubeOptions, Listen, Options, Source};
use model::{CompileOptions, NamespacedName, NodeLocalEndpoints};
use providers::kubernetes::StatusAddresses;

pub(crate) use controller::DEFAULT_STATUS_LISTEN;

#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["config", "kubernetes"])))]
pub(crate) struct ServeArgs {
    /// A YAML (or JSON) file, or a folder of them, holding Kubernetes objects: Ingress,
    /// IngressClass, Service, EndpointSlice, Secret (kubernetes.io/tls), ConfigMap. Watched.
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Watch a Kubernetes API server instead (in-cluster credentials when run in a pod).
    #[arg(long)]
    pub(crate) kubernetes: bool,
    #[command(flatten)]
    pub(crate) kube: KubeArgs,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:80")]
    pub(crate) http_listen: SocketAddr,
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:443")]
    pub(crate) https_listen: SocketAddr,
    /// Serves /healthz, /ready and /metrics: the port to expose to probes and Prometheus.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9113")]
    pub(crate) admin_listen: SocketAddr,
    /// Serves /config, which shows every tenant's hosts, paths, endpoints and Secret names:
    /// loopback addresses only (anything else is refused at start-up).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_STATUS_LISTEN)]
    pub(crate) status_listen: SocketAddr,
    /// Worker threads (default: the ConfigMap's worker-processes, else one per CPU).
    #[arg(long, value_name = "N")]
    pub(crate) workers: Option<NonZeroUsize>,
    /// IngressClass name; also matched in the legacy kubernetes.io/ingress.class annotation.
    #[arg(long, value_name = "NAME", default_value = "sluice")]
    pub(crate) ingress_class: String,
    /// The spec.controller value of IngressClasses this controller implements.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "sluice.dev/ingress-controller"
    )]
    pub(crate) controller_class: String,
    /// TLS Secret served to clients without (matching) SNI; else a self-signed certificate.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name)]
    pub(crate) default_tls_secret: Option<NamespacedName>,
    /// ConfigMap holding controller settings.
    #[arg(long, value_name = "NS/NAME", value_parser = namespaced_name, default_value = "sluice/sluice")]
    pub(crate) configmap: NamespacedName,
    /// After SIGTERM, how long /ready answers 503 while the listeners keep accepting and
    /// serving (load balancers and kube-proxy need a few seconds to stop sending), before
    /// they close and requests in flight drain within worker-shutdown-timeout. A second
    /// signal ends it early. ingress-nginx's flag; a bare number is seconds.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = grace_period)]
    pub(crate) shutdown_grace_period: Duration,
}

#[derive(clap::Args, Clone, Debug)]
#[command(next_help_heading = "Kubernetes mode (--kubernetes)")]
pub(crate) struct KubeArgs {
    /// kubeconfig to use (default: in-cluster service account, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "PATH", requires = "kubernetes")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Watch Ingresses, Services, EndpointSlices and Secrets in this namespace only (default: all).
    #[arg(long, value_name = "NS", requires = "kubernetes", value_parser = dns_label)]
    pub(crate) watch_namespace: Option<String>,
    /// Write this Service's address (load balancer, external IPs or cluster IP) into the status
    /// of the Ingresses Sluice serves.
    #[arg(
        long,
        value_name = "NS/NAME",
        requires = "kubernetes",
        value_parser = namespaced_name,
        conflicts_with = "publish_status_address"
    )]
    pub(crate) publish_service: Option<NamespacedName>,
    /// Write these IPs or host names into the status of the Ingresses Sluice serves.
    #[arg(
        long,
        value_name = "ADDR,...",
        requires = "kubernetes",
        value_delimiter = ',',
        value_parser = status_address
    )]
    pub(crate) publish_status_address: Vec<String>,
    /// Name of the Lease (in $POD_NAMESPACE, else the --configmap namespace) that elects the one
    /// replica writing status and Events.
    #[arg(long, value_name = "NAME", default_value = controller::DEFAULT_ELECTION_ID, value_parser = dns_subdomain)]
    pub(crate) election_id: String,
    /// How long a leader's Lease lasts without renewal; it renews every quarter of this.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = lease_duration)]
    // (the literal must equal controller::DEFAULT_LEASE_DURATION; a unit test checks)
    pub(crate) lease_duration: Duration,
    /// Let EndpointSlice addresses that point at the node itself (loopback 127.0.0.0/8 and ::1,
    /// link-local 169.254.0.0/16 and fe80::/10, unspecified 0.0.0.0 and ::) take traffic. By
    /// default they are left out, with a warning, an Event on the Ingress, /config and a metric.
    #[arg(long, requires = "kubernetes")]
    pub(crate) allow_loopback_endpoints: bool,
}

impl Default for KubeArgs {
    fn default() -> KubeArgs {
        KubeArgs {
            kubeconfig: None,
            watch_namespace: None,
            publish_service: None,
            publish_status_address: Vec::new(),
            election_id: controller::DEFAULT_ELECTION_ID.into(),
            lease_duration: controller::DEFAULT_LEASE_DURATION,
            allow_loopback_endpoints: false,
        }
    }
}

/// Runs until SIGTERM or SIGINT, then drains and returns.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    controller::run(args.options())?;
    Ok(())
}

impl ServeArgs {
    /// The flags as the controller's typed options.
    pub(crate) fn options(&self) -> Options {
        let source = match &self.config {
            Some(path) => Source::Files(path.clone()),
            None => Source::Kubernetes(self.kube_options()),
        };
        Options {
            source,
            listen: Listen {
                http: self.http_listen,
                https: self.https_listen,
                admin: self.admin_listen,
                status: self.status_listen,
            },
            workers: self.workers,
            compile: self.compile_options(),
            shutdown_grace_period: self.shutdown_grace_period,
        }
    }

    fn compile_options(&self) -> CompileOptions {
        CompileOptions {
            ingress_class: self.ingress_class.clone(),
            controller_class: self.controller_class.clone(),
            config_map: self.configmap.clone(),
            default_tls_secret: self.default_tls_secret.clone(),
            // Standalone configs run their backends on loopback (the demo, tests, the lab);
            // in a cluster no Pod has such an address.
            node_local_endpoints: if self.kubernetes && !self.kube.allow_loopback_endpoints {
                NodeLocalEndpoints::Refuse
            } else {
                NodeLocalEndpoints::Allow
            },
        }
    }

    fn kube_options(&self) -> KubeOptions {
        let kube = &self.kube;
        let status_addresses = match (
            &kube.publish_service,
            kube.publish_status_address.is_empty(),
        ) {
            (Some(service), _) => StatusAddresses::Service(service.clone()),
            (None, false) => StatusAddresses::Fixed(kube.publish_status_address.clone()),
            (None, true) => StatusAddresses::None,
        };
        KubeOptions {
            kubeconfig: kube.kubeconfig.clone(),
            watch_namespace: kube.watch_namespace.clone(),
            status_addresses,
            election_id: kube.election_id.clone(),
            lease_duration: kube.lease_duration,
        }
    }
}

fn grace_period(text: &str) -> Result<Duration, String> {
    model::settings::parse_duration(text)
        .ok_or_else(|| format!("{text:?}: expected a duration like 5, 5s or 500ms"))
}

fn namespaced_name(text: &str) -> Result<NamespacedName, String> {
    NamespacedName::parse(text).ok_or_else(|| format!("expected NAMESPACE/NAME, got {text:?}"))
}

fn dns_subdomain(text: &str) -> Result<String, String> {
    let valid = !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| dns_label(label).is_ok());
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a valid Kubernetes object name (lower-case letters, digits, '-' and '.')"
        ))
    }
}

fn dns_label(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let valid = !text.is_empty()
        && text.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-';
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a valid Kubernetes name (lower-case letters, digits and '-')"
        ))
    }
}

fn status_address(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() || text.contains(char::is_whitespace) {
        return Err(format!("{text:?} is not an IP address or host name"));
    }
    Ok(text.to_owned())
}

fn lease_duration(text: &str) -> Result<Duration, String> {
    match model::settings::parse_duration(text) {
        Some(duration) if duration >= Duration::from_secs(2) => Ok(duration),
        Some(_) => Err("must be at least 2s".into()),
        None => Err(format!("{text:?}: expected a duration like 15s or 1m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[arg(long)]
        kubernetes: bool,
        #[command(flatten)]
        kube: KubeArgs,
    }

    #[test]
    fn defaults_match_the_command_line() {
        let parsed = Cli::parse_from(["sluice", "--kubernetes"]).kube;
        let default = KubeArgs::default();
        assert_eq!(parsed.election_id, default.election_id);
        assert_eq!(parsed.lease_duration, default.lease_duration);
    }

    #[test]
    fn names_and_durations_are_checked_at_start() {
        assert!(dns_subdomain("sluice-leader").is_ok());
        assert!(dns_subdomain("sluice.leader").is_ok());
        for bad in ["", "Sluice", "-x", "x-", "a b", "a_b"] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
        assert_eq!(lease_duration("4s"), Ok(Duration::from_secs(4)));
        assert!(lease_duration("1s").is_err());
        assert!(lease_duration("soon").is_err());
        assert!(status_address("198.18.0.1").is_ok());
        assert!(status_address(" ").is_err());
    }

    #[test]
    fn kubernetes_flags_need_kubernetes_mode() {
        let error = Cli::try_parse_from(["sluice", "--watch-namespace", "web"])
            .err()
            .expect("--watch-namespace without --kubernetes must be refused");
        assert!(error.to_string().contains("--kubernetes"), "{error}");
        let error = Cli::try_parse_from(["sluice", "--allow-loopback-endpoints"])
            .err()
            .expect("--allow-loopback-endpoints without --kubernetes must be refused");
        assert!(error.to_string().contains("--kubernetes"), "{error}");
        assert!(
            Cli::parse_from(["sluice", "--kubernetes", "--allow-loopback-endpoints"])
                .kube
                .allow_loopback_endpoints
        );
        let both = Cli::try_parse_from([
            "sluice",
            "--kubernetes",
            "--publish-service",
            "a/b",
            "--publish-status-address",
            "198.18.0.1",
        ]);
        assert!(both.is_err(), "the two status sources are exclusive");
    }
}
