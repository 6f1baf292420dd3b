//! The scylla backend on a real cluster (`SCYLLA_URI`), for the real-cluster runs of the
//! suites: no faults, real time.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::memory::{CallCounts, Fault, Op, Times};
use cql_lease::scylla::ScyllaLeaseStore;
use cql_lease::{CountingStore, LeaseStore};
use cql_workqueue::QueueStore;
use cql_workqueue::memory::QueueOp;
use cql_workqueue::scylla::ScyllaQueueStore;
use scylla::client::session_builder::SessionBuilder;

use super::{queue_store, test_options};
use crate::backend::Backend;

/// Why the real-cluster tests are ignored by default; run them with `SCYLLA_URI=host:port
/// cargo test --workspace -- --include-ignored`.
pub const NEEDS_SCYLLA_URI: &str =
    "needs a real cluster: set SCYLLA_URI=host:port and pass --include-ignored";

/// The scylla backend on the cluster named by `SCYLLA_URI` (`host:port`), in fresh tables.
#[derive(Debug)]
pub struct RealCluster {
    store: Arc<CountingStore<ScyllaLeaseStore>>,
    queue: Arc<ScyllaQueueStore>,
}

impl RealCluster {
    /// Connects to `SCYLLA_URI`. Panics when it is not set: these tests are `#[ignore]`d, and
    /// one that was asked to run must not pass without a cluster.
    pub async fn from_env() -> RealCluster {
        let uri = std::env::var("SCYLLA_URI")
            .unwrap_or_else(|_| panic!("SCYLLA_URI is not set: {NEEDS_SCYLLA_URI}"));
        let session = SessionBuilder::new()
            .known_node(&uri)
            .build()
            .await
            .expect("connect to SCYLLA_URI");
        let session = Arc::new(session);
        let suffix = uuid::Uuid::new_v4().simple();
        let options = test_options("cql_lease_tests", &format!("leases_{suffix}"));
        options.create_schema(&session).await.expect("schema");
        let queue = queue_store(
            &session,
            test_options("cql_lease_tests", &format!("items_{suffix}")),
        )
        .await;
        let store = ScyllaLeaseStore::new(session, options)
            .await
            .expect("prepare");
        RealCluster {
            store: Arc::new(CountingStore::new(Arc::new(store))),
            queue,
        }
    }
}

#[async_trait]
impl Backend for RealCluster {
    fn name(&self) -> String {
        "scylla backend on SCYLLA_URI".into()
    }
    fn store(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }
    async fn advance_store_clock(&self, by: Duration) {
        tokio::time::sleep(by).await;
    }
    fn supports_faults(&self) -> bool {
        false
    }
    fn inject(&self, op: Option<Op>, fault: Fault, _: Times) {
        // Fault scenarios are not generated for this backend (see `lease_suite!`): a call
        // here is a scenario that would pass without its fault.
        panic!("no fault injection on a real cluster ({op:?}, {fault:?})");
    }
    fn inject_queue(&self, op: Option<QueueOp>, fault: Fault, _: Times) {
        panic!("no fault injection on a real cluster ({op:?}, {fault:?})");
    }
    fn clear_faults(&self) {}
    fn calls(&self) -> CallCounts {
        // Store calls, not LWTs: the extra round of a brand-new name is inside one call.
        self.store.calls()
    }
    fn simulated_time(&self) -> bool {
        false
    }
    fn queue_store(&self) -> Option<Arc<dyn QueueStore>> {
        Some(self.queue.clone())
    }
}
