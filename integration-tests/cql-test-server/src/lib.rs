//! A CQL test server: the real `scylla` driver talks to it over TCP, and an in-memory engine
//! answers with Cassandra's semantics (or ScyllaDB's, where they differ).
//!
//! It is a `scylla-proxy` node in dry mode (no database behind it): one request rule hands
//! every frame to the engine. Like Simulacron, a test registers the statements its code sends
//! (each with a *label*), primes faults by label or by statement text, and reads counters:
//! calls per label, consistency levels used, tombstones scanned per read, Paxos rounds and
//! contention per partition.
//!
//! ```no_run
//! # async fn demo() {
//! use cql_test_server::{CqlTestServer, ServerOptions, Target, Times, WireFault};
//! let server = CqlTestServer::start(ServerOptions::default()).await;
//! server.register("claim", "UPDATE ks.t SET v = ? WHERE k = ? IF v = null");
//! server.inject(Target::Label("claim".into()), WireFault::Unavailable, Times::Next(1));
//! let session = server.session().await;
//! // ... run the code under test with `session`, then:
//! assert_eq!(server.calls("claim"), 0);
//! let tombstones = server.tombstones();
//! # let _ = (session, tombstones);
//! # }
//! ```
//!
//! The statements the server understands and every known difference from Cassandra are
//! listed in this crate's README.

mod apply;
mod ast;
mod clock;
mod clustering;
mod ddl;
pub mod driver_log;
mod engine;
mod exec;
mod frames;
mod keys;
mod lexer;
mod lwt;
mod paging;
mod parser;
mod query;
mod read;
mod registry;
mod stats;
mod system;
mod values;
mod wire;
mod write;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
pub use registry::DRIVER_STATEMENTS;
pub use stats::{ConsistencyUse, PartitionId, PaxosStats, TombstoneStats};
use wire::{Reaction, Shared};

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

/// How often an injected fault fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Times {
    /// Every matching request.
    Always,
    /// The next `n` matching requests.
    Next(usize),
    /// Each matching request with this probability.
    Random(f64),
}

/// Which requests a fault is aimed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every statement registered under this label (prepared or not, alone or first in a
    /// batch).
    Label(String),
    /// Requests carrying this exact statement text (or its prepared id).
    Statement(String),
    /// Every statement registered under any of these labels.
    AnyLabel(Vec<String>),
    /// Every registered statement except the driver's own.
    AllRegistered,
}

/// How the server is set up. `ServerOptions::default()` is a strict Cassandra with
/// Cassandra's default thresholds.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Cassandra or ScyllaDB behaviour where they differ.
    pub flavor: Flavor,
    /// Refuse, with an error naming it, any statement that was not registered (the driver's
    /// own statements are always registered).
    pub strict: bool,
    /// A read scanning more tombstones than this records a warning (Cassandra: 1000).
    pub tombstone_warn_threshold: u64,
    /// A read scanning more tombstones than this fails with `ReadFailure` (Cassandra: 100000).
    pub tombstone_failure_threshold: u64,
    /// How long, in seconds of the server clock, tombstones are kept (Cassandra: 864000).
    pub gc_grace_seconds: i64,
    /// When set, an LWT that finds this many other LWTs of its partition in flight (or more)
    /// answers with a CAS `WriteTimeout` without applying, as a contended Paxos round does
    /// when `cas_contention_timeout` runs out.
    pub cas_contention_budget: Option<u32>,
    /// How long one Paxos round holds its partition: an LWT on a partition within this time
    /// of another one's start counts as contended (a local cluster needs about 1-2 ms for
    /// the four message rounds of Paxos).
    pub paxos_round: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            flavor: Flavor::Cassandra,
            strict: true,
            tombstone_warn_threshold: 1000,
            tombstone_failure_threshold: 100_000,
            gc_grace_seconds: 864_000,
            cas_contention_budget: None,
            paxos_round: Duration::from_millis(2),
        }
    }
}

impl ServerOptions {
    /// A lenient server (any statement the parser understands) of `flavor`.
    pub fn lenient(flavor: Flavor) -> Self {
        ServerOptions {
            flavor,
            strict: false,
            ..ServerOptions::default()
        }
    }

    /// A strict server of `flavor`.
    pub fn strict(flavor: Flavor) -> Self {
        ServerOptions {
            flavor,
            ..ServerOptions::default()
        }
    }
}

/// A running CQL test server.
pub struct CqlTestServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    clock: Arc<ServerClock>,
    proxy: Mutex<RunningProxy>,
}

impl std::fmt::Debug for CqlTestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqlTestServer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl CqlTestServer {
    /// Starts a server on a fresh loopback address, port 9042. Panics when no loopback
    /// address is free (a test-harness failure).
    pub async fn start(options: ServerOptions) -> CqlTestServer {
        let clock = Arc::new(ServerClock::default());
        // Loopback addresses are handed out per process; another process (a second test
        // binary, a benchmark) may hold one already, so move on to the next.
        for _ in 0..256 {
            let address = SocketAddr::new(scylla_proxy::get_exclusive_local_address(), 9042);
            let engine = engine::Engine::new(&options, Arc::clone(&clock), address.ip());
            let shared = Arc::new(Shared::new(engine, options.strict));
            let base = base_rule(&shared);
            let node = Node::new_dry_mode(address, Some(vec![base]));
            if let Ok(proxy) = Proxy::new([node]).run().await {
                return CqlTestServer {
                    address,
                    shared,
                    clock,
                    proxy: Mutex::new(proxy),
                };
            }
        }
        panic!("the CQL test server found no free loopback address");
    }

    /// Where the server listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The server's clock (TTLs and `gc_grace_seconds` run on it).
    pub fn clock(&self) -> &ServerClock {
        &self.clock
    }

    /// Accepts `statement` (exact text) in strict mode, and counts and targets it as `label`.
    pub fn register(&self, label: &str, statement: &str) {
        self.shared.register(label, statement, false);
    }

    /// Accepts every statement starting with `prefix` (e.g. a `CREATE KEYSPACE` whose
    /// replication varies), labelled `label`.
    pub fn register_prefix(&self, label: &str, prefix: &str) {
        self.shared.register(label, prefix, true);
    }

    /// A driver session to this server, with schema metadata fetching off. Panics if the
    /// driver cannot connect or warned about reading the cluster metadata.
    #[allow(clippy::expect_used)] // a test harness: not connecting fails the test
    pub async fn session(&self) -> Session {
        let before = driver_log::warnings().len();
        let session = SessionBuilder::new()
            .known_node_addr(self.address)
            .fetch_schema_metadata(false)
            .fetch_full_schema_metadata(false)
            .build()
            .await
            .expect("the driver could not connect to the CQL test server");
        let warnings = driver_log::warnings();
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

    /// Statements refused because they were not registered (strict mode).
    pub fn refused(&self) -> Vec<String> {
        lock_or_default(&self.shared.refused)
    }

    /// Texts of every accepted statement received so far (prepared or run, also when it then
    /// failed), sorted, each once.
    pub fn received(&self) -> Vec<String> {
        self.shared
            .received
            .lock()
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Texts of every statement executed so far, sorted, each once.
    pub fn executed(&self) -> Vec<String> {
        self.shared
            .executed
            .lock()
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Requests whose (first) statement carries `label`, faulted ones included.
    pub fn calls(&self, label: &str) -> u64 {
        self.shared.calls(label)
    }

    /// The consistency levels of every executed request, in order.
    pub fn consistencies(&self) -> Vec<ConsistencyUse> {
        lock_or_default(&self.shared.consistencies)
    }

    /// Tombstones scanned by reads so far, and the warnings recorded.
    pub fn tombstones(&self) -> TombstoneStats {
        self.shared.engine_stats(|e| e.tombstone_stats.clone())
    }

    /// LWTs and contended LWTs per partition so far.
    pub fn paxos(&self) -> PaxosStats {
        self.shared.engine_stats(|e| e.paxos.stats())
    }

    /// Injects `fault` on the requests of `target`, `times` times.
    pub fn inject(&self, target: Target, fault: WireFault, times: Times) {
        let needles = self.shared.needles(&target);
        let by_id = Condition::any([
            Condition::RequestOpcode(RequestOpcode::Execute),
            Condition::RequestOpcode(RequestOpcode::Batch),
        ])
        .and(Condition::any(
            needles
                .ids
                .into_iter()
                .map(|id| Condition::BodyContainsCaseSensitive(id.into_boxed_slice())),
        ));
        let by_text = Condition::any([
            Condition::RequestOpcode(RequestOpcode::Query),
            Condition::RequestOpcode(RequestOpcode::Batch),
        ])
        .and(Condition::any(needles.texts.into_iter().map(|t| {
            Condition::BodyContainsCaseSensitive(t.into_bytes().into_boxed_slice())
        })));
        let aimed = Condition::any([by_id, by_text]);
        let when = match times {
            Times::Always => Condition::True,
            Times::Next(n) => Condition::TrueForLimitedTimes(n),
            Times::Random(p) => Condition::RandomWithProbability(p),
        };
        let cas_timeout = DbError::WriteTimeout {
            consistency: Consistency::Serial,
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
                consistency: Consistency::Serial,
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

fn lock_or_default<T: Clone + Default>(m: &Mutex<T>) -> T {
    m.lock().map(|v| v.clone()).unwrap_or_default()
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
