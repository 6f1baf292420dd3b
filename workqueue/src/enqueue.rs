//! Adding items: text, bytes or JSON payloads, delayed items, unique jobs, batches.

use std::time::{Duration, SystemTime};

use cql_lease::{CasOutcome, InvalidArgument, StoreError};
use futures::StreamExt;
use serde::Serialize;
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use crate::clock;
use crate::config::{ClaimMode, micros};
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, ItemId, ItemKey, JobState, StoredItem};
use crate::new_item::{Enqueued, NewItem};
use crate::queue::WorkQueue;
use crate::store::{NewRow, SWEPT};

impl WorkQueue {
    /// Adds a text item, available now. See [`WorkQueue::enqueue_item`].
    ///
    /// # Errors
    ///
    /// As [`WorkQueue::enqueue_item`]: an error means the item was not added, except
    /// [`QueueError::OutcomeUnknown`] (it may have been; its id says which to look for).
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
    /// As [`WorkQueue::enqueue_item`]: an error means the item was not added, except
    /// [`QueueError::OutcomeUnknown`] (it may have been; its id says which to look for).
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
    /// [`QueueError::Payload`] if it does not serialize (nothing sent); otherwise as
    /// [`WorkQueue::enqueue_item`]: an error means the item was not added, except
    /// [`QueueError::OutcomeUnknown`] (it may have been; its id says which to look for).
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
    /// LWT batch): one result per item, in input order, each meaning what
    /// [`WorkQueue::enqueue_item`]'s does (`Ok`: added, or a duplicate; an error: not
    /// added, unless it is [`QueueError::OutcomeUnknown`], which names the item that may
    /// exist). One item's failure does not stop the others.
    ///
    /// # Errors
    ///
    /// None for the batch as a whole; each item's result carries its own, as
    /// [`WorkQueue::enqueue_item`].
    ///
    /// # Cancel safety
    ///
    /// As [`WorkQueue::enqueue_item`], for each item: dropped midway, some items may have
    /// been added and others not, and no result says which (give them unique keys to
    /// enqueue the batch again safely).
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
    /// Once the row is written the item is enqueued, and the call says so: the index upkeep
    /// after it (the entry placed again if it is old, the cursor re-read) cannot undo that,
    /// so a failure there is logged, counted
    /// ([`ENQUEUE_UPKEEP_DEFERRED`](cql_lease::metrics::ENQUEUE_UPKEEP_DEFERRED)) and
    /// retried in the background. Its entry already landed in time for its position, so
    /// the item is findable meanwhile (clocks within `max_clock_skew`).
    ///
    /// # Errors
    ///
    /// An error means the item was not added, except [`QueueError::OutcomeUnknown`]:
    /// - [`QueueError::InvalidArgument`] for an empty or oversized payload or a bad unique
    ///   key (nothing sent);
    /// - [`QueueError::Store`] when the store failed or refused before the row was written
    ///   and no send of it can still land (including an enqueue slower than its window,
    ///   refused by the sealing of its entry's sweep);
    /// - [`QueueError::OutcomeUnknown`], with the item's id, when a send of the row may have
    ///   applied (a write timeout, a lost answer) and reading back could not settle it in
    ///   `resolve_timeout`: the item may exist, and is then findable; or its row may yet
    ///   land, and is then refused by that sealing.
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
        // A send of the row that may have applied: an unknown answer, or in the bakery mode
        // any failure but a refusal (its plain write, cut twice, reads as unavailable yet may
        // land). While one may, giving up is an unknown outcome, never "not added".
        let mut insert_unsettled = false;
        loop {
            let error = match self.store.enqueue(row).await {
                Ok(CasOutcome::Applied) => break,
                Ok(CasOutcome::NotApplied) => match self.store.read(&key).await {
                    // This very enqueue applied (an earlier send whose answer was lost),
                    // even if its item has been completed since: never brought back.
                    Ok(Some(existing)) if existing.origin == origin => break,
                    Ok(Some(existing)) => {
                        // The row is another's: no insert of this call can apply any more.
                        insert_unsettled = false;
                        match self
                            .on_existing_row(
                                &item,
                                &key,
                                row,
                                existing,
                                &mut entry,
                                &mut written_from,
                                &mut revival_unsettled,
                                give_up_at,
                                pos,
                                immediate,
                            )
                            .await
                        {
                            Existing::Revived => break,
                            Existing::Retry(error) => error,
                            Existing::Done(result) => return result,
                        }
                    }
                    Ok(None) => StoreError::Unavailable("row vanished".into()),
                    Err(e) => e,
                },
                Err(error @ (StoreError::Unknown(_) | StoreError::Unavailable(_))) => {
                    insert_unsettled |= self.may_have_applied(&error);
                    error
                }
                Err(source) => {
                    return Err(self
                        .give_up(&entry, source, insert_unsettled || revival_unsettled)
                        .await);
                }
            };
            if Instant::now() >= give_up_at {
                return Err(self
                    .give_up(&entry, error, insert_unsettled || revival_unsettled)
                    .await);
            }
            warn!(%id, %error, "enqueue answer lost; sending it again");
            tokio::time::sleep(self.config.timing.retry_period / 2).await;
            // A process paused in the sleep must not send after its window: index upkeep
            // may have sealed the row meanwhile, and a late send could not be told apart
            // from a fresh one (the bakery mode's row timestamp is forgotten by then).
            if Instant::now() >= give_up_at {
                return Err(self
                    .give_up(&entry, error, insert_unsettled || revival_unsettled)
                    .await);
            }
        }
        // The row exists: the item is enqueued whatever the upkeep below meets, so a failure
        // of it is retried in the background, never reported as a failed enqueue.
        if let Err(error) = self.settle_entry(&mut entry, &mut written_from).await {
            self.settle_later(entry, written_from, origin, error);
        }
        info!(queue = %self.name(), %id, "enqueued");
        self.count(cql_lease::metrics::ENQUEUED);
        Ok(Enqueued::New(id))
    }

    /// What an enqueue does on finding its item's row written by another: refused by an
    /// orphan's seal, a duplicate of a unique key's live job, or the revival of its
    /// completed one (one more LWT, whose lost answers are settled like the insert's).
    #[allow(clippy::too_many_arguments)] // the enqueue's own state, borrowed for one step
    async fn on_existing_row(
        &self,
        item: &NewItem,
        key: &ItemKey,
        row: NewRow<'_>,
        existing: StoredItem,
        entry: &mut IndexEntry,
        written_from: &mut Instant,
        revival_unsettled: &mut bool,
        give_up_at: Instant,
        pos: i64,
        immediate: bool,
    ) -> Existing {
        let id = entry.id.clone();
        // Index upkeep took this enqueue's entry for an orphan (it outlived any enqueue's
        // window) and sealed the row against it: nothing was enqueued.
        if existing.origin == SWEPT && item.unique_key.is_none() {
            self.remove(entry).await;
            return Existing::Done(Err(QueueError::Store {
                operation: "enqueue",
                source: StoreError::Unavailable(
                    "slower than any enqueue's window: refused, nothing enqueued".into(),
                ),
            }));
        }
        if item.unique_key.is_none() || existing.state != JobState::Done {
            self.remove(entry).await;
            info!(%id, state = ?existing.state, "duplicate enqueue");
            return Existing::Done(Ok(Enqueued::Duplicate {
                id,
                state: existing.state,
            }));
        }
        // A new job for a unique key whose last job completed: allowed once its done marker
        // expired (`done_retention`). Its entry carries the attempt the revival is
        // conditioned on (the row's `requeued_at` then), so entries left by earlier jobs
        // (lower attempts) are told apart; placed before the LWT, so the revived job always
        // has one. A sealed row's entry was swept: a fresh one goes in too.
        if entry.attempt != existing.attempt || existing.origin == SWEPT {
            let next = self.entry(
                &id,
                pos.max(self.now()),
                EntryKind::Run,
                immediate,
                existing.attempt,
            );
            match self.place_in_time(next).await {
                Ok(placed) => {
                    self.remove(entry).await;
                    (*entry, *written_from) = placed;
                }
                // An earlier revival of this call whose answer was lost may still apply (a
                // Paxos round retrying): its entry stays, and the outcome is unknown.
                Err(error) if *revival_unsettled => {
                    let source = match error {
                        QueueError::Store { source, .. } => source,
                        other => StoreError::Unavailable(other.to_string()),
                    };
                    return Existing::Done(Err(self.give_up(entry, source, true).await));
                }
                // No revival of this call was sent: nothing was enqueued.
                Err(error) => {
                    self.remove(entry).await;
                    return Existing::Done(Err(error));
                }
            }
        }
        // Never sent after the window (an earlier revival of this call may still be
        // pending: its entry stays).
        if Instant::now() >= give_up_at {
            let error = StoreError::Unavailable(
                "resolve_timeout passed before the revival was sent".into(),
            );
            return Existing::Done(Err(self.give_up(entry, error, *revival_unsettled).await));
        }
        match self
            .store
            .revive(row, existing.attempt, &existing.origin)
            .await
        {
            Ok(CasOutcome::Applied) => Existing::Revived,
            // Still done (its window not over), or another enqueue of the key started the
            // next job first: report what is there now.
            Ok(CasOutcome::NotApplied) => match self.store.read(key).await {
                Ok(Some(now)) if now.origin == row.origin => Existing::Revived,
                // Sealed by index upkeep meanwhile (the attempt number raised, or an
                // orphan's fence): revive it as it is now.
                Ok(Some(now))
                    if now.state == JobState::Done
                        && (now.origin == SWEPT
                            || (now.origin == existing.origin
                                && now.attempt > existing.attempt)) =>
                {
                    Existing::Retry(StoreError::Unavailable("sealed while reviving".into()))
                }
                // Still the done row our lost revival is conditioned on: it may yet apply,
                // and needs the entry.
                Ok(Some(now))
                    if *revival_unsettled
                        && now.state == JobState::Done
                        && now.origin == existing.origin
                        && now.attempt == existing.attempt =>
                {
                    Existing::Retry(StoreError::Unknown(
                        "refused, but an earlier revival may still apply".into(),
                    ))
                }
                Ok(Some(now)) => {
                    self.remove(entry).await;
                    info!(%id, state = ?now.state, "duplicate enqueue");
                    Existing::Done(Ok(Enqueued::Duplicate {
                        id,
                        state: now.state,
                    }))
                }
                Ok(None) => Existing::Retry(StoreError::Unavailable("row vanished".into())),
                Err(e) => Existing::Retry(e),
            },
            Err(error) => {
                *revival_unsettled |= error.is_unknown();
                Existing::Retry(error)
            }
        }
    }

    /// Whether a failed send of the row may still have written it.
    fn may_have_applied(&self, error: &StoreError) -> bool {
        match error {
            StoreError::Unknown(_) => true,
            StoreError::Unavailable(_) => self.config.claim_mode == ClaimMode::Bakery,
            StoreError::Rejected(_) => false,
        }
    }

    /// The error an enqueue gives up with: an unknown outcome, its entry kept, while a send
    /// of this call may still write the item; otherwise a plain failure, its entry removed
    /// (nothing was added).
    async fn give_up(&self, entry: &IndexEntry, source: StoreError, unsettled: bool) -> QueueError {
        if unsettled || source.is_unknown() {
            return QueueError::OutcomeUnknown {
                operation: "enqueue",
                id: entry.id.clone(),
                source,
            };
        }
        self.remove(entry).await;
        QueueError::Store {
            operation: "enqueue",
            source,
        }
    }

    /// The index upkeep an enqueue owes once its row exists. An entry at a run_at long
    /// past, met by a scanner before the row existed, reads as the leftover of an enqueue
    /// that died (`drop_orphan`, or a done row's stale entry) and may have been deleted
    /// while the LWT was on its way: placed again now that the row exists (the scanner only
    /// ever deletes the copy it read). Then the entry is kept ahead of the cursor.
    /// `entry` and `written_from` follow each step, so a retry goes on from where it failed.
    async fn settle_entry(
        &self,
        entry: &mut IndexEntry,
        written_from: &mut Instant,
    ) -> Result<(), QueueError> {
        let skew = micros(self.config.timing.max_clock_skew);
        if entry.pos < self.now() - self.enqueue_window() + 2 * skew {
            let again = self.entry(
                &entry.id,
                entry.pos.max(self.now()),
                EntryKind::Run,
                entry.immediate,
                entry.attempt,
            );
            let placed = self.place_in_time(again).await?;
            self.remove(entry).await;
            (*entry, *written_from) = placed;
        }
        self.keep_entry_ahead(entry, written_from).await
    }

    /// Retries [`Self::settle_entry`] in a spawned task, every `retry_period` (jittered)
    /// for at most `enqueue_window`, while the item is still as its enqueue left it
    /// (available, its attempt number unchanged, its origin this call's): once claimed, its
    /// entry was found and replaced. Given up, the entry placed in time stays: enough for
    /// clocks within `max_clock_skew`.
    fn settle_later(
        &self,
        mut entry: IndexEntry,
        mut written_from: Instant,
        origin: String,
        error: QueueError,
    ) {
        warn!(queue = %self.name(), id = %entry.id, %error, "enqueued, but its index upkeep failed; retrying it in the background");
        self.count(cql_lease::metrics::ENQUEUE_UPKEEP_DEFERRED);
        let queue = self.clone();
        let give_up_at = Instant::now()
            + Duration::from_micros(u64::try_from(self.enqueue_window()).unwrap_or(0));
        tokio::spawn(async move {
            let mut pauses = cql_lease::hold::jittered(queue.config.timing.retry_period);
            while Instant::now() < give_up_at {
                let pause = pauses.next().unwrap_or(queue.config.timing.retry_period);
                tokio::time::sleep(pause).await;
                let key = queue.key(entry.id.clone());
                match queue.store.read(&key).await {
                    Ok(Some(row))
                        if row.origin == origin
                            && row.state == JobState::Available
                            && row.attempt == entry.attempt => {}
                    Ok(_) => {
                        debug!(id = %entry.id, "item moved on; its enqueue's upkeep is moot");
                        return;
                    }
                    Err(error) => {
                        debug!(id = %entry.id, %error, "enqueue upkeep: item not read");
                        continue;
                    }
                }
                match queue.settle_entry(&mut entry, &mut written_from).await {
                    Ok(()) => {
                        info!(id = %entry.id, "enqueue upkeep done in the background");
                        return;
                    }
                    Err(error) => debug!(id = %entry.id, %error, "enqueue upkeep failed again"),
                }
            }
            warn!(id = %entry.id, "enqueue upkeep given up; the entry placed in time stays");
        });
    }
}

/// What [`WorkQueue::on_existing_row`] found.
enum Existing {
    /// This call's revival applied: the item is enqueued.
    Revived,
    /// Try again after this error (unless the enqueue's window is over).
    Retry(StoreError),
    /// The enqueue's answer.
    Done(Result<Enqueued, QueueError>),
}
