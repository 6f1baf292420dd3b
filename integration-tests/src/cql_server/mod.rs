//! A CQL test server: the real `scylla` driver talks to it over TCP.
//!
//! It is a `scylla-proxy` node in dry mode (no database behind it): one request rule hands
//! every frame to [`wire::handle`], which parses the statement with a small CQL parser and
//! executes it on an in-memory engine with Cassandra's semantics. Fault rules are prepended
//! in front of it, aimed at one lease operation by the prepared statement id in the frame.
//!
//! What it reproduces (each has a test in `tests/cql_server_facts.rs`):
//! - the connect handshake (OPTIONS, STARTUP, REGISTER) and the driver's `system.local` /
//!   `system.peers` / `system_schema.keyspaces` reads, with one node (plus empty
//!   `system_schema.tables` / `views` / `types` / `columns`, for a driver that fetches schema
//!   metadata);
//! - cells with write timestamps and TTLs that expire in whole seconds of a controllable
//!   clock; a row marker written by `INSERT` (with its TTL or the table default) and not by
//!   `UPDATE`; `DELETE a, b` removing only those cells;
//! - LWTs: conditions with Cassandra's null rules, `IF EXISTS` / `IF NOT EXISTS`, result rows
//!   shaped as Cassandra (or, in [`Flavor::Scylla`], as ScyllaDB) returns them, conditional
//!   batches limited to one partition, with a TTL per statement and no `USING TIMESTAMP`;
//! - reserved keywords refused as unquoted identifiers.
//!
//! Known differences from real Cassandra, deliberately:
//! - one node, one replica, no real Paxos: an LWT is linearizable because one mutex orders
//!   everything; a lost answer is simulated, not the result of a real timeout;
//! - single-column partition keys only, no clustering columns, no collections in writes,
//!   no paging, no `USING TIMESTAMP` on plain writes, no secondary indexes, no materialized
//!   views, no authentication, no compression, protocol v4 only;
//! - deleted cells leave no tombstones (all writes are ordered by one clock, so later writes
//!   always win), and `TTL()` is computed from the server clock at read time;
//! - `system_schema` describes no user tables, so a driver with schema metadata on routes
//!   without token awareness; ScyllaDB-only tables (`scylla_tables`, `scylla_keyspaces`) are
//!   missing, as on Cassandra;
//! - in strict mode only the statements it was told about are accepted; the rest get an
//!   `Invalid` error naming the statement.

mod ast;
mod clock;
mod engine;
mod exec;
mod lexer;
mod lwt;
mod parser;
mod query;
mod values;
mod wire;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::CallCounts;
use cql_lease::memory::{Op, Times};
use cql_lease::scylla::cql;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla_cql::Consistency;
use scylla_cql::frame::response::error::{DbError, WriteType};
use scylla_proxy::{
    Condition, Node, Proxy, Reaction as _, RequestOpcode, RequestReaction, RequestRule,
    RunningProxy,
};

pub use clock::ServerClock;
pub use engine::Flavor;
use wire::{Reaction, Shared, statement_id};

/// The statements the `scylla` driver sends on its own when connecting and after DDL.
pub const DRIVER_STATEMENTS: &[&str] = &[
    "SELECT host_id, rpc_address, data_center, rack, tokens FROM system.peers",
    "SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name FROM system.local WHERE key='local'",
    "SELECT keyspace_name, replication, durable_writes FROM system_schema.keyspaces",
    "SELECT schema_version FROM system.local WHERE key='local'",
    "SELECT host_id FROM system.local WHERE key='local'",
    "SELECT peer, rpc_address, schema_version FROM system.peers",
    "SELECT host_id, schema_version FROM system.peers",
];

/// A fault the server can inject on a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFault {
    /// Answer late (the statement runs after the delay).
    Latency(Duration),
    /// `Unavailable`, not applied.
    Unavailable,
    /// A CAS `WriteTimeout` after applying.
    CasTimeoutAfterApply,
    /// A CAS `WriteTimeout` without applying.
    CasTimeoutWithoutApply,
    /// The connection breaks after the statement applied.
    DropConnectionAfterApply,
    /// The connection breaks before the statement runs.
    DropConnectionWithoutApply,
}

impl From<cql_lease::memory::Fault> for WireFault {
    fn from(f: cql_lease::memory::Fault) -> Self {
        use cql_lease::memory::Fault;
        match f {
            Fault::Latency(d) => WireFault::Latency(d),
            Fault::Unavailable => WireFault::Unavailable,
            Fault::TimeoutAfterApply => WireFault::CasTimeoutAfterApply,
            Fault::TimeoutWithoutApply => WireFault::CasTimeoutWithoutApply,
        }
    }
}

/// How the server is set up.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Cassandra or ScyllaDB LWT results.
    pub flavor: Flavor,
    /// Accept only the driver's statements and the lease backend's, rendered for this
    /// keyspace and table; `None` accepts any statement the parser understands.
    pub strict_for: Option<(String, String)>,
}

/// A running CQL test server.
pub struct CqlTestServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    clock: Arc<ServerClock>,
    proxy: Mutex<RunningProxy>,
    ops: HashMap<Op, Vec<Vec<u8>>>,
}

impl std::fmt::Debug for CqlTestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqlTestServer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Which lease operation each backend statement is.
const OPS: &[(&str, Op)] = &[
    (cql::CLAIM_ABOVE, Op::TryAcquire),
    (cql::CLAIM_EXACT, Op::TryAcquire),
    (cql::RENEW, Op::Renew),
    (cql::RELEASE, Op::Release),
    (cql::READ, Op::Read),
];

impl CqlTestServer {
    /// Starts a server on a fresh loopback address, port 9042.
    pub async fn start(options: ServerOptions) -> CqlTestServer {
        let clock = Arc::new(ServerClock::default());
        let (keyspace, table) = options
            .strict_for
            .clone()
            .unwrap_or_else(|| ("coordination".into(), "leases".into()));
        let allowlist = options.strict_for.as_ref().map(|_| {
            let mut allow: Vec<String> =
                DRIVER_STATEMENTS.iter().map(|s| (*s).to_owned()).collect();
            for template in cql::ALL {
                let rendered = cql::render(template, &keyspace, &table);
                allow.push(match rendered.split_once(cql::REPLICATION) {
                    Some((prefix, _)) => format!("{prefix}*"),
                    None => rendered,
                });
            }
            allow
        });
        let mut ops: HashMap<Op, Vec<Vec<u8>>> = HashMap::new();
        let mut op_of_id = HashMap::new();
        for (template, op) in OPS {
            let id = statement_id(&cql::render(template, &keyspace, &table));
            ops.entry(*op).or_default().push(id.clone());
            op_of_id.insert(id, *op);
        }
        // Loopback addresses are handed out per process; another process (a second test
        // binary, a benchmark) may hold one already, so move on to the next.
        for _ in 0..256 {
            let address = SocketAddr::new(scylla_proxy::get_exclusive_local_address(), 9042);
            let engine = engine::Engine::new(options.flavor, Arc::clone(&clock), address.ip());
            let shared = Arc::new(Shared::new(engine, allowlist.clone(), op_of_id.clone()));
            let base = base_rule(&shared);
            let node = Node::new_dry_mode(address, Some(vec![base]));
            if let Ok(proxy) = Proxy::new([node]).run().await {
                return CqlTestServer {
                    address,
                    shared,
                    clock,
                    proxy: Mutex::new(proxy),
                    ops,
                };
            }
        }
        panic!("the CQL test server found no free loopback address");
    }

    /// Where the server listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The server's clock (TTLs expire by it).
    pub fn clock(&self) -> &ServerClock {
        &self.clock
    }

    /// A driver session to this server, with schema metadata fetching off. Panics if the
    /// driver warned about reading the cluster metadata.
    pub async fn session(&self) -> Session {
        let before = crate::driver_log::warnings().len();
        let session = SessionBuilder::new()
            .known_node_addr(self.address)
            .fetch_schema_metadata(false)
            .fetch_full_schema_metadata(false)
            .build()
            .await
            .expect("the driver could not connect to the CQL test server");
        let warnings = crate::driver_log::warnings();
        let metadata: Vec<_> = warnings[before.min(warnings.len())..]
            .iter()
            .filter(|w| w.to_lowercase().contains("metadata") || w.contains("cql-test-server"))
            .collect();
        assert!(
            metadata.is_empty(),
            "driver warnings while connecting: {metadata:?}"
        );
        session
    }

    /// Statements refused because the server did not know them.
    pub fn refused(&self) -> Vec<String> {
        self.shared
            .refused
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Texts of every statement executed so far.
    pub fn executed(&self) -> Vec<String> {
        self.shared
            .executed
            .lock()
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Lease statements executed per operation (including faulted ones).
    pub fn calls(&self) -> CallCounts {
        self.shared.counts()
    }

    /// Injects `fault` on the statements of `op` (every lease statement when `None`).
    pub fn inject(&self, op: Option<Op>, fault: WireFault, times: Times) {
        let ids: Vec<Vec<u8>> = match op {
            Some(op) => self.ops.get(&op).cloned().unwrap_or_default(),
            None => self.ops.values().flatten().cloned().collect(),
        };
        let aimed = Condition::any([
            Condition::RequestOpcode(RequestOpcode::Execute),
            Condition::RequestOpcode(RequestOpcode::Batch),
        ])
        .and(Condition::any(ids.into_iter().map(|id| {
            Condition::BodyContainsCaseSensitive(id.into_boxed_slice())
        })));
        let when = match times {
            Times::Always => Condition::True,
            Times::Next(n) => Condition::TrueForLimitedTimes(n),
            Times::Random(p) => Condition::RandomWithProbability(p),
        };
        let cas_timeout = DbError::WriteTimeout {
            consistency: Consistency::LocalSerial,
            received: 0,
            required: 1,
            write_type: WriteType::Cas,
        };
        let shared = Arc::clone(&self.shared);
        let reaction = |r: Reaction| {
            let shared = Arc::clone(&shared);
            RequestReaction::forge_response(Arc::new(move |frame| wire::handle(&shared, frame, &r)))
        };
        let rule = match fault {
            WireFault::Latency(d) => {
                let shared = Arc::clone(&self.shared);
                RequestReaction::forge_response_with_delay(
                    d,
                    Arc::new(move |frame| wire::handle(&shared, frame, &Reaction::Normal)),
                )
            }
            WireFault::Unavailable => reaction(Reaction::Fail(DbError::Unavailable {
                consistency: Consistency::LocalSerial,
                required: 1,
                alive: 0,
            })),
            WireFault::CasTimeoutAfterApply => reaction(Reaction::ApplyThenFail(cas_timeout)),
            WireFault::CasTimeoutWithoutApply => reaction(Reaction::Fail(cas_timeout)),
            WireFault::DropConnectionAfterApply => reaction(Reaction::ApplyThenBreak),
            WireFault::DropConnectionWithoutApply => reaction(Reaction::Break),
        };
        if let Ok(mut proxy) = self.proxy.lock() {
            // The count condition goes last so it only counts frames aimed at the statement.
            proxy.running_nodes[0].prepend_request_rules(vec![RequestRule(aimed.and(when), rule)]);
        }
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        let base = base_rule(&self.shared);
        if let Ok(mut proxy) = self.proxy.lock() {
            proxy.running_nodes[0].change_request_rules(Some(vec![base]));
        }
    }
}

fn base_rule(shared: &Arc<Shared>) -> RequestRule {
    let shared = Arc::clone(shared);
    RequestRule(
        Condition::True,
        RequestReaction::forge_response(Arc::new(move |frame| {
            wire::handle(&shared, frame, &Reaction::Normal)
        })),
    )
}
