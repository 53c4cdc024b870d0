//! The results of a run as one serializable value (the `--json` file, the lab's interface), and
//! the renderings of it: the wrk2-shaped text report and the `.hgrm` percentile distribution.
//!
//! Both histograms travel inside the results (HdrHistogram V2 deflate serialization, base64, the
//! form standard HdrHistogram tools read), so every rendering is a function of [`Results`] alone:
//! a report can be re-rendered, or runs merged, without re-running anything.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::args::Config;
use crate::recorder::{ErrorClass, ErrorCounts, Handshakes, Recorder, WarmupCounts, EARLY_BUCKET};

/// Identifies the layout of the JSON file; bump it when a field changes meaning.
pub const SCHEMA: &str = "sluice-load/1";

/// The percentiles listed in the JSON file and in the `-L` summary.
pub const PERCENTILES: [f64; 9] = [50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 99.999, 99.9999, 100.0];

/// Percentile ticks per half distance for the spectra (wrk2 and HdrHistogram use 5).
const TICKS_PER_HALF_DISTANCE: u32 = 5;
/// Spectra print milliseconds; histograms hold microseconds.
const US_PER_MS: f64 = 1000.0;

/// Everything a run measured. Latencies are in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub schema: String,
    pub url: String,
    pub method: String,
    pub threads: u32,
    pub connections: u32,
    /// Length of the measurement (after the warm-up).
    pub duration_secs: f64,
    pub warmup_secs: f64,
    pub timeout_secs: f64,
    /// Requests per second asked for; `null` for a closed-loop run.
    pub requested_rate: Option<f64>,
    pub http2: bool,
    pub new_connection_per_request: bool,
    /// `null` for plain HTTP.
    pub tls_resumption: Option<bool>,
    /// Wall time from the first request to the last response, warm-up and drain included.
    pub elapsed_secs: f64,
    /// How long the clock started after every connection was open and ready (the schedule's
    /// first requests are due at its start, so each connection waits for its first send instead
    /// of the generator's start-up delaying them). 0 in results written before it existed.
    #[serde(default)]
    pub start_lead_secs: f64,
    /// Wall-clock time (Unix seconds) at which second 0 of `series` began (the clock's start plus
    /// the warm-up), so events timed elsewhere (scale events, host stalls) can be placed in the
    /// series. 0 in results written before it existed.
    #[serde(default)]
    pub measurement_started_unix_secs: f64,
    /// Complete responses (any status) to requests due in the measurement.
    pub requests: u64,
    /// `requests / duration_secs`.
    pub achieved_rate: f64,
    /// Requests due in the measurement that were never sent: their connection was still behind
    /// schedule at the end.
    pub unsent: u64,
    /// Failed requests by class; each failed request counts once.
    pub errors: ErrorCounts,
    /// The first error message seen per class.
    pub error_examples: BTreeMap<ErrorClass, String>,
    /// Complete responses by status code.
    pub status_codes: BTreeMap<u16, u64>,
    /// Every TLS handshake of the run (including connections opened before the clock started).
    pub tls_handshakes: Handshakes,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// What happened during the warm-up (not in any histogram).
    pub warmup: WarmupCounts,
    /// Per-thread completed requests per second (wrk's "Req/Sec" row).
    pub thread_requests_per_sec: Spread,
    pub latency: Latencies,
    /// One point per second of the measurement, by completion time; points past the duration
    /// hold requests that were due in time but finished late.
    pub series: Vec<SeriesPoint>,
    /// How long from the start of the measurement the early series covers (`--early-series`);
    /// 0 when it was off (and in results written before it existed).
    #[serde(default)]
    pub early_series_secs: f64,
    /// One point per 100 ms of the measurement's first `early_series_secs`, by completion time
    /// (so the ten points of a second add up to that second's point), up to the last one in
    /// which a request ended.
    #[serde(default)]
    pub early_series: Vec<EarlyPoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    /// From each request's intended start (coordinated-omission corrected).
    pub corrected: LatencySummary,
    /// From each request's actual send.
    pub uncorrected: LatencySummary,
    /// `corrected` without the responses completed in second 0 of the series: the run's tail
    /// without its start. `null` in results written before it existed.
    #[serde(default)]
    pub corrected_without_first_second: Option<LatencySummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    /// Share of values within one standard deviation of the mean, in percent (wrk's "+/- Stdev").
    pub within_stdev_percent: f64,
    pub percentiles: Vec<PercentileValue>,
    /// The histogram: HdrHistogram V2 deflate serialization, base64 ("HISTF..." in logs).
    pub hdr_histogram: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PercentileValue {
    pub percentile: f64,
    pub value_us: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub mean: f64,
    pub stdev: f64,
    pub max: f64,
    pub within_stdev_percent: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the measurement started.
    pub second: u64,
    pub completed: u64,
    pub errors: ErrorCounts,
    /// Corrected latency of this second's completions (2 significant digits); `null` if none.
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub max_us: Option<u64>,
}

/// One 100 ms step of the early series. Latencies in µs, 2 significant digits, `null` if none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EarlyPoint {
    /// Where the step starts, in ms since the measurement started.
    pub start_ms: u64,
    pub completed: u64,
    pub errors: ErrorCounts,
    /// Corrected latency of the step's completions.
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub max_us: Option<u64>,
    /// How late the generator sent the requests that ended in this step (actual send − intended
    /// start): up to 0.1 ms is its send timer's step; more is the generator's own delay, which
    /// the corrected latency above includes.
    pub send_late_p50_us: Option<u64>,
    pub send_late_p99_us: Option<u64>,
    pub send_late_max_us: Option<u64>,
}

/// When the run happened, as the driver timed it.
#[derive(Clone, Copy, Debug)]
pub struct RunTiming {
    /// From the clock's start to the last response.
    pub elapsed: Duration,
    /// How far ahead of "every connection ready" the clock started.
    pub start_lead: Duration,
    /// Wall-clock time (Unix seconds) at which the measurement began.
    pub measurement_started_unix_secs: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("latency histogram is not valid base64")]
    Base64(#[from] base64::DecodeError),
    #[error("latency histogram cannot be decoded: {0}")]
    Histogram(String),
}

impl Results {
    /// Builds the results from the merged recorder and each thread's per-second completions.
    pub fn new(
        config: &Config,
        recorder: &Recorder,
        thread_seconds: &[u64],
        error_examples: BTreeMap<ErrorClass, String>,
        timing: RunTiming,
    ) -> Results {
        let duration = config.duration.as_secs_f64();
        Results {
            schema: SCHEMA.to_owned(),
            url: config.target.url.clone(),
            method: config.method.to_string(),
            threads: config.threads.get(),
            connections: config.connections.get(),
            duration_secs: duration,
            warmup_secs: config.warmup.as_secs_f64(),
            timeout_secs: config.timeout.as_secs_f64(),
            requested_rate: config.rate,
            http2: config.http2,
            new_connection_per_request: config.new_connection_per_request,
            tls_resumption: config.target.https.then_some(config.tls.resumption),
            elapsed_secs: timing.elapsed.as_secs_f64(),
            start_lead_secs: timing.start_lead.as_secs_f64(),
            measurement_started_unix_secs: timing.measurement_started_unix_secs,
            requests: recorder.completed(),
            achieved_rate: recorder.completed() as f64 / duration,
            unsent: recorder.unsent(),
            errors: *recorder.errors(),
            error_examples,
            status_codes: recorder.statuses().clone(),
            tls_handshakes: *recorder.handshakes(),
            bytes_read: recorder.bytes_read(),
            bytes_written: recorder.bytes_written(),
            warmup: *recorder.warmup(),
            thread_requests_per_sec: spread(thread_seconds),
            latency: Latencies {
                corrected: summarize(recorder.corrected()),
                uncorrected: summarize(recorder.uncorrected()),
                corrected_without_first_second: Some(summarize(
                    recorder.corrected_without_first_second(),
                )),
            },
            series: recorder
                .seconds()
                .iter()
                .enumerate()
                .map(|(second, s)| SeriesPoint {
                    second: second as u64,
                    completed: s.completed,
                    errors: s.errors,
                    p50_us: quantile(&s.latency, 0.5),
                    p99_us: quantile(&s.latency, 0.99),
                    max_us: quantile(&s.latency, 1.0),
                })
                .collect(),
            early_series_secs: recorder.early_window().as_secs_f64(),
            early_series: recorder
                .early_series()
                .iter()
                .enumerate()
                .map(|(i, b)| EarlyPoint {
                    start_ms: (EARLY_BUCKET * i as u32).as_millis() as u64,
                    completed: b.completed,
                    errors: b.errors,
                    p50_us: quantile(&b.latency, 0.5),
                    p99_us: quantile(&b.latency, 0.99),
                    max_us: quantile(&b.latency, 1.0),
                    send_late_p50_us: quantile(&b.send_lateness, 0.5),
                    send_late_p99_us: quantile(&b.send_lateness, 0.99),
                    send_late_max_us: quantile(&b.send_lateness, 1.0),
                })
                .collect(),
        }
    }

    pub fn corrected_histogram(&self) -> Result<Histogram<u64>, ResultsError> {
        decode(&self.latency.corrected.hdr_histogram)
    }

    pub fn uncorrected_histogram(&self) -> Result<Histogram<u64>, ResultsError> {
        decode(&self.latency.uncorrected.hdr_histogram)
    }

    /// `Running 30s test @ URL` and the thread/connection line, printed before the run starts.
    pub fn render_header(config: &Config) -> String {
        let mut out = format!(
            "Running {} test @ {}\n  {} threads and {} connections\n",
            format_duration(config.duration),
            config.target.url,
            config.threads,
            config.connections
        );
        if !config.warmup.is_zero() {
            let _ = writeln!(
                out,
                "  (after a {} warm-up)",
                format_duration(config.warmup)
            );
        }
        out
    }

    /// The report after the run, shaped like wrk2's: thread stats, with `latency` the percentile
    /// summary and spectrum of the corrected latency, with `u_latency` the uncorrected one too,
    /// then totals, and then what wrk2 does not say (rate achieved, unsent, TLS handshakes).
    pub fn render_text(&self, latency: bool, u_latency: bool) -> Result<String, ResultsError> {
        let corrected = self.corrected_histogram()?;
        let mut out = String::new();
        let lat = &self.latency.corrected;
        let rps = &self.thread_requests_per_sec;
        let _ = writeln!(out, "  Thread Stats   Avg      Stdev     Max   +/- Stdev");
        let _ = writeln!(
            out,
            "    Latency {:>9} {:>9} {:>9} {:>8.2}%",
            format_us(lat.mean_us),
            format_us(lat.stdev_us),
            format_us(lat.max_us as f64),
            lat.within_stdev_percent
        );
        let _ = writeln!(
            out,
            "    Req/Sec {:>9} {:>9} {:>9} {:>8.2}%",
            format_metric(rps.mean),
            format_metric(rps.stdev),
            format_metric(rps.max),
            rps.within_stdev_percent
        );
        if latency {
            latency_section(&mut out, &corrected, "Recorded Latency");
        }
        if u_latency {
            let uncorrected = self.uncorrected_histogram()?;
            out.push('\n');
            latency_section(
                &mut out,
                &uncorrected,
                "Uncorrected Latency (measured without taking delayed starts into account)",
            );
        }
        let _ = writeln!(
            out,
            "  {} requests in {}, {}B read",
            self.requests,
            format_us(self.duration_secs * 1e6),
            format_binary(self.bytes_read as f64)
        );
        let e = &self.errors;
        if e.socket() > 0 {
            let _ = writeln!(
                out,
                "  Socket errors: connect {}, read {}, write {}, timeout {}",
                e.connect, e.read, e.write, e.timeout
            );
        }
        if e.status > 0 {
            let _ = writeln!(out, "  Non-2xx or 3xx responses: {}", e.status);
        }
        let _ = writeln!(out, "Requests/sec: {:9.2}", self.achieved_rate);
        let _ = writeln!(
            out,
            "Transfer/sec: {:>10}B",
            format_binary(self.bytes_read as f64 / self.duration_secs)
        );
        match self.requested_rate {
            Some(rate) => {
                let _ = writeln!(
                    out,
                    "  Rate: requested {:.2}/s, achieved {:.2}/s ({:.2}%), unsent {}",
                    rate,
                    self.achieved_rate,
                    100.0 * self.achieved_rate / rate,
                    self.unsent
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  Rate: closed loop (no -R), achieved {:.2}/s",
                    self.achieved_rate
                );
            }
        }
        if self.tls_resumption.is_some() {
            let _ = writeln!(
                out,
                "  TLS handshakes: {} full, {} resumed (resumption {})",
                self.tls_handshakes.full,
                self.tls_handshakes.resumed,
                if self.tls_resumption == Some(true) {
                    "on"
                } else {
                    "off"
                }
            );
        }
        let _ = writeln!(
            out,
            "  Written: {}B",
            format_binary(self.bytes_written as f64)
        );
        if self.warmup_secs > 0.0 {
            let _ = writeln!(
                out,
                "  Warm-up (not recorded): {} responses, {} errors",
                self.warmup.completed, self.warmup.errors
            );
        }
        for (class, message) in &self.error_examples {
            let _ = writeln!(out, "  First {} error: {message}", class.as_str());
        }
        Ok(out)
    }

    /// The corrected latency as an HdrHistogram percentile distribution (`.hgrm`, milliseconds),
    /// the format HdrHistogram's plotter and tools read.
    pub fn render_hgrm(&self) -> Result<String, ResultsError> {
        let histogram = self.corrected_histogram()?;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>12} {:>14} {:>10} {:>14}\n",
            "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
        );
        let mut total = 0;
        for step in histogram.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
            total += step.count_since_last_iteration();
            let value = step.value_iterated_to() as f64 / US_PER_MS;
            let q = step.quantile_iterated_to();
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:12.3} {q:2.12} {total:10} {:14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:12.3} {q:2.12} {total:10}");
            }
        }
        footer(&mut out, &histogram);
        Ok(out)
    }
}

impl LatencySummary {
    /// The summary of a histogram, as the load generator writes it (percentiles and the
    /// encoded histogram).
    pub fn of(histogram: &Histogram<u64>) -> LatencySummary {
        summarize(histogram)
    }
}

/// Several runs' latency summaries as one: their histograms added, then summarized again, so a
/// percentile is taken over every request of every run (`sluice lab rounds` pools a system's
/// rounds this way). `None` for an empty list.
pub fn pool_summaries(
    summaries: &[&LatencySummary],
) -> Result<Option<LatencySummary>, ResultsError> {
    let mut pooled: Option<Histogram<u64>> = None;
    for summary in summaries {
        let histogram = decode(&summary.hdr_histogram)?;
        match &mut pooled {
            None => pooled = Some(histogram),
            Some(sum) => sum
                .add(&histogram)
                .map_err(|e| ResultsError::Histogram(format!("adding histograms: {e:?}")))?,
        }
    }
    Ok(pooled.as_ref().map(summarize))
}

/// A series histogram's value at `q`, or `None` if it is empty.
fn quantile(histogram: &Histogram<u64>, q: f64) -> Option<u64> {
    (!histogram.is_empty()).then(|| histogram.value_at_quantile(q))
}

fn summarize(histogram: &Histogram<u64>) -> LatencySummary {
    let mean = histogram.mean();
    let stdev = histogram.stdev();
    let within = if histogram.is_empty() {
        0.0
    } else {
        let low = (mean - stdev).max(0.0) as u64;
        let high = (mean + stdev) as u64;
        100.0 * histogram.count_between(low, high) as f64 / histogram.len() as f64
    };
    LatencySummary {
        count: histogram.len(),
        min_us: if histogram.is_empty() {
            0
        } else {
            histogram.min()
        },
        max_us: histogram.max(),
        mean_us: mean,
        stdev_us: stdev,
        within_stdev_percent: within,
        percentiles: PERCENTILES
            .iter()
            .map(|&percentile| PercentileValue {
                percentile,
                value_us: histogram.value_at_percentile(percentile),
            })
            .collect(),
        hdr_histogram: encode(histogram),
    }
}

fn spread(samples: &[u64]) -> Spread {
    if samples.is_empty() {
        return Spread::default();
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<u64>() as f64 / n;
    let variance = samples
        .iter()
        .map(|&s| (s as f64 - mean).powi(2))
        .sum::<f64>()
        / (n - 1.0).max(1.0);
    let stdev = variance.sqrt();
    let within = samples
        .iter()
        .filter(|&&s| (s as f64 - mean).abs() <= stdev)
        .count() as f64;
    Spread {
        mean,
        stdev,
        max: samples.iter().copied().max().unwrap_or(0) as f64,
        within_stdev_percent: 100.0 * within / n,
    }
}

fn encode(histogram: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(histogram, &mut bytes)
        .expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode(encoded: &str) -> Result<Histogram<u64>, ResultsError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded)?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| ResultsError::Histogram(format!("{e:?}")))
}

/// wrk2's `-L` block: the listed percentiles, then the spectrum in HdrHistogram_c's classic format.
fn latency_section(out: &mut String, histogram: &Histogram<u64>, title: &str) {
    let _ = writeln!(out, "  Latency Distribution (HdrHistogram - {title})");
    for p in PERCENTILES {
        let label = if (p * 1000.0).fract().abs() > 1e-9 {
            format!("{p:.4}")
        } else {
            format!("{p:.3}")
        };
        let value = histogram.value_at_percentile(p) as f64;
        let _ = writeln!(out, "{label:>7}% {:>9}", format_us(value));
    }
    let _ = writeln!(out, "\n  Detailed Percentile spectrum:");
    let _ = writeln!(
        out,
        "{:>12} {:>12} {:>12} {:>12}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0;
    for step in histogram.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
        total += step.count_since_last_iteration();
        let q = step.quantile_iterated_to();
        let _ = writeln!(
            out,
            "{:12.3} {q:12.6} {total:12} {:12.2}",
            step.value_iterated_to() as f64 / US_PER_MS,
            1.0 / (1.0 - q)
        );
    }
    footer(out, histogram);
    let _ = writeln!(
        out,
        "----------------------------------------------------------"
    );
}

fn footer(out: &mut String, histogram: &Histogram<u64>) {
    let sub_buckets = (2 * 10u32.pow(u32::from(histogram.sigfig()))).next_power_of_two();
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        histogram.mean() / US_PER_MS,
        histogram.stdev() / US_PER_MS
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        histogram.max() as f64 / US_PER_MS,
        histogram.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        histogram.buckets(),
        sub_buckets
    );
}

/// Microseconds in wrk's units: `812.00us`, `1.13ms`, `2.50s`, `1.50m`, `1.00h`.
fn format_us(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.2}us")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else if us < 60e6 {
        format!("{:.2}s", us / 1e6)
    } else if us < 3600e6 {
        format!("{:.2}m", us / 60e6)
    } else {
        format!("{:.2}h", us / 3600e6)
    }
}

/// `950.00`, `1.06k`, `2.30M`, as wrk.
fn format_metric(n: f64) -> String {
    if n < 1e3 {
        format!("{n:.2}")
    } else if n < 1e6 {
        format!("{:.2}k", n / 1e3)
    } else if n < 1e9 {
        format!("{:.2}M", n / 1e6)
    } else {
        format!("{:.2}G", n / 1e9)
    }
}

/// Powers of 1024, as wrk (the caller appends "B"): `512.00`, `102.41M`.
fn format_binary(n: f64) -> String {
    let units = ["", "K", "M", "G", "T"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1024.0 && unit < units.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2}{}", units[unit])
}

fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if d.subsec_nanos() == 0 && secs >= 60.0 && d.as_secs().is_multiple_of(60) {
        format!("{}m", d.as_secs() / 60)
    } else if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if secs >= 1.0 {
        format!("{secs:.2}s")
    } else {
        format!("{:.0}ms", secs * 1e3)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::LoadArgs;
    use crate::recorder::{Outcome, Sample};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadArgs,
    }

    fn config() -> Config {
        let cli = Cli::try_parse_from([
            "load",
            "-d",
            "2s",
            "-R",
            "100",
            "-c",
            "1",
            "-t",
            "1",
            "https://h/",
        ])
        .unwrap();
        Config::try_from(cli.args).unwrap()
    }

    fn results() -> Results {
        let mut recorder = Recorder::new(Duration::ZERO, Duration::from_secs(2))
            .with_early_series(Duration::from_secs(1));
        for i in 0..200u64 {
            let intended = Duration::from_millis(10 * i);
            // Every 50th request takes 400 ms; the rest 1 ms.
            let latency = if i % 50 == 0 { 400 } else { 1 };
            // Request 3 leaves 20 ms late.
            let sent = intended + Duration::from_millis(if i == 3 { 20 } else { 0 });
            recorder.record(&Sample {
                intended,
                sent,
                done: sent + Duration::from_millis(latency),
                outcome: Outcome::Response {
                    status: if i == 7 { 500 } else { 200 },
                },
                bytes_read: 1000,
                bytes_written: 50,
            });
        }
        recorder.record_handshake(false);
        let mut examples = BTreeMap::new();
        examples.insert(ErrorClass::Status, "500".to_owned());
        Results::new(
            &config(),
            &recorder,
            &[100, 100],
            examples,
            RunTiming {
                elapsed: Duration::from_secs(2),
                start_lead: Duration::from_millis(10),
                measurement_started_unix_secs: 1_795_000_000.25,
            },
        )
    }

    #[test]
    fn results_survive_a_json_round_trip_with_their_histograms() {
        let results = results();
        let json = serde_json::to_string_pretty(&results).unwrap();
        let back: Results = serde_json::from_str(&json).unwrap();
        // Floats may move by an ulp through JSON; the histograms and counts must not move at all.
        assert_eq!(
            back.latency.corrected.hdr_histogram,
            results.latency.corrected.hdr_histogram
        );
        assert_eq!(back.series, results.series);
        assert_eq!(back.early_series, results.early_series);
        let histogram = |r: &Results| {
            r.latency
                .corrected_without_first_second
                .as_ref()
                .map(|s| s.hdr_histogram.clone())
        };
        assert_eq!(histogram(&back), histogram(&results));
        assert_eq!(back.errors, results.errors);
        let histogram = back.corrected_histogram().unwrap();
        assert_eq!(histogram.len(), 200);
        assert!(histogram.value_at_percentile(99.0) >= 399_000);
        assert_eq!(back.requests, 200);
        assert_eq!(back.achieved_rate, 100.0);
        assert_eq!(back.measurement_started_unix_secs, 1_795_000_000.25);
        assert_eq!(back.errors.status, 1);
        assert_eq!(back.status_codes[&500], 1);
        assert_eq!(back.tls_resumption, Some(false));
        assert_eq!(back.series.len(), 2);
        assert_eq!(back.series[0].completed, 100);
        assert!(back.series[0].p99_us.unwrap() >= 390_000);
        assert_eq!(back.thread_requests_per_sec.mean, 100.0);

        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["schema"], SCHEMA);
        assert_eq!(value["errors"]["status"], 1);
        assert_eq!(value["status_codes"]["500"], 1);
        assert_eq!(value["error_examples"]["status"], "500");
        assert_eq!(
            value["latency"]["corrected"]["percentiles"]
                .as_array()
                .unwrap()
                .len(),
            9
        );
        assert!(value["latency"]["corrected"]["hdr_histogram"]
            .as_str()
            .unwrap()
            .starts_with("HISTF"));
    }

    #[test]
    fn the_early_series_and_the_tail_without_second_0_are_in_the_results() {
        let results = results();
        assert_eq!(results.early_series_secs, 1.0);
        let early = &results.early_series;
        assert_eq!(early.len(), 10);
        let starts: Vec<u64> = early.iter().map(|p| p.start_ms).collect();
        assert_eq!(starts, [0, 100, 200, 300, 400, 500, 600, 700, 800, 900]);
        // Requests 1..=9 end in the first 100 ms (request 0 takes 400 ms), one of them sent late.
        assert_eq!(early[0].completed, 9);
        assert!(early[0].max_us.unwrap() >= 20_000);
        assert!(early[0].send_late_max_us.unwrap() >= 19_000);
        assert!(early[0].send_late_p50_us.unwrap() <= 100);
        assert_eq!(early[1].send_late_max_us, Some(0));
        // 400..500 ms: requests 40..=49 and request 0, due at 0 and done at 400 ms.
        assert_eq!(early[4].completed, 11);
        assert!(early[4].p99_us.unwrap() >= 390_000);
        assert!(early[4].p50_us.unwrap() <= 1_100);
        assert_eq!(
            early.iter().map(|p| p.completed).sum::<u64>(),
            results.series[0].completed
        );
        assert_eq!(early[0].errors.status, 1, "request 7's 500");

        // Second 1 holds requests 100..=199 (150 is one of the slow ones; 50 ended in second 0).
        let without = results
            .latency
            .corrected_without_first_second
            .as_ref()
            .unwrap();
        assert_eq!(without.count, 100);
        assert!(without.max_us >= 399_000);
        assert_eq!(results.latency.corrected.count, 200);
    }

    #[test]
    fn results_written_before_the_early_series_still_read() {
        let mut value = serde_json::to_value(results()).unwrap();
        let object = value.as_object_mut().unwrap();
        object.remove("early_series").unwrap();
        object.remove("early_series_secs").unwrap();
        value["latency"]
            .as_object_mut()
            .unwrap()
            .remove("corrected_without_first_second")
            .unwrap();
        let old: Results = serde_json::from_value(value).unwrap();
        assert!(old.early_series.is_empty());
        assert_eq!(old.early_series_secs, 0.0);
        assert_eq!(old.latency.corrected_without_first_second, None);
        assert_eq!(old.requests, 200);
    }

    #[test]
    fn text_report_is_shaped_like_wrk2s() {
        let text = results().render_text(true, true).unwrap();
        for expected in [
            "  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency ",
            "  Latency Distribution (HdrHistogram - Recorded Latency)\n 50.000% ",
            "99.9999% ",
            "100.000% ",
            "  Detailed Percentile spectrum:\n       Value   Percentile   TotalCount 1/(1-Percentile)\n\n",
            "#[Buckets = ",
            "Uncorrected Latency (measured without taking delayed starts into account)",
            "  200 requests in 2.00s, 195.31KB read\n",
            "  Non-2xx or 3xx responses: 1\n",
            "Requests/sec:    100.00\n",
            "  Rate: requested 100.00/s, achieved 100.00/s (100.00%), unsent 0\n",
            "  TLS handshakes: 1 full, 0 resumed (resumption off)\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(!text.contains("Socket errors"));
        let short = results().render_text(false, false).unwrap();
        assert!(!short.contains("Latency Distribution"));
    }

    #[test]
    fn hgrm_is_the_standard_percentile_distribution() {
        let hgrm = results().render_hgrm().unwrap();
        let mut lines = hgrm.lines();
        assert_eq!(
            lines.next().unwrap(),
            "       Value     Percentile TotalCount 1/(1-Percentile)"
        );
        assert_eq!(lines.next().unwrap(), "");
        let rows: Vec<Vec<&str>> = lines
            .clone()
            .take_while(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(rows.len() > 10);
        assert_eq!(rows[0].len(), 4);
        let last = rows.last().unwrap();
        assert_eq!(last.len(), 3, "the 100% row has no 1/(1-p) column");
        assert_eq!(last[1], "1.000000000000");
        assert_eq!(last[2], "200");
        assert!(last[0].parse::<f64>().unwrap() >= 399.0);
        assert!(hgrm.contains("#[Max     = "));
        assert!(hgrm.contains("Total count    =          200]"));
        assert!(hgrm.contains("SubBuckets     =         2048]"));
    }

    #[test]
    fn pooled_summaries_take_percentiles_over_every_runs_requests() {
        // Run one: 9,990 fast requests and 10 at 5 ms; run two: 10,000 fast ones. Each alone
        // has its p99.9 at 100 µs; pooled, the 10 slow ones are 0.05 %, so p99.99 is 5 ms and
        // p99.9 still 100 µs.
        let mut slow_run = crate::recorder::latency_histogram();
        slow_run.record_n(100, 9_990).unwrap();
        slow_run.record_n(5_000, 10).unwrap();
        let mut fast_run = crate::recorder::latency_histogram();
        fast_run.record_n(100, 10_000).unwrap();
        let (slow, fast) = (summarize(&slow_run), summarize(&fast_run));

        let pooled = pool_summaries(&[&slow, &fast]).unwrap().unwrap();
        assert_eq!(pooled.count, 20_000);
        assert_eq!(pooled.max_us, slow.max_us);
        let at = |p: f64| {
            pooled
                .percentiles
                .iter()
                .find(|v| (v.percentile - p).abs() < 1e-9)
                .unwrap()
                .value_us
        };
        assert_eq!(at(99.9), 100);
        assert!((4_990..=5_010).contains(&at(99.99)), "{}", at(99.99));
        assert_eq!(pool_summaries(&[]).unwrap(), None);
        let broken = LatencySummary {
            hdr_histogram: "not base64!".into(),
            ..fast
        };
        assert!(pool_summaries(&[&slow, &broken]).is_err());
    }

    #[test]
    fn units_read_like_wrks() {
        assert_eq!(format_us(812.0), "812.00us");
        assert_eq!(format_us(1_130.0), "1.13ms");
        assert_eq!(format_us(2_500_000.0), "2.50s");
        assert_eq!(format_metric(1_060.0), "1.06k");
        assert_eq!(format_binary(1024.0 * 1024.0 * 102.41), "102.41M");
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.50s");
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
    }
}
