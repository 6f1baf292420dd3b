//! [`QueueStore`] for [`BakeryStore`]: item rows through the plain item store, claims
//! through the per-item ticket bakery, and the index tables passed on to the inner store
//! under [`index_name`](super::index_name).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::lock::ticket::Draw;
use cql_lease::{CasOutcome, StoreError};
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use super::{BakeryStore, POLL, index_name, lock_error, ticket_name};
use crate::item::{IndexEntry, ItemId, ItemKey, JobState, StoredItem};
use crate::store::{ClaimOutcome, ItemClaim, NewRow, QueueStore, Reschedule, Seal};

const NO_UNIQUE: &str = "unique keys are not available in the bakery claim mode";

#[async_trait]
impl QueueStore for BakeryStore {
    fn claim_mode(&self) -> crate::ClaimMode {
        crate::ClaimMode::Bakery
    }

    #[instrument(level = "debug", skip(self, row), fields(id = %row.key.id))]
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        if row.key.id.as_str().starts_with("u:") {
            return Err(StoreError::Rejected(NO_UNIQUE.into()));
        }
        // An enqueue resends for at most its resolve timeout (one send may start just
        // before that ends): origins kept twice that are of given-up enqueues.
        let kept = self.timing.resolve_timeout * 2 + self.timing.effective_request_timeout();
        let ts = self.pending.timestamp(row.origin, kept);
        let item = StoredItem {
            key: row.key.clone(),
            payload: row.payload.to_vec(),
            state: JobState::Available,
            attempt: 0,
            claim: None,
            run_at: row.run_at,
            last_error: None,
            origin: row.origin.to_owned(),
            requeued_at: 0,
        };
        self.items.write_item(&item, ts).await?;
        self.pending.confirmed(row.origin);
        Ok(CasOutcome::Applied)
    }

    async fn revive(
        &self,
        _row: NewRow<'_>,
        _seen_attempt: i32,
        _seen_origin: &str,
    ) -> Result<CasOutcome, StoreError> {
        Err(StoreError::Rejected(NO_UNIQUE.into()))
    }

    #[instrument(level = "debug", skip(self, claim), fields(id = %claim.key.id, claim = claim.claim_id))]
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        let name = ticket_name(claim.key);
        // Choosers are waited for at most half a validity: a claim must land well within it.
        let deadline = Instant::now() + self.timing.renew_deadline() / 2;
        // Above the attempt seen too: a given-back attempt whose mark never landed.
        let floor = i64::from(claim.seen_attempt);
        let draw = self.bakery.draw(&name, claim.claim_id, floor, deadline);
        let draw = draw.await.map_err(lock_error)?;
        let ticket = match draw {
            Draw::Won(ticket) => Arc::new(ticket),
            Draw::Beaten { .. } | Draw::Again => {
                // Jittered, so losers do not meet again at once.
                tokio::time::sleep(cql_lease::hold::jittered(POLL).next().unwrap_or(POLL)).await;
                return Ok(ClaimOutcome::Lost);
            }
        };
        if ticket.number() != i64::from(claim.seen_attempt) + 1 {
            // Someone took a number since the item was read: it is theirs.
            debug!(number = ticket.number(), "item moved on since it was read");
            ticket.withdraw().await;
            return Ok(ClaimOutcome::Lost);
        }
        // The peek read the row and the tickets separately, and a row read can answer late:
        // read the row again now that the number is ours. A claimer before us finished (or
        // gave its attempt back) before withdrawing its cells, so this read sees it.
        match self.items.read_item(claim.key).await {
            Ok(Some((row, _)))
                if i64::from(row.attempt) < ticket.number() && row.state.is_claimable() => {}
            Ok(_) => {
                debug!(number = ticket.number(), "item finished since it was read");
                ticket.withdraw().await;
                return Ok(ClaimOutcome::Lost);
            }
            Err(error) => {
                ticket.withdraw().await;
                return Err(error);
            }
        }
        // Tracked before the mark's write, so an undo (future dropped) finds it.
        self.held.won(claim.claim_id, &ticket, self.standing());
        // The number counts only once recorded: a later claim must draw above it.
        let marked = match self.mark_deadline(&ticket) {
            Some(give_up_at) => ticket.record_high_water_by(give_up_at).await,
            None => ticket.record_high_water().await,
        };
        // A ticket given up below stays known as such until withdrawn: this claim may be cut
        // (the queue's bound) anywhere after, and its read-back must not count it.
        if let Err(error) = marked {
            warn!(%error, "high-water mark not confirmed; claim withdrawn");
            // Its write may have landed all the same: then the attempt is given back.
            if let Err(error) = self.give_back(claim.key, &ticket).await {
                warn!(%error, "attempt of a withdrawn claim not given back");
            }
            ticket.withdraw().await;
            self.forget(claim.claim_id);
            return Ok(ClaimOutcome::Lost);
        }
        if !ticket.is_valid() {
            self.held.given_up(claim.claim_id);
            ticket.withdraw().await;
            self.forget(claim.claim_id);
            return Ok(ClaimOutcome::Lost);
        }
        self.held.recorded(claim.claim_id, ticket.number());
        info!(number = ticket.number(), "bakery claim won");
        Ok(ClaimOutcome::Claimed)
    }

    async fn heartbeat(
        &self,
        _key: &ItemKey,
        claim_id: &str,
        _ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        match self.ticket(claim_id) {
            Some(ticket) => ticket.holdable().renew().await,
            None => Ok(CasOutcome::NotApplied),
        }
    }

    async fn complete(
        &self,
        key: &ItemKey,
        claim_id: &str,
        _retention: Duration,
    ) -> Result<CasOutcome, StoreError> {
        self.finish(key, claim_id, |item| {
            item.state = JobState::Done;
            item.payload.clear();
        })
        .await
    }

    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.finish(key, claim_id, |item| {
            item.state = to.state;
            item.run_at = to.run_at;
            item.last_error = to.error.map(str::to_owned);
            // One up from the row's current value (a give-back may have raised it since the
            // claim read it), never lower than asked.
            if let Some(requeued_at) = to.requeued_at {
                item.requeued_at = item.requeued_at.saturating_add(1).max(requeued_at);
            }
        })
        .await
    }

    /// The ticket goes. Its number stays recorded in the high-water mark (marks never go
    /// down), so the next claim's number is higher: the undone claim's attempt is given
    /// back by counting attempts from one later (`requeued_at + 1`), not by lowering it.
    /// That row write is skipped when a later claim has been recorded since (the row is
    /// theirs now), another claimer is drawing, or the ticket's cells may be gone before it
    /// lands; then the undone claim counts as an attempt. See `give_back`.
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        _state: JobState,
        _attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let Some(ticket) = self.held.any(claim_id) else {
            return Ok(CasOutcome::NotApplied);
        };
        // Even an unrecorded number's mark may have landed (answer lost, or the claim cut
        // while writing it): the store decides.
        let given_back = self.give_back(key, &ticket).await;
        // Withdrawn whatever the give-back's answer: given up, the ticket no longer counts
        // for this process, so it must not keep every claimer away until its TTL. A
        // give-back that lands later is beaten by any later claim's higher number.
        ticket.withdraw().await;
        self.forget(claim_id);
        given_back?;
        Ok(CasOutcome::Applied)
    }

    async fn requeue(
        &self,
        key: &ItemKey,
        run_at: i64,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let Some((mut item, seen)) = self.current(key, false).await? else {
            return Ok(CasOutcome::NotApplied);
        };
        if item.state != JobState::Discarded || item.attempt != attempt {
            return Ok(CasOutcome::NotApplied);
        }
        item.state = JobState::Available;
        item.run_at = run_at;
        item.requeued_at = attempt;
        self.write_over(&item, seen).await?;
        Ok(CasOutcome::Applied)
    }

    async fn purge(
        &self,
        key: &ItemKey,
        _retention: Duration,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let Some((mut item, seen)) = self.current(key, false).await? else {
            return Ok(CasOutcome::NotApplied);
        };
        if item.state != JobState::Discarded || item.attempt != attempt {
            return Ok(CasOutcome::NotApplied);
        }
        item.state = JobState::Done;
        item.payload.clear();
        self.write_over(&item, seen).await?;
        Ok(CasOutcome::Applied)
    }

    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        Ok(self.current(key, false).await?.map(|(item, _)| item))
    }

    /// Plain rows cannot be written conditionally: the fence is an empty done row written
    /// at this clock. Index upkeep seals only entries older than any enqueue's window, so
    /// a row write landing later is one its enqueuer gave up on, and it carries an older
    /// timestamp (taken when it was first sent): the fence wins. There are no revivals; a
    /// requeue's row write landing after its entry was dead-lettered is not fenced (a
    /// limit stated in the README).
    async fn seal(&self, key: &ItemKey, seen: Seal<'_>) -> Result<CasOutcome, StoreError> {
        if seen != Seal::Absent {
            return Ok(CasOutcome::Applied);
        }
        let fence = StoredItem {
            key: key.clone(),
            payload: Vec::new(),
            state: JobState::Done,
            attempt: 0,
            claim: None,
            run_at: crate::store::AT_ONCE,
            last_error: None,
            origin: crate::store::SWEPT.to_owned(),
            requeued_at: 0,
        };
        self.items
            .write_item(&fence, crate::clock::next_micros())
            .await?;
        Ok(CasOutcome::Applied)
    }

    /// The claim path's look at a candidate: any live ticket shows as its `claim`, a draw
    /// still under way included. A draw started now would be beaten by it (its number is
    /// lower) or find the item moved on, so the claimer skips the item as held by another
    /// process, without a draw, and that process's slot is looked at late from then on
    /// (the LWT mode's cross-process spreading). At worst an item waits for a stale
    /// ticket's TTL, as a draw would have lost to it until then.
    async fn peek(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        Ok(self.current(key, true).await?.map(|(item, _)| item))
    }

    async fn put_entry(&self, queue: &str, entry: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.inner.put_entry(&index_name(queue), entry, ts).await
    }

    async fn move_entry(
        &self,
        queue: &str,
        new: &IndexEntry,
        old_seq: &str,
        ts: i64,
        delete_ts: i64,
    ) -> Result<bool, StoreError> {
        self.inner
            .move_entry(&index_name(queue), new, old_seq, ts, delete_ts)
            .await
    }

    async fn delete_entry(
        &self,
        queue: &str,
        bucket: i64,
        seq: &str,
        ts: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .delete_entry(&index_name(queue), bucket, seq, ts)
            .await
    }

    async fn delete_range(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        self.inner
            .delete_range(&index_name(queue), bucket, after, before, ts)
            .await
    }

    async fn scan_index(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        self.inner
            .scan_index(&index_name(queue), bucket, after, before, limit)
            .await
    }

    async fn read_cursor(&self, queue: &str) -> Result<i64, StoreError> {
        self.inner.read_cursor(&index_name(queue)).await
    }

    async fn advance_cursor(&self, queue: &str, pos: i64) -> Result<(), StoreError> {
        self.inner.advance_cursor(&index_name(queue), pos).await
    }

    async fn put_bucket(
        &self,
        queue: &str,
        bucket: i64,
        ttl: Duration,
        ts: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .put_bucket(&index_name(queue), bucket, ttl, ts)
            .await
    }

    async fn list_buckets(
        &self,
        queue: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<i64>, StoreError> {
        self.inner
            .list_buckets(&index_name(queue), after, limit)
            .await
    }

    async fn put_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.put_dead(&index_name(queue), id, ts).await
    }

    async fn delete_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_dead(&index_name(queue), id, ts).await
    }

    async fn list_dead(
        &self,
        queue: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<ItemId>, StoreError> {
        self.inner.list_dead(&index_name(queue), after, limit).await
    }
}
