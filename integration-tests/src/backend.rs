//! What the conformance suite needs from a backend under test.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::LeaseStore;
use cql_lease::cells::memory::CellOp;
use cql_lease::memory::{CallCounts, Fault, MemoryStore, Op, Times};
use cql_workqueue::ClaimMode;
use cql_workqueue::memory::{MemoryQueueStore, PlainOp, QueueOp, StoreCounts};
use cql_workqueue::store::QueueStore;

/// A backend the suite can drive: its store, its clock, its faults and its call counts.
#[async_trait]
pub trait Backend: Send + Sync {
    /// A label for messages.
    fn name(&self) -> String;
    /// The lease store (a fresh namespace per backend instance).
    fn store(&self) -> Arc<dyn LeaseStore>;
    /// Moves the store's clock forward by `by` (TTLs run out). On the memory backend this is
    /// tokio time, which moves the client's clock too; on the CQL server only the server's.
    async fn advance_store_clock(&self, by: Duration);
    /// Lets `by` pass for everybody (paused tokio time on the memory backend, real time on the
    /// wire).
    async fn sleep(&self, by: Duration) {
        tokio::time::sleep(by).await;
    }
    /// Whether faults can be injected (not on a real cluster).
    fn supports_faults(&self) -> bool {
        true
    }
    /// Checks run after every scenario.
    fn after_scenario(&self) {}
    /// Adds a fault for calls of `op` (all when `None`).
    fn inject(&self, op: Option<Op>, fault: Fault, times: Times);
    /// Removes every fault.
    fn clear_faults(&self);
    /// Store round trips so far, by operation.
    fn calls(&self) -> CallCounts;
    /// Whether a brand-new lease name costs an extra LWT on first acquisition (the CQL
    /// backend must learn that no token exists yet).
    fn first_claim_costs_extra_round(&self) -> bool {
        false
    }
    /// Whether time is simulated (paused): heavy scenarios run at full size only then.
    fn simulated_time(&self) -> bool;
    /// The work-queue store (a fresh namespace per backend instance); `None` where the
    /// backend cannot serve the work queue yet (the CQL test server has no clustering
    /// columns so far).
    fn queue_store(&self) -> Option<Arc<dyn QueueStore>> {
        None
    }
    /// Adds a fault for work-queue calls of `op` (all when `None`).
    fn inject_queue(&self, _op: Option<QueueOp>, _fault: Fault, _times: Times) {}
    /// What the work-queue store served so far (LWTs by kind, reads, tombstones passed over
    /// by scans, LWTs of the hottest partition); `None` where nobody counts.
    fn queue_counts(&self) -> Option<StoreCounts> {
        None
    }
    /// Writes and deletes so far per partition of the bakery claim mode's cells (keyed
    /// `"{row}|{item cells name}"`, the CQL cell table's partition key) whose key starts with
    /// `prefix`; `None` where nobody counts.
    fn bakery_cell_writes(&self, _prefix: &str) -> Option<Vec<u64>> {
        None
    }
    /// The claim mode the queue scenarios run in (the suite runs once per mode).
    fn claim_mode(&self) -> ClaimMode {
        ClaimMode::Lwt
    }
}

/// The embedded backend. Run its tests with `#[tokio::test(start_paused = true)]`.
#[derive(Debug, Default, Clone)]
pub struct MemoryBackend {
    store: Arc<MemoryStore>,
    queue: Arc<MemoryQueueStore>,
    claim_mode: ClaimMode,
}

impl MemoryBackend {
    /// A backend with an empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend whose queue scenarios run in [`ClaimMode::Bakery`].
    pub fn bakery() -> Self {
        MemoryBackend {
            claim_mode: ClaimMode::Bakery,
            ..Self::default()
        }
    }

    /// The embedded work-queue store (its plain rows and cells for the bakery mode).
    pub fn queue_memory(&self) -> &Arc<MemoryQueueStore> {
        &self.queue
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    fn name(&self) -> String {
        "memory".into()
    }
    fn store(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }
    async fn advance_store_clock(&self, by: Duration) {
        tokio::time::sleep(by).await;
    }
    fn inject(&self, op: Option<Op>, fault: Fault, times: Times) {
        self.store.inject(op, fault, times);
    }
    fn clear_faults(&self) {
        self.store.clear_faults();
        self.queue.clear_faults();
        self.queue.plain_items().clear_faults();
        self.queue.cells().clear_faults();
    }
    fn calls(&self) -> CallCounts {
        self.store.calls()
    }
    fn simulated_time(&self) -> bool {
        true
    }
    fn queue_store(&self) -> Option<Arc<dyn QueueStore>> {
        Some(self.queue.clone())
    }
    fn inject_queue(&self, op: Option<QueueOp>, fault: Fault, times: Times) {
        match self.claim_mode {
            ClaimMode::Lwt => self.queue.inject(op, fault, times),
            ClaimMode::Bakery => inject_bakery(&self.queue, op, fault, times),
        }
    }
    fn queue_counts(&self) -> Option<StoreCounts> {
        Some(self.queue.counts())
    }
    fn bakery_cell_writes(&self, prefix: &str) -> Option<Vec<u64>> {
        let by_partition = self.queue.cells().mutations_by_partition();
        Some(
            by_partition
                .into_iter()
                .filter(|(part, _)| part.starts_with(prefix))
                .map(|(_, n)| n)
                .collect(),
        )
    }
    fn claim_mode(&self) -> ClaimMode {
        self.claim_mode
    }
    /// In the bakery mode: the scenario ran in it (plain rows written) and sent no LWT.
    fn after_scenario(&self) {
        if self.claim_mode == ClaimMode::Bakery {
            let counts = self.queue.counts();
            assert_eq!(
                counts.lwts() + counts.serial_reads,
                0,
                "the bakery mode sent LWTs: {counts:?}"
            );
            assert!(
                self.queue.plain_items().calls().0 > 0,
                "the scenario did not run in the bakery mode"
            );
        }
    }
}

/// The same fault in the bakery claim mode: aimed at the plain rows or cells that do that
/// operation's work there (a claim writes its choosing mark and number, a heartbeat rewrites
/// the number, a finish writes the row, an undo deletes the number).
fn inject_bakery(store: &MemoryQueueStore, op: Option<QueueOp>, fault: Fault, times: Times) {
    let (cells, plain) = (store.cells(), store.plain_items());
    match op {
        None => {
            store.inject(None, fault, times);
            cells.inject(None, fault, times);
            plain.inject(None, fault, times);
        }
        Some(QueueOp::Index) => store.inject(op, fault, times),
        Some(QueueOp::Claim | QueueOp::Heartbeat) => {
            cells.inject(Some(CellOp::Write), fault, times)
        }
        Some(QueueOp::Unclaim) => cells.inject(Some(CellOp::Delete), fault, times),
        Some(QueueOp::Read) => plain.inject(Some(PlainOp::Read), fault, times),
        Some(QueueOp::Enqueue | QueueOp::Revive | QueueOp::Complete | QueueOp::Reschedule) => {
            plain.inject(Some(PlainOp::Write), fault, times)
        }
    }
}
