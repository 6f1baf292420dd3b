//! Plain (non-LWT) cells: the narrow store the bakery, fair-queue and shadow-row locks and
//! [`GlobalTime`](crate::global_time::GlobalTime) run on.
//!
//! A cell lives at `(lock, row, cell)`: `lock` and `row` together are one partition, `cell`
//! is a clustering key, so a partition's cells come back sorted by name (the property the
//! fair lock's queue relies on). Every write and delete carries a client timestamp; the
//! store keeps, per cell, whatever carries the highest timestamp (a delete wins a tie), as
//! Cassandra and ScyllaDB do. [`ClientClock`] hands out timestamps that strictly increase
//! within the process, so a contender's delete always supersedes its own earlier writes,
//! whatever the coordinators' clocks say.
//!
//! No LWT is ever sent to these cells: mixing Paxos and plain writes on one cell breaks
//! both. Each method is one round trip. [`durable`] adds the retry rule these algorithms
//! need: a write whose answer is lost is sent again with the same cell and timestamp until
//! it succeeds (idempotent), and cleaned up by a later-timestamped delete otherwise.

pub mod durable;
pub mod faulty;
pub mod memory;
#[cfg(feature = "scylla")]
pub mod scylla;

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::error::StoreError;

/// The address of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CellRef<'a> {
    /// The lock (or time service) name: first half of the partition key.
    pub lock: &'a str,
    /// The row within the lock (`"number"`, `"queue"`, ...): second half of the partition key.
    pub row: &'a str,
    /// The cell name: the clustering key.
    pub cell: &'a str,
}

/// A live cell as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: i64,
}

/// A store of plain cells with client timestamps. Object safe: use `Arc<dyn CellStore>`.
#[async_trait]
pub trait CellStore: Send + Sync + 'static {
    /// Writes `value` at `at` with client timestamp `timestamp` (microseconds) and, when
    /// given, a TTL (whole seconds on Cassandra; rounded up). A write that loses to a
    /// higher-timestamped write or delete of the same cell has no effect.
    ///
    /// # Errors
    /// [`StoreError::Unknown`] when the write may or may not have applied (it may still land
    /// later: send it again with the same timestamp, or delete with a later one);
    /// [`StoreError::Unavailable`] when it certainly did not; [`StoreError::Rejected`] for a
    /// request the store refuses (not retryable).
    ///
    /// # Cancel safety
    /// Dropping the future leaves the outcome unknown, as [`StoreError::Unknown`] does.
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError>;

    /// Deletes the cell at `at` with client timestamp `timestamp`: every write of it with a
    /// timestamp up to and including `timestamp` is gone, even one that arrives later.
    ///
    /// # Errors
    /// As [`CellStore::write`].
    ///
    /// # Cancel safety
    /// As [`CellStore::write`]: the delete may or may not apply.
    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError>;

    /// Live cells of the row `(lock, row)` whose names are `>= from`, in name order, at most
    /// `limit` of them. Starting at `from` lets callers skip the deleted cells at the front
    /// of a partition instead of walking their tombstones.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] (or `Unknown`) when the read failed; nothing changed.
    ///
    /// # Cancel safety
    /// Cancel safe: a read.
    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError>;

    /// The value of one cell, `None` when it is absent, deleted or expired.
    ///
    /// # Errors
    /// As [`CellStore::read_row`].
    ///
    /// # Cancel safety
    /// Cancel safe: a read.
    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError>;
}

/// Client timestamps (microseconds since the Unix epoch) that strictly increase within the
/// process, even when the wall clock steps back: `max(wall clock, last + 1)`.
///
/// ```
/// use cql_lease::cells::ClientClock;
/// let a = ClientClock::next();
/// let b = ClientClock::next();
/// assert!(b > a);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ClientClock;

static LAST_TIMESTAMP: AtomicI64 = AtomicI64::new(0);

impl ClientClock {
    /// The next timestamp: above every one handed out before in this process.
    pub fn next() -> i64 {
        let wall = wall_micros();
        let mut last = LAST_TIMESTAMP.load(Ordering::Relaxed);
        loop {
            let next = wall.max(last + 1);
            match LAST_TIMESTAMP.compare_exchange_weak(
                last,
                next,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }
}

/// Microseconds since the Unix epoch by this machine's wall clock.
pub fn wall_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Row names used by the algorithms of this crate (one partition each per lock name).
pub mod rows {
    /// Bakery: who is choosing a number.
    pub const CHOOSING: &str = "choosing";
    /// Bakery: the numbers (tickets) taken.
    pub const NUMBER: &str = "number";
    /// Fair lock: the queue, cells named by time then contender id.
    pub const QUEUE: &str = "queue";
    /// Fair lock and shadow-row lock: who holds the lock.
    pub const MAIN: &str = "main";
    /// Shadow-row lock: where contenders meet before writing the main row.
    pub const SHADOW: &str = "shadow";
    /// GlobalTime: the time cell.
    pub const TIME: &str = "time";
}
