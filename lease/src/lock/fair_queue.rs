//! The [fair lock](super)'s rows as a waiter reads and writes them: its arrival in the queue,
//! its place there, the main row.

use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::super::fair_claim::{MAIN_READ, Waiter};
use super::super::fair_pace::{estimated_place, head_moved};
use super::super::plain::Cells;
use super::{ARRIVALS, FairLock};
use crate::cells::rows::{MAIN, QUEUE};
use crate::cells::{Cell, ClientClock};
use crate::lock::LockError;

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

    /// The names of the first (at most `limit`) cells of the queue, read from the last head
    /// seen.
    pub(super) async fn queue_head(
        &self,
        cells: &Cells,
        mine: &str,
        limit: usize,
    ) -> Result<Vec<String>, LockError> {
        let hint = self
            .heads
            .lock()
            .ok()
            .and_then(|h| h.get(&cells.lock).cloned())
            .unwrap_or_default();
        let from = hint.as_str().min(mine);
        let head = self
            .base
            .durable
            .read_row(&cells.lock, QUEUE, from, limit, cells.read_deadline())
            .await
            .map_err(|e| cells.store_error(e))?;
        if let (Some(first), Ok(mut heads)) = (head.first(), self.heads.lock()) {
            heads.insert(cells.lock.clone(), first.name.clone());
        }
        Ok(head.into_iter().map(|c| c.name).collect())
    }

    /// Reads the main row (at most [`MAIN_READ`] cells).
    pub(super) async fn read_main(&self, cells: &Cells) -> Result<Vec<Cell>, LockError> {
        self.base
            .durable
            .read_row(&cells.lock, MAIN, "", MAIN_READ, cells.read_deadline())
            .await
            .map_err(|e| cells.store_error(e))
    }

    /// Reads the queue's head and returns our place in it (0 = first); records it in the
    /// waiter's pace and claim.
    pub(super) async fn read_place(
        &self,
        cells: &Cells,
        waiter: &mut Waiter,
    ) -> Result<usize, LockError> {
        let sent = Instant::now();
        let limit = waiter.pace.read_limit();
        let head = self.queue_head(cells, &waiter.mine, limit).await?;
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
        waiter.pace.observed(now, now - sent, place, moved);
        Ok(place)
    }
}
