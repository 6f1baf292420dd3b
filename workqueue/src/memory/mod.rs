//! The embedded backend: in-process, linearizable, claim TTLs on tokio time, with faults.
//!
//! It models the scylla layout exactly (item rows one per partition, the bucketed index
//! with tombstones for deleted entries, the cursor, dead letters) and counts what the CQL
//! test server counts: round trips by kind, tombstones passed over by each scan, LWTs per
//! partition ([`MemoryQueueStore::counts`]).

mod calls;
mod counts;
mod index;
mod plain;
mod queue_store;
mod seal;
mod tables;

pub use calls::QueueOp;
pub use plain::{MemoryPlainItems, PlainOp};

use std::sync::{Arc, Mutex};

use cql_lease::cells::memory::MemoryCellStore;
use cql_lease::memory::{Fault, FaultRules, Times};
use tracing::debug;

use counts::Counter;
pub use counts::StoreCounts;
use tables::Tables;

/// In-process work-queue store.
///
/// ```
/// use cql_lease::memory::{Fault, Times};
/// use cql_workqueue::memory::{MemoryQueueStore, QueueOp};
/// let store = MemoryQueueStore::new();
/// // The next claim is applied but its answer is lost, like a CAS write timeout.
/// store.inject(Some(QueueOp::Claim), Fault::TimeoutAfterApply, Times::Next(1));
/// assert_eq!(store.counts().claim_lwts, 0);
/// ```
#[derive(Debug, Default)]
pub struct MemoryQueueStore {
    tables: Mutex<(Tables, Counter)>,
    faults: FaultRules<QueueOp>,
    /// The bakery mode's plain item rows and cells (see [`crate::ClaimMode::Bakery`]).
    plain: Arc<MemoryPlainItems>,
    cells: Arc<MemoryCellStore>,
}

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

    /// The bakery mode's plain item rows (for faults and counts).
    pub fn plain_items(&self) -> &Arc<MemoryPlainItems> {
        &self.plain
    }

    /// The bakery mode's cells (for faults and counts).
    pub fn cells(&self) -> &Arc<MemoryCellStore> {
        &self.cells
    }

    /// What the store has served so far.
    pub fn counts(&self) -> StoreCounts {
        self.tables
            .lock()
            .map(|t| t.1.counts.clone())
            .unwrap_or_default()
    }
}
