//! The fair queue lock: a queue row ordered by arrival time, and a main row.
//!
//! Per lock name, a `queue` row whose cells are named by the 20-digit zero-padded
//! microsecond arrival time, then a 20-digit per-process arrival sequence, then the contender
//! id, so the store's clustering order is the queue order, and a `main` row with one cell per
//! contender trying to own the lock.
//!
//! - [`Lock::lock`] (the original design's GetLock): enqueue; wait until your cell is the first in the
//!   queue; write yourself into the main row and read it back; alone there, you own the lock;
//!   otherwise delete your main cell and try again. One change to the original design: the next in
//!   line (place 1) writes its main cell as soon as it sees the head's there, and keeps it
//!   while the head holds (see `lock/fair_claim.rs`), so a hand-over is the
//!   holder's delete and the next in line's next read.
//! - [`Lock::try_lock`] (TryGetLock): fail at once if the main row is not empty; else enqueue;
//!   if you are not first, dequeue and fail; if first, proceed as GetLock (a few immediate
//!   retries at most, never a wait for a holder). A waiter that arrived just after it may
//!   have claimed early; `try_lock` waits for that claim to give way (a few round trips;
//!   at most 1.5 × `retry_period` + `poll_interval` if its delete is retried), since it
//!   is first.
//! - While waiting and while held, the contender's cells are rewritten with their TTL (the
//!   original design's §5.3 lease; the guard does it through the shared hold machine); release
//!   deletes both cells.
//!
//! Arrival times come from the process's monotonic microsecond clock
//! ([`ClientClock`](crate::cells::ClientClock)) or, with [`FairLock::with_global_time`], from
//! [`GlobalTime`], the original design's non-decreasing cluster time.
//!
//! # Guarantees
//! Mutual exclusion rests on the main row alone (the original design's Lemma 1): of two contenders
//! that each write a cell and then read the row, at least one sees both, so two cannot both
//! see themselves alone. The queue only orders them: contenders whose arrival times differ
//! by more than the clock skew are granted in arrival order. A crashed holder or waiter is
//! removed by the TTL.
//!
//! # Limits
//! - **No fencing token**: arrival times come from clocks and are not unique per grant.
//! - Fairness depends on clocks: a contender whose clock is behind jumps ahead (use
//!   GlobalTime to bound this). Arrivals with the same time (one GlobalTime period, or a
//!   frozen GlobalTime) are ordered by the per-process sequence, then by id: within one
//!   process that is arrival order; across processes it is not, but a contender that keeps
//!   winning comes back with a higher sequence each time, so a tie cannot starve a waiter
//!   forever (with ids alone, the lowest id would win every tie).
//! - Waiters poll (the original design names notification as future work), each at a pace set by
//!   its place in the queue: the next in line at about one round trip (backing off while
//!   the holder holds on), the next few waiters slower the further back they stand,
//!   everyone beyond the first 16 places at `poll_interval` or, once it has seen the head
//!   move, less often the further back it estimates it stands (at most 4 × `poll_interval`
//!   apart). A hand-over costs at least two round trips (the release, then the next in
//!   line's read that no longer sees the holder; more when the holder releases before the
//!   next in line's claim lands), which bounds the lock at roughly `1 / (2 × round trip)`
//!   acquisitions per second whatever the number of contenders. Waiters of one process on
//!   one store share their queue reads, and the next two in line behind a contender of
//!   their own process are told when it claims, holds and leaves instead of reading the
//!   main row (`fair_local.rs`; an owner followed by a waiter of its own process writes
//!   its held mark only once it has held for a `poll_interval`, see `fair_claim.rs`); waiters further back look again at their pace's timer at the
//!   latest, and sooner once enough of the process's holders have left to bring them next
//!   in line: that timer cannot wake sooner than its tick (1 ms, several hand-overs on a
//!   fast store).
//! - Tombstones: dequeued cells sort before the live ones. Each lock object remembers the
//!   head it saw last and reads the queue from there (`cell >= head`), so reads do not walk
//!   the dead prefix of the partition. A latecomer that sorts before that head is not seen by
//!   this object; it can only collide in the main row (safe, then retried).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::info;

use super::bakery::poll_delay;
use super::fair_claim::{Waiter, mark_held};
use super::plain::{Attempt, Cells, PlainLock};
use super::transient::{Trouble, until_deadline, within_budget};
use super::{Contenders, Lock, LockError, LockGuard, LockOptions, check_request};
use crate::cells::CellStore;
use crate::cells::rows::{MAIN, QUEUE};
use crate::global_time::{GlobalTime, LocalClock};
use crate::shared_looks::{StoreId, Tally};
use queue::{QUEUE_LOOKS, SharedQueue};

/// This process's arrivals so far: orders arrivals that share a time.
static ARRIVALS: AtomicU64 = AtomicU64::new(0);

/// Immediate main-row retries of `try_lock` before it reports the lock held.
const TRY_ROUNDS: usize = 3;

/// The fair queue lock.
#[derive(Clone)]
pub struct FairLock {
    base: PlainLock,
    global_time: Option<Arc<GlobalTime>>,
    arrival_clock: Option<LocalClock>,
    /// The queue head last seen, per lock name: where queue reads start.
    heads: Arc<Mutex<HashMap<String, String>>>,
    /// The store's identity: this process's waiters on it share their queue reads.
    store_id: StoreId,
}

impl std::fmt::Debug for FairLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FairLock")
            .field("options", &self.base.options)
            .finish_non_exhaustive()
    }
}

enum Step {
    Owned,
    /// Not first in the queue: wait as the pace says.
    Waiting,
    /// Claimed the main row and may keep the claim: read it again soon.
    HoldingOn,
    Collided,
}

impl FairLock {
    /// A fair lock on `store`, with a random process key.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for bad timing.
    pub fn new(store: Arc<dyn CellStore>, options: LockOptions) -> Result<Self, LockError> {
        Self::with_contenders(store, options, Contenders::random())
    }

    /// As [`FairLock::new`] with the given contender ids.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for bad timing.
    pub fn with_contenders(
        store: Arc<dyn CellStore>,
        options: LockOptions,
        contenders: Contenders,
    ) -> Result<Self, LockError> {
        Ok(FairLock {
            store_id: StoreId::of(&store),
            base: PlainLock::new(store, options, contenders)?,
            global_time: None,
            arrival_clock: None,
            heads: Arc::default(),
        })
    }

    /// Takes arrival times from `time` (the cluster's non-decreasing time) instead of the
    /// local clock.
    pub fn with_global_time(mut self, time: Arc<GlobalTime>) -> Self {
        self.global_time = Some(time);
        self
    }

    /// Takes arrival times from `clock` (microseconds) instead of the process's
    /// [`ClientClock`](crate::cells::ClientClock): tests use it to model processes whose clocks disagree.
    pub fn with_arrival_clock(mut self, clock: LocalClock) -> Self {
        self.arrival_clock = Some(clock);
        self
    }

    /// `lock` proper: enqueue, then rounds until the lock is owned or `deadline` comes.
    /// Transient store errors are ridden through: the contender keeps its cells (and so its
    /// place in the queue) and tries the failed step again after a retry interval; a queue
    /// cell whose write was given up (and so deleted) is written again under the same name.
    async fn wait_in_line(
        &self,
        name: &str,
        started: Instant,
        deadline: Instant,
    ) -> Result<LockGuard, LockError> {
        let mut trouble = Trouble::new(name, self.base.options.timing.retry_period);
        let cells = self.base.contender(name);
        let looks = QUEUE_LOOKS.of(self.store_id, name);
        watched_by(&cells, &looks);
        let attempt = Attempt::new(&cells);
        let mine = loop {
            match self.queue_name(&cells).await {
                Ok(mine) => break mine,
                Err(error) => tokio::time::sleep_until(trouble.failed(error)?).await,
            }
        };
        let alive: Arc<dyn Send + Sync> = Arc::clone(&cells) as _;
        looks.queued(&mine, cells.id(), Arc::downgrade(&alive));
        let mut waiter = Waiter::new(mine.clone(), self.base.options.poll_interval);
        waiter.shared = Some(SharedQueue {
            looks,
            after: None,
            tally: Tally::default(),
        });
        loop {
            if let Some(shared) = waiter.shared.as_mut() {
                shared.tally = shared.looks.tally();
            }
            let claimed_before = cells.has(MAIN, cells.id());
            let step = async {
                if !cells.has(QUEUE, &mine) {
                    // Not (or no longer) in the queue: our arrival, or a write given up.
                    cells.put(QUEUE, &mine, 1).await?;
                    waiter.queued();
                }
                self.round(&cells, &mut waiter, true).await
            };
            let step = match step.await {
                Ok(step) => {
                    trouble.recovered();
                    step
                }
                Err(error) => {
                    let wake = trouble.failed(error)?;
                    if !cells.keep_fresh().await {
                        cells.clear().await;
                    }
                    // Past the deadline the caller's bound cuts this sleep.
                    tokio::time::sleep_until(wake).await;
                    continue;
                }
            };
            if !matches!(step, Step::HoldingOn) {
                waiter.quick_holds = 0;
            }
            // Our own claim or its removal this round must not count as news: from then on
            // only (what came between our reads and now waits for the pace at worst).
            if cells.has(MAIN, cells.id()) != claimed_before
                && let Some(shared) = waiter.shared.as_mut()
            {
                shared.tally = shared.looks.tally();
            }
            let pause = match step {
                Step::Owned if cells.keep_fresh().await => {
                    // The next in line, if one of ours, learns that we hold from this
                    // process: the mark in the store is for others (one of another
                    // process that comes next, a `try_lock`), and waits a poll, since
                    // most holds behind a crowd are over by then.
                    let next = waiter
                        .seen
                        .iter()
                        .position(|cell| *cell == mine)
                        .and_then(|place| waiter.seen.get(place + 1));
                    let next_here = waiter
                        .shared
                        .as_ref()
                        .is_some_and(|shared| next.is_some_and(|next| shared.looks.ours(next)));
                    let delay = if next_here {
                        self.base.options.poll_interval
                    } else {
                        Duration::ZERO
                    };
                    return Ok(self.granted(cells, attempt, delay));
                }
                Step::Owned => Duration::ZERO,
                Step::HoldingOn => waiter.hold_pause(),
                // Jittered, so that waiters do not poll in step.
                Step::Waiting => poll_delay(waiter.pace.delay(Instant::now())),
                Step::Collided => poll_delay(waiter.pace.collided()),
            };
            // Behind a contender of this process, wait to be told instead of reading (at
            // most `poll_interval`, should a word be missed).
            let told = waiter.shared.as_ref().and_then(|shared| {
                let claimed = match step {
                    Step::HoldingOn => true,
                    Step::Waiting => false,
                    Step::Owned | Step::Collided => return None,
                };
                let ahead = waiter.claim.ahead()?.to_owned();
                let until = Until::after_round(
                    &shared.looks,
                    (claimed, waiter.place),
                    Some(&ahead),
                    shared.tally,
                )?;
                // Reading back to back needs no word.
                if !until.replaces_the_pace() && pause.is_zero() {
                    return None;
                }
                Some((Arc::clone(&shared.looks), ahead, until))
            });
            // Waiting for word replaces the pace's timer: then the timer only guards
            // against a missed word.
            let told =
                told.map(|(looks, ahead, until)| (looks, ahead, until, until.replaces_the_pace()));
            let pause = match &told {
                Some((_, _, _, true)) => pause.max(self.base.options.poll_interval),
                _ => pause,
            };
            waiter.fast = pause.is_zero();
            waiter.paused = pause;
            if !cells.keep_fresh().await {
                // Our queue cell may have expired: write it again under the same name, which
                // keeps our place in the queue (if that fails, the next round writes it).
                cells.clear().await;
                match cells.put(QUEUE, &mine, 1).await {
                    Ok(()) => waiter.queued(),
                    Err(error) => {
                        trouble.failed(error)?;
                    }
                }
            }
            let wake = Instant::now() + pause;
            // A wait to be told ends at the deadline at the latest (the caller's bound cuts
            // it there); a plain pause past it would only end in a timeout.
            if !told.as_ref().is_some_and(|told| told.3) && wake >= deadline {
                cells.clear().await;
                attempt.disarm();
                return Err(LockError::Timeout {
                    name: name.to_owned(),
                    waited: started.elapsed(),
                });
            }
            if let Some((looks, ahead, until, _)) = told {
                until.wait(&looks, &ahead, wake.min(deadline)).await;
            } else if pause.is_zero() {
                // A sleep, however short, lasts until the timer's next tick (1 ms).
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep_until(wake).await;
            }
        }
    }

    /// The lock is ours: tells this process's waiters, and marks our main cell held in
    /// the store after `mark_after` ([`mark_held`]).
    fn granted(&self, cells: Arc<Cells>, attempt: Attempt, mark_after: Duration) -> LockGuard {
        attempt.disarm();
        QUEUE_LOOKS.of(self.store_id, &cells.lock).holds(cells.id());
        mark_held(&cells, mark_after);
        info!(lock = %cells.lock, id = cells.id(), "fair lock held");
        cells.into_guard("fair")
    }
}

#[async_trait]
impl Lock for FairLock {
    fn algorithm(&self) -> &'static str {
        "fair"
    }

    async fn lock_until(
        &self,
        name: &str,
        started: Instant,
        deadline: Instant,
    ) -> Result<LockGuard, LockError> {
        super::check_request(name, None)?;
        until_deadline(
            name,
            started,
            deadline,
            self.wait_in_line(name, started, deadline),
        )
        .await
    }

    async fn try_lock(&self, name: &str) -> Result<Option<LockGuard>, LockError> {
        check_request(name, None)?;
        within_budget(name, &self.base.options.timing, || self.try_once(name)).await
    }
}

#[path = "fair_local.rs"]
mod local;
use local::{Until, watched_by};

#[path = "fair_try.rs"]
mod attempt;

#[path = "fair_round.rs"]
mod round;

#[path = "fair_queue.rs"]
pub(super) mod queue;

#[cfg(test)]
#[path = "fair_test_store.rs"]
mod test_store;

#[cfg(test)]
#[path = "fair_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "fair_fault_tests.rs"]
mod faults;

#[cfg(test)]
#[path = "fair_early_claim_tests.rs"]
mod early_claim;
