//! Typed workers: a handler receives a job's decoded arguments and says how the job ends by
//! what it returns, instead of finishing the [`Job`] itself.

use std::any::Any;
use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use cql_lease::FencingToken;
use futures::{FutureExt, StreamExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::QueueError;
use crate::item::{ItemId, ItemKey, JobState};
use crate::job::Job;
use crate::worker::Worker;

/// How a typed handler says its job did not complete.
///
/// [`JobError::Failed`] is an ordinary failed attempt (what `?` on another error gives
/// through the `From` conversions or [`JobError::failed`]); [`JobError::Cancel`] gives up on
/// the job for good; [`JobError::Snooze`] puts it off without spending an attempt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// This attempt failed: the job is retried after the queue's back-off for its attempt
    /// number, and becomes a dead letter once it has had `max_attempts` claims
    /// ([`Job::fail`]).
    #[error("{0}")]
    Failed(String),
    /// The job can never succeed: it becomes a dead letter at once, whatever attempts are
    /// left ([`Job::discard`]).
    #[error("cancelled: {0}")]
    Cancel(String),
    /// Not now: the job runs again after this long, and this claim does not count against
    /// `max_attempts` ([`Job::snooze`]; River's `JobSnooze`). At most 20 years.
    #[error("snoozed for {0:?}")]
    Snooze(Duration),
}

impl JobError {
    /// A failed attempt, to be retried: `JobError::Failed(error.to_string())`.
    pub fn failed(error: impl Display) -> Self {
        JobError::Failed(error.to_string())
    }

    /// Gives up on the job without retrying it: `JobError::Cancel(error.to_string())`.
    pub fn cancel(error: impl Display) -> Self {
        JobError::Cancel(error.to_string())
    }

    /// Runs the job again after `after` without spending an attempt: `JobError::Snooze(after)`.
    pub fn snooze(after: Duration) -> Self {
        JobError::Snooze(after)
    }
}

impl From<QueueError> for JobError {
    fn from(error: QueueError) -> Self {
        JobError::failed(error)
    }
}

impl From<Box<dyn std::error::Error + Send + Sync>> for JobError {
    fn from(error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        JobError::failed(error)
    }
}

/// A claimed job as a typed handler sees it: its decoded arguments and its claim.
///
/// The claim stays with the worker, which finishes the job from the handler's answer; this
/// only watches it. Work while [`TypedJob::cancellation_token`] is not cancelled (it fires
/// when the claim is lost, at the claim's local deadline at the latest, and at a drain's
/// deadline), and fence downstream writes with [`TypedJob::token`].
#[derive(Debug)]
pub struct TypedJob<T> {
    /// The payload, decoded from JSON.
    pub args: T,
    key: ItemKey,
    attempt: i32,
    attempts_used: i32,
    last_error: Option<String>,
    cancel: CancellationToken,
    held: watch::Receiver<bool>,
    deadline: watch::Receiver<Instant>,
}

impl<T> TypedJob<T> {
    fn new(job: &Job, args: T) -> Self {
        TypedJob {
            args,
            key: job.key().clone(),
            attempt: job.attempt(),
            attempts_used: job.attempts_used(),
            last_error: job.last_error().map(str::to_owned),
            cancel: job.cancellation_token(),
            held: job.held(),
            deadline: job.deadline(),
        }
    }

    /// The item's id.
    pub fn id(&self) -> &ItemId {
        &self.key.id
    }

    /// Where the item lives.
    pub fn key(&self) -> &ItemKey {
        &self.key
    }

    /// This claim's number: 1 for the first claim of the item, then one more per claim.
    pub fn attempt(&self) -> i32 {
        self.attempt
    }

    /// Claims since the item was enqueued or last requeued from the dead letters.
    pub fn attempts_used(&self) -> i32 {
        self.attempts_used
    }

    /// The claim's fencing token: [`TypedJob::attempt`], which only grows for an item.
    pub fn token(&self) -> FencingToken {
        FencingToken::new(i64::from(self.attempt))
    }

    /// The previous attempt's failure, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Cancelled when the handler must stop working on this job.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// `true` while the claim holds; `false` from the moment the handler must stop.
    pub fn held(&self) -> watch::Receiver<bool> {
        self.held.clone()
    }

    /// Whether the claim still holds.
    pub fn is_held(&self) -> bool {
        *self.held.borrow()
    }

    /// The local instant by which work must stop unless the next heartbeat succeeds.
    pub fn must_stop_by(&self) -> Instant {
        *self.deadline.borrow()
    }
}

impl Worker {
    /// Runs `handler` on every job this worker claims, up to `concurrency` at once (at least
    /// one), with the payload decoded from JSON as `T`; the handler's answer ends the job:
    ///
    /// - `Ok(())`: completed ([`Job::complete`]);
    /// - `Err(JobError::Failed(_))`: a failed attempt, retried after the queue's back-off
    ///   and a dead letter after `max_attempts` claims ([`Job::fail`]);
    /// - `Err(JobError::Cancel(_))`: a dead letter at once ([`Job::discard`]);
    /// - `Err(JobError::Snooze(after))`: run again after `after`, the attempt given back
    ///   ([`Job::snooze`]);
    /// - a panic in the handler is caught and counts as a failed attempt, its message the
    ///   error; the worker goes on with other jobs;
    /// - a payload that does not decode as `T` never reaches the handler: the job becomes
    ///   a dead letter at once with the decoding error, as no retry can succeed.
    ///
    /// Returns when the worker's stream ends: its [`Worker::shutdown_token`] was cancelled
    /// or it was drained ([`Worker::drain_handle`], taken before `run`), once the jobs under
    /// way have ended. A handler is never aborted: when its claim is lost, or a drain's
    /// deadline passes, its cancellation token fires and it should return; a job whose
    /// claim was lost is not finished by this worker (another claim runs it again).
    ///
    /// # Errors
    ///
    /// None returned: a job whose outcome could not be recorded (the claim was lost, or the
    /// store failed) is logged and left to the queue, which hands it out again.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the handlers under way (cancelled at an `.await`) and
    /// their jobs, which go back to the queue as [`Job`]s dropped unfinished do (the attempt
    /// counts). Drain the worker instead to let them end.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use cql_workqueue::{JobError, NewItem, QueueConfig, TypedJob, WorkQueue, memory::MemoryQueueStore};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize)]
    /// struct Resize { image: String, width: u32 }
    ///
    /// async fn resize(job: TypedJob<Resize>) -> Result<(), JobError> {
    ///     if job.args.width == 0 {
    ///         return Err(JobError::cancel("width 0")); // no retry can help: a dead letter
    ///     }
    ///     println!("{} to {} px (attempt {})", job.args.image, job.args.width, job.attempt());
    ///     Ok(())
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
    /// let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "thumbnails", QueueConfig::default())?;
    /// queue.enqueue_item(NewItem::json(&Resize { image: "a.png".into(), width: 64 })?).await?;
    /// queue.enqueue_item(NewItem::json(&Resize { image: "b.png".into(), width: 0 })?).await?;
    ///
    /// let worker = queue.worker("worker-1")?;
    /// let drain = worker.drain_handle();
    /// let running = tokio::spawn(worker.run(4, resize));
    /// // The stream never ends by itself: once nothing waits, runs or is scheduled, drain it.
    /// loop {
    ///     let stats = queue.stats().await?;
    ///     if stats.available + stats.running + stats.scheduled == 0 { break; }
    ///     tokio::time::sleep(Duration::from_millis(50)).await;
    /// }
    /// drain.drain(Duration::from_secs(10)).await;
    /// running.await.unwrap();
    /// assert_eq!(queue.dead_letters().await?.len(), 1);
    /// # Ok::<(), cql_workqueue::QueueError>(())
    /// # }).unwrap();
    /// ```
    pub async fn run<T, H, F>(self, concurrency: usize, handler: H)
    where
        T: DeserializeOwned + Send + 'static,
        H: Fn(TypedJob<T>) -> F + Send + Sync,
        F: Future<Output = Result<(), JobError>> + Send,
    {
        let handler = &handler;
        self.for_each_concurrent(concurrency.max(1), |job| run_one(job, handler))
            .await;
    }
}

/// Decodes `job`'s arguments, runs `handler` on them (a panic caught) and ends the job as
/// its answer says.
async fn run_one<T, H, F>(job: Job, handler: &H)
where
    T: DeserializeOwned,
    H: Fn(TypedJob<T>) -> F,
    F: Future<Output = Result<(), JobError>>,
{
    let id = job.id().clone();
    let args = match job.json::<T>() {
        Ok(args) => args,
        Err(error) => {
            let error = format!("{error} (as {})", std::any::type_name::<T>());
            warn!(%id, %error, "payload does not decode; discarding the job");
            record(&id, job.discard(&error).await);
            return;
        }
    };
    let typed = TypedJob::new(&job, args);
    // Called inside the caught future, so a panic before the handler's first await counts too.
    let answer = AssertUnwindSafe(async { handler(typed).await })
        .catch_unwind()
        .await;
    match answer {
        Ok(Ok(())) => record(&id, job.complete().await),
        Ok(Err(JobError::Failed(error))) => {
            let state = job.fail(&error).await;
            log_failed(&id, &error, &state);
            record(&id, state.map(drop));
        }
        Ok(Err(JobError::Snooze(after))) => {
            info!(%id, ?after, "handler snoozed the job");
            // Longer than the queue can schedule means "as late as it can".
            record(&id, job.snooze(after.min(cql_lease::MAX_DURATION)).await);
        }
        Ok(Err(JobError::Cancel(error))) => {
            info!(%id, %error, "handler cancelled the job; discarding it");
            record(&id, job.discard(&format!("cancelled: {error}")).await);
        }
        Err(panic) => {
            let error = format!("handler panicked: {}", panic_message(panic.as_ref()));
            warn!(%id, %error, "handler panicked; counting a failed attempt");
            let state = job.fail(&error).await;
            log_failed(&id, &error, &state);
            record(&id, state.map(drop));
        }
    }
}

/// Logs where a failed attempt sent the job.
fn log_failed(id: &ItemId, error: &str, state: &Result<JobState, QueueError>) {
    match state {
        Ok(JobState::Discarded) => warn!(%id, error, "attempts exhausted; job discarded"),
        Ok(_) => info!(%id, error, "job failed; retried after its back-off"),
        Err(_) => {}
    }
}

/// Logs an outcome the store did not record: the queue hands the job out again.
fn record(id: &ItemId, result: Result<(), QueueError>) {
    if let Err(error) = result {
        warn!(%id, %error, "job outcome not recorded; the queue runs it again");
    }
}

/// The text a panic was raised with (`panic!` gives a `&str` or a `String`).
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}
