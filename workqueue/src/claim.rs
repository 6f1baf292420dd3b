//! A claim on an item as a [`Holdable`]: what the shared hold machine renews and hands back.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::hold::Holdable;
use cql_lease::{CasOutcome, StoreError};

use crate::item::{IndexEntry, ItemKey, JobState};
use crate::queue::WorkQueue;
use crate::store::{QueueStore, Reschedule};

/// How a claim is given back when its holder lets go without finishing.
#[derive(Debug, Clone, Copy)]
pub(crate) enum HandBack {
    /// Delivered to a worker (its token may have fenced writes): the item becomes available
    /// again and keeps its attempt number.
    Delivered,
    /// Never delivered: the claim is undone, state and attempt number restored.
    Undelivered {
        /// The state before the claim.
        state: JobState,
        /// The attempt number before the claim.
        attempt: i32,
    },
}

/// One claim on one item, identified by its unique claim id.
pub(crate) struct ClaimTarget {
    pub store: Arc<dyn QueueStore>,
    pub key: ItemKey,
    pub claim_id: String,
    pub ttl: Duration,
    pub hand_back: HandBack,
    /// The queue and the claim's check entry, for index upkeep after a hand-back.
    pub index: Option<(WorkQueue, IndexEntry)>,
}

#[async_trait]
impl Holdable for ClaimTarget {
    fn describe(&self) -> String {
        format!("claim {} on item {}", self.claim_id, self.key.id)
    }

    async fn renew(&self) -> Result<CasOutcome, StoreError> {
        self.store
            .heartbeat(&self.key, &self.claim_id, self.ttl)
            .await
    }

    async fn still_held(&self) -> Result<bool, StoreError> {
        let current = self.store.read(&self.key).await?;
        Ok(current.is_some_and(|c| c.claim.as_deref() == Some(self.claim_id.as_str())))
    }

    async fn release(&self) -> Result<CasOutcome, StoreError> {
        match self.hand_back {
            HandBack::Delivered => {
                let run_at = self.index.as_ref().map_or(0, |(queue, _)| queue.now());
                let to = Reschedule {
                    state: JobState::Available,
                    run_at,
                    error: None,
                };
                let outcome = self.store.reschedule(&self.key, &self.claim_id, to).await?;
                if let (CasOutcome::Applied, Some((queue, check))) = (&outcome, &self.index) {
                    queue.after_finish(check, check.attempt, Some(to)).await;
                }
                Ok(outcome)
            }
            HandBack::Undelivered { state, attempt } => {
                self.store
                    .unclaim(&self.key, &self.claim_id, state, attempt)
                    .await
            }
        }
    }
}
