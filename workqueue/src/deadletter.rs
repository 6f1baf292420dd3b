//! Dead letters: discarded items, listed, requeued or purged.

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
    /// Claims it had.
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
    /// [`QueueError::Store`] when the store fails; [`QueueError::OutcomeUnknown`] when the
    /// requeue's answer was lost and the read-back failed too (the item may be requeued:
    /// call it again, which answers `false` if it was).
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
        let sent = self
            .store
            .requeue(&key, crate::store::AT_ONCE, item.attempt)
            .await;
        // Applied, its row says the item was requeued from this very attempt.
        let outcome = self
            .settle("requeue", &key, sent, |c| c.requeued_at == item.attempt)
            .await?;
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
    /// [`QueueError::Store`] when the store fails; [`QueueError::OutcomeUnknown`] when the
    /// purge's answer was lost and the read-back failed too. A lost answer whose read-back
    /// finds the item done counts as purged (a done item is no dead letter either way).
    ///
    /// # Cancel safety
    ///
    /// Dropped midway, the item is a dead letter or purged.
    #[instrument(skip(self), fields(queue = %self.name()))]
    pub async fn purge_dead(&self, id: &ItemId) -> Result<bool, QueueError> {
        let key = self.key(id.clone());
        let sent = self.store.purge(&key, self.config.done_retention).await;
        // Only a discarded item can be purged, and nothing makes a done item discarded again.
        let outcome = self
            .settle("purge", &key, sent, |c| c.state == JobState::Done)
            .await?;
        if outcome == CasOutcome::Applied {
            self.store
                .delete_dead(self.name(), id, clock::next_micros())
                .await
                .map_err(store_error("remove dead letter"))?;
            info!(%id, "dead letter purged");
        }
        Ok(outcome == CasOutcome::Applied)
    }

    /// Settles a dead-letter LWT whose answer may be lost (cut by the request timeout, or
    /// any error after it was sent) by one SERIAL read-back: `applied` tells from the row
    /// whether it took effect. Without this the caller got a store error for a change that
    /// may have applied, and asking again found no dead letter to act on.
    async fn settle(
        &self,
        operation: &'static str,
        key: &ItemKey,
        sent: Result<CasOutcome, StoreError>,
        applied: impl Fn(&StoredItem) -> bool,
    ) -> Result<CasOutcome, QueueError> {
        let source = match sent {
            Ok(outcome) => return Ok(outcome),
            Err(source) if source.is_unknown() => source,
            Err(source) => return Err(QueueError::Store { operation, source }),
        };
        warn!(id = %key.id, %source, operation, "answer lost; reading back");
        match self.store.read(key).await {
            Ok(Some(current)) if applied(&current) => Ok(CasOutcome::Applied),
            Ok(_) => Ok(CasOutcome::NotApplied),
            Err(_) => Err(QueueError::OutcomeUnknown {
                operation,
                id: key.id.clone(),
                source,
            }),
        }
    }
}
