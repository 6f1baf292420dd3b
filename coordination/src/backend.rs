//! The backend handle: the stores of one backend, for every primitive.

use std::sync::Arc;

use cql_lease::cells::CellStore;
use cql_lease::cells::memory::MemoryCellStore;
use cql_lease::{LeaseStore, MemoryStore};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::store::QueueStore;

use crate::Stores;

/// One backend for every primitive: the lease store (leases, elections, the lease lock),
/// the plain-cell store (the fair, bakery and shadow locks) and the queue store. Cheap to
/// clone; clones share the stores.
#[derive(Clone)]
pub struct Backend {
    stores: Stores,
    kind: &'static str,
}

impl Backend {
    /// The embedded backend: linearizable stores in this process's memory, gone when the
    /// last clone is dropped. For tests, demos and single-process use.
    pub fn embedded() -> Self {
        Backend {
            stores: Stores {
                leases: Arc::new(MemoryStore::new()),
                cells: Arc::new(MemoryCellStore::new()),
                queues: Arc::new(MemoryQueueStore::new()),
            },
            kind: "embedded",
        }
    }

    #[cfg(feature = "scylla")]
    pub(crate) fn from_stores(stores: Stores, kind: &'static str) -> Self {
        Backend { stores, kind }
    }

    /// The lease store: for [`LeaseClient::new`](cql_lease::LeaseClient::new),
    /// [`Election::new`](cql_election::Election::new) and, through a lease client,
    /// [`LeaseLock`](cql_lease::lock::LeaseLock).
    pub fn leases(&self) -> Arc<dyn LeaseStore> {
        Arc::clone(&self.stores.leases)
    }

    /// The plain-cell store: for the locks that need no LWTs
    /// ([`FairLock`](cql_lease::lock::FairLock), [`BakeryLock`](cql_lease::lock::BakeryLock),
    /// [`ShadowLock`](cql_lease::lock::ShadowLock)).
    pub fn cells(&self) -> Arc<dyn CellStore> {
        Arc::clone(&self.stores.cells)
    }

    /// The queue store: for [`WorkQueue::new`](cql_workqueue::WorkQueue::new).
    pub fn queues(&self) -> Arc<dyn QueueStore> {
        Arc::clone(&self.stores.queues)
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cql_lease::{LeaseClient, Timing, TryAcquire};

    /// Clones of one embedded backend share its stores: a lease taken through one clone is
    /// held for the other.
    #[tokio::test]
    async fn clones_of_an_embedded_backend_share_their_stores() {
        let backend = Backend::embedded();
        let other = backend.clone();
        let a = LeaseClient::new(backend.leases(), Timing::default()).expect("client");
        let b = LeaseClient::new(other.leases(), Timing::default()).expect("client");
        let held = a.try_acquire("x", "a", None).await.expect("try");
        assert!(matches!(held, TryAcquire::Acquired(_)));
        let seen = b.try_acquire("x", "b", None).await.expect("try");
        assert!(matches!(seen, TryAcquire::Held(_)));
    }

    /// Two embedded backends are separate worlds.
    #[tokio::test]
    async fn two_embedded_backends_share_nothing() {
        let a = LeaseClient::new(Backend::embedded().leases(), Timing::default()).expect("client");
        let b = LeaseClient::new(Backend::embedded().leases(), Timing::default()).expect("client");
        assert!(matches!(
            a.try_acquire("x", "a", None).await.expect("try"),
            TryAcquire::Acquired(_)
        ));
        assert!(matches!(
            b.try_acquire("x", "b", None).await.expect("try"),
            TryAcquire::Acquired(_)
        ));
    }
}
