//! `sluice`: the command line. Parses, then hands off to the subcommand's module.
//!
//! ```text
//!  argv ──▶ ingress_nginx_entry::rewrite (the ingress-nginx chart's `/nginx-ingress-controller`
//!           args ─▶ serve --kubernetes; its preStop `/wait-shutdown` ─▶ wait-shutdown)
//!       ──▶ serve: ingress_nginx_flags::check (ingress-nginx flags Sluice does not take)
//!       ──clap──▶ serve   ──▶ serve::run ──▶ controller::run (provider → Store → compile → proxy)
//!              ├─▶ migrate ──▶ migrate::run (a verdict per Ingress of an ingress-nginx config)
//!              ├─▶ backend ──▶ backend::run_until_signal (the seeds' test app)
//!              ├─▶ load    ──▶ load::run_cli (wrk2-compatible constant-rate load generator)
//!              ├─▶ demo    ──▶ demo::run    (demo backends + example config + serve)
//!              ├─▶ lab     ──▶ lab::run     (the seeds' experiments against Sluice and peers)
//!              ├─▶ kube-webhook-certgen ──▶ create / patch the webhook's Secret and caBundle
//!              └─▶ wait-shutdown ──▶ SIGTERM to this container's `sluice serve`, wait for its
//!                                    drain
//! ```

mod demo;
mod ingress_nginx_entry;
mod ingress_nginx_flags;
mod kube_webhook_certgen;
mod migrate;
mod serve;
mod webhook_cert;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A Kubernetes Ingress controller that never reloads"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the ingress proxy.
    Serve(Box<serve::ServeArgs>),
    /// Judge every Ingress of an ingress-nginx configuration: served as ingress-nginx would,
    /// with differences, or not as written (exit 1).
    Migrate(migrate::MigrateArgs),
    /// Make the admission webhook's certificate Secret and set its CA in the
    /// ValidatingWebhookConfiguration (what deploy/'s Job runs; no cert-manager needed).
    WebhookCert(webhook_cert::WebhookCertArgs),
    /// ingress-nginx's kube-webhook-certgen (`create`, `patch`), for its chart's certificate
    /// Jobs run with Sluice's image (whose args `create …`/`patch …` land here).
    KubeWebhookCertgen(kube_webhook_certgen::CertgenArgs),
    /// Run the test application (the seeds' ~1 KB metadata app, fixed-size files, echo).
    Backend(BackendArgs),
    /// Run the proxy on a built-in example config with two demo backends.
    Demo(demo::DemoArgs),
    /// Generate HTTP(S) load at a constant rate and report coordinated-omission-corrected latency.
    Load(load::LoadArgs),
    /// Run the seeds' experiments end to end against Sluice, nginx and HAProxy, and report.
    Lab(lab::LabArgs),
    /// Stop this container's `sluice serve` (SIGTERM) and wait until it has drained: the
    /// ingress-nginx chart's preStop hook (`/wait-shutdown`, a link to sluice in the images).
    WaitShutdown,
}

#[derive(clap::Args)]
struct BackendArgs {
    /// Address to listen on; repeat for several.
    #[arg(long, value_name = "ADDR", required = true)]
    listen: Vec<std::net::SocketAddr>,
    /// Name reported in responses.
    #[arg(long, default_value = "backend")]
    name: String,
}

fn main() -> ExitCode {
    raise_bind_capability();
    let mut args = ingress_nginx_entry::rewrite(std::env::args_os().collect());
    if args.get(1).is_some_and(|command| command == "serve") {
        // ingress-nginx's flags Sluice does not take say so, before clap's generic error.
        args = match ingress_nginx_flags::check(args) {
            Ok(args) => args,
            Err(message) => {
                eprintln!("sluice: error: {message}");
                return ExitCode::from(2);
            }
        };
    }
    let cli = Cli::parse_from(args);
    let verbosity = match &cli.command {
        Command::Serve(args) => args.verbosity,
        _ => None,
    };
    init_logging(verbosity);
    let result = match cli.command {
        Command::Serve(args) => {
            let post_shutdown_grace = args.post_shutdown_grace_period;
            let served = serve::run(*args);
            // Drained (or never started): a preStop `/wait-shutdown` may be waiting.
            ingress_nginx_entry::release_waiters(match served {
                Ok(()) => post_shutdown_grace,
                Err(_) => std::time::Duration::ZERO,
            });
            served
        }
        Command::Demo(args) => demo::run(args),
        Command::Migrate(args) => match migrate::run(args) {
            Ok(code) => return code,
            Err(error) => {
                // 1 means "an Ingress is not served as written": a failure to judge is 2.
                eprintln!("sluice: error: {error:#}");
                return ExitCode::from(2);
            }
        },
        Command::WebhookCert(args) => webhook_cert::run(args),
        Command::KubeWebhookCertgen(args) => kube_webhook_certgen::run(args),
        Command::Backend(args) => run_backend(args),
        Command::Lab(args) => lab::run(args),
        Command::WaitShutdown => return ingress_nginx_entry::wait_shutdown(),
        Command::Load(args) => match load::run_cli(args) {
            Ok(code) => return ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(error) => Err(error),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sluice: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Makes NET_BIND_SERVICE effective when it is permitted. The image's binary carries it as a
/// *permitted-only* file capability (`cap_net_bind_service=+p`): the kernel then grants it where
/// the container's bounding set holds it (the controller's `add: [NET_BIND_SERVICE]`) and still
/// execs the binary where it does not (Jobs that drop ALL: with the effective bit set, exec fails
/// with "operation not permitted"). A capability-aware program raises it itself, here, before
/// any thread exists: capabilities are per thread, and threads inherit them.
fn raise_bind_capability() {
    use rustix::thread::{capabilities, set_capabilities, CapabilitySet};
    let Ok(mut sets) = capabilities(None) else {
        return;
    };
    let bind = CapabilitySet::NET_BIND_SERVICE;
    if sets.permitted.contains(bind) && !sets.effective.contains(bind) {
        sets.effective |= bind;
        // On failure the bind of a port below 1024 says what is missing.
        let _ = set_capabilities(None, sets);
    }
}

fn run_backend(args: BackendArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(backend::run_until_signal(backend::BackendConfig {
        listen: args.listen,
        name: args.name,
    }))?;
    Ok(())
}

/// SLUICE_LOG when set, else the level ingress-nginx's `--v=N` asks for, else info.
fn init_logging(verbosity: Option<u8>) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let level = match verbosity {
        None | Some(0..=2) => "info",
        Some(3..=4) => "debug",
        Some(_) => "trace",
    };
    // kube-runtime's watcher logs each failed attempt at warn, and kube-client each failed
    // request at error (and a watch the API server cut at warn), for every watch, every retry,
    // while an API server is away; Sluice's own watch says what failed once per outage, with
    // what to do. Theirs stay quiet unless SLUICE_LOG names kube_runtime or kube_client.
    const QUIET: &str = "kube_runtime::watcher=error,kube_client::client::builder=off,\
                         kube_client::client=error";
    let directives = match std::env::var("SLUICE_LOG") {
        Ok(set) if set.contains("kube_runtime") || set.contains("kube_client") => set,
        Ok(set) => format!("{set},{QUIET}"),
        Err(_) => format!("{level},{QUIET}"),
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only help a person at a terminal; in files and pipes they are noise.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
