//! What a bakery-mode process remembers between calls: its won tickets (a claim is made of
//! one) and the first timestamps of enqueues still being sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::lock::ticket::Ticket;
use tokio::time::Instant;
use tracing::info;

/// This process's won tickets, by claim id, and how far each got: only a number recorded
/// as its item's high-water mark is a claim, and only until this process gives it up.
#[derive(Default)]
pub(super) struct HeldTickets(Mutex<HashMap<String, (Arc<Ticket>, Stage)>>);

/// How far a won ticket got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Drawn and won; its high-water mark not (yet) known to be recorded.
    Won,
    /// Its number is recorded as the item's mark: a claim.
    Recorded,
    /// Given up by this process (being given back or withdrawn): never a claim again, even
    /// where the store still shows its number recorded and live.
    GivenUp,
}

impl HeldTickets {
    /// A recorded ticket of this process.
    pub(super) fn recorded_ticket(&self, claim_id: &str) -> Option<Arc<Ticket>> {
        let held = self.0.lock().ok()?;
        held.get(claim_id)
            .filter(|(_, stage)| *stage == Stage::Recorded)
            .map(|(t, _)| Arc::clone(t))
    }

    /// Any won ticket of this process, recorded, given up or neither.
    pub(super) fn any(&self, claim_id: &str) -> Option<Arc<Ticket>> {
        let held = self.0.lock().ok()?;
        held.get(claim_id).map(|(t, _)| Arc::clone(t))
    }

    /// Tracks a won ticket, not yet recorded. Entries go once their cells may be gone (past
    /// their validity by `standing`): until then an undone claim may still give its attempt
    /// back, even one whose validity ran out (a parked job lost at its deadline), and a
    /// given-up one is still known as such.
    pub(super) fn won(&self, claim_id: &str, ticket: &Arc<Ticket>, standing: Duration) {
        if let Ok(mut held) = self.0.lock() {
            let now = Instant::now();
            held.retain(|_, (t, _)| t.valid_until().is_some_and(|u| now < u + standing));
            held.insert(claim_id.to_owned(), (Arc::clone(ticket), Stage::Won));
        }
    }

    /// Ticket `claim_id`'s number `number` is recorded as its item's mark (confirmed by its
    /// write, or read back after a claim cut while the write was outstanding): it is a
    /// claim, and the job it is delivered as may renew and finish it. Not for a ticket
    /// given up.
    pub(super) fn recorded(&self, claim_id: &str, number: i64) {
        if let Ok(mut held) = self.0.lock()
            && let Some(entry) = held.get_mut(claim_id)
            && entry.0.number() == number
            && entry.1 == Stage::Won
        {
            info!(claim = claim_id, number, "claim recorded");
            entry.1 = Stage::Recorded;
        }
    }

    /// This process gives ticket `claim_id` up (it gives its attempt back, or withdraws it
    /// without one): from now on its reads never count it as a claim, so a claim cut while
    /// its give-back is on the wire is not read back as won and delivered under it.
    pub(super) fn given_up(&self, claim_id: &str) {
        if let Ok(mut held) = self.0.lock()
            && let Some(entry) = held.get_mut(claim_id)
        {
            entry.1 = Stage::GivenUp;
        }
    }

    /// Whether ticket `claim_id` with `number` is one this process gave up.
    pub(super) fn is_given_up(&self, claim_id: &str, number: i64) -> bool {
        self.0.lock().is_ok_and(|held| {
            held.get(claim_id)
                .is_some_and(|(t, stage)| t.number() == number && *stage == Stage::GivenUp)
        })
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
