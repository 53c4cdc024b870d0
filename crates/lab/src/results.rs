//! `results.json`: the lab's output and the interface other tools read.

use std::collections::BTreeMap;

use load::ErrorCounts;
use serde::{Deserialize, Serialize};

use crate::stalls::HostStalls;

/// Schema tag of `results.json`.
pub const SCHEMA: &str = "sluice-lab-dynamic/1";

/// Everything one `sluice lab dynamic` produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LabResults {
    pub schema: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub started_at: String,
    pub setup: Setup,
    /// Systems that could not run, with why (e.g. the Debian package to install).
    pub skipped: Vec<Skipped>,
    /// One entry per system × deployment × termination.
    pub runs: Vec<Run>,
}

/// What every run shared.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Setup {
    pub cpus: usize,
    /// How processes were pinned, in words.
    pub pinning: String,
    pub duration_secs: f64,
    pub rate: u64,
    pub connections: u32,
    pub threads: u32,
    pub tls: String,
    pub host: String,
    pub churn: String,
    /// What clients and pods speak: [`PROTOCOL_HTTPS`] (results written before this field
    /// existed) or [`PROTOCOL_GRPC`].
    #[serde(default = "https")]
    pub protocol: String,
    /// What the kernel says of the machine's CPUs (`stalls::machine_facts`): a virtual machine
    /// or not, how idle CPUs wait. `null` in results written before it existed.
    #[serde(default)]
    pub machine: Option<String>,
}

/// The seeds' experiment: HTTP/1.1 over TLS to `sluice backend` pods.
pub const PROTOCOL_HTTPS: &str = "https";
/// Unary gRPC calls over HTTP/2 with TLS to grpc-go pods.
pub const PROTOCOL_GRPC: &str = "grpc";

fn https() -> String {
    PROTOCOL_HTTPS.to_owned()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    pub system: String,
    pub reason: String,
}

/// One measured run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Run {
    pub system: String,
    /// `static` or `dynamic`.
    pub deployment: String,
    /// `graceful` or `kill` for dynamic runs; `none` for static ones (nothing is terminated).
    pub termination: String,
    pub rate_requested: f64,
    pub rate_achieved: f64,
    pub requests: u64,
    pub errors: ErrorCounts,
    pub status_codes: BTreeMap<u16, u64>,
    /// Coordinated-omission corrected.
    pub latency_ms: LatencyMs,
    /// The same without the responses completed in second 0 (the run's start, when every
    /// connection sends its first request): what the run's tail is without it. `null` when the
    /// load results do not carry it (written before it existed).
    #[serde(default)]
    pub latency_ms_without_first_second: Option<LatencyMs>,
    /// Scale events applied during the run, at seconds since the load started.
    pub events: Vec<ScaleEvent>,
    /// The machine's own stalls during the run (a sleeping probe on each CPU), next to the run's
    /// slowest seconds. `null` in results written before the probes existed.
    #[serde(default)]
    pub host_stalls: Option<HostStalls>,
    /// The full `sluice load --json` output.
    pub load: load::Results,
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p99_9: f64,
    #[serde(rename = "p99.99")]
    pub p99_99: f64,
    #[serde(rename = "p99.999")]
    pub p99_999: f64,
    #[serde(rename = "p99.9999")]
    pub p99_9999: f64,
    pub max: f64,
}

/// A scale event as it happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleEvent {
    /// Seconds since the load generator was started.
    pub at_secs: f64,
    pub from: usize,
    pub to: usize,
    /// How long starting and readying the new pods took before the change was published.
    pub ready_secs: f64,
}

impl LatencyMs {
    /// From the load results' corrected percentile list.
    pub fn from_load(results: &load::Results) -> LatencyMs {
        LatencyMs::from_summary(&results.latency.corrected)
    }

    /// From one of the load results' percentile lists.
    pub fn from_summary(corrected: &load::LatencySummary) -> LatencyMs {
        let at = |p: f64| {
            corrected
                .percentiles
                .iter()
                .find(|v| (v.percentile - p).abs() < 1e-9)
                .map_or(0.0, |v| v.value_us as f64 / 1000.0)
        };
        LatencyMs {
            p50: at(50.0),
            p99: at(99.0),
            p99_9: at(99.9),
            p99_99: at(99.99),
            p99_999: at(99.999),
            p99_9999: at(99.9999),
            max: corrected.max_us as f64 / 1000.0,
        }
    }

    /// (label, value) in order, for tables.
    pub fn columns(&self) -> [(&'static str, f64); 7] {
        [
            ("p50", self.p50),
            ("p99", self.p99),
            ("p99.9", self.p99_9),
            ("p99.99", self.p99_99),
            ("p99.999", self.p99_999),
            ("p99.9999", self.p99_9999),
            ("max", self.max),
        ]
    }
}

impl Run {
    pub fn new(
        system: &str,
        deployment: &str,
        termination: &str,
        events: Vec<ScaleEvent>,
        load: load::Results,
    ) -> Run {
        Run {
            system: system.to_owned(),
            deployment: deployment.to_owned(),
            termination: termination.to_owned(),
            rate_requested: load.requested_rate.unwrap_or(0.0),
            rate_achieved: load.achieved_rate,
            requests: load.requests,
            errors: load.errors,
            status_codes: load.status_codes.clone(),
            latency_ms: LatencyMs::from_load(&load),
            latency_ms_without_first_second: load
                .latency
                .corrected_without_first_second
                .as_ref()
                .map(LatencyMs::from_summary),
            events,
            host_stalls: None,
            load,
        }
    }

    /// The corrected p99 of second 0 in ms (issue 29's "first second"), if anything completed in
    /// it.
    pub fn first_second_p99_ms(&self) -> Option<f64> {
        let first = self.load.series.first().filter(|p| p.second == 0)?;
        Some(first.p99_us? as f64 / 1000.0)
    }

    /// `static`, `dynamic/graceful`, `dynamic/kill`: runs with the same label are compared.
    pub fn group(&self) -> String {
        if self.deployment == "static" {
            self.deployment.clone()
        } else {
            format!("{}/{}", self.deployment, self.termination)
        }
    }
}
