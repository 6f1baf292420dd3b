//! A claim on an item as a [`Holdable`]: what the shared hold machine renews and hands back.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::hold::Holdable;
use cql_lease::{CasOutcome, StoreError};

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
    /// An undelivered claim's check entry, set before it may take the place of the entry
    /// the item was found by: an undo that applies turns it back into a run entry at once,
    /// or the item would wait for the check entry (one claim TTL).
    pub moved: std::sync::Mutex<Option<(WorkQueue, IndexEntry)>>,
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
                };
                store.reschedule(key, claim_id, to).await
            }
            HandBack::Undelivered { state, attempt } => {
                store.unclaim(key, claim_id, state, attempt).await
            }
        }
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

    /// The claim is over, whichever send of the hand-back applied: the item gets a run entry
    /// at once in place of the claim's check entry (an extra one does no harm: claims are
    /// conditional on the attempt number), rather than waiting for it. An undone claim
    /// whose check entry took its old entry's place does so even when refused (an earlier
    /// undo applied late, or the claim lapsed): the item may have no other entry.
    async fn released(&self, applied: bool) {
        let (check, attempt) = match self.hand_back {
            HandBack::Delivered if !applied => return,
            HandBack::Delivered => match &self.index {
                Some((queue, check)) => ((queue.clone(), check.clone()), check.attempt),
                None => return,
            },
            HandBack::Undelivered { attempt, .. } => {
                match self.moved.lock().ok().and_then(|mut moved| moved.take()) {
                    Some(moved) => (moved, attempt),
                    None => return,
                }
            }
        };
        let (queue, check) = check;
        // The new entry sits at our clock (its order); the row says "at once".
        let to = Reschedule {
            state: JobState::Available,
            run_at: queue.now(),
            error: None,
        };
        queue.after_finish(&check, attempt, Some(to)).await;
    }

    fn orphaned(&self) {
        self.orphans.insert(&self.claim_id, self.hand_back);
    }
}
