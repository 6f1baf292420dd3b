//! Handing a lease to the next waiter of this process in the release's own LWT.
//!
//! A release followed by the next waiter's claim costs two Paxos rounds per hand-over, one
//! after the other. When the first in line waits in the same process as the holder, it
//! posts an offer here (a claim of its own, with a fresh holder id) and the holder's
//! release writes that claim in place of its own, conditionally on still holding the lease
//! with its token ([`LeaseStore::hand_over`](crate::LeaseStore::hand_over)): one round per
//! hand-over, and a token above the last.
//!
//! Safety does not rest on this module: the LWT's condition decides. The holder has
//! stopped acting before it sends the release (the hold machine tells it first); the
//! waiter's deadline counts from when the hand-over was sent, which precedes the write
//! its TTL counts from, as an acquisition's does. The offered claim stays under an armed
//! [`AttemptGuard`] from before the LWT is sent until the waiter has it: a waiter gone by
//! then (timed out, dropped), a lost answer, or a releaser dropped mid-flight gives the
//! claim back in the background (conditionally on its holder id, and remembered for
//! release on sight), as an abandoned acquisition is.
//!
//! Every waiter of the process posts an offer once it stands in line, keyed by its ticket;
//! a release takes the offer of the earliest ticket, and only when no waiter of this
//! process ahead of it is without an offer (one proposing, say) and the latest look at the
//! line (shared by the process's waiters) shows it with no ticket of another process ahead.
//! Otherwise it releases the plain way, which wakes the line. So the line's order is kept
//! as far as that look is current: like the line itself, a stale look costs fairness,
//! never safety.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::fencing::FencingToken;
use crate::hold::{AttemptGuard, HoldTiming};
use crate::shared_looks::StoreId;
use crate::target::LeaseTarget;

/// Leases with offers remembered before those without a standing offer are forgotten.
const SWEEP_AT: usize = 1024;

type Slot = (StoreId, String);

/// The offers of this process's waiters, by store and stored row.
static OFFERS: LazyLock<Mutex<HashMap<Slot, Offers>>> = LazyLock::new(Mutex::default);

/// Offers posted so far: tells a waiter's own offer from a later one under its ticket.
static POSTED: AtomicU64 = AtomicU64::new(0);

/// The offers at one lease.
#[derive(Default)]
struct Offers {
    /// The standing offers, by ticket (the line's order).
    by_ticket: BTreeMap<String, Offer>,
    /// The tickets of this process's waiters still in line, offering or not.
    waiting: BTreeSet<String>,
    /// The tickets of this process's waiters that left the line, until the line's head
    /// has moved past them (or many more left): a look may still show them, and they do
    /// not keep an offer behind them from being taken.
    left: BTreeSet<String>,
}

/// A waiter's standing offer to take the lease over.
pub(crate) struct Offer {
    id: u64,
    /// Which lease, and the waiter's ticket.
    slot: Slot,
    ticket: String,
    /// Set when a release takes it.
    taken: Arc<AtomicBool>,
    /// The claim the waiter would hold: its own client's store, name, owner, value, TTL.
    pub target: Arc<LeaseTarget>,
    /// The waiter's timing, for the guard that gives the claim back.
    pub timing: HoldTiming,
    reply: oneshot::Sender<Granted>,
}

/// What a waiter receives when the lease was handed to its claim.
pub(crate) struct Granted {
    /// The claim's new token.
    pub token: FencingToken,
    /// When the hand-over was sent: the claim's deadline counts from here.
    pub sent_at: Instant,
    /// The claim's armed guard, until the waiter takes it or, should the waiter not be
    /// polled within `retry_interval` (its future kept but not awaited), a watchdog drops
    /// it, which gives the claim back.
    guard: Arc<Mutex<Option<AttemptGuard>>>,
}

impl Drop for Granted {
    /// A grant dropped untaken (its offer gone, its waiter too late) gives the claim back.
    fn drop(&mut self) {
        drop(self.take_guard());
    }
}

impl Granted {
    /// The armed guard of the claim handed over, unless the watchdog gave it back already.
    pub(crate) fn take_guard(&self) -> Option<AttemptGuard> {
        self.guard.lock().ok()?.take()
    }
}

/// Where a waiter's offer stands.
pub(crate) enum Answer {
    /// The lease was handed to it.
    Granted(Granted),
    /// Taken and not granted (the holder no longer held it, or released the plain way):
    /// post again to stand again.
    Declined,
    /// Standing.
    Waiting,
}

/// A waiter's side of its offer. Dropping it withdraws the offer (a hand-over already under
/// way then gives the claim back, through its guard).
pub(crate) struct Posted {
    slot: Slot,
    ticket: String,
    id: u64,
    taken: Arc<AtomicBool>,
    /// The claim offered.
    target: Arc<LeaseTarget>,
    answer: oneshot::Receiver<Granted>,
}

impl Posted {
    /// Waits for the holder's answer: [`Answer::Granted`] or [`Answer::Declined`]. Call it
    /// no more once it has answered.
    ///
    /// # Cancel safety
    /// Cancel-safe: an answer stays in the channel until taken or the offer is dropped.
    pub(crate) async fn answer(&mut self) -> Answer {
        match (&mut self.answer).await {
            Ok(granted) => Answer::Granted(granted),
            Err(_) => Answer::Declined,
        }
    }

    /// Withdraws the offer: `true` when it was still standing, `false` when a release took
    /// it already (its answer then comes within one request).
    pub(crate) fn withdraw(&mut self) -> bool {
        let Ok(mut offers) = OFFERS.lock() else {
            return !self.taken();
        };
        let standing = offers.get_mut(&self.slot).and_then(|at| {
            let ours = at.by_ticket.get(&self.ticket)?.id == self.id;
            ours.then(|| at.by_ticket.remove(&self.ticket))
        });
        standing.is_some() || !self.taken()
    }

    /// Whether a release took the offer: its answer comes within one request.
    pub(crate) fn taken(&self) -> bool {
        self.taken.load(Ordering::Acquire)
    }

    /// The answer, if there is one, without waiting.
    pub(crate) fn poll(&mut self) -> Answer {
        match self.answer.try_recv() {
            Ok(granted) => Answer::Granted(granted),
            Err(TryRecvError::Closed) => Answer::Declined,
            Err(TryRecvError::Empty) => Answer::Waiting,
        }
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        // No grant can land from here on; one that did is dropped with the channel, which
        // gives its claim back (`Granted`'s drop).
        self.answer.close();
        if let Ok(mut offers) = OFFERS.lock()
            && let Some(at) = offers.get_mut(&self.slot)
            && at
                .by_ticket
                .get(&self.ticket)
                .is_some_and(|offer| offer.id == self.id)
        {
            at.by_ticket.remove(&self.ticket);
        }
    }
}

/// Tickets that left remembered per lease at most: beyond, the oldest are forgotten (which
/// only makes a hand-over behind them fall back to a plain release).
const MAX_LEFT: usize = 512;

/// A waiter of this process standing in a lease's line, from its joining to its leaving
/// (however it ends: dropped with the waiter).
pub(crate) struct InLine {
    slot: Slot,
    ticket: String,
}

impl InLine {
    /// The waiter with `ticket` stands in the line of `row` on `store`.
    pub(crate) fn new(store: StoreId, row: &str, ticket: &str) -> InLine {
        let slot = (store, row.to_owned());
        if let Ok(mut offers) = OFFERS.lock() {
            if offers.len() >= SWEEP_AT {
                offers.retain(|_, at| !(at.by_ticket.is_empty() && at.waiting.is_empty()));
            }
            offers
                .entry(slot.clone())
                .or_default()
                .waiting
                .insert(ticket.to_owned());
        }
        InLine {
            slot,
            ticket: ticket.to_owned(),
        }
    }
}

impl Drop for InLine {
    fn drop(&mut self) {
        if let Ok(mut offers) = OFFERS.lock()
            && let Some(at) = offers.get_mut(&self.slot)
        {
            at.waiting.remove(&self.ticket);
            if at.waiting.is_empty() && at.by_ticket.is_empty() {
                // Nobody of this process waits: nothing to hand over to, nothing to keep.
                offers.remove(&self.slot);
                return;
            }
            at.left.insert(self.ticket.clone());
            while at.left.len() > MAX_LEFT {
                at.left.pop_first();
            }
        }
    }
}

/// Posts `target` (a fresh claim of the waiter standing `in_line`) as its offer.
fn post(in_line: &InLine, target: Arc<LeaseTarget>, timing: HoldTiming) -> Option<Posted> {
    let mut offers = OFFERS.lock().ok()?;
    let (slot, ticket) = (in_line.slot.clone(), in_line.ticket.as_str());
    let id = POSTED.fetch_add(1, Ordering::Relaxed);
    let (reply, answer) = oneshot::channel();
    let at = offers.entry(slot.clone()).or_default();
    let taken = Arc::new(AtomicBool::new(false));
    let offer = Offer {
        id,
        slot: slot.clone(),
        ticket: ticket.to_owned(),
        taken: Arc::clone(&taken),
        target: Arc::clone(&target),
        timing,
        reply,
    };
    at.by_ticket.insert(ticket.to_owned(), offer);
    Some(Posted {
        slot,
        ticket: ticket.to_owned(),
        id,
        taken,
        target,
        answer,
    })
}

/// Takes the offer of the earliest ticket posted for `row` on `store`, if no waiter of this
/// process stands ahead of it without an offer, and `line` (the first tickets of the line,
/// in order, as last read) shows it with no ticket ahead but those of waiters here that
/// left.
pub(crate) fn take(store: StoreId, row: &str, line: &[String]) -> Option<Offer> {
    let mut offers = OFFERS.lock().ok()?;
    let at = offers.get_mut(&(store, row.to_owned()))?;
    let head = line.first()?;
    // Tickets before the head have left the line.
    at.left = at.left.split_off(head);
    at.by_ticket.retain(|_, offer| !offer.reply.is_closed());
    let (ticket, _) = at.by_ticket.first_key_value()?;
    let seen = line.binary_search(ticket).is_ok() || ticket < head;
    let none_here_ahead = at.waiting.range::<String, _>(..ticket).next().is_none();
    let only_left_ahead = line
        .iter()
        .take_while(|cell| *cell < ticket)
        .all(|cell| at.left.contains(cell));
    if !(seen && none_here_ahead && only_left_ahead) {
        debug!(
            lease = row,
            "the first offer here is not first in line; no hand-over"
        );
        return None;
    }
    let ticket = ticket.clone();
    let offer = at.by_ticket.remove(&ticket)?;
    offer.taken.store(true, Ordering::Release);
    Some(offer)
}

/// Counts the waiter with `ticket` as gone from the line of `slot` (it stays so: a waiter
/// that comes back may be served after those behind it).
fn step_aside(slot: &Slot, ticket: &str) {
    if let Ok(mut offers) = OFFERS.lock()
        && let Some(at) = offers.get_mut(slot)
        && at.waiting.remove(ticket)
    {
        at.left.insert(ticket.to_owned());
    }
}

impl Offer {
    /// Hands the claim, written with `token` by a hand-over sent at `sent_at`, to the
    /// waiter. `guard` (armed) gives it back if the waiter is gone by now, or does not take
    /// it within `retry_interval`.
    pub(crate) fn grant(self, token: FencingToken, sent_at: Instant, guard: AttemptGuard) {
        let guard = Arc::new(Mutex::new(Some(guard)));
        let granted = Granted {
            token,
            sent_at,
            guard: Arc::clone(&guard),
        };
        if self.reply.send(granted).is_err() {
            // The returned grant was dropped: its guard gives the claim back.
            debug!(claim = %self.target.name, "the waiter left before the hand-over; giving the claim back");
            return;
        }
        let (name, patience) = (self.target.name.clone(), self.timing.retry_interval);
        let (slot, ticket) = (self.slot, self.ticket);
        tokio::spawn(async move {
            tokio::time::sleep(patience).await;
            let unclaimed = guard.lock().ok().and_then(|mut guard| guard.take());
            if let Some(unclaimed) = unclaimed {
                warn!(lease = %name, "the waiter did not take the lease handed to it; giving it back");
                // A waiter not polled for this long steps aside: the give-back may hand the
                // lease to the next offer rather than leave the line to wait on it.
                step_aside(&slot, &ticket);
                drop(unclaimed);
            }
        });
    }
}

#[path = "hand_over_waiter.rs"]
mod waiter;

#[cfg(test)]
#[path = "hand_over_tests.rs"]
mod tests;
