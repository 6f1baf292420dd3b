//! One claim: take a candidate from the dispatcher, look at its item, and claim it.
//!
//! Every candidate's item is read first (a plain read, which also brings the payload the
//! job needs): an item already held by another claimer, finished, or not due is skipped
//! without an LWT, so a process whose buffer went stale (other processes took its items)
//! spends reads, not Paxos rounds. A claimable item is claimed with one LWT conditioned on
//! the attempt number read, through the shared [`claim_attempt`] step (lost answers read
//! back, late answers undone, abandoned claims remembered as orphans). A held item whose
//! claim is one of this process's orphans is handed back at once.
//!
//! Every change of entries places the new one before removing the old, so an item that is
//! not done always has at least one entry; removals run in the background (a failed one
//! leaves a stale entry that the next reader drops).

use std::sync::Arc;

use cql_lease::CasOutcome;
use cql_lease::hold::{AttemptGuard, Claimed, HoldError, HoldTiming, claim_attempt};
use tracing::{debug, info, instrument, warn};

use crate::claim::{ClaimTarget, HandBack};
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, StoredItem};
use crate::job::Job;
use crate::queue::WorkQueue;
use crate::store::{ClaimOutcome, ItemClaim};

/// What one candidate came to.
enum Tried {
    Job(Box<Job>),
    /// Nothing to claim here now.
    Skipped,
    /// Another process has it (by claim `holder`, when known): read so before the LWT, or
    /// the LWT lost.
    Contended {
        holder: Option<String>,
    },
}

/// How many claims [`WorkQueue::claim`] makes when each is lost before it is handed out.
const CLAIM_TRIES: usize = 3;

impl WorkQueue {
    /// Claims an eligible item for `worker`, or returns `None` when there is nothing to do
    /// now. Usually one item read and one LWT, amortized under one index read per claim.
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
        // Delivered with no await in between: dropped earlier, the claim is undone. One
        // handed back by its heartbeat first (lost at once) is undone and claimed afresh.
        for _ in 0..CLAIM_TRIES {
            let Some(job) = self.claim_undelivered(worker).await? else {
                return Ok(None);
            };
            if job.deliver() {
                return Ok(Some(job));
            }
            warn!(id = %job.id(), "claim lost before it was handed out; undoing it");
            job.undeliver();
        }
        Ok(None)
    }

    /// [`WorkQueue::claim`], the job not handed out yet: lost or dropped before
    /// [`Job::deliver`], its claim is undone and spends no attempt.
    #[instrument(skip(self), fields(queue = %self.name()))]
    pub(crate) async fn claim_undelivered(&self, worker: &str) -> Result<Option<Job>, QueueError> {
        cql_lease::check_text("worker", worker, cql_lease::MAX_OWNER_LEN)?;
        let _active = self.dispatcher.active();
        // Each candidate costs at most one LWT; stop after a buffer's worth.
        for tried in 1..=self.config.scan_limit.saturating_mul(2) {
            let Some(entry) = self.next_candidate().await? else {
                return Ok(None);
            };
            let result = self.try_entry(worker, &entry).await;
            match &result {
                // Still a candidate: the next claim looks at it again.
                Err(_) => self.candidate_failed(&entry).await,
                Ok(Tried::Contended { holder }) => {
                    self.candidate_contended(&entry, holder.as_deref()).await;
                }
                Ok(_) => self.candidate_done(&entry),
            }
            if let Tried::Job(job) = result? {
                self.count_claim_attempts(tried as usize);
                return Ok(Some(*job));
            }
        }
        Ok(None)
    }

    async fn try_entry(&self, worker: &str, entry: &IndexEntry) -> Result<Tried, QueueError> {
        let Some(mut item) = self.peek(entry).await? else {
            self.drop_orphan(entry).await;
            return Ok(Tried::Skipped);
        };
        if let Some(holder) = item.claim.clone()
            && let Some(hand_back) = self.dispatcher.orphans.take(&holder)
        {
            // Our own abandoned claim (applied after we gave up on it): give it back now
            // instead of leaving the item to its TTL, then look again.
            let result =
                ClaimTarget::hand_back(self.store.as_ref(), &item.key, &holder, hand_back).await;
            info!(id = %item.key.id, claim = %holder, ?result, "orphaned claim handed back");
            // Forgotten only once it no longer holds the item: a hand-back that failed (or
            // whose re-read failed) is tried again by the next claimer that meets it.
            let again = self.peek(entry).await;
            let still_held = match &again {
                Ok(Some(row)) => row.claim.as_deref() == Some(holder.as_str()),
                Ok(None) => false,
                Err(_) => !matches!(result, Ok(CasOutcome::Applied)),
            };
            if still_held {
                self.dispatcher.orphans.insert(&holder, hand_back);
            }
            match again? {
                Some(again) => item = again,
                None => return Ok(Tried::Skipped),
            }
        }
        if !self.due(entry, &item).await? {
            let foreign = item.claim.filter(|c| !self.dispatcher.is_own_claim(c));
            return Ok(match foreign {
                Some(holder) if entry.kind == EntryKind::Run => Tried::Contended {
                    holder: Some(holder),
                },
                // A check entry's holder: still met (the process is alive).
                Some(holder) => {
                    self.dispatcher.slots.met(&holder);
                    Tried::Skipped
                }
                None => Tried::Skipped,
            });
        }
        self.claim_item(worker, entry, item).await
    }

    /// One claim LWT on `item`, as read through `entry`.
    async fn claim_item(
        &self,
        worker: &str,
        entry: &IndexEntry,
        item: StoredItem,
    ) -> Result<Tried, QueueError> {
        let key = item.key.clone();
        let seen_attempt = item.attempt;
        let claim_id = self.dispatcher.claim_id(worker);
        let ttl = self.config.timing.store_ttl();
        let timing = HoldTiming::from(&self.config.timing);
        // Armed until the claim is handed over or known not to exist: if this future is
        // dropped or fails in between, the claim is undone (state and attempt restored).
        let target = Arc::new(ClaimTarget {
            store: Arc::clone(&self.store),
            key: key.clone(),
            claim_id: claim_id.clone(),
            ttl,
            hand_back: HandBack::Undelivered {
                state: item.state,
                attempt: seen_attempt,
            },
            index: None,
            orphans: Arc::clone(&self.dispatcher.orphans),
        });
        let guard = AttemptGuard::new(
            Arc::clone(&target) as Arc<dyn cql_lease::hold::Holdable>,
            timing,
        );
        self.dispatcher
            .claim_attempts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = {
            let store = Arc::clone(&self.store);
            let (key, claim_id) = (key.clone(), claim_id.clone());
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
        let read_back = || {
            let (store, key, claim_id) = (Arc::clone(&self.store), key.clone(), claim_id.clone());
            async move {
                let current = store.read(&key).await?;
                let mine = current.is_some_and(|c| c.claim.as_deref() == Some(claim_id.as_str()));
                Ok(Some(if mine {
                    ClaimOutcome::Claimed
                } else {
                    ClaimOutcome::Lost
                }))
            }
        };
        let won = |o: &ClaimOutcome| *o == ClaimOutcome::Claimed;
        // A bakery claim is many round trips and waits for choosers: bounded by its own
        // deadline, not by one request's timeout (its read-back steps keep that bound).
        let mut claim_timing = timing;
        if self.store.claim_mode() == crate::ClaimMode::Bakery {
            claim_timing.request_timeout = crate::bakery::claim_bound(&self.config.timing);
        }
        let read_back = || {
            let step = read_back();
            async move { timing.bounded("claim read-back", step).await }
        };
        let claimed = claim_attempt(guard, &claim_timing, request, read_back, won).await;
        let (sent_at, guard) = match claimed {
            Ok(Claimed::Won { sent_at, guard, .. }) => (sent_at, guard),
            Ok(Claimed::NotWon(_)) => {
                debug!(id = %key.id, "claim lost");
                // Who won, so this process leaves that one's share of the slots alone (one
                // read; a lost claim is rare once processes know each other).
                let holder = match self.dispatcher.slots.owns(entry) {
                    true => self.peek(entry).await.ok().flatten().and_then(|i| i.claim),
                    false => None,
                };
                return Ok(Tried::Contended { holder });
            }
            // Answered after its deadline: being undone; the entry it was found by stays.
            Ok(Claimed::Expired(_)) => return Ok(Tried::Skipped),
            Err(HoldError::OutcomeUnknown(source)) => {
                return Err(QueueError::OutcomeUnknown {
                    operation: "claim",
                    id: key.id.clone(),
                    source,
                });
            }
            Err(other) => {
                let source = match other {
                    HoldError::Store(source) => source,
                    other => cql_lease::StoreError::Unavailable(other.to_string()),
                };
                return Err(QueueError::Store {
                    operation: "claim",
                    source,
                });
            }
        };
        debug!(id = %key.id, "claimed");
        // The claim's check entry goes in, in time for its position (see `placement`),
        // before the entry it was found by goes out, so the item stays findable after the
        // claim lapses. Never in one batch with the removal: a batch landing late could
        // put the new entry under a range deletion (`dispatch::compact`) and delete the old
        // one with it. On failure, a drop or a late answer the guard undoes the claim, and
        // the old entry is still there.
        let (check, _) = self
            .place_in_time(self.check_entry(&key.id, seen_attempt + 1))
            .await?;
        if tokio::time::Instant::now() >= sent_at + self.config.timing.renew_deadline() {
            // Too late by now: the guard undoes it; the old entry stays, the check entry
            // goes.
            warn!(id = %key.id, "claim answered after its deadline; undoing it");
            self.remove_later(&check);
            return Ok(Tried::Skipped);
        }
        guard.disarm();
        self.remove_later(entry);
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
            return Ok(Tried::Skipped);
        }
        Ok(Tried::Job(Box::new(job)))
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
}

mod due;
#[cfg(test)]
mod tests;
