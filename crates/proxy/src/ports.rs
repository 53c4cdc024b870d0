//! The ports a published configuration opens beyond Sluice's own listeners: TCP and UDP service
//! ports (`stream`) and the ports Gateway listeners declare (`declared_ports`), under one lock,
//! and a thread that binds again the ones that failed.
//!
//! ```text
//!  Proxy::publish(config) ─lock─▶ Ports::apply(config) ─▶ bound, closed, or failed (why)
//!                                  └─▶ Shared::stream_errors (/config), under the same lock
//!  port-retry thread, every `port_retry_interval` while a bind failed (not for a conflict
//!  with Sluice's own ports, which waits for a configuration change):
//!                         ─lock─▶ Ports::apply(the current config)   (same path, same lock)
//! ```
//!
//! Why a retry: a port another program holds (or that the previous Sluice still held during a
//! rolling update) used to stay closed until the next configuration change, which may never come:
//! freeing the port at 3 a.m. fixed nothing. One lock over the apply and the current
//! configuration's load means a retry can never re-open a port a newer publish closed: whichever
//! runs second applies the newest configuration.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use model::Compiled;

use crate::listen::NotOpen;
use crate::shared::{lock, Shared};
use crate::{declared_ports, stream};

/// How often a port that could not be bound is tried again, by default.
pub const DEFAULT_PORT_RETRY_INTERVAL: Duration = Duration::from_secs(5);

pub(crate) struct Ports {
    pub(crate) streams: stream::Listeners,
    pub(crate) declared: declared_ports::DeclaredListeners,
    /// How often the retry thread binds again (said on /config next to what it retries).
    pub(crate) retry_interval: Duration,
    /// Whether the last apply left a port a retry could open (a failed bind, not a conflict).
    pub(crate) retry_wanted: bool,
}

impl Ports {
    /// Opens and closes ports as `config` asks and records what could not be bound where
    /// /config shows it. The caller holds the lock for both, so errors match the last apply.
    pub(crate) fn apply(&mut self, config: &Compiled, shared: &Shared) {
        // TCP services first: a port one of them leaves is closed before a Gateway listener
        // binds it again.
        let mut not_open = self.streams.apply(config);
        not_open.extend(self.declared.apply(config));
        self.retry_wanted = not_open.iter().any(|n| n.why.retried);
        *lock(&shared.stream_errors) = not_open
            .iter()
            .map(|NotOpen { port, why }| {
                if why.retried {
                    format!(
                        "{port}: {} (tried again every {:?})",
                        why.text, self.retry_interval
                    )
                } else {
                    format!("{port}: {} (change the configuration)", why.text)
                }
            })
            .collect();
    }
}

/// The retry thread; dropping the handle's sender stops it at once.
pub(crate) struct PortRetry {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl PortRetry {
    pub(crate) fn spawn(
        ports: Arc<Mutex<Ports>>,
        shared: Arc<Shared>,
    ) -> std::io::Result<PortRetry> {
        let every = lock(&ports).retry_interval;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sluice-port-retry".to_owned())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    let mut ports = lock(&ports);
                    // No bind failed: nothing a retry could open (a bound port is never bound
                    // twice, and a conflict waits for a configuration change).
                    if !ports.retry_wanted {
                        continue;
                    }
                    // Loaded under the lock: a publish that swapped a newer configuration in
                    // either applied it already or waits for this apply and then applies it.
                    if let Some(config) = shared.config.load_full() {
                        ports.apply(&config, &shared);
                    }
                }
            })?;
        Ok(PortRetry {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it (at most one apply in progress).
    pub(crate) fn stop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the port retry thread panicked");
            }
        }
    }
}

impl Drop for PortRetry {
    fn drop(&mut self) {
        // Without waiting: the thread sees the sender gone at its next wake.
        self.stop.take();
    }
}
