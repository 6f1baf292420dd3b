//! Dead letters (discarded items: list, requeue, purge) and queue statistics.

use std::time::Duration;

use cql_lease::{CasOutcome, StoreError};
use tracing::{info, instrument};

use crate::clock;
use crate::error::QueueError;
use crate::item::{EntryKind, ItemId, JobState};
use crate::queue::WorkQueue;

/// A discarded item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The item.
    pub id: ItemId,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Claims it had.
    pub attempt: i32,
    /// Why it was discarded.
    pub last_error: Option<String>,
}

/// A snapshot of a queue, from the index (cursor to one bucket ahead) and the dead letters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Items a worker may claim now.
    pub available: u64,
    /// Items waiting for their `run_at` (delayed or retrying), within the next bucket.
    pub scheduled: u64,
    /// Items claimed, or whose lapsed claim is due for a look.
    pub running: u64,
    /// Dead letters.
    pub dead: u64,
    /// How long the oldest available item has waited (by its enqueuer's clock).
    pub oldest_available_age: Option<Duration>,
}

fn store_error(operation: &'static str) -> impl Fn(StoreError) -> QueueError {
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

    /// Every dead letter with its payload and last error.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when a read fails.
    ///
    /// # Cancel safety
    ///
    /// Reads only: safe to drop.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        let mut letters = Vec::new();
        for id in self.dead_letter_ids().await? {
            let item = self
                .store
                .peek(&self.key(id.clone()))
                .await
                .map_err(store_error("read dead letter"))?;
            if let Some(item) = item.filter(|i| i.state == JobState::Discarded) {
                letters.push(DeadLetter {
                    id,
                    payload: item.payload,
                    attempt: item.attempt,
                    last_error: item.last_error,
                });
            }
        }
        Ok(letters)
    }

    /// Puts a dead letter back in the queue, available now; its attempt count (and so its
    /// tokens) continue from where they were. Returns `false` if it was not a dead letter.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when the store fails.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the item is a dead letter or requeued, and findable either way.
    #[instrument(skip(self), fields(queue = %self.name()))]
    pub async fn requeue_dead(&self, id: &ItemId) -> Result<bool, QueueError> {
        let key = self.key(id.clone());
        let Some(item) = self.store.read(&key).await.map_err(store_error("read"))? else {
            return Ok(false);
        };
        let now = self.now();
        let run = self.entry(id, now, EntryKind::Run, true, item.attempt);
        let placed_from = tokio::time::Instant::now();
        self.place(&run).await?;
        let outcome = self
            .store
            .requeue(&key, now, item.attempt)
            .await
            .map_err(store_error("requeue"))?;
        if outcome == CasOutcome::NotApplied {
            self.remove(&run).await;
            return Ok(false);
        }
        self.store
            .delete_dead(self.name(), id, clock::next_micros())
            .await
            .map_err(store_error("remove dead letter"))?;
        self.keep_ahead_of_cursor(run, placed_from).await?;
        info!(%id, "dead letter requeued");
        Ok(true)
    }

    /// Deletes a dead letter for good (the row stays as a done marker). Returns `false` if
    /// it was not a dead letter.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when the store fails.
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the item is a dead letter or purged.
    #[instrument(skip(self), fields(queue = %self.name()))]
    pub async fn purge_dead(&self, id: &ItemId) -> Result<bool, QueueError> {
        let key = self.key(id.clone());
        let outcome = self
            .store
            .purge(&key, self.config.done_retention)
            .await
            .map_err(store_error("purge"))?;
        if outcome == CasOutcome::Applied {
            self.store
                .delete_dead(self.name(), id, clock::next_micros())
                .await
                .map_err(store_error("remove dead letter"))?;
            info!(%id, "dead letter purged");
        }
        Ok(outcome == CasOutcome::Applied)
    }

    /// Items by state and the oldest available item's age. Costs one cursor read, index
    /// reads of the live entries from the cursor to one bucket ahead, and the dead-letter
    /// list: no item reads, no LWTs.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when a read fails.
    ///
    /// # Cancel safety
    ///
    /// Reads only: safe to drop.
    pub async fn stats(&self) -> Result<QueueStats, QueueError> {
        let now = self.now();
        let entries = self.live_entries(now + self.config.bucket_micros()).await?;
        let mut stats = QueueStats {
            dead: self.dead_letter_ids().await?.len() as u64,
            ..QueueStats::default()
        };
        let mut oldest: Option<i64> = None;
        for entry in entries {
            match entry.kind {
                EntryKind::Check => stats.running += 1,
                EntryKind::Run if entry.immediate || entry.pos <= now => {
                    stats.available += 1;
                    oldest = Some(oldest.map_or(entry.pos, |o| o.min(entry.pos)));
                }
                EntryKind::Run => stats.scheduled += 1,
            }
        }
        stats.oldest_available_age = oldest
            .map(|pos| Duration::from_micros(u64::try_from(now.saturating_sub(pos)).unwrap_or(0)));
        Ok(stats)
    }
}
