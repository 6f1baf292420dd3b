//! Ending a bakery claim with plain writes: a finish (complete, reschedule, hand-back) and
//! an undone claim's give-back. A plain write cannot be conditional, so each is fenced by
//! hand, as the LWT mode's `IF claim = ?` would be:
//!
//! - the row's `attempt` is the last attempt finished (or given back): a finish writes only
//!   over a row below its own number, so a finish that already landed (answer lost) or a
//!   later holder's is never overwritten by a resend or a hand-back;
//! - the write is sent only while the ticket holds, and only if its answer, waited for at
//!   most one request timeout (at most a third of the validity), would come while the
//!   ticket's cells certainly stand in the store; checked before the read and again right
//!   before sending (the read may be slow). An answered finish therefore landed before
//!   anyone else could claim, and the next holder's finish, which reads the row first,
//!   writes above its timestamp.
//!
//! What this cannot rule out on a real cluster: a write the store applies after its answer
//! timed out (a coordinator still working, a replica's hint). It then loses to the next
//! holder's writes only by client timestamps: see the README (bounded clock skew).

use std::sync::Arc;
use std::time::Duration;

use cql_lease::lock::ticket::Ticket;
use cql_lease::{CasOutcome, StoreError};
use tokio::time::Instant;
use tracing::{debug, info};

use super::{BakeryStore, lock_error, ticket_name};
use crate::item::{ItemKey, StoredItem};

impl BakeryStore {
    /// Writes `item` over the version read at `seen`: a timestamp above both.
    pub(super) async fn write_over(&self, item: &StoredItem, seen: i64) -> Result<(), StoreError> {
        let ts = crate::clock::next_micros().max(seen + 1);
        self.items.write_item(item, ts).await
    }

    /// The longest a finishing write is waited for: one request timeout, at most a third of
    /// the validity (a longer configured timeout would leave no time to finish at all).
    fn flight(&self) -> Duration {
        self.timing
            .effective_request_timeout()
            .min(self.timing.renew_deadline() / 3)
    }

    /// Whether a write may be sent now: the ticket holds by the local clock, and the write's
    /// answer, waited for at most its [`flight`](Self::flight), comes while the ticket's
    /// cells certainly stand in the store (they stand past the validity by the TTL's margin
    /// over it, less the skew allowance): an answered finish landed before anyone else
    /// could claim the item.
    fn may_write(&self, ticket: &Ticket) -> bool {
        let now = Instant::now();
        ticket
            .valid_until()
            .is_some_and(|until| now < until && now + self.flight() < until + self.standing())
    }

    /// How long a ticket's cells certainly stand in the store past its validity: the TTL's
    /// margin over the validity, less the skew allowance.
    pub(super) fn standing(&self) -> Duration {
        let t = &self.timing;
        t.lease_duration
            .saturating_sub(t.renew_deadline() + t.max_clock_skew)
    }

    /// Whether a give-back may be sent now: its answer, waited for at most its flight,
    /// comes while the ticket's cells certainly stand, so no other claim can have been
    /// made on the item before it lands. Unlike a finish it does no work for the item, so
    /// the holder's deadline (the validity) does not bound it, only the cells' standing.
    pub(super) fn may_give_back(&self, ticket: &Ticket) -> bool {
        let now = Instant::now();
        ticket
            .valid_until()
            .is_some_and(|until| now + self.flight() < until + self.standing())
    }

    /// Until when a claim's high-water mark may be sent again: a mark that then fails
    /// still leaves its give-back the time its fence allows (the write's flight and a
    /// retry interval for its reads), so an undone claim's attempt is given back however
    /// the mark's resends fall.
    pub(super) fn mark_deadline(&self, ticket: &Ticket) -> Option<Instant> {
        let until = ticket.valid_until()?;
        let reserve = self.flight() + self.timing.retry_period;
        (until + self.standing()).checked_sub(reserve)
    }

    /// Ends the claim `claim_id` by rewriting its item with `change`: only while its ticket
    /// holds for the write's flight, and only over a row that no finish of this attempt or
    /// a later one has reached.
    pub(super) async fn finish(
        &self,
        key: &ItemKey,
        claim_id: &str,
        change: impl FnOnce(&mut StoredItem),
    ) -> Result<CasOutcome, StoreError> {
        let Some(ticket) = self.ticket(claim_id) else {
            return Ok(CasOutcome::NotApplied);
        };
        let outcome = self.finish_with(key, &ticket, change).await;
        if outcome.is_ok() {
            // Over either way. After an error the ticket stays for the caller's resend
            // (which the row's attempt fences) or hand-back.
            self.forget(claim_id);
            ticket.withdraw().await;
        }
        outcome
    }

    async fn finish_with(
        &self,
        key: &ItemKey,
        ticket: &Arc<Ticket>,
        change: impl FnOnce(&mut StoredItem),
    ) -> Result<CasOutcome, StoreError> {
        if !self.may_write(ticket) {
            debug!(
                number = ticket.number(),
                "ticket too close to its end to finish"
            );
            return Ok(CasOutcome::NotApplied);
        }
        let Some((mut item, seen)) = self.items.read_item(key).await? else {
            return Ok(CasOutcome::NotApplied);
        };
        let number = ticket.number();
        if i64::from(item.attempt) >= number {
            info!(
                number,
                attempt = item.attempt,
                "row already finished past this claim"
            );
            return Ok(CasOutcome::NotApplied);
        }
        item.attempt = i32::try_from(number).unwrap_or(i32::MAX);
        change(&mut item);
        // The read may have taken long: the ticket must still hold for the write's flight.
        if !self.may_write(ticket) {
            debug!(number, "ticket ran low while reading; not finishing");
            return Ok(CasOutcome::NotApplied);
        }
        let flight = self.flight();
        match tokio::time::timeout(flight, self.write_over(&item, seen)).await {
            Ok(written) => written.map(|()| CasOutcome::Applied),
            Err(_) => Err(StoreError::Unknown(format!(
                "finishing write: no answer within {flight:?}"
            ))),
        }
    }

    /// Gives back the attempt of `ticket`, a claim undone or never confirmed whose number
    /// was (or may yet be) recorded as the item's high-water mark: marks never go down, so
    /// attempts are counted from one later (`requeued_at + 1`), and the row's attempt
    /// becomes the number (the next draw is above it even if the mark never lands). Like a
    /// finish it is fenced by hand: sent only while the ticket's cells stand for the
    /// write's flight (checked before the reads and again right before the write: a slow
    /// read must not carry an old row over a later holder's), and only over a row below
    /// the number. Nothing is written when a later claim's mark is recorded, or when
    /// another ticket is live (someone is drawing).
    ///
    /// The ticket is given up first: from then on this process never counts it as a claim.
    /// The write may land after its sender stopped waiting (a claim cut by the queue's bound
    /// while giving back, then read back): counted, the claim would be delivered and this
    /// give-back would make the item claimable again under its job, which would run twice.
    pub(super) async fn give_back(&self, key: &ItemKey, ticket: &Ticket) -> Result<(), StoreError> {
        self.held.given_up(ticket.id());
        let number = ticket.number();
        if !self.may_give_back(ticket) {
            debug!(number, "ticket's cells may be gone; attempt not given back");
            return Ok(());
        }
        let tickets = self
            .bakery
            .tickets(&ticket_name(key))
            .await
            .map_err(lock_error)?;
        if tickets.high_water > number || tickets.live.iter().any(|(id, _)| id != ticket.id()) {
            return Ok(());
        }
        let Some((mut item, seen)) = self.items.read_item(key).await? else {
            return Ok(());
        };
        if i64::from(item.attempt) >= number {
            return Ok(());
        }
        item.requeued_at += 1;
        item.attempt = i32::try_from(number).unwrap_or(i32::MAX);
        if !self.may_give_back(ticket) {
            debug!(
                number,
                "ticket ran low while reading; attempt not given back"
            );
            return Ok(());
        }
        info!(number, "attempt of an undone claim given back");
        let flight = self.flight();
        match tokio::time::timeout(flight, self.write_over(&item, seen)).await {
            Ok(written) => written,
            Err(_) => Err(StoreError::Unknown(format!(
                "give-back: no answer within {flight:?}"
            ))),
        }
    }
}
