//! Adding items: text, bytes or JSON payloads, delayed items, unique jobs, batches.

use std::time::SystemTime;

use cql_lease::{CasOutcome, InvalidArgument, StoreError};
use futures::StreamExt;
use serde::Serialize;
use tokio::time::Instant;
use tracing::{info, instrument, warn};

use crate::clock;
use crate::config::{ClaimMode, micros};
use crate::error::QueueError;
use crate::item::{EntryKind, ItemId, JobState};
use crate::new_item::{Enqueued, NewItem};
use crate::queue::WorkQueue;
use crate::store::{NewRow, SWEPT};

impl WorkQueue {
    /// Adds a text item, available now. See [`WorkQueue::enqueue_item`].
    ///
    /// # Errors
    ///
    /// As [`WorkQueue::enqueue_item`].
    ///
    /// # Cancel safety
    ///
    /// As [`WorkQueue::enqueue_item`].
    pub async fn enqueue(&self, payload: &str) -> Result<ItemId, QueueError> {
        self.enqueue_item(NewItem::text(payload))
            .await
            .map(|e| e.id().clone())
    }

    /// Adds a text item that no worker takes before `run_at` (`None`: now).
    ///
    /// # Errors
    ///
    /// As [`WorkQueue::enqueue_item`].
    ///
    /// # Cancel safety
    ///
    /// As [`WorkQueue::enqueue_item`].
    pub async fn enqueue_at(
        &self,
        payload: &str,
        run_at: Option<SystemTime>,
    ) -> Result<ItemId, QueueError> {
        let mut item = NewItem::text(payload);
        item.run_at = run_at;
        self.enqueue_item(item).await.map(|e| e.id().clone())
    }

    /// Adds `value` as a JSON item, available now.
    ///
    /// # Errors
    ///
    /// [`QueueError::Payload`] if it does not serialize; otherwise as
    /// [`WorkQueue::enqueue_item`].
    ///
    /// # Cancel safety
    ///
    /// As [`WorkQueue::enqueue_item`].
    pub async fn enqueue_json<T: Serialize + ?Sized>(
        &self,
        value: &T,
    ) -> Result<ItemId, QueueError> {
        self.enqueue_item(NewItem::json(value)?)
            .await
            .map(|e| e.id().clone())
    }

    /// Adds items concurrently (each item is its own partition, so they cannot share one
    /// LWT batch); results in input order.
    ///
    /// # Cancel safety
    ///
    /// As [`WorkQueue::enqueue_item`], for each item.
    pub async fn enqueue_batch(
        &self,
        items: impl IntoIterator<Item = NewItem>,
    ) -> Vec<Result<Enqueued, QueueError>> {
        futures::stream::iter(items)
            .map(|item| self.enqueue_item(item))
            .buffered(32)
            .collect()
            .await
    }

    /// Adds an item: one plain index write (again if it landed too late for its position),
    /// one LWT (`IF NOT EXISTS` on the item's own partition), one cursor read to prove the
    /// entry is not behind the cursor.
    ///
    /// The index entry is written first, so the item is never without one. A lost answer is
    /// settled by sending the same insert again and reading back the row's origin.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] for an empty or oversized payload or a bad unique key
    /// (nothing sent); [`QueueError::OutcomeUnknown`] when a lost answer could not be settled
    /// in `resolve_timeout` (the item may exist, findable; or its row may yet land, and is
    /// then refused by the sealing of its entry's sweep); [`QueueError::Store`] otherwise:
    /// before the row was written nothing was enqueued (including an enqueue slower than
    /// its window, refused by that sealing), after it (only the final cursor re-read, or
    /// a lost revival's upkeep) the item exists and is findable.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the item may or may not exist; if it exists it is findable: its
    /// index entry landed, in time for the cursor not to have passed it, before the row
    /// was written (an entry whose write took longer than `cursor_lag - 2 x
    /// max_clock_skew` is placed again first). This assumes clocks within
    /// `max_clock_skew`; for an enqueuer further behind, only the cursor re-read at the end
    /// re-places the entry.
    #[instrument(skip(self, item), fields(queue = %self.name()))]
    pub async fn enqueue_item(&self, item: NewItem) -> Result<Enqueued, QueueError> {
        item.check()?;
        if item.unique_key.is_some() && self.config.claim_mode == ClaimMode::Bakery {
            // Exactly-once keys need a conditional write; plain writes cannot refuse a second
            // enqueue that races the first.
            return Err(InvalidArgument::Invalid {
                field: "unique key",
                reason: "not available in the bakery claim mode (no LWT to make it exact)".into(),
            }
            .into());
        }
        let id = match &item.unique_key {
            Some(key) => ItemId::unique(key),
            None => ItemId::now(),
        };
        let key = self.key(id.clone());
        let origin = uuid::Uuid::new_v4().simple().to_string();
        let now = self.now();
        let run_at = item.run_at.map_or(now, clock::micros_of);
        // Never behind the cursor this process last saw, nor behind our clock: a delayed
        // item sits at its run_at (eligible by the claimer's clock), one due by our clock at
        // now, where the cursor cannot have gone yet, as an immediate entry: eligible when
        // seen (the claimer checks the row's run_at by its own clock), and moved back to the
        // cursor if our clock is ahead.
        let immediate = run_at <= now;
        let pos = run_at.max(now).max(self.dispatcher.cursor_hint());
        let entry = self.entry(&id, pos, EntryKind::Run, immediate, 0);
        // Landed in time for its position before the row exists (see `placement`).
        let (mut entry, mut written_from) = self.place_in_time(entry).await?;
        let row = NewRow {
            key: &key,
            payload: &item.payload,
            // An immediate item's row says "at once": its entry's position (our clock) only
            // orders it.
            run_at: if item.run_at.is_none() {
                crate::store::AT_ONCE
            } else {
                run_at
            },
            origin: &origin,
        };
        let give_up_at = Instant::now() + self.config.timing.resolve_timeout;
        // A revival of this call whose answer was lost may still apply (its Paxos round
        // retrying at its coordinator) once the done marker expires, so a later refusal
        // proves nothing about it.
        let mut revival_unsettled = false;
        loop {
            let error = match self.store.enqueue(row).await {
                Ok(CasOutcome::Applied) => break,
                Ok(CasOutcome::NotApplied) => match self.store.read(&key).await {
                    // This very enqueue applied (an earlier send whose answer was lost),
                    // even if its item has been completed since: never brought back.
                    Ok(Some(existing)) if existing.origin == origin => break,
                    // Index upkeep took this enqueue's entry for an orphan (it outlived any
                    // enqueue's window) and sealed the row against it: nothing was enqueued.
                    Ok(Some(existing)) if existing.origin == SWEPT && item.unique_key.is_none() => {
                        self.remove(&entry).await;
                        return Err(QueueError::Store {
                            operation: "enqueue",
                            source: StoreError::Unavailable(
                                "slower than any enqueue's window: refused, nothing enqueued"
                                    .into(),
                            ),
                        });
                    }
                    Ok(Some(existing))
                        if item.unique_key.is_some() && existing.state == JobState::Done =>
                    {
                        // A new job for a unique key whose last job completed: allowed once
                        // its done marker expired (`done_retention`). Its entry carries the
                        // attempt the revival is conditioned on (the row's `requeued_at`
                        // then), so entries left by earlier jobs (lower attempts) are told
                        // apart; placed before the LWT, so the revived job always has one.
                        // A sealed row's entry was swept: a fresh one goes in too.
                        if entry.attempt != existing.attempt || existing.origin == SWEPT {
                            let next = self.entry(
                                &id,
                                pos.max(self.now()),
                                EntryKind::Run,
                                immediate,
                                existing.attempt,
                            );
                            let placed = self.place_in_time(next).await;
                            self.remove(&entry).await;
                            (entry, written_from) = placed?;
                        }
                        // Never sent after the window (an earlier revival of this call
                        // may still be pending: its entry stays).
                        if Instant::now() >= give_up_at {
                            return Err(QueueError::OutcomeUnknown {
                                operation: "enqueue",
                                id,
                                source: StoreError::Unavailable(
                                    "resolve_timeout passed before the revival was sent".into(),
                                ),
                            });
                        }
                        match self
                            .store
                            .revive(row, existing.attempt, &existing.origin)
                            .await
                        {
                            Ok(CasOutcome::Applied) => break,
                            // Still done (its window not over), or another enqueue of
                            // the key started the next job first: report what is there now.
                            Ok(CasOutcome::NotApplied) => match self.store.read(&key).await {
                                Ok(Some(now)) if now.origin == origin => break,
                                // Sealed by index upkeep meanwhile (the attempt number
                                // raised, or an orphan's fence): revive it as it is now.
                                Ok(Some(now))
                                    if now.state == JobState::Done
                                        && (now.origin == SWEPT
                                            || (now.origin == existing.origin
                                                && now.attempt > existing.attempt)) =>
                                {
                                    StoreError::Unavailable("sealed while reviving".into())
                                }
                                // Still the done row our lost revival is conditioned
                                // on: it may yet apply, and needs the entry.
                                Ok(Some(now))
                                    if revival_unsettled
                                        && now.state == JobState::Done
                                        && now.origin == existing.origin
                                        && now.attempt == existing.attempt =>
                                {
                                    StoreError::Unknown(
                                        "refused, but an earlier revival may still apply".into(),
                                    )
                                }
                                Ok(Some(now)) => {
                                    self.remove(&entry).await;
                                    info!(%id, state = ?now.state, "duplicate enqueue");
                                    return Ok(Enqueued::Duplicate {
                                        id,
                                        state: now.state,
                                    });
                                }
                                Ok(None) => StoreError::Unavailable("row vanished".into()),
                                Err(e) => e,
                            },
                            Err(error) => {
                                revival_unsettled |= error.is_unknown();
                                error
                            }
                        }
                    }
                    Ok(Some(existing)) => {
                        self.remove(&entry).await;
                        info!(%id, state = ?existing.state, "duplicate enqueue");
                        return Ok(Enqueued::Duplicate {
                            id,
                            state: existing.state,
                        });
                    }
                    Ok(None) => StoreError::Unavailable("row vanished".into()),
                    Err(e) => e,
                },
                Err(error @ (StoreError::Unknown(_) | StoreError::Unavailable(_))) => error,
                Err(source) => {
                    self.remove(&entry).await;
                    return Err(QueueError::Store {
                        operation: "enqueue",
                        source,
                    });
                }
            };
            if Instant::now() >= give_up_at {
                return Err(QueueError::OutcomeUnknown {
                    operation: "enqueue",
                    id,
                    source: error,
                });
            }
            warn!(%id, %error, "enqueue answer lost; sending it again");
            tokio::time::sleep(self.config.timing.retry_period / 2).await;
            // A process paused in the sleep must not send after its window: index upkeep
            // may have sealed the row meanwhile, and a late send could not be told apart
            // from a fresh one (the bakery mode's row timestamp is forgotten by then).
            if Instant::now() >= give_up_at {
                return Err(QueueError::OutcomeUnknown {
                    operation: "enqueue",
                    id,
                    source: error,
                });
            }
        }
        // An entry at a run_at long past, met by a scanner before the row existed, reads as
        // the leftover of an enqueue that died (`drop_orphan`, or a done row's stale entry)
        // and may have been deleted while the LWT was on its way: placed again now that the
        // row exists (the scanner only ever deletes the copy it read).
        let skew = micros(self.config.timing.max_clock_skew);
        if entry.pos < self.now() - self.enqueue_window() + 2 * skew {
            let again = self.entry(
                &id,
                entry.pos.max(self.now()),
                EntryKind::Run,
                entry.immediate,
                entry.attempt,
            );
            let placed = self.place_in_time(again).await?;
            self.remove(&entry).await;
            (entry, written_from) = placed;
        }
        self.keep_ahead_of_cursor(entry, written_from).await?;
        info!(queue = %self.name(), %id, "enqueued");
        self.count(cql_lease::metrics::ENQUEUED);
        Ok(Enqueued::New(id))
    }
}
