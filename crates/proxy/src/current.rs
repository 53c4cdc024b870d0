//! The configuration as one worker holds it, and where a replaced configuration is freed.
//!
//! ```text
//!  publish ─swap─▶ the old Arc<Compiled> ──▶ Reclaimer::retire ─┐ (last holder: sent,
//!  worker: its Current dropped (next request on a new config) ───┤  else only a decrement)
//!                                                                ▼
//!                                     the `sluice-reclaim` thread frees it
//! ```
//! Freeing a configuration is as large as building it (10,000 Ingresses or 3,000 HTTPRoutes:
//! milliseconds of `free`), and without this the last holder pays: usually a worker, in the
//! middle of the first request it serves after a change, or the control plane before its next
//! compile. Handing the last reference to a thread of its own keeps both off that path.

use std::ops::Deref;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use model::Compiled;

/// The current configuration as one worker holds it: cloning the `Rc` is a plain increment,
/// where cloning the `Arc` would bump a counter every worker shares.
pub(crate) type Current = Rc<Held>;

/// A worker's reference to a configuration; the last one, when dropped, goes to the
/// reclaimer instead of freeing the configuration on the worker.
pub(crate) struct Held {
    config: Option<Arc<Compiled>>,
    reclaimer: Reclaimer,
}

impl Held {
    pub(crate) fn new(config: Arc<Compiled>, reclaimer: Reclaimer) -> Held {
        Held {
            config: Some(config),
            reclaimer,
        }
    }

    pub(crate) fn arc(&self) -> &Arc<Compiled> {
        self.config.as_ref().expect("taken only in drop")
    }
}

impl Deref for Held {
    type Target = Compiled;

    fn deref(&self) -> &Compiled {
        self.arc()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(config) = self.config.take() {
            self.reclaimer.retire(config);
        }
    }
}

/// The sending side of the reclaim thread; cheap to clone.
#[derive(Clone)]
pub(crate) struct Reclaimer {
    to_thread: Sender<Arc<Compiled>>,
    freed: Arc<AtomicU64>,
}

impl Reclaimer {
    /// Starts the `sluice-reclaim` thread; it ends when every `Reclaimer` is gone.
    pub(crate) fn start() -> std::io::Result<Reclaimer> {
        let (to_thread, retired) = channel::<Arc<Compiled>>();
        let freed = Arc::new(AtomicU64::new(0));
        let counted = freed.clone();
        std::thread::Builder::new()
            .name("sluice-reclaim".into())
            .spawn(move || {
                for config in retired {
                    drop(config);
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            })?;
        Ok(Reclaimer { to_thread, freed })
    }

    /// Lets go of `config`: sent to the thread when this is its last reference, else just
    /// dropped (a decrement). Two holders letting go at the same instant may both see another
    /// reference and one of them frees inline, as before: rare, and never wrong.
    pub(crate) fn retire(&self, config: Arc<Compiled>) {
        if Arc::strong_count(&config) == 1 {
            // Err only when the thread is gone (the process is ending): drop here.
            let _ = self.to_thread.send(config);
        }
    }

    /// Configurations the thread has freed.
    pub(crate) fn freed(&self) -> u64 {
        self.freed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wait_for_freed(reclaimer: &Reclaimer, count: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while reclaimer.freed() < count {
            assert!(Instant::now() < deadline, "freed {}", reclaimer.freed());
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_last_holder_hands_the_configuration_to_the_reclaim_thread() {
        let reclaimer = Reclaimer::start().unwrap();
        let config = Arc::new(Compiled::default());
        let weak = Arc::downgrade(&config);
        let first = Rc::new(Held::new(config.clone(), reclaimer.clone()));
        let second = Rc::new(Held::new(config, reclaimer.clone()));
        drop(first);
        // Another holder is left: nothing goes to the thread.
        assert_eq!(reclaimer.freed(), 0);
        assert!(weak.upgrade().is_some());
        drop(second);
        wait_for_freed(&reclaimer, 1);
        assert!(weak.upgrade().is_none(), "freed by the thread");
    }

    #[test]
    fn a_configuration_still_held_elsewhere_is_only_released() {
        let reclaimer = Reclaimer::start().unwrap();
        let config = Arc::new(Compiled::default());
        reclaimer.retire(config.clone());
        assert_eq!(Arc::strong_count(&config), 1);
        reclaimer.retire(config);
        wait_for_freed(&reclaimer, 1);
    }
}
