//! What a capacity run will do, decided before anything starts: the cases of each study, the
//! worker counts, how CPUs are split between the system under test and the load (pinning),
//! and the command-line arguments they come from.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};

use super::{Pinning, Study};
use crate::host::{compact_timestamp, HOST};
use crate::systems;

/// The second virtual host, served with the ECDSA certificate.
pub const ECDSA_HOST: &str = "ecdsa.example.com";
pub(super) const RSA_SUITE: &str = "ECDHE-RSA-AES256-GCM-SHA384";
pub(super) const ECDSA_SUITE: &str = "ECDHE-ECDSA-AES256-GCM-SHA384";

/// Defaults of a full run and of `--quick`.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(5);
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(1);
pub const DEFAULT_ROUNDS: u32 = 3;
pub const DEFAULT_CONNECTIONS: u32 = 100;
pub const QUICK_DURATION: Duration = Duration::from_secs(2);
pub const QUICK_WARMUP: Duration = Duration::from_millis(500);
pub const QUICK_CONNECTIONS: u32 = 50;

/// The fixed rate of the latency comparison, as a share of the reference's closed-loop RPS.
pub const LATENCY_SHARE: f64 = 0.5;
/// Latency runs last this many times `--duration` (not with `--quick`). On a shared virtual
/// machine a stall of tens of milliseconds comes every few seconds; a 5 s run either has one
/// (and its p99 is the stall) or not, so p99 flipped between ~2 ms and ~30 ms from round to
/// round for every system. Three times as long, a stall is a fraction of the 1 % that p99
/// leaves out, and the rounds agree.
pub const LATENCY_DURATION_FACTOR: u32 = 3;

/// `sluice lab rps|tps|throughput`.
#[derive(clap::Args, Clone, Debug)]
pub struct CapacityArgs {
    /// Systems under test, comma-separated: sluice, nginx, haproxy.
    #[arg(long, value_delimiter = ',', default_value = "sluice,nginx,haproxy")]
    pub systems: Vec<String>,
    /// Worker counts, comma-separated (nginx worker_processes, HAProxy nbthread, Sluice
    /// --workers). Default: 1, 2, 4, … and the CPU count.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub workers: Option<Vec<u32>>,
    /// Short runs and one round: a smoke run (2 s runs, 0.5 s warm-up, 50 connections).
    #[arg(long)]
    pub quick: bool,
    /// Where results go (default lab-results/<timestamp>-<command>/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Length of each measured run (default 5s; 2s with --quick).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Unrecorded load before each measurement, on the same connections (default 1s; 500ms
    /// with --quick).
    #[arg(long, value_name = "DURATION")]
    pub warmup: Option<String>,
    /// Rounds per system and case; systems alternate within each round (default 3; 1 with
    /// --quick).
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// Client connections (default 100; 50 with --quick).
    #[arg(long, value_name = "N")]
    pub connections: Option<u32>,
    /// Do not pin processes to CPUs.
    #[arg(long)]
    pub no_pin: bool,
}

/// `sluice lab sizing`.
#[derive(clap::Args, Clone, Debug)]
pub struct SizingArgs {
    /// Build the table from these results.json files (of lab rps, tps, throughput or sizing)
    /// instead of measuring; then only --out and --cost-per-hour apply.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub from: Vec<PathBuf>,
    /// Price of one CPU (one worker) per hour, any currency: adds the monthly cost and the cost
    /// per million requests.
    #[arg(long, value_name = "PRICE")]
    pub cost_per_hour: Option<f64>,
    #[command(flatten)]
    pub run: CapacityArgs,
}

/// Which studies a command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// RPS, then the latency comparison (it needs the RPS).
    Rps,
    Tps,
    Throughput,
    /// Everything: `sluice lab sizing` without `--from`.
    All,
}

impl Which {
    pub(super) fn command(self) -> &'static str {
        match self {
            Which::Rps => "rps",
            Which::Tps => "tps",
            Which::Throughput => "throughput",
            Which::All => "sizing",
        }
    }

    pub(super) fn includes(self, study: Study) -> bool {
        match self {
            Which::Rps => matches!(study, Study::Rps | Study::Latency),
            Which::Tps => study == Study::Tps,
            Which::Throughput => study == Study::Throughput,
            Which::All => true,
        }
    }
}

/// One kind of load run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Case {
    pub(crate) study: Study,
    pub(crate) name: &'static str,
    pub(crate) https: bool,
    pub(crate) host: &'static str,
    pub(crate) path: &'static str,
    /// The only suite the client offers (HTTPS).
    pub(crate) suite: &'static str,
    /// A new connection per request, `Connection: close` (the TPS test).
    pub(crate) per_request: bool,
    pub(crate) resumption: bool,
}

const fn case(
    study: Study,
    name: &'static str,
    https: bool,
    ecdsa: bool,
    path: &'static str,
    per_request: bool,
    resumption: bool,
) -> Case {
    Case {
        study,
        name,
        https,
        host: if ecdsa { ECDSA_HOST } else { HOST },
        path,
        suite: if ecdsa { ECDSA_SUITE } else { RSA_SUITE },
        per_request,
        resumption,
    }
}

/// Every case, in the order runs happen (the latency comparison after the RPS it depends on).
pub(crate) const CASES: [Case; 9] = [
    case(Study::Rps, "http", false, false, "/1kb.bin", false, false),
    case(Study::Rps, "https", true, false, "/1kb.bin", false, false),
    case(
        Study::Latency,
        "http",
        false,
        false,
        "/1kb.bin",
        false,
        false,
    ),
    case(
        Study::Latency,
        "https",
        true,
        false,
        "/1kb.bin",
        false,
        false,
    ),
    case(Study::Tps, "rsa-full", true, false, "/0kb.bin", true, false),
    case(
        Study::Tps,
        "rsa-resumed",
        true,
        false,
        "/0kb.bin",
        true,
        true,
    ),
    case(
        Study::Tps,
        "ecdsa-full",
        true,
        true,
        "/0kb.bin",
        true,
        false,
    ),
    case(
        Study::Tps,
        "ecdsa-resumed",
        true,
        true,
        "/0kb.bin",
        true,
        true,
    ),
    case(
        Study::Throughput,
        "1mb",
        false,
        false,
        "/1mb.bin",
        false,
        false,
    ),
];

/// Validated settings.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    pub(super) which: Which,
    pub(super) systems: Vec<String>,
    pub(super) workers: Vec<u32>,
    pub(super) duration: Duration,
    /// Of the fixed-rate latency runs.
    pub(super) latency_duration: Duration,
    pub(super) warmup: Duration,
    pub(super) rounds: u32,
    pub(super) connections: u32,
    pub(super) out: PathBuf,
    pub(super) pin: bool,
    pub(super) cpus: usize,
    pub(super) cost_per_cpu_hour: Option<f64>,
}

/// Worker counts measured by default: powers of two below the CPU count, and the CPU count.
pub fn default_workers(cpus: usize) -> Vec<u32> {
    let cpus = u32::try_from(cpus.max(1)).unwrap_or(1);
    let mut w: Vec<u32> = std::iter::successors(Some(1u32), |&n| n.checked_mul(2))
        .take_while(|&n| n < cpus)
        .collect();
    w.push(cpus);
    w
}

/// A `taskset -c` list for CPUs `from..=to`.
pub(super) fn cpu_range(from: usize, to: usize) -> String {
    if from == to {
        from.to_string()
    } else {
        format!("{from}-{to}")
    }
}

/// Where the system under test and the client side run for `workers` on `cpus` CPUs: the SUT
/// on the first `workers` CPUs and load + pods on the rest; when there is no rest (workers ≥
/// CPUs), everything shares every CPU.
pub fn pinning(workers: u32, cpus: usize, pin: bool) -> Pinning {
    let w = usize::try_from(workers).unwrap_or(usize::MAX);
    let dedicated = w < cpus;
    let client = if dedicated { cpus - w } else { cpus.max(1) };
    let threads = u32::try_from(client).unwrap_or(1);
    if !pin || cpus < 2 {
        return Pinning {
            workers,
            sut_cpus: None,
            load_cpus: None,
            load_threads: threads,
            pods: client,
            shared: true,
            description: format!(
                "not pinned: {workers} worker(s), load generator ({threads} thread(s)) and \
                 {client} pod(s) share all {cpus} CPU(s)"
            ),
        };
    }
    let (sut, load) = if dedicated {
        (cpu_range(0, w - 1), cpu_range(w, cpus - 1))
    } else {
        (cpu_range(0, cpus - 1), cpu_range(0, cpus - 1))
    };
    let description = if dedicated {
        format!(
            "system under test ({workers} worker(s)) on CPU {sut}; load generator ({threads} \
             thread(s)) and {client} pod(s) on CPU {load}"
        )
    } else {
        format!(
            "system under test ({workers} worker(s)) on CPUs {sut}, sharing them with the load \
             generator ({threads} thread(s)) and {client} pod(s): with {cpus} CPUs there is none \
             left to dedicate to the client side"
        )
    };
    Pinning {
        workers,
        sut_cpus: Some(sut),
        load_cpus: Some(load),
        load_threads: threads,
        pods: client,
        shared: !dedicated,
        description,
    }
}

pub(super) fn plan(
    which: Which,
    args: CapacityArgs,
    cost_per_cpu_hour: Option<f64>,
) -> anyhow::Result<Plan> {
    let duration_arg =
        |flag: &str, raw: &Option<String>, default: Duration, zero_ok: bool| match raw {
            Some(raw) => load::parse_duration(raw)
                .filter(|d| zero_ok || !d.is_zero())
                .with_context(|| format!("--{flag}: '{raw}' is not a duration like 5s")),
            None => Ok(default),
        };
    let (d, w, c, r) = if args.quick {
        (QUICK_DURATION, QUICK_WARMUP, QUICK_CONNECTIONS, 1)
    } else {
        (
            DEFAULT_DURATION,
            DEFAULT_WARMUP,
            DEFAULT_CONNECTIONS,
            DEFAULT_ROUNDS,
        )
    };
    let duration = duration_arg("duration", &args.duration, d, false)?;
    let warmup = duration_arg("warmup", &args.warmup, w, true)?;
    let rounds = args.rounds.unwrap_or(r);
    let connections = args.connections.unwrap_or(c);
    if rounds == 0 || connections == 0 {
        bail!("--rounds and --connections must be positive");
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut workers = args.workers.unwrap_or_else(|| default_workers(cpus));
    if workers.contains(&0) {
        bail!("--workers: every count must be at least 1");
    }
    workers.sort_unstable();
    workers.dedup();
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
    if let Some(cost) = cost_per_cpu_hour {
        if !(cost.is_finite() && cost >= 0.0) {
            bail!("--cost-per-hour: '{cost}' is not a price");
        }
    }
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from("lab-results").join(format!(
            "{}-{}",
            compact_timestamp(SystemTime::now()),
            which.command()
        ))
    });
    Ok(Plan {
        which,
        systems,
        workers,
        duration,
        latency_duration: if args.quick {
            duration
        } else {
            duration * LATENCY_DURATION_FACTOR
        },
        warmup,
        rounds,
        connections,
        out,
        pin: !args.no_pin && cpus >= 2 && Path::new("/usr/bin/taskset").exists(),
        cpus,
        cost_per_cpu_hour,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_worker_counts_double_up_to_the_cpu_count() {
        assert_eq!(default_workers(1), vec![1]);
        assert_eq!(default_workers(2), vec![1, 2]);
        assert_eq!(default_workers(6), vec![1, 2, 4, 6]);
        assert_eq!(default_workers(8), vec![1, 2, 4, 8]);
    }

    #[test]
    fn two_cpus_one_worker_gets_cpu_0_and_the_client_cpu_1() {
        let p = pinning(1, 2, true);
        assert_eq!(p.sut_cpus.as_deref(), Some("0"));
        assert_eq!(p.load_cpus.as_deref(), Some("1"));
        assert_eq!((p.load_threads, p.pods, p.shared), (1, 1, false));
        let two = pinning(2, 2, true);
        assert_eq!(two.sut_cpus.as_deref(), Some("0-1"));
        assert_eq!(two.load_cpus.as_deref(), Some("0-1"));
        assert_eq!((two.load_threads, two.pods, two.shared), (2, 2, true));
        assert!(two.description.contains("sharing"));
        let four = pinning(2, 4, true);
        assert_eq!(four.sut_cpus.as_deref(), Some("0-1"));
        assert_eq!(four.load_cpus.as_deref(), Some("2-3"));
        let none = pinning(1, 2, false);
        assert_eq!((none.sut_cpus, none.shared), (None, true));
    }

    #[test]
    fn commands_pick_their_cases() {
        let names = |which: Which| -> Vec<String> {
            CASES
                .iter()
                .filter(|c| which.includes(c.study))
                .map(|c| format!("{}/{}", c.study.label(), c.name))
                .collect()
        };
        assert_eq!(
            names(Which::Rps),
            ["rps/http", "rps/https", "latency/http", "latency/https"]
        );
        assert_eq!(
            names(Which::Tps),
            [
                "tps/rsa-full",
                "tps/rsa-resumed",
                "tps/ecdsa-full",
                "tps/ecdsa-resumed"
            ]
        );
        assert_eq!(names(Which::Throughput), ["throughput/1mb"]);
        assert_eq!(names(Which::All).len(), CASES.len());
        let ecdsa = CASES.iter().find(|c| c.name == "ecdsa-full").unwrap();
        assert_eq!((ecdsa.host, ecdsa.suite), (ECDSA_HOST, ECDSA_SUITE));
        assert!(ecdsa.per_request && !ecdsa.resumption);
    }
}
