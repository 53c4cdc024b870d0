//! `lab`: the seeds' experiments, end to end on one machine, against Sluice and real peers.
//!
//! ```text
//!  sluice lab dynamic
//!    for each system × (static | dynamic/graceful | dynamic/kill):
//!      pods: `sluice backend` × 5 on 127.A.B.n:8080      ── CPU 1
//!            (--protocol grpc: scripts/grpc-backend, gRPC over HTTP/2)
//!      SUT:  sluice | nginx | haproxy (TLS, L7, 1 worker) ── CPU 0   ◀── publish(endpoints)
//!      load: `sluice load -L --json` over HTTPS          ── CPU 1        ▲
//!            (--protocol grpc: `--grpc` unary calls over HTTP/2)         │
//!      churn (dynamic): Churn::schedule → Deployment::scale ─────────────┘
//!      probes: `sluice lab stall-probe` on CPU 0 and CPU 1 (stalls::Probes: how late a
//!              sleeping process wakes: the machine's own stalls, beside the run)
//!      load JSON + probe logs ──▶ results::Run (host_stalls: stalls vs the slowest seconds)
//!    LabResults ──▶ results.json, report.md, report.html (SVG), summary on stdout
//!    --rounds N: all of the above N times into round-K/, systems reversed every other round,
//!      then rounds::combine ──▶ rounds.json, rounds.md (counts, medians, pooled histograms)
//!  sluice lab rounds DIR…: rounds::combine over results that already exist
//!
//!  sluice lab rps | tps | throughput | sizing            (capacity::run)
//!    for each worker count: pods + every system (N workers) on the SUT CPUs
//!      for each case × round, systems alternating:
//!        cpu: /proc ticks ── sluice load (closed loop, or -R) ── /proc ticks ──▶ capacity::Measurement
//!    CapacityResults ──▶ medians, saturation, Sluice ÷ nginx, sizing ──▶ results.json, report.md/html
//! ```
//!
//! Every process is started through [`procs`], which stops it again by process group, also on
//! failure and Ctrl-C.

pub mod bench_lock;
pub mod capacity;
pub mod churn;
pub mod cpu;
mod host;
mod pods;
mod procs;
pub mod render;
pub mod results;
pub mod rounds;
pub mod stalls;
mod systems;
pub mod table;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context as _};

use crate::capacity::plan::Which;
pub use crate::capacity::plan::{CapacityArgs, SizingArgs};
use crate::churn::Churn;
use crate::host::{
    compact_timestamp, iso_timestamp, set_mode_755, subnet_seed, write_report_files, WorkDir,
};
use crate::pods::{Deployment, PodProgram, Termination};
use crate::procs::{pinned, Proc};
use crate::results::{LabResults, Run, ScaleEvent, Setup, Skipped};
use crate::systems::{make_cert, Cert, SutEnv, System};

pub use host::HOST;
/// The seeds' cipher suite; the load generator offers only it, so every system negotiates it.
const SEEDS_CIPHER: &str = "ECDHE-RSA-AES256-GCM-SHA384";

/// Default rate for full runs: every system keeps up with it in the static deployment on a
/// 2-CPU machine with 1000 TLS connections (measured; see the README of the lab).
pub const DEFAULT_RATE: u64 = 3000;
/// `--quick`: rate, connections and duration.
pub const QUICK_RATE: u64 = 1000;
pub const QUICK_CONNECTIONS: u32 = 100;
pub const QUICK_DURATION: Duration = Duration::from_secs(30);

/// `sluice lab`.
#[derive(clap::Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum LabCommand {
    /// The seeds' dynamic-Kubernetes experiment: static vs churning backends (5 ↔ 7 pods), for
    /// each system, under constant-rate HTTPS load.
    Dynamic(DynamicArgs),
    /// Requests per second by worker count: 1 KB over HTTP and HTTPS, keep-alive, closed loop;
    /// then p99 of every system at 50 % of nginx's RPS.
    Rps(CapacityArgs),
    /// TLS handshakes per second by worker count: a new connection per request, 0 KB, RSA-2048
    /// and ECDSA P-256, full handshakes and with resumption.
    Tps(CapacityArgs),
    /// Throughput by worker count: 1 MB over HTTP keep-alive, in Gbit/s.
    Throughput(CapacityArgs),
    /// A sizing table (workers → RPS, TLS TPS, cost) from results files, or by running every
    /// capacity study (the full report).
    Sizing(SizingArgs),
    /// How late a thread that only sleeps wakes up on each CPU of an idle machine: the
    /// machine's own stalls, which every system's tail latency includes (`lab dynamic` measures
    /// them beside each run).
    Stalls(stalls::StallsArgs),
    /// Several `lab dynamic` results read as one experiment: per comparison, in how many rounds
    /// each system was at or below the other, the medians, and percentiles over every round's
    /// requests (what one run's p99.99 and p99.999 cannot decide on a machine with host stalls).
    Rounds(rounds::RoundsArgs),
    /// One stall probe (what `lab dynamic` and `lab stalls` run on each CPU).
    #[command(hide = true)]
    StallProbe(stalls::ProbeArgs),
}

#[derive(clap::Args, Debug)]
pub struct DynamicArgs {
    /// Systems under test, comma-separated: sluice, nginx, haproxy.
    #[arg(long, value_delimiter = ',', default_value = "sluice,nginx,haproxy")]
    pub systems: Vec<String>,
    /// Length of each run (default 180s; 30s with --quick).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Requests per second (default: calibrated, see `DEFAULT_RATE`; 1000 with --quick).
    #[arg(long, value_name = "RPS")]
    pub rate: Option<u64>,
    /// Client connections (default 1000; 100 with --quick).
    #[arg(long, value_name = "N")]
    pub connections: Option<u32>,
    /// How removed pods end in the dynamic deployment.
    #[arg(long, value_enum, default_value = "both")]
    pub termination: TerminationArg,
    /// Short runs at a modest rate, for a smoke run.
    #[arg(long)]
    pub quick: bool,
    /// Where results go (default lab-results/<timestamp>-dynamic/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only the static or only the dynamic deployment (default both).
    #[arg(long, value_enum)]
    pub only: Option<DeploymentArg>,
    /// Time at 5 replicas in the churn loop.
    #[arg(long, value_name = "DURATION", default_value = "12s")]
    pub low_for: String,
    /// Time at 7 replicas in the churn loop.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub high_for: String,
    /// Do not pin processes to CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// Repeat the whole experiment this many times, the systems' order reversed every other
    /// round; each round goes into `round-K/`, and `rounds.json` / `rounds.md` read them together
    /// (see `sluice lab rounds`).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub rounds: u32,
    /// Run no stall probe beside each run (each costs ~1.6 % of its CPU: a wake every
    /// millisecond; see crates/lab/README.md, "Host stalls").
    #[arg(long)]
    pub no_stall_probes: bool,
    /// What the clients and pods speak: `https` (the seeds: HTTP/1.1 over TLS to `sluice
    /// backend`) or `grpc` (unary gRPC calls over HTTP/2 with TLS to grpc-go pods, the route
    /// being backend-protocol GRPC; needs SLUICE_GRPC_TOOLS, see scripts/grpc-tools.sh).
    #[arg(long, value_enum, default_value = "https")]
    pub protocol: ProtocolArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProtocolArg {
    Https,
    Grpc,
}

/// The gRPC lab's call: grpc.testing.TestService/UnaryCall asking for a 1 KiB payload, the
/// size of the seeds' HTTP response. The body is the serialized SimpleRequest
/// {response_size: 1024}: field 2, varint 1024.
const GRPC_PATH: &str = "/grpc.testing.TestService/UnaryCall";
const GRPC_REQUEST: [u8; 3] = [0x10, 0x80, 0x08];

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TerminationArg {
    Graceful,
    Kill,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeploymentArg {
    Static,
    Dynamic,
}

/// Validated `sluice lab dynamic` settings.
#[derive(Clone, Debug)]
struct Plan {
    systems: Vec<String>,
    duration: Duration,
    rate: u64,
    connections: u32,
    cases: Vec<Case>,
    churn: Churn,
    out: PathBuf,
    /// (SUT CPUs, load + pods CPUs) when pinning.
    pin: Option<(String, String)>,
    /// `--protocol grpc`: the grpc-backend binary the pods run.
    grpc_backend: Option<PathBuf>,
    /// Whether stall probes run beside each run (`--no-stall-probes` turns them off).
    stall_probes: bool,
    /// Whether the stall probes run at nice -20 (allowed here).
    raised_probes: bool,
    /// `--rounds`: how many times the whole experiment runs.
    rounds: u32,
}

/// One deployment of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Static,
    Dynamic(Termination),
}

impl Case {
    fn deployment(self) -> &'static str {
        match self {
            Case::Static => "static",
            Case::Dynamic(_) => "dynamic",
        }
    }

    fn termination(self) -> &'static str {
        match self {
            Case::Static => "none",
            Case::Dynamic(t) => t.label(),
        }
    }
}

/// Runs `sluice lab`.
pub fn run(args: LabArgs) -> anyhow::Result<()> {
    // Held for the whole run: the lab's systems listen on fixed ports and its CPU figures
    // need the machine to itself. A stall probe runs beside a lab that holds it.
    let _lock = match args.command {
        LabCommand::StallProbe(_) => None,
        _ => Some(bench_lock::one_at_a_time()?),
    };
    match args.command {
        LabCommand::Dynamic(args) => run_dynamic(args),
        LabCommand::Rps(args) => capacity::run::run_capacity(Which::Rps, args, None),
        LabCommand::Tps(args) => capacity::run::run_capacity(Which::Tps, args, None),
        LabCommand::Throughput(args) => capacity::run::run_capacity(Which::Throughput, args, None),
        LabCommand::Sizing(args) => capacity::run::run_sizing(args),
        LabCommand::Stalls(args) => stalls::run_stalls(args),
        LabCommand::Rounds(args) => rounds::run_rounds(args),
        LabCommand::StallProbe(args) => stalls::run_probe(args),
    }
}

fn plan(args: DynamicArgs) -> anyhow::Result<Plan> {
    let duration = match &args.duration {
        Some(raw) => load::parse_duration(raw)
            .filter(|d| !d.is_zero())
            .with_context(|| format!("--duration: '{raw}' is not a duration like 180s"))?,
        None if args.quick => QUICK_DURATION,
        None => Duration::from_secs(180),
    };
    let parse = |flag: &str, raw: &str| {
        load::parse_duration(raw)
            .with_context(|| format!("--{flag}: '{raw}' is not a duration like 12s"))
    };
    let churn = Churn {
        low_for: parse("low-for", &args.low_for)?,
        high_for: parse("high-for", &args.high_for)?,
    };
    let rate = args
        .rate
        .unwrap_or(if args.quick { QUICK_RATE } else { DEFAULT_RATE });
    let connections = args
        .connections
        .unwrap_or(if args.quick { QUICK_CONNECTIONS } else { 1000 });
    if rate == 0 || connections == 0 {
        bail!("--rate and --connections must be positive");
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let mut systems = Vec::new();
    for s in args.systems {
        let s = s.trim().to_lowercase();
        if !systems::ALL.contains(&s.as_str()) {
            bail!(
                "--systems: unknown system '{s}' (known: {})",
                systems::ALL.join(", ")
            );
        }
        if !systems.contains(&s) {
            systems.push(s);
        }
    }
    let terminations = match args.termination {
        TerminationArg::Graceful => vec![Termination::Graceful],
        TerminationArg::Kill => vec![Termination::Kill],
        TerminationArg::Both => vec![Termination::Graceful, Termination::Kill],
    };
    let mut cases = Vec::new();
    if args.only != Some(DeploymentArg::Dynamic) {
        cases.push(Case::Static);
    }
    if args.only != Some(DeploymentArg::Static) {
        cases.extend(terminations.into_iter().map(Case::Dynamic));
    }
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from("lab-results")
            .join(format!("{}-dynamic", compact_timestamp(SystemTime::now())))
    });
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let pin = (!args.no_pin && cpus >= 2 && Path::new("/usr/bin/taskset").exists()).then(|| {
        (
            "0".to_owned(),
            if cpus >= 3 {
                "1-".to_owned() + &(cpus - 1).to_string()
            } else {
                "1".to_owned()
            },
        )
    });
    let grpc_backend = match args.protocol {
        ProtocolArg::Https => None,
        ProtocolArg::Grpc => Some(grpc_backend()?),
    };
    Ok(Plan {
        systems,
        duration,
        rate,
        connections,
        cases,
        churn,
        out,
        pin,
        grpc_backend,
        stall_probes: !args.no_stall_probes,
        raised_probes: stalls::raised_priority_allowed(),
        rounds: args.rounds,
    })
}

/// `$SLUICE_GRPC_TOOLS/grpc-backend`, the gRPC lab's pod.
fn grpc_backend() -> anyhow::Result<PathBuf> {
    let tools = std::env::var_os("SLUICE_GRPC_TOOLS").context(
        "--protocol grpc needs the gRPC pods: build them with `scripts/grpc-tools.sh` and set \
         SLUICE_GRPC_TOOLS to the folder it prints",
    )?;
    let binary = Path::new(&tools).join("grpc-backend");
    if !binary.is_file() {
        bail!(
            "SLUICE_GRPC_TOOLS={}: no grpc-backend there (run scripts/grpc-tools.sh)",
            binary.display()
        );
    }
    Ok(binary)
}

fn run_dynamic(args: DynamicArgs) -> anyhow::Result<()> {
    let plan = plan(args)?;
    procs::install_signal_handler()?;
    let exe = std::env::current_exe().context("finding the sluice binary")?;
    if plan.rounds == 1 {
        let results = run_round(&plan, &exe)?;
        print!("{}", render::summary(&results));
        eprintln!("sluice lab: results in {}", plan.out.display());
        return Ok(());
    }
    let mut read = Vec::new();
    let mut failed = Vec::new();
    for round in 1..=plan.rounds {
        let mut systems = plan.systems.clone();
        // Every other round the other way round, so a drift of the machine over the rounds
        // does not always fall on the same system.
        if round % 2 == 0 {
            systems.reverse();
        }
        let out = plan.out.join(format!("round-{round}"));
        eprintln!(
            "sluice lab dynamic: round {round} of {} ({}), into {}",
            plan.rounds,
            systems.join(", "),
            out.display()
        );
        let round_plan = Plan {
            systems,
            out: out.clone(),
            ..plan.clone()
        };
        match run_round(&round_plan, &exe) {
            Ok(results) => {
                print!("{}", render::summary(&results));
                read.push((out.join("results.json").display().to_string(), results));
            }
            // An hour of rounds is not thrown away for one that failed: the others are still
            // read together, and the command fails at the end.
            Err(error) => {
                procs::park_if_stopping();
                eprintln!("sluice lab dynamic: round {round} failed: {error:#}");
                failed.push(round);
            }
        }
    }
    if read.is_empty() {
        bail!("no round completed");
    }
    let combined = rounds::combine(&read)?;
    rounds::write(&plan.out, &combined)?;
    print!("{}", rounds::summary(&combined));
    eprintln!(
        "sluice lab: {} rounds in {} (rounds.md reads them together)",
        read.len(),
        plan.out.display()
    );
    if !failed.is_empty() {
        bail!(
            "round(s) {failed:?} of {} failed (see above); rounds.md reads the others",
            plan.rounds
        );
    }
    Ok(())
}

/// One pass of the experiment: every system × case, into `plan.out`.
fn run_round(plan: &Plan, exe: &Path) -> anyhow::Result<LabResults> {
    let started = SystemTime::now();
    std::fs::create_dir_all(plan.out.join("runs"))
        .with_context(|| format!("creating {}", plan.out.display()))?;
    let work = WorkDir::new()?;
    let (cert_pem, key_pem) = make_cert(&work.0)?;
    std::fs::copy(&cert_pem, plan.out.join("ca.pem"))?;

    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let pinning = match &plan.pin {
        Some((sut, rest)) => format!(
            "system under test on CPU {sut}; load generator and pods on CPU {rest} (taskset -c)"
        ),
        None => "none (fewer than 2 CPUs, taskset missing, or --no-pin)".to_owned(),
    };
    let setup = Setup {
        cpus,
        pinning: pinning.clone(),
        duration_secs: plan.duration.as_secs_f64(),
        rate: plan.rate,
        connections: plan.connections,
        threads: 1,
        tls: format!("TLS 1.2 {SEEDS_CIPHER}, RSA-2048 certificate for app.example.com, no session resumption"),
        protocol: match plan.grpc_backend {
            None => results::PROTOCOL_HTTPS.to_owned(),
            Some(_) => results::PROTOCOL_GRPC.to_owned(),
        },
        host: HOST.into(),
        machine: Some(stalls::machine_facts()),
        churn: format!(
            "start at 5 pods; every {:?} at 5 → scale to 7, every {:?} at 7 → scale to 5",
            plan.churn.low_for, plan.churn.high_for
        ),
    };
    eprintln!(
        "sluice lab dynamic: {} req/s, {} connections, {:?} per run; pinning: {pinning}",
        plan.rate, plan.connections, plan.duration
    );

    let mut skipped = Vec::new();
    let mut available = Vec::new();
    for name in &plan.systems {
        match systems::make(name) {
            Ok(_) => available.push(name.clone()),
            Err(error) => {
                eprintln!("sluice lab: skipping {name}: {error:#}");
                skipped.push(Skipped {
                    system: name.clone(),
                    reason: format!("{error:#}"),
                });
            }
        }
    }
    let total = available.len() * plan.cases.len();
    let subnet = subnet_seed();
    let mut runs = Vec::new();
    let mut index = 0;
    for name in &available {
        for &case in &plan.cases {
            index += 1;
            let label = format!("{name} {}/{}", case.deployment(), case.termination());
            procs::park_if_stopping();
            match run_one(
                plan,
                exe,
                &work.0,
                &cert_pem,
                &key_pem,
                name,
                case,
                subnet,
                (index, total),
            ) {
                Ok(run) => {
                    eprintln!(
                        "\r[{index}/{total}] {label}: {} requests, {:.0} req/s, errors {}, p99 {:.1} ms{:20}",
                        run.requests,
                        run.rate_achieved,
                        run.errors.total(),
                        run.latency_ms.p99,
                        ""
                    );
                    runs.push(run);
                }
                Err(error) => {
                    // Interrupted: the failure is the interruption, not the system.
                    procs::park_if_stopping();
                    eprintln!("\r[{index}/{total}] {label}: failed: {error:#}");
                    skipped.push(Skipped {
                        system: name.clone(),
                        reason: format!("{}/{}: {error:#}", case.deployment(), case.termination()),
                    });
                }
            }
        }
    }

    let results = LabResults {
        schema: results::SCHEMA.to_owned(),
        started_at: iso_timestamp(started),
        setup,
        skipped,
        runs,
    };
    write_outputs(&plan.out, &results)?;
    if results.runs.is_empty() {
        print!("{}", render::summary(&results));
        bail!("no run completed");
    }
    Ok(results)
}

/// Writes results.json, report.md and report.html into `out`.
pub fn write_outputs(out: &Path, results: &LabResults) -> anyhow::Result<()> {
    write_report_files(
        out,
        results,
        render::markdown(results),
        render::html(results),
    )
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    plan: &Plan,
    exe: &Path,
    work: &Path,
    cert_pem: &Path,
    key_pem: &Path,
    name: &str,
    case: Case,
    subnet: [u8; 2],
    (index, total): (usize, usize),
) -> anyhow::Result<Run> {
    let tag = format!("{name}-{}-{}", case.deployment(), case.termination());
    let dir = work.join(&tag);
    std::fs::create_dir_all(&dir)?;
    set_mode_755(&dir)?;
    let (sut_cpus, rest_cpus) = match &plan.pin {
        Some((a, b)) => (Some(a.clone()), Some(b.clone())),
        None => (None, None),
    };
    // Each run gets fresh pod IPs so draining pods of the last run never meet this one.
    let run_subnet = [
        subnet[0],
        subnet[1].wrapping_add(u8::try_from(index * 4 % 200)?),
    ];
    let program = match &plan.grpc_backend {
        None => PodProgram::Http(exe.to_owned()),
        Some(binary) => PodProgram::Grpc(binary.clone()),
    };
    let mut deployment = Deployment::new(program, rest_cpus.clone(), dir.clone(), run_subnet);
    deployment.start_pods(churn::LOW_REPLICAS)?;

    let mut system: Box<dyn System> = systems::make(name)?;
    let env = SutEnv {
        dir: dir.join(name),
        certs: vec![Cert {
            host: HOST.to_owned(),
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
        }],
        cpus: sut_cpus,
        exe: exe.to_owned(),
        workers: 1,
        grpc: plan.grpc_backend.is_some(),
    };
    let result = (|| {
        let addr = system
            .start(&env, &deployment.endpoints())
            .with_context(|| format!("starting {}", system.name()))?
            .https;
        measure(
            plan,
            exe,
            &dir,
            cert_pem,
            &tag,
            addr,
            &mut deployment,
            system.as_mut(),
            case,
            rest_cpus,
            (index, total),
        )
    })();
    system.stop();
    deployment.stop_all();
    let (load, events, host_stalls) = result?;
    // Keep each run's raw load JSON beside the results too.
    let raw = serde_json::to_string_pretty(&load)?;
    std::fs::write(
        plan.out.join("runs").join(format!("{tag}.load.json")),
        raw + "\n",
    )?;
    let mut run = Run::new(name, case.deployment(), case.termination(), events, load);
    run.host_stalls = host_stalls;
    Ok(run)
}

#[allow(clippy::too_many_arguments)]
fn measure(
    plan: &Plan,
    exe: &Path,
    dir: &Path,
    cert_pem: &Path,
    tag: &str,
    addr: SocketAddr,
    deployment: &mut Deployment,
    system: &mut dyn System,
    case: Case,
    load_cpus: Option<String>,
    (index, total): (usize, usize),
) -> anyhow::Result<(load::Results, Vec<ScaleEvent>, Option<stalls::HostStalls>)> {
    let json = dir.join("load.json");
    let mut cmd = pinned(load_cpus.as_deref(), exe);
    cmd.arg("load")
        .args(["-t", "1", "-c"])
        .arg(plan.connections.to_string())
        .arg("-d")
        .arg(format!("{}ms", plan.duration.as_millis()))
        .arg("-R")
        .arg(plan.rate.to_string())
        .arg("-L")
        .arg("--connect-to")
        .arg(addr.to_string())
        .arg("--cacert")
        .arg(cert_pem)
        // The seeds' suite (TLS 1.2, ECDHE-RSA-AES256-GCM-SHA384), the same for every system.
        .arg("--tls-ciphers")
        .arg(SEEDS_CIPHER)
        .arg("--json")
        .arg(&json);
    if plan.grpc_backend.is_some() {
        let body = dir.join("grpc-request.bin");
        std::fs::write(&body, GRPC_REQUEST)?;
        cmd.arg("--grpc")
            .arg("--body")
            .arg(&body)
            .arg(format!("https://{HOST}{GRPC_PATH}"));
    } else {
        cmd.arg(format!("https://{HOST}/"));
    }
    let log = dir.join("load.log");
    // The machine's own stalls during the run, on the system's CPU and the load's.
    let places = match &plan.pin {
        Some((sut, rest)) => vec![
            (Some(sut.clone()), "system under test"),
            (Some(rest.clone()), "load generator and pods"),
        ],
        None => vec![(None, "unpinned")],
    };
    let probes = plan
        .stall_probes
        .then(|| {
            stalls::Probes::start(
                exe,
                dir,
                &places,
                plan.raised_probes,
                plan.duration + Duration::from_secs(60),
            )
        })
        .transpose()?;
    let mut load = Proc::spawn("sluice load", cmd, &log)?;
    let t0 = Instant::now();
    let steps = match case {
        Case::Static => Vec::new(),
        Case::Dynamic(_) => plan.churn.schedule(plan.duration),
    };
    let termination = match case {
        Case::Dynamic(t) => t,
        Case::Static => Termination::Graceful,
    };
    let mut next = steps.iter().peekable();
    let mut events = Vec::new();
    let deadline = plan.duration + Duration::from_secs(30);
    let mut last_progress = Duration::ZERO;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let status = loop {
        if let Some(status) = load.try_wait() {
            break status;
        }
        let now = t0.elapsed();
        if let Some(step) = next.next_if(|s| s.at <= now) {
            let from = deployment.len();
            let ready = deployment.scale(step.replicas, system, termination)?;
            events.push(ScaleEvent {
                at_secs: t0.elapsed().as_secs_f64(),
                from,
                to: step.replicas,
                ready_secs: ready.as_secs_f64(),
            });
        }
        if now >= deadline {
            load.stop(Duration::from_secs(1));
            bail!("sluice load did not finish within {deadline:?}");
        }
        // A line rewritten every second on a terminal; every 10 s, one per line, in a log.
        let every = if tty { 1 } else { 10 };
        if now >= last_progress + Duration::from_secs(every) {
            last_progress = now;
            eprint!(
                "{}[{index}/{total}] {tag}: {:>4}/{} s, {} pods, {} scale events{}",
                if tty { "\r" } else { "" },
                now.as_secs(),
                plan.duration.as_secs(),
                deployment.len(),
                events.len(),
                if tty { "   " } else { "\n" },
            );
            let _ = std::io::stderr().flush();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(load);
    let probe_logs = probes.map(stalls::Probes::finish).transpose()?;
    let text = std::fs::read_to_string(&json).with_context(|| {
        format!(
            "sluice load ({status}) wrote no results; its output:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })?;
    let results: load::Results =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))?;
    let host_stalls = probe_logs.map(|logs| {
        stalls::HostStalls::new(logs, &results.series, results.measurement_started_unix_secs)
    });
    Ok((results, events, host_stalls))
}
