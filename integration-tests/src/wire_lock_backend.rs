//! The lock suite's backends over the CQL wire: the scylla cell store and lease store on the
//! CQL test server, or on the cluster named by `SCYLLA_URI`.

use std::sync::Arc;

use cql_lease::cells::CellStore;
use cql_lease::cells::memory::CellOp;
use cql_lease::cells::scylla::{self as cells, CellOptions, ScyllaCellStore};
use cql_lease::memory::{Fault, Times};
use cql_lease::scylla::cql::render;
use cql_test_server::{CqlTestServer, Flavor};
use scylla::client::session::Session;
use scylla::statement::Consistency;

use crate::backend::Backend;
use crate::conformance::lock::LockBackend;
use crate::namespaced::Namespaced;
use crate::wire_backend::{RealCluster, WireBackend, target, test_options, wire_fault, wire_times};

/// Every statement of the cell store, with the label the server counts it under.
pub const CELL_STATEMENTS: [(&str, &str); 5] = [
    ("cells.schema", cells::CREATE_TABLE),
    ("cells.write", cells::WRITE),
    ("cells.delete", cells::DELETE),
    ("cells.read_row", cells::READ_ROW),
    ("cells.read_cell", cells::READ_CELL),
];

/// The label the CQL test server counts and targets a cell-store operation by.
pub fn cell_label(op: CellOp) -> &'static str {
    match op {
        CellOp::Write => "cells.write",
        CellOp::Delete => "cells.delete",
        CellOp::ReadRow => "cells.read_row",
        CellOp::ReadCell => "cells.read_cell",
    }
}

/// Cell options for tests: one replica, QUORUM, a client-side timeout.
pub fn cell_options(keyspace: &str, table: &str) -> CellOptions {
    CellOptions {
        location: test_options(keyspace, table),
        consistency: Consistency::Quorum,
    }
}

async fn cell_store(session: Arc<Session>, options: CellOptions) -> Arc<ScyllaCellStore> {
    ScyllaCellStore::create_schema(&session, &options)
        .await
        .expect("cell schema");
    Arc::new(
        ScyllaCellStore::new(session, options)
            .await
            .expect("prepare cells"),
    )
}

/// Locks over the CQL test server (strict: only registered statements are served).
#[derive(Debug)]
pub struct WireLockBackend {
    leases: WireBackend,
    cells: Arc<ScyllaCellStore>,
}

impl WireLockBackend {
    /// Starts a server of `flavor` with the lease and cell statements registered.
    pub async fn start(flavor: Flavor) -> Self {
        let leases = WireBackend::start(flavor).await;
        register_cells(&leases.server, "coordination", "lock_cells");
        let session = Arc::new(leases.server.session().await);
        let cells = cell_store(session, cell_options("coordination", "lock_cells")).await;
        WireLockBackend { leases, cells }
    }
}

/// Teaches `server` the cell store's statements for `keyspace.table`.
pub fn register_cells(server: &CqlTestServer, keyspace: &str, table: &str) {
    for (label, template) in CELL_STATEMENTS {
        server.register(label, &render(template, keyspace, table));
    }
}

impl LockBackend for WireLockBackend {
    fn name(&self) -> String {
        format!("locks over the CQL test server ({})", self.leases.name())
    }
    fn cells(&self) -> Arc<dyn CellStore> {
        self.cells.clone()
    }
    fn leases(&self) -> &dyn Backend {
        &self.leases
    }
    fn inject_cells(&self, op: Option<CellOp>, fault: Fault, times: Times) {
        let labels = CELL_STATEMENTS.map(|(label, _)| label);
        self.leases.server.inject(
            target(op.map(cell_label), &labels[1..]),
            wire_fault(fault),
            wire_times(times),
        );
    }
    fn clear_store_faults(&self) {
        self.leases.server.clear_faults();
    }
    fn tombstones_walked(&self) -> Option<u64> {
        let refused = self.leases.server.refused();
        assert!(
            refused.is_empty(),
            "statements the server does not know: {refused:?}"
        );
        Some(self.leases.server.tombstones().total)
    }
}

/// Locks on the cluster named by `SCYLLA_URI`: the shared test tables, in names of their own.
#[derive(Debug)]
pub struct RealClusterLocks {
    leases: RealCluster,
    cells: Arc<Namespaced<ScyllaCellStore>>,
}

impl RealClusterLocks {
    /// Connects to `SCYLLA_URI`; panics when it is not set (these tests are `#[ignore]`d).
    pub async fn from_env() -> Self {
        Self::on(RealCluster::from_env().await).await
    }

    /// Locks on `leases`' cluster, in its names.
    pub async fn on(leases: RealCluster) -> Self {
        let cells = leases.lock_cells().await;
        RealClusterLocks { leases, cells }
    }
}

impl LockBackend for RealClusterLocks {
    fn name(&self) -> String {
        "locks on SCYLLA_URI".into()
    }
    fn cells(&self) -> Arc<dyn CellStore> {
        self.cells.clone()
    }
    fn leases(&self) -> &dyn Backend {
        &self.leases
    }
    fn inject_cells(&self, op: Option<CellOp>, fault: Fault, _: Times) {
        // Fault scenarios skip this backend (`supports_faults` is false): a call here is a
        // scenario that would pass without its fault.
        panic!("no fault injection on a real cluster ({op:?}, {fault:?})");
    }
    fn clear_store_faults(&self) {}
}
