//! A memory queue store whose bakery item-row reads can answer late: a QUORUM read whose
//! response is slow on the network (its data as of when the replicas answered).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_workqueue::bakery::{BakeryParts, PlainItemStore};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{
    ClaimOutcome, IndexEntry, ItemClaim, ItemId, ItemKey, JobState, NewRow, QueueStore, Reschedule,
    StoredItem,
};

/// The embedded plain item rows, except that one armed read is executed at once and its
/// answer delivered `delay` later (a QUORUM read whose response is slow on the network: the
/// data is as of when the replicas answered, not as of when the client gets it).
pub(crate) struct SlowAnswers {
    inner: Arc<dyn PlainItemStore>,
    pub(crate) armed: AtomicBool,
    delay: Duration,
}

#[async_trait]
impl PlainItemStore for SlowAnswers {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.inner.write_item(item, ts).await
    }

    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let answer = self.inner.read_item(key).await;
        if self.armed.swap(false, Ordering::SeqCst) {
            tokio::time::sleep(self.delay).await;
        }
        answer
    }
}

/// A [`MemoryQueueStore`] whose bakery parts read item rows through [`SlowAnswers`].
pub(crate) struct Wrapped {
    pub(crate) inner: Arc<MemoryQueueStore>,
    pub(crate) items: Arc<SlowAnswers>,
}

#[async_trait]
impl QueueStore for Wrapped {
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.enqueue(row).await
    }
    async fn revive(&self, row: NewRow<'_>, a: i32, o: &str) -> Result<CasOutcome, StoreError> {
        self.inner.revive(row, a, o).await
    }
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        self.inner.claim(claim).await
    }
    async fn heartbeat(&self, k: &ItemKey, c: &str, t: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.heartbeat(k, c, t).await
    }
    async fn complete(&self, k: &ItemKey, c: &str, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.complete(k, c, r).await
    }
    async fn reschedule(
        &self,
        k: &ItemKey,
        c: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.reschedule(k, c, to).await
    }
    async fn unclaim(
        &self,
        k: &ItemKey,
        c: &str,
        s: JobState,
        a: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.unclaim(k, c, s, a).await
    }
    async fn requeue(&self, k: &ItemKey, r: i64, a: i32) -> Result<CasOutcome, StoreError> {
        self.inner.requeue(k, r, a).await
    }
    async fn purge(&self, k: &ItemKey, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.purge(k, r).await
    }
    async fn seal(
        &self,
        k: &ItemKey,
        s: cql_workqueue::Seal<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.seal(k, s).await
    }
    async fn read(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner.read(k).await
    }
    async fn peek(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner.peek(k).await
    }
    async fn put_entry(&self, q: &str, e: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.inner.put_entry(q, e, ts).await
    }
    async fn delete_entry(&self, q: &str, b: i64, s: &str, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_entry(q, b, s, ts).await
    }
    async fn scan_index(
        &self,
        q: &str,
        b: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        self.inner.scan_index(q, b, after, before, limit).await
    }
    async fn read_cursor(&self, q: &str) -> Result<i64, StoreError> {
        self.inner.read_cursor(q).await
    }
    async fn advance_cursor(&self, q: &str, pos: i64) -> Result<(), StoreError> {
        self.inner.advance_cursor(q, pos).await
    }
    async fn put_bucket(&self, q: &str, b: i64, t: Duration, ts: i64) -> Result<(), StoreError> {
        self.inner.put_bucket(q, b, t, ts).await
    }
    async fn list_buckets(&self, q: &str, a: i64, l: u32) -> Result<Vec<i64>, StoreError> {
        self.inner.list_buckets(q, a, l).await
    }
    async fn put_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.put_dead(q, id, ts).await
    }
    async fn delete_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_dead(q, id, ts).await
    }
    async fn list_dead(&self, q: &str, a: &str, l: u32) -> Result<Vec<ItemId>, StoreError> {
        self.inner.list_dead(q, a, l).await
    }
    fn bakery_parts(&self) -> Option<BakeryParts> {
        let parts = self.inner.bakery_parts()?;
        Some(BakeryParts {
            items: Arc::clone(&self.items) as _,
            cells: parts.cells,
        })
    }
}

pub(crate) fn wrapped(delay: Duration) -> Arc<Wrapped> {
    let inner = Arc::new(MemoryQueueStore::new());
    let items = Arc::new(SlowAnswers {
        inner: Arc::clone(inner.plain_items()) as _,
        armed: AtomicBool::new(false),
        delay,
    });
    Arc::new(Wrapped { inner, items })
}
