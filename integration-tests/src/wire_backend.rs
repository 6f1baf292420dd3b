//! The scylla backend as the suite sees it: over the CQL test server, or a real cluster.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::LeaseStore;
use cql_lease::memory::{CallCounts, Fault, Op, Times};
use cql_lease::scylla::{Replication, ScyllaLeaseStore, ScyllaOptions};
use cql_workqueue::ClaimMode;
use cql_workqueue::memory::{QueueOp, StoreCounts};
use cql_workqueue::scylla::ScyllaQueueStore;
use cql_workqueue::store::QueueStore;
use scylla::client::session::Session;

use crate::backend::Backend;
use cql_test_server::{CqlTestServer, Flavor, ServerOptions, WireFault};

/// Options every wire test uses: one replica, and a driver-side timeout that a lost answer
/// meets well before the driver's 30 s, yet above every request timeout the suite's clients
/// use (the patient ones wait twice the validity, 6 s), so the library's own timeouts fire
/// first, as the README asks of a cluster's settings.
pub fn test_options(keyspace: &str, table: &str) -> ScyllaOptions {
    ScyllaOptions {
        keyspace: keyspace.into(),
        table: table.into(),
        replication: Replication::Simple(1),
        request_timeout: Some(Duration::from_secs(8)),
        ..ScyllaOptions::default()
    }
}

/// The scylla backend over the CQL test server, in strict mode.
#[derive(Debug)]
pub struct WireBackend {
    /// The server.
    pub server: CqlTestServer,
    store: Arc<ScyllaLeaseStore>,
    queue: Arc<ScyllaQueueStore>,
    flavor: Flavor,
    claim_mode: ClaimMode,
    /// Paxos rounds the setup sent (the stores' LWT probes).
    paxos_at_start: u64,
}

/// The work-queue store on `options`' table, created if missing.
async fn queue_store(session: &Arc<Session>, options: ScyllaOptions) -> Arc<ScyllaQueueStore> {
    ScyllaQueueStore::create_schema(session, &options)
        .await
        .expect("queue schema");
    Arc::new(
        ScyllaQueueStore::new(Arc::clone(session), options)
            .await
            .expect("prepare the queue statements"),
    )
}

impl WireBackend {
    /// Starts a server, connects, creates the schema, prepares the statements.
    pub async fn start(flavor: Flavor) -> WireBackend {
        Self::start_with(flavor, |store| store).await
    }

    /// Like [`WireBackend::start`], letting `adjust` configure the store.
    pub async fn start_with(
        flavor: Flavor,
        adjust: impl FnOnce(ScyllaLeaseStore) -> ScyllaLeaseStore,
    ) -> WireBackend {
        Self::start_on(ServerOptions::strict(flavor), test_options, adjust).await
    }

    /// Like [`WireBackend::start`], with the server on a thread of its own
    /// (`ServerOptions::own_thread`): what the queue benchmark uses, so a statement waiting
    /// for the server's engine lock never blocks a worker thread of the runtime that runs
    /// the code measured.
    pub async fn start_own_thread(flavor: Flavor) -> WireBackend {
        let server = ServerOptions::strict(flavor).with_own_thread();
        Self::start_on(server, test_options, |store| store).await
    }

    /// A cluster of `nodes` nodes, and stores with the library's default options (no
    /// driver-side timeout: the lease timing bounds every request), replication 3.
    pub async fn start_cluster(flavor: Flavor, nodes: usize) -> WireBackend {
        let defaults = |keyspace: &str, table: &str| ScyllaOptions {
            keyspace: keyspace.into(),
            table: table.into(),
            ..ScyllaOptions::default()
        };
        let server = ServerOptions::strict(flavor).with_nodes(nodes);
        Self::start_on(server, defaults, |store| store).await
    }

    async fn start_on(
        server: ServerOptions,
        options_for: impl Fn(&str, &str) -> ScyllaOptions,
        adjust: impl FnOnce(ScyllaLeaseStore) -> ScyllaLeaseStore,
    ) -> WireBackend {
        let flavor = server.flavor;
        let server = CqlTestServer::start(server).await.expect("CQL test server");
        register_lease(&server, "coordination", "leases");
        register_queue(&server, "coordination", "work_items");
        let session = Arc::new(server.session().await);
        let options = options_for("coordination", "leases");
        options.create_schema(&session).await.expect("schema");
        let queue = queue_store(&session, options_for("coordination", "work_items")).await;
        let store = Arc::new(adjust(
            ScyllaLeaseStore::new(session, options)
                .await
                .expect("prepare"),
        ));
        let paxos_at_start = server.paxos().total_rounds();
        WireBackend {
            server,
            store,
            queue,
            flavor,
            claim_mode: ClaimMode::Lwt,
            paxos_at_start,
        }
    }

    /// [`WireBackend::start`] whose queue scenarios run in [`ClaimMode::Bakery`]; after each
    /// scenario the server must have seen no Paxos round beyond the setup's probes.
    pub async fn start_bakery(flavor: Flavor) -> WireBackend {
        WireBackend {
            claim_mode: ClaimMode::Bakery,
            ..Self::start(flavor).await
        }
    }

    /// Injects a fault only the wire can show on the statements of `op` (all lease
    /// operations when `None`).
    pub fn inject_wire(&self, op: Option<Op>, fault: WireFault, times: Times) {
        self.server.inject(
            target(op.map(op_label), &LEASE_OPS),
            fault,
            wire_times(times),
        );
    }
}

#[async_trait]
impl Backend for WireBackend {
    fn name(&self) -> String {
        format!(
            "scylla backend over the CQL test server ({:?})",
            self.flavor
        )
    }
    fn store(&self) -> Arc<dyn LeaseStore> {
        self.store.clone()
    }
    async fn advance_store_clock(&self, by: Duration) {
        self.server.clock().advance(by);
    }
    fn inject(&self, op: Option<Op>, fault: Fault, times: Times) {
        self.inject_wire(op, wire_fault(fault), times);
    }
    fn clear_faults(&self) {
        self.server.clear_faults();
    }
    fn queue_store(&self) -> Option<Arc<dyn QueueStore>> {
        Some(self.queue.clone())
    }
    fn inject_queue(&self, op: Option<QueueOp>, fault: Fault, times: Times) {
        let target = match self.claim_mode {
            ClaimMode::Lwt => queue_target(op),
            ClaimMode::Bakery => bakery_target(op),
        };
        self.server
            .inject(target, wire_fault(fault), wire_times(times));
    }
    fn claim_mode(&self) -> ClaimMode {
        self.claim_mode
    }
    fn bakery_cell_writes(&self, prefix: &str) -> Option<Vec<u64>> {
        let writes = self.server.plain_writes();
        Some(
            writes
                .into_iter()
                .filter(|((keyspace, table, part), _)| {
                    keyspace == "coordination"
                        && table == "work_items_cells"
                        && part.starts_with(prefix)
                })
                .map(|(_, n)| n)
                .collect(),
        )
    }
    fn queue_counts(&self) -> Option<StoreCounts> {
        let calls = |label: &str| self.server.calls(label);
        let paxos = self.server.paxos();
        let tombstones = self.server.tombstones();
        Some(StoreCounts {
            enqueue_lwts: calls("queue.enqueue") + calls("queue.revive"),
            claim_lwts: calls("queue.claim"),
            heartbeat_lwts: calls("queue.heartbeat"),
            finish_lwts: calls("queue.complete")
                + calls("queue.reschedule")
                + calls("queue.unclaim"),
            serial_reads: 0,
            peeks: calls("queue.read"),
            index_scans: calls("queue.scan"),
            other_reads: calls("queue.index_read"),
            plain_writes: calls("queue.index") + calls("queue.index_range"),
            tombstones_scanned: tombstones.total,
            max_tombstones_scanned: tombstones.max,
            tombstone_warnings: tombstones.warnings.len() as u64,
            range_deletes: calls("queue.index_range"),
            live_entries_range_deleted: 0,
            hottest_partition_lwts: paxos.rounds.values().copied().max().unwrap_or(0),
            lwt_partitions: paxos.rounds.len() as u64,
        })
    }
    fn calls(&self) -> CallCounts {
        let get = |op| self.server.calls(op_label(op));
        CallCounts {
            try_acquire: get(Op::TryAcquire),
            renew: get(Op::Renew),
            release: get(Op::Release),
            read: get(Op::Read),
        }
    }
    fn first_claim_costs_extra_round(&self) -> bool {
        true
    }
    fn simulated_time(&self) -> bool {
        false
    }
    fn after_scenario(&self) {
        let refused = self.server.refused();
        assert!(
            refused.is_empty(),
            "the backend sent statements the server does not know: {refused:?}"
        );
        if self.claim_mode == ClaimMode::Bakery {
            assert_eq!(
                self.server.paxos().total_rounds(),
                self.paxos_at_start,
                "the bakery mode sent LWTs"
            );
            assert!(
                self.server.calls("queue.plain_write") > 0,
                "the scenario did not run in the bakery mode"
            );
        }
    }
}

mod real_cluster;
mod targets;

pub use real_cluster::{NEEDS_SCYLLA_URI, RealCluster};
use targets::{LEASE_OPS, bakery_target, queue_target};
pub use targets::{
    op_label, queue_label, register_lease, register_queue, target, wire_fault, wire_times,
};
