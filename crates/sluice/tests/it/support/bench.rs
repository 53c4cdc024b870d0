//! What the benchmarks (`kubernetes_bench`, `gateway_bench`) share: percentiles, the report
//! table's file, and a process's memory from /proc.

use std::time::Duration;

pub(crate) struct Summary {
    pub(crate) samples: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) max: Duration,
}

/// Nearest-rank percentiles of `samples` (at least one).
pub(crate) fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort();
    let rank = |p: f64| samples[((p * samples.len() as f64).ceil() as usize).max(1) - 1];
    Summary {
        samples: samples.len(),
        p50: rank(0.50),
        p99: rank(0.99),
        max: *samples.last().unwrap(),
    }
}

pub(crate) fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

/// Prints a Markdown table and appends it to `$SLUICE_BENCH_KUBE_OUT` when that is set.
pub(crate) fn report(markdown: &str) {
    println!("\n{markdown}");
    if let Some(path) = std::env::var_os("SLUICE_BENCH_KUBE_OUT") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{markdown}").unwrap();
    }
}

/// A field of `/proc/PID/<file>` in kB, as MiB: `status` `VmRSS:`, or `smaps_rollup`
/// `Anonymous:` (heap and stacks, without the binary's pages).
pub(crate) fn proc_mib(pid: u32, file: &str, field: &str) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap();
    let kib: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/{file}"));
    kib / 1024.0
}
