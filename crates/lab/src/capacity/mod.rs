//! The seeds' capacity studies (RPS, TLS TPS, throughput by worker count), the latency comparison
//! and the EKS-style sizing table: the results model and the pure arithmetic over it.
//!
//! ```text
//!  run.rs: per worker count, per case, per round, alternating systems:
//!     /proc CPU before ─ sluice load (closed loop, or -R) ─ /proc CPU after ──▶ Measurement
//!  CapacityResults { setup, runs: [Measurement] }  ──▶ results.json
//!       │ aggregate(): group by (study, case, system, workers) → median, min, max
//!       ├─▶ ratios(): Sluice ÷ nginx against the targets
//!       ├─▶ sizing(): workers → RPS / TPS / cost per million requests
//!       └─▶ render.rs: report.md, report.html (SVG bars), stdout summary
//! ```
//!
//! Everything here is a function of the numbers it is given, so reports re-render from
//! `results.json` and the arithmetic is unit-tested without processes.

pub mod plan;
pub mod render;
pub mod run;

use std::collections::BTreeMap;

use load::{ErrorCounts, Handshakes};
use serde::{Deserialize, Serialize};

pub use crate::results::{LatencyMs, Skipped};

/// Schema tag of a capacity `results.json`.
pub const SCHEMA: &str = "sluice-lab-capacity/1";

/// A process at or above this share of its CPUs is saturated ("near 100 %": CPU accounting in
/// ticks and interrupt time charged elsewhere keep a saturated process a little under 100 %).
pub const SATURATED: f64 = 0.85;
/// A fixed-rate run that achieved this share of its rate kept up.
pub const KEPT_UP: f64 = 0.97;
/// Other processes using more than this share of the machine make a run noisy.
pub const NOISY: f64 = 0.10;

/// Everything one `sluice lab rps|tps|throughput|sizing` produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CapacityResults {
    pub schema: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started_at: String,
    /// `rps`, `tps`, `throughput` or `sizing`.
    pub command: String,
    pub setup: Setup,
    pub skipped: Vec<Skipped>,
    pub runs: Vec<Measurement>,
    /// `sluice lab sizing --cost-per-hour`: the price of one CPU (one worker) per hour.
    #[serde(default)]
    pub cost_per_cpu_hour: Option<f64>,
}

/// What every run shared.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Setup {
    pub cpus: usize,
    pub cpu_model: String,
    /// `CLK_TCK`: the resolution of the CPU times.
    pub clock_ticks_per_second: u64,
    pub duration_secs: f64,
    pub warmup_secs: f64,
    pub rounds: u32,
    pub connections: u32,
    /// How processes were placed, per worker count.
    pub pinning: Vec<Pinning>,
    /// Program versions by system name.
    pub versions: BTreeMap<String, String>,
    /// Method notes, in words (TLS, resumption, what CPU per request includes).
    pub notes: Vec<String>,
    /// `sizing --from`: the results files merged.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// Placement for one worker count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pinning {
    pub workers: u32,
    /// `taskset -c` list of the system under test; `null` when not pinned.
    pub sut_cpus: Option<String>,
    /// `taskset -c` list of the load generator and the backend pods.
    pub load_cpus: Option<String>,
    pub load_threads: u32,
    pub pods: usize,
    /// True when the system under test shares CPUs with the load generator and pods.
    pub shared: bool,
    pub description: String,
}

/// The four measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Study {
    /// Closed loop, keep-alive, 1 KB: requests per second.
    Rps,
    /// Fixed rate at half of the reference's RPS: p99.
    Latency,
    /// New TLS connection per request, 0 KB: handshakes per second.
    Tps,
    /// Closed loop, keep-alive, 1 MB: Gbit/s.
    Throughput,
}

impl Study {
    pub fn label(self) -> &'static str {
        match self {
            Study::Rps => "rps",
            Study::Latency => "latency",
            Study::Tps => "tps",
            Study::Throughput => "throughput",
        }
    }

    /// The unit of the headline figure.
    pub fn unit(self) -> &'static str {
        match self {
            Study::Rps => "req/s",
            Study::Latency => "ms p99",
            Study::Tps => "handshakes/s",
            Study::Throughput => "Gbit/s",
        }
    }
}

/// Which resource limited a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// The system under test used (nearly) all of its CPUs.
    Sut,
    /// The load generator (with the pods on its CPUs) used (nearly) all of its CPUs.
    Client,
    /// SUT, load generator and pods share the CPUs, and together used (nearly) all of them.
    SharedCpu,
    /// A fixed-rate run that kept up: nothing was saturated, by design.
    FixedRate,
    /// The CPUs were saturated, but not by the lab: other processes took the time.
    Contended,
    /// No CPU was saturated: round trips, scheduling or the backends limited the run.
    Latency,
}

impl Bound {
    pub fn label(self) -> &'static str {
        match self {
            Bound::Sut => "SUT-bound",
            Bound::Client => "client-bound",
            Bound::SharedCpu => "shared-CPU-bound",
            Bound::FixedRate => "fixed rate",
            Bound::Contended => "contended",
            Bound::Latency => "latency-bound",
        }
    }
}

/// One load run against one system.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    pub study: Study,
    /// `http`, `https`, `rsa-full`, `rsa-resumed`, `ecdsa-full`, `ecdsa-resumed`, `1mb`.
    pub case: String,
    pub system: String,
    pub workers: u32,
    pub round: u32,
    pub url: String,
    pub connections: u32,
    pub threads: u32,
    /// `-R` for fixed-rate runs; `null` for closed loop.
    pub rate_requested: Option<f64>,
    pub duration_secs: f64,
    /// Complete responses in the measurement (after the warm-up).
    pub requests: u64,
    /// Complete responses during the warm-up.
    pub warmup_requests: u64,
    /// Requests (or, for TPS, connections) per second in the measurement.
    pub rate_achieved: f64,
    /// Bytes read in the measurement, as Gbit/s.
    pub gbps: f64,
    pub bytes_read: u64,
    pub errors: ErrorCounts,
    /// TLS handshakes the client completed, by kind (warm-up included).
    pub handshakes: Handshakes,
    /// Coordinated-omission corrected (in closed loop: from the actual send).
    pub latency_ms: LatencyMs,
    pub cpu: CpuUse,
    pub bound: Bound,
}

/// CPU time over one run, from `/proc`, bracketing the load generator's whole life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    /// From just before the load generator started to just after it exited.
    pub wall_secs: f64,
    /// utime + stime of every process of the system under test.
    pub sut_secs: f64,
    /// CPUs the system under test may run on.
    pub sut_cpus: u32,
    /// utime + stime of the load generator.
    pub load_secs: f64,
    /// CPUs the load generator (and the pods) may run on.
    pub load_cpus: u32,
    /// utime + stime of the backend pods.
    pub pods_secs: f64,
    /// SUT and load generator share their CPUs.
    pub shared: bool,
    /// Busy time of the whole machine (all CPUs, every process).
    pub machine_busy_secs: f64,
    pub machine_cpus: u32,
    /// SUT CPU time per completed request (warm-up included on both sides), in µs.
    pub sut_us_per_request: f64,
    /// sut_secs / (wall × sut_cpus).
    pub sut_util: f64,
    /// load_secs / (wall × load_cpus).
    pub load_util: f64,
    /// (load + pods) / (wall × load_cpus): the client side's CPUs.
    pub client_side_util: f64,
    /// Busy time of other processes (not SUT, load or pods) as a share of the machine.
    pub others_util: f64,
    /// How busy the SUT's CPUs were, by any process (from /proc/stat).
    #[serde(default)]
    pub sut_cpuset_busy: f64,
    /// How busy the load generator's CPUs were, by any process.
    #[serde(default)]
    pub load_cpuset_busy: f64,
}

impl CpuUse {
    /// Derives the shares from the raw times; `completed` counts warm-up and measured responses.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        wall_secs: f64,
        sut_secs: f64,
        sut_cpus: u32,
        load_secs: f64,
        load_cpus: u32,
        pods_secs: f64,
        shared: bool,
        machine_busy_secs: f64,
        machine_cpus: u32,
        completed: u64,
    ) -> CpuUse {
        let share = |secs: f64, cpus: u32| {
            if wall_secs > 0.0 && cpus > 0 {
                secs / (wall_secs * f64::from(cpus))
            } else {
                0.0
            }
        };
        let ours = sut_secs + load_secs + pods_secs;
        CpuUse {
            wall_secs,
            sut_secs,
            sut_cpus,
            load_secs,
            load_cpus,
            pods_secs,
            shared,
            machine_busy_secs,
            machine_cpus,
            sut_us_per_request: if completed > 0 {
                sut_secs * 1e6 / completed as f64
            } else {
                0.0
            },
            sut_util: share(sut_secs, sut_cpus),
            load_util: share(load_secs, load_cpus),
            client_side_util: share(load_secs + pods_secs, load_cpus),
            others_util: share((machine_busy_secs - ours).max(0.0), machine_cpus),
            sut_cpuset_busy: 0.0,
            load_cpuset_busy: 0.0,
        }
    }

    /// With how busy (by anyone) the SUT's and the load generator's CPUs were.
    pub fn with_cpusets(mut self, sut_busy: f64, load_busy: f64) -> CpuUse {
        self.sut_cpuset_busy = sut_busy;
        self.load_cpuset_busy = load_busy;
        self
    }

    /// (SUT + load + pods) as a share of the CPUs they share.
    pub fn shared_util(&self) -> f64 {
        let cpus = self.sut_cpus.max(self.load_cpus);
        if self.wall_secs > 0.0 && cpus > 0 {
            (self.sut_secs + self.load_secs + self.pods_secs) / (self.wall_secs * f64::from(cpus))
        } else {
            0.0
        }
    }

    /// Requests (or handshakes) per second of SUT CPU: capacity that holds whichever side limits.
    pub fn per_cpu_second(&self) -> f64 {
        if self.sut_us_per_request > 0.0 {
            1e6 / self.sut_us_per_request
        } else {
            0.0
        }
    }

    pub fn noisy(&self) -> bool {
        self.others_util > NOISY
    }
}

/// Which resource limited a run: fixed-rate runs that kept up are not limited; otherwise a
/// process near 100 % of its CPUs, SUT first; CPUs shared by all saturated together; CPUs
/// saturated by other processes (contended); else latency.
pub fn classify(cpu: &CpuUse, rate_requested: Option<f64>, rate_achieved: f64) -> Bound {
    if let Some(rate) = rate_requested {
        if rate_achieved >= KEPT_UP * rate {
            return Bound::FixedRate;
        }
    }
    let contended = cpu.sut_cpuset_busy >= SATURATED || cpu.load_cpuset_busy >= SATURATED;
    if cpu.shared {
        if cpu.shared_util() >= SATURATED {
            Bound::SharedCpu
        } else if contended {
            Bound::Contended
        } else {
            Bound::Latency
        }
    } else if cpu.sut_util >= SATURATED {
        Bound::Sut
    } else if cpu.load_util >= SATURATED || cpu.client_side_util >= SATURATED {
        Bound::Client
    } else if contended {
        Bound::Contended
    } else {
        Bound::Latency
    }
}

/// Median, minimum and maximum of some rounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Spread {
    /// None for no values; NaN values are left out.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// (max − min) / median, the spread relative to the median.
    pub fn relative(&self) -> f64 {
        if self.median.abs() > 0.0 {
            (self.max - self.min) / self.median.abs()
        } else {
            0.0
        }
    }
}

/// What identifies comparable rounds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub study: Study,
    pub case: String,
    pub workers: u32,
    pub system: String,
}

/// The rounds of one (study, case, workers, system), summarised.
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    pub key: Key,
    /// The headline: req/s, handshakes/s, Gbit/s, or p99 ms for the latency study.
    pub value: Spread,
    pub sut_us_per_request: Spread,
    /// Requests (handshakes) per SUT CPU-second.
    pub per_cpu_second: Spread,
    pub sut_util: f64,
    pub load_util: f64,
    pub rate_requested: Option<f64>,
    /// The most frequent bound among the rounds (ties: the first in `Bound` order).
    pub bound: Bound,
    pub errors: u64,
    pub handshakes: Handshakes,
    pub noisy_rounds: usize,
}

/// The headline figure of a run.
pub fn headline(m: &Measurement) -> f64 {
    match m.study {
        Study::Rps | Study::Tps => m.rate_achieved,
        Study::Throughput => m.gbps,
        Study::Latency => m.latency_ms.p99,
    }
}

/// Groups runs by [`Key`] (sorted: study, case, workers, system order of first appearance is
/// not kept; use [`system_order`] for display).
pub fn aggregate(runs: &[Measurement]) -> Vec<Aggregate> {
    let mut groups: BTreeMap<Key, Vec<&Measurement>> = BTreeMap::new();
    for m in runs {
        groups
            .entry(Key {
                study: m.study,
                case: m.case.clone(),
                workers: m.workers,
                system: m.system.clone(),
            })
            .or_default()
            .push(m);
    }
    groups
        .into_iter()
        .filter_map(|(key, ms)| {
            let values: Vec<f64> = ms.iter().map(|m| headline(m)).collect();
            let cpu: Vec<f64> = ms.iter().map(|m| m.cpu.sut_us_per_request).collect();
            let per: Vec<f64> = ms.iter().map(|m| m.cpu.per_cpu_second()).collect();
            let sut: Vec<f64> = ms.iter().map(|m| m.cpu.sut_util).collect();
            let load: Vec<f64> = ms.iter().map(|m| m.cpu.load_util).collect();
            let mut bounds: BTreeMap<Bound, usize> = BTreeMap::new();
            for m in &ms {
                *bounds.entry(m.bound).or_default() += 1;
            }
            let max = bounds.values().copied().max().unwrap_or(0);
            let bound = bounds
                .iter()
                .find(|(_, &n)| n == max)
                .map_or(Bound::Latency, |(&b, _)| b);
            let mut handshakes = Handshakes::default();
            for m in &ms {
                handshakes.full += m.handshakes.full;
                handshakes.resumed += m.handshakes.resumed;
            }
            Some(Aggregate {
                value: Spread::of(&values)?,
                sut_us_per_request: Spread::of(&cpu)?,
                per_cpu_second: Spread::of(&per)?,
                sut_util: Spread::of(&sut)?.median,
                load_util: Spread::of(&load)?.median,
                rate_requested: ms.iter().find_map(|m| m.rate_requested),
                bound,
                errors: ms.iter().map(|m| m.errors.total()).sum(),
                handshakes,
                noisy_rounds: ms.iter().filter(|m| m.cpu.noisy()).count(),
                key,
            })
        })
        .collect()
}

/// The aggregate for one key, if measured.
pub fn find<'a>(
    aggs: &'a [Aggregate],
    study: Study,
    case: &str,
    workers: u32,
    system: &str,
) -> Option<&'a Aggregate> {
    aggs.iter().find(|a| {
        a.key.study == study
            && a.key.case == case
            && a.key.workers == workers
            && a.key.system == system
    })
}

/// Systems in report order (sluice, nginx, haproxy, then others as first seen).
pub fn system_order(runs: &[Measurement]) -> Vec<String> {
    let mut systems: Vec<String> = Vec::new();
    for known in crate::systems::ALL {
        if runs.iter().any(|m| m.system == known) {
            systems.push(known.to_owned());
        }
    }
    for m in runs {
        if !systems.contains(&m.system) {
            systems.push(m.system.clone());
        }
    }
    systems
}

/// Worker counts measured, ascending.
pub fn worker_counts(runs: &[Measurement]) -> Vec<u32> {
    let mut w: Vec<u32> = runs.iter().map(|m| m.workers).collect();
    w.sort_unstable();
    w.dedup();
    w
}

/// Cases of a study in measurement order.
pub fn cases_of(runs: &[Measurement], study: Study) -> Vec<String> {
    let mut cases: Vec<String> = Vec::new();
    for m in runs.iter().filter(|m| m.study == study) {
        if !cases.contains(&m.case) {
            cases.push(m.case.clone());
        }
    }
    cases
}

/// A human name for a study's case.
pub fn case_title(study: Study, case: &str) -> String {
    let what = match case {
        "http" => "HTTP",
        "https" => "HTTPS",
        "rsa-full" => "RSA-2048, full handshakes",
        "rsa-resumed" => "RSA-2048, with resumption",
        "ecdsa-full" => "ECDSA P-256, full handshakes",
        "ecdsa-resumed" => "ECDSA P-256, with resumption",
        "1mb" => "1 MB, HTTP",
        other => other,
    };
    match study {
        Study::Rps => format!("RPS, 1 KB, {what}"),
        Study::Latency => format!("p99 at 50 % of the reference's RPS, 1 KB, {what}"),
        Study::Tps => format!("TLS TPS, 0 KB, {what}"),
        Study::Throughput => format!("Throughput, {what}"),
    }
}

/// Which way a ratio should go.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Target {
    AtMost(f64),
    AtLeast(f64),
    /// Reported, no target.
    None,
}

impl Target {
    pub fn met(self, ratio: f64) -> Option<bool> {
        match self {
            Target::AtMost(t) => Some(ratio <= t),
            Target::AtLeast(t) => Some(ratio >= t),
            Target::None => None,
        }
    }

    pub fn label(self) -> String {
        match self {
            Target::AtMost(t) => format!("≤ {t}"),
            Target::AtLeast(t) => format!("≥ {t}"),
            Target::None => "—".to_owned(),
        }
    }
}

/// One row of the Sluice ÷ nginx table.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    pub what: &'static str,
    pub workers: u32,
    pub sluice: f64,
    pub nginx: f64,
    pub ratio: f64,
    pub target: Target,
}

/// How each ratio row is computed: study, case, which figure, target.
type RatioSpec = (
    &'static str,
    Study,
    &'static str,
    fn(&Aggregate) -> f64,
    Target,
);

const RATIOS: &[RatioSpec] = &[
    (
        "CPU per request (µs), HTTP 1 KB",
        Study::Rps,
        "http",
        |a| a.sut_us_per_request.median,
        Target::AtMost(0.8),
    ),
    (
        "CPU per request (µs), HTTPS 1 KB",
        Study::Rps,
        "https",
        |a| a.sut_us_per_request.median,
        Target::AtMost(0.8),
    ),
    (
        "Full TLS handshakes per CPU-second, RSA-2048",
        Study::Tps,
        "rsa-full",
        |a| a.per_cpu_second.median,
        Target::AtLeast(1.0),
    ),
    (
        "Full TLS handshakes per CPU-second, ECDSA P-256",
        Study::Tps,
        "ecdsa-full",
        |a| a.per_cpu_second.median,
        Target::None,
    ),
    (
        "Resumed TLS handshakes per CPU-second, RSA-2048",
        Study::Tps,
        "rsa-resumed",
        |a| a.per_cpu_second.median,
        Target::None,
    ),
    (
        "1 MB throughput (Gbit/s)",
        Study::Throughput,
        "1mb",
        |a| a.value.median,
        Target::AtLeast(1.0),
    ),
    (
        "p99 at 50 % of nginx's RPS, HTTP",
        Study::Latency,
        "http",
        |a| a.value.median,
        Target::AtMost(1.0),
    ),
    (
        "p99 at 50 % of nginx's RPS, HTTPS",
        Study::Latency,
        "https",
        |a| a.value.median,
        Target::AtMost(1.0),
    ),
];

/// Sluice ÷ nginx for every figure both were measured on, per worker count.
pub fn ratios(aggs: &[Aggregate]) -> Vec<Ratio> {
    let mut workers: Vec<u32> = aggs.iter().map(|a| a.key.workers).collect();
    workers.sort_unstable();
    workers.dedup();
    let mut out = Vec::new();
    for &(what, study, case, figure, target) in RATIOS {
        for &w in &workers {
            let (Some(s), Some(n)) = (
                find(aggs, study, case, w, "sluice"),
                find(aggs, study, case, w, "nginx"),
            ) else {
                continue;
            };
            let (sluice, nginx) = (figure(s), figure(n));
            if nginx > 0.0 {
                out.push(Ratio {
                    what,
                    workers: w,
                    sluice,
                    nginx,
                    ratio: sluice / nginx,
                    target,
                });
            }
        }
    }
    out
}

/// Hours in an average month (365.25 × 24 / 12), for the monthly cost column.
pub const HOURS_PER_MONTH: f64 = 730.5;

/// One row of the sizing table.
#[derive(Clone, Debug, PartialEq)]
pub struct SizingRow {
    pub system: String,
    pub workers: u32,
    /// False: extrapolated from the 1-worker CPU cost, not measured.
    pub measured: bool,
    pub rps_http: Option<f64>,
    pub rps_https: Option<f64>,
    pub tps_rsa_full: Option<f64>,
    pub tps_rsa_resumed: Option<f64>,
    /// Requests (handshakes) per SUT CPU-second at this worker count.
    pub http_per_cpu_second: Option<f64>,
    pub https_per_cpu_second: Option<f64>,
    pub full_handshakes_per_cpu_second: Option<f64>,
    /// With `--cost-per-hour`: workers × price × hours per month.
    pub cost_per_month: Option<f64>,
    /// Price of a million requests at the row's RPS.
    pub cost_per_million_http: Option<f64>,
    pub cost_per_million_https: Option<f64>,
}

/// Cost of a million requests served at `rps` by `workers` CPUs at `per_cpu_hour` each.
pub fn cost_per_million(per_cpu_hour: f64, workers: u32, rps: f64) -> Option<f64> {
    (rps > 0.0).then(|| f64::from(workers) * per_cpu_hour / (rps * 3600.0) * 1e6)
}

/// Worker counts to extrapolate to beyond the measured ones (the seeds went to 16–36 CPUs).
pub const EXTRAPOLATE_TO: [u32; 3] = [4, 8, 16];

/// The EKS-style table: per system, one row per measured worker count, then rows for larger
/// counts extrapolated linearly from the 1-worker requests per SUT CPU-second (an upper bound:
/// the seeds saw scaling flatten past 8–16 CPUs).
pub fn sizing(
    aggs: &[Aggregate],
    systems: &[String],
    cost_per_cpu_hour: Option<f64>,
) -> Vec<SizingRow> {
    let mut rows = Vec::new();
    for system in systems {
        let mut workers: Vec<u32> = aggs
            .iter()
            .filter(|a| &a.key.system == system && matches!(a.key.study, Study::Rps | Study::Tps))
            .map(|a| a.key.workers)
            .collect();
        workers.sort_unstable();
        workers.dedup();
        let get = |study, case: &str, w| find(aggs, study, case, w, system);
        let cost = |w: u32, rps: Option<f64>| {
            cost_per_cpu_hour.and_then(|c| rps.and_then(|r| cost_per_million(c, w, r)))
        };
        for &w in &workers {
            let http = get(Study::Rps, "http", w);
            let https = get(Study::Rps, "https", w);
            let rps_http = http.map(|a| a.value.median);
            let rps_https = https.map(|a| a.value.median);
            rows.push(SizingRow {
                system: system.clone(),
                workers: w,
                measured: true,
                rps_http,
                rps_https,
                tps_rsa_full: get(Study::Tps, "rsa-full", w).map(|a| a.value.median),
                tps_rsa_resumed: get(Study::Tps, "rsa-resumed", w).map(|a| a.value.median),
                http_per_cpu_second: http.map(|a| a.per_cpu_second.median),
                https_per_cpu_second: https.map(|a| a.per_cpu_second.median),
                full_handshakes_per_cpu_second: get(Study::Tps, "rsa-full", w)
                    .map(|a| a.per_cpu_second.median),
                cost_per_month: cost_per_cpu_hour.map(|c| f64::from(w) * c * HOURS_PER_MONTH),
                cost_per_million_http: cost(w, rps_http),
                cost_per_million_https: cost(w, rps_https),
            });
        }
        // Extrapolate from one worker on its own CPU: the cleanest per-CPU cost measured.
        let Some(base) = rows
            .iter()
            .find(|r| &r.system == system && r.measured && r.workers == 1)
            .cloned()
        else {
            continue;
        };
        let max = workers.last().copied().unwrap_or(1);
        for w in EXTRAPOLATE_TO.into_iter().filter(|&w| w > max) {
            let scale = |v: Option<f64>| v.map(|v| v * f64::from(w));
            let rps_http = scale(base.http_per_cpu_second);
            let rps_https = scale(base.https_per_cpu_second);
            rows.push(SizingRow {
                system: system.clone(),
                workers: w,
                measured: false,
                rps_http,
                rps_https,
                tps_rsa_full: scale(base.full_handshakes_per_cpu_second),
                tps_rsa_resumed: None,
                http_per_cpu_second: base.http_per_cpu_second,
                https_per_cpu_second: base.https_per_cpu_second,
                full_handshakes_per_cpu_second: base.full_handshakes_per_cpu_second,
                cost_per_month: cost_per_cpu_hour.map(|c| f64::from(w) * c * HOURS_PER_MONTH),
                cost_per_million_http: cost(w, rps_http),
                cost_per_million_https: cost(w, rps_https),
            });
        }
    }
    rows
}

/// Merges several results files (`sizing --from`): runs and skips concatenated, the first
/// file's setup kept (with every file's pinning and versions folded in) and the sources listed.
pub fn merge(files: Vec<(String, CapacityResults)>) -> Option<CapacityResults> {
    let mut iter = files.into_iter();
    let (first_name, mut merged) = iter.next()?;
    merged.setup.sources = vec![first_name];
    for (name, r) in iter {
        merged.setup.sources.push(name);
        for p in r.setup.pinning {
            if !merged.setup.pinning.contains(&p) {
                merged.setup.pinning.push(p);
            }
        }
        for (k, v) in r.setup.versions {
            merged.setup.versions.entry(k).or_insert(v);
        }
        for note in r.setup.notes {
            if !merged.setup.notes.contains(&note) {
                merged.setup.notes.push(note);
            }
        }
        merged.skipped.extend(r.skipped);
        merged.runs.extend(r.runs);
    }
    merged.setup.pinning.sort_by_key(|p| p.workers);
    merged.setup.pinning.dedup_by_key(|p| p.workers);
    Some(merged)
}

#[cfg(test)]
pub(crate) mod tests;
