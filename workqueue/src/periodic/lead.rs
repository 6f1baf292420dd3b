//! The scheduler's task: campaign, and while leading, enqueue every job's ticks in order.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use cql_election::{Campaign, CampaignHandle};
use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::MAX_CATCH_UP_TICKS;
use super::schedule::{MissedTicks, PeriodicJob};
use crate::error::QueueError;
use crate::item::ItemId;
use crate::new_item::{Enqueued, NewItem};
use crate::queue::WorkQueue;
use crate::store::SWEPT;

/// Longest sleep between looks at the wall clock: a clock stepped forward is noticed
/// within it.
const LOOK_AT_THE_CLOCK: Duration = Duration::from_secs(1);

pub(super) struct Leader {
    pub(super) queue: WorkQueue,
    pub(super) jobs: Vec<PeriodicJob>,
    /// How far back ticks are enqueued late, in ms.
    pub(super) catch_up: i64,
    /// How far back a new leader looks for the last tick enqueued, in ms (at least
    /// `catch_up`; within `done_retention`, so a tick that ran is still found).
    pub(super) horizon: i64,
}

/// What ends a term's work: the term itself, or the scheduler's stop (between enqueues).
struct Term {
    stop: CancellationToken,
    shutdown: CancellationToken,
    /// The term's local deadline: nothing is sent past it (a paused leader wakes to a
    /// deadline passed before its term's token is cancelled).
    deadline: Option<watch::Receiver<Instant>>,
}

impl Term {
    fn over(&self) -> bool {
        self.stop.is_cancelled()
            || self.shutdown.is_cancelled()
            || self
                .deadline
                .as_ref()
                .is_some_and(|deadline| Instant::now() >= *deadline.borrow())
    }

    async fn sleep(&self, pause: Duration) {
        tokio::select! {
            () = self.stop.cancelled() => {}
            () = self.shutdown.cancelled() => {}
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// How one tick's enqueue ended.
enum Sent {
    /// Enqueued, found enqueued already, or skipped for good.
    Done,
    /// Failed for now: try again later.
    Later,
}

impl Leader {
    /// Campaigns until `shutdown` (then resigns, after an enqueue under way) or `crash`
    /// (then stops at once without resigning), leading whenever elected.
    pub(super) async fn run(
        self,
        mut campaign: Campaign,
        shutdown: CancellationToken,
        crash: CancellationToken,
    ) {
        let handle = campaign.handle();
        let mut leading = campaign.leading();
        loop {
            let elected = tokio::select! {
                biased;
                () = crash.cancelled() => break,
                () = shutdown.cancelled() => break,
                // Events are not needed here: read them so they do not pile up.
                Some(_) = campaign.next() => continue,
                elected = leading.wait_for(|leading| *leading) => elected.is_ok(),
            };
            if !elected {
                error!("the scheduler's campaign ended; no more ticks from this process");
                return;
            }
            let Some(term) = self.term(&handle, &shutdown) else {
                continue;
            };
            info!("periodic scheduler leads: enqueueing ticks");
            tokio::select! {
                biased;
                () = crash.cancelled() => break,
                () = self.lead(&term) => info!("periodic scheduler's term ended"),
            }
            // A term over by its deadline may not be cancelled yet: wait for that, so the
            // campaign's watch says the term has ended before looking again.
            tokio::select! {
                biased;
                () = crash.cancelled() => break,
                () = shutdown.cancelled() => {}
                () = term.stop.cancelled() => {}
            }
            if shutdown.is_cancelled() {
                break;
            }
        }
        if crash.is_cancelled() {
            warn!("periodic scheduler aborted without resigning");
            handle.abort().await;
        } else if let Err(error) = handle.resign().await {
            warn!(%error, "resigning the scheduler's election failed; its lease expires by itself");
        }
    }

    fn term(&self, handle: &CampaignHandle, shutdown: &CancellationToken) -> Option<Term> {
        Some(Term {
            stop: handle.cancellation_token()?,
            shutdown: shutdown.clone(),
            deadline: handle.term_deadline(),
        })
    }

    /// Enqueues every job's ticks, in order, until the term is over. A job whose enqueue
    /// fails is tried again after `retry_period`, without holding up the others.
    async fn lead(&self, term: &Term) {
        let now = self.now_ms();
        let mut next = Vec::with_capacity(self.jobs.len());
        for job in &self.jobs {
            let first = match job.missed {
                MissedTicks::Skip => job.schedule.next_after(now.saturating_sub(1)),
                MissedTicks::RunLate => match self.first_missing(job, now, term).await {
                    Some(first) => first,
                    None => return,
                },
            };
            next.push(first);
        }
        let retry = self.queue.config().timing.retry_period;
        let mut not_before: Vec<Option<Instant>> = vec![None; self.jobs.len()];
        loop {
            let now = self.now_ms();
            for ((job, tick), wait) in self.jobs.iter().zip(&mut next).zip(&mut not_before) {
                if wait.is_some_and(|until| Instant::now() < until) {
                    continue;
                }
                *wait = None;
                while let Some(due) = tick.filter(|due| *due <= now) {
                    // Never further back than the catch-up window: a leader that fell
                    // behind (the store down, the process paused) skips older ticks.
                    // (None: no tick of the job lies in the window; the next one is to come.)
                    let oldest = self
                        .oldest_to_run(job, now)
                        .or_else(|| job.schedule.next_after(now));
                    if oldest.is_none_or(|oldest| due < oldest) {
                        warn!(
                            job = job.name(),
                            from = due,
                            to = oldest,
                            "ticks older than the catch-up window skipped"
                        );
                        *tick = oldest;
                        continue;
                    }
                    if term.over() {
                        return;
                    }
                    match self.enqueue(job, due).await {
                        Sent::Done => *tick = job.schedule.next_after(due),
                        Sent::Later => {
                            *wait = Some(Instant::now() + retry);
                            break;
                        }
                    }
                }
            }
            if term.over() {
                return;
            }
            // Until the soonest tick of a job not waiting to retry, or the soonest retry.
            let now = self.now_ms();
            let pause = next
                .iter()
                .zip(&not_before)
                .filter_map(|(tick, wait)| match wait {
                    Some(until) => Some(until.saturating_duration_since(Instant::now())),
                    None => tick
                        .map(|tick| Duration::from_millis(u64::try_from(tick - now).unwrap_or(0))),
                })
                .min()
                .unwrap_or(LOOK_AT_THE_CLOCK);
            term.sleep(pause.min(LOOK_AT_THE_CLOCK)).await;
        }
    }

    /// The oldest tick of `job` that may still run at `now`: within the catch-up window,
    /// and among the last [`MAX_CATCH_UP_TICKS`].
    fn oldest_to_run(&self, job: &PeriodicJob, now: i64) -> Option<i64> {
        let window_start = now.saturating_sub(self.catch_up);
        let mut oldest = None;
        let mut at = now.saturating_add(1);
        for _ in 0..MAX_CATCH_UP_TICKS {
            match job.schedule.previous_before(at) {
                Some(tick) if tick > window_start => {
                    oldest = Some(tick);
                    at = tick;
                }
                _ => break,
            }
        }
        oldest
    }

    /// The first tick of `job` to enqueue on taking over at `now`. Walking back from `now`
    /// to the last tick enqueued (at most [`MAX_CATCH_UP_TICKS`] reads, no further back
    /// than the horizon): the ticks after it that lie within the catch-up window were
    /// missed and run late. Without one (a first start, or a gap past the horizon or the
    /// read cap), the next tick from `now` on. `None` when the term ended first.
    async fn first_missing(&self, job: &PeriodicJob, now: i64, term: &Term) -> Option<Option<i64>> {
        let window_start = now.saturating_sub(self.catch_up);
        let horizon = now.saturating_sub(self.horizon.max(self.catch_up));
        let mut oldest_missing = None;
        let mut missed = 0;
        let mut at = now.saturating_add(1);
        for _ in 0..=MAX_CATCH_UP_TICKS {
            let Some(tick) = job
                .schedule
                .previous_before(at)
                .filter(|tick| *tick > horizon)
            else {
                break;
            };
            if self.exists(job, tick, term).await? {
                if let Some(first) = oldest_missing {
                    info!(
                        job = job.name(),
                        missed, "enqueueing ticks missed while nobody led"
                    );
                    return Some(Some(first));
                }
                return Some(job.schedule.next_after(now));
            }
            if tick > window_start {
                oldest_missing = Some(tick);
                missed += 1;
            }
            at = tick;
        }
        debug!(
            job = job.name(),
            "no tick enqueued within the horizon: starting from now"
        );
        Some(job.schedule.next_after(now.saturating_sub(1)))
    }

    /// Whether the tick's item was enqueued (reads again on errors while the term lasts).
    /// A row that index upkeep sealed as an orphan (its enqueue died midway) does not count:
    /// enqueueing the tick revives it.
    async fn exists(&self, job: &PeriodicJob, tick: i64, term: &Term) -> Option<bool> {
        let key = self.queue.key(ItemId::unique(&job.key(tick)));
        loop {
            if term.over() {
                return None;
            }
            match self.queue.store().read(&key).await {
                Ok(row) => return Some(row.is_some_and(|row| row.origin != SWEPT)),
                Err(error) => {
                    warn!(job = job.name(), tick, %error, "reading a tick failed; will retry");
                    term.sleep(self.queue.config().timing.retry_period).await;
                }
            }
        }
    }

    /// Enqueues the tick at `tick` of `job`, once. A tick whose item cannot be built (an
    /// error or a panic in `make`) or is refused is logged and skipped: no retry can help.
    async fn enqueue(&self, job: &PeriodicJob, tick: i64) -> Sent {
        let item = match std::panic::catch_unwind(AssertUnwindSafe(|| job.item(tick))) {
            Ok(Ok(item)) => item,
            Ok(Err(error)) => {
                error!(job = job.name(), tick, %error, "a tick's item could not be built; skipping the tick");
                return Sent::Done;
            }
            Err(_) => {
                error!(
                    job = job.name(),
                    tick, "building a tick's item panicked; skipping the tick"
                );
                return Sent::Done;
            }
        };
        self.send(job, tick, item).await
    }

    async fn send(&self, job: &PeriodicJob, tick: i64, item: NewItem) -> Sent {
        match self.queue.enqueue_item(item).await {
            Ok(Enqueued::New(id)) => {
                info!(job = job.name(), tick, %id, "periodic tick enqueued");
                Sent::Done
            }
            Ok(Enqueued::Duplicate { id, state }) => {
                debug!(job = job.name(), tick, %id, ?state, "periodic tick already enqueued");
                Sent::Done
            }
            Err(error @ (QueueError::InvalidArgument(_) | QueueError::Payload(_))) => {
                error!(job = job.name(), tick, %error, "a tick's item was refused; skipping the tick");
                Sent::Done
            }
            Err(error) => {
                warn!(job = job.name(), tick, %error, "enqueueing a tick failed; will retry");
                Sent::Later
            }
        }
    }

    fn now_ms(&self) -> i64 {
        self.queue.now() / 1000
    }
}
