//! How the embedded store runs one call: faults first, then the tables under one lock, with
//! every LWT counted per partition.

use std::time::Duration;

use cql_lease::{CasOutcome, StoreError};
use tokio::time::Instant;

use super::MemoryQueueStore;
use super::counts::Counter;
use super::tables::{Row, Tables};
use crate::item::{ItemKey, JobState};

/// A work-queue store operation, for aiming faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueOp {
    /// [`QueueStore::enqueue`](crate::store::QueueStore::enqueue), and the seal of a row that has
    /// none ([`QueueStore::seal`](crate::store::QueueStore::seal))
    Enqueue,
    /// [`QueueStore::revive`](crate::store::QueueStore::revive), and the seal of a done row
    Revive,
    /// [`QueueStore::claim`](crate::store::QueueStore::claim)
    Claim,
    /// [`QueueStore::heartbeat`](crate::store::QueueStore::heartbeat)
    Heartbeat,
    /// [`QueueStore::complete`](crate::store::QueueStore::complete)
    Complete,
    /// [`QueueStore::reschedule`](crate::store::QueueStore::reschedule),
    /// [`QueueStore::requeue`](crate::store::QueueStore::requeue),
    /// [`QueueStore::purge`](crate::store::QueueStore::purge)
    Reschedule,
    /// [`QueueStore::unclaim`](crate::store::QueueStore::unclaim)
    Unclaim,
    /// [`QueueStore::read`](crate::store::QueueStore::read) and
    /// [`QueueStore::peek`](crate::store::QueueStore::peek)
    Read,
    /// Index, cursor and dead-letter reads and writes.
    Index,
}

impl MemoryQueueStore {
    pub(super) async fn call<T>(
        &self,
        op: QueueOp,
        apply: impl FnOnce(&mut Tables, &mut Counter, Instant) -> T,
    ) -> Result<T, StoreError> {
        self.faults
            .around(op, || {
                let mut guard = self
                    .tables
                    .lock()
                    .map_err(|_| StoreError::Unavailable("memory store lock poisoned".into()))?;
                let (tables, counter) = &mut *guard;
                Ok(apply(tables, counter, Instant::now()))
            })
            .await
    }

    /// An LWT on the item's row: `apply` runs if the row exists and `condition` holds.
    pub(super) async fn lwt(
        &self,
        op: QueueOp,
        key: &ItemKey,
        condition: impl FnOnce(&mut Row, Instant) -> bool,
        apply: impl FnOnce(&mut Row, Instant),
    ) -> Result<CasOutcome, StoreError> {
        self.call(op, |tables, counter, now| {
            count_lwt(counter, op, key);
            let Some(row) = tables.row(key) else {
                return CasOutcome::NotApplied;
            };
            if !condition(row, now) {
                return CasOutcome::NotApplied;
            }
            apply(row, now);
            CasOutcome::Applied
        })
        .await
    }

    pub(super) fn done(row: &mut Row, now: Instant, retention: Duration) {
        row.done_expires_at = Some(now + retention);
        row.item.state = JobState::Done;
        row.item.claim = None;
        row.claim_expires_at = None;
        row.item.payload = Vec::new();
        row.item.last_error = None;
    }
}

pub(super) fn count_lwt(counter: &mut Counter, op: QueueOp, key: &ItemKey) {
    let c = &mut counter.counts;
    match op {
        QueueOp::Enqueue | QueueOp::Revive => c.enqueue_lwts += 1,
        QueueOp::Claim => c.claim_lwts += 1,
        QueueOp::Heartbeat => c.heartbeat_lwts += 1,
        _ => c.finish_lwts += 1,
    }
    counter.lwt(format!("{}/{}", key.partition, key.id));
}
