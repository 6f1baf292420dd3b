//! A claimed item: its heartbeat, its stop signals, and how it ends.

use std::sync::{Arc, Mutex};

use cql_lease::{CasOutcome, FencingToken, StoreError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, instrument, warn};

use crate::clock;
use crate::error::QueueError;
use crate::item::{ItemId, ItemKey, JobState, StoredItem};
use crate::queue::WorkQueue;
use crate::store::Reschedule;

/// Told to whoever works on the job when it must stop.
struct Signals {
    held: watch::Sender<bool>,
    deadline: watch::Sender<Instant>,
    stop: CancellationToken,
    lost_at: Mutex<Option<Instant>>,
}

impl Signals {
    fn lose(&self, id: &ItemId, why: &str) -> Instant {
        // Recorded first, so it never postdates what a woken worker does next.
        let at = match self.lost_at.lock() {
            Ok(mut slot) => *slot.get_or_insert_with(Instant::now),
            Err(_) => Instant::now(),
        };
        self.held.send_replace(false);
        self.stop.cancel();
        info!(%id, why, "job must stop");
        at
    }
}

/// One claimed work item, kept claimed by a background heartbeat.
///
/// Work on it while [`Job::cancellation_token`] is not cancelled: the heartbeat cancels it if
/// the claim is lost, and at the claim's local deadline at the latest, which is before the
/// store can let another worker claim the item. Downstream writes can be fenced with
/// [`Job::token`], which grows with every claim of the same item.
///
/// End it with [`Job::complete`], [`Job::fail`] or [`Job::discard`]. Dropping it unfinished
/// hands the item back (best effort, in a spawned task); the attempt still counts.
pub struct Job {
    queue: WorkQueue,
    item: StoredItem,
    claim_id: String,
    signals: Arc<Signals>,
    stop_heartbeat: CancellationToken,
    task: Option<JoinHandle<()>>,
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
    /// Starts the heartbeat of a claim sent at `sent_at`.
    pub(crate) fn start(
        queue: WorkQueue,
        mut item: StoredItem,
        claim_id: String,
        sent_at: Instant,
    ) -> Job {
        item.attempt += 1;
        item.state = JobState::Running;
        item.claim = Some(claim_id.clone());
        let must_stop_by = sent_at + queue.config.claim.validity();
        let signals = Arc::new(Signals {
            held: watch::Sender::new(Instant::now() < must_stop_by),
            deadline: watch::Sender::new(must_stop_by),
            stop: CancellationToken::new(),
            lost_at: Mutex::new(None),
        });
        let stop_heartbeat = CancellationToken::new();
        info!(id = %item.key.id, attempt = item.attempt, "job claimed");
        let task = tokio::spawn(heartbeat(
            queue.clone(),
            item.key.clone(),
            claim_id.clone(),
            Arc::clone(&signals),
            stop_heartbeat.clone(),
        ));
        Job {
            queue,
            item,
            claim_id,
            signals,
            stop_heartbeat,
            task: Some(task),
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

    /// What to do.
    pub fn payload(&self) -> &str {
        &self.item.payload
    }

    /// This claim's number: 1 for the first claim of the item, then one more per claim.
    pub fn attempt(&self) -> i32 {
        self.item.attempt
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
        self.signals.stop.clone()
    }

    /// `true` while the claim holds; `false` from the moment the worker must stop.
    pub fn held(&self) -> watch::Receiver<bool> {
        self.signals.held.subscribe()
    }

    /// Whether the claim still holds.
    pub fn is_held(&self) -> bool {
        *self.signals.held.borrow()
    }

    /// The local instant by which work must stop unless the next heartbeat succeeds.
    pub fn must_stop_by(&self) -> Instant {
        *self.signals.deadline.borrow()
    }

    /// When the worker was told to stop, if it was.
    pub fn lost_at(&self) -> Option<Instant> {
        self.signals.lost_at.lock().ok().and_then(|slot| *slot)
    }

    /// The item is done: deletes it, if this claim still holds it. One LWT.
    #[instrument(skip(self), fields(id = %self.item.key.id, attempt = self.item.attempt))]
    pub async fn complete(self) -> Result<(), QueueError> {
        self.finish(None).await
    }

    /// This attempt failed: the item is retried after the back-off for its attempt number, or
    /// discarded when it has had `max_attempts` claims. Returns which. One LWT.
    #[instrument(skip(self), fields(id = %self.item.key.id, attempt = self.item.attempt))]
    pub async fn fail(self, error: &str) -> Result<JobState, QueueError> {
        let config = self.queue.config;
        let to = if self.item.attempt >= config.max_attempts {
            Reschedule {
                state: JobState::Discarded,
                run_at: clock::now_micros(),
                error: Some(error),
            }
        } else {
            let backoff = config.backoff(self.item.attempt);
            Reschedule {
                state: JobState::Retryable,
                run_at: clock::now_micros()
                    .saturating_add(i64::try_from(backoff.as_micros()).unwrap_or(i64::MAX)),
                error: Some(error),
            }
        };
        let state = to.state;
        self.finish(Some(to)).await.map(|()| state)
    }

    /// Gives up on the item for good: it stays in the queue as discarded. One LWT.
    #[instrument(skip(self), fields(id = %self.item.key.id, attempt = self.item.attempt))]
    pub async fn discard(self, error: &str) -> Result<(), QueueError> {
        let to = Reschedule {
            state: JobState::Discarded,
            run_at: clock::now_micros(),
            error: Some(error),
        };
        self.finish(Some(to)).await
    }

    /// Completes (`None`) or reschedules the item, settling lost answers by reading back.
    async fn finish(mut self, to: Option<Reschedule<'_>>) -> Result<(), QueueError> {
        self.stop_heartbeat.cancel();
        self.task = None;
        let operation = if to.is_some() {
            "reschedule"
        } else {
            "complete"
        };
        let store = std::sync::Arc::clone(&self.queue.store);
        let key = self.item.key.clone();
        let config = self.queue.config.claim;
        let give_up_at = Instant::now() + config.resolve_timeout;
        loop {
            let result = match to {
                None => store.complete(&key, &self.claim_id).await,
                Some(to) => store.reschedule(&key, &self.claim_id, to).await,
            };
            let error = match result {
                Ok(CasOutcome::Applied) => {
                    self.signals.lose(&key.id, operation);
                    info!(id = %key.id, operation, "job finished");
                    return Ok(());
                }
                Ok(CasOutcome::NotApplied) => return Err(self.lost()),
                Err(source @ StoreError::Rejected(_)) => {
                    return Err(QueueError::Store { operation, source });
                }
                Err(error) => error,
            };
            warn!(id = %key.id, %error, operation, "answer lost; reading back");
            match store.read(&key).await {
                Ok(current) => {
                    let mine = current
                        .as_ref()
                        .is_some_and(|c| c.claim.as_deref() == Some(&self.claim_id));
                    let applied = match (&current, to) {
                        (None, None) => true,
                        (Some(c), Some(to)) => {
                            c.claim.is_none()
                                && c.attempt == self.item.attempt
                                && c.state == to.state
                        }
                        _ => false,
                    };
                    if applied {
                        self.signals.lose(&key.id, operation);
                        return Ok(());
                    }
                    if !mine {
                        return Err(self.lost());
                    }
                }
                Err(read_error) => debug!(%read_error, "read-back failed"),
            }
            let wake = Instant::now() + config.retry_interval / 2;
            if wake >= give_up_at {
                return Err(QueueError::OutcomeUnknown {
                    operation,
                    id: key.id.clone(),
                    source: error,
                });
            }
            tokio::time::sleep_until(wake).await;
        }
    }

    /// Stops at once without touching the store, as a crash would: the heartbeat stops, the
    /// token is cancelled, and the claim stays until its TTL runs out. For tests and drills.
    pub fn abandon(mut self) -> Instant {
        self.stop_heartbeat.cancel();
        self.task = None;
        self.signals.lose(&self.item.key.id, "abandoned")
    }

    fn lost(&self) -> QueueError {
        self.signals.lose(&self.item.key.id, "claim lost");
        QueueError::ClaimLost {
            id: self.item.key.id.clone(),
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.task.take().is_none() {
            return;
        }
        self.stop_heartbeat.cancel();
        self.signals.lose(&self.item.key.id, "dropped unfinished");
        self.queue
            .spawn_unclaim(self.item.key.clone(), self.claim_id.clone());
    }
}

/// Renews the claim every `renew_interval` until stopped, the claim is lost, or its deadline
/// passes without a successful heartbeat.
async fn heartbeat(
    queue: WorkQueue,
    key: ItemKey,
    claim_id: String,
    signals: Arc<Signals>,
    stop: CancellationToken,
) {
    let config = queue.config.claim;
    let mut next = *signals.deadline.borrow() - config.validity() + config.renew_interval;
    loop {
        let deadline = *signals.deadline.borrow();
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(next.min(deadline)) => {}
        }
        if Instant::now() >= deadline {
            signals.lose(&key.id, "claim deadline passed");
            queue.spawn_unclaim(key, claim_id);
            return;
        }
        let sent_at = Instant::now();
        let beat = queue.store.heartbeat(&key, &claim_id, config.store_ttl());
        match tokio::time::timeout_at(deadline, beat).await {
            Ok(Ok(CasOutcome::Applied)) => {
                signals.deadline.send_replace(sent_at + config.validity());
                next = Instant::now() + config.renew_interval;
                debug!(id = %key.id, "heartbeat");
            }
            Ok(Ok(CasOutcome::NotApplied)) => {
                signals.lose(&key.id, "claim taken over");
                return;
            }
            Ok(Err(error)) => {
                warn!(id = %key.id, %error, "heartbeat failed; retrying");
                next = Instant::now() + config.retry_interval / 2;
            }
            Err(_deadline_passed) => {
                signals.lose(&key.id, "claim deadline passed");
                queue.spawn_unclaim(key, claim_id);
                return;
            }
        }
    }
}
