//! The embedded backend: in-process, linearizable, TTLs on tokio time.
//!
//! Everything happens under one mutex, so the store is linearizable; expiry is measured with
//! [`tokio::time::Instant`], so tests can pause and advance the clock. Faults (latency, lost
//! answers with or without the write applied, unavailability) are injected per operation.

mod faults;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::{debug, instrument};

pub use crate::counting::CallCounts;
pub use faults::{Fault, FaultRules, Op, Times};

use crate::cells::CellStore;
use crate::cells::memory::MemoryCellStore;
use crate::error::StoreError;
use crate::fencing::FencingToken;
use crate::store::{AcquireOutcome, CasOutcome, Claim, LeaseStore, StoredLease};

#[derive(Debug, Default)]
struct Row {
    /// Highest token ever issued for the name; never expires.
    last_token: i64,
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    holder_id: String,
    owner: String,
    value: Option<String>,
    token: i64,
    expires_at: Instant,
}

impl Row {
    fn current(&mut self, now: Instant) -> Option<StoredLease> {
        if self.held.as_ref().is_some_and(|h| h.expires_at <= now) {
            self.held = None;
        }
        self.held.as_ref().map(|h| StoredLease {
            holder_id: h.holder_id.clone(),
            owner: h.owner.clone(),
            value: h.value.clone(),
            token: FencingToken::new(h.token),
            expires_within: h.expires_at - now,
        })
    }
}

/// In-process lease store with fault injection.
///
/// ```
/// use cql_lease::memory::{Fault, MemoryStore, Op, Times};
/// let store = MemoryStore::new();
/// // The next acquire is applied but its answer is lost, like a CAS write timeout.
/// store.inject(Some(Op::TryAcquire), Fault::TimeoutAfterApply, Times::Next(1));
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    rows: Mutex<HashMap<String, Row>>,
    faults: FaultRules<Op>,
    counts: [AtomicU64; 5],
    waiting: Line,
}

/// The cells that keep the waiting lines: the store's own, or those given for fault injection.
#[derive(Clone)]
struct Line(Arc<dyn CellStore>);

impl std::fmt::Debug for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Line")
    }
}

impl Default for Line {
    fn default() -> Self {
        Line(Arc::new(MemoryCellStore::new()))
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose waiting lines (see [`LeaseStore::waiting_line`]) are kept in
    /// `cells`: a [`FaultyCellStore`](crate::cells::faulty::FaultyCellStore) there makes the line's
    /// reads and writes fail or lag while the leases answer as before.
    pub fn with_waiting_line(cells: Arc<dyn CellStore>) -> Self {
        MemoryStore {
            waiting: Line(cells),
            ..Self::default()
        }
    }

    /// Adds a fault rule for `op` (all operations when `None`).
    pub fn inject(&self, op: Option<Op>, fault: Fault, times: Times) {
        debug!(?op, ?fault, ?times, "fault injected");
        self.faults.add(op, fault, times);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.faults.clear();
    }

    /// Store calls made so far, including failed ones.
    pub fn calls(&self) -> CallCounts {
        let get = |op: Op| self.counts[op as usize].load(Ordering::Relaxed);
        CallCounts {
            try_acquire: get(Op::TryAcquire),
            renew: get(Op::Renew),
            release: get(Op::Release),
            read: get(Op::Read),
        }
    }

    /// Plain reads ([`LeaseStore::peek`]) so far: no Paxos round on a real store.
    pub fn peeks(&self) -> u64 {
        self.counts[Op::Peek as usize].load(Ordering::Relaxed)
    }

    /// Runs `apply` on the rows under the lock, with the faults drawn for `op` around it.
    async fn call<T>(
        &self,
        op: Op,
        apply: impl FnOnce(&mut HashMap<String, Row>, Instant) -> T,
    ) -> Result<T, StoreError> {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
        self.faults
            .around(op, || {
                let mut rows = self
                    .rows
                    .lock()
                    .map_err(|_| StoreError::Unavailable("memory store lock poisoned".into()))?;
                Ok(apply(&mut rows, Instant::now()))
            })
            .await
    }
}

#[async_trait]
impl LeaseStore for MemoryStore {
    #[instrument(level = "debug", skip(self, claim), fields(lease = claim.name, owner = claim.owner))]
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        self.call(Op::TryAcquire, |rows, now| {
            let row = rows.entry(claim.name.to_owned()).or_default();
            if let Some(current) = row.current(now) {
                return AcquireOutcome::Held(current);
            }
            row.last_token += 1;
            row.held = Some(Held {
                holder_id: claim.holder_id.to_owned(),
                owner: claim.owner.to_owned(),
                value: claim.value.map(str::to_owned),
                token: row.last_token,
                expires_at: now + claim.ttl,
            });
            AcquireOutcome::Acquired {
                token: FencingToken::new(row.last_token),
            }
        })
        .await
    }

    #[instrument(level = "debug", skip(self, claim), fields(lease = claim.name))]
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.call(Op::Renew, |rows, now| {
            let Some(row) = rows.get_mut(claim.name) else {
                return CasOutcome::NotApplied;
            };
            row.current(now);
            match &mut row.held {
                Some(held) if held.holder_id == claim.holder_id => {
                    held.expires_at = now + claim.ttl;
                    held.value = claim.value.map(str::to_owned);
                    CasOutcome::Applied
                }
                _ => CasOutcome::NotApplied,
            }
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.call(Op::Release, |rows, now| {
            let Some(row) = rows.get_mut(name) else {
                return CasOutcome::NotApplied;
            };
            match row.current(now) {
                Some(current) if current.holder_id == holder_id => {
                    row.held = None;
                    CasOutcome::Applied
                }
                _ => CasOutcome::NotApplied,
            }
        })
        .await
    }

    #[instrument(level = "debug", skip(self, to), fields(lease = to.name, owner = to.owner))]
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        self.call(Op::Release, |rows, now| {
            let row = rows.get_mut(to.name)?;
            let current = row.current(now)?;
            if current.holder_id != from_holder_id || current.token != from_token {
                return None;
            }
            row.last_token += 1;
            row.held = Some(Held {
                holder_id: to.holder_id.to_owned(),
                owner: to.owner.to_owned(),
                value: to.value.map(str::to_owned),
                token: row.last_token,
                expires_at: now + to.ttl,
            });
            Some(FencingToken::new(row.last_token))
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.call(Op::Read, |rows, now| {
            rows.get_mut(name).and_then(|row| row.current(now))
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        // Linearizable here too: a hint that happens to be exact.
        self.call(Op::Peek, |rows, now| {
            rows.get_mut(name).and_then(|row| row.current(now))
        })
        .await
    }

    fn waiting_line(&self) -> Option<Arc<dyn CellStore>> {
        Some(Arc::clone(&self.waiting.0))
    }
}
