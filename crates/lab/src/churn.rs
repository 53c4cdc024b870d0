//! The seeds' churn script as data: `while true; scale 5; sleep 12; scale 7; sleep 10; done`.
//!
//! Pure: the orchestrator only sleeps until each event's offset and applies it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Replicas in the seeds' deployment between scale-ups.
pub const LOW_REPLICAS: usize = 5;
/// Replicas after a scale-up.
pub const HIGH_REPLICAS: usize = 7;

/// The timing of the churn loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Churn {
    /// How long the deployment stays at [`LOW_REPLICAS`] (the seeds: 12 s).
    pub low_for: Duration,
    /// How long it stays at [`HIGH_REPLICAS`] (the seeds: 10 s).
    pub high_for: Duration,
}

impl Default for Churn {
    fn default() -> Self {
        Churn {
            low_for: Duration::from_secs(12),
            high_for: Duration::from_secs(10),
        }
    }
}

/// One scale command, at an offset from the start of the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleStep {
    pub at: Duration,
    pub replicas: usize,
}

impl Churn {
    /// The scale commands strictly inside `(0, duration)`; the deployment starts at
    /// [`LOW_REPLICAS`], so the loop's first "scale to 5" is a no-op and left out.
    pub fn schedule(&self, duration: Duration) -> Vec<ScaleStep> {
        let mut steps = Vec::new();
        if self.low_for.is_zero() || self.high_for.is_zero() {
            return steps;
        }
        let mut at = self.low_for;
        let mut up = true;
        while at < duration {
            let replicas = if up { HIGH_REPLICAS } else { LOW_REPLICAS };
            steps.push(ScaleStep { at, replicas });
            at += if up { self.high_for } else { self.low_for };
            up = !up;
        }
        steps
    }
}
