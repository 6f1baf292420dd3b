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

use cql_lease::hold::{AttemptGuard, Claimed, HoldError, HoldTiming, claim_attempt};
use tracing::{debug, info, instrument, warn};

use crate::claim::{ClaimTarget, HandBack};
use crate::config::micros;
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, ItemKey, JobState, StoredItem};
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
            match self.peek(entry).await? {
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
        let ttl = self.config.claim.store_ttl();
        let timing = HoldTiming::from(&self.config.claim);
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
        let guard = AttemptGuard::new(target, timing);
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
            claim_timing.request_timeout = crate::bakery::claim_bound(&self.config.claim);
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
        // The claim's check entry goes in before the entry it was found by goes out, so the
        // item stays findable after the claim lapses. On failure the guard undoes the claim
        // and the old entry stays.
        let check = self.check_entry(&key.id, seen_attempt + 1);
        self.place(&check).await?;
        if tokio::time::Instant::now() >= sent_at + self.config.claim.validity() {
            // Too late by now: the guard undoes it; the check entry brings the item back.
            warn!(id = %key.id, "claim answered after its deadline; undoing it");
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

    /// Whether the item behind a due entry may be claimed now; otherwise the entry is
    /// dropped or moved to where the item next needs looking at (a run entry of an item
    /// another claimer holds is left to that claimer, which replaces it).
    async fn due(&self, entry: &IndexEntry, item: &StoredItem) -> Result<bool, QueueError> {
        match item.state {
            // A recent run entry of a done row may be a unique key's next job whose revival
            // is on its way (its entry goes in first): left alone until older than any
            // enqueue's resolve time, as an entry without a row is.
            JobState::Done
                if entry.kind == EntryKind::Run
                    && entry.pos >= self.now() - self.enqueue_window() =>
            {
                Ok(false)
            }
            JobState::Done => {
                self.remove(entry).await;
                Ok(false)
            }
            // A run entry naming the discarded attempt is a requeue's, placed before its LWT
            // (no other path leaves one): while it may be in flight the entry stays, as a
            // revival's does, else the requeued item would be left without an entry.
            JobState::Discarded
                if entry.kind == EntryKind::Run
                    && entry.attempt == item.attempt
                    && entry.pos >= self.now() - self.enqueue_window() =>
            {
                Ok(false)
            }
            // A requeue's entry older than its window: its LWT may have been given up as of
            // unknown outcome, its Paxos proposal accepted but not committed. A SERIAL read
            // completes such a proposal: the entry goes only if the item stays discarded.
            JobState::Discarded
                if entry.kind == EntryKind::Run && entry.attempt == item.attempt =>
            {
                let current = self.serial_read(&item.key).await?;
                if current
                    .is_some_and(|c| c.state == JobState::Discarded && c.attempt == item.attempt)
                {
                    self.dead_letter(entry).await?;
                }
                Ok(false)
            }
            JobState::Discarded => {
                self.dead_letter(entry).await?;
                Ok(false)
            }
            // An entry left by an earlier job of this row (its removal failed, or its
            // claimer crashed first): the row was revived or requeued since, and its current
            // job has its own entry (attempt `requeued_at` or later), which may lie ahead (a
            // delayed job). Acting on this one would start it early. A check entry names the
            // claim's attempt, a run entry the attempts already used. Not in the bakery
            // mode: it has no revivals, its requeues are available at once, and it moves
            // `requeued_at` when it gives an undone claim's attempt back, which would make
            // the item's own entry look stale and leave it without one.
            _ if self.config.claim_mode == crate::ClaimMode::Lwt
                && (entry.attempt < item.requeued_at
                    || (entry.kind == EntryKind::Check && entry.attempt == item.requeued_at)) =>
            {
                self.remove(entry).await;
                Ok(false)
            }
            _ if item.claim.is_some() => {
                if entry.kind == EntryKind::Check {
                    // Still held: look again when this claim could have lapsed.
                    let later = self.check_entry(&item.key.id, item.attempt);
                    self.replace(entry, &later).await?;
                }
                Ok(false)
            }
            // Not due yet by our clock: a retry's back-off, or a delayed item met through an
            // entry that is not its own (a duplicate enqueue's, placed before its LWT found
            // the row). Immediate items store run_at `AT_ONCE`, so their enqueuer's clock
            // never holds them back.
            _ if item.run_at > self.now() => {
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

    /// An entry whose item does not exist: an enqueue may still be writing it, so only an
    /// entry older than any enqueue's resolve time goes.
    /// The plain read that found no row does not settle it: an enqueue given up as of
    /// unknown outcome may have left a Paxos proposal accepted but not committed, which a
    /// later Paxos round completes. A SERIAL read completes it now, so a row it does not
    /// find cannot appear afterwards.
    async fn drop_orphan(&self, entry: &IndexEntry) {
        if entry.pos >= self.now() - self.enqueue_window() {
            return;
        }
        match self.serial_read(&self.key(entry.id.clone())).await {
            Ok(None) => {
                info!(id = %entry.id, "orphan index entry removed");
                self.remove(entry).await;
            }
            Ok(Some(_)) => info!(id = %entry.id, "index entry's row found by a SERIAL read; kept"),
            Err(error) => warn!(id = %entry.id, %error, "orphan index entry kept for now"),
        }
    }

    /// A linearizable (SERIAL) read of one item.
    async fn serial_read(&self, key: &ItemKey) -> Result<Option<StoredItem>, QueueError> {
        self.store
            .read(key)
            .await
            .map_err(|source| QueueError::Store {
                operation: "read item",
                source,
            })
    }

    /// How long after its position an entry may still be an enqueue's in progress.
    pub(crate) fn enqueue_window(&self) -> i64 {
        micros(self.config.claim.resolve_timeout) + micros(self.config.cursor_lag())
    }

    /// Moves a discarded item's entry to the dead letters.
    pub(crate) async fn dead_letter(&self, entry: &IndexEntry) -> Result<(), QueueError> {
        self.put_dead(&entry.id).await?;
        self.remove(entry).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
