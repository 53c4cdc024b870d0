//! What happened to each request, as counts and histograms: pure, fed by the driver, merged at the end.
//!
//! One [`Recorder`] per thread, so the hot path never shares a cache line; `merge` folds them.
//! Times are offsets from the run's start, handed in by the caller: the recorder owns no clock.
//!
//! - corrected latency = done − intended start (what a user arriving on schedule would have seen);
//! - uncorrected latency = done − actual send (what wrk without `-R` and most tools report);
//! - a request belongs to the measurement if its *intended* start is in `[warmup, warmup+duration)`;
//!   earlier ones are counted apart as warm-up and never reach a histogram;
//! - every failed request counts once, in exactly one error class; only complete responses
//!   (including 4xx/5xx, as in wrk2) are recorded in the latency histograms;
//! - a per-second series (by completion time) keeps completions, errors by class and a coarse
//!   latency histogram for the lab's over-time charts;
//! - an early series does the same per [`EARLY_BUCKET`] (100 ms) for the first seconds of the
//!   measurement only, and adds how late the generator itself sent each request (actual send −
//!   intended start), so a slow start of the generator is told apart from a slow server;
//! - a second corrected histogram leaves out the requests completed in second 0, so a run's tail
//!   can be read without its start.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies are recorded in microseconds, from 1 µs to 1 hour, with 3 significant digits.
pub const HIGHEST_TRACKABLE_US: u64 = 3_600_000_000;
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// The per-second histograms only feed p50/p99/max charts: 2 digits keep them small.
const SERIES_SIGNIFICANT_DIGITS: u8 = 2;
/// The width of one entry of the early series.
pub const EARLY_BUCKET: Duration = Duration::from_millis(100);
/// The longest early series a run may ask for (`--early-series`): 600 buckets of 100 ms, each
/// three small histograms, so memory stays bounded whatever the run's length.
pub const MAX_EARLY_SERIES: Duration = Duration::from_secs(60);

/// Why a request failed. Each failed request is counted once, in the first class that applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorClass {
    /// No usable connection: TCP connect refused, failed or timed out; TLS handshake failed.
    Connect,
    /// The response could not be read: reset, EOF or unparsable bytes before it was complete.
    Read,
    /// The request could not be written.
    Write,
    /// Sent, but the response was not complete within `--timeout`.
    Timeout,
    /// A complete response with a status of 400 or more (wrk2's "Non-2xx or 3xx responses").
    Status,
}

/// Errors by class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    pub status: u64,
}

/// What became of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A complete response with this status.
    Response {
        status: u16,
    },
    Error(ErrorClass),
}

/// One request, as the driver saw it. Times are offsets from the run's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When it should have started (equal to `sent` in closed loop).
    pub intended: Duration,
    /// When the connection started on it (connecting first if it had to).
    pub sent: Duration,
    /// When the response was complete or the failure was seen.
    pub done: Duration,
    pub outcome: Outcome,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// TLS handshakes made by the run, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handshakes {
    /// Full handshakes (including ones that needed a HelloRetryRequest).
    pub full: u64,
    /// Abbreviated handshakes that resumed an earlier session.
    pub resumed: u64,
}

/// Counts for requests whose intended start fell in the warm-up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmupCounts {
    pub completed: u64,
    pub errors: u64,
}

/// One second of the measurement (by completion time).
#[derive(Clone, Debug)]
pub struct Second {
    /// Complete responses (any status).
    pub completed: u64,
    pub errors: ErrorCounts,
    /// Corrected latency of the responses completed in this second, in µs, 2 significant digits.
    pub latency: Histogram<u64>,
}

/// One [`EARLY_BUCKET`] of the measurement's first seconds (by completion time, as [`Second`]).
#[derive(Clone, Debug)]
pub struct EarlyBucket {
    /// Complete responses (any status).
    pub completed: u64,
    pub errors: ErrorCounts,
    /// Corrected latency of the responses completed in this bucket, in µs, 2 significant digits.
    pub latency: Histogram<u64>,
    /// How late the generator sent each request that ended in this bucket (response or error):
    /// actual send − intended start, in µs. Up to one send-timer step (100 µs) is the design; more
    /// is the generator's own delay (and is inside `latency` too), unless the request's connection
    /// was still waiting for its previous response when this one was due.
    pub send_lateness: Histogram<u64>,
}

/// Counts and histograms for one thread (or, after [`Recorder::merge`], the whole run).
#[derive(Clone, Debug)]
pub struct Recorder {
    start: Duration,
    end: Duration,
    corrected: Histogram<u64>,
    /// `corrected` without the responses completed in second 0 of the series.
    corrected_without_first_second: Histogram<u64>,
    uncorrected: Histogram<u64>,
    completed: u64,
    errors: ErrorCounts,
    statuses: BTreeMap<u16, u64>,
    bytes_read: u64,
    bytes_written: u64,
    handshakes: Handshakes,
    unsent: u64,
    warmup: WarmupCounts,
    seconds: Vec<Second>,
    /// How many [`EARLY_BUCKET`]s from the start the early series covers.
    early_buckets: usize,
    early: Vec<EarlyBucket>,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 5] = [
        ErrorClass::Connect,
        ErrorClass::Read,
        ErrorClass::Write,
        ErrorClass::Timeout,
        ErrorClass::Status,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Read => "read",
            ErrorClass::Write => "write",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Status => "status",
        }
    }
}

impl ErrorCounts {
    pub fn add(&mut self, class: ErrorClass) {
        *self.get_mut(class) += 1;
    }

    pub fn get(&self, class: ErrorClass) -> u64 {
        match class {
            ErrorClass::Connect => self.connect,
            ErrorClass::Read => self.read,
            ErrorClass::Write => self.write,
            ErrorClass::Timeout => self.timeout,
            ErrorClass::Status => self.status,
        }
    }

    /// Socket-level errors: everything but `status`.
    pub fn socket(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout
    }

    pub fn total(&self) -> u64 {
        self.socket() + self.status
    }

    pub fn merge(&mut self, other: &ErrorCounts) {
        for class in ErrorClass::ALL {
            *self.get_mut(class) += other.get(class);
        }
    }

    fn get_mut(&mut self, class: ErrorClass) -> &mut u64 {
        match class {
            ErrorClass::Connect => &mut self.connect,
            ErrorClass::Read => &mut self.read,
            ErrorClass::Write => &mut self.write,
            ErrorClass::Timeout => &mut self.timeout,
            ErrorClass::Status => &mut self.status,
        }
    }
}

impl Second {
    fn new() -> Second {
        Second {
            completed: 0,
            errors: ErrorCounts::default(),
            latency: series_histogram(),
        }
    }

    fn merge(&mut self, other: &Second) {
        self.completed += other.completed;
        self.errors.merge(&other.errors);
        merge_series_histogram(&mut self.latency, &other.latency);
    }
}

impl EarlyBucket {
    fn new() -> EarlyBucket {
        EarlyBucket {
            completed: 0,
            errors: ErrorCounts::default(),
            latency: series_histogram(),
            send_lateness: series_histogram(),
        }
    }

    fn merge(&mut self, other: &EarlyBucket) {
        self.completed += other.completed;
        self.errors.merge(&other.errors);
        merge_series_histogram(&mut self.latency, &other.latency);
        merge_series_histogram(&mut self.send_lateness, &other.send_lateness);
    }
}

impl Recorder {
    /// A recorder for a run measured over `[warmup, warmup + duration)` of intended start times,
    /// without an early series.
    pub fn new(warmup: Duration, duration: Duration) -> Recorder {
        Recorder {
            start: warmup,
            end: warmup + duration,
            corrected: latency_histogram(),
            corrected_without_first_second: latency_histogram(),
            uncorrected: latency_histogram(),
            completed: 0,
            errors: ErrorCounts::default(),
            statuses: BTreeMap::new(),
            bytes_read: 0,
            bytes_written: 0,
            handshakes: Handshakes::default(),
            unsent: 0,
            warmup: WarmupCounts::default(),
            seconds: Vec::new(),
            early_buckets: 0,
            early: Vec::new(),
        }
    }

    /// Also keep the early series for the first `window` of the measurement (rounded up to whole
    /// [`EARLY_BUCKET`]s, at most [`MAX_EARLY_SERIES`]; zero: none).
    pub fn with_early_series(mut self, window: Duration) -> Recorder {
        let window = window.min(MAX_EARLY_SERIES);
        self.early_buckets = window.as_nanos().div_ceil(EARLY_BUCKET.as_nanos()) as usize;
        self
    }

    pub fn record(&mut self, sample: &Sample) {
        if sample.intended < self.start {
            match sample.outcome {
                Outcome::Response { .. } => self.warmup.completed += 1,
                Outcome::Error(_) => self.warmup.errors += 1,
            }
            return;
        }
        self.bytes_read += sample.bytes_read;
        self.bytes_written += sample.bytes_written;
        let since_start = sample.done.saturating_sub(self.start);
        let mut early = early_bucket_of(&mut self.early, self.early_buckets, since_start);
        if let Some(bucket) = early.as_deref_mut() {
            record_series(
                &mut bucket.send_lateness,
                micros(sample.sent.saturating_sub(sample.intended)),
            );
        }
        let second = second_of(&mut self.seconds, since_start);
        match sample.outcome {
            Outcome::Response { status } => {
                let corrected = micros(sample.done.saturating_sub(sample.intended));
                let uncorrected = micros(sample.done.saturating_sub(sample.sent));
                self.corrected.saturating_record(corrected);
                if since_start >= Duration::from_secs(1) {
                    self.corrected_without_first_second
                        .saturating_record(corrected);
                }
                self.uncorrected.saturating_record(uncorrected);
                self.completed += 1;
                *self.statuses.entry(status).or_default() += 1;
                second.completed += 1;
                record_series(&mut second.latency, corrected);
                if let Some(bucket) = early.as_deref_mut() {
                    bucket.completed += 1;
                    record_series(&mut bucket.latency, corrected);
                }
                if status >= 400 {
                    second.errors.add(ErrorClass::Status);
                    self.errors.add(ErrorClass::Status);
                    if let Some(bucket) = early {
                        bucket.errors.add(ErrorClass::Status);
                    }
                }
            }
            Outcome::Error(class) => {
                second.errors.add(class);
                self.errors.add(class);
                if let Some(bucket) = early {
                    bucket.errors.add(class);
                }
            }
        }
    }

    /// A TLS handshake completed (whether or not its request then succeeded).
    pub fn record_handshake(&mut self, resumed: bool) {
        if resumed {
            self.handshakes.resumed += 1;
        } else {
            self.handshakes.full += 1;
        }
    }

    /// Requests that were due before the end but never sent because their connection was late.
    pub fn record_unsent(&mut self, count: u64) {
        self.unsent += count;
    }

    /// Folds another thread's recorder (with the same window) into this one.
    pub fn merge(&mut self, other: &Recorder) {
        self.corrected
            .add(&other.corrected)
            .expect("latency histograms share their bounds");
        self.corrected_without_first_second
            .add(&other.corrected_without_first_second)
            .expect("latency histograms share their bounds");
        self.uncorrected
            .add(&other.uncorrected)
            .expect("latency histograms share their bounds");
        self.completed += other.completed;
        self.errors.merge(&other.errors);
        for (status, count) in &other.statuses {
            *self.statuses.entry(*status).or_default() += count;
        }
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.handshakes.full += other.handshakes.full;
        self.handshakes.resumed += other.handshakes.resumed;
        self.unsent += other.unsent;
        self.warmup.completed += other.warmup.completed;
        self.warmup.errors += other.warmup.errors;
        merge_series(
            &mut self.seconds,
            &other.seconds,
            Second::new,
            Second::merge,
        );
        self.early_buckets = self.early_buckets.max(other.early_buckets);
        merge_series(
            &mut self.early,
            &other.early,
            EarlyBucket::new,
            EarlyBucket::merge,
        );
    }

    /// Latency from the intended start, µs.
    pub fn corrected(&self) -> &Histogram<u64> {
        &self.corrected
    }

    /// Latency from the intended start of the responses completed after second 0, µs.
    pub fn corrected_without_first_second(&self) -> &Histogram<u64> {
        &self.corrected_without_first_second
    }

    /// Latency from the actual send, µs.
    pub fn uncorrected(&self) -> &Histogram<u64> {
        &self.uncorrected
    }

    /// Complete responses in the measurement, any status.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    pub fn errors(&self) -> &ErrorCounts {
        &self.errors
    }

    pub fn statuses(&self) -> &BTreeMap<u16, u64> {
        &self.statuses
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    pub fn handshakes(&self) -> &Handshakes {
        &self.handshakes
    }

    pub fn unsent(&self) -> u64 {
        self.unsent
    }

    pub fn warmup(&self) -> &WarmupCounts {
        &self.warmup
    }

    /// The per-second series; second 0 starts when the warm-up ends. Seconds past the duration
    /// hold requests that were due in time but completed (or failed) late.
    pub fn seconds(&self) -> &[Second] {
        &self.seconds
    }

    /// The early series: one entry per [`EARLY_BUCKET`] from the start of the measurement, up to
    /// the last one that saw a request end (at most [`Recorder::early_window`] long).
    pub fn early_series(&self) -> &[EarlyBucket] {
        &self.early
    }

    /// How long from the start the early series covers (zero: it is off).
    pub fn early_window(&self) -> Duration {
        EARLY_BUCKET * self.early_buckets as u32
    }

    /// The measured window's length.
    pub fn duration(&self) -> Duration {
        self.end - self.start
    }
}

/// The series entry for a completion `since_start` into the measurement, growing the series as
/// needed.
fn second_of(seconds: &mut Vec<Second>, since_start: Duration) -> &mut Second {
    let index = since_start.as_secs() as usize;
    if seconds.len() <= index {
        seconds.resize_with(index + 1, Second::new);
    }
    &mut seconds[index]
}

/// The early series entry for a completion `since_start` into the measurement, if the series
/// covers it, growing the series as needed.
fn early_bucket_of(
    early: &mut Vec<EarlyBucket>,
    buckets: usize,
    since_start: Duration,
) -> Option<&mut EarlyBucket> {
    let index = usize::try_from(since_start.as_nanos() / EARLY_BUCKET.as_nanos()).ok()?;
    if index >= buckets {
        return None;
    }
    if early.len() <= index {
        early.resize_with(index + 1, EarlyBucket::new);
    }
    Some(&mut early[index])
}

/// An empty series histogram: 2 significant digits, growing to the largest value recorded.
fn series_histogram() -> Histogram<u64> {
    let mut histogram =
        Histogram::new(SERIES_SIGNIFICANT_DIGITS).expect("2 significant digits are valid");
    histogram.auto(true);
    histogram
}

/// Adds `theirs` to `mine` entry by entry, growing `mine` as needed.
fn merge_series<T>(mine: &mut Vec<T>, theirs: &[T], empty: fn() -> T, merge: fn(&mut T, &T)) {
    if mine.len() < theirs.len() {
        mine.resize_with(theirs.len(), empty);
    }
    for (mine, theirs) in mine.iter_mut().zip(theirs) {
        merge(mine, theirs);
    }
}

fn merge_series_histogram(mine: &mut Histogram<u64>, theirs: &Histogram<u64>) {
    mine.add(theirs)
        .expect("auto-resizing histograms accept any values");
}

/// Records `us` in an auto-resizing series histogram (`saturating_record` would clamp to the
/// histogram's current size instead of growing it).
fn record_series(histogram: &mut Histogram<u64>, us: u64) {
    histogram
        .record(us.min(HIGHEST_TRACKABLE_US))
        .expect("an auto-resizing histogram takes any value up to its bound");
}

/// An empty latency histogram with the run's bounds: 1 µs to 1 hour, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS)
        .expect("constant bounds are valid")
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ok(intended: u64, sent: u64, done: u64) -> Sample {
        Sample {
            intended: ms(intended),
            sent: ms(sent),
            done: ms(done),
            outcome: Outcome::Response { status: 200 },
            bytes_read: 100,
            bytes_written: 10,
        }
    }

    fn failed(intended: u64, done: u64, class: ErrorClass) -> Sample {
        Sample {
            outcome: Outcome::Error(class),
            bytes_read: 0,
            ..ok(intended, intended, done)
        }
    }

    #[test]
    fn corrected_latency_counts_from_the_intended_start_uncorrected_from_the_send() {
        let mut r = Recorder::new(Duration::ZERO, ms(10_000));
        // Due at 100 ms, sent late at 400 ms (the connection was stuck), answered at 401 ms.
        r.record(&ok(100, 400, 401));
        assert_eq!(r.completed(), 1);
        assert!(r.corrected().equivalent(r.corrected().max(), 301_000));
        assert!(r.uncorrected().equivalent(r.uncorrected().max(), 1_000));
        assert_eq!(r.bytes_read(), 100);
        assert_eq!(r.bytes_written(), 10);
    }

    #[test]
    fn warmup_requests_stay_out_of_histograms_and_counts() {
        let mut r = Recorder::new(ms(1_000), ms(1_000));
        r.record(&ok(999, 999, 1_500));
        r.record(&failed(500, 700, ErrorClass::Read));
        r.record(&ok(1_000, 1_000, 1_002));
        assert_eq!(r.completed(), 1);
        assert_eq!(r.corrected().len(), 1);
        assert_eq!(r.errors().total(), 0);
        assert_eq!(
            r.warmup(),
            &WarmupCounts {
                completed: 1,
                errors: 1
            }
        );
        assert_eq!(r.bytes_read(), 100);
        // Second 0 is the first second after the warm-up.
        assert_eq!(r.seconds().len(), 1);
        assert_eq!(r.seconds()[0].completed, 1);
    }

    #[test]
    fn each_failed_request_counts_once_in_its_class_and_never_in_latency() {
        let mut r = Recorder::new(Duration::ZERO, ms(10_000));
        for class in ErrorClass::ALL
            .into_iter()
            .filter(|c| *c != ErrorClass::Status)
        {
            r.record(&failed(10, 20, class));
        }
        r.record(&failed(10, 2_010, ErrorClass::Timeout));
        let mut server_error = ok(30, 30, 35);
        server_error.outcome = Outcome::Response { status: 503 };
        r.record(&server_error);
        let mut redirect = ok(40, 40, 41);
        redirect.outcome = Outcome::Response { status: 302 };
        r.record(&redirect);

        let expected = ErrorCounts {
            connect: 1,
            read: 1,
            write: 1,
            timeout: 2,
            status: 1,
        };
        assert_eq!(r.errors(), &expected);
        assert_eq!(r.errors().socket(), 5);
        assert_eq!(r.errors().total(), 6);
        // 5xx and 3xx are complete responses: timed, counted, and listed by status.
        assert_eq!(r.completed(), 2);
        assert_eq!(r.corrected().len(), 2);
        assert_eq!(r.statuses().get(&503), Some(&1));
        assert_eq!(r.statuses().get(&302), Some(&1));
        // The timeout that surfaced at 2.01 s lands in second 2 of the series.
        assert_eq!(r.seconds()[2].errors.timeout, 1);
        assert_eq!(r.seconds()[0].errors.total(), 5);
    }

    #[test]
    fn per_second_series_follows_completion_time() {
        let mut r = Recorder::new(Duration::ZERO, ms(3_000));
        for i in 0..100 {
            r.record(&ok(i * 10, i * 10, i * 10 + 1));
        }
        // One slow request, due at 990 ms, completing at 2.5 s.
        r.record(&ok(990, 990, 2_500));
        let seconds = r.seconds();
        assert_eq!(seconds.len(), 3);
        assert_eq!(seconds[0].completed, 100);
        assert_eq!(seconds[1].completed, 0);
        assert_eq!(seconds[2].completed, 1);
        let p99 = seconds[2].latency.value_at_quantile(0.99);
        assert!((1_490_000..=1_530_000).contains(&p99), "{p99}");
        assert!(seconds[0].latency.value_at_quantile(0.99) <= 1_010);
    }

    #[test]
    fn merge_adds_everything_up() {
        let mut a = Recorder::new(Duration::ZERO, ms(2_000));
        let mut b = Recorder::new(Duration::ZERO, ms(2_000));
        a.record(&ok(0, 0, 5));
        b.record(&ok(0, 0, 1_100));
        b.record(&failed(0, 10, ErrorClass::Connect));
        b.record_handshake(false);
        a.record_handshake(true);
        b.record_unsent(3);
        a.merge(&b);
        assert_eq!(a.completed(), 2);
        assert_eq!(a.corrected().len(), 2);
        assert_eq!(a.uncorrected().len(), 2);
        assert_eq!(a.errors().connect, 1);
        assert_eq!(
            a.handshakes(),
            &Handshakes {
                full: 1,
                resumed: 1
            }
        );
        assert_eq!(a.unsent(), 3);
        assert_eq!(a.seconds().len(), 2);
        assert_eq!(a.seconds()[0].completed, 1);
        assert_eq!(a.seconds()[0].errors.connect, 1);
        assert_eq!(a.seconds()[1].completed, 1);
        assert_eq!(a.bytes_read(), 200);
    }

    #[test]
    fn the_early_series_splits_the_first_seconds_into_100_ms_by_completion_time() {
        let mut r = Recorder::new(Duration::ZERO, ms(10_000)).with_early_series(ms(1_000));
        assert_eq!(r.early_window(), ms(1_000));
        r.record(&ok(40, 40, 50)); // bucket 0, 10 ms
        r.record(&ok(120, 120, 150)); // bucket 1, 30 ms
        r.record(&ok(130, 130, 199)); // bucket 1, 69 ms
        r.record(&failed(160, 170, ErrorClass::Read)); // bucket 1, an error
        r.record(&ok(500, 500, 999)); // bucket 9, 499 ms
        r.record(&ok(900, 900, 1_000)); // second 1: past the early series
        let early = r.early_series();
        assert_eq!(early.len(), 10);
        let completed: Vec<u64> = early.iter().map(|b| b.completed).collect();
        assert_eq!(completed, [1, 2, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(early[1].errors.read, 1);
        assert_eq!(early[1].errors.total(), 1);
        assert_eq!(early[0].errors.total(), 0);
        // The buckets of second 0 add up to second 0.
        assert_eq!(completed.iter().sum::<u64>(), r.seconds()[0].completed);
        assert_eq!(r.seconds()[1].completed, 1);
        let around = |value: u64, expected: u64| value.abs_diff(expected) <= expected / 50;
        assert!(around(early[0].latency.max(), 10_000));
        assert!(around(early[1].latency.value_at_quantile(0.99), 69_000));
        assert!(around(early[1].latency.value_at_quantile(0.0), 30_000));
        assert!(around(early[9].latency.max(), 499_000));
        assert!(early[2].latency.is_empty());
    }

    #[test]
    fn the_early_series_records_how_late_the_generator_sent_apart_from_the_latency() {
        let mut r = Recorder::new(ms(1_000), ms(10_000)).with_early_series(ms(500));
        // Due at 1.1 s (100 ms into the measurement), sent 40 ms late, answered 1 ms later.
        r.record(&ok(1_100, 1_140, 1_141));
        // Due and sent at 1.15 s, answered 2 ms later: on time.
        r.record(&ok(1_150, 1_150, 1_152));
        // A connect failure also carries its send time.
        r.record(&failed(1_300, 1_310, ErrorClass::Connect));
        let early = r.early_series();
        assert_eq!(early.len(), 4, "0 .. 400 ms, the last one that saw an end");
        let late = &early[1].send_lateness;
        assert_eq!(late.len(), 2);
        assert!(late.equivalent(late.max(), 40_000), "{}", late.max());
        assert_eq!(late.min(), 0);
        // The corrected latency holds the lateness too: 41 ms from the intended start.
        assert!(early[1].latency.equivalent(early[1].latency.max(), 41_000));
        assert_eq!(early[3].send_lateness.len(), 1);
        assert_eq!(early[3].completed, 0);
        assert_eq!(early[3].errors.connect, 1);
    }

    #[test]
    fn the_early_series_is_bounded_and_off_by_default() {
        let hour = Recorder::new(Duration::ZERO, ms(7_200_000)).with_early_series(ms(3_600_000));
        assert_eq!(hour.early_window(), MAX_EARLY_SERIES);
        let odd = Recorder::new(Duration::ZERO, ms(1_000)).with_early_series(ms(250));
        assert_eq!(odd.early_window(), ms(300), "rounded up to whole buckets");

        let mut off = Recorder::new(Duration::ZERO, ms(10_000));
        let mut capped = Recorder::new(Duration::ZERO, ms(7_200_000)).with_early_series(ms(61_000));
        for done in [10, 59_999, 60_000, 3_000_000] {
            off.record(&ok(0, 0, done));
            capped.record(&ok(0, 0, done));
        }
        assert_eq!(off.early_window(), Duration::ZERO);
        assert!(off.early_series().is_empty());
        assert_eq!(capped.early_series().len(), 600);
        let in_series: u64 = capped.early_series().iter().map(|b| b.completed).sum();
        assert_eq!(in_series, 2);
    }

    #[test]
    fn merge_adds_up_the_early_series() {
        let mut a = Recorder::new(Duration::ZERO, ms(2_000)).with_early_series(ms(1_000));
        let mut b = Recorder::new(Duration::ZERO, ms(2_000)).with_early_series(ms(1_000));
        a.record(&ok(0, 0, 5));
        b.record(&ok(0, 3, 50));
        b.record(&ok(300, 300, 320));
        a.merge(&b);
        let early = a.early_series();
        assert_eq!(early.len(), 4);
        assert_eq!(early[0].completed, 2);
        assert_eq!(early[0].send_lateness.len(), 2);
        assert!(early[0]
            .send_lateness
            .equivalent(early[0].send_lateness.max(), 3_000));
        assert!(early[0].latency.equivalent(early[0].latency.max(), 50_000));
        assert_eq!(early[3].completed, 1);
        assert_eq!(a.early_window(), ms(1_000));
    }

    #[test]
    fn the_tail_without_second_0_leaves_out_what_completed_in_second_0() {
        // A 1 s warm-up: second 0 is [1 s, 2 s) of the run.
        let mut r = Recorder::new(ms(1_000), ms(10_000));
        r.record(&ok(1_000, 1_000, 1_500)); // second 0: 500 ms
        r.record(&ok(1_990, 1_990, 2_010)); // due in second 0, completed in second 1: 20 ms
        r.record(&ok(2_000, 2_000, 2_001)); // second 1: 1 ms
        r.record(&ok(500, 500, 1_800)); // warm-up: nowhere
        let all = r.corrected();
        let without = r.corrected_without_first_second();
        assert_eq!(all.len(), 3);
        assert!(all.equivalent(all.max(), 500_000));
        assert_eq!(without.len(), 2);
        assert!(without.equivalent(without.max(), 20_000));
        assert!(without.equivalent(without.min(), 1_000));

        let mut other = Recorder::new(ms(1_000), ms(10_000));
        other.record(&ok(5_000, 5_000, 5_300));
        r.merge(&other);
        assert_eq!(r.corrected_without_first_second().len(), 3);
        assert!(r
            .corrected_without_first_second()
            .equivalent(r.corrected_without_first_second().max(), 300_000));
    }

    #[test]
    fn latencies_beyond_an_hour_saturate_instead_of_panicking() {
        let mut r = Recorder::new(Duration::ZERO, ms(1));
        r.record(&ok(0, 0, 5_000_000));
        assert_eq!(r.corrected().len(), 1);
        assert!(r.corrected().max() >= HIGHEST_TRACKABLE_US / 2);
    }
}
