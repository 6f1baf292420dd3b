//! The scylla backend as the suite sees it: over the CQL test server, or a real cluster.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::memory::{CallCounts, Fault, Op, Times};
use cql_lease::scylla::{Replication, ScyllaLeaseStore, ScyllaOptions};
use cql_lease::{CountingStore, LeaseStore};
use cql_workqueue::ClaimMode;
use cql_workqueue::QueueStore;
use cql_workqueue::memory::{QueueOp, StoreCounts};
use cql_workqueue::scylla::ScyllaQueueStore;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;

use crate::backend::Backend;
use crate::golden;
use cql_lease::scylla::cql;
use cql_test_server::{CqlTestServer, Flavor, ServerOptions, Target, WireFault};

/// The label the CQL test server counts and targets a lease operation by.
pub fn op_label(op: Op) -> &'static str {
    match op {
        Op::TryAcquire => "lease.try_acquire",
        Op::Renew => "lease.renew",
        Op::Release => "lease.release",
        Op::Read => "lease.read",
        Op::Peek => "lease.peek",
    }
}

/// Teaches `server` every statement of the lease backend for `keyspace.table`, from the
/// golden list (not from the backend's own `cql::ALL`).
pub fn register_lease(server: &CqlTestServer, keyspace: &str, table: &str) {
    for (label, template) in golden::LEASE {
        let rendered = cql::render(template, keyspace, table);
        match rendered.split_once(cql::REPLICATION) {
            Some((prefix, _)) => server.register_prefix(label, prefix),
            None => server.register(label, &rendered),
        }
    }
}

/// The server's fault for a store fault.
pub fn wire_fault(f: Fault) -> WireFault {
    match f {
        Fault::Latency(d) => WireFault::Latency(d),
        Fault::Unavailable => WireFault::Unavailable,
        Fault::TimeoutAfterApply => WireFault::CasTimeoutAfterApply,
        Fault::TimeoutWithoutApply => WireFault::CasTimeoutWithoutApply,
    }
}

/// The server's count for a store count.
pub fn wire_times(t: Times) -> cql_test_server::Times {
    match t {
        Times::Always => cql_test_server::Times::Always,
        Times::Next(n) => cql_test_server::Times::Next(n),
        Times::Random(p) => cql_test_server::Times::Random(p),
    }
}

/// The requests of `ops`' labels (all of `all` when `None`).
pub fn target(op: Option<&'static str>, all: &[&'static str]) -> Target {
    match op {
        Some(label) => Target::Label(label.into()),
        None => Target::AnyLabel(all.iter().map(|l| (*l).to_owned()).collect()),
    }
}

/// The label the CQL test server counts and targets a work-queue operation by.
pub fn queue_label(op: QueueOp) -> &'static str {
    match op {
        QueueOp::Enqueue => "queue.enqueue",
        QueueOp::Revive => "queue.revive",
        QueueOp::Claim => "queue.claim",
        QueueOp::Heartbeat => "queue.heartbeat",
        QueueOp::Complete => "queue.complete",
        QueueOp::Reschedule => "queue.reschedule",
        QueueOp::Unclaim => "queue.unclaim",
        QueueOp::Read => "queue.read",
        QueueOp::Index => "queue.index",
    }
}

/// Teaches `server` every statement of the work-queue backend for `keyspace.table`, from
/// the golden list.
pub fn register_queue(server: &CqlTestServer, keyspace: &str, table: &str) {
    for (label, template) in golden::QUEUE {
        server.register(label, &cql::render(template, keyspace, table));
    }
    // The bakery mode's cells.
    crate::wire_lock_backend::register_cells(server, keyspace, &format!("{table}_cells"));
}

const QUEUE_OPS: [&str; 11] = [
    "queue.enqueue",
    "queue.revive",
    "queue.claim",
    "queue.heartbeat",
    "queue.complete",
    "queue.reschedule",
    "queue.unclaim",
    "queue.read",
    "queue.index",
    "queue.scan",
    "queue.index_read",
];

/// The target of `op`: the index fault covers scans and cursor reads too.
fn queue_target(op: Option<QueueOp>) -> Target {
    match op {
        Some(QueueOp::Index) => Target::AnyLabel(
            ["queue.index", "queue.scan", "queue.index_read"]
                .map(str::to_owned)
                .to_vec(),
        ),
        op => target(op.map(queue_label), &QUEUE_OPS),
    }
}

/// The bakery mode's statements doing `op`'s work (see `inject_bakery` in the backend
/// module): a claim writes cells, a finish writes the row, an undo deletes cells.
fn bakery_target(op: Option<QueueOp>) -> Target {
    let labels: &[&str] = match op {
        None => &[
            "cells.write",
            "cells.delete",
            "cells.read_row",
            "cells.read_cell",
            "queue.plain_write",
            "queue.plain_read",
            "queue.index",
            "queue.scan",
            "queue.index_read",
        ],
        Some(QueueOp::Index) => &["queue.index", "queue.scan", "queue.index_read"],
        Some(QueueOp::Claim | QueueOp::Heartbeat) => &["cells.write"],
        Some(QueueOp::Unclaim) => &["cells.delete"],
        Some(QueueOp::Read) => &["queue.plain_read"],
        Some(QueueOp::Enqueue | QueueOp::Revive | QueueOp::Complete | QueueOp::Reschedule) => {
            &["queue.plain_write"]
        }
    };
    Target::AnyLabel(labels.iter().map(|l| (*l).to_owned()).collect())
}

const LEASE_OPS: [&str; 5] = [
    "lease.try_acquire",
    "lease.renew",
    "lease.release",
    "lease.read",
    "lease.peek",
];

/// Options every wire test uses: one replica, and a client-side timeout so a lost answer
/// surfaces quickly.
pub fn test_options(keyspace: &str, table: &str) -> ScyllaOptions {
    ScyllaOptions {
        keyspace: keyspace.into(),
        table: table.into(),
        replication: Replication::Simple(1),
        request_timeout: Some(Duration::from_secs(2)),
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
            plain_writes: calls("queue.index"),
            tombstones_scanned: self.server.tombstones().total,
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
