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
            for criterion in CRITERIA {
                let figures: Vec<(f64, f64)> = shared
                    .iter()
                    .filter_map(|(a, b)| {
                        let (a, b) = (RoundFigures::of(a), RoundFigures::of(b));
                        Some(((criterion.per_round)(&a)?, (criterion.per_round)(&b)?))
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
    Ok(Rounds {
        schema: SCHEMA.to_owned(),
        setup: first.setup.clone(),
        rounds,
        cells,
        comparisons,
    })
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
    let figures: [Figure; 8] = [
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
    fn first_seen_keeps_the_order_of_first_appearance() {
        assert_eq!(
            first_seen(["b", "a", "b", "c", "a"].into_iter()),
            vec!["b", "a", "c"]
        );
    }
}
