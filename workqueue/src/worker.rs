//! A worker: a stream of claimed jobs.

use std::pin::Pin;
use std::task::{Context, Poll};

use cql_lease::check_text;
use futures::Stream;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::error::QueueError;
use crate::job::Job;
use crate::queue::WorkQueue;

/// Claims jobs for one worker id, as a [`Stream`] of [`Job`]s.
///
/// The next job is claimed only when the stream is polled, so a consumer that runs jobs with
/// `for_each_concurrent(n, ...)` never holds more than `n` claims. When the queue is empty the
/// worker looks again every `claim.retry_interval`, jittered (the seeds' open issue: idle
/// workers must back off). Store errors are logged and retried; the stream ends only when
/// [`Worker::shutdown_token`] is cancelled.
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
/// let done: Vec<String> = worker
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
/// assert_eq!(done, ["image-0.png", "image-1.png", "image-2.png"]);
/// # Ok::<(), cql_workqueue::QueueError>(())
/// # }).unwrap();
/// ```
pub struct Worker {
    shutdown: CancellationToken,
    jobs: BoxStream<'static, Job>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

impl Worker {
    pub(crate) fn new(queue: WorkQueue, worker: &str) -> Result<Self, QueueError> {
        check_text("worker", worker, cql_lease::MAX_OWNER_LEN)?;
        let shutdown = CancellationToken::new();
        let state = (queue, worker.to_owned(), shutdown.clone());
        let jobs = futures::stream::unfold(state, |(queue, worker, shutdown)| async move {
            let config = queue.config().claim;
            let mut delays = backon::BackoffBuilder::build(
                backon::ConstantBuilder::default()
                    .with_delay(config.retry_interval)
                    .with_jitter()
                    .without_max_times(),
            );
            loop {
                if shutdown.is_cancelled() {
                    return None;
                }
                match queue.claim(&worker).await {
                    Ok(Some(job)) => return Some((job, (queue, worker, shutdown))),
                    Ok(None) => {}
                    Err(error) => warn!(queue = queue.name(), %error, "claim failed"),
                }
                let delay = delays.next().unwrap_or(config.retry_interval);
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        });
        Ok(Worker {
            shutdown,
            jobs: Box::pin(jobs),
        })
    }

    /// Cancel it to end the stream (jobs already handed out are unaffected).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

impl Stream for Worker {
    type Item = Job;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Job>> {
        self.jobs.as_mut().poll_next(cx)
    }
}
