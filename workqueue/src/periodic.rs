//! Periodic jobs, enqueued by the leader of an election: a [`Scheduler`] in every process
//! campaigns, and whichever leads enqueues each [`PeriodicJob`]'s ticks, each tick one item
//! across the fleet (River's periodic jobs, on this queue).
//!
//! A tick's item carries a unique key made of the job's name and the tick's time, so a tick
//! enqueued twice (two leaders overlapping while a term hands over, a failover mid-tick, a
//! lost answer resent) is one item: the second enqueue is a [`crate::Enqueued::Duplicate`].
//! No tick older than the catch-up window ([`SchedulerBuilder::catch_up`], at most half the
//! queue's [`QueueConfig::done_retention`](crate::QueueConfig::done_retention)) is ever
//! enqueued, so a tick's key is still remembered whenever it could be enqueued again, and
//! a leader sends nothing past its term's local deadline.
//!
//! A new leader walks back from now, one item read per tick, to the last tick enqueued (at
//! most [`MAX_CATCH_UP_TICKS`] reads, no further back than `done_retention`), and enqueues
//! late the ticks after it that lie within the window ([`MissedTicks::RunLate`]), or only
//! the ticks from its election on ([`MissedTicks::Skip`]). Without such a tick (a first
//! start, or a gap longer than that) it starts from now. A job that ticks less often than
//! `done_retention` (a daily job with the default 24 h) forgets its last tick before the
//! next: raise `done_retention` for it to catch up.
//!
//! Cost: one unique enqueue per tick (one LWT and an index write; a duplicate adds a read);
//! at each new term, per job, one item read per tick missed (one when none was).

mod lead;
mod schedule;

use std::collections::HashSet;
use std::time::Duration;

use cql_election::{Election, ElectionError};
use cql_lease::{InvalidArgument, MAX_OWNER_LEN, check_text};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

pub use schedule::{
    MAX_INTERVAL, MAX_JOB_NAME_LEN, MIN_INTERVAL, MissedTicks, PeriodicJob, Schedule,
};

use crate::config::ClaimMode;
use crate::error::QueueError;
use crate::queue::WorkQueue;

/// Most ticks per job a new leader looks back at.
pub const MAX_CATCH_UP_TICKS: usize = 100;

/// Most periodic jobs one scheduler runs.
pub const MAX_PERIODIC_JOBS: usize = 1_000;

/// Campaigns in an election and, while it leads, enqueues its periodic jobs' ticks.
///
/// Run one in every process that may schedule (same election name, same jobs): one of them
/// leads at a time, and if it dies another takes over within the election's lease duration,
/// enqueueing the ticks missed meanwhile ([`MissedTicks`]). Workers run the ticks' items like
/// any other (a [`crate::QueueClient`] or [`crate::Worker`] on the same queue, anywhere).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use cql_election::Election;
/// use cql_lease::MemoryStore;
/// use cql_workqueue::periodic::{PeriodicJob, Schedule, Scheduler};
/// use cql_workqueue::{NewItem, QueueConfig, WorkQueue, memory::MemoryQueueStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "reports", QueueConfig::default())?;
/// let election = Election::new(Arc::new(MemoryStore::new()), "report-scheduler", Default::default())
///     .expect("election");
/// let nightly = PeriodicJob::new("nightly-report", Schedule::cron("0 0 3 * * *")?, |_tick| {
///     Ok(NewItem::text("build the nightly report"))
/// });
/// let rollup = PeriodicJob::new("rollup", Schedule::every(Duration::from_secs(60))?, |tick| {
///     NewItem::json(&tick)
/// });
/// let scheduler = Scheduler::builder(queue.clone(), election, "node-a")
///     .job(nightly)
///     .job(rollup)
///     .start()?;
/// tokio::time::sleep(Duration::from_secs(125)).await; // two or three rollup ticks
/// assert!(scheduler.is_leader());
/// scheduler.stop().await;
/// let ticks = queue.stats().await?.available; // two or three rollups, perhaps a nightly
/// assert!((2..=4).contains(&ticks), "{ticks}");
/// # Ok::<(), cql_workqueue::QueueError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Scheduler {
    shutdown: CancellationToken,
    crash: CancellationToken,
    leading: watch::Receiver<bool>,
    task: Option<JoinHandle<()>>,
}

/// The jobs and settings of a [`Scheduler`]; see [`Scheduler::builder`].
#[derive(Debug)]
pub struct SchedulerBuilder {
    queue: WorkQueue,
    election: Election,
    candidate: String,
    jobs: Vec<PeriodicJob>,
    catch_up: Option<Duration>,
}

impl Scheduler {
    /// A scheduler that enqueues on `queue` while `candidate` leads `election`.
    pub fn builder(queue: WorkQueue, election: Election, candidate: &str) -> SchedulerBuilder {
        SchedulerBuilder {
            queue,
            election,
            candidate: candidate.to_owned(),
            jobs: Vec::new(),
            catch_up: None,
        }
    }

    /// `true` while this scheduler leads (and enqueues).
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Whether this scheduler leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Stops: an enqueue under way ends first (its answer read back if lost), no other is
    /// sent, and the election is resigned so another process takes over within one retry
    /// period.
    ///
    /// # Cancel safety
    ///
    /// Dropping it leaves the scheduler stopping in the background.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
            && error.is_panic()
        {
            error!(%error, "the periodic scheduler's task panicked");
        }
        info!("periodic scheduler stopped");
    }

    /// Stops at once without resigning, as a crash would: an enqueue under way is dropped
    /// (its item may or may not exist) and the election's lease stays until its TTL. For
    /// tests and failure drills.
    ///
    /// # Cancel safety
    ///
    /// Dropping it leaves the scheduler stopping in the background.
    pub async fn abort(mut self) {
        self.crash.cancel();
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
            && error.is_panic()
        {
            error!(%error, "the periodic scheduler's task panicked");
        }
    }
}

impl Drop for Scheduler {
    /// Stops and resigns in the background.
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl SchedulerBuilder {
    /// Adds a periodic job.
    #[must_use]
    pub fn job(mut self, job: PeriodicJob) -> Self {
        self.jobs.push(job);
        self
    }

    /// How far back a new leader looks for ticks nobody enqueued (at most
    /// [`MAX_CATCH_UP_TICKS`] per job). Default: an hour, or half the queue's
    /// `done_retention` if less; at most half of it (a tick older than its
    /// `done_retention` could be enqueued again).
    #[must_use]
    pub fn catch_up(mut self, window: Duration) -> Self {
        self.catch_up = Some(window);
        self
    }

    /// Starts campaigning, in a task of its own.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`], with nothing started or sent, for: no job, more
    /// than [`MAX_PERIODIC_JOBS`], a job name given twice or malformed, a bad candidate id,
    /// a catch-up window over half the queue's `done_retention`, a queue in
    /// [`ClaimMode::Bakery`] (no unique keys there), or a call outside a Tokio runtime.
    pub fn start(self) -> Result<Scheduler, QueueError> {
        let config = self.queue.config();
        let most = config.done_retention / 2;
        let catch_up = self.catch_up.unwrap_or(most.min(Duration::from_secs(3600)));
        if catch_up > most {
            return Err(invalid(
                "catch-up window",
                format!("{catch_up:?} is over half the queue's done_retention ({most:?})"),
            ));
        }
        if config.claim_mode == ClaimMode::Bakery {
            return Err(invalid(
                "queue",
                "periodic jobs need unique keys, which the bakery claim mode has not".into(),
            ));
        }
        if self.jobs.is_empty() || self.jobs.len() > MAX_PERIODIC_JOBS {
            return Err(invalid(
                "jobs",
                format!("a scheduler runs 1 to {MAX_PERIODIC_JOBS} periodic jobs"),
            ));
        }
        let mut names = HashSet::new();
        for job in &self.jobs {
            job.check()?;
            if !names.insert(job.name.as_str()) {
                return Err(invalid(
                    "jobs",
                    format!("job {:?} is given twice", job.name),
                ));
            }
        }
        check_text("candidate", &self.candidate, MAX_OWNER_LEN)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(invalid(
                "runtime",
                "Scheduler::start must be called inside a Tokio runtime".into(),
            ));
        }
        let campaign =
            self.election
                .campaign(&self.candidate, None)
                .map_err(|error| match error {
                    ElectionError::InvalidArgument(error) => QueueError::InvalidArgument(error),
                    other => invalid("candidate", other.to_string()),
                })?;
        let leading = campaign.leading();
        let (shutdown, crash) = (CancellationToken::new(), CancellationToken::new());
        info!(
            election = self.election.name(),
            candidate = %self.candidate,
            jobs = self.jobs.len(),
            ?catch_up,
            "periodic scheduler starts campaigning"
        );
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let leader = lead::Leader {
            catch_up: millis(catch_up),
            horizon: millis(config.done_retention),
            queue: self.queue,
            jobs: self.jobs,
        };
        let task = tokio::spawn(leader.run(campaign, shutdown.clone(), crash.clone()));
        Ok(Scheduler {
            shutdown,
            crash,
            leading,
            task: Some(task),
        })
    }
}

fn invalid(field: &'static str, reason: String) -> QueueError {
    InvalidArgument::Invalid { field, reason }.into()
}
