//! Heavy steps taken in turns, one per round of a worker's scheduler: a TLS handshake's key
//! operations (an RSA-2048 signature is ~0.2 ms, the key exchange tens of µs) would otherwise
//! run back to back when a burst of connections arrives, and every request of the connections
//! already open would wait behind all of them (issue 29: 1,000 handshakes at once made the
//! first second's p99 12 ms where HAProxy, whose scheduler runs such "heavy" work a little
//! per loop, kept 3 ms).
//!
//! ```text
//!  a handshake with new input ─▶ Turn::poll
//!     no heavy step this round, nobody queued ─▶ go (the round is spent; the pump is woken)
//!     else ─▶ queued (first come, first served): Pending
//!  pump (one task per worker): a round was spent ─▶ yield (every task ready now runs first,
//!     and the runtime polls for I/O) ─▶ the round ends ─▶ the first queued gets the next turn
//! ```
//! A handshake waits at most for the ones before it; a request waits at most for one heavy
//! step. Throughput does not change: the worker does the same work in another order, plus one
//! poll of the pump per handshake. Without a pump (no worker started one on this thread) every
//! step goes at once.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// This thread's turns.
#[derive(Default)]
struct Turns {
    /// A pump runs on this thread.
    pumping: Cell<bool>,
    /// A heavy step ran (or was granted) in this round.
    spent: Cell<bool>,
    queue: RefCell<VecDeque<Rc<Ticket>>>,
    pump: RefCell<Option<Waker>>,
}

/// A queued step's ticket.
#[derive(Default)]
struct Ticket {
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

thread_local! {
    static TURNS: Turns = Turns::default();
}

impl Turns {
    fn wake_pump(&self) {
        if let Some(pump) = self.pump.borrow_mut().take() {
            pump.wake();
        }
    }
}

/// One connection's place in the queue, kept across its polls.
#[derive(Default)]
pub(crate) struct Turn(Option<Rc<Ticket>>);

impl Turn {
    /// Ready when the caller may run its heavy step now (do it before returning to the
    /// scheduler: the turn is this round's).
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        TURNS.with(|turns| {
            if !turns.pumping.get() {
                return Poll::Ready(());
            }
            if let Some(ticket) = &self.0 {
                if ticket.granted.get() {
                    self.0 = None;
                    return Poll::Ready(());
                }
                let mut waker = ticket.waker.borrow_mut();
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                return Poll::Pending;
            }
            if !turns.spent.get() && turns.queue.borrow().is_empty() {
                turns.spent.set(true);
                turns.wake_pump();
                return Poll::Ready(());
            }
            let ticket = Rc::new(Ticket {
                granted: Cell::new(false),
                waker: RefCell::new(Some(cx.waker().clone())),
            });
            turns.queue.borrow_mut().push_back(ticket.clone());
            self.0 = Some(ticket);
            turns.wake_pump();
            Poll::Pending
        })
    }
}

/// Ends each spent round once every task ready has run, and hands the next turn out. Runs for
/// the worker's life (spawned on its `LocalSet`); when it is dropped, the queue goes at once.
pub(crate) async fn pump() {
    struct Stopped;
    impl Drop for Stopped {
        fn drop(&mut self) {
            TURNS.with(|turns| {
                turns.pumping.set(false);
                for ticket in turns.queue.borrow_mut().drain(..) {
                    ticket.granted.set(true);
                    if let Some(waker) = ticket.waker.borrow_mut().take() {
                        waker.wake();
                    }
                }
            });
        }
    }
    TURNS.with(|turns| turns.pumping.set(true));
    let _stopped = Stopped;
    loop {
        poll_fn(|cx| {
            TURNS.with(|turns| {
                if turns.spent.get() {
                    return Poll::Ready(());
                }
                *turns.pump.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            })
        })
        .await;
        // The tasks woken meanwhile (requests of open connections) run before the next turn.
        tokio::task::yield_now().await;
        TURNS.with(|turns| {
            turns.spent.set(false);
            loop {
                let Some(ticket) = turns.queue.borrow_mut().pop_front() else {
                    break;
                };
                // Its connection is gone (nobody else holds the ticket): the next one.
                if Rc::strong_count(&ticket) == 1 {
                    continue;
                }
                ticket.granted.set(true);
                turns.spent.set(true);
                if let Some(waker) = ticket.waker.borrow_mut().take() {
                    waker.wake();
                }
                break;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ran, in order: `H` a heavy step, `l` a light task's poll.
    async fn scenario(with_pump: bool) -> String {
        let order = Rc::new(RefCell::new(String::new()));
        let pump = with_pump.then(|| tokio::task::spawn_local(pump()));
        tokio::task::yield_now().await;
        let mut tasks = Vec::new();
        // A request-like task: one step per round, for as long as the heavy ones take.
        let light = order.clone();
        tasks.push(tokio::task::spawn_local(async move {
            for _ in 0..12 {
                light.borrow_mut().push('l');
                tokio::task::yield_now().await;
            }
        }));
        // A burst of handshakes, each ready at once with one heavy step to do.
        for _ in 0..5 {
            let heavy = order.clone();
            tasks.push(tokio::task::spawn_local(async move {
                let mut turn = Turn::default();
                poll_fn(|cx| turn.poll(cx)).await;
                heavy.borrow_mut().push('H');
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        if let Some(pump) = pump {
            pump.abort();
            let _ = pump.await;
        }
        let order = order.borrow().clone();
        order
    }

    fn run(with_pump: bool) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, scenario(with_pump))
    }

    #[test]
    fn a_burst_of_heavy_steps_takes_turns_with_the_light_work() {
        let taking_turns = run(true);
        assert_eq!(taking_turns.matches('H').count(), 5, "{taking_turns}");
        assert!(
            !taking_turns.contains("HH"),
            "two heavy steps in one round: {taking_turns}"
        );
        // Without the pump the same burst runs back to back: what the turns are for.
        let at_once = run(false);
        assert!(at_once.contains("HHHHH"), "{at_once}");
        // Dropping the pump lets what was queued go.
        TURNS.with(|turns| assert!(!turns.pumping.get() && turns.queue.borrow().is_empty()));
    }
}
