//! One claim: take a candidate from the dispatcher and act on its index entry.
//!
//! A `run` entry is claimed with one LWT conditioned on the attempt number it carries. A
//! `check` entry (placed at a claim's expiry when the item was claimed) is looked at with a
//! plain read: still held, it is pushed forward to the claim's new expiry; lapsed, the item
//! is claimed again with a higher attempt number; finished, the entry is dropped. Every
//! change of entries places the new one before removing the old, so an item that is not
//! done always has at least one entry.

use std::sync::Arc;

use cql_lease::StoreError;
use cql_lease::hold::{AttemptGuard, HoldTiming, until_resolved};
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use crate::claim::{ClaimTarget, HandBack};
use crate::config::micros;
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, JobState, StoredItem};
use crate::job::Job;
use crate::queue::WorkQueue;
use crate::store::{ClaimOutcome, ItemClaim};

impl WorkQueue {
    /// Claims an eligible item for `worker`, or returns `None` when there is nothing to do
    /// now. Usually one LWT, amortized under one index read per claim.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] for a bad worker id; [`QueueError::Store`] when the
    /// store fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: if the future is dropped after a claim was sent and before its [`Job`]
    /// is returned, the claim is undone in a spawned task (conditional on its unique id),
    /// restoring the attempt number, so no attempt is spent.
    pub async fn claim(&self, worker: &str) -> Result<Option<Job>, QueueError> {
        // Delivered with no await in between: dropped earlier, the claim is undone.
        Ok(self.claim_undelivered(worker).await?.map(Job::deliver))
    }

    /// [`WorkQueue::claim`], the job not handed out yet: lost or dropped before
    /// [`Job::deliver`], its claim is undone and spends no attempt.
    #[instrument(skip(self), fields(queue = %self.name()))]
    pub(crate) async fn claim_undelivered(&self, worker: &str) -> Result<Option<Job>, QueueError> {
        cql_lease::check_text("worker", worker, cql_lease::MAX_OWNER_LEN)?;
        // Each candidate costs at most one LWT; stop after a buffer's worth.
        for _ in 0..self.config.scan_limit.saturating_mul(2) {
            let Some(entry) = self.next_candidate().await? else {
                return Ok(None);
            };
            let result = self.try_entry(worker, &entry).await;
            let contended = matches!(result, Ok((None, true)));
            self.candidate_done(&entry, contended).await;
            if let (Some(job), _) = result? {
                return Ok(Some(job));
            }
        }
        Ok(None)
    }

    async fn try_entry(
        &self,
        worker: &str,
        entry: &IndexEntry,
    ) -> Result<(Option<Job>, bool), QueueError> {
        let entry = entry.clone();
        let seen_attempt = match entry.kind {
            EntryKind::Run => entry.attempt,
            EntryKind::Check => {
                let Some(item) = self.peek(&entry).await? else {
                    self.drop_orphan(&entry).await;
                    return Ok((None, false));
                };
                if !self.due(&entry, &item).await? {
                    return Ok((None, false));
                }
                item.attempt
            }
        };
        let key = self.key(entry.id.clone());
        let claim_id = format!("{worker}/{}", uuid::Uuid::new_v4().simple());
        let claim = ItemClaim {
            key: &key,
            claim_id: &claim_id,
            seen_attempt,
            ttl: self.config.claim.store_ttl(),
        };
        let timing = HoldTiming::from(&self.config.claim);
        // Armed until the claim is handed over or known not to exist: if this future is
        // dropped or fails in between, the claim is undone (attempt number restored).
        let mut guard = AttemptGuard::new(
            Arc::new(ClaimTarget {
                store: Arc::clone(&self.store),
                key: key.clone(),
                claim_id: claim_id.clone(),
                ttl: claim.ttl,
                hand_back: HandBack::Undelivered {
                    state: JobState::Available,
                    attempt: seen_attempt,
                },
                index: None,
            }),
            timing,
        );
        // Sent from its own task (see `AttemptGuard::send`): a drop of this future undoes the
        // claim only after the LWT has been answered, never before it lands.
        let request = {
            let store = Arc::clone(&self.store);
            let (key, claim_id, ttl) = (key.clone(), claim_id.clone(), claim.ttl);
            async move {
                let claim = ItemClaim {
                    key: &key,
                    claim_id: &claim_id,
                    seen_attempt,
                    ttl,
                };
                store.claim(claim).await
            }
        };
        let sent_at = Instant::now();
        let claimed = match guard.send(request).await {
            Ok(ClaimOutcome::Claimed) => true,
            Ok(ClaimOutcome::Lost) => false,
            Err(error) if error.is_unknown() => {
                warn!(id = %key.id, %error, "claim answer lost; reading back");
                let read_back = until_resolved(&timing, "claim read-back", || async {
                    self.store.read(&key).await.map(Some)
                })
                .await;
                match read_back {
                    Ok(current) => current.is_some_and(|c| c.claim.as_deref() == Some(&claim_id)),
                    // It may hold: the armed guard undoes it if it does.
                    Err(source) => {
                        return Err(QueueError::OutcomeUnknown {
                            operation: "claim",
                            id: key.id.clone(),
                            source,
                        });
                    }
                }
            }
            Err(source) => {
                guard.disarm();
                return Err(QueueError::Store {
                    operation: "claim",
                    source,
                });
            }
        };
        debug!(id = %key.id, claimed, "claim");
        if !claimed {
            guard.disarm();
            let contended = entry.kind == EntryKind::Run;
            if contended {
                self.after_lost_claim(&entry).await?;
            }
            return Ok((None, contended));
        }
        let late = || Instant::now() >= sent_at + self.config.claim.validity();
        if late() {
            // Answered after its deadline: nobody may work on it. The guard undoes it, and
            // the entry it was found by stays.
            warn!(id = %key.id, "claim answered after its deadline; undoing it");
            return Ok((None, false));
        }
        // The claim's check entry replaces the entry it was found by, so the item stays
        // findable after the claim lapses. On failure the guard undoes the claim and the
        // old entry stays.
        let check = self.check_entry(&key.id, seen_attempt + 1);
        self.replace(&entry, &check).await?;
        let item = match self.store.peek(&key).await {
            Ok(Some(item)) => item,
            result => {
                let source = result
                    .err()
                    .unwrap_or_else(|| StoreError::Unavailable("claimed item unreadable".into()));
                return Err(QueueError::Store {
                    operation: "read claimed item",
                    source,
                });
            }
        };
        if late() {
            // Too late by now: the guard undoes it; the check entry brings the item back.
            warn!(id = %key.id, "claim answered after its deadline; undoing it");
            return Ok((None, false));
        }
        guard.disarm();
        let job = Job::start(
            self.clone(),
            item,
            seen_attempt + 1,
            claim_id,
            sent_at,
            check,
        );
        if job.attempts_used() > self.config.max_attempts {
            // Its last worker died mid-attempt: no attempts left.
            let _ = job
                .discard("attempts exhausted: the last worker stopped heartbeating")
                .await;
            return Ok((None, false));
        }
        Ok((Some(job), false))
    }

    async fn peek(&self, entry: &IndexEntry) -> Result<Option<StoredItem>, QueueError> {
        self.store
            .peek(&self.key(entry.id.clone()))
            .await
            .map_err(|source| QueueError::Store {
                operation: "read item",
                source,
            })
    }

    /// Whether the item behind a due check entry may be claimed now; otherwise the entry is
    /// moved to where the item next needs looking at.
    async fn due(&self, entry: &IndexEntry, item: &StoredItem) -> Result<bool, QueueError> {
        match item.state {
            JobState::Done => {
                self.remove(entry).await;
                Ok(false)
            }
            JobState::Discarded => {
                self.dead_letter(entry).await?;
                Ok(false)
            }
            _ if item.claim.is_some() => {
                // Still held: look again when this claim could have lapsed.
                let later = self.check_entry(&item.key.id, item.attempt);
                self.replace(entry, &later).await?;
                Ok(false)
            }
            _ if item.run_at > self.now() && item.state == JobState::Retryable => {
                let run = self.entry(
                    &item.key.id,
                    item.run_at,
                    EntryKind::Run,
                    false,
                    item.attempt,
                );
                self.replace(entry, &run).await?;
                Ok(false)
            }
            _ => Ok(true),
        }
    }

    /// A run entry whose claim was refused: someone else has the item, or it moved on. If it
    /// moved on, a check entry replaces this one (its holder may have died before placing
    /// its own), and a finished item's entry goes.
    async fn after_lost_claim(&self, entry: &IndexEntry) -> Result<(), QueueError> {
        let Some(item) = self.peek(entry).await? else {
            self.drop_orphan(entry).await;
            return Ok(());
        };
        match item.state {
            JobState::Done => self.remove(entry).await,
            JobState::Discarded => self.dead_letter(entry).await?,
            _ if item.attempt > entry.attempt => {
                let check = self.check_entry(&item.key.id, item.attempt);
                self.replace(entry, &check).await?;
            }
            _ => {}
        }
        Ok(())
    }

    /// An entry whose item does not exist: an enqueue may still be writing it, so only an
    /// entry older than any enqueue's resolve time goes.
    async fn drop_orphan(&self, entry: &IndexEntry) {
        let window = micros(self.config.claim.resolve_timeout) + micros(self.config.cursor_lag());
        if entry.pos < self.now() - window {
            info!(id = %entry.id, "orphan index entry removed");
            self.remove(entry).await;
        }
    }

    /// Moves a discarded item's entry to the dead letters.
    pub(crate) async fn dead_letter(&self, entry: &IndexEntry) -> Result<(), QueueError> {
        self.put_dead(&entry.id).await?;
        self.remove(entry).await;
        Ok(())
    }
}
