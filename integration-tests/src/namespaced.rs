//! Stores that keep one test's names apart from every other test's on shared tables.
//!
//! A real cluster is shared: every test of every run uses the same few tables (see
//! [`crate::wire_backend::RealCluster`]), so each test gets its own name prefix instead of
//! tables of its own. [`Namespaced`] puts the prefix in front of every lease, lock, cell-row
//! and queue name on the way to the store and takes it off what comes back, so a scenario
//! written with fixed names (`"job"`, `"q"`) meets only its own data, run after run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::{Cell, CellRef, CellStore};
use cql_lease::{
    AcquireOutcome, CasOutcome, Claim, FencingToken, LeaseStore, StoreError, StoredLease,
};
use cql_workqueue::bakery::{BakeryParts, PlainItemStore};
use cql_workqueue::store::{
    ClaimOutcome, IndexEntry, ItemClaim, NewRow, QueueStore, Reschedule, Seal,
};
use cql_workqueue::{ClaimMode, ItemId, ItemKey, JobState, StoredItem};

/// `inner` seen through a name prefix.
#[derive(Debug)]
pub struct Namespaced<S: ?Sized> {
    prefix: String,
    /// The TTL given to plain cells written without one (`None`: kept so).
    untimed_ttl: Option<Duration>,
    inner: Arc<S>,
}

impl<S: ?Sized> Namespaced<S> {
    /// `inner` with every name prefixed by `prefix`.
    pub fn new(prefix: &str, inner: Arc<S>) -> Self {
        Namespaced {
            prefix: prefix.to_owned(),
            untimed_ttl: None,
            inner,
        }
    }

    /// Plain cells written without a TTL (ticket high-water marks, `GlobalTime`) get `ttl`:
    /// the cell store writes them `USING TTL 0`, which a table's default TTL does not
    /// override, and a test's cells need not outlive the test by much.
    pub fn expiring_untimed_cells(mut self, ttl: Duration) -> Self {
        self.untimed_ttl = Some(ttl);
        self
    }

    fn with<T: ?Sized>(&self, inner: Arc<T>) -> Namespaced<T> {
        Namespaced {
            prefix: self.prefix.clone(),
            untimed_ttl: self.untimed_ttl,
            inner,
        }
    }

    fn name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn key(&self, key: &ItemKey) -> ItemKey {
        ItemKey {
            partition: self.name(&key.partition),
            id: key.id.clone(),
        }
    }

    /// Takes the prefix off a key read back (a key of another namespace is left whole).
    fn unkey(&self, mut item: StoredItem) -> StoredItem {
        if let Some(rest) = item.key.partition.strip_prefix(&self.prefix) {
            item.key.partition = rest.to_owned();
        }
        item
    }
}

/// A fresh prefix: short, so names stay readable in the tables, and unique across runs.
pub fn fresh_prefix() -> String {
    format!("t{}.", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

#[async_trait]
impl<S: LeaseStore + ?Sized> LeaseStore for Namespaced<S> {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        let name = self.name(claim.name);
        self.inner
            .try_acquire(Claim {
                name: &name,
                ..claim
            })
            .await
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        let name = self.name(claim.name);
        self.inner
            .renew(Claim {
                name: &name,
                ..claim
            })
            .await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.inner.release(&self.name(name), holder_id).await
    }
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        let name = self.name(to.name);
        self.inner
            .hand_over(from_holder_id, from_token, Claim { name: &name, ..to })
            .await
    }
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.inner.read(&self.name(name)).await
    }
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.inner.peek(&self.name(name)).await
    }
    /// The inner line under the same prefix (its rows are named by the lease).
    fn waiting_line(&self) -> Option<Arc<dyn CellStore>> {
        let inner = self.inner.waiting_line()?;
        Some(Arc::new(Namespaced::new(&self.prefix, inner)))
    }
}

#[async_trait]
impl<S: CellStore + ?Sized> CellStore for Namespaced<S> {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        let lock = self.name(at.lock);
        let at = CellRef { lock: &lock, ..at };
        let ttl = ttl.or(self.untimed_ttl);
        self.inner.write(at, value, ttl, timestamp).await
    }
    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        let lock = self.name(at.lock);
        self.inner
            .delete(CellRef { lock: &lock, ..at }, timestamp)
            .await
    }
    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        self.inner
            .read_row(&self.name(lock), row, from, limit)
            .await
    }
    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        let lock = self.name(at.lock);
        self.inner.read_cell(CellRef { lock: &lock, ..at }).await
    }
}

#[async_trait]
impl<S: PlainItemStore + ?Sized> PlainItemStore for Namespaced<S> {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        let item = StoredItem {
            key: self.key(&item.key),
            ..item.clone()
        };
        self.inner.write_item(&item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let read = self.inner.read_item(&self.key(key)).await?;
        Ok(read.map(|(item, ts)| (self.unkey(item), ts)))
    }
}

#[async_trait]
impl<S: QueueStore + ?Sized> QueueStore for Namespaced<S> {
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        let key = self.key(row.key);
        self.inner.enqueue(NewRow { key: &key, ..row }).await
    }
    async fn revive(
        &self,
        row: NewRow<'_>,
        seen_attempt: i32,
        seen_origin: &str,
    ) -> Result<CasOutcome, StoreError> {
        let key = self.key(row.key);
        let row = NewRow { key: &key, ..row };
        self.inner.revive(row, seen_attempt, seen_origin).await
    }
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        let key = self.key(claim.key);
        self.inner.claim(ItemClaim { key: &key, ..claim }).await
    }
    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.heartbeat(&self.key(key), claim_id, ttl).await
    }
    async fn complete(
        &self,
        key: &ItemKey,
        claim_id: &str,
        retention: Duration,
    ) -> Result<CasOutcome, StoreError> {
        self.inner
            .complete(&self.key(key), claim_id, retention)
            .await
    }
    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.reschedule(&self.key(key), claim_id, to).await
    }
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner
            .unclaim(&self.key(key), claim_id, state, attempt)
            .await
    }
    async fn requeue(
        &self,
        key: &ItemKey,
        run_at: i64,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.requeue(&self.key(key), run_at, attempt).await
    }
    async fn purge(
        &self,
        key: &ItemKey,
        retention: Duration,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.purge(&self.key(key), retention, attempt).await
    }
    async fn seal(&self, key: &ItemKey, seen: Seal<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.seal(&self.key(key), seen).await
    }
    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        let item = self.inner.read(&self.key(key)).await?;
        Ok(item.map(|item| self.unkey(item)))
    }
    async fn peek(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        let item = self.inner.peek(&self.key(key)).await?;
        Ok(item.map(|item| self.unkey(item)))
    }
    async fn put_entry(&self, queue: &str, entry: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.inner.put_entry(&self.name(queue), entry, ts).await
    }
    async fn move_entry(
        &self,
        queue: &str,
        new: &IndexEntry,
        old_seq: &str,
        ts: i64,
        delete_ts: i64,
    ) -> Result<bool, StoreError> {
        self.inner
            .move_entry(&self.name(queue), new, old_seq, ts, delete_ts)
            .await
    }
    async fn delete_entry(
        &self,
        queue: &str,
        bucket: i64,
        seq: &str,
        ts: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .delete_entry(&self.name(queue), bucket, seq, ts)
            .await
    }
    async fn delete_range(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        self.inner
            .delete_range(&self.name(queue), bucket, after, before, ts)
            .await
    }
    async fn scan_index(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        self.inner
            .scan_index(&self.name(queue), bucket, after, before, limit)
            .await
    }
    async fn read_cursor(&self, queue: &str) -> Result<i64, StoreError> {
        self.inner.read_cursor(&self.name(queue)).await
    }
    async fn advance_cursor(&self, queue: &str, pos: i64) -> Result<(), StoreError> {
        self.inner.advance_cursor(&self.name(queue), pos).await
    }
    async fn put_bucket(
        &self,
        queue: &str,
        bucket: i64,
        ttl: Duration,
        ts: i64,
    ) -> Result<(), StoreError> {
        self.inner
            .put_bucket(&self.name(queue), bucket, ttl, ts)
            .await
    }
    async fn list_buckets(
        &self,
        queue: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<i64>, StoreError> {
        self.inner
            .list_buckets(&self.name(queue), after, limit)
            .await
    }
    async fn put_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.put_dead(&self.name(queue), id, ts).await
    }
    async fn delete_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_dead(&self.name(queue), id, ts).await
    }
    async fn list_dead(
        &self,
        queue: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<ItemId>, StoreError> {
        self.inner.list_dead(&self.name(queue), after, limit).await
    }
    fn bakery_parts(&self) -> Option<BakeryParts> {
        let parts = self.inner.bakery_parts()?;
        Some(BakeryParts {
            items: Arc::new(self.with(parts.items)),
            cells: Arc::new(self.with(parts.cells)),
        })
    }
    fn claim_mode(&self) -> ClaimMode {
        self.inner.claim_mode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cql_lease::memory::MemoryStore;

    fn claim<'a>(name: &'a str, holder: &'a str) -> Claim<'a> {
        Claim {
            name,
            holder_id: holder,
            owner: "o",
            value: None,
            ttl: Duration::from_secs(10),
        }
    }

    /// Two namespaces on one store hold the same lease name at once, each with its own
    /// token history; the store sees both names prefixed.
    #[tokio::test(start_paused = true)]
    async fn namespaces_on_one_store_never_meet() {
        let store = Arc::new(MemoryStore::default());
        let a = Namespaced::new("a.", Arc::clone(&store));
        let b = Namespaced::new("b.", Arc::clone(&store));
        for ns in [&a, &b] {
            let got = ns.try_acquire(claim("job", "h")).await.unwrap();
            assert!(matches!(got, AcquireOutcome::Acquired { .. }), "{got:?}");
        }
        let held = |l: Option<StoredLease>| l.map(|l| l.token);
        assert!(held(store.read("a.job").await.unwrap()).is_some());
        assert!(held(store.read("b.job").await.unwrap()).is_some());
        assert_eq!(store.read("job").await.unwrap(), None);
        assert_eq!(
            a.release("job", "h").await.unwrap(),
            CasOutcome::Applied,
            "released through its own namespace"
        );
        assert_eq!(a.read("job").await.unwrap(), None);
        assert!(b.read("job").await.unwrap().is_some());
    }

    /// A plain cell written without a TTL through a namespace that expires untimed cells is
    /// gone after that TTL; with a TTL of its own it keeps that one.
    #[tokio::test(start_paused = true)]
    async fn untimed_cells_expire_when_asked() {
        use cql_lease::cells::memory::MemoryCellStore;
        let store = Arc::new(MemoryCellStore::new());
        let cells = Namespaced::new("a.", Arc::clone(&store))
            .expiring_untimed_cells(Duration::from_secs(60));
        let at = |cell| CellRef {
            lock: "l",
            row: "r",
            cell,
        };
        cells.write(at("untimed"), 1, None, 1).await.unwrap();
        let own = Some(Duration::from_secs(600));
        cells.write(at("timed"), 2, own, 2).await.unwrap();
        assert_eq!(cells.read_cell(at("untimed")).await.unwrap(), Some(1));
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert_eq!(cells.read_cell(at("untimed")).await.unwrap(), None);
        assert_eq!(cells.read_cell(at("timed")).await.unwrap(), Some(2));
        let raw = CellRef {
            lock: "a.l",
            ..at("timed")
        };
        assert_eq!(
            store.read_cell(raw).await.unwrap(),
            Some(2),
            "stored prefixed"
        );
    }
}
