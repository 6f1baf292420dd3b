//! A claimed item: its heartbeat (the shared hold machine), its stop signals, and how it
//! ends.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::hold::{Hold, HoldTiming};
use std::sync::atomic::AtomicU8;

use cql_lease::FencingToken;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument};

use crate::claim::{ClaimTarget, HandBack};
use crate::error::QueueError;
use crate::item::{IndexEntry, ItemId, ItemKey, JobState, StoredItem};
use crate::queue::WorkQueue;
use crate::store::Reschedule;
use crate::worker::InFlight;

mod finish;
mod parked;

use parked::JobClaim;

/// One claimed work item, kept claimed by a background heartbeat (a [`Hold`]).
///
/// Work on it while [`Job::cancellation_token`] is not cancelled: the heartbeat cancels it if
/// the claim is lost, and at the claim's local deadline at the latest, which is before the
/// store can let another worker claim the item. Downstream writes can be fenced with
/// [`Job::token`], which grows with every claim of the same item.
///
/// End it with [`Job::complete`], [`Job::fail`] or [`Job::discard`]; each cancels the token
/// and turns `held` false first, whatever its outcome. Dropping it unfinished does the same
/// and hands the item back (best effort, in a spawned task); the attempt still counts, so
/// the next claim's token is higher.
pub struct Job {
    queue: WorkQueue,
    item: StoredItem,
    claim: Arc<ClaimTarget>,
    hold: Hold,
    check: IndexEntry,
    pub(crate) in_flight: Option<InFlight>,
    /// What the heartbeat keeps: knows whether the job was handed out.
    target: Arc<JobClaim>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.item.key.id)
            .field("attempt", &self.item.attempt)
            .finish_non_exhaustive()
    }
}

impl Job {
    /// Starts the heartbeat of a claim sent at `sent_at` that took attempt number `attempt`
    /// and placed the check entry `check`. The caller checked that its deadline has not
    /// passed (a hold past its deadline would start lost anyway). The job starts undelivered
    /// (lost, it is undone and spends no attempt) until [`Job::deliver`] hands it out.
    pub(crate) fn start(
        queue: WorkQueue,
        mut item: StoredItem,
        attempt: i32,
        claim_id: String,
        sent_at: Instant,
        check: IndexEntry,
    ) -> Job {
        item.attempt = attempt;
        item.state = JobState::Running;
        item.claim = Some(claim_id.clone());
        let claim = Arc::new(ClaimTarget {
            store: Arc::clone(&queue.store),
            key: item.key.clone(),
            claim_id,
            ttl: queue.config.timing.store_ttl(),
            hand_back: HandBack::Delivered,
            index: Some((queue.clone(), check.clone())),
            orphans: Arc::clone(&queue.dispatcher.orphans),
        });
        let target = Arc::new(JobClaim {
            delivered: Arc::clone(&claim),
            undelivered: ClaimTarget {
                store: Arc::clone(&queue.store),
                key: item.key.clone(),
                claim_id: claim.claim_id.clone(),
                ttl: claim.ttl,
                hand_back: HandBack::Undelivered {
                    state: JobState::Available,
                    attempt: attempt - 1,
                },
                index: None,
                orphans: Arc::clone(&claim.orphans),
            },
            delivery: AtomicU8::new(parked::UNDELIVERED),
        });
        let timing = HoldTiming::from(&queue.config.timing);
        let hold = Hold::start(target.clone(), timing, sent_at, None);
        info!(id = %item.key.id, attempt = item.attempt, "job claimed");
        queue.count(cql_lease::metrics::CLAIMED);
        Job {
            queue,
            item,
            claim,
            hold,
            check,
            in_flight: None,
            target,
        }
    }

    /// The item's id.
    pub fn id(&self) -> &ItemId {
        &self.item.key.id
    }

    /// Where the item lives.
    pub fn key(&self) -> &ItemKey {
        &self.item.key
    }

    /// The payload as text (empty if it is not UTF-8: use [`Job::payload_bytes`]).
    pub fn payload(&self) -> &str {
        std::str::from_utf8(&self.item.payload).unwrap_or("")
    }

    /// The payload as given to `enqueue`.
    pub fn payload_bytes(&self) -> &[u8] {
        &self.item.payload
    }

    /// The payload decoded from JSON.
    ///
    /// # Errors
    ///
    /// [`QueueError::Payload`] when it is not JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, QueueError> {
        serde_json::from_slice(&self.item.payload).map_err(|e| QueueError::Payload(e.to_string()))
    }

    /// This claim's number: 1 for the first claim of the item, then one more per claim.
    pub fn attempt(&self) -> i32 {
        self.item.attempt
    }

    /// Claims since the item was enqueued or last requeued from the dead letters.
    pub fn attempts_used(&self) -> i32 {
        self.item.attempts_used()
    }

    /// The claim's fencing token: [`Job::attempt`], which only grows for an item.
    pub fn token(&self) -> FencingToken {
        FencingToken::new(i64::from(self.item.attempt))
    }

    /// The previous attempt's failure, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.item.last_error.as_deref()
    }

    /// Cancelled when the worker must stop working on this job.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.hold.cancellation_token()
    }

    /// `true` while the claim holds; `false` from the moment the worker must stop.
    pub fn held(&self) -> watch::Receiver<bool> {
        self.hold.held()
    }

    /// Whether the claim still holds.
    pub fn is_held(&self) -> bool {
        self.hold.is_held()
    }

    /// The local instant by which work must stop unless the next heartbeat succeeds.
    pub fn must_stop_by(&self) -> Instant {
        self.hold.must_stop_by()
    }

    /// A watch of [`Job::must_stop_by`], for a typed job's view of the claim.
    pub(crate) fn deadline(&self) -> watch::Receiver<Instant> {
        self.hold.deadline()
    }

    /// When the worker was told to stop, if it was.
    pub fn lost_at(&self) -> Option<Instant> {
        self.hold.lost_at()
    }

    /// The item is done: marks it done (a short-lived marker; the row and its attempt number
    /// stay, so a resent enqueue cannot bring it back), if this claim still holds it, then
    /// removes its index entry. One LWT, one plain delete.
    ///
    /// # Errors
    /// [`QueueError::ClaimLost`] when the claim had lapsed or was taken over;
    /// [`QueueError::OutcomeUnknown`] when a lost answer could not be settled within
    /// `resolve_timeout` (the item is then handed back if the write did not apply);
    /// [`QueueError::Store`] on a definite failure (the item is handed back).
    ///
    /// # Cancel safety
    /// Cancel-safe: the token is cancelled before the first await, and if the future is
    /// dropped before the outcome is settled, the item is handed back in a spawned task
    /// (a no-op if the write applied).
    #[instrument(skip(self), fields(id = %self.item.key.id, attempt = self.item.attempt))]
    pub async fn complete(self) -> Result<(), QueueError> {
        self.finish(None).await
    }

    /// This attempt failed: the item is retried after the back-off for its attempt number, or
    /// discarded when it has had `max_attempts` claims. Returns which. One LWT.
    ///
    /// # Errors
    /// [`QueueError::ClaimLost`] when the claim had lapsed or was taken over. Known limit:
    /// when the answer to a retry (not a discard) is lost and another worker claims the item
    /// before the read-back, the read-back cannot tell a reschedule that applied from a claim
    /// that lapsed (both leave the item claimed by the other worker with a higher attempt),
    /// so this reports `ClaimLost` although the retry may have been recorded; either way the
    /// attempt counts and the other worker has the item;
    /// [`QueueError::OutcomeUnknown`] when a lost answer could not be settled within
    /// `resolve_timeout` (the item is then handed back if the write did not apply);
    /// [`QueueError::Store`] on a definite failure (the item is handed back).
    ///
    /// # Cancel safety
    /// Cancel-safe: the token is cancelled before the first await, and if the future is
    /// dropped before the outcome is settled, the item is handed back in a spawned task
    /// (a no-op if the write applied).
    #[instrument(skip(self), fields(id = %self.item.key.id, attempt = self.item.attempt))]
    pub async fn fail(self, error: &str) -> Result<JobState, QueueError> {
        let config = self.queue.config;
        let to = if self.item.attempts_used() >= config.max_attempts {
            Reschedule {
                state: JobState::Discarded,
                run_at: self.queue.now(),
                error: Some(error),
                requeued_at: None,
            }
        } else {
            // Counted from the job's start: neither a requeue's nor a snooze's attempts.
            let backoff = config.backoff(self.item.attempts_used());
            Reschedule {
                state: JobState::Retryable,
                run_at: self
                    .queue
                    .now()
                    .saturating_add(i64::try_from(backoff.as_micros()).unwrap_or(i64::MAX)),
                error: Some(error),
                requeued_at: None,
            }
        };
        let state = to.state;
        self.finish(Some(to)).await.map(|()| state)
    }

    /// Gives up on the item: it becomes a dead letter with `error`. One LWT.
    ///
    /// # Errors
    /// [`QueueError::ClaimLost`] when the claim had lapsed or was taken over;
    /// [`QueueError::OutcomeUnknown`] when a lost answer could not be settled within
    /// `resolve_timeout` (the item is then handed back if the write did not apply);
    /// [`QueueError::Store`] on a definite failure (the item is handed back).
    ///
    /// # Cancel safety
    /// Cancel-safe: the token is cancelled before the first await, and if the future is
    /// dropped before the outcome is settled, the item is handed back in a spawned task
    /// (a no-op if the write applied).
    #[instrument(skip(self), fields(id = %self.item.key.id, attempt = self.item.attempt))]
    pub async fn discard(self, error: &str) -> Result<(), QueueError> {
        let to = Reschedule {
            state: JobState::Discarded,
            run_at: self.queue.now(),
            error: Some(error),
            requeued_at: None,
        };
        self.finish(Some(to)).await
    }

    /// Puts the job off: it runs again `after` from now, and this claim does not count
    /// against `max_attempts` (River's snooze). Its attempt number, the fencing token, is
    /// still spent: the next claim's is higher. The last error is kept. One LWT.
    ///
    /// # Errors
    /// [`QueueError::InvalidArgument`] for `after` over 20 years, before anything is sent
    /// (the job is dropped, so the item goes back at once and the attempt counts);
    /// otherwise as [`Job::fail`].
    ///
    /// # Cancel safety
    /// As [`Job::fail`].
    #[instrument(skip(self), fields(id = %self.item.key.id, attempt = self.item.attempt))]
    pub async fn snooze(self, after: Duration) -> Result<(), QueueError> {
        if after > cql_lease::MAX_DURATION {
            return Err(cql_lease::InvalidArgument::Timing(format!(
                "a snooze must be at most {:?}, not {after:?}",
                cql_lease::MAX_DURATION
            ))
            .into());
        }
        let last_error = self.item.last_error.clone();
        let to = Reschedule {
            state: JobState::Retryable,
            run_at: self
                .queue
                .now()
                .saturating_add(i64::try_from(after.as_micros()).unwrap_or(i64::MAX)),
            error: last_error.as_deref(),
            requeued_at: Some(self.item.requeued_at.saturating_add(1)),
        };
        self.finish(Some(to)).await
    }

    /// Stops at once without touching the store, as a crash would: the heartbeat stops, the
    /// token is cancelled, and the claim stays until its TTL runs out. For tests and drills.
    pub fn abandon(self) -> Instant {
        self.hold.abandon()
    }
}
