//! `Tweaked`: a process's view of the store with a few quirks (late, slow or lost LWTs and
//! answers, slow index scans and writes, failing deletes, a seal before a requeue); the
//! plain item-row wrappers of the bakery mode are in `plain_items`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_workqueue::bakery::BakeryParts;
use cql_workqueue::{
    ClaimOutcome, IndexEntry, ItemClaim, ItemId, ItemKey, JobState, NewRow, QueueStore, Reschedule,
    StoredItem,
};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::queue_store;
use tokio::time::Instant;

use super::plain_items::WrapItems;

/// A process's view of the store with one quirk, everything else passing straight through
/// (every quirk is off by default):
/// - `slow_above`: its index reads of buckets above this one take `delay` (under the request
///   timeout), so a scan that walks several buckets is spread over time, as any multi-bucket
///   scan is on a real cluster (one request per bucket);
/// - `late_revive`: its first revive LWT answers "unknown" at once and is applied that much
///   later (a Paxos proposal accepted but committed only by a later round), its later ones
///   fail before they are sent (the partition's replicas unreachable from it);
/// - `late_enqueue`, `late_requeue`: the same for the enqueue and requeue LWTs;
/// - `wrap_items` (bakery mode): the plain item rows seen through a wrapper;
/// - the others: see the fields.
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
    /// Each revive LWT reaches the store this much later (a slow coordinator).
    pub(crate) slow_revive: Option<Duration>,
    /// Each requeue LWT reaches the store this much later.
    pub(crate) slow_requeue: Option<Duration>,
    /// Requeue LWTs never reach a replica; their answers are "unknown".
    pub(crate) lost_requeues: bool,
    /// Purge LWTs apply, and their answers are lost (after a while, within the request
    /// timeout).
    pub(crate) lost_purge_answers: bool,
    /// Enqueue LWTs fail before they are sent (replicas unreachable) until this instant.
    pub(crate) enqueues_fail_until: Option<Instant>,
    /// The first index write of an entry naming an attempt above 0 lands this much later
    /// (within the request timeout).
    pub(crate) slow_first_revival_entry: Option<Duration>,
    pub(crate) slowed: AtomicBool,
    /// When each revive LWT was sent.
    pub(crate) revives_sent: Mutex<Vec<Instant>>,
}

impl Tweaked {
    /// No quirk, over the memory backend's store.
    pub(crate) fn over(b: &MemoryBackend) -> Self {
        Tweaked {
            inner: Some(queue_store(b)),
            ..Tweaked::default()
        }
    }

    fn inner(&self) -> &Arc<dyn QueueStore> {
        self.inner.as_ref().expect("inner store")
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
        if self
            .enqueues_fail_until
            .is_some_and(|until| Instant::now() < until)
        {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
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
        self.revives_sent.lock().expect("lock").push(Instant::now());
        if let Some(delay) = self.slow_revive {
            tokio::time::sleep(delay).await;
        }
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
        if self.lost_requeues {
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        if let Some(delay) = self.slow_requeue {
            tokio::time::sleep(delay).await;
        }
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
        let outcome = self.inner().purge(k, r).await?;
        if self.lost_purge_answers {
            tokio::time::sleep(Duration::from_millis(250)).await;
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        Ok(outcome)
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
        if let Some(delay) = self.slow_first_revival_entry
            && e.attempt > 0
            && !self.slowed.swap(true, Ordering::SeqCst)
        {
            tokio::time::sleep(delay).await;
        }
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
