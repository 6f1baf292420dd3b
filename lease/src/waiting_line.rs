//! The line waiters of a lease stand in, on plain cells: who is next to propose.
//!
//! Concurrent Paxos rounds on one partition make each other retry (Cassandra backs off up
//! to 100 ms per lost round, then answers a timeout), so a lease that every waiter polls
//! with an LWT collapses as waiters grow. Waiters here stand in a FIFO line instead, one
//! plain cell each in the row `(name, "waiting")`, named by arrival time (20 digits of
//! microseconds), a per-process sequence (20 digits) and a random id, so the row's
//! clustering order is the line's order. Only the first in line proposes; the others read.
//!
//! The line decides nothing about who holds the lease: that is the LWT's job, so a line
//! that is wrong (clock skew between processes, a read that lags) costs at most a few
//! contended rounds, never safety. A ticket carries the lease's TTL and is rewritten while
//! its waiter waits: a crashed waiter leaves the line within a TTL. A ticket is deleted
//! with a later client timestamp when its waiter leaves, also when the waiting future is
//! dropped.
//!
//! Reads start at the head this client saw last (`cell >= head`), or, for a client that
//! has not read the line yet, at the arrival time of the last waiter that left its front
//! (a cell of its own, rewritten at every such departure), so they skip the deleted tickets
//! at the front of the partition instead of walking their tombstones. A ticket older than
//! that (a clock behind) is not seen by such a reader: it costs fairness, never safety.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use crate::cells::durable::Durable;
use crate::cells::{CellRef, CellStore, ClientClock};
use crate::error::StoreError;

/// The row of a lease's partition in the cell store that holds its line.
pub const WAITING: &str = "waiting";

/// The row of one cell, `head`, holding the arrival time (microseconds) of the last waiter
/// that left the line from its front: where a client that has not read the line yet starts,
/// instead of at the tombstones of every ticket before it.
pub const WAITING_HEAD: &str = "waiting_head";

/// How long the head cell outlives its last rewrite: longer than the line's tombstones
/// (`gc_grace_seconds` of the cell table, one hour) may stay unpurged.
const HEAD_TTL: Duration = Duration::from_secs(10 * 24 * 3600);

/// Names remembered per client before the head hints are forgotten (they only save reads).
const MAX_HINTS: usize = 4096;

/// This process's arrivals so far: orders arrivals that share a microsecond.
static ARRIVALS: AtomicU64 = AtomicU64::new(0);

/// One client's view of the lines of its leases: the store, and the head last seen per name.
#[derive(Clone)]
pub(crate) struct Line {
    cells: Durable,
    ttl: Duration,
    hints: Arc<Mutex<HashMap<String, Hint>>>,
}

/// What this client remembers of a line: it saves reads, nothing depends on it.
#[derive(Debug, Clone, Default)]
struct Hint {
    /// The first ticket seen last: where reads start.
    head: String,
    /// The time one hand-over took, as its waiters last saw the line move.
    hand_over: Option<Duration>,
}

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Line").field("ttl", &self.ttl).finish()
    }
}

impl Line {
    /// A line on `store`; tickets live `ttl` unless rewritten.
    pub(crate) fn new(
        store: Arc<dyn CellStore>,
        ttl: Duration,
        retry_interval: Duration,
        request_timeout: Duration,
    ) -> Self {
        Line {
            cells: Durable::new(store, retry_interval, request_timeout),
            ttl,
            hints: Arc::default(),
        }
    }

    fn hint(&self, name: &str) -> Hint {
        self.hints
            .lock()
            .ok()
            .and_then(|hints| hints.get(name).cloned())
            .unwrap_or_default()
    }

    fn remember(&self, name: &str, update: impl FnOnce(&mut Hint)) {
        if let Ok(mut hints) = self.hints.lock() {
            if hints.len() >= MAX_HINTS && !hints.contains_key(name) {
                hints.clear();
            }
            update(hints.entry(name.to_owned()).or_default());
        }
    }

    /// The time one hand-over of `name` took when this client last watched its line move.
    pub(crate) fn hand_over(&self, name: &str) -> Option<Duration> {
        self.hint(name).hand_over
    }

    /// Records the time one hand-over of `name` takes.
    pub(crate) fn set_hand_over(&self, name: &str, hand_over: Duration) {
        self.remember(name, |hint| hint.hand_over = Some(hand_over));
    }

    /// The first `limit` tickets of `name`'s line at or after `from` (or the head hint).
    async fn read(
        &self,
        name: &str,
        from: &str,
        limit: usize,
        give_up_at: Instant,
    ) -> Result<Vec<String>, StoreError> {
        let mut hint = self.hint(name).head;
        if hint.is_empty() {
            hint = self.shared_head(name, give_up_at).await;
        }
        let from = if from.is_empty() {
            hint.as_str()
        } else {
            hint.as_str().min(from)
        };
        let cells = self
            .cells
            .read_row(name, WAITING, from, limit, give_up_at)
            .await?;
        if let Some(first) = cells.first() {
            self.remember(name, |hint| hint.head.clone_from(&first.name));
        }
        Ok(cells.into_iter().map(|c| c.name).collect())
    }

    /// Where the line's live tickets start, as the last waiter to leave its front wrote it
    /// (empty when unknown or unreadable: the read then starts at the partition's start).
    async fn shared_head(&self, name: &str, give_up_at: Instant) -> String {
        let at = CellRef {
            lock: name,
            row: WAITING_HEAD,
            cell: "head",
        };
        match self.cells.read_cell(at, give_up_at).await {
            Ok(Some(micros)) => format!("{:020}", micros.max(0)),
            Ok(None) => String::new(),
            Err(error) => {
                warn!(lease = name, %error, "could not read where the waiting line starts");
                String::new()
            }
        }
    }

    /// The first `limit` tickets of `name`'s line, from where its live tickets start (as far
    /// as this client knows).
    ///
    /// # Errors
    /// The read's last error once `give_up_at` passed.
    pub(crate) async fn first_tickets(
        &self,
        name: &str,
        limit: usize,
        give_up_at: Instant,
    ) -> Result<Vec<String>, StoreError> {
        self.read(name, "", limit, give_up_at).await
    }

    /// Joins `name`'s line at its end: one plain write.
    ///
    /// # Errors
    /// The write's last error once `give_up_at` passed; the ticket may still land: it is
    /// deleted with a later timestamp (the dropped ticket does it), or expires within the TTL.
    ///
    /// `before_write` gets the ticket's cell before it is written (the waiter registers it
    /// in this process first, so no release here can pass it over while the write is under
    /// way); what it returns comes back with the ticket.
    pub(crate) async fn join<R>(
        &self,
        name: &str,
        give_up_at: Instant,
        before_write: impl FnOnce(&str) -> R,
    ) -> Result<(Ticket, R), StoreError> {
        let micros = ClientClock::next().max(0);
        let sequence = ARRIVALS.fetch_add(1, Ordering::Relaxed);
        let id = uuid::Uuid::new_v4().simple();
        let mut ticket = Ticket {
            line: self.clone(),
            name: name.to_owned(),
            cell: format!("{micros:020}{sequence:020}{id}"),
            written_at: Instant::now(),
            left: false,
        };
        let registered = before_write(&ticket.cell);
        ticket.write(give_up_at).await?;
        debug!(lease = name, ticket = %ticket.cell, "joined the waiting line");
        Ok((ticket, registered))
    }
}

/// A waiter's place in a line: rewritten while it waits, deleted when it leaves or is dropped.
pub(crate) struct Ticket {
    line: Line,
    name: String,
    cell: String,
    written_at: Instant,
    left: bool,
}

impl Ticket {
    async fn write(&mut self, give_up_at: Instant) -> Result<(), StoreError> {
        let sent = Instant::now();
        let at = CellRef {
            lock: &self.name,
            row: WAITING,
            cell: &self.cell,
        };
        self.line
            .cells
            .write(at, 1, Some(self.line.ttl), ClientClock::next(), give_up_at)
            .await?;
        self.written_at = sent;
        Ok(())
    }

    /// Rewrites the ticket when a third of its TTL has passed since the last write, so that
    /// it never expires while its waiter waits. A failed rewrite is logged: the next one
    /// may succeed, and a ticket that expires only costs its place.
    pub(crate) async fn keep_fresh(&mut self, give_up_at: Instant) {
        if self.written_at.elapsed() < self.line.ttl / 3 {
            return;
        }
        if let Err(error) = self.write(give_up_at).await {
            warn!(lease = %self.name, %error, "could not rewrite the waiting-line ticket");
        }
    }

    /// The ticket's cell: where it stands in its line's clustering order.
    pub(crate) fn cell(&self) -> &str {
        &self.cell
    }

    /// Leaves the line from its front: the delete, and the head cell's rewrite, are sent
    /// from a task of their own, so the caller does not wait for them (the next in line
    /// learns of it by its next read).
    pub(crate) fn leave(mut self) {
        self.spawn_delete(true);
    }

    fn spawn_delete(&mut self, from_the_front: bool) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // No runtime (shut down): the ticket expires within its TTL.
        };
        let cells = self.line.cells.clone();
        let (name, cell) = (self.name.clone(), self.cell.clone());
        // Later than every write of this ticket: wins over a rewrite still on its way.
        let timestamp = ClientClock::next();
        let give_up_at = Instant::now() + self.line.ttl;
        debug!(lease = %name, ticket = %cell, "leaving the waiting line");
        runtime.spawn(async move {
            let at = CellRef {
                lock: &name,
                row: WAITING,
                cell: &cell,
            };
            if let Err(error) = cells.delete(at, timestamp, give_up_at).await {
                warn!(lease = %name, %error, "could not delete the waiting-line ticket; it expires within its TTL");
            }
            let arrival = cell.get(..20).and_then(|micros| micros.parse::<i64>().ok());
            if let (true, Some(arrival)) = (from_the_front, arrival) {
                let head = CellRef {
                    lock: &name,
                    row: WAITING_HEAD,
                    cell: "head",
                };
                let written = cells
                    .write(head, arrival, Some(HEAD_TTL), ClientClock::next(), give_up_at)
                    .await;
                if let Err(error) = written {
                    warn!(lease = %name, %error, "could not record where the waiting line starts");
                }
            }
        });
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.spawn_delete(false);
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("name", &self.name)
            .field("cell", &self.cell)
            .finish_non_exhaustive()
    }
}
