//! Coordinated omission: a server that freezes for 500 ms every 2 s, driven at a constant rate.
//! The corrected latency must show the freeze for every request due during it; the uncorrected
//! latency (from the actual send) only sees the few requests that were in flight when it began.

use std::time::Duration;

use crate::support::{Behavior, TestServer};

#[test]
fn corrected_latency_shows_a_freeze_that_uncorrected_latency_hides() {
    let server = TestServer::start(Behavior::Freeze {
        period: Duration::from_secs(2),
        offset: Duration::from_secs(1),
        freeze: Duration::from_millis(500),
    });
    let url = server.url("http");
    // 400/s over 2 connections for 4 s: two freezes, ~1600 requests, of which ~400 are due while
    // the server is frozen but only ~4 (one per connection per freeze) are *sent* into the freeze.
    let results = crate::support::run(&["-t", "1", "-c", "2", "-R", "400", "-d", "4s", &url]);

    let corrected = results.corrected_histogram().unwrap();
    let uncorrected = results.uncorrected_histogram().unwrap();
    let p99_corrected = Duration::from_micros(corrected.value_at_percentile(99.0));
    let p99_uncorrected = Duration::from_micros(uncorrected.value_at_percentile(99.0));
    eprintln!(
        "requests {} corrected p99 {p99_corrected:?} uncorrected p99 {p99_uncorrected:?} \
         uncorrected max {:?}",
        results.requests,
        Duration::from_micros(uncorrected.max())
    );

    assert_eq!(results.errors.total(), 0, "{:?}", results.error_examples);
    assert!(results.requests >= 1400, "{}", results.requests);
    assert!(
        p99_corrected >= Duration::from_millis(300),
        "{p99_corrected:?}"
    );
    assert!(
        p99_uncorrected < Duration::from_millis(100),
        "{p99_uncorrected:?}"
    );
    // The stalled sends themselves are there in the uncorrected histogram, just rare.
    assert!(uncorrected.max() >= 300_000);
    // The per-second series shows when it happened: second 1 (the first freeze) is slow.
    let p99s: Vec<Option<u64>> = results.series.iter().map(|p| p.p99_us).collect();
    assert!(p99s[1].unwrap() >= 300_000, "{p99s:?}");
}
