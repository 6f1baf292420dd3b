//! Client-side fault injection for any cell store: one contender's view of the store with
//! its own faults and its own round-trip count. It works over the wire too: a "lost answer"
//! sends the request and drops the reply; a late apply sends it after a delay; a slow answer
//! applies it at once and answers after a delay (a caller dropped meanwhile never hears).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tracing::debug;

use super::memory::CellOp;
use super::{Cell, CellRef, CellStore};
use crate::error::StoreError;
use crate::memory::{Fault, FaultRules, Times};

/// A cell store seen through injected faults.
///
/// ```
/// use std::sync::Arc;
/// use cql_lease::cells::faulty::FaultyCellStore;
/// use cql_lease::cells::memory::{CellOp, MemoryCellStore};
/// use cql_lease::memory::{Fault, Times};
/// let shared = Arc::new(MemoryCellStore::new());
/// let view = FaultyCellStore::new(shared);
/// view.inject(Some(CellOp::Write), Fault::Unavailable, Times::Always);
/// ```
#[derive(Clone)]
pub struct FaultyCellStore {
    inner: Arc<dyn CellStore>,
    faults: Arc<FaultRules<CellOp>>,
    late: Arc<FaultRules<CellOp>>,
    slow: Arc<FaultRules<CellOp>>,
    round_trips: Arc<AtomicU64>,
}

impl std::fmt::Debug for FaultyCellStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyCellStore")
            .field("round_trips", &self.round_trips())
            .finish_non_exhaustive()
    }
}

impl FaultyCellStore {
    /// A view of `inner` without faults so far.
    pub fn new(inner: Arc<dyn CellStore>) -> Self {
        FaultyCellStore {
            inner,
            faults: Arc::default(),
            late: Arc::default(),
            slow: Arc::default(),
            round_trips: Arc::default(),
        }
    }

    /// Adds a fault for calls of `op` (all when `None`).
    pub fn inject(&self, op: Option<CellOp>, fault: Fault, times: Times) {
        debug!(?op, ?fault, ?times, "client-side cell fault injected");
        self.faults.add(op, fault, times);
    }

    /// Makes matching writes and deletes lose their answer and reach the store `delay` later.
    pub fn inject_late_apply(&self, op: Option<CellOp>, delay: Duration, times: Times) {
        self.late.add(op, Fault::Latency(delay), times);
    }

    /// Makes matching writes and deletes apply at once but answer `delay` later.
    pub fn inject_slow_answer(&self, op: Option<CellOp>, delay: Duration, times: Times) {
        self.slow.add(op, Fault::Latency(delay), times);
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.faults.clear();
        self.late.clear();
        self.slow.clear();
    }

    /// Calls made through this view.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Runs a write or delete with its faults; `send` performs it on the inner store.
    async fn mutate<F, Fut>(&self, op: CellOp, send: F) -> Result<(), StoreError>
    where
        F: FnOnce(Arc<dyn CellStore>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), StoreError>> + Send + 'static,
    {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let (late, _) = self.late.draw(op);
        if !late.is_zero() {
            let inner = Arc::clone(&self.inner);
            tokio::spawn(async move {
                tokio::time::sleep(late).await;
                let result = send(inner).await;
                debug!(?result, "late apply landed");
            });
            return Err(StoreError::Unknown(format!(
                "injected: answer lost, {op:?} lands later"
            )));
        }
        let (slow, _) = self.slow.draw(op);
        let (latency, failure) = self.faults.draw(op);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match failure {
            None | Some(Fault::Latency(_) | Fault::LatencyUpTo(_)) => {
                let result = send(Arc::clone(&self.inner)).await;
                if !slow.is_zero() {
                    tokio::time::sleep(slow).await;
                }
                result
            }
            Some(Fault::Unavailable) => Err(StoreError::Unavailable(format!("injected on {op:?}"))),
            Some(Fault::TimeoutWithoutApply) => Err(StoreError::Unknown(format!(
                "injected timeout, not applied, on {op:?}"
            ))),
            Some(Fault::TimeoutAfterApply) => {
                send(Arc::clone(&self.inner)).await?;
                Err(StoreError::Unknown(format!(
                    "injected timeout, applied, on {op:?}"
                )))
            }
        }
    }

    /// Runs a read with its faults (a lost read answer is just a failed read).
    async fn read<T>(
        &self,
        op: CellOp,
        call: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let (latency, failure) = self.faults.draw(op);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match failure {
            None | Some(Fault::Latency(_) | Fault::LatencyUpTo(_)) => call.await,
            Some(_) => Err(StoreError::Unavailable(format!("injected on {op:?}"))),
        }
    }
}

#[async_trait]
impl CellStore for FaultyCellStore {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        let (lock, row, cell) = (at.lock.to_owned(), at.row.to_owned(), at.cell.to_owned());
        self.mutate(CellOp::Write, move |store| async move {
            let at = CellRef {
                lock: &lock,
                row: &row,
                cell: &cell,
            };
            store.write(at, value, ttl, timestamp).await
        })
        .await
    }

    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        let (lock, row, cell) = (at.lock.to_owned(), at.row.to_owned(), at.cell.to_owned());
        self.mutate(CellOp::Delete, move |store| async move {
            let at = CellRef {
                lock: &lock,
                row: &row,
                cell: &cell,
            };
            store.delete(at, timestamp).await
        })
        .await
    }

    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        self.read(CellOp::ReadRow, self.inner.read_row(lock, row, from, limit))
            .await
    }

    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        self.read(CellOp::ReadCell, self.inner.read_cell(at)).await
    }
}
