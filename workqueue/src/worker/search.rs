//! The search for a [`Worker`](super::Worker)'s next job, in a task of its own, and where a
//! job it claimed waits (parked, for a bounded time) until the stream takes it.

use std::sync::{Arc, Mutex, PoisonError};

use cql_lease::hold::jittered;
use tokio::sync::oneshot;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::{info, warn};

use super::{InFlight, Tracker};
use crate::job::Job;
use crate::queue::WorkQueue;

/// A job claimed by a search and not handed out yet. Exactly one side takes it out: the
/// stream (to hand it out) or the search task (to undo it). Whatever is left when the slot
/// goes is undone.
#[derive(Default)]
pub(super) struct Slot(Mutex<Option<Job>>);

impl Slot {
    pub(super) fn take(&self) -> Option<Job> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn put(&self, job: Job) {
        let previous = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(job);
        if let Some(job) = previous {
            job.undeliver();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(job) = self.take() {
            info!(id = %job.id(), "claimed job not handed out; undoing the claim");
            job.undeliver();
        }
    }
}

/// The stream's side of one search.
pub(super) struct Pending {
    /// Answered when a job is parked in `slot`; closed when the search ends without one.
    pub(super) found: oneshot::Receiver<()>,
    pub(super) slot: Arc<Slot>,
    /// Dropped with this value: tells the search nobody waits for it any more.
    _waiting: DropGuard,
}

/// Everything a search task needs.
pub(super) struct Search {
    pub(super) queue: WorkQueue,
    pub(super) worker: Arc<str>,
    pub(super) shutdown: CancellationToken,
    pub(super) tracker: Arc<Tracker>,
}

impl Search {
    /// Starts the search in a task of its own.
    pub(super) fn spawn(self) -> Pending {
        let (found, receiver) = oneshot::channel();
        let slot = Arc::<Slot>::default();
        let gone = CancellationToken::new();
        tokio::spawn(self.run(found, Arc::clone(&slot), gone.clone()));
        Pending {
            found: receiver,
            slot,
            _waiting: gone.drop_guard(),
        }
    }

    /// Claims until it gets a job, sleeping a jittered `retry_interval` ([`jittered`], the
    /// workspace's one polling policy) while the queue is empty, then parks it. Gives up,
    /// claiming nothing more, once the worker shuts down or nobody waits for the answer
    /// (`gone`); a claim in progress then is completed and undone rather than dropped, so
    /// its item keeps its attempt number and an index entry (the undo puts a run entry back
    /// if the claim's check entry had already taken the old one's place).
    async fn run(self, found: oneshot::Sender<()>, slot: Arc<Slot>, gone: CancellationToken) {
        let retry_interval = self.queue.config().timing.retry_period;
        let mut delays = jittered(retry_interval);
        loop {
            if self.shutdown.is_cancelled() || gone.is_cancelled() {
                return;
            }
            // A claim being made counts as in flight: a drain waits for it to be undone.
            let in_flight = InFlight::new(&self.tracker);
            match self.queue.claim_undelivered(&self.worker).await {
                Ok(Some(mut job)) => {
                    job.in_flight = Some(in_flight);
                    self.park(job, found, &slot, &gone).await;
                    return;
                }
                Ok(None) => {}
                Err(error) => warn!(queue = self.queue.name(), %error, "claim failed"),
            }
            drop(in_flight);
            let delay = delays.next().unwrap_or(retry_interval);
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = gone.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// Parks `job` in `slot` for the stream, heartbeat running, and undoes it unless the
    /// stream takes it first: when the worker shuts down (or is drained), when nobody waits
    /// for it any more (the stream was dropped), when its claim is lost, or at the latest
    /// one `renew_interval` after it was parked, so an unpolled stream never keeps an item
    /// longer than that nor renews it more than about once.
    async fn park(
        &self,
        job: Job,
        found: oneshot::Sender<()>,
        slot: &Slot,
        gone: &CancellationToken,
    ) {
        let lost = job.cancellation_token();
        let id = job.id().clone();
        slot.put(job);
        if self.shutdown.is_cancelled() {
            return self.undo(slot, &id, "worker shut down");
        }
        // If the stream stopped waiting, `gone` is cancelled too and the select undoes it.
        let _ = found.send(());
        let limit = self.queue.config().timing.renew_period;
        let why = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => "worker shut down",
            _ = gone.cancelled() => "stream no longer waiting",
            _ = lost.cancelled() => "claim lost",
            _ = tokio::time::sleep(limit) => "not taken within one renew interval",
        };
        self.undo(slot, &id, why);
    }

    /// Undoes the parked job unless the stream took it.
    fn undo(&self, slot: &Slot, id: &crate::item::ItemId, why: &str) {
        if let Some(job) = slot.take() {
            info!(%id, why, "parked claim not handed out; undoing it");
            job.undeliver();
        }
    }
}

#[cfg(test)]
impl Pending {
    /// A search that already parked whatever `slot` holds (for tests of the stream's side).
    pub(super) fn parked(slot: Arc<Slot>) -> Pending {
        let (found, receiver) = oneshot::channel();
        let _ = found.send(());
        Pending {
            found: receiver,
            slot,
            _waiting: CancellationToken::new().drop_guard(),
        }
    }

    /// Parks `job` in `slot`.
    pub(super) fn put(slot: &Slot, job: Job) {
        slot.put(job);
    }
}
