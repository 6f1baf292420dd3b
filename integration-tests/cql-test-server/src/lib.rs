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
mod auth;
mod clock;
mod clustering;
mod consistency;
mod ddl;
mod deferred;
pub mod driver_log;
mod engine;
mod exec;
mod faults;
mod fine_timer;
mod frames;
mod front;
mod gate;
mod keys;
mod lexer;
mod lwt;
mod options;
mod paging;
mod parser;
mod paxos;
mod prepare;
mod query;
mod read;
mod registry;
mod rules;
mod server_thread;
mod stats;
mod system;
mod tls;
mod tombstone;
mod values;
mod walk;
mod wire;
mod write;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla_proxy::{Node, Proxy, RunningProxy};

pub use auth::{AUTHENTICATOR, Credentials};
pub use clock::ServerClock;
pub use engine::Flavor;
pub use registry::DRIVER_STATEMENTS;
pub use rules::NodeFault;
pub use stats::{ConsistencyUse, PartitionId, PaxosStats, TombstoneStats};
pub use tls::{TestCa, TlsOptions};
use wire::Shared;

pub use faults::{Target, Times, WireFault};
pub use options::{ServerOptions, StartError};

/// A running CQL test server: one node, or a cluster of `ServerOptions::nodes` nodes on
/// distinct loopback addresses over one shared store.
pub struct CqlTestServer {
    addresses: Vec<SocketAddr>,
    shared: Arc<Shared>,
    clock: Arc<ServerClock>,
    control: Mutex<Control>,
    /// The user [`CqlTestServer::session`] logs in as, when the server has authentication.
    credentials: Option<Credentials>,
    /// Accept the driver's connections with Nagle's algorithm off (see `front`), one per node;
    /// shut while their node is down.
    fronts: Vec<front::FrontDoor>,
    /// The thread the server runs on when `ServerOptions::own_thread` (last: dropped after
    /// everything that runs on it).
    thread: Option<server_thread::ServerThread>,
}

/// The proxy and what its rules are built from.
struct Control {
    proxy: RunningProxy,
    injected: Vec<rules::Injected>,
    node_faults: Vec<Option<NodeFault>>,
}

impl std::fmt::Debug for CqlTestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqlTestServer")
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

impl CqlTestServer {
    /// Starts a server of `options.nodes` nodes, each on a fresh loopback address
    /// (127.0.0.x), port 9042.
    ///
    /// # Errors
    ///
    /// [`StartError::NoFreeAddress`] when no set of loopback addresses could be bound;
    /// [`StartError::Tls`] when the TLS certificate could not be made;
    /// [`StartError::Thread`] when the server's own thread (`ServerOptions::own_thread`)
    /// could not be started or its start panicked.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a server that was not returned is dropped, and its ports freed.
    pub async fn start(options: ServerOptions) -> Result<CqlTestServer, StartError> {
        if !options.own_thread {
            return Self::start_here(options).await;
        }
        let thread = server_thread::ServerThread::spawn()?;
        let mut server = thread
            .handle()
            .spawn(Self::start_here(options))
            .await
            .map_err(|e| StartError::Thread(e.to_string()))??;
        server.thread = Some(thread);
        Ok(server)
    }

    /// [`CqlTestServer::start`] with the server's tasks on the current runtime.
    async fn start_here(options: ServerOptions) -> Result<CqlTestServer, StartError> {
        let clock = Arc::new(ServerClock::default());
        let count = options.nodes.max(1);
        let mut last = String::new();
        // Loopback addresses are handed out per process; another process (a second test
        // binary, a benchmark) may hold one already, so move on to the next.
        const TRIES: usize = 256;
        for _ in 0..TRIES {
            let addresses: Vec<SocketAddr> = (0..count)
                .map(|_| SocketAddr::new(scylla_proxy::get_exclusive_local_address(), 9042))
                .collect();
            let mut listeners = Vec::with_capacity(count);
            for address in &addresses {
                match tokio::net::TcpListener::bind(address).await {
                    Ok(listener) => listeners.push(listener),
                    Err(e) => {
                        last = e.to_string();
                        break;
                    }
                }
            }
            if listeners.len() < count {
                continue;
            }
            let ips: Vec<_> = addresses.iter().map(SocketAddr::ip).collect();
            let engine = engine::Engine::new(&options, Arc::clone(&clock), ips.clone());
            let shared = Arc::new(Shared::new(engine, options.strict));
            // Each node listens on a port nobody uses; drivers come in through its front door.
            let node_addresses: Vec<SocketAddr> = addresses
                .iter()
                .map(|address| SocketAddr::new(address.ip(), 0))
                .collect();
            let nodes = node_addresses.iter().enumerate().map(|(i, address)| {
                Node::new_dry_mode(*address, Some(rules::node_rules(&shared, i, None, &[])))
            });
            match Proxy::new(nodes).run().await {
                Ok(proxy) => {
                    let tls = match &options.tls {
                        Some(tls) => Some(tls.acceptor(&ips).map_err(StartError::Tls)?),
                        None => None,
                    };
                    let gate = Arc::new(gate::Gate {
                        tls,
                        credentials: options.credentials.clone(),
                    });
                    let fronts = listeners
                        .into_iter()
                        .zip(&node_addresses)
                        .map(|(listener, node)| {
                            front::FrontDoor::open(
                                listener,
                                proxy.transport_factory(),
                                *node,
                                Arc::clone(&gate),
                                Arc::clone(&shared.parked),
                            )
                        })
                        .collect();
                    return Ok(CqlTestServer {
                        addresses,
                        shared,
                        clock,
                        control: Mutex::new(Control {
                            proxy,
                            injected: Vec::new(),
                            node_faults: vec![None; count],
                        }),
                        credentials: options.credentials.clone(),
                        fronts,
                        thread: None,
                    });
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(StartError::NoFreeAddress { tried: TRIES, last })
    }

    /// Where the first node listens (a driver given it discovers the others).
    pub fn address(&self) -> SocketAddr {
        self.addresses[0]
    }

    /// Where every node listens, in node order: `node_fault(i, ..)` targets
    /// `addresses()[i]`.
    pub fn addresses(&self) -> &[SocketAddr] {
        &self.addresses
    }

    /// Puts node `node` under `fault` (replacing its previous one) until [`Self::heal`].
    /// Out-of-range nodes are ignored.
    pub fn node_fault(&self, node: usize, fault: NodeFault) {
        self.set_node_fault(node, Some(fault));
    }

    /// Brings node `node` back: it answers again (requests dropped while it was frozen stay
    /// unanswered; the client's timeout settles them), and a node that was down listens
    /// again on the same address.
    pub fn heal(&self, node: usize) {
        self.set_node_fault(node, None);
    }

    /// Query, execute and batch requests that reached node `node` so far (faulted ones
    /// included, frozen and down ones not).
    pub fn requests_on(&self, node: usize) -> u64 {
        self.shared
            .per_node
            .lock()
            .map(|p| p.get(&node).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Query, execute and batch requests that node `node` swallowed while frozen, so far.
    pub fn requests_frozen_on(&self, node: usize) -> u64 {
        self.shared
            .frozen_per_node
            .lock()
            .map(|p| p.get(&node).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    fn set_node_fault(&self, node: usize, fault: Option<NodeFault>) {
        // What the new rules spawn (a node listening again, a frozen node's counter) runs
        // where the server runs.
        let _on_server = self.thread.as_ref().map(|t| t.handle().enter());
        if let Ok(mut control) = self.control.lock() {
            let Some(slot) = control.node_faults.get_mut(node) else {
                return;
            };
            *slot = fault;
            self.door_for(node, fault);
            let rules = rules::node_rules(&self.shared, node, fault, &control.injected);
            if let Some(running) = control.proxy.running_nodes.get_mut(node) {
                running.change_request_rules(Some(rules));
            }
        }
    }

    /// A down node stops listening and loses its connections; any other state listens.
    fn door_for(&self, node: usize, fault: Option<NodeFault>) {
        let Some(front) = self.fronts.get(node) else {
            return;
        };
        if fault == Some(NodeFault::Down) {
            front.shut();
        } else if let Err(e) = front.reopen() {
            tracing::warn!(node, error = %e, "cql-test-server: could not listen again");
        }
    }

    /// Rebuilds every node's rules after the injected faults changed.
    fn rebuild(&self, control: &mut Control) {
        let _on_server = self.thread.as_ref().map(|t| t.handle().enter());
        for node in 0..self.addresses.len() {
            let fault = control.node_faults.get(node).copied().flatten();
            let rules = rules::node_rules(&self.shared, node, fault, &control.injected);
            if let Some(running) = control.proxy.running_nodes.get_mut(node) {
                running.change_request_rules(Some(rules));
            }
        }
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

    /// A driver session to this server, with schema metadata fetching off, logged in with
    /// the server's credentials if it has some (a server with TLS needs a session built
    /// with the client's TLS context instead). Panics if the driver cannot connect or
    /// warned about reading the cluster metadata.
    #[allow(clippy::expect_used)] // a test harness: not connecting fails the test
    pub async fn session(&self) -> Session {
        let before = driver_log::warnings().len();
        let mut builder = SessionBuilder::new();
        if let Some(c) = &self.credentials {
            builder = builder.user(&c.user, &c.password);
        }
        let session = builder
            .known_node_addr(self.address())
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

    /// Plain (non-LWT) writes and deletes per partition so far.
    pub fn plain_writes(&self) -> HashMap<PartitionId, u64> {
        self.shared.engine_stats(|e| e.plain_writes.clone())
    }

    /// Paxos operations, rounds and contended rounds per partition so far, and the
    /// operations that timed out.
    pub fn paxos(&self) -> PaxosStats {
        self.shared.paxos.stats()
    }

    /// Injects `fault` on the requests of `target`, `times` times, on every node
    /// (`Times::Next(n)`: `n` in the whole cluster, except for latency faults, see the
    /// README).
    pub fn inject(&self, target: Target, fault: WireFault, times: Times) {
        let injected = rules::Injected::new(self.shared.needles(&target), fault, times);
        if let Ok(mut control) = self.control.lock() {
            control.injected.push(injected);
            self.rebuild(&mut control);
        }
    }

    /// Removes every injected fault (node faults stay until [`Self::heal`]).
    pub fn clear_faults(&self) {
        if let Ok(mut control) = self.control.lock() {
            control.injected.clear();
            self.rebuild(&mut control);
        }
    }
}

fn lock_or_default<T: Clone + Default>(m: &Mutex<T>) -> T {
    m.lock().map(|v| v.clone()).unwrap_or_default()
}
