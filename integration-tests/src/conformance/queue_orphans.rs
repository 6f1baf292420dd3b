//! A claim that a coordinator applies after its claimer read back "not claimed" (review of
//! issue 9): the claimer's process remembers it as an orphan and hands the item back the
//! moment it finds it held by that claim, instead of leaving it to the claim's TTL.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_workqueue::{
    ClaimOutcome, IndexEntry, ItemClaim, ItemId, ItemKey, JobState, NewRow, QueueStore, Reschedule,
    StoredItem, WorkQueue,
};
use tokio::time::Instant;

use super::queue::{queue_config, queue_store};
use crate::backend::Backend;

/// The first claim answers "unknown" at once and is applied `delay` later; the second is
/// refused before it is sent. Everything else passes through.
struct LateClaim {
    inner: Arc<dyn QueueStore>,
    claims: AtomicUsize,
    delay: Duration,
}

#[async_trait]
impl QueueStore for LateClaim {
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        match self.claims.fetch_add(1, Ordering::SeqCst) {
            0 => {
                let (inner, delay) = (Arc::clone(&self.inner), self.delay);
                let (key, claim_id) = (claim.key.clone(), claim.claim_id.to_owned());
                let (seen_attempt, ttl) = (claim.seen_attempt, claim.ttl);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let late = ItemClaim {
                        key: &key,
                        claim_id: &claim_id,
                        seen_attempt,
                        ttl,
                    };
                    let _ = inner.claim(late).await;
                });
                Err(StoreError::Unknown("coordinator timed out".into()))
            }
            1 => Err(StoreError::Unavailable("connection refused".into())),
            _ => self.inner.claim(claim).await,
        }
    }
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.enqueue(row).await
    }
    async fn revive(&self, row: NewRow<'_>, a: i32, o: &str) -> Result<CasOutcome, StoreError> {
        self.inner.revive(row, a, o).await
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
}

/// A claim applied after its read-back said "not claimed" is this process's orphan: its
/// next claim hands the item back and takes it at once (attempt 1: the orphaned claim never
/// reached a worker), long before the orphan's TTL would have freed it.
pub async fn late_applied_claim_is_handed_back_at_once(b: &dyn Backend) {
    let delay = Duration::from_millis(300);
    let store = Arc::new(LateClaim {
        inner: queue_store(b),
        claims: AtomicUsize::new(0),
        delay,
    });
    let config = queue_config();
    let q = WorkQueue::new(store, "orphans", config).expect("queue");
    let id = q.enqueue("only").await.expect("enqueue");
    // Lost answer, read back "not claimed"; the retry is refused before it is sent.
    assert!(q.claim("w").await.is_err(), "the refused retry is reported");
    // The coordinator applies the first claim after all.
    b.sleep(delay * 2).await;
    let held = queue_store(b)
        .read(&ItemKey {
            partition: "orphans".into(),
            id: id.clone(),
        })
        .await
        .expect("read")
        .expect("item");
    assert!(held.claim.is_some(), "the late claim landed");
    let started = Instant::now();
    let job = q
        .claim("w")
        .await
        .expect("claim")
        .expect("the orphan handed back and the item claimed at once");
    assert!(
        started.elapsed() < config.claim.ttl / 2,
        "{:?}",
        started.elapsed()
    );
    assert_eq!((job.id(), job.attempt()), (&id, 1));
    job.complete().await.expect("complete");
}
