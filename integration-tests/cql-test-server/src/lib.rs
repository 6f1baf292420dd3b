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
//! let server = CqlTestServer::start(ServerOptions::default()).await.expect("server");
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
mod consistency;
mod ddl;
pub mod driver_log;
mod engine;
mod exec;
mod faults;
mod frames;
mod front;
mod keys;
mod lexer;
mod lwt;
mod options;
mod paging;
mod parser;
mod prepare;
mod query;
mod read;
mod registry;
mod stats;
mod system;
mod tombstone;
mod values;
mod walk;
mod wire;
mod write;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

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

pub use faults::{Target, Times, WireFault};
pub use options::{ServerOptions, StartError};

/// A running CQL test server.
pub struct CqlTestServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    clock: Arc<ServerClock>,
    proxy: Mutex<RunningProxy>,
    /// Accepts the driver's connections with Nagle's algorithm off (see `front`).
    _front: front::FrontDoor,
}

impl std::fmt::Debug for CqlTestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqlTestServer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl CqlTestServer {
    /// Starts a server on a fresh loopback address (127.0.0.x), port 9042.
    ///
    /// # Errors
    ///
    /// [`StartError::NoFreeAddress`] when no loopback address could be bound.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a server that was not returned is dropped, and its port freed.
    pub async fn start(options: ServerOptions) -> Result<CqlTestServer, StartError> {
        let clock = Arc::new(ServerClock::default());
        let mut last = String::new();
        // Loopback addresses are handed out per process; another process (a second test
        // binary, a benchmark) may hold one already, so move on to the next.
        const TRIES: usize = 256;
        for _ in 0..TRIES {
            let address = SocketAddr::new(scylla_proxy::get_exclusive_local_address(), 9042);
            let listener = match tokio::net::TcpListener::bind(address).await {
                Ok(listener) => listener,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let engine = engine::Engine::new(&options, Arc::clone(&clock), address.ip());
            let shared = Arc::new(Shared::new(engine, options.strict));
            let base = base_rule(&shared);
            // The node listens on a port nobody uses; drivers come in through the front door.
            let node_address = SocketAddr::new(address.ip(), 0);
            let node = Node::new_dry_mode(node_address, Some(vec![base]));
            match Proxy::new([node]).run().await {
                Ok(proxy) => {
                    let front =
                        front::FrontDoor::open(listener, proxy.transport_factory(), node_address);
                    return Ok(CqlTestServer {
                        address,
                        shared,
                        clock,
                        proxy: Mutex::new(proxy),
                        _front: front,
                    });
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(StartError::NoFreeAddress { tried: TRIES, last })
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
