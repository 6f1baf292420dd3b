//! What a bakery-mode process remembers between calls: its won tickets (a claim is made of
//! one) and the first timestamps of enqueues still being sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::lock::ticket::Ticket;
use tokio::time::Instant;
use tracing::info;

/// This process's won tickets, by claim id, and whether each number was recorded as its
/// item's high-water mark (only then is it a claim).
#[derive(Default)]
pub(super) struct HeldTickets(Mutex<HashMap<String, (Arc<Ticket>, bool)>>);

impl HeldTickets {
    /// A recorded ticket of this process.
    pub(super) fn recorded_ticket(&self, claim_id: &str) -> Option<Arc<Ticket>> {
        let held = self.0.lock().ok()?;
        held.get(claim_id)
            .filter(|(_, recorded)| *recorded)
            .map(|(t, _)| Arc::clone(t))
    }

    /// Any won ticket of this process, recorded or not.
    pub(super) fn any(&self, claim_id: &str) -> Option<(Arc<Ticket>, bool)> {
        self.0.lock().ok()?.get(claim_id).cloned()
    }

    /// Tracks a won ticket, not yet recorded. Entries go once their cells may be gone (past
    /// their validity by `standing`): until then an undone claim may still give its attempt
    /// back, even one whose validity ran out (a parked job lost at its deadline).
    pub(super) fn won(&self, claim_id: &str, ticket: &Arc<Ticket>, standing: Duration) {
        if let Ok(mut held) = self.0.lock() {
            let now = Instant::now();
            held.retain(|_, (t, _)| t.valid_until().is_some_and(|u| now < u + standing));
            held.insert(claim_id.to_owned(), (Arc::clone(ticket), false));
        }
    }

    /// Ticket `claim_id`'s number `number` is recorded as its item's mark (confirmed by its
    /// write, or read back after a claim cut while the write was outstanding): it is a
    /// claim, and the job it is delivered as may renew and finish it.
    pub(super) fn recorded(&self, claim_id: &str, number: i64) {
        if let Ok(mut held) = self.0.lock()
            && let Some(entry) = held.get_mut(claim_id)
            && entry.0.number() == number
            && !entry.1
        {
            info!(claim = claim_id, number, "claim recorded");
            entry.1 = true;
        }
    }

    pub(super) fn forget(&self, claim_id: &str) {
        if let Ok(mut held) = self.0.lock() {
            held.remove(claim_id);
        }
    }
}

/// Client timestamps of enqueues not yet confirmed, by origin, with when each was first
/// sent: a resent enqueue carries its first send's timestamp, so it can never win over a
/// later finish.
#[derive(Default)]
pub(super) struct PendingEnqueues(Mutex<HashMap<String, (i64, Instant)>>);

impl PendingEnqueues {
    /// The timestamp for an enqueue of `origin`: its first send's, or a fresh one. Entries
    /// older than `kept` are of given-up enqueues, and go.
    pub(super) fn timestamp(&self, origin: &str, kept: Duration) -> i64 {
        match self.0.lock() {
            Ok(mut pending) => {
                let now = Instant::now();
                pending.retain(|_, (_, first)| now.duration_since(*first) < kept);
                pending
                    .entry(origin.to_owned())
                    .or_insert_with(|| (crate::clock::next_micros(), now))
                    .0
            }
            Err(_) => crate::clock::next_micros(),
        }
    }

    /// The enqueue of `origin` is confirmed.
    pub(super) fn confirmed(&self, origin: &str) {
        if let Ok(mut pending) = self.0.lock() {
            pending.remove(origin);
        }
    }
}
