//! A store decorator that counts round trips, for cost reports and tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use std::time::Duration;

use async_trait::async_trait;

use crate::cells::{Cell, CellRef, CellStore};
use crate::error::StoreError;
use crate::fencing::FencingToken;
use crate::store::{AcquireOutcome, CasOutcome, Claim, LeaseStore, StoredLease};

/// Counts of store calls by operation; each is one round trip on a real store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallCounts {
    /// Conditional acquires.
    pub try_acquire: u64,
    /// Conditional renewals.
    pub renew: u64,
    /// Conditional releases.
    pub release: u64,
    /// Linearizable reads.
    pub read: u64,
}

impl CallCounts {
    /// All writes (LWTs) together.
    pub fn writes(&self) -> u64 {
        self.try_acquire + self.renew + self.release
    }

    /// Paxos rounds: every LWT and every linearizable (SERIAL) read. Plain reads
    /// ([`crate::LeaseStore::peek`]) are not counted here.
    pub fn paxos_rounds(&self) -> u64 {
        self.writes() + self.read
    }

    /// The calls made since `earlier`.
    pub fn since(&self, earlier: CallCounts) -> CallCounts {
        CallCounts {
            try_acquire: self.try_acquire - earlier.try_acquire,
            renew: self.renew - earlier.renew,
            release: self.release - earlier.release,
            read: self.read - earlier.read,
        }
    }
}

/// Wraps a store and counts every call made through it.
///
/// ```
/// use std::sync::Arc;
/// use cql_lease::{CountingStore, LeaseClient, Timing, MemoryStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = Arc::new(CountingStore::new(Arc::new(MemoryStore::new())));
/// let client = LeaseClient::new(store.clone(), Timing::default())?;
/// client.holder("x").await?;
/// assert_eq!(store.calls().read, 1);
/// # Ok::<(), cql_lease::LeaseError>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct CountingStore<S: ?Sized> {
    inner: Arc<S>,
    counts: [AtomicU64; 5],
    line_calls: Arc<AtomicU64>,
}

impl<S: LeaseStore + ?Sized> CountingStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: Arc<S>) -> Self {
        CountingStore {
            inner,
            counts: Default::default(),
            line_calls: Arc::default(),
        }
    }

    /// Calls made so far, including failed ones.
    pub fn calls(&self) -> CallCounts {
        let get = |i: usize| self.counts[i].load(Ordering::Relaxed);
        CallCounts {
            try_acquire: get(0),
            renew: get(1),
            release: get(2),
            read: get(3),
        }
    }

    /// Plain reads ([`LeaseStore::peek`]) so far: no Paxos round.
    pub fn peeks(&self) -> u64 {
        self.counts[4].load(Ordering::Relaxed)
    }

    /// Calls to the waiting line ([`LeaseStore::waiting_line`]) so far: plain reads and
    /// writes, no Paxos round.
    pub fn line_calls(&self) -> u64 {
        self.line_calls.load(Ordering::Relaxed)
    }

    fn count(&self, i: usize) {
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl<S: LeaseStore + ?Sized> LeaseStore for CountingStore<S> {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        self.count(0);
        self.inner.try_acquire(claim).await
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.count(1);
        self.inner.renew(claim).await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.count(2);
        self.inner.release(name, holder_id).await
    }
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        self.count(2); // the release's LWT
        self.inner.hand_over(from_holder_id, from_token, to).await
    }
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.count(3);
        self.inner.read(name).await
    }
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.count(4);
        self.inner.peek(name).await
    }
    fn waiting_line(&self) -> Option<Arc<dyn CellStore>> {
        let inner = self.inner.waiting_line()?;
        Some(Arc::new(CountingCells {
            inner,
            calls: Arc::clone(&self.line_calls),
        }))
    }
}

/// The waiting line of a [`CountingStore`], counted.
struct CountingCells {
    inner: Arc<dyn CellStore>,
    calls: Arc<AtomicU64>,
}

#[async_trait]
impl CellStore for CountingCells {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.write(at, value, ttl, timestamp).await
    }
    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.delete(at, timestamp).await
    }
    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.read_row(lock, row, from, limit).await
    }
    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inner.read_cell(at).await
    }
}
