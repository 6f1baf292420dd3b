//! Leases with fencing tokens, leader election, locks and a work queue on ScyllaDB or Apache
//! Cassandra, in one dependency.
//!
//! The three crates are re-exported as [`lease`], [`election`] and [`workqueue`]; a
//! [`Backend`] is the one handle every primitive is built on: [`Backend::embedded`] in
//! memory (tests, demos, one process), or `Backend::connect` on a cluster (the `scylla`
//! feature, on by default). Both hand out the same three stores, so code written against
//! one runs on the other unchanged.
//!
//! ```
//! use cql_coordination::Backend;
//! use cql_coordination::election::Election;
//! use cql_coordination::lease::lock::{LeaseLock, Lock};
//! use cql_coordination::lease::{LeaseClient, Timing};
//! use cql_coordination::workqueue::{QueueConfig, WorkQueue};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let backend = Backend::embedded();
//! let leases = LeaseClient::new(backend.leases(), Timing::default())?;
//! let election = Election::new(backend.leases(), "scheduler", Timing::default())?;
//! let lock = LeaseLock::new(leases.clone(), "worker-1")?;
//! let queue = WorkQueue::new(backend.queues(), "emails", QueueConfig::default())?;
//! let guard = lock.lock("report", None).await?;
//! guard.release().await?;
//! # let _ = (election, queue);
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```

use std::sync::Arc;

// Inlined so that `cargo doc -p cql-coordination` shows each crate's items under these
// modules rather than links out to crates the reader may not have documented.
#[doc(inline)]
pub use cql_election as election;
#[doc(inline)]
pub use cql_lease as lease;
#[doc(inline)]
pub use cql_workqueue as workqueue;

use cql_lease::LeaseStore;
use cql_lease::cells::CellStore;
use cql_workqueue::store::QueueStore;

mod backend;
#[cfg(feature = "scylla")]
mod cluster;

pub use backend::Backend;
#[cfg(feature = "scylla")]
pub use cluster::CELL_TABLE;

/// The stores a [`Backend`] hands out.
#[derive(Clone)]
struct Stores {
    leases: Arc<dyn LeaseStore>,
    cells: Arc<dyn CellStore>,
    queues: Arc<dyn QueueStore>,
}
