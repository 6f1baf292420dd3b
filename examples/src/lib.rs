//! Shared plumbing of the example programs: command-line backend selection.

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
    /// Reads `--scylla HOST:PORT` from the arguments; embedded otherwise.
    pub fn from_args() -> Result<Target, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        match args.as_slice() {
            [] => Ok(Target::Embedded),
            [flag, addr] if flag == "--scylla" => Ok(Target::Scylla(addr.clone())),
            other => Err(format!("usage: [--scylla HOST:PORT]; got {other:?}")),
        }
    }

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
