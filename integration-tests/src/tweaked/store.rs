//! `Tweaked`'s `QueueStore`: each call applies its quirks, if any, then goes to the inner
//! store.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_workqueue::bakery::BakeryParts;
use cql_workqueue::store::{
    ClaimOutcome, IndexEntry, ItemClaim, NewRow, QueueStore, Reschedule, Seal,
};
use cql_workqueue::{ItemId, ItemKey, JobState, StoredItem};
use tokio::time::Instant;

use super::Tweaked;

impl Tweaked {
    /// Awaits a read, timed if `time_reads` is on.
    async fn timed<T>(
        &self,
        read: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match &self.time_reads {
            Some(times) => times.timed(read).await,
            None => read.await,
        }
    }
}

/// A row's fields, owned: for an LWT a spawned task sends late.
struct OwnedRow {
    key: ItemKey,
    payload: Vec<u8>,
    run_at: i64,
    origin: String,
}

impl OwnedRow {
    fn of(row: &NewRow<'_>) -> Self {
        OwnedRow {
            key: row.key.clone(),
            payload: row.payload.to_vec(),
            run_at: row.run_at,
            origin: row.origin.to_owned(),
        }
    }

    fn borrow(&self) -> NewRow<'_> {
        NewRow {
            key: &self.key,
            payload: &self.payload,
            run_at: self.run_at,
            origin: &self.origin,
        }
    }
}

#[async_trait]
impl QueueStore for Tweaked {
    fn bakery_parts(&self) -> Option<BakeryParts> {
        let parts = self.inner.bakery_parts()?;
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
        self.timed(self.inner.scan_index(q, b, after, before, limit))
            .await
    }
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        let Some(delay) = self.late_claim else {
            return self.inner.claim(claim).await;
        };
        match self.counters.claims.fetch_add(1, Ordering::SeqCst) {
            0 => {
                let inner = Arc::clone(&self.inner);
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
        if self
            .enqueues_fail_until
            .is_some_and(|until| Instant::now() < until)
        {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let enqueues = &self.counters.enqueues;
        if self.lost_enqueue_answer && enqueues.fetch_add(1, Ordering::SeqCst) == 0 {
            self.inner.enqueue(row).await?;
            return Err(StoreError::Unknown("answer lost".into()));
        }
        let Some(delay) = self.late_enqueue else {
            return self.inner.enqueue(row).await;
        };
        if enqueues.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let (inner, row) = (Arc::clone(&self.inner), OwnedRow::of(&row));
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = inner.enqueue(row.borrow()).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn revive(&self, row: NewRow<'_>, a: i32, o: &str) -> Result<CasOutcome, StoreError> {
        self.revives_sent.lock().expect("lock").push(Instant::now());
        if let Some(delay) = self.first_revive_late
            && self.counters.revives.fetch_add(1, Ordering::SeqCst) == 0
        {
            let (inner, row) = (Arc::clone(&self.inner), OwnedRow::of(&row));
            let seen_origin = o.to_owned();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = inner.revive(row.borrow(), a, &seen_origin).await;
            });
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        if let Some(delay) = self.slow_revive {
            tokio::time::sleep(delay).await;
        }
        let Some(delay) = self.late_revive else {
            return self.inner.revive(row, a, o).await;
        };
        if self.counters.revives.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let (inner, row, seen_origin) = (Arc::clone(&self.inner), OwnedRow::of(&row), o.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = inner.revive(row.borrow(), a, &seen_origin).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
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
        if let Some(delay) = self.first_reschedule_late
            && self.counters.reschedules.fetch_add(1, Ordering::SeqCst) == 0
        {
            let (inner, key, claim_id) = (Arc::clone(&self.inner), k.clone(), c.to_owned());
            let (state, run_at, error, requeued_at) = (
                to.state,
                to.run_at,
                to.error.map(str::to_owned),
                to.requeued_at,
            );
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let to = Reschedule {
                    state,
                    run_at,
                    error: error.as_deref(),
                    requeued_at,
                };
                let _ = inner.reschedule(&key, &claim_id, to).await;
            });
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        if self.reschedule_answers_lost {
            self.inner.reschedule(k, c, to).await?;
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        self.inner.reschedule(k, c, to).await
    }
    async fn unclaim(
        &self,
        k: &ItemKey,
        c: &str,
        s: JobState,
        a: i32,
    ) -> Result<CasOutcome, StoreError> {
        if let Some(delay) = self.first_unclaim_late
            && self.counters.unclaims.fetch_add(1, Ordering::SeqCst) == 0
        {
            let (inner, key, claim_id) = (Arc::clone(&self.inner), k.clone(), c.to_owned());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = inner.unclaim(&key, &claim_id, s, a).await;
            });
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        if self.unclaim_answers_lost {
            self.inner.unclaim(k, c, s, a).await?;
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        self.inner.unclaim(k, c, s, a).await
    }
    async fn requeue(&self, k: &ItemKey, r: i64, a: i32) -> Result<CasOutcome, StoreError> {
        if let Some(delay) = self.first_requeue_answer_lost_after
            && self.counters.requeues.fetch_add(1, Ordering::SeqCst) == 0
        {
            self.inner.requeue(k, r, a).await?;
            tokio::time::sleep(delay).await;
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        if self.lost_requeues {
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        if let Some(delay) = self.slow_requeue {
            tokio::time::sleep(delay).await;
        }
        let requeues = &self.counters.requeues;
        if self.seal_before_requeue && requeues.fetch_add(1, Ordering::SeqCst) == 0 {
            let seen = Seal::Discarded { attempt: a };
            self.inner.seal(k, seen).await?;
        }
        let Some(delay) = self.late_requeue else {
            return self.inner.requeue(k, r, a).await;
        };
        if requeues.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let (inner, key) = (Arc::clone(&self.inner), k.clone());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = inner.requeue(&key, r, a).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn purge(&self, k: &ItemKey, r: Duration, a: i32) -> Result<CasOutcome, StoreError> {
        if let Some(delay) = self.late_purges {
            let (inner, k) = (Arc::clone(&self.inner), k.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = inner.purge(&k, r, a).await;
            });
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        if let Some(delay) = self.purges_lost_after {
            tokio::time::sleep(delay).await;
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        let outcome = self.inner.purge(k, r, a).await?;
        if self.lost_purge_answers {
            tokio::time::sleep(Duration::from_millis(250)).await;
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        Ok(outcome)
    }
    async fn seal(&self, k: &ItemKey, s: Seal<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.seal(k, s).await
    }
    async fn read(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.timed(self.inner.read(k)).await
    }
    async fn peek(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.timed(self.inner.peek(k)).await
    }
    async fn put_entry(&self, q: &str, e: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        if let Some(delay) = self.slow_first_revival_entry
            && e.attempt > 0
            && !self.counters.slowed.swap(true, Ordering::SeqCst)
        {
            tokio::time::sleep(delay).await;
        }
        if let Some(delay) = self.check_answers_lost_after
            && e.kind == cql_workqueue::store::EntryKind::Check
        {
            self.inner.put_entry(q, e, ts).await?;
            tokio::time::sleep(delay).await;
            return Err(StoreError::Unknown("coordinator timed out".into()));
        }
        self.inner.put_entry(q, e, ts).await
    }
    async fn delete_entry(&self, q: &str, b: i64, s: &str, ts: i64) -> Result<(), StoreError> {
        if self.fail_deletes {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        self.inner.delete_entry(q, b, s, ts).await
    }
    async fn delete_range(
        &self,
        q: &str,
        b: i64,
        after: &str,
        before: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        if self.fail_deletes {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        self.inner.delete_range(q, b, after, before, ts).await
    }
    async fn read_cursor(&self, q: &str) -> Result<i64, StoreError> {
        self.timed(self.inner.read_cursor(q)).await
    }
    async fn advance_cursor(&self, q: &str, pos: i64) -> Result<(), StoreError> {
        self.inner.advance_cursor(q, pos).await
    }
    async fn put_bucket(&self, q: &str, b: i64, t: Duration, ts: i64) -> Result<(), StoreError> {
        self.inner.put_bucket(q, b, t, ts).await
    }
    async fn list_buckets(&self, q: &str, a: i64, l: u32) -> Result<Vec<i64>, StoreError> {
        self.timed(self.inner.list_buckets(q, a, l)).await
    }
    async fn put_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.put_dead(q, id, ts).await
    }
    async fn delete_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_dead(q, id, ts).await
    }
    async fn list_dead(&self, q: &str, a: &str, l: u32) -> Result<Vec<ItemId>, StoreError> {
        self.timed(self.inner.list_dead(q, a, l)).await
    }
}
