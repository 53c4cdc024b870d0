//! `max-worker-connections` as numbers and signals: the cap, the connections told to close for
//! it, the accept loops' wait for room, and the one rate-limited WARN about limits. No
//! connection is in here: the worker, which keeps the registry, picks whom to evict
//! (`Worker::room_for_one`).
//!
//! ```text
//!  accept ─▶ counted(open) < max(settings)? ─ no ─▶ evict the longest-idle │ wait on `room`
//!  a connection ends or goes idle ─▶ room_changed ─▶ a waiting accept loop goes on
//!  idle closed │ accept paused │ EMFILE ─▶ note ─▶ at most one WARN per LIMIT_LOG_PERIOD
//! ```

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use model::Settings;
use tokio::sync::Notify;

/// At most one WARN about connection limits per this period per worker; it carries the
/// counts since the previous one.
const LIMIT_LOG_PERIOD: Duration = Duration::from_secs(10);

pub(crate) struct ConnCap {
    /// `max-worker-connections: 0` means this (derived from the open-files limit).
    derived_max: usize,
    /// Connections told to close for the cap and not yet gone.
    pub(crate) evicting: Cell<usize>,
    /// An accept loop waits for room under the cap: ending connections and requests wake it.
    pub(crate) accept_waiting: Cell<bool>,
    pub(crate) room: Notify,
    log: RefCell<LimitLog>,
}

/// Counts since the last limit WARN, and when it was written.
#[derive(Default)]
pub(crate) struct LimitLog {
    last: Option<Instant>,
    pub(crate) idle_closed: u64,
    pub(crate) paused: u64,
    pub(crate) exhausted: u64,
}

impl ConnCap {
    pub(crate) fn new(derived_max: usize) -> ConnCap {
        ConnCap {
            derived_max,
            evicting: Cell::new(0),
            accept_waiting: Cell::new(false),
            room: Notify::new(),
            log: RefCell::default(),
        }
    }

    /// `max-worker-connections`, or the derived value for 0.
    pub(crate) fn max(&self, settings: &Settings) -> usize {
        match settings.max_worker_connections {
            0 => self.derived_max,
            n => n as usize,
        }
    }

    /// Of `open` client connections, those not already told to close.
    pub(crate) fn counted(&self, open: u64) -> usize {
        let open = usize::try_from(open).unwrap_or(usize::MAX);
        open.saturating_sub(self.evicting.get())
    }

    /// A connection ended or went idle: a paused accept loop may go on.
    pub(crate) fn room_changed(&self) {
        if self.accept_waiting.get() {
            self.room.notify_waiters();
        }
    }

    /// Counts a limit event and writes the WARN if the last one is old enough; `now_at` gives
    /// the cap and the open connections for the line (asked only when it is written).
    pub(crate) fn note(
        &self,
        count: impl FnOnce(&mut LimitLog),
        now_at: impl FnOnce() -> (usize, u64),
    ) {
        let mut log = self.log.borrow_mut();
        count(&mut log);
        let now = Instant::now();
        if log
            .last
            .is_some_and(|last| now.saturating_duration_since(last) < LIMIT_LOG_PERIOD)
        {
            return;
        }
        let (max, open) = now_at();
        tracing::warn!(
            max_worker_connections = max,
            open,
            idle_closed = log.idle_closed,
            accept_paused = log.paused,
            out_of_file_descriptors = log.exhausted,
            "connection limit reached (max-worker-connections or the open-files limit); \
             counts since the last such line"
        );
        *log = LimitLog {
            last: Some(now),
            ..LimitLog::default()
        };
    }
}
