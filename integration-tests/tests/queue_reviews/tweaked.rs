//! `Tweaked`: a process's view of the store with a few quirks (late or lost LWTs, slow index
//! scans, failing deletes, a seal before a requeue), and the plain item-row wrappers of the
//! bakery mode (late, lost or slow writes and reads).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_workqueue::bakery::{BakeryParts, PlainItemStore};
use cql_workqueue::{
    ClaimOutcome, IndexEntry, ItemClaim, ItemId, ItemKey, JobState, NewRow, QueueStore, Reschedule,
    StoredItem,
};

/// Wraps the inner store's plain item rows (bakery mode).
pub(crate) type WrapItems =
    Box<dyn Fn(Arc<dyn PlainItemStore>) -> Arc<dyn PlainItemStore> + Send + Sync>;

/// A process's view of the store with one quirk, everything else passing straight through:
/// - `slow_above`: its index reads of buckets above this one take `delay` (under the request
///   timeout), so a scan that walks several buckets is spread over time, as any multi-bucket
///   scan is on a real cluster (one request per bucket);
/// - `late_revive`: its first revive LWT answers "unknown" at once and is applied that much
///   later (a Paxos proposal accepted but committed only by a later round), its later ones
///   fail before they are sent (the partition's replicas unreachable from it);
/// - `late_enqueue`, `late_requeue`: the same for the enqueue and requeue LWTs;
/// - `lost_enqueue_answer`, `fail_deletes`, `seal_before_requeue`: see the fields;
/// - `wrap_items` (bakery mode): the plain item rows seen through a wrapper.
#[derive(Default)]
pub(crate) struct Tweaked {
    pub(crate) inner: Option<Arc<dyn QueueStore>>,
    pub(crate) slow_above: Option<i64>,
    pub(crate) delay: Duration,
    pub(crate) late_revive: Option<Duration>,
    pub(crate) revives: AtomicUsize,
    pub(crate) late_enqueue: Option<Duration>,
    pub(crate) enqueues: AtomicUsize,
    pub(crate) wrap_items: Option<WrapItems>,
    /// Like `late_revive`, for the dead-letter requeue LWT.
    pub(crate) late_requeue: Option<Duration>,
    pub(crate) requeues: AtomicUsize,
    /// Its first enqueue LWT applies, and its answer is lost.
    pub(crate) lost_enqueue_answer: bool,
    /// Its index deletes fail (the index replicas unreachable from it).
    pub(crate) fail_deletes: bool,
    /// Its first requeue LWT arrives just after index upkeep sealed the dead letter.
    pub(crate) seal_before_requeue: bool,
}

impl Tweaked {
    fn inner(&self) -> &Arc<dyn QueueStore> {
        self.inner.as_ref().expect("inner store")
    }
}

/// Plain item rows whose first write answers "unknown" at once and lands `delay` later (a
/// cut write a coordinator still applies, or a hint delivered late); later writes fail
/// before they are sent.
pub(crate) struct LatePlainWrite {
    inner: Arc<dyn PlainItemStore>,
    delay: Duration,
    writes: AtomicUsize,
}

impl LatePlainWrite {
    /// `Tweaked::wrap_items` for plain item rows whose first write lands `delay` late.
    pub(crate) fn wrapper(delay: Duration) -> WrapItems {
        Box::new(move |inner| {
            Arc::new(Self {
                inner,
                delay,
                writes: AtomicUsize::new(0),
            })
        })
    }
}

#[async_trait]
impl PlainItemStore for LatePlainWrite {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        if self.writes.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let (inner, item, delay) = (Arc::clone(&self.inner), item.clone(), self.delay);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = inner.write_item(&item, ts).await;
        });
        Err(StoreError::Unknown("write timed out".into()))
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose first write is lost before it reaches any replica (answered
/// "unknown"); later writes pass through.
pub(crate) struct LostFirstWrite {
    pub(crate) inner: Arc<dyn PlainItemStore>,
    pub(crate) writes: Arc<AtomicUsize>,
}

#[async_trait]
impl PlainItemStore for LostFirstWrite {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        if self.writes.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(StoreError::Unknown("write timed out".into()));
        }
        self.inner.write_item(item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose first write applies and its answer is lost; later writes pass
/// through.
pub(crate) struct AppliedAnswerLost {
    pub(crate) inner: Arc<dyn PlainItemStore>,
    pub(crate) writes: Arc<AtomicUsize>,
}

#[async_trait]
impl PlainItemStore for AppliedAnswerLost {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        let first = self.writes.fetch_add(1, Ordering::SeqCst) == 0;
        self.inner.write_item(item, ts).await?;
        if first {
            return Err(StoreError::Unknown("answer lost".into()));
        }
        Ok(())
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose reads, once `armed`, answer "no row" `delay` after the replicas
/// were read (an answer slow on its way back): the process acts on a read that was true
/// when it was served.
pub(crate) struct SlowMiss {
    pub(crate) inner: Arc<dyn PlainItemStore>,
    pub(crate) armed: Arc<AtomicBool>,
    pub(crate) missed: Arc<AtomicBool>,
    pub(crate) delay: Duration,
}

#[async_trait]
impl PlainItemStore for SlowMiss {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.inner.write_item(item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let read = self.inner.read_item(key).await?;
        if read.is_none() && self.armed.load(Ordering::SeqCst) {
            self.missed.store(true, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
        }
        Ok(read)
    }
}

#[async_trait]
impl QueueStore for Tweaked {
    fn bakery_parts(&self) -> Option<BakeryParts> {
        let parts = self.inner().bakery_parts()?;
        Some(match &self.wrap_items {
            None => parts,
            Some(wrap) => BakeryParts {
                items: wrap(parts.items),
                cells: parts.cells,
            },
        })
    }
    async fn scan_index(
        &self,
        q: &str,
        b: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        if self.slow_above.is_some_and(|above| b > above) {
            tokio::time::sleep(self.delay).await;
        }
        self.inner().scan_index(q, b, after, before, limit).await
    }
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        self.inner().claim(claim).await
    }
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        if self.lost_enqueue_answer && self.enqueues.fetch_add(1, Ordering::SeqCst) == 0 {
            self.inner().enqueue(row).await?;
            return Err(StoreError::Unknown("answer lost".into()));
        }
        let Some(delay) = self.late_enqueue else {
            return self.inner().enqueue(row).await;
        };
        if self.enqueues.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let inner = Arc::clone(self.inner());
        let (key, payload, origin) = (row.key.clone(), row.payload.to_vec(), row.origin.to_owned());
        let run_at = row.run_at;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let row = NewRow {
                key: &key,
                payload: &payload,
                run_at,
                origin: &origin,
            };
            let _ = inner.enqueue(row).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn revive(&self, row: NewRow<'_>, a: i32, o: &str) -> Result<CasOutcome, StoreError> {
        let Some(delay) = self.late_revive else {
            return self.inner().revive(row, a, o).await;
        };
        if self.revives.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let inner = Arc::clone(self.inner());
        let (key, payload, origin) = (row.key.clone(), row.payload.to_vec(), row.origin.to_owned());
        let (run_at, seen_origin) = (row.run_at, o.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let row = NewRow {
                key: &key,
                payload: &payload,
                run_at,
                origin: &origin,
            };
            let _ = inner.revive(row, a, &seen_origin).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn heartbeat(&self, k: &ItemKey, c: &str, t: Duration) -> Result<CasOutcome, StoreError> {
        self.inner().heartbeat(k, c, t).await
    }
    async fn complete(&self, k: &ItemKey, c: &str, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner().complete(k, c, r).await
    }
    async fn reschedule(
        &self,
        k: &ItemKey,
        c: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner().reschedule(k, c, to).await
    }
    async fn unclaim(
        &self,
        k: &ItemKey,
        c: &str,
        s: JobState,
        a: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner().unclaim(k, c, s, a).await
    }
    async fn requeue(&self, k: &ItemKey, r: i64, a: i32) -> Result<CasOutcome, StoreError> {
        if self.seal_before_requeue && self.requeues.fetch_add(1, Ordering::SeqCst) == 0 {
            let seen = cql_workqueue::Seal::Discarded { attempt: a };
            self.inner().seal(k, seen).await?;
        }
        let Some(delay) = self.late_requeue else {
            return self.inner().requeue(k, r, a).await;
        };
        if self.requeues.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let (inner, key) = (Arc::clone(self.inner()), k.clone());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = inner.requeue(&key, r, a).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn purge(&self, k: &ItemKey, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner().purge(k, r).await
    }
    async fn seal(
        &self,
        k: &ItemKey,
        s: cql_workqueue::Seal<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner().seal(k, s).await
    }
    async fn read(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner().read(k).await
    }
    async fn peek(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner().peek(k).await
    }
    async fn put_entry(&self, q: &str, e: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.inner().put_entry(q, e, ts).await
    }
    async fn delete_entry(&self, q: &str, b: i64, s: &str, ts: i64) -> Result<(), StoreError> {
        if self.fail_deletes {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        self.inner().delete_entry(q, b, s, ts).await
    }
    async fn read_cursor(&self, q: &str) -> Result<i64, StoreError> {
        self.inner().read_cursor(q).await
    }
    async fn advance_cursor(&self, q: &str, pos: i64) -> Result<(), StoreError> {
        self.inner().advance_cursor(q, pos).await
    }
    async fn put_bucket(&self, q: &str, b: i64, t: Duration, ts: i64) -> Result<(), StoreError> {
        self.inner().put_bucket(q, b, t, ts).await
    }
    async fn list_buckets(&self, q: &str, a: i64, l: u32) -> Result<Vec<i64>, StoreError> {
        self.inner().list_buckets(q, a, l).await
    }
    async fn put_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner().put_dead(q, id, ts).await
    }
    async fn delete_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner().delete_dead(q, id, ts).await
    }
    async fn list_dead(&self, q: &str, a: &str, l: u32) -> Result<Vec<ItemId>, StoreError> {
        self.inner().list_dead(q, a, l).await
    }
}
