//! The scylla backend on a real cluster (`SCYLLA_URI`), for the real-cluster runs of the
//! suites: no faults, real time.
//!
//! A real cluster is shared (a team's development cluster, run after run), so the suites use
//! one keyspace and a fixed set of tables, the ones a user creates with the schema helpers,
//! created once per test process and never dropped or multiplied; each test keeps to its own
//! names ([`Namespaced`]). Every cell written without a TTL of its own (fences, attempt
//! numbers, cursors: the tables' default TTL; plain lock cells such as ticket high-water
//! marks and `GlobalTime`, which the cell store writes `USING TTL 0`: given one by
//! [`Namespaced::expiring_untimed_cells`]) expires after [`KEEP_TEST_DATA`], so what the runs
//! leave behind does not grow with their number.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::scylla::{CellOptions, ScyllaCellStore};
use cql_lease::memory::{CallCounts, Fault, Op, Times};
use cql_lease::scylla::{ScyllaLeaseStore, ScyllaOptions};
use cql_lease::{CountingStore, LeaseStore};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::scylla::ScyllaQueueStore;
use cql_workqueue::store::QueueStore;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::statement::Consistency;
use tokio::sync::OnceCell;

use super::test_options;
use crate::backend::Backend;
use crate::namespaced::{Namespaced, fresh_prefix};

/// Why the real-cluster tests are ignored by default; run them with `SCYLLA_URI=host:port
/// cargo test --workspace -- --include-ignored`.
pub const NEEDS_SCYLLA_URI: &str =
    "needs a real cluster: set SCYLLA_URI=host:port and pass --include-ignored";

/// The keyspace every real-cluster test uses (replication factor 1).
pub const KEYSPACE: &str = "cql_lease_tests";
/// The lease table (leases, lease locks, elections).
pub const LEASES: &str = "leases";
/// The work-queue tables' base name (`work_items`, `work_items_index`, ...).
pub const WORK_ITEMS: &str = "work_items";
/// The plain-cell locks' table.
pub const LOCK_CELLS: &str = "lock_cells";
/// How long a cell written without a TTL of its own stays in the test tables.
pub const KEEP_TEST_DATA: Duration = Duration::from_secs(2 * 24 * 3600);

/// The clusters whose tables this process has made sure of: schema statements are sent at
/// most once per process and cluster (every test of a binary shares the tables).
static SCHEMA: Mutex<BTreeMap<String, Arc<OnceCell<()>>>> = Mutex::new(BTreeMap::new());

/// The lease store's options on the test keyspace.
fn lease_options() -> ScyllaOptions {
    test_options(KEYSPACE, LEASES)
}

/// The cell store's options on the test keyspace: QUORUM, like the lease table.
pub fn lock_cell_options() -> CellOptions {
    CellOptions {
        location: test_options(KEYSPACE, LOCK_CELLS),
        consistency: Consistency::Quorum,
    }
}

/// Creates the keyspace and the fixed tables if missing, and gives each of them the default
/// TTL if it has none (`ALTER TABLE`): schema changes only where something is missing, so
/// none once a first run has set the keyspace up.
async fn ensure_schema(uri: &str, session: &Session) {
    let once = Arc::clone(
        SCHEMA
            .lock()
            .expect("schema registry")
            .entry(uri.to_owned())
            .or_default(),
    );
    once.get_or_init(|| async {
        lease_options()
            .create_schema(session)
            .await
            .expect("lease schema");
        ScyllaQueueStore::create_schema(session, &test_options(KEYSPACE, WORK_ITEMS))
            .await
            .expect("queue schema");
        ScyllaCellStore::create_schema(session, &lock_cell_options())
            .await
            .expect("cell schema");
        keep_test_data_bounded(session).await;
    })
    .await;
}

/// Sets [`KEEP_TEST_DATA`] as the default TTL of the test tables that have none.
async fn keep_test_data_bounded(session: &Session) {
    let tables = session
        .query_unpaged(
            "SELECT table_name, default_time_to_live FROM system_schema.tables \
             WHERE keyspace_name = ?",
            (KEYSPACE,),
        )
        .await
        .expect("read the test tables")
        .into_rows_result()
        .expect("rows")
        .rows::<(String, i32)>()
        .expect("table rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("table row");
    let ours =
        |name: &str| name.starts_with(LEASES) || name == LOCK_CELLS || name.starts_with(WORK_ITEMS);
    for (table, ttl) in tables {
        if ours(&table) && ttl == 0 {
            let alter = format!(
                "ALTER TABLE {KEYSPACE}.{table} WITH default_time_to_live = {}",
                KEEP_TEST_DATA.as_secs()
            );
            session
                .query_unpaged(alter, ())
                .await
                .expect("set the default TTL");
        }
    }
}

/// The scylla backend on the cluster named by `SCYLLA_URI` (`host:port`): the shared test
/// tables, seen through names of this backend's own.
#[derive(Debug)]
pub struct RealCluster {
    session: Arc<Session>,
    prefix: String,
    store: Arc<CountingStore<Namespaced<ScyllaLeaseStore>>>,
    queue: Arc<Namespaced<ScyllaQueueStore>>,
}

impl RealCluster {
    /// Connects to `SCYLLA_URI` (as `SCYLLA_USERNAME` with `SCYLLA_PASSWORD` when both are
    /// set) and prepares the stores on the shared tables (created if missing). Panics when
    /// `SCYLLA_URI` is not set: the tests that call this are
    /// `#[ignore]`d, and one that was asked to run must not pass without a cluster.
    pub async fn from_env() -> RealCluster {
        let uri = std::env::var("SCYLLA_URI")
            .unwrap_or_else(|_| panic!("SCYLLA_URI is not set: {NEEDS_SCYLLA_URI}"));
        Self::connect_to(&uri).await
    }

    /// Connects to the node at `uri` (`host:port`) and prepares the stores on the shared
    /// tables (created if missing).
    pub async fn connect_to(uri: &str) -> RealCluster {
        let mut builder = SessionBuilder::new().known_node(uri);
        if let (Ok(user), Ok(password)) = (
            std::env::var("SCYLLA_USERNAME"),
            std::env::var("SCYLLA_PASSWORD"),
        ) {
            builder = builder.user(user, password);
        }
        let session = builder
            .build()
            .await
            .unwrap_or_else(|e| panic!("connect to {uri}: {e}"));
        let session = Arc::new(session);
        ensure_schema(uri, &session).await;
        let prefix = fresh_prefix();
        let queue = ScyllaQueueStore::new(Arc::clone(&session), test_options(KEYSPACE, WORK_ITEMS))
            .await
            .expect("prepare the queue statements");
        let store = ScyllaLeaseStore::new(Arc::clone(&session), lease_options())
            .await
            .expect("prepare");
        RealCluster {
            store: Arc::new(CountingStore::new(Arc::new(Namespaced::new(
                &prefix,
                Arc::new(store),
            )))),
            queue: Arc::new(
                Namespaced::new(&prefix, Arc::new(queue)).expiring_untimed_cells(KEEP_TEST_DATA),
            ),
            session,
            prefix,
        }
    }

    /// The plain-cell store on the shared lock table, in this backend's names.
    pub async fn lock_cells(&self) -> Arc<Namespaced<ScyllaCellStore>> {
        let mut options = lock_cell_options();
        options.location.request_timeout = Some(Duration::from_secs(5));
        let cells = ScyllaCellStore::new(Arc::clone(&self.session), options)
            .await
            .expect("prepare cells");
        Arc::new(
            Namespaced::new(&self.prefix, Arc::new(cells)).expiring_untimed_cells(KEEP_TEST_DATA),
        )
    }
}

#[async_trait]
impl Backend for RealCluster {
    fn name(&self) -> String {
        format!("scylla backend on SCYLLA_URI (names {}*)", self.prefix)
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
