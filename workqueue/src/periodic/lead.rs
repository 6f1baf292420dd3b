//! The scheduler's task: campaign, and while leading, enqueue every job's ticks in order.

use std::collections::VecDeque;
use std::time::Duration;

use cql_election::Campaign;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::MAX_CATCH_UP_TICKS;
use super::schedule::{MissedTicks, PeriodicJob};
use crate::error::QueueError;
use crate::item::ItemId;
use crate::new_item::Enqueued;
use crate::queue::WorkQueue;

/// Longest sleep between looks at the wall clock: a clock stepped forward is noticed
/// within it.
const LOOK_AT_THE_CLOCK: Duration = Duration::from_secs(1);

pub(super) struct Leader {
    pub(super) queue: WorkQueue,
    pub(super) jobs: Vec<PeriodicJob>,
    pub(super) catch_up: Duration,
}

impl Leader {
    /// Campaigns until `shutdown` (then resigns) or `crash` (then stops without resigning),
    /// leading whenever elected.
    pub(super) async fn run(
        self,
        mut campaign: Campaign,
        shutdown: CancellationToken,
        crash: CancellationToken,
    ) {
        let handle = campaign.handle();
        let mut leading = campaign.leading();
        loop {
            let term = tokio::select! {
                biased;
                () = crash.cancelled() => break,
                () = shutdown.cancelled() => break,
                // Events are not needed here: read them so they do not pile up.
                Some(_) = campaign.next() => continue,
                elected = leading.wait_for(|leading| *leading) => match elected {
                    Ok(_) => handle.cancellation_token(),
                    Err(_) => {
                        error!("the scheduler's campaign ended; no more ticks from this process");
                        return;
                    }
                },
            };
            let Some(term) = term else { continue };
            info!("periodic scheduler leads: enqueueing ticks");
            tokio::select! {
                biased;
                () = crash.cancelled() => break,
                () = shutdown.cancelled() => break,
                () = self.lead(&term) => info!("periodic scheduler's term ended"),
            }
        }
        if crash.is_cancelled() {
            warn!("periodic scheduler aborted without resigning");
            handle.abort().await;
        } else if let Err(error) = handle.resign().await {
            warn!(%error, "resigning the scheduler's election failed; its lease expires by itself");
        }
    }

    /// Enqueues every job's ticks, in order, until `term` ends.
    async fn lead(&self, term: &CancellationToken) {
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
        loop {
            let now = self.now_ms();
            for (job, tick) in self.jobs.iter().zip(next.iter_mut()) {
                while let Some(due) = tick.filter(|due| *due <= now) {
                    if !self.enqueue(job, due, term).await {
                        return;
                    }
                    *tick = job.schedule.next_after(due);
                }
            }
            let Some(soonest) = next.iter().flatten().min().copied() else {
                info!("no periodic job has a tick to come");
                term.cancelled().await;
                return;
            };
            let wait = Duration::from_millis(u64::try_from(soonest - self.now_ms()).unwrap_or(0));
            tokio::select! {
                () = term.cancelled() => return,
                () = tokio::time::sleep(wait.min(LOOK_AT_THE_CLOCK)) => {}
            }
        }
    }

    /// The first tick of `job` to enqueue on taking over at `now`: the one after the last
    /// tick enqueued, if that lies within the catch-up window, else the next to come. `None`
    /// when the term ended first.
    async fn first_missing(
        &self,
        job: &PeriodicJob,
        now: i64,
        term: &CancellationToken,
    ) -> Option<Option<i64>> {
        let window = i64::try_from(self.catch_up.as_millis()).unwrap_or(i64::MAX);
        let mut ticks = VecDeque::new();
        let mut at = now.saturating_sub(window);
        while let Some(tick) = job.schedule.next_after(at).filter(|tick| *tick <= now) {
            if ticks.len() == MAX_CATCH_UP_TICKS {
                ticks.pop_front();
            }
            ticks.push_back(tick);
            at = tick;
        }
        let mut first = job.schedule.next_after(now);
        let mut missing = Vec::new();
        for tick in ticks.iter().rev() {
            if self.exists(job, *tick, term).await? {
                // Everything after the last tick enqueued was missed.
                if let Some(oldest) = missing.last() {
                    info!(
                        job = job.name(),
                        missed = missing.len(),
                        "enqueueing ticks missed while nobody led"
                    );
                    first = Some(*oldest);
                }
                return Some(first);
            }
            missing.push(*tick);
        }
        // No tick within the window: a first start, or a gap longer than the window.
        debug!(
            job = job.name(),
            "no earlier tick within the catch-up window"
        );
        Some(first)
    }

    /// Whether the tick's item exists (reads again on errors while the term lasts).
    async fn exists(&self, job: &PeriodicJob, tick: i64, term: &CancellationToken) -> Option<bool> {
        let key = self.queue.key(ItemId::unique(&job.key(tick)));
        loop {
            if term.is_cancelled() {
                return None;
            }
            match self.queue.store().read(&key).await {
                Ok(row) => return Some(row.is_some()),
                Err(error) => {
                    warn!(job = job.name(), tick, %error, "reading a tick failed; will retry");
                    self.pause(term).await;
                }
            }
        }
    }

    /// Enqueues the tick at `tick` of `job`; `false` when the term ended first. A tick whose
    /// item cannot be built or is refused is logged and skipped: no retry can help.
    async fn enqueue(&self, job: &PeriodicJob, tick: i64, term: &CancellationToken) -> bool {
        let item = match job.item(tick) {
            Ok(item) => item,
            Err(error) => {
                error!(job = job.name(), tick, %error, "a tick's item could not be built; skipping the tick");
                return true;
            }
        };
        loop {
            if term.is_cancelled() {
                return false;
            }
            match self.queue.enqueue_item(item.clone()).await {
                Ok(Enqueued::New(id)) => {
                    info!(job = job.name(), tick, %id, "periodic tick enqueued");
                    return true;
                }
                Ok(Enqueued::Duplicate { id, state }) => {
                    debug!(job = job.name(), tick, %id, ?state, "periodic tick already enqueued");
                    return true;
                }
                Err(error @ (QueueError::InvalidArgument(_) | QueueError::Payload(_))) => {
                    error!(job = job.name(), tick, %error, "a tick's item was refused; skipping the tick");
                    return true;
                }
                Err(error) => {
                    warn!(job = job.name(), tick, %error, "enqueueing a tick failed; will retry");
                    self.pause(term).await;
                }
            }
        }
    }

    async fn pause(&self, term: &CancellationToken) {
        tokio::select! {
            () = term.cancelled() => {}
            () = tokio::time::sleep(self.queue.config().timing.retry_period) => {}
        }
    }

    fn now_ms(&self) -> i64 {
        self.queue.now() / 1000
    }
}
