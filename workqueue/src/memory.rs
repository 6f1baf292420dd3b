//! The embedded backend: in-process, linearizable, claim TTLs on tokio time, with faults.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::memory::{Fault, FaultRules, Times};
use cql_lease::{CasOutcome, StoreError};
use tokio::time::Instant;
use tracing::{debug, instrument};

use crate::item::{ItemId, ItemKey, JobState, StoredItem};
use crate::store::{ClaimOutcome, ItemClaim, QueueStore, Reschedule};

/// A work-queue store operation, for aiming faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueOp {
    /// [`QueueStore::enqueue`]
    Enqueue,
    /// [`QueueStore::scan`]
    Scan,
    /// [`QueueStore::claim`]
    Claim,
    /// [`QueueStore::heartbeat`]
    Heartbeat,
    /// [`QueueStore::complete`]
    Complete,
    /// [`QueueStore::reschedule`]
    Reschedule,
    /// [`QueueStore::unclaim`]
    Unclaim,
    /// [`QueueStore::read`]
    Read,
}

#[derive(Debug, Clone)]
struct Row {
    item: StoredItem,
    claim_expires_at: Option<Instant>,
}

impl Row {
    fn current(&mut self, now: Instant) -> &StoredItem {
        if self.claim_expires_at.is_some_and(|at| at <= now) {
            self.item.claim = None;
            self.claim_expires_at = None;
        }
        &self.item
    }

    fn held_by(&mut self, now: Instant, claim_id: &str) -> bool {
        self.current(now).claim.as_deref() == Some(claim_id)
    }
}

/// In-process work-queue store.
///
/// ```
/// use cql_lease::memory::{Fault, Times};
/// use cql_workqueue::memory::{MemoryQueueStore, QueueOp};
/// let store = MemoryQueueStore::new();
/// // The next claim is applied but its answer is lost, like a CAS write timeout.
/// store.inject(Some(QueueOp::Claim), Fault::TimeoutAfterApply, Times::Next(1));
/// ```
#[derive(Debug, Default)]
pub struct MemoryQueueStore {
    partitions: Mutex<BTreeMap<String, BTreeMap<ItemId, Row>>>,
    faults: FaultRules<QueueOp>,
}

type Partitions = BTreeMap<String, BTreeMap<ItemId, Row>>;

impl MemoryQueueStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a fault rule for `op` (all operations when `None`).
    pub fn inject(&self, op: Option<QueueOp>, fault: Fault, times: Times) {
        debug!(?op, ?fault, ?times, "fault injected");
        self.faults.add(op, fault, times);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.faults.clear();
    }

    async fn call<T>(
        &self,
        op: QueueOp,
        apply: impl FnOnce(&mut Partitions, Instant) -> T,
    ) -> Result<T, StoreError> {
        self.faults
            .around(op, || {
                let mut partitions = self
                    .partitions
                    .lock()
                    .map_err(|_| StoreError::Unavailable("memory store lock poisoned".into()))?;
                Ok(apply(&mut partitions, Instant::now()))
            })
            .await
    }

    /// Runs `apply` on the item's row if `claim_id` holds it.
    async fn if_held(
        &self,
        op: QueueOp,
        key: &ItemKey,
        claim_id: &str,
        apply: impl FnOnce(&mut BTreeMap<ItemId, Row>, Instant),
    ) -> Result<CasOutcome, StoreError> {
        self.call(op, |partitions, now| {
            let Some(rows) = partitions.get_mut(&key.partition) else {
                return CasOutcome::NotApplied;
            };
            if !rows
                .get_mut(&key.id)
                .is_some_and(|r| r.held_by(now, claim_id))
            {
                return CasOutcome::NotApplied;
            }
            apply(rows, now);
            CasOutcome::Applied
        })
        .await
    }
}

#[async_trait]
impl QueueStore for MemoryQueueStore {
    #[instrument(level = "debug", skip(self, payload), fields(partition = %key.partition, id = %key.id))]
    async fn enqueue(
        &self,
        key: &ItemKey,
        payload: &str,
        run_at: i64,
    ) -> Result<CasOutcome, StoreError> {
        self.call(QueueOp::Enqueue, |partitions, _| {
            let rows = partitions.entry(key.partition.clone()).or_default();
            if rows.contains_key(&key.id) {
                return CasOutcome::NotApplied;
            }
            let item = StoredItem {
                key: key.clone(),
                payload: payload.to_owned(),
                state: JobState::Available,
                attempt: 0,
                claim: None,
                run_at,
                last_error: None,
            };
            rows.insert(
                key.id.clone(),
                Row {
                    item,
                    claim_expires_at: None,
                },
            );
            CasOutcome::Applied
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn scan(
        &self,
        partition: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<StoredItem>, StoreError> {
        self.call(QueueOp::Scan, |partitions, now| {
            let Some(rows) = partitions.get_mut(partition) else {
                return Vec::new();
            };
            rows.values_mut()
                .filter(|r| r.item.key.id.as_str() > after)
                .take(limit as usize)
                .map(|r| r.current(now).clone())
                .collect()
        })
        .await
    }

    #[instrument(level = "debug", skip(self, claim), fields(partition = %claim.key.partition, id = %claim.key.id))]
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        self.call(QueueOp::Claim, |partitions, now| {
            let Some(row) = partitions
                .get_mut(&claim.key.partition)
                .and_then(|rows| rows.get_mut(&claim.key.id))
            else {
                return ClaimOutcome::Lost;
            };
            let item = row.current(now);
            if item.claim.is_some()
                || item.attempt != claim.seen_attempt
                || !item.state.is_claimable()
            {
                return ClaimOutcome::Lost;
            }
            row.item.claim = Some(claim.claim_id.to_owned());
            row.item.attempt = claim.seen_attempt + 1;
            row.item.state = JobState::Running;
            row.claim_expires_at = Some(now + claim.ttl);
            ClaimOutcome::Claimed
        })
        .await
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        self.if_held(QueueOp::Heartbeat, key, claim_id, |rows, now| {
            if let Some(row) = rows.get_mut(&key.id) {
                row.claim_expires_at = Some(now + ttl);
            }
        })
        .await
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn complete(&self, key: &ItemKey, claim_id: &str) -> Result<CasOutcome, StoreError> {
        self.if_held(QueueOp::Complete, key, claim_id, |rows, _| {
            rows.remove(&key.id);
        })
        .await
    }

    #[instrument(level = "debug", skip(self, to), fields(partition = %key.partition, id = %key.id, state = ?to.state))]
    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.if_held(QueueOp::Reschedule, key, claim_id, |rows, _| {
            if let Some(row) = rows.get_mut(&key.id) {
                row.item.claim = None;
                row.claim_expires_at = None;
                row.item.state = to.state;
                row.item.run_at = to.run_at;
                row.item.last_error = to.error.map(str::to_owned);
            }
        })
        .await
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.if_held(QueueOp::Unclaim, key, claim_id, |rows, _| {
            if let Some(row) = rows.get_mut(&key.id) {
                row.item.claim = None;
                row.claim_expires_at = None;
                row.item.state = state;
                row.item.attempt = attempt;
            }
        })
        .await
    }

    #[instrument(level = "debug", skip(self), fields(partition = %key.partition, id = %key.id))]
    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.call(QueueOp::Read, |partitions, now| {
            partitions
                .get_mut(&key.partition)
                .and_then(|rows| rows.get_mut(&key.id))
                .map(|row| row.current(now).clone())
        })
        .await
    }
}
