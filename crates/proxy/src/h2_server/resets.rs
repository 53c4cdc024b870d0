//! What a connection remembers of reset streams: the budget of resets the client caused, and
//! the streams the server reset lately (whose frames still in flight are ignored).
//!
//! ```text
//!  client RST_STREAM before the answer ─┐
//!  stream error the server raises ──────┴─▶ Budget: +1 reset each, an answer forgives 1/8;
//!  (WINDOW_UPDATE 0, DATA after              over 200, or over 1,024 server-raised ones
//!   END_STREAM, content-length, trailers     ─▶ GOAWAY ENHANCE_YOUR_CALM
//!   over the limit, malformed heads, …)
//!  any RST_STREAM the server writes ──────▶ Recent: the last 32 ids; frames on them are
//!                                           dropped (header blocks still decoded for HPACK)
//! ```

use std::collections::VecDeque;

/// Resets net of forgiveness that end the connection (CVE-2023-44487: each reset stream cost
/// the server a request's work; CVE-2025-8671, MadeYouReset: so does each stream the client
/// makes the server reset).
pub(super) const RESET_BUDGET: u32 = 200;
/// Answers completed that forgive one reset: a client must do real, answered work for each
/// reset it is let off, so alternating a reset with a cheap request does not evade the budget.
pub(super) const ANSWERS_PER_FORGIVEN_RESET: u32 = 8;
/// Stream errors the server raises that end the connection, however many answers came between
/// (h2's `max_local_error_reset_streams` default): a correct client causes none.
pub(super) const SERVER_RESET_LIMIT: u32 = 1_024;
/// Stream ids the server reset that are remembered (RFC 9113 §5.1: frames the client sent
/// before it saw the reset are ignored; past this many, an older id's frames are a stream
/// error again).
pub(super) const RECENT_RESETS: usize = 32;

/// The resets a client caused on one connection.
#[derive(Debug, Default)]
pub(super) struct Budget {
    /// Resets counted, in eighths ([`ANSWERS_PER_FORGIVEN_RESET`]), less the answers
    /// completed since.
    debt: u32,
    /// Stream errors the server raised, never forgiven.
    server_raised: u32,
}

/// Stream ids the server has written RST_STREAM for, newest last.
#[derive(Debug, Default)]
pub(super) struct Recent {
    ids: VecDeque<u32>,
}

impl Budget {
    /// The client reset a stream before its answer. `true`: the budget is spent.
    pub(super) fn client_reset(&mut self) -> bool {
        self.add_reset()
    }

    /// The server reset an accepted stream for the client's error. `true`: the budget is
    /// spent.
    pub(super) fn server_reset(&mut self) -> bool {
        self.server_raised = self.server_raised.saturating_add(1);
        self.add_reset() | (self.server_raised > SERVER_RESET_LIMIT)
    }

    /// A response was sent whole.
    pub(super) fn answered(&mut self) {
        self.debt = self.debt.saturating_sub(1);
    }

    fn add_reset(&mut self) -> bool {
        self.debt = self.debt.saturating_add(ANSWERS_PER_FORGIVEN_RESET);
        self.debt > RESET_BUDGET * ANSWERS_PER_FORGIVEN_RESET
    }
}

impl Recent {
    pub(super) fn note(&mut self, id: u32) {
        if self.ids.contains(&id) {
            return;
        }
        if self.ids.len() == RECENT_RESETS {
            self.ids.pop_front();
        }
        self.ids.push_back(id);
    }

    pub(super) fn contains(&self, id: u32) -> bool {
        self.ids.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_net_of_an_eighth_per_answer_spend_the_budget() {
        let mut budget = Budget::default();
        for _ in 0..RESET_BUDGET {
            assert!(!budget.client_reset());
        }
        assert!(budget.client_reset());

        // One cheap answer per reset forgives an eighth of it: spent within 230 pairs.
        let mut budget = Budget::default();
        let pairs = (1..=1_000)
            .find(|_| {
                budget.answered();
                budget.client_reset()
            })
            .expect("spent");
        assert_eq!(pairs, 229);

        // Eight answers per reset are real work: the budget holds.
        let mut budget = Budget::default();
        for _ in 0..10 * RESET_BUDGET {
            for _ in 0..ANSWERS_PER_FORGIVEN_RESET {
                budget.answered();
            }
            assert!(!budget.client_reset());
        }
    }

    #[test]
    fn server_raised_resets_have_a_lifetime_cap() {
        let mut budget = Budget::default();
        let spent = (1..=2 * SERVER_RESET_LIMIT)
            .find(|_| {
                for _ in 0..ANSWERS_PER_FORGIVEN_RESET {
                    budget.answered();
                }
                budget.server_reset()
            })
            .expect("spent");
        assert_eq!(spent, SERVER_RESET_LIMIT + 1);
        let mut budget = Budget::default();
        for _ in 0..RESET_BUDGET {
            assert!(!budget.server_reset());
        }
        assert!(budget.server_reset());
    }

    #[test]
    fn the_last_resets_are_remembered_and_older_ones_forgotten() {
        let mut recent = Recent::default();
        for id in (1..).step_by(2).take(RECENT_RESETS + 1) {
            recent.note(id);
        }
        recent.note(3);
        assert!(!recent.contains(1));
        assert!(recent.contains(3));
        assert!(recent.contains(2 * RECENT_RESETS as u32 + 1));
        assert_eq!(recent.ids.len(), RECENT_RESETS);
    }
}
