//! A claim on an item as a [`Holdable`]: what the shared hold machine renews and hands back.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::hold::Holdable;
use cql_lease::{CasOutcome, StoreError};
use tracing::warn;

use crate::item::{IndexEntry, ItemKey, JobState};
use crate::orphans::Orphans;
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
    /// This process's abandoned claims: an orphaned claim is remembered there, so a claimer
    /// that finds it holding the item hands it back at once.
    pub orphans: Arc<Orphans>,
}

impl ClaimTarget {
    /// Ends the claim `claim_id` on `key` as `hand_back` says. One LWT, conditional on the
    /// claim id.
    pub(crate) async fn hand_back(
        store: &dyn QueueStore,
        key: &ItemKey,
        claim_id: &str,
        hand_back: HandBack,
    ) -> Result<CasOutcome, StoreError> {
        match hand_back {
            HandBack::Delivered => {
                // Available at once, whatever anyone's clock says: `due` holds back only
                // rows whose run_at is ahead.
                let to = Reschedule {
                    state: JobState::Available,
                    run_at: crate::store::AT_ONCE,
                    error: None,
                    requeued_at: None,
                };
                store.reschedule(key, claim_id, to).await
            }
            HandBack::Undelivered { state, attempt } => {
                store.unclaim(key, claim_id, state, attempt).await
            }
        }
    }
}

impl ClaimTarget {
    /// A delivered claim's index upkeep, by the row its release settled on rather than the
    /// hand-back it meant (the job's own finish may have applied, dropped before its
    /// answer, or an earlier hand-back late): an item free to claim gets a run entry in
    /// the check entry's place, a dead letter its record, and a done item, or one another
    /// claimer holds, only loses the check entry.
    async fn after_hand_back(&self) {
        let Some((queue, check)) = &self.index else {
            return;
        };
        let row = match self.store.read(&self.key).await {
            Ok(row) => row,
            Err(error) => {
                warn!(id = %self.key.id, %error, "row unread after a hand-back; the check entry stays");
                return;
            }
        };
        let reschedule = |state, run_at| Reschedule {
            state,
            run_at,
            error: None,
            requeued_at: None,
        };
        let to = match row {
            Some(item) if item.state == JobState::Discarded => {
                Some(reschedule(JobState::Discarded, item.run_at))
            }
            Some(item) if item.claim.is_some() => None,
            Some(item) if item.state == JobState::Retryable => {
                Some(reschedule(JobState::Retryable, item.run_at))
            }
            // The entry sits at our clock (its order); the row says "at once".
            Some(item) if item.state != JobState::Done => {
                Some(reschedule(JobState::Available, queue.now()))
            }
            _ => None,
        };
        queue.after_finish(check, check.attempt, to).await;
    }
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
        Self::hand_back(
            self.store.as_ref(),
            &self.key,
            &self.claim_id,
            self.hand_back,
        )
        .await
    }

    /// The claim is over, whichever send of the hand-back applied (or however else it
    /// ended): a delivered claim's item gets its index entry put right at once rather than
    /// left to the claim's check entry, due a claim TTL later. An undone claim that was
    /// never delivered: undone before it was handed to its claimer, the entry its item was
    /// found by is still there; undone later (a parked job), `Job::undeliver` places a run
    /// entry, or the check entry finds the item a claim TTL later.
    async fn released(&self) {
        if let HandBack::Delivered = self.hand_back {
            self.after_hand_back().await;
        }
    }

    fn orphaned(&self) {
        self.orphans.insert(&self.claim_id, self.hand_back);
    }
}
