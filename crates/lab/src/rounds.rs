//! Several full `lab dynamic` rounds read as one experiment.
//!
//! One run's p99.99 and p99.999 are its slowest few requests (54 and 5 of 540,000 in a full run).
//! On a machine that stalls sleeping processes for milliseconds (see [`crate::stalls`]), which
//! system happens to draw the longest stall decides them, and the same comparison flips from one
//! run to the next. Rounds turn each comparison into a count and a pooled figure:
//! - **per round**: in how many rounds the system is at or below its peer, and the median of
//!   the rounds' figures;
//! - **pooled**: every round's coordinated-omission-corrected histogram added, so a percentile
//!   is taken over all rounds' requests (p99.999 over five rounds is the 27th slowest of
//!   2.7 million, not the 5th of 540,000).
//!
//! ```text
//!  round 1 results.json ─┐
//!  round 2 results.json ─┼─▶ check: same schema, rate, connections, duration, churn, protocol
//!  …                     │      ─▶ Cell (group × system): figures per round, pooled histogram
//!  round n results.json ─┘      ─▶ Comparison (group × criterion × peer) ─▶ rounds.json, rounds.md
//! ```
//!
//! `sluice lab dynamic --rounds N` writes each round into `round-K/` and this beside them;
//! `sluice lab rounds DIR…` reads rounds that were run separately.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use crate::render::{ms, optional_ms};
use crate::results::{LabResults, LatencyMs, Run, Setup};
use crate::table::Table;

/// Schema tag of `rounds.json`.
pub const SCHEMA: &str = "sluice-lab-rounds/1";

/// The system the others are compared with, when it ran.
const SUBJECT: &str = "sluice";

/// `sluice lab rounds`.
#[derive(clap::Args, Debug)]
pub struct RoundsArgs {
    /// Results of `lab dynamic` runs: their directories or their `results.json` files, in the
    /// order they ran.
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// Also write `rounds.json` and `rounds.md` into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Everything `rounds.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Rounds {
    pub schema: String,
    /// The setup every round shared.
    pub setup: Setup,
    pub rounds: Vec<Round>,
    /// One per group (`static`, `dynamic/graceful`, …) and system, groups in run order.
    pub cells: Vec<Cell>,
    /// The subject (Sluice, or the first system when Sluice did not run) against each other
    /// system, per group and criterion.
    pub comparisons: Vec<Comparison>,
    /// The subject against each peer with the host stalls every run drew taken out.
    #[serde(default)]
    pub stall_adjusted: Vec<StallAdjusted>,
}

/// A tail percentile over the runs of two systems (every deployment, every round with stall
/// probes), fitted as `base + per_stall × (stalls ≥ 5 ms in the run) + offset × (the run is the
/// subject's)` by least squares. `offset_ms` is how much higher (positive) or lower (negative)
/// the subject's percentile is than the peer's in a run that drew as many stalls: what is left
/// of the comparison once the machine's share is taken out. A model, and a rough one; `r_squared`
/// says how much of the runs' spread it explains.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StallAdjusted {
    pub percentile: String,
    pub system: String,
    pub peer: String,
    /// Runs fitted: both systems', every deployment.
    pub runs: usize,
    pub offset_ms: f64,
    pub per_stall_ms: f64,
    pub base_ms: f64,
    pub r_squared: f64,
    /// Stalls ≥ 5 ms over the fitted runs, each system's.
    pub stalls_5ms: u64,
    pub peer_stalls_5ms: u64,
}

/// One round as read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Round {
    /// Where its `results.json` was read from.
    pub source: String,
    pub started_at: String,
    /// Systems in the order they first ran in this round.
    pub order: Vec<String>,
}

/// One system in one group over every round.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub group: String,
    pub system: String,
    /// Index by round; `null` where the system has no run of this group in that round.
    pub rounds: Vec<Option<RoundFigures>>,
    /// Percentiles over every round's requests (their histograms added).
    pub pooled: Option<LatencyMs>,
    pub pooled_requests: u64,
    /// Errors of every kind, all rounds together.
    pub errors: u64,
}

/// What one run of a round contributes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundFigures {
    pub requests: u64,
    pub errors: u64,
    pub first_second_p99_ms: Option<f64>,
    pub latency_ms: LatencyMs,
    /// The longest wake stall either probe saw during the run, if probes ran.
    pub longest_host_stall_ms: Option<f64>,
    /// Wake stalls of 5 ms or more, both probes together, if probes ran.
    #[serde(default)]
    pub host_stalls_5ms: Option<u64>,
}

/// The subject against one peer on one criterion.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    pub group: String,
    pub criterion: String,
    pub system: String,
    pub peer: String,
    /// Rounds in which both have a figure.
    pub rounds: usize,
    /// Of those, rounds in which the system's figure is at or below the peer's.
    pub at_or_below: usize,
    pub median_ms: Option<f64>,
    pub peer_median_ms: Option<f64>,
    /// Over the requests of those rounds; `null` for the first second (its per-second figure
    /// has no histogram to pool).
    pub pooled_ms: Option<f64>,
    pub peer_pooled_ms: Option<f64>,
}

/// A compared figure: its name, its value in one round, its value pooled.
struct Criterion {
    name: &'static str,
    per_round: fn(&RoundFigures) -> Option<f64>,
    pooled: Option<fn(&LatencyMs) -> f64>,
}

/// Issue 29's criteria (the first second, p99.99, p99.999) and the percentiles around them.
const CRITERIA: &[Criterion] = &[
    Criterion {
        name: "first second's p99",
        per_round: |f| f.first_second_p99_ms,
        pooled: None,
    },
    Criterion {
        name: "p99",
        per_round: |f| Some(f.latency_ms.p99),
        pooled: Some(|l| l.p99),
    },
    Criterion {
        name: "p99.9",
        per_round: |f| Some(f.latency_ms.p99_9),
        pooled: Some(|l| l.p99_9),
    },
    Criterion {
        name: "p99.99",
        per_round: |f| Some(f.latency_ms.p99_99),
        pooled: Some(|l| l.p99_99),
    },
    Criterion {
        name: "p99.999",
        per_round: |f| Some(f.latency_ms.p99_999),
        pooled: Some(|l| l.p99_999),
    },
    Criterion {
        name: "max",
        per_round: |f| Some(f.latency_ms.max),
        pooled: Some(|l| l.max),
    },
];

/// Runs `sluice lab rounds`.
pub fn run_rounds(args: RoundsArgs) -> anyhow::Result<()> {
    let mut read = Vec::new();
    for path in &args.results {
        read.push(read_results(path)?);
    }
    let rounds = combine(&read)?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        write(out, &rounds)?;
        eprintln!(
            "sluice lab rounds: rounds.json and rounds.md in {}",
            out.display()
        );
    }
    print!("{}", summary(&rounds));
    Ok(())
}

/// A round's results, from its directory or its `results.json`.
pub fn read_results(path: &Path) -> anyhow::Result<(String, LabResults)> {
    let file = if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_owned()
    };
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let results: LabResults = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not the results of `sluice lab dynamic` (schema {})",
            file.display(),
            crate::results::SCHEMA
        )
    })?;
    if results.schema != crate::results::SCHEMA {
        bail!(
            "{}: schema is '{}', expected '{}' (the results of `sluice lab dynamic`)",
            file.display(),
            results.schema,
            crate::results::SCHEMA
        );
    }
    Ok((file.display().to_string(), results))
}

/// Writes `rounds.json` and `rounds.md` into `out`.
pub fn write(out: &Path, rounds: &Rounds) -> anyhow::Result<()> {
    let json = out.join("rounds.json");
    std::fs::write(&json, serde_json::to_string_pretty(rounds)? + "\n")
        .with_context(|| format!("writing {}", json.display()))?;
    let md = out.join("rounds.md");
    std::fs::write(&md, markdown(rounds)).with_context(|| format!("writing {}", md.display()))
}

/// Reads the rounds together. They must have measured the same thing: a round with another
/// rate, connection count, duration, churn or protocol is refused, naming the file and field.
pub fn combine(read: &[(String, LabResults)]) -> anyhow::Result<Rounds> {
    let Some((first_source, first)) = read.first() else {
        bail!("no rounds to combine");
    };
    for (source, results) in &read[1..] {
        let (a, b) = (&first.setup, &results.setup);
        let differs: [(&str, bool); 5] = [
            ("setup.rate", a.rate != b.rate),
            ("setup.connections", a.connections != b.connections),
            ("setup.duration_secs", a.duration_secs != b.duration_secs),
            ("setup.churn", a.churn != b.churn),
            ("setup.protocol", a.protocol != b.protocol),
        ];
        if let Some((field, _)) = differs.iter().find(|(_, d)| *d) {
            bail!(
                "{source}: {field} differs from {first_source}'s: rounds of different \
                 experiments cannot be read together"
            );
        }
    }
    let rounds: Vec<Round> = read
        .iter()
        .map(|(source, results)| Round {
            source: source.clone(),
            started_at: results.started_at.clone(),
            order: first_seen(results.runs.iter().map(|r| r.system.as_str())),
        })
        .collect();

    let groups = first_seen(read.iter().flat_map(|(_, r)| r.runs.iter()).map(Run::group));
    let systems = first_seen(
        read.iter()
            .flat_map(|(_, r)| r.runs.iter())
            .map(|r| r.system.as_str()),
    );
    // Each group × system's run in every round (`None` where it has none).
    let mut table: Vec<(&String, &String, Vec<Option<&Run>>)> = Vec::new();
    for group in &groups {
        for system in &systems {
            let runs: Vec<Option<&Run>> = read
                .iter()
                .map(|(_, results)| {
                    results
                        .runs
                        .iter()
                        .find(|r| &r.group() == group && &r.system == system)
                })
                .collect();
            if runs.iter().any(Option::is_some) {
                table.push((group, system, runs));
            }
        }
    }
    let mut cells = Vec::new();
    for (group, system, runs) in &table {
        let pooled = pool(runs.iter().flatten().copied())
            .with_context(|| format!("pooling {system}'s {group} histograms"))?;
        cells.push(Cell {
            group: (*group).clone(),
            system: (*system).clone(),
            rounds: runs.iter().map(|r| r.map(RoundFigures::of)).collect(),
            pooled_requests: pooled.as_ref().map_or(0, |p| p.count),
            pooled: pooled.as_ref().map(LatencyMs::from_summary),
            errors: runs.iter().flatten().map(|r| r.errors.total()).sum(),
        });
    }

    let subject = if systems.iter().any(|s| s == SUBJECT) {
        SUBJECT.to_owned()
    } else {
        systems.first().cloned().unwrap_or_default()
    };
    let mut comparisons = Vec::new();
    for (group, system, own) in table.iter().filter(|(_, s, _)| **s == subject) {
        for (_, peer, other) in table
            .iter()
            .filter(|(g, s, _)| g == group && **s != subject)
        {
            // Only the rounds both ran in, for the counts and the pooled figures alike.
            let shared: Vec<(&Run, &Run)> = own
                .iter()
                .zip(other)
                .filter_map(|(a, b)| Some(((*a)?, (*b)?)))
                .collect();
            let own_pooled = pool(shared.iter().map(|p| p.0))?.map(|s| LatencyMs::from_summary(&s));
            let peer_pooled =
                pool(shared.iter().map(|p| p.1))?.map(|s| LatencyMs::from_summary(&s));
            let shared_figures: Vec<(RoundFigures, RoundFigures)> = shared
                .iter()
                .map(|(a, b)| (RoundFigures::of(a), RoundFigures::of(b)))
                .collect();
            for criterion in CRITERIA {
                let figures: Vec<(f64, f64)> = shared_figures
                    .iter()
                    .filter_map(|(a, b)| {
                        Some(((criterion.per_round)(a)?, (criterion.per_round)(b)?))
                    })
                    .collect();
                let pooled = |l: &Option<LatencyMs>| Some((criterion.pooled?)(l.as_ref()?));
                comparisons.push(Comparison {
                    group: (*group).clone(),
                    criterion: criterion.name.to_owned(),
                    system: (*system).clone(),
                    peer: (*peer).clone(),
                    rounds: figures.len(),
                    at_or_below: figures.iter().filter(|(a, b)| a <= b).count(),
                    median_ms: median(figures.iter().map(|p| p.0).collect()),
                    peer_median_ms: median(figures.iter().map(|p| p.1).collect()),
                    pooled_ms: pooled(&own_pooled),
                    peer_pooled_ms: pooled(&peer_pooled),
                });
            }
        }
    }
    let stall_adjusted = systems
        .iter()
        .filter(|peer| **peer != subject)
        .flat_map(|peer| stall_adjusted(&cells, &subject, peer))
        .collect();
    Ok(Rounds {
        stall_adjusted,
        schema: SCHEMA.to_owned(),
        setup: first.setup.clone(),
        rounds,
        cells,
        comparisons,
    })
}

/// Percentiles the stall adjustment fits: the tail, where the stalls are.
const ADJUSTED: [&str; 3] = ["p99.9", "p99.99", "p99.999"];

/// [`StallAdjusted`] for `system` against `peer`, from their runs with stall probes;
/// nothing when too few runs (fewer than 3 a system) or when the runs' stall counts do not vary.
fn stall_adjusted(cells: &[Cell], system: &str, peer: &str) -> Vec<StallAdjusted> {
    // (is the subject's, stalls ≥ 5 ms, latency)
    let runs: Vec<(bool, u64, &LatencyMs)> = cells
        .iter()
        .filter(|c| c.system == system || c.system == peer)
        .flat_map(|c| {
            let own = c.system == system;
            c.rounds
                .iter()
                .flatten()
                .filter_map(move |f| Some((own, f.host_stalls_5ms?, &f.latency_ms)))
        })
        .collect();
    let count = |own: bool| runs.iter().filter(|r| r.0 == own).count();
    if count(true) < 3 || count(false) < 3 {
        return Vec::new();
    }
    let stalls = |own: bool| runs.iter().filter(|r| r.0 == own).map(|r| r.1).sum();
    CRITERIA
        .iter()
        .filter(|c| ADJUSTED.contains(&c.name))
        .filter_map(|criterion| {
            let of = criterion.pooled?;
            let rows: Vec<[f64; 3]> = runs
                .iter()
                .map(|(own, s, _)| [1.0, *s as f64, f64::from(u8::from(*own))])
                .collect();
            let y: Vec<f64> = runs.iter().map(|r| of(r.2)).collect();
            let (fit, r_squared) = least_squares(&rows, &y)?;
            Some(StallAdjusted {
                percentile: criterion.name.to_owned(),
                system: system.to_owned(),
                peer: peer.to_owned(),
                runs: runs.len(),
                base_ms: fit[0],
                per_stall_ms: fit[1],
                offset_ms: fit[2],
                r_squared,
                stalls_5ms: stalls(true),
                peer_stalls_5ms: stalls(false),
            })
        })
        .collect()
}

/// Ordinary least squares for three coefficients (normal equations, Gaussian elimination with
/// partial pivoting), and R². `None` when the columns are not independent.
fn least_squares(rows: &[[f64; 3]], y: &[f64]) -> Option<([f64; 3], f64)> {
    let mut m = [[0.0; 4]; 3];
    for (row, &v) in rows.iter().zip(y) {
        for i in 0..3 {
            for j in 0..3 {
                m[i][j] += row[i] * row[j];
            }
            m[i][3] += row[i] * v;
        }
    }
    for col in 0..3 {
        let pivot = (col..3).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-9 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col];
        for (r, row) in m.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (cell, p) in row.iter_mut().zip(pivot_row).skip(col) {
                    *cell -= f * p;
                }
            }
        }
    }
    let fit = [m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]];
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    let total: f64 = y.iter().map(|v| (v - mean).powi(2)).sum();
    let residual: f64 = rows
        .iter()
        .zip(y)
        .map(|(row, v)| (v - (0..3).map(|i| row[i] * fit[i]).sum::<f64>()).powi(2))
        .sum();
    let r_squared = if total > 0.0 {
        1.0 - residual / total
    } else {
        1.0
    };
    Some((fit, r_squared))
}

/// Several runs' corrected latency as one summary.
fn pool<'a>(runs: impl Iterator<Item = &'a Run>) -> anyhow::Result<Option<load::LatencySummary>> {
    let summaries: Vec<&load::LatencySummary> = runs.map(|r| &r.load.latency.corrected).collect();
    Ok(load::pool_summaries(&summaries)?)
}

impl RoundFigures {
    fn of(run: &Run) -> RoundFigures {
        RoundFigures {
            requests: run.requests,
            errors: run.errors.total(),
            first_second_p99_ms: run.first_second_p99_ms(),
            latency_ms: run.latency_ms,
            longest_host_stall_ms: run.host_stalls.as_ref().map(|h| h.longest_ms()),
            host_stalls_5ms: run.host_stalls.as_ref().map(|h| h.total_5ms()),
        }
    }
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Distinct items in the order they first appear.
fn first_seen<T: Into<String>>(items: impl Iterator<Item = T>) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for item in items {
        let item = item.into();
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

/// "k of n" with the comparison's figures: the aligned table on stdout.
pub fn summary(rounds: &Rounds) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sluice lab rounds: {} rounds of {} req/s, {} connections, {} s per run",
        rounds.rounds.len(),
        rounds.setup.rate,
        rounds.setup.connections,
        rounds.setup.duration_secs
    );
    out += &comparison_table(rounds).text();
    out += "(ms, coordinated-omission corrected; at or below: rounds in which the system's figure \
            was at or below the peer's; pooled: over every round's requests)\n";
    let errors: Vec<String> = rounds
        .cells
        .iter()
        .filter(|c| c.errors > 0)
        .map(|c| format!("{} {}: {}", c.system, c.group, c.errors))
        .collect();
    if !rounds.stall_adjusted.is_empty() {
        out += &stall_table(rounds).text();
        out += STALL_NOTE;
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "errors over all rounds: {}",
        if errors.is_empty() {
            "none".to_owned()
        } else {
            errors.join(", ")
        }
    );
    out
}

/// Every comparison as a row.
fn comparison_table(rounds: &Rounds) -> Table {
    let mut table = Table::new(
        &[
            "deployment",
            "criterion",
            "system",
            "peer",
            "at or below",
            "median",
            "peer median",
            "pooled",
            "peer pooled",
        ],
        4,
    );
    table.rows = rounds
        .comparisons
        .iter()
        .map(|c| {
            vec![
                c.group.clone(),
                c.criterion.clone(),
                c.system.clone(),
                c.peer.clone(),
                format!("{} of {}", c.at_or_below, c.rounds),
                optional_ms(c.median_ms),
                optional_ms(c.peer_median_ms),
                optional_ms(c.pooled_ms),
                optional_ms(c.peer_pooled_ms),
            ]
        })
        .collect();
    table
}

/// What the stall-adjusted table says.
const STALL_NOTE: &str = "Stall-adjusted: each percentile of every run of both systems (all \
    deployments, rounds with stall probes) fitted as base + per stall × (the run's host stalls ≥ \
    5 ms) + offset × (the run is the system's), by least squares. Offset: the system's \
    percentile minus the peer's in runs that drew as many stalls (negative: lower). R²: how much \
    of the runs' spread the fit explains.";

/// Every stall-adjusted fit as a row.
fn stall_table(rounds: &Rounds) -> Table {
    let mut table = Table::new(
        &[
            "percentile",
            "system",
            "peer",
            "runs",
            "offset",
            "per stall",
            "R²",
            "stalls ≥ 5 ms",
            "peer's",
        ],
        3,
    );
    table.rows = rounds
        .stall_adjusted
        .iter()
        .map(|a| {
            vec![
                a.percentile.clone(),
                a.system.clone(),
                a.peer.clone(),
                a.runs.to_string(),
                format!("{:+.2}", a.offset_ms),
                format!("{:.3}", a.per_stall_ms),
                format!("{:.2}", a.r_squared),
                a.stalls_5ms.to_string(),
                a.peer_stalls_5ms.to_string(),
            ]
        })
        .collect();
    table
}

/// `rounds.md`.
pub fn markdown(rounds: &Rounds) -> String {
    let mut md = String::new();
    let s = &rounds.setup;
    let _ = writeln!(
        md,
        "# Sluice lab: {} rounds of `lab dynamic`\n",
        rounds.rounds.len()
    );
    let _ = writeln!(
        md,
        "{} req/s, {} connections, {} s per run, {}; {}.\n",
        s.rate, s.connections, s.duration_secs, s.tls, s.churn
    );
    let _ = writeln!(
        md,
        "| round | started | systems in order | results |\n|---:|---|---|---|"
    );
    for (i, r) in rounds.rounds.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {} | {} | {} | `{}` |",
            i + 1,
            r.started_at,
            r.order.join(", "),
            r.source
        );
    }
    md.push('\n');
    md += "## Comparisons\n\n";
    md += "At or below: in how many rounds the system's figure was at or below the peer's; \
           median: of the rounds' figures. Pooled: the percentile over every round's \
           requests (their histograms added). Milliseconds, coordinated-omission corrected.\n\n";
    md += &comparison_table(rounds).markdown();
    md.push('\n');
    if !rounds.stall_adjusted.is_empty() {
        md += "## With the host's stalls taken out\n\n";
        md += STALL_NOTE;
        md += "\n\n";
        md += &stall_table(rounds).markdown();
        md.push('\n');
    }
    md += "## Every round\n\n";
    md += "Each run's figures; the longest host stall is the longest late wake either stall \
           probe saw during the run (see `sluice lab stalls`).\n\n";
    let mut header = vec!["deployment".to_owned(), "system".into(), "figure".into()];
    header.extend((1..=rounds.rounds.len()).map(|i| format!("round {i}")));
    header.push("pooled".into());
    let mut table = Table {
        header,
        rows: Vec::new(),
        left: 3,
    };
    type Figure = (
        &'static str,
        fn(&RoundFigures) -> String,
        Option<fn(&Cell) -> String>,
    );
    let figures: [Figure; 9] = [
        (
            "requests",
            |f| f.requests.to_string(),
            Some(|c| c.pooled_requests.to_string()),
        ),
        (
            "errors",
            |f| f.errors.to_string(),
            Some(|c| c.errors.to_string()),
        ),
        (
            "first second's p99",
            |f| optional_ms(f.first_second_p99_ms),
            None,
        ),
        (
            "p99",
            |f| ms(f.latency_ms.p99),
            Some(|c| optional_ms(c.pooled.map(|l| l.p99))),
        ),
        (
            "p99.99",
            |f| ms(f.latency_ms.p99_99),
            Some(|c| optional_ms(c.pooled.map(|l| l.p99_99))),
        ),
        (
            "p99.999",
            |f| ms(f.latency_ms.p99_999),
            Some(|c| optional_ms(c.pooled.map(|l| l.p99_999))),
        ),
        (
            "max",
            |f| ms(f.latency_ms.max),
            Some(|c| optional_ms(c.pooled.map(|l| l.max))),
        ),
        (
            "longest host stall",
            |f| optional_ms(f.longest_host_stall_ms),
            None,
        ),
        (
            "host stalls ≥ 5 ms",
            |f| {
                f.host_stalls_5ms
                    .map_or_else(|| "–".to_owned(), |n| n.to_string())
            },
            None,
        ),
    ];
    for cell in &rounds.cells {
        for (name, per_round, pooled) in &figures {
            let mut row = vec![cell.group.clone(), cell.system.clone(), (*name).to_owned()];
            row.extend(
                cell.rounds
                    .iter()
                    .map(|round| round.as_ref().map_or("–".to_owned(), per_round)),
            );
            row.push(pooled.map_or("–".to_owned(), |p| p(cell)));
            table.rows.push(row);
        }
    }
    md += &table.markdown();
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn least_squares_recovers_an_exact_fit_and_refuses_dependent_columns() {
        // y = 2 + 0.5 x − 1.5 s over points where x and s vary independently.
        let rows: Vec<[f64; 3]> = [(0.0, 0.0), (4.0, 0.0), (10.0, 0.0), (2.0, 1.0), (8.0, 1.0)]
            .iter()
            .map(|&(x, s)| [1.0, x, s])
            .collect();
        let y: Vec<f64> = rows.iter().map(|r| 2.0 + 0.5 * r[1] - 1.5 * r[2]).collect();
        let (fit, r_squared) = least_squares(&rows, &y).unwrap();
        for (got, want) in fit.iter().zip([2.0, 0.5, -1.5]) {
            assert!((got - want).abs() < 1e-9, "{fit:?}");
        }
        assert!((r_squared - 1.0).abs() < 1e-9);
        // Every run drew the same stalls: the stall column is the intercept's twin.
        let flat: Vec<[f64; 3]> = rows.iter().map(|r| [1.0, 3.0, r[2]]).collect();
        assert!(least_squares(&flat, &y).is_none());
    }

    #[test]
    fn first_seen_keeps_the_order_of_first_appearance() {
        assert_eq!(
            first_seen(["b", "a", "b", "c", "a"].into_iter()),
            vec!["b", "a", "c"]
        );
    }
}
