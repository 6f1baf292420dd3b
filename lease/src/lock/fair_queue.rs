//! The [fair lock](super)'s rows as a waiter reads and writes them: its arrival in the queue,
//! its place there, the main row.
//!
//! Waiters of one process on one lock share their reads of the queue's head (see
//! `shared_looks.rs`): one read serves every waiter that wants a newer one than its last,
//! so a crowd in one process reads the queue about as often as its fastest waiter. The
//! main row, which decides who owns the lock, is always read by each waiter itself.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::super::fair_claim::{MAIN_READ, Waiter};
use super::super::fair_pace::{WINDOW, estimated_place, head_moved};
use super::super::plain::Cells;
use super::{ARRIVALS, FairLock};
use crate::cells::rows::{MAIN, QUEUE};
use crate::cells::{Cell, ClientClock};
use crate::error::StoreError;
use crate::lock::LockError;
use crate::shared_looks::{Registry, SharedLooks, Tally};

/// What one look at a fair lock's queue read: its first cells from `from` on.
#[derive(Debug)]
pub(crate) struct QueueSeen {
    /// Where the read started: a waiter whose cell sorts before it reads for itself.
    from: String,
    /// The names of the cells read, at most [`WINDOW`] + 1.
    head: Result<Vec<String>, StoreError>,
    /// What this process's contenders had done before the read was sent.
    tally: Tally,
}

/// This process's waiters' looks at fair locks' queues, shared by lock.
pub(crate) static QUEUE_LOOKS: Registry<QueueSeen> = Registry::new();

/// A waiter's share in its process's looks at one queue.
pub(crate) struct SharedQueue {
    pub(crate) looks: std::sync::Arc<SharedLooks<QueueSeen>>,
    /// Only looks sent after this: after our queue cell was last written, and after the
    /// look we took last.
    pub(crate) after: Option<Instant>,
    /// What this process's contenders had done before the waiter's reads of this round
    /// were sent (what they may not show yet).
    pub(crate) tally: Tally,
}

impl FairLock {
    pub(super) async fn arrival_time(&self) -> Result<i64, LockError> {
        if let Some(clock) = &self.arrival_clock {
            return Ok(clock());
        }
        match &self.global_time {
            None => Ok(ClientClock::next()),
            Some(time) => time.now().await.map_err(|source| LockError::Store {
                name: "GlobalTime".into(),
                source,
            }),
        }
    }

    /// The queue cell's name of an arrival now: the arrival time, 20 digits, then the
    /// process's arrival sequence, 20 digits, then the id.
    pub(super) async fn queue_name(&self, cells: &Cells) -> Result<String, LockError> {
        let micros = self.arrival_time().await?.max(0);
        let sequence = ARRIVALS.fetch_add(1, Ordering::Relaxed);
        Ok(format!("{micros:020}{sequence:020}{}", cells.id()))
    }

    /// Enqueues under [`FairLock::queue_name`].
    pub(super) async fn enqueue(&self, cells: &Cells) -> Result<String, LockError> {
        let name = self.queue_name(cells).await?;
        cells.put(QUEUE, &name, 1).await?;
        Ok(name)
    }

    fn hint(&self, lock: &str) -> String {
        self.heads
            .lock()
            .ok()
            .and_then(|h| h.get(lock).cloned())
            .unwrap_or_default()
    }

    fn remember_head(&self, lock: &str, head: &[String]) {
        if let (Some(first), Ok(mut heads)) = (head.first(), self.heads.lock()) {
            heads.insert(lock.to_owned(), first.clone());
        }
    }

    /// The names of the first (at most `limit`) cells of the queue from `from` on, the read
    /// retried until `until`.
    async fn read_queue(
        &self,
        cells: &Cells,
        from: &str,
        limit: usize,
        until: Instant,
    ) -> Result<Vec<String>, StoreError> {
        let head = self
            .base
            .durable
            .read_row(&cells.lock, QUEUE, from, limit, until)
            .await?;
        let head: Vec<String> = head.into_iter().map(|c| c.name).collect();
        self.remember_head(&cells.lock, &head);
        Ok(head)
    }

    /// The names of the first (at most `limit`) cells of the queue, read from the last head
    /// seen.
    pub(super) async fn queue_head(
        &self,
        cells: &Cells,
        mine: &str,
        limit: usize,
    ) -> Result<Vec<String>, LockError> {
        let hint = self.hint(&cells.lock);
        let from = hint.as_str().min(mine);
        self.read_queue(cells, from, limit, cells.read_deadline())
            .await
            .map_err(|e| cells.store_error(e))
    }

    /// The first `limit` cells of the queue and how long the read took: from this
    /// process's shared looks when the waiter takes part in them and its cell is within
    /// where the look started, else read by the waiter itself.
    async fn queue_look(
        &self,
        cells: &Cells,
        waiter: &mut Waiter,
        limit: usize,
        share: bool,
    ) -> Result<(Vec<String>, Duration), LockError> {
        if let Some(shared) = waiter.shared.as_mut().filter(|_| share) {
            // The next few in line take no look older than half their last pause (or one
            // read's time): an old look would make them sleep past their turn.
            // Nor one sent before the last release here: the queue moved since.
            let floor = (waiter.place <= 2)
                .then(|| {
                    let recent =
                        Instant::now().checked_sub(waiter.pace.last_took().max(waiter.paused / 2));
                    recent.max(shared.looks.last_release())
                })
                .flatten();
            let mine = waiter.mine.as_str();
            let looks = &shared.looks;
            // A shared look tries its read for one request timeout or two (a failed look is
            // shared too: each waiter pauses and looks again); one under way for longer is
            // not being polled (see `shared_looks`).
            let request = self.base.options.timing.effective_request_timeout();
            let patience = request * 3;
            let look = looks
                .look(shared.after.max(floor), patience, async || {
                    let tally = looks.tally();
                    let from = self.hint(&cells.lock).as_str().min(mine).to_owned();
                    let until = Instant::now() + request * 2;
                    let head = self.read_queue(cells, &from, WINDOW + 1, until).await;
                    QueueSeen { from, head, tally }
                })
                .await;
            shared.after = Some(look.sent);
            // The look may be older than this round.
            shared.tally = shared.tally.min(look.seen.tally);
            if look.seen.from.as_str() <= mine {
                let mut head = look.seen.head.clone().map_err(|e| cells.store_error(e))?;
                self.remember_head(&cells.lock, &head);
                head.truncate(limit);
                return Ok((head, look.took));
            }
        }
        let sent = Instant::now();
        let head = self.queue_head(cells, &waiter.mine, limit).await?;
        Ok((head, sent.elapsed()))
    }

    /// Reads the main row (at most [`MAIN_READ`] cells).
    pub(super) async fn read_main(&self, cells: &Cells) -> Result<Vec<Cell>, LockError> {
        self.base
            .durable
            .read_row(&cells.lock, MAIN, "", MAIN_READ, cells.read_deadline())
            .await
            .map_err(|e| cells.store_error(e))
    }

    /// Reads the queue's head (shared with this process's other waiters when `share`) and
    /// returns our place in it (0 = first); records it in the waiter's pace and claim.
    pub(super) async fn read_place(
        &self,
        cells: &Cells,
        waiter: &mut Waiter,
        share: bool,
    ) -> Result<usize, LockError> {
        let limit = waiter.pace.read_limit();
        let (head, took) = self.queue_look(cells, waiter, limit, share).await?;
        let now = Instant::now();
        // Not among the cells read (or our own cell is gone: `keep_fresh` restores it):
        // at least `limit`, and where the arrival times suggest.
        let place = match head.iter().position(|c| *c == waiter.mine) {
            Some(place) => place,
            None if head.len() < limit => limit,
            None => estimated_place(&head, &waiter.mine).max(limit),
        };
        let moved = head
            .first()
            .and_then(|first| head_moved(&waiter.seen, first));
        waiter.claim.saw_queue(&head, place);
        waiter.seen = head;
        waiter.pace.observed(now, took, place, moved);
        Ok(place)
    }
}
