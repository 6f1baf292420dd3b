//! Dead letters: discarded items, listed, requeued or purged.

use std::sync::atomic::{AtomicBool, Ordering};

use cql_lease::hold::{HoldTiming, until_resolved_tracked};
use cql_lease::{CasOutcome, StoreError};
use tracing::{info, instrument, warn};

use crate::clock;
use crate::error::QueueError;
use crate::item::{EntryKind, ItemId, ItemKey, JobState, StoredItem};
use crate::queue::WorkQueue;

/// A discarded item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The item.
    pub id: ItemId,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Its last attempt number: its claims, plus any number a seal of index upkeep took
    /// (see [`StoredItem::attempt`](crate::StoredItem::attempt)).
    pub attempt: i32,
    /// Why it was discarded.
    pub last_error: Option<String>,
}

pub(crate) fn store_error(operation: &'static str) -> impl Fn(StoreError) -> QueueError {
    move |source| QueueError::Store { operation, source }
}

impl WorkQueue {
    pub(crate) async fn put_dead(&self, id: &ItemId) -> Result<(), QueueError> {
        info!(queue = %self.name(), %id, "dead letter");
        self.store
            .put_dead(self.name(), id, clock::next_micros())
            .await
            .map_err(store_error("record dead letter"))
    }

    pub(crate) async fn dead_letter_ids(&self) -> Result<Vec<ItemId>, QueueError> {
        let mut all: Vec<ItemId> = Vec::new();
        loop {
            let after = all
                .last()
                .map(|id| id.as_str().to_owned())
                .unwrap_or_default();
            let limit = self.config.scan_limit;
            let page = self
                .store
                .list_dead(self.name(), &after, limit)
                .await
                .map_err(store_error("list dead letters"))?;
            let full = page.len() == limit as usize;
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// Every dead letter with its payload and last error. A record whose item is no dead
    /// letter any more (requeued, purged, or recorded late by a scanner that raced a
    /// requeue) is skipped and deleted.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when a read fails.
    ///
    /// # Cancel safety
    ///
    /// Safe to drop: it reads, and deletes only records of items that are no dead letters.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        let mut letters = Vec::new();
        for id in self.dead_letter_ids().await? {
            let item = self
                .store
                .peek(&self.key(id.clone()))
                .await
                .map_err(store_error("read dead letter"))?;
            match item.filter(|i| i.state == JobState::Discarded) {
                Some(item) => letters.push(DeadLetter {
                    id,
                    payload: item.payload,
                    attempt: item.attempt,
                    last_error: item.last_error,
                }),
                None => {
                    if let Err(error) = self.drop_stale_dead(&id).await {
                        warn!(%id, %error, "stale dead-letter record stays");
                    }
                }
            }
        }
        Ok(letters)
    }

    /// Deletes `id`'s dead-letter record, its item being no dead letter, then reads the item
    /// (SERIAL): one discarded in between gets its record back, so a discard is never left
    /// without one by this delete.
    async fn drop_stale_dead(&self, id: &ItemId) -> Result<(), QueueError> {
        info!(queue = %self.name(), %id, "stale dead-letter record deleted");
        self.store
            .delete_dead(self.name(), id, clock::next_micros())
            .await
            .map_err(store_error("remove dead letter"))?;
        let now = self
            .store
            .read(&self.key(id.clone()))
            .await
            .map_err(store_error("read"))?;
        if now.is_some_and(|i| i.state == JobState::Discarded) {
            self.put_dead(id).await?;
        }
        Ok(())
    }

    /// Puts a dead letter back in the queue, available now; its attempt count (and so its
    /// tokens) continue from where they were. Returns `false` if it was not a dead letter
    /// (a record left of it is deleted; so a call repeated after an error whose requeue had
    /// applied returns `false` and leaves no record behind). In the bakery claim mode it does
    /// not exclude a racing [`Self::purge_dead`] of the same dead letter: both may answer
    /// `true`, and the later write wins (see the README).
    ///
    /// # Errors
    ///
    /// [`QueueError::OutcomeUnknown`] when a lost answer could not be settled by reading
    /// back (SERIAL) within `resolve_timeout` (the item is then findable either way);
    /// [`QueueError::Store`] when the store fails.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the item is a dead letter or requeued, and findable either way.
    #[instrument(skip(self), fields(queue = %self.name()))]
    pub async fn requeue_dead(&self, id: &ItemId) -> Result<bool, QueueError> {
        // Index upkeep may raise a dead letter's attempt number while this requeue is
        // conditioned on the old one (it seals the row against a requeue given up long
        // ago): the row reads discarded still, so the requeue is tried again.
        unless_sealed("requeue", || self.requeue_once(id)).await
    }

    /// One try of [`Self::requeue_dead`]; `None` when its condition was overtaken by a seal.
    async fn requeue_once(&self, id: &ItemId) -> Result<Option<bool>, QueueError> {
        let key = self.key(id.clone());
        let item = self.store.read(&key).await.map_err(store_error("read"))?;
        let Some(item) = item.filter(|i| i.state == JobState::Discarded) else {
            self.drop_stale_dead(id).await?;
            return Ok(Some(false));
        };
        let (attempt, origin, requeued_at) = (item.attempt, item.origin, item.requeued_at);
        let now = self.now();
        let run = self.entry(id, now, EntryKind::Run, true, attempt);
        // Landed in time for its position before the requeue (see `placement`).
        let (run, placed_from) = self.place_in_time(run).await?;
        let store = &self.store;
        // Applied (by this call or a concurrent requeue) iff requeued at this attempt or
        // later: a discarded row was claimed since its last requeue, so its `requeued_at`
        // is lower, and only a requeue (or a revival, which changes the origin) raises it.
        // A later one means the row left this dead letter through a requeue, perhaps ours
        // (its answer lost) and then run and requeued again by others.
        let outcome = self
            .settle(
                "requeue",
                &key,
                |current| match current {
                    Some(c) if c.state == JobState::Discarded && c.attempt == attempt => None,
                    Some(c) => Some(c.origin == origin && c.requeued_at >= attempt),
                    None => Some(false),
                },
                || store.requeue(&key, crate::store::AT_ONCE, attempt),
            )
            .await;
        match outcome {
            Ok(true) => {}
            Ok(false) => {
                self.remove(&run).await;
                let now = self.store.read(&key).await.map_err(store_error("read"))?;
                if now.is_some_and(|c| sealed_since(&c, attempt, &origin, requeued_at)) {
                    return Ok(None);
                }
                return Ok(Some(false));
            }
            // Unsettled: the run entry stays, so the item is findable either way.
            Err(error @ QueueError::OutcomeUnknown { .. }) => return Err(error),
            Err(error) => {
                self.remove(&run).await;
                return Err(error);
            }
        }
        self.store
            .delete_dead(self.name(), id, clock::next_micros())
            .await
            .map_err(store_error("remove dead letter"))?;
        self.keep_ahead_of_cursor(run, placed_from).await?;
        info!(%id, "dead letter requeued");
        Ok(Some(true))
    }

    /// Deletes a dead letter for good (the row stays as a done marker). Returns `false` if
    /// it was not a dead letter (a record left of it is deleted). In the bakery claim mode a
    /// racing [`Self::requeue_dead`] may answer `true` as well (see there).
    ///
    /// # Errors
    ///
    /// [`QueueError::OutcomeUnknown`] when a lost answer could not be settled by reading
    /// back (SERIAL) within `resolve_timeout`; [`QueueError::Store`] when the store fails.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the item is a dead letter or purged.
    #[instrument(skip(self), fields(queue = %self.name()))]
    pub async fn purge_dead(&self, id: &ItemId) -> Result<bool, QueueError> {
        // As for a requeue: a seal may raise the attempt number the purge is conditioned on.
        unless_sealed("purge", || self.purge_once(id)).await
    }

    /// One try of [`Self::purge_dead`]; `None` when its condition was overtaken by a seal.
    async fn purge_once(&self, id: &ItemId) -> Result<Option<bool>, QueueError> {
        let key = self.key(id.clone());
        let item = self.store.read(&key).await.map_err(store_error("read"))?;
        let Some(item) = item.filter(|i| i.state == JobState::Discarded) else {
            self.drop_stale_dead(id).await?;
            return Ok(Some(false));
        };
        let (attempt, origin, requeued_at) = (item.attempt, item.origin, item.requeued_at);
        let retention = self.config.done_retention;
        let store = &self.store;
        // Only a purge makes a dead letter done without a claim, keeping its origin (a
        // revival changes it) and its `requeued_at` (a requeue raises it); index upkeep may
        // have raised its attempt number since.
        let purged = self
            .settle(
                "purge",
                &key,
                |current| match current {
                    Some(c) if c.state == JobState::Discarded && c.attempt == attempt => None,
                    Some(c) => Some(
                        c.state == JobState::Done
                            && c.origin == origin
                            && c.attempt >= attempt
                            && c.requeued_at == requeued_at,
                    ),
                    None => Some(false),
                },
                || store.purge(&key, retention, attempt),
            )
            .await?;
        if !purged {
            let now = self.store.read(&key).await.map_err(store_error("read"))?;
            if now.is_some_and(|c| sealed_since(&c, attempt, &origin, requeued_at)) {
                return Ok(None);
            }
        }
        // Purged, or no dead letter any more either way: its record goes.
        self.drop_stale_dead(id).await?;
        if purged {
            info!(%id, "dead letter purged");
        }
        Ok(Some(purged))
    }

    /// Sends the LWT `send` until its outcome is settled: `Applied` is `true`; `NotApplied`
    /// before any lost answer is `false`; otherwise the row is read back (SERIAL) and
    /// `applied` says `Some(outcome)`, or `None` when the LWT must be sent again (the row
    /// still reads as before it).
    async fn settle<F, Fut>(
        &self,
        operation: &'static str,
        key: &ItemKey,
        applied: impl Fn(Option<StoredItem>) -> Option<bool>,
        send: F,
    ) -> Result<bool, QueueError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<CasOutcome, StoreError>>,
    {
        let timing = HoldTiming::from(&self.config.timing);
        let lost = AtomicBool::new(false);
        let store = &self.store;
        let result = until_resolved_tracked(&timing, operation, &lost, || async {
            let error = match send().await {
                Ok(CasOutcome::Applied) => return Ok(Some(true)),
                Ok(CasOutcome::NotApplied) if !lost.load(Ordering::Relaxed) => {
                    return Ok(Some(false));
                }
                Ok(CasOutcome::NotApplied) => {
                    StoreError::Unknown("not applied after an earlier lost answer".into())
                }
                Err(error @ StoreError::Rejected(_)) => return Err(error),
                Err(error) => error,
            };
            if error.is_unknown() {
                lost.store(true, Ordering::Relaxed);
            }
            warn!(id = %key.id, %error, operation, "answer lost; reading back");
            // A failed read-back leaves the write's own error standing.
            let Ok(current) = store.read(key).await else {
                return Err(error);
            };
            match applied(current) {
                Some(outcome) => Ok(Some(outcome)),
                None => Err(error),
            }
        })
        .await;
        match result {
            Ok(outcome) => Ok(outcome),
            Err(source @ StoreError::Unknown(_)) => Err(QueueError::OutcomeUnknown {
                operation,
                id: key.id.clone(),
                source,
            }),
            Err(source) => Err(QueueError::Store { operation, source }),
        }
    }
}

/// Runs `once` (a requeue or purge try; `None`: overtaken by a seal) again while a seal
/// overtakes it, at most three times: each seal needs an entry older than any enqueue's
/// window naming the current attempt, so a fourth in a row means something else is wrong.
async fn unless_sealed<F, Fut>(operation: &'static str, once: F) -> Result<bool, QueueError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Option<bool>, QueueError>>,
{
    for _ in 0..3 {
        if let Some(done) = once().await? {
            return Ok(done);
        }
    }
    Err(QueueError::Store {
        operation,
        source: cql_lease::StoreError::Unavailable(
            "the dead letter's attempt number kept changing".into(),
        ),
    })
}

/// Whether `current` is the dead letter read (at `attempt`, `origin`, `requeued_at`) with
/// only its attempt number raised: only a seal does that (a requeue, then a claim, would
/// have moved `requeued_at`).
fn sealed_since(current: &StoredItem, attempt: i32, origin: &str, requeued_at: i32) -> bool {
    current.state == JobState::Discarded
        && current.attempt > attempt
        && current.origin == origin
        && current.requeued_at == requeued_at
}
