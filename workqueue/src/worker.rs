//! A worker: a stream of claimed jobs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use cql_lease::check_text;
use futures::Stream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::error::QueueError;
use crate::job::Job;
use crate::queue::WorkQueue;

mod search;

use search::{Pending, Search};

/// Claims jobs for one worker id, as a [`Stream`] of [`Job`]s.
///
/// The next job is claimed only when the stream is polled, so a consumer that runs jobs with
/// `for_each_concurrent(n, ...)` never holds more than `n` claims. When the queue is empty the
/// worker looks again after a delay drawn between half and all of `timing.retry_period` ([`cql_lease::hold::jittered`], the workspace's one
/// polling policy: idle workers back off and do not move in lockstep). Store errors are
/// logged and retried; the stream never ends by itself, only when [`Worker::shutdown_token`]
/// is cancelled. [`Drain::drain`] (through [`Worker::drain_handle`], taken before the worker
/// is moved into its consumer) shuts down gracefully: no new claims, then a bounded wait for
/// in-flight jobs to finish or hand back, after which the stream ends.
///
/// # Cancel safety
/// Cancel-safe. The search for the next job runs in a task of its own, so nothing the
/// consumer drops can cut a claim in half, and a job it claims waits for the stream only for
/// a bounded time:
/// - dropping a `next()` future loses nothing: the search goes on, and a job it claims
///   meanwhile is parked (heartbeat running) and handed out by the next poll, with the same
///   attempt number, if that poll comes within one `timing.renew_period` of the claim;
/// - a parked job is undone (state and attempt number restored, so no attempt is spent, and
///   the item claimable again at once) when that bound passes without a poll, when the
///   worker is shut down or drained, when the stream is dropped, or when its claim is lost
///   (a loss hands it back as never delivered); the next poll then searches again. An
///   unpolled stream so holds an item at most one `renew_period` and renews it at most
///   about once;
/// - a poll never hands out a job whose claim is lost or past its `must_stop_by`: it undoes
///   it and searches again;
/// - dropping the stream (or shutting it down) at any point ends the search; a claim already
///   under way is completed and then undone in the background the same way.
///
/// The undo runs in a spawned task: when the runtime is gone (process exit) it is skipped,
/// logged, and the claim lapses at its TTL instead.
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use cql_workqueue::{QueueConfig, WorkQueue, memory::MemoryQueueStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "thumbnails", QueueConfig::default())?;
/// for n in 0..3 {
///     queue.enqueue(&format!("image-{n}.png")).await?;
/// }
/// let worker = queue.worker("worker-1")?;
/// let shutdown = worker.shutdown_token();
/// let mut done: Vec<String> = worker
///     .take(3)
///     .then(|job| async move {
///         let payload = job.payload().to_owned();
///         job.complete().await.map(|()| payload)
///     })
///     .collect::<Vec<_>>()
///     .await
///     .into_iter()
///     .collect::<Result<_, _>>()?;
/// shutdown.cancel();
/// done.sort();
/// assert_eq!(done, ["image-0.png", "image-1.png", "image-2.png"]);
/// # Ok::<(), cql_workqueue::QueueError>(())
/// # }).unwrap();
/// ```
pub struct Worker {
    shutdown: CancellationToken,
    drain: Drain,
    queue: WorkQueue,
    worker: Arc<str>,
    /// The search for the next job, running in a task of its own (see `# Cancel safety`).
    pending: Option<Pending>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Tracker {
    count: AtomicUsize,
    /// Of `count`, the jobs handed out (the rest are claims being made or parked, which a
    /// stop undoes: counted as running, they made a client report a job it never ran).
    handed_out: AtomicUsize,
    /// Jobs handed out that have ended, ever.
    ended: AtomicU64,
    idle: Notify,
}

/// Counts a claim a worker is making, then the job it hands out, until the job is finished
/// or dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    tracker: Arc<Tracker>,
    /// Whether the job was handed out (counted in `Tracker::handed_out`).
    handed_out: bool,
}

impl InFlight {
    fn new(tracker: &Arc<Tracker>) -> Self {
        tracker.count.fetch_add(1, Ordering::SeqCst);
        InFlight {
            tracker: Arc::clone(tracker),
            handed_out: false,
        }
    }

    /// The claim became a job handed out: counted as such until it ends.
    fn hand_out(&mut self) {
        if !self.handed_out {
            self.handed_out = true;
            self.tracker.handed_out.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.handed_out {
            self.tracker.handed_out.fetch_sub(1, Ordering::SeqCst);
            // Only a job run may have enqueued more work; a claim that found nothing, or
            // was undone (its item keeps its entry), did not.
            self.tracker.ended.fetch_add(1, Ordering::SeqCst);
        }
        self.tracker.count.fetch_sub(1, Ordering::SeqCst);
        self.tracker.idle.notify_waiters();
    }
}

/// Graceful shutdown of one [`Worker`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct Drain {
    shutdown: CancellationToken,
    hand_back: CancellationToken,
    tracker: Arc<Tracker>,
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Jobs still in flight at the deadline (their cancellation tokens were then cancelled,
    /// so they hand their items back when dropped), counting a claim of the worker's that
    /// was not handed out and whose undo had not ended yet.
    pub unfinished: usize,
}

impl Drain {
    /// Jobs handed out and not yet finished or dropped, plus a claim the worker is making or
    /// has parked (not handed out) until it is handed out or its undo has ended.
    pub fn in_flight(&self) -> usize {
        self.tracker.count.load(Ordering::SeqCst)
    }

    /// Jobs handed out and not yet finished or dropped: [`Drain::in_flight`] without the
    /// claim being made or parked, which a stop undoes instead of running.
    pub fn handed_out(&self) -> usize {
        self.tracker.handed_out.load(Ordering::SeqCst)
    }

    /// Jobs handed out that have ended since the worker started (a [`crate::QueueClient`]
    /// tells from it that no job ended while it looked at its queues).
    pub(crate) fn ended(&self) -> u64 {
        self.tracker.ended.load(Ordering::SeqCst)
    }

    /// Stops claiming at once, then waits up to `grace` for in-flight jobs to finish (a
    /// `grace` too long to add to a clock reading, such as `Duration::MAX`, waits for them
    /// however long they take); jobs still running then are told to stop (their
    /// cancellation tokens fire) and, once dropped, hand their items back. A claim the worker had made but not handed out (one
    /// being made, or parked after a dropped `next()`) is undone at once (no attempt spent)
    /// and the drain waits, within `grace`, for that undo to end; one still under way at the
    /// deadline counts as unfinished.
    ///
    /// # Cancel safety
    ///
    /// Dropping it leaves the worker shut down (claims not handed out are undone all the
    /// same); jobs are told to stop only at the deadline.
    pub async fn drain(&self, grace: Duration) -> DrainReport {
        self.shutdown.cancel();
        // A grace too long to add to the clock has no deadline: wait for the jobs.
        let deadline = Instant::now().checked_add(grace);
        loop {
            let idle = self.tracker.idle.notified();
            if self.in_flight() == 0 {
                info!("worker drained");
                return DrainReport { unfinished: 0 };
            }
            match deadline {
                Some(deadline) => {
                    if tokio::time::timeout_at(deadline, idle).await.is_err() {
                        break;
                    }
                }
                None => idle.await,
            }
        }
        let unfinished = self.in_flight();
        warn!(
            unfinished,
            "drain deadline passed; in-flight jobs told to stop"
        );
        self.hand_back.cancel();
        DrainReport { unfinished }
    }
}

impl Worker {
    pub(crate) fn new(queue: WorkQueue, worker: &str) -> Result<Self, QueueError> {
        check_text("worker", worker, cql_lease::MAX_OWNER_LEN)?;
        let shutdown = CancellationToken::new();
        let drain = Drain {
            shutdown: shutdown.clone(),
            hand_back: CancellationToken::new(),
            tracker: Arc::default(),
        };
        Ok(Worker {
            shutdown,
            drain,
            queue,
            worker: worker.into(),
            pending: None,
        })
    }

    /// Makes this worker's shutdown a child of `parent`: cancelling `parent` shuts it down
    /// too (a [`crate::QueueClient`]'s one stop). Before any claim: the search reads the
    /// token when it starts.
    pub(crate) fn under(mut self, parent: &CancellationToken) -> Self {
        let shutdown = parent.child_token();
        self.shutdown = shutdown.clone();
        self.drain.shutdown = shutdown;
        self
    }

    /// Cancel it to end the stream (jobs already handed out are unaffected).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// The handle that drains this worker gracefully.
    pub fn drain_handle(&self) -> Drain {
        self.drain.clone()
    }

    /// Starts looking for the next job in a task of its own.
    fn spawn_search(&self) -> Pending {
        Search {
            queue: self.queue.clone(),
            worker: Arc::clone(&self.worker),
            shutdown: self.shutdown.clone(),
            tracker: Arc::clone(&self.drain.tracker),
        }
        .spawn()
    }

    /// Hands `job` out (counted as in flight, tied to the drain deadline), or `None` if its
    /// claim was lost or its deadline passed while it waited: that one is undone.
    fn hand_out(&self, mut job: Job) -> Option<Job> {
        if !job.is_held() || Instant::now() >= job.must_stop_by() {
            warn!(id = %job.id(), "claimed job lost before it was handed out; undoing it");
            job.undeliver();
            return None;
        }
        // Checked before it is marked delivered: a loss from here on counts the attempt. A
        // loss in between may have handed it back as undelivered already: then it is lost.
        if !job.deliver() {
            warn!(id = %job.id(), "claimed job handed back as it was handed out; undoing it");
            job.undeliver();
            return None;
        }
        job.in_flight
            .get_or_insert_with(|| InFlight::new(&self.drain.tracker))
            .hand_out();
        debug!(id = %job.id(), "job handed out");
        // At the drain deadline the job is told to stop.
        let (stop, hand_back) = (job.cancellation_token(), self.drain.hand_back.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = hand_back.cancelled() => stop.cancel(),
                _ = stop.cancelled() => {}
            }
        });
        Some(job)
    }
}

impl Stream for Worker {
    type Item = Job;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Job>> {
        let this = &mut *self;
        loop {
            if this.shutdown.is_cancelled() {
                // No job after shutdown: one claimed but not handed out yet is undone.
                this.pending = None;
                return Poll::Ready(None);
            }
            if this.pending.is_none() {
                this.pending = Some(this.spawn_search());
            }
            let Some(pending) = this.pending.as_mut() else {
                return Poll::Ready(None);
            };
            let answer = ready!(Pin::new(&mut pending.found).poll(cx));
            let parked = pending.slot.take();
            // Done with this search: its task stops waiting and undoes nothing it handed over.
            this.pending = None;
            match (answer, parked) {
                (_, Some(job)) => {
                    if let Some(job) = this.hand_out(job) {
                        return Poll::Ready(Some(job));
                    }
                    // Lost while parked (undone by `hand_out`): search again.
                }
                // Parked, then undone before this poll took it: search again.
                (Ok(()), None) => {}
                // The search ended without a job: the worker was shut down (or the task failed).
                (Err(_), None) => {
                    if !this.shutdown.is_cancelled() {
                        // Only a panic in the claim path gets here: stop rather than spin.
                        error!(
                            queue = this.queue.name(),
                            "claim task ended without an answer; stopping"
                        );
                        this.shutdown.cancel();
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
