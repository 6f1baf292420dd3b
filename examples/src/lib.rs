//! Shared plumbing of the example programs: command-line backend selection.

pub mod frozen;
pub mod lwt_ceiling;
pub mod queue_steady;
pub mod tombstones;

use std::sync::Arc;

use cql_lease::LeaseStore;
use cql_lease::scylla::{Replication, ScyllaLeaseStore, ScyllaOptions};
use scylla::client::session_builder::SessionBuilder;

/// Where the example runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The embedded, in-process store.
    Embedded,
    /// A ScyllaDB or Cassandra node at `HOST:PORT`.
    Scylla(String),
}

impl Target {
    /// Opens the store: an empty embedded one, or the keyspace `cql_lease_demo` on a cluster
    /// (created with replication factor 1 if missing).
    pub async fn open(&self) -> Result<Arc<dyn LeaseStore>, Box<dyn std::error::Error>> {
        match self {
            Target::Embedded => Ok(Arc::new(cql_lease::MemoryStore::new())),
            Target::Scylla(addr) => {
                let session = Arc::new(SessionBuilder::new().known_node(addr).build().await?);
                let options = ScyllaOptions {
                    keyspace: "cql_lease_demo".into(),
                    replication: Replication::Simple(1),
                    ..ScyllaOptions::default()
                };
                options.create_schema(&session).await?;
                Ok(Arc::new(ScyllaLeaseStore::new(session, options).await?))
            }
        }
    }
}

/// Opens a work-queue store: an empty embedded one (returned too, for its counters), or the
/// keyspace `cql_queue_demo` on a cluster (created with replication factor 1 if missing).
pub async fn open_queue_store(
    target: &Target,
) -> Result<
    (
        Arc<dyn cql_workqueue::store::QueueStore>,
        Option<Arc<cql_workqueue::memory::MemoryQueueStore>>,
    ),
    Box<dyn std::error::Error>,
> {
    match target {
        Target::Embedded => {
            let store = Arc::new(cql_workqueue::memory::MemoryQueueStore::new());
            Ok((store.clone(), Some(store)))
        }
        Target::Scylla(addr) => {
            use cql_workqueue::scylla::{DEFAULT_TABLE, ScyllaQueueStore};
            let session = Arc::new(SessionBuilder::new().known_node(addr).build().await?);
            let options = ScyllaOptions {
                keyspace: "cql_queue_demo".into(),
                table: DEFAULT_TABLE.into(),
                replication: Replication::Simple(1),
                ..ScyllaOptions::default()
            };
            ScyllaQueueStore::create_schema(&session, &options).await?;
            Ok((
                Arc::new(ScyllaQueueStore::new(session, options).await?),
                None,
            ))
        }
    }
}

/// `--scylla HOST:PORT`: the demos' only flag, flattened into each one's command line.
#[derive(Debug, clap::Args)]
pub struct ScyllaFlag {
    /// A cluster instead of the embedded store.
    #[arg(long, value_name = "HOST:PORT")]
    pub scylla: Option<String>,
}

impl Flags for ScyllaFlag {
    fn get(&self, name: &str) -> Option<&str> {
        match name {
            "scylla" => self.scylla.as_deref(),
            _ => None,
        }
    }
}

/// Flags read by name: each program parses its command line with clap (derive), and
/// answers `get` from its parsed fields, so the code reading them names the flag it means.
pub trait Flags {
    /// The value of `--name`, if given; `Some("")` for a switch that is on.
    fn get(&self, name: &str) -> Option<&str>;

    /// A number of seconds, if given.
    ///
    /// # Errors
    /// The value is not a number.
    fn seconds(&self, name: &str) -> Result<Option<std::time::Duration>, String> {
        self.get(name)
            .map(|v| {
                v.parse::<f64>()
                    .map_err(|e| format!("--{name}: {e}"))
                    .and_then(|secs| {
                        std::time::Duration::try_from_secs_f64(secs)
                            .map_err(|e| format!("--{name}: {e}"))
                    })
            })
            .transpose()
    }

    /// The backend named by `--scylla`, embedded otherwise.
    fn target(&self) -> Target {
        self.get("scylla")
            .map_or(Target::Embedded, |a| Target::Scylla(a.to_owned()))
    }
}

/// Every call the embedded work-queue store served (both claim modes' tables).
pub fn memory_round_trips(store: &cql_workqueue::memory::MemoryQueueStore) -> u64 {
    let counts = store.counts();
    let (writes, reads) = store.plain_items().calls();
    counts.lwts()
        + counts.reads()
        + counts.plain_writes
        + writes
        + reads
        + store.cells().round_trips()
}

/// Every work-queue statement (both claim modes') the CQL test server executed.
pub fn wire_round_trips(server: &cql_test_server::CqlTestServer) -> u64 {
    let mut labels: Vec<&str> = integration_tests::golden::QUEUE
        .iter()
        .map(|(label, _)| *label)
        .chain(
            integration_tests::wire_lock_backend::CELL_STATEMENTS
                .iter()
                .map(|(label, _)| *label),
        )
        .filter(|label| !label.ends_with(".schema"))
        .collect();
    labels.sort_unstable();
    labels.dedup();
    labels.iter().map(|label| server.calls(label)).sum()
}

/// The README's Rust examples, compiled (and run, unless marked `no_run`) by
/// `cargo test --doc`.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The Rust examples of `docs/lease.md`.
#[doc = include_str!("../../docs/lease.md")]
#[cfg(doctest)]
pub struct LeaseDocDoctests;

/// The Rust examples of `docs/election.md`.
#[doc = include_str!("../../docs/election.md")]
#[cfg(doctest)]
pub struct ElectionDocDoctests;

/// The Rust examples of `docs/lock.md`.
#[doc = include_str!("../../docs/lock.md")]
#[cfg(doctest)]
pub struct LockDocDoctests;

/// The Rust examples of `docs/queue.md`.
#[doc = include_str!("../../docs/queue.md")]
#[cfg(doctest)]
pub struct QueueDocDoctests;

/// The Rust examples of `docs/design.md`.
#[doc = include_str!("../../docs/design.md")]
#[cfg(doctest)]
pub struct DesignDocDoctests;

/// The Rust examples of `docs/operations.md`.
#[doc = include_str!("../../docs/operations.md")]
#[cfg(doctest)]
pub struct OperationsDocDoctests;

/// The Rust examples of `docs/benchmarks.md` (none today; included so any added is compiled).
#[doc = include_str!("../../docs/benchmarks.md")]
#[cfg(doctest)]
pub struct BenchmarksDocDoctests;
