//! `load`: the `sluice load` generator, wrk2-compatible, with latency it can defend.
//!
//! ```text
//!  LoadArgs (clap, raw strings) ──TryFrom──▶ Config ──run()──▶ Results ──▶ text report (wrk2 shape)
//!                                              │                  │     ├─▶ --json FILE (the lab's input)
//!             Schedule (pure: who sends when) ─┤                  │     └─▶ --hgrm FILE
//!                                              ▼                  │
//!   thread × -t ─ current-thread runtime ─ its share of -c connections
//!        each connection: slot = schedule.next(now); sleep to slot.send_at (timerfd, 100 µs);
//!                         connect if needed; write; read; Recorder::record(sample)
//!        Recorder (pure, per thread): corrected + uncorrected HdrHistograms, errors, per second
//!                                              └──────── merge ───┘
//! ```
//!
//! # What it measures
//!
//! With `-R RPS` the run is **open loop**: the rate is split evenly over the connections (and so
//! over the threads that own them), each connection has its own fixed schedule, and a request's
//! latency is measured from when it *should* have been sent. A server that stalls for 500 ms
//! therefore shows up as 500 ms of latency for every request due during the stall, not only the one
//! that was in flight (coordinated omission, as wrk2 corrects it). A connection that falls behind
//! catches up at twice its rate (as wrk2) and never skips a request. Without `-R` the run is closed
//! loop, each connection as fast as it goes, as wrk.
//!
//! The clock starts only once every connection is open and its task is waiting, and a little
//! ahead (twice the time the tasks took to start, at least 10 ms; `start_lead_secs` in the
//! results): the schedule's first requests are due at its very start, so a clock started before
//! the tasks could run charged the generator's own start-up to the server (up to 25 ms for the
//! first 100 ms of a 1,000-connection run).
//!
//! Besides the per-second series, the first `--early-series` (default 5 s) is recorded per 100 ms,
//! with how late the generator sent each request (actual send − intended start). That lateness
//! is the generator's own delay, except when a connection was still waiting for its previous
//! response past its next request's intended start (its per-connection interval: 333 ms for
//! 1,000 connections at 3,000/s), which is the server's. The results also carry the corrected
//! latency without second 0 (`corrected_without_first_second`).
//!
//! Send times are kept within 100 µs of the schedule: on Linux each connection sleeps on its own
//! `timerfd` (deadlines rounded up to a shared 100 µs grid, so neighbours wake together) instead
//! of tokio's (and wrk2's) millisecond timer, which would add up to a millisecond of the
//! generator's own lateness to every corrected latency.
//!
//! HTTP/1.1 uses a small hand-written client (the request is encoded once; responses are only
//! framed), HTTP/2 uses hyper, HTTPS uses rustls with aws-lc-rs. `--tls-resumption off` (the
//! default) disables the session cache, so every new connection is a full handshake; `on` shares
//! one cache across all connections. Handshakes are counted by kind.
//!
//! # How errors are counted, and how that differs from wrk2
//!
//! Every failed request counts **once**, in one class, and its connection is then replaced:
//!
//! | class | meaning |
//! |---|---|
//! | `connect` | TCP connect refused, failed or not done within `--timeout`; TLS (or HTTP/2) handshake failed |
//! | `read` | reset, EOF or unparsable bytes before the response was complete |
//! | `write` | the request could not be written |
//! | `timeout` | sent, but the response was not complete `--timeout` after the send |
//! | `status` | a complete response with status ≥ 400 (wrk2's "Non-2xx or 3xx responses") |
//!
//! wrk2 differs in ways that make its numbers hard to compare across runs:
//! - **timeouts**: wrk2 checks every 2 s and counts each connection whose request is older than
//!   the timeout, again at every check, without closing it: one request stuck for 10 s is several
//!   "timeouts". Here it is one timeout, and the connection is replaced.
//! - **connect**: wrk2 counts connect attempts, so a refused port counts reconnect loops. Here the
//!   request that needed a connection is what fails, once.
//! - **read**: wrk treats a connection closed mid-response as a silent reconnect. Here it is a
//!   read error: that response was lost. That includes a kept-alive connection the server closes
//!   unannounced (without `Connection: close`) just as a request goes out on it.
//! - **the end**: wrk2 drops responses that arrive after the duration. Here requests due before the
//!   end are awaited (up to `--timeout`), and requests a late connection never got to send are
//!   reported as `unsent`, so the achieved rate is honest.
//!
//! Only complete responses (2xx–5xx) enter the latency histograms, as in wrk2; requests due during
//! `--warmup` enter nothing and are counted apart.
//!
//! # Exit codes (`run_cli`)
//! 0: every request succeeded. 1: some failed (any class), none completed, or the target cannot be
//! resolved. 2: bad input (URL, duration, header, …), with a message naming the flag and value.

mod args;
mod clock;
mod driver;
mod http1;
mod recorder;
mod report;
mod schedule;
mod tls;

use std::io::Write as _;

use anyhow::Context as _;

pub use args::{
    parse_duration, parse_header, parse_metric, Config, ConfigError, LoadArgs, Output, Target,
    TlsResumption,
};
pub use driver::{hold_idle, run, Held, RunError};
pub use recorder::{
    latency_histogram, EarlyBucket, ErrorClass, ErrorCounts, Handshakes, Outcome, Recorder, Sample,
    Second, WarmupCounts, EARLY_BUCKET, HIGHEST_TRACKABLE_US, MAX_EARLY_SERIES, SIGNIFICANT_DIGITS,
};
pub use report::{
    pool_summaries, EarlyPoint, Latencies, LatencySummary, PercentileValue, Results, ResultsError,
    RunTiming, SeriesPoint, Spread, PERCENTILES, SCHEMA,
};
pub use schedule::{ConnSchedule, Schedule, Slot, CATCH_UP_FACTOR};
pub use tls::{TlsOptions, Trust};

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code when requests failed or the target was unreachable.
pub const EXIT_ERRORS: i32 = 1;

/// `sluice load`: validate, run, print the report, write the files; returns the exit code.
///
/// Bad input is reported on stderr and returns 2; an `Err` means the run could not start or its
/// results could not be written (the caller exits 1).
pub fn run_cli(args: LoadArgs) -> anyhow::Result<i32> {
    let config = match Config::try_from(args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("sluice load: {:#}", anyhow::Error::new(error));
            return Ok(EXIT_BAD_INPUT);
        }
    };
    let mut stdout = std::io::stdout();
    if config.hold_idle {
        let held = driver::hold_idle(&config, |open, failed| {
            let mut stdout = std::io::stdout();
            let _ = writeln!(stdout, "idle: {open} open, {failed} failed");
            let _ = stdout.flush();
        })?;
        writeln!(stdout, "released")?;
        return Ok(if held.failed == 0 { 0 } else { 1 });
    }
    write!(stdout, "{}", Results::render_header(&config))?;
    stdout.flush()?;

    let results = run(&config)?;
    let text = results.render_text(config.output.latency, config.output.u_latency)?;
    write!(stdout, "{text}")?;
    stdout.flush()?;

    if let Some(path) = &config.output.json {
        let json = serde_json::to_string_pretty(&results)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("writing --json {}", path.display()))?;
    }
    if let Some(path) = &config.output.hgrm {
        std::fs::write(path, results.render_hgrm()?)
            .with_context(|| format!("writing --hgrm {}", path.display()))?;
    }
    Ok(exit_code(&results))
}

/// 0 if every request due in the measurement completed with a status below 400, else 1.
pub fn exit_code(results: &Results) -> i32 {
    if results.errors.total() > 0 || results.requests == 0 {
        EXIT_ERRORS
    } else {
        0
    }
}
