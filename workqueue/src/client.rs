//! One client per process: several queues, a concurrency each, one stop.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use cql_lease::InvalidArgument;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::QueueError;
use crate::queue::WorkQueue;
use crate::typed::{JobError, TypedJob};
use crate::worker::{Drain, DrainReport, Worker};

/// Most queues one client runs: each has a task and its own dispatcher.
pub const MAX_CLIENT_QUEUES: usize = 256;

/// Most handlers one queue runs at once.
pub const MAX_CONCURRENCY: usize = 65_536;

/// Runs typed workers ([`Worker::run`]) on several queues under one worker id, with a
/// concurrency per queue, and stops them together: River's client, for this queue.
///
/// Build it with [`QueueClient::builder`], add each queue with its handler and concurrency
/// ([`QueueClientBuilder::queue`]), then [`QueueClientBuilder::start`]. One
/// [`QueueClient::stop`] drains every queue at once within one grace period;
/// [`QueueClient::run_until_empty`] is the same stop once every queue has nothing left to
/// run (batch jobs); [`QueueClient::shutdown_token`] stops claiming everywhere from
/// anywhere, such as a signal handler.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use cql_workqueue::{JobError, NewItem, QueueClient, QueueConfig, TypedJob, WorkQueue, memory::MemoryQueueStore};
///
/// async fn send(job: TypedJob<String>) -> Result<(), JobError> {
///     println!("mail to {}", job.args);
///     Ok(())
/// }
/// async fn resize(job: TypedJob<u32>) -> Result<(), JobError> {
///     println!("resize to {} px", job.args);
///     Ok(())
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let store = Arc::new(MemoryQueueStore::new());
/// let mail = WorkQueue::new(store.clone(), "mail", QueueConfig::default())?;
/// let images = WorkQueue::new(store, "images", QueueConfig::default())?;
/// mail.enqueue_json("ada@example.com").await?;
/// images.enqueue_item(NewItem::json(&64u32)?).await?;
///
/// let client = QueueClient::builder("host-1")
///     .queue(mail, 8, send)
///     .queue(images, 2, resize)
///     .start()?;
/// // A batch: returns once nothing is left to run on either queue.
/// let report = client.run_until_empty(Duration::from_secs(30)).await?;
/// assert_eq!(report.unfinished(), 0);
/// # Ok::<(), cql_workqueue::QueueError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct QueueClient {
    shutdown: CancellationToken,
    queues: Vec<Running>,
}

/// A queue the client runs.
#[derive(Debug)]
struct Running {
    queue: WorkQueue,
    drain: Drain,
    task: JoinHandle<()>,
}

/// Starts a worker on its queue: [`Worker::run`] with the handler and concurrency given.
type Start = Box<dyn FnOnce(Worker) -> BoxFuture<'static, ()> + Send>;

/// The queues a [`QueueClient`] is to run; see [`QueueClient::builder`].
pub struct QueueClientBuilder {
    worker: String,
    queues: Vec<(WorkQueue, Start)>,
    /// The first bad input, reported by [`QueueClientBuilder::start`].
    error: Option<QueueError>,
}

impl std::fmt::Debug for QueueClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueClientBuilder")
            .field("worker", &self.worker)
            .field("queues", &self.queues.len())
            .finish_non_exhaustive()
    }
}

/// How a [`QueueClient`] stopped: each queue's drain, by queue name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopReport {
    /// Each queue's [`DrainReport`].
    pub queues: BTreeMap<String, DrainReport>,
}

impl StopReport {
    /// Jobs still running at the deadline, over every queue (told to stop, then handed back).
    pub fn unfinished(&self) -> usize {
        self.queues.values().map(|report| report.unfinished).sum()
    }
}

impl QueueClient {
    /// A client whose workers claim as `worker` (a process's id, as in [`WorkQueue::worker`]).
    pub fn builder(worker: &str) -> QueueClientBuilder {
        QueueClientBuilder {
            worker: worker.to_owned(),
            queues: Vec::new(),
            error: None,
        }
    }

    /// Cancel it to stop claiming on every queue; jobs under way run to their end, and the
    /// client's tasks end after them. [`QueueClient::stop`] still reports and bounds the wait.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Jobs handed out and not yet finished, by queue name ([`Drain::handed_out`]). A claim
    /// still being made is not counted: a stop undoes it rather than running it, so counted
    /// here it would announce a job the stop then reports as never started.
    pub fn in_flight(&self) -> BTreeMap<String, usize> {
        self.queues
            .iter()
            .map(|running| (running.queue.name().to_owned(), running.drain.handed_out()))
            .collect()
    }

    /// Stops every queue together: no new claims, then up to `grace` for the jobs under way
    /// to finish ([`Drain::drain`] on each queue at once); jobs still running then are told
    /// to stop (their cancellation tokens fire), and handlers that have not returned one
    /// `renew_period` later are dropped, which hands their items back (the attempt counts;
    /// the hand-back runs in the background, so a queue's stats may show the item running
    /// for a moment). Returns once every worker task has ended. A handler that blocks its
    /// thread instead of awaiting cannot be dropped and holds this up.
    ///
    /// # Cancel safety
    ///
    /// Dropping it leaves every queue shut down (no new claims); handlers under way go on
    /// until they end and are not told to stop.
    pub async fn stop(mut self, grace: Duration) -> StopReport {
        info!(
            queues = self.queues.len(),
            ?grace,
            "stopping the queue client"
        );
        self.shutdown.cancel();
        let drains = self.queues.iter().map(|running| {
            let drain = running.drain.clone();
            async move { drain.drain(grace).await }
        });
        let reports = futures::future::join_all(drains).await;
        let mut report = StopReport::default();
        let told = Instant::now();
        for (mut running, drained) in std::mem::take(&mut self.queues).into_iter().zip(reports) {
            // Past the grace the handlers were told to stop: they get one `renew_period` to
            // return; one that has not is dropped then (at its next await), which hands its
            // item back.
            let ended = if drained.unfinished > 0 {
                let stop_by = told + running.queue.config().timing.renew_period;
                match tokio::time::timeout_at(stop_by, &mut running.task).await {
                    Ok(ended) => ended,
                    Err(_) => {
                        warn!(
                            queue = running.queue.name(),
                            "handlers still running after being told to stop; dropping them"
                        );
                        running.task.abort();
                        running.task.await
                    }
                }
            } else {
                running.task.await
            };
            if let Err(error) = ended
                && error.is_panic()
            {
                warn!(queue = running.queue.name(), %error, "worker task panicked");
            }
            report
                .queues
                .insert(running.queue.name().to_owned(), drained);
        }
        info!(unfinished = report.unfinished(), "queue client stopped");
        report
    }

    /// Waits until every queue has nothing left to run (no live index entry: nothing
    /// available, scheduled for later, or running; and no job of this client in flight),
    /// found so by two reads in a row, then [`QueueClient::stop`]s with `grace`: for batch
    /// jobs. Retries scheduled later are waited for; dead letters are not work left. Queues
    /// are read every `retry_period`.
    ///
    /// It waits for work other processes add meanwhile too, and for items delayed however
    /// far ahead: give it queues a batch owns.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when reading a queue's stats fails three times in a row; the
    /// client is then stopped (with `grace`, its report logged) before the error is
    /// returned.
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops the client, which stops claiming on every queue; handlers under way
    /// run to their end and are not told to stop.
    pub async fn run_until_empty(self, grace: Duration) -> Result<StopReport, QueueError> {
        let mut failures = 0;
        // An item moved back while a read walked past its new place and reached its old
        // one after it left reads as nothing: two empty reads in a row it takes.
        let mut empty_reads = 0;
        loop {
            match self.work_left().await {
                Ok(false) => {
                    failures = 0;
                    empty_reads += 1;
                    if empty_reads >= 2 {
                        break;
                    }
                }
                Ok(true) => (failures, empty_reads) = (0, 0),
                Err(error) => {
                    failures += 1;
                    warn!(%error, failures, "reading queue stats failed");
                    if failures >= 3 {
                        let report = self.stop(grace).await;
                        warn!(
                            ?report,
                            "queue client stopped after its stats could not be read"
                        );
                        return Err(error);
                    }
                }
            }
            let pause = self
                .queues
                .iter()
                .map(|running| running.queue.config().timing.retry_period)
                .min()
                .unwrap_or(Duration::from_secs(1));
            tokio::time::sleep(pause).await;
        }
        Ok(self.stop(grace).await)
    }

    /// Whether any queue has work left, or any job of this client is in flight. The queues
    /// are read one after the other, so a job that ends meanwhile (it may have enqueued on a
    /// queue already read) means another look.
    async fn work_left(&self) -> Result<bool, QueueError> {
        let busy = || {
            self.queues
                .iter()
                .any(|running| running.drain.in_flight() > 0)
        };
        let ended = || -> u64 {
            self.queues
                .iter()
                .map(|running| running.drain.ended())
                .sum()
        };
        let before = ended();
        if busy() {
            return Ok(true);
        }
        for running in &self.queues {
            // Any live entry is an item available, scheduled or running.
            let cursor = running.queue.read_cursor().await?;
            let left = running.queue.any_live_entry(cursor).await?;
            debug!(queue = running.queue.name(), left, "work left?");
            if left {
                return Ok(true);
            }
        }
        Ok(busy() || ended() != before)
    }
}

impl Drop for QueueClient {
    /// Stops claiming on every queue; jobs under way run to their end.
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl QueueClientBuilder {
    /// Runs `handler` on `queue`'s jobs, at most `concurrency` at a time, as
    /// [`Worker::run`] does: `Ok` completes a job, [`JobError::Failed`] retries it after the
    /// queue's back-off, [`JobError::Cancel`] makes it a dead letter, a panic counts as a
    /// failed attempt, a payload that does not decode as `T` is a dead letter.
    ///
    /// A `concurrency` of 0 or over [`MAX_CONCURRENCY`], or a queue name given twice, is
    /// refused by [`QueueClientBuilder::start`].
    #[must_use]
    pub fn queue<T, H, F>(mut self, queue: WorkQueue, concurrency: usize, handler: H) -> Self
    where
        T: DeserializeOwned + Send + 'static,
        H: Fn(TypedJob<T>) -> F + Send + Sync + 'static,
        F: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        if self.error.is_none() {
            self.error = check_queue(&self.queues, &queue, concurrency).err();
        }
        let start: Start = Box::new(move |worker: Worker| {
            Box::pin(async move { worker.run(concurrency, handler).await })
        });
        self.queues.push((queue, start));
        self
    }

    /// Starts a worker on each queue, in a task of its own.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`], with nothing started, for a bad worker id, no
    /// queue, a queue given twice, a concurrency out of range, more than
    /// [`MAX_CLIENT_QUEUES`] queues, or a call outside a Tokio runtime.
    pub fn start(self) -> Result<QueueClient, QueueError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if self.queues.is_empty() {
            return Err(invalid(
                "queues",
                "a client needs at least one queue".into(),
            ));
        }
        if self.queues.len() > MAX_CLIENT_QUEUES {
            return Err(invalid(
                "queues",
                format!("at most {MAX_CLIENT_QUEUES} queues per client"),
            ));
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(invalid(
                "runtime",
                "QueueClient::start must be called inside a Tokio runtime".into(),
            ));
        }
        let shutdown = CancellationToken::new();
        let workers = self
            .queues
            .into_iter()
            .map(|(queue, start)| {
                let worker = queue.worker(&self.worker)?.under(&shutdown);
                Ok((queue, worker, start))
            })
            .collect::<Result<Vec<_>, QueueError>>()?;
        let queues = workers
            .into_iter()
            .map(|(queue, worker, start)| {
                let drain = worker.drain_handle();
                info!(queue = queue.name(), worker = %self.worker, "queue client starts a worker");
                let task = tokio::spawn(start(worker));
                Running { queue, drain, task }
            })
            .collect();
        Ok(QueueClient { shutdown, queues })
    }
}

/// Whether `queue` may join `queues` with `concurrency`.
fn check_queue(
    queues: &[(WorkQueue, Start)],
    queue: &WorkQueue,
    concurrency: usize,
) -> Result<(), QueueError> {
    if concurrency == 0 || concurrency > MAX_CONCURRENCY {
        return Err(invalid(
            "concurrency",
            format!(
                "{concurrency} for queue {:?}: it must be from 1 to {MAX_CONCURRENCY}",
                queue.name()
            ),
        ));
    }
    if queues.iter().any(|(other, _)| other.name() == queue.name()) {
        return Err(invalid(
            "queues",
            format!("queue {:?} is given twice", queue.name()),
        ));
    }
    Ok(())
}

fn invalid(field: &'static str, reason: String) -> QueueError {
    InvalidArgument::Invalid { field, reason }.into()
}
