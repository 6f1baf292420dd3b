//! The embedded cell store: last-write-wins by client timestamp, TTLs on tokio time, faults.
//!
//! It behaves like one Cassandra partition replica set read and written at QUORUM: every
//! completed write is seen by every later read. Expired and deleted cells stay as
//! tombstones carrying their timestamp (so a late, older write still loses), and
//! [`MemoryCellStore::tombstones_walked`] counts how many a range read stepped over, which
//! is what a real replica would have had to read and discard.
//!
//! Faults: the generic [`FaultRules`] (latency, unavailable, lost answers with or without
//! the write applied) plus [`MemoryCellStore::inject_late_apply`]: the answer is lost and
//! the write lands later, the case client timestamps exist for.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::debug;

use super::{Cell, CellRef, CellStore};
use crate::error::StoreError;
use crate::memory::{Fault, FaultRules, Times};

/// An operation of the cell store, for aiming faults and counting calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CellOp {
    /// [`CellStore::write`]
    Write,
    /// [`CellStore::delete`]
    Delete,
    /// [`CellStore::read_row`]
    ReadRow,
    /// [`CellStore::read_cell`]
    ReadCell,
}

#[derive(Debug, Clone, Copy)]
struct Version {
    /// `None` is a tombstone.
    value: Option<i64>,
    timestamp: i64,
    expires_at: Option<Instant>,
}

impl Version {
    fn live(&self, now: Instant) -> Option<i64> {
        match self.expires_at {
            Some(at) if at <= now => None,
            _ => self.value,
        }
    }

    /// Cassandra's reconciliation: higher timestamp wins; on a tie a delete wins, then the
    /// larger value.
    fn beats(&self, other: &Version) -> bool {
        (self.timestamp, self.value.is_none(), self.value)
            > (other.timestamp, other.value.is_none(), other.value)
    }
}

type Rows = HashMap<(String, String), BTreeMap<String, Version>>;

/// In-process cell store with fault injection. Cheap to clone (shared state).
///
/// ```
/// use cql_lease::cells::memory::{CellOp, MemoryCellStore};
/// use cql_lease::memory::{Fault, Times};
/// let store = MemoryCellStore::new();
/// // The next write is applied but its answer is lost.
/// store.inject(Some(CellOp::Write), Fault::TimeoutAfterApply, Times::Next(1));
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryCellStore {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    rows: Mutex<Rows>,
    faults: FaultRules<CellOp>,
    late: FaultRules<CellOp>,
    calls: [AtomicU64; 4],
    tombstones_walked: AtomicU64,
    /// Writes and deletes per `"{row}|{name}"` (a partition of the CQL cell table).
    mutations: Mutex<HashMap<String, u64>>,
}

impl MemoryCellStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a fault for calls of `op` (all when `None`).
    pub fn inject(&self, op: Option<CellOp>, fault: Fault, times: Times) {
        debug!(?op, ?fault, ?times, "cell fault injected");
        self.inner.faults.add(op, fault, times);
    }

    /// Makes matching writes and deletes lose their answer and land `delay` later.
    pub fn inject_late_apply(&self, op: Option<CellOp>, delay: Duration, times: Times) {
        debug!(?op, ?delay, ?times, "late apply injected");
        self.inner.late.add(op, Fault::Latency(delay), times);
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.inner.faults.clear();
        self.inner.late.clear();
    }

    /// Round trips so far (every call, failed or not).
    pub fn round_trips(&self) -> u64 {
        self.inner
            .calls
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Calls so far of one operation.
    pub fn calls(&self, op: CellOp) -> u64 {
        self.inner.calls[op as usize].load(Ordering::Relaxed)
    }

    /// Writes and deletes so far per row of a name, keyed `"{row}|{name}"` as the CQL cell
    /// table's partitions are: how evenly work spreads over partitions.
    pub fn mutations_by_partition(&self) -> HashMap<String, u64> {
        self.inner
            .mutations
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// Tombstones (deleted or expired cells) that range reads have stepped over so far.
    pub fn tombstones_walked(&self) -> u64 {
        self.inner.tombstones_walked.load(Ordering::Relaxed)
    }

    fn apply(&self, at: CellRef<'_>, version: Version) {
        let Ok(mut rows) = self.inner.rows.lock() else {
            return;
        };
        let row = rows
            .entry((at.lock.to_owned(), at.row.to_owned()))
            .or_default();
        match row.get(at.cell) {
            Some(old) if !version.beats(old) => {}
            _ => {
                row.insert(at.cell.to_owned(), version);
            }
        }
    }

    async fn mutate(
        &self,
        op: CellOp,
        at: CellRef<'_>,
        version: Version,
    ) -> Result<(), StoreError> {
        self.inner.calls[op as usize].fetch_add(1, Ordering::Relaxed);
        if let Ok(mut mutations) = self.inner.mutations.lock() {
            *mutations
                .entry(format!("{}|{}", at.row, at.lock))
                .or_default() += 1;
        }
        let (late, _) = self.inner.late.draw(op);
        if !late.is_zero() {
            let this = self.clone();
            let (lock, row, cell) = (at.lock.to_owned(), at.row.to_owned(), at.cell.to_owned());
            tokio::spawn(async move {
                tokio::time::sleep(late).await;
                let at = CellRef {
                    lock: &lock,
                    row: &row,
                    cell: &cell,
                };
                this.apply(at, version);
            });
            return Err(StoreError::Unknown(format!(
                "injected: answer lost, {op:?} lands later"
            )));
        }
        self.inner
            .faults
            .around(op, || {
                self.apply(at, version);
                Ok(())
            })
            .await
    }
}

#[async_trait]
impl CellStore for MemoryCellStore {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        let version = Version {
            value: Some(value),
            timestamp,
            expires_at: ttl.map(|ttl| Instant::now() + ttl),
        };
        self.mutate(CellOp::Write, at, version).await
    }

    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        let version = Version {
            value: None,
            timestamp,
            expires_at: None,
        };
        self.mutate(CellOp::Delete, at, version).await
    }

    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        self.inner.calls[CellOp::ReadRow as usize].fetch_add(1, Ordering::Relaxed);
        self.inner
            .faults
            .around(CellOp::ReadRow, || {
                let now = Instant::now();
                let rows = self
                    .inner
                    .rows
                    .lock()
                    .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
                let mut out = Vec::new();
                let mut walked = 0u64;
                if let Some(cells) = rows.get(&(lock.to_owned(), row.to_owned())) {
                    for (name, version) in cells.range(from.to_owned()..) {
                        if out.len() >= limit {
                            break;
                        }
                        match version.live(now) {
                            Some(value) => out.push(Cell {
                                name: name.clone(),
                                value,
                            }),
                            None => walked += 1,
                        }
                    }
                }
                self.inner
                    .tombstones_walked
                    .fetch_add(walked, Ordering::Relaxed);
                Ok(out)
            })
            .await
    }

    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        self.inner.calls[CellOp::ReadCell as usize].fetch_add(1, Ordering::Relaxed);
        self.inner
            .faults
            .around(CellOp::ReadCell, || {
                let rows = self
                    .inner
                    .rows
                    .lock()
                    .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
                Ok(rows
                    .get(&(at.lock.to_owned(), at.row.to_owned()))
                    .and_then(|cells| cells.get(at.cell))
                    .and_then(|v| v.live(Instant::now())))
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: CellRef<'static> = CellRef {
        lock: "l",
        row: "r",
        cell: "c",
    };

    #[tokio::test(start_paused = true)]
    async fn a_delete_beats_an_older_write_that_lands_later() {
        let store = MemoryCellStore::new();
        store.inject_late_apply(Some(CellOp::Write), Duration::from_secs(1), Times::Next(1));
        assert!(store.write(AT, 7, None, 10).await.is_err());
        store.delete(AT, 11).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(store.read_cell(AT).await.unwrap(), None);
        store.write(AT, 8, None, 12).await.unwrap();
        assert_eq!(store.read_cell(AT).await.unwrap(), Some(8));
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_expires_and_ranges_count_tombstones() {
        let store = MemoryCellStore::new();
        let cell = |c| CellRef { cell: c, ..AT };
        store
            .write(cell("a"), 1, Some(Duration::from_secs(1)), 1)
            .await
            .unwrap();
        store.write(cell("b"), 2, None, 1).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let cells = store.read_row("l", "r", "", 10).await.unwrap();
        assert_eq!(
            cells,
            vec![Cell {
                name: "b".into(),
                value: 2
            }]
        );
        assert_eq!(store.tombstones_walked(), 1);
        store.read_row("l", "r", "b", 10).await.unwrap();
        assert_eq!(store.tombstones_walked(), 1);
    }
}
