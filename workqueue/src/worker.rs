//! A worker: a stream of claimed jobs.

use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cql_lease::check_text;
use futures::Stream;
use futures::stream::BoxStream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::QueueError;
use crate::job::Job;
use crate::queue::WorkQueue;

/// Claims jobs for one worker id, as a [`Stream`] of [`Job`]s.
///
/// The next job is claimed only when the stream is polled, so a consumer that runs jobs with
/// `for_each_concurrent(n, ...)` never holds more than `n` claims. When the queue is empty the
/// worker looks again every `claim.retry_interval`, jittered (the seeds' open issue: idle
/// workers must back off). Store errors are logged and retried; the stream ends only when
/// [`Worker::shutdown_token`] is cancelled. [`Drain::drain`] shuts down gracefully: no new
/// claims, then a bounded wait for in-flight jobs to finish or hand back.
///
/// # Cancel safety
/// Dropping the stream (or a `next()` future) while a claim is in flight undoes that claim
/// in a spawned task, restoring the item's state and attempt number: see
/// [`WorkQueue::claim`].
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
    jobs: BoxStream<'static, Job>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Tracker {
    count: AtomicUsize,
    idle: Notify,
}

/// Counts a job handed out by a worker until the job is finished or dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Tracker>);

impl InFlight {
    fn new(tracker: &Arc<Tracker>) -> Self {
        tracker.count.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(tracker))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::SeqCst);
        self.0.idle.notify_waiters();
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
    /// so they hand their items back when dropped).
    pub unfinished: usize,
}

impl Drain {
    /// Jobs handed out and not yet finished or dropped.
    pub fn in_flight(&self) -> usize {
        self.tracker.count.load(Ordering::SeqCst)
    }

    /// Stops claiming at once, then waits up to `grace` for in-flight jobs to finish; jobs
    /// still running then are told to stop (their cancellation tokens fire) and, once
    /// dropped, hand their items back.
    ///
    /// # Cancel safety
    ///
    /// Dropping it leaves the worker shut down; jobs are told to stop only at the deadline.
    pub async fn drain(&self, grace: Duration) -> DrainReport {
        self.shutdown.cancel();
        let deadline = Instant::now() + grace;
        loop {
            let idle = self.tracker.idle.notified();
            if self.in_flight() == 0 {
                info!("worker drained");
                return DrainReport { unfinished: 0 };
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                break;
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
        let state = (queue, worker.to_owned(), drain.clone());
        let jobs = futures::stream::unfold(state, |(queue, worker, drain)| async move {
            let config = queue.config().claim;
            let mut delays = backon::BackoffBuilder::build(
                backon::ConstantBuilder::default()
                    .with_delay(config.retry_interval)
                    .with_jitter()
                    .without_max_times(),
            );
            loop {
                if drain.shutdown.is_cancelled() {
                    return None;
                }
                // Not raced against shutdown: a claim dropped midway would strand its item
                // until the claim's TTL ran out.
                match queue.claim(&worker).await {
                    Ok(Some(mut job)) => {
                        job.in_flight = Some(InFlight::new(&drain.tracker));
                        // At the drain deadline the job is told to stop.
                        let (stop, hand_back) = (job.cancellation_token(), drain.hand_back.clone());
                        tokio::spawn(async move {
                            tokio::select! {
                                _ = hand_back.cancelled() => stop.cancel(),
                                _ = stop.cancelled() => {}
                            }
                        });
                        return Some((job, (queue, worker, drain)));
                    }
                    Ok(None) => {}
                    Err(error) => warn!(queue = queue.name(), %error, "claim failed"),
                }
                let delay = delays.next().unwrap_or(config.retry_interval);
                tokio::select! {
                    _ = drain.shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        });
        Ok(Worker {
            shutdown,
            drain,
            jobs: Box::pin(jobs),
        })
    }

    /// Cancel it to end the stream (jobs already handed out are unaffected).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// The handle that drains this worker gracefully.
    pub fn drain_handle(&self) -> Drain {
        self.drain.clone()
    }
}

impl Stream for Worker {
    type Item = Job;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Job>> {
        self.jobs.as_mut().poll_next(cx)
    }
}
