//! When each request should start: pure arithmetic over (rate, connections, end), no clock of its own.
//!
//! Open loop (`-R`): the run's requests are numbered globally, k = n·C + c for request n of
//! connection c out of C, and request k is due at k / R. Every connection therefore has its own fixed
//! schedule (one request per C / R seconds, phase-shifted by c / R), and the union of all of them is
//! one evenly spaced stream at exactly R per second, however the connections are split across threads.
//!
//! A connection that falls behind (its previous request took longer than the interval) does not
//! skip: it sends the overdue requests back to back, paced at [`CATCH_UP_FACTOR`] times its normal
//! rate as wrk2 does, until it is on schedule again. Latency is always measured from the *intended*
//! start, so a stall is charged to every request it delayed.
//!
//! Closed loop (no `-R`): every request is due as soon as the connection is free, as in wrk.

use std::num::NonZeroU32;
use std::time::Duration;

/// How much faster than its normal rate a late connection sends until it is back on schedule (wrk2's).
pub const CATCH_UP_FACTOR: f64 = 2.0;

/// The whole run's schedule: which requests are due when, from the run's start, until `end`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    rate: Option<f64>,
    connections: u32,
    end: Duration,
}

/// One connection's walk through the [`Schedule`], remembering where it is and whether it is late.
#[derive(Clone, Debug)]
pub struct ConnSchedule {
    schedule: Schedule,
    connection: u32,
    next: u64,
    catch_up: Option<CatchUp>,
}

/// A request to send: its number on the connection, when it was due, and when to actually send it.
/// All times are offsets from the run's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub n: u64,
    /// When the request should have started; latency is measured from here.
    pub intended: Duration,
    /// When to send it: `intended` when on schedule, later while catching up (never earlier).
    pub send_at: Duration,
}

#[derive(Clone, Copy, Debug)]
struct CatchUp {
    since: Duration,
    first: u64,
}

impl Schedule {
    /// A constant `rate` (requests per second, all connections together) until `end`.
    ///
    /// # Panics
    /// If `rate` is not a positive finite number (the validated `Config` guarantees it is).
    pub fn open(rate: f64, connections: NonZeroU32, end: Duration) -> Schedule {
        assert!(rate.is_finite() && rate > 0.0, "rate must be positive");
        Schedule {
            rate: Some(rate),
            connections: connections.get(),
            end,
        }
    }

    /// As fast as each connection can go (wrk's closed loop) until `end`.
    pub fn closed(connections: NonZeroU32, end: Duration) -> Schedule {
        Schedule {
            rate: None,
            connections: connections.get(),
            end,
        }
    }

    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    pub fn connections(&self) -> u32 {
        self.connections
    }

    pub fn end(&self) -> Duration {
        self.end
    }

    /// Time between two requests of one connection (open loop only).
    pub fn interval(&self) -> Option<Duration> {
        self.rate
            .map(|rate| Duration::from_secs_f64(f64::from(self.connections) / rate))
    }

    /// When request `n` of `connection` is due, from the run's start (open loop only).
    pub fn intended_start(&self, connection: u32, n: u64) -> Option<Duration> {
        let rate = self.rate?;
        let k = n as f64 * f64::from(self.connections) + f64::from(connection);
        Some(Duration::from_secs_f64(k / rate))
    }

    /// The connections thread `thread` of `threads` owns: every `threads`-th one, so that each
    /// thread's share of the rate is spread evenly over time rather than bunched.
    pub fn thread_connections(&self, thread: u32, threads: u32) -> impl Iterator<Item = u32> {
        (thread..self.connections).step_by(threads.max(1) as usize)
    }

    /// Requests per second thread `thread` of `threads` is asked for (open loop only).
    pub fn thread_rate(&self, thread: u32, threads: u32) -> Option<f64> {
        let owned = self.thread_connections(thread, threads).count() as f64;
        self.rate
            .map(|rate| rate * owned / f64::from(self.connections))
    }

    /// The walk for one connection, starting at its first request.
    pub fn connection(&self, connection: u32) -> ConnSchedule {
        ConnSchedule {
            schedule: *self,
            connection,
            next: 0,
            catch_up: None,
        }
    }
}

impl ConnSchedule {
    /// The next request for a connection that is free to send at `now` (offset from the run's
    /// start), or `None` once nothing more can be sent before the schedule's end.
    pub fn next(&mut self, now: Duration) -> Option<Slot> {
        let end = self.schedule.end;
        let n = self.next;
        let slot = match self.schedule.intended_start(self.connection, n) {
            None => Slot {
                n,
                intended: now,
                send_at: now,
            },
            Some(intended) if intended >= now => {
                self.catch_up = None;
                Slot {
                    n,
                    intended,
                    send_at: intended,
                }
            }
            Some(intended) => {
                let catch_up = *self.catch_up.get_or_insert(CatchUp {
                    since: now,
                    first: n,
                });
                let interval = self.schedule.interval().unwrap_or_default();
                let paced = catch_up.since
                    + interval.mul_f64((n - catch_up.first) as f64 / CATCH_UP_FACTOR);
                Slot {
                    n,
                    intended,
                    send_at: paced.max(now),
                }
            }
        };
        if slot.intended >= end || slot.send_at >= end {
            return None;
        }
        self.next += 1;
        Some(slot)
    }

    /// How many requests were due before the end but not handed out by [`ConnSchedule::next`]:
    /// the ones a late connection never got to. Always 0 in closed loop.
    pub fn unsent(&self) -> u64 {
        let mut n = self.next;
        while let Some(intended) = self.schedule.intended_start(self.connection, n) {
            if intended >= self.schedule.end {
                break;
            }
            n += 1;
        }
        n - self.next
    }

    /// Requests handed out so far.
    pub fn sent(&self) -> u64 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Runs one connection against a server that answers after `latency(n)`, returning its slots.
    fn simulate(
        mut conn: ConnSchedule,
        latency: impl Fn(u64) -> Duration,
    ) -> (Vec<Slot>, ConnSchedule) {
        let mut now = Duration::ZERO;
        let mut slots = Vec::new();
        while let Some(slot) = conn.next(now) {
            now = slot.send_at + latency(slot.n);
            slots.push(slot);
        }
        (slots, conn)
    }

    #[test]
    fn intended_starts_are_evenly_spaced_per_connection_and_phase_shifted() {
        let s = Schedule::open(1000.0, nz(4), Duration::from_secs(1));
        assert_eq!(s.interval(), Some(ms(4)));
        assert_eq!(s.intended_start(0, 0), Some(ms(0)));
        assert_eq!(s.intended_start(0, 1), Some(ms(4)));
        assert_eq!(s.intended_start(1, 0), Some(ms(1)));
        assert_eq!(s.intended_start(3, 2), Some(ms(11)));
        assert_eq!(Schedule::closed(nz(4), ms(5)).intended_start(0, 3), None);
    }

    #[test]
    fn on_schedule_requests_go_out_exactly_when_due() {
        let s = Schedule::open(100.0, nz(1), Duration::from_secs(1));
        let (slots, conn) = simulate(s.connection(0), |_| ms(1));
        assert_eq!(slots.len(), 100);
        for slot in &slots {
            assert_eq!(slot.send_at, slot.intended);
            assert_eq!(slot.intended, ms(10 * slot.n));
        }
        assert_eq!(conn.unsent(), 0);
    }

    #[test]
    fn a_late_connection_catches_up_at_twice_the_rate_without_skipping() {
        // 100/s on one connection: due every 10 ms. Request 10 (due at 100 ms) stalls for 200 ms.
        let s = Schedule::open(100.0, nz(1), Duration::from_secs(2));
        let (slots, conn) = simulate(s.connection(0), |n| if n == 10 { ms(200) } else { ms(1) });

        // Nothing skipped: every request number is handed out once, in order, each with its own
        // intended start.
        assert_eq!(slots.len(), 200);
        for (i, slot) in slots.iter().enumerate() {
            assert_eq!(slot.n, i as u64);
            assert_eq!(slot.intended, ms(10 * i as u64));
            assert!(slot.send_at >= slot.intended);
        }
        // The stall ends at 300 ms. Request 11 was due at 110 ms and goes out at once; the backlog
        // then drains every 5 ms (twice the rate), each one still charged from its intended start.
        assert_eq!(slots[11].send_at, ms(300));
        assert_eq!(slots[12].send_at, ms(305));
        assert_eq!(slots[13].send_at, ms(310));
        // Caught up where 300 + 5·(n-11) meets 10·n: n = 49 is the first one sent when due again.
        let first_on_time = slots[11..]
            .iter()
            .find(|slot| slot.send_at == slot.intended)
            .unwrap();
        assert_eq!(first_on_time.n, 49);
        assert!(slots[50..].iter().all(|slot| slot.send_at == slot.intended));
        assert_eq!(conn.unsent(), 0);
    }

    #[test]
    fn requests_still_owed_at_the_end_are_counted_as_unsent() {
        // Request 95 (due at 950 ms) stalls until 1.45 s: past the 1 s end.
        let s = Schedule::open(100.0, nz(1), Duration::from_secs(1));
        let (slots, conn) = simulate(s.connection(0), |n| if n == 95 { ms(500) } else { ms(1) });
        assert_eq!(slots.len(), 96);
        assert_eq!(conn.sent(), 96);
        assert_eq!(conn.unsent(), 4);
    }

    #[test]
    fn rate_split_over_threads_and_connections_adds_up_to_one_even_stream() {
        // 1000/s over 7 connections and 3 threads: the threads own 3, 2 and 2 connections and get
        // 3/7, 2/7 and 2/7 of the rate; all intended starts together are exactly 1 ms apart.
        let s = Schedule::open(1000.0, nz(7), Duration::from_secs(1));
        let owned: Vec<Vec<u32>> = (0..3)
            .map(|t| s.thread_connections(t, 3).collect())
            .collect();
        assert_eq!(owned, vec![vec![0, 3, 6], vec![1, 4], vec![2, 5]]);
        let rates: Vec<f64> = (0..3).map(|t| s.thread_rate(t, 3).unwrap()).collect();
        assert!((rates.iter().sum::<f64>() - 1000.0).abs() < 1e-9);
        assert!((rates[0] - 3000.0 / 7.0).abs() < 1e-9);

        let mut all: Vec<Duration> = owned
            .iter()
            .flatten()
            .flat_map(|&c| simulate(s.connection(c), |_| Duration::ZERO).0)
            .map(|slot| slot.intended)
            .collect();
        all.sort();
        assert_eq!(all.len(), 1000);
        for (k, at) in all.iter().enumerate() {
            let expected = Duration::from_secs_f64(k as f64 / 1000.0);
            assert!(
                at.abs_diff(expected) < Duration::from_nanos(2),
                "{k}: {at:?}"
            );
        }
    }

    #[test]
    fn fractional_rates_and_more_connections_than_requests_work() {
        let s = Schedule::open(0.5, nz(3), Duration::from_secs(10));
        let counts: Vec<usize> = (0..3)
            .map(|c| simulate(s.connection(c), |_| ms(1)).0.len())
            .collect();
        // Due at 0, 2, 4, 6, 8 s over connections 0, 1, 2, 0, 1.
        assert_eq!(counts, vec![2, 2, 1]);
    }

    #[test]
    fn closed_loop_sends_whenever_free_until_the_end() {
        let s = Schedule::closed(nz(2), ms(100));
        let (slots, conn) = simulate(s.connection(1), |_| ms(10));
        assert_eq!(slots.len(), 10);
        assert!(slots.iter().all(|slot| slot.intended == slot.send_at));
        assert_eq!(slots[3].intended, ms(30));
        assert_eq!(conn.unsent(), 0);
        assert_eq!(s.interval(), None);
        assert_eq!(s.thread_rate(0, 1), None);
    }
}
