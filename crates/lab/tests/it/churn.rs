//! The churn schedule: the seeds' `scale 5; sleep 12; scale 7; sleep 10` loop as data.

use std::time::Duration;

use lab::churn::{Churn, ScaleStep, HIGH_REPLICAS, LOW_REPLICAS};

fn step(secs: u64, replicas: usize) -> ScaleStep {
    ScaleStep {
        at: Duration::from_secs(secs),
        replicas,
    }
}

#[test]
fn default_schedule_follows_the_seeds_loop() {
    let steps = Churn::default().schedule(Duration::from_secs(60));
    assert_eq!(
        steps,
        vec![
            step(12, 7),
            step(22, 5),
            step(34, 7),
            step(44, 5),
            step(56, 7)
        ]
    );
}

#[test]
fn a_full_run_alternates_and_stays_inside_the_run() {
    let duration = Duration::from_secs(180);
    let steps = Churn::default().schedule(duration);
    // 180 s of a 22 s cycle: 8 full cycles (16 events) plus the scale-up at 188 s left out.
    assert_eq!(steps.len(), 16);
    for (i, s) in steps.iter().enumerate() {
        assert!(s.at < duration);
        let want = if i % 2 == 0 {
            HIGH_REPLICAS
        } else {
            LOW_REPLICAS
        };
        assert_eq!(s.replicas, want, "step {i}");
    }
    assert!(steps.windows(2).all(|w| w[0].at < w[1].at));
}

#[test]
fn events_at_or_after_the_end_are_left_out() {
    let churn = Churn::default();
    assert!(churn.schedule(Duration::from_secs(12)).is_empty());
    assert_eq!(churn.schedule(Duration::from_secs(13)), vec![step(12, 7)]);
    assert!(churn.schedule(Duration::ZERO).is_empty());
}

#[test]
fn custom_and_degenerate_timings() {
    let fast = Churn {
        low_for: Duration::from_secs(2),
        high_for: Duration::from_secs(1),
    };
    assert_eq!(
        fast.schedule(Duration::from_secs(6)),
        vec![step(2, 7), step(3, 5), step(5, 7)]
    );
    let never = Churn {
        low_for: Duration::ZERO,
        high_for: Duration::from_secs(1),
    };
    assert!(never.schedule(Duration::from_secs(60)).is_empty());
}
