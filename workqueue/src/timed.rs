//! The queue's store with every call bounded by the claim timing's request timeout (the
//! rule of [`cql_lease::timed::bounded`], shared with the lease store).
//!
//! Without it a read that lands on a frozen coordinator (a dispatcher scan, a candidate's
//! peek, a stats count) waits for the driver's own timeout (30 s by default), and the worker
//! behind it claims nothing meanwhile. A request never outlives the time left to act on its
//! answer: a third of the claim's validity by default, `QueueConfig::timing.request_timeout`
//! when set.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::timed::{Call, bounded};
use cql_lease::{CasOutcome, StoreError};

use crate::item::{IndexEntry, ItemId, ItemKey, JobState, StoredItem};
use crate::store::{ClaimOutcome, ItemClaim, NewRow, QueueStore, Reschedule, Seal};

/// Bounds every call of `inner`: an LWT cut by the timeout has an unknown outcome (its
/// caller settles it by reading back, as after a lost answer); a read or a plain write
/// (which carries its client timestamp) is sent again at once, to another coordinator.
pub(crate) struct TimedQueueStore {
    inner: Arc<dyn QueueStore>,
    timeout: Duration,
}

impl TimedQueueStore {
    pub(crate) fn new(inner: Arc<dyn QueueStore>, timeout: Duration) -> Self {
        TimedQueueStore { inner, timeout }
    }
}

use Call::{Conditional, Resendable};

#[async_trait]
impl QueueStore for TimedQueueStore {
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        bounded("enqueue", Conditional, self.timeout, || {
            self.inner.enqueue(row)
        })
        .await
    }

    async fn revive(
        &self,
        row: NewRow<'_>,
        seen_attempt: i32,
        seen_origin: &str,
    ) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.revive(row, seen_attempt, seen_origin);
        bounded("revive", Conditional, self.timeout, call).await
    }

    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        bounded("claim", Conditional, self.timeout, || {
            self.inner.claim(claim)
        })
        .await
    }

    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.heartbeat(key, claim_id, ttl);
        bounded("heartbeat", Conditional, self.timeout, call).await
    }

    async fn complete(
        &self,
        key: &ItemKey,
        claim_id: &str,
        retention: Duration,
    ) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.complete(key, claim_id, retention);
        bounded("complete", Conditional, self.timeout, call).await
    }

    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.reschedule(key, claim_id, to);
        bounded("reschedule", Conditional, self.timeout, call).await
    }

    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.unclaim(key, claim_id, state, attempt);
        bounded("unclaim", Conditional, self.timeout, call).await
    }

    async fn requeue(
        &self,
        key: &ItemKey,
        run_at: i64,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.requeue(key, run_at, attempt);
        bounded("requeue", Conditional, self.timeout, call).await
    }

    async fn purge(
        &self,
        key: &ItemKey,
        retention: Duration,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.purge(key, retention, attempt);
        bounded("purge", Conditional, self.timeout, call).await
    }

    async fn seal(&self, key: &ItemKey, seen: Seal<'_>) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.seal(key, seen);
        bounded("seal", Conditional, self.timeout, call).await
    }

    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        bounded("read", Resendable, self.timeout, || self.inner.read(key)).await
    }

    async fn peek(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        bounded("peek", Resendable, self.timeout, || self.inner.peek(key)).await
    }

    async fn put_entry(&self, queue: &str, entry: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        let call = || self.inner.put_entry(queue, entry, ts);
        bounded("put_entry", Resendable, self.timeout, call).await
    }

    async fn move_entry(
        &self,
        queue: &str,
        new: &IndexEntry,
        old_seq: &str,
        ts: i64,
        delete_ts: i64,
    ) -> Result<bool, StoreError> {
        let call = || self.inner.move_entry(queue, new, old_seq, ts, delete_ts);
        bounded("move_entry", Resendable, self.timeout, call).await
    }

    async fn delete_entry(
        &self,
        queue: &str,
        bucket: i64,
        seq: &str,
        ts: i64,
    ) -> Result<(), StoreError> {
        let call = || self.inner.delete_entry(queue, bucket, seq, ts);
        bounded("delete_entry", Resendable, self.timeout, call).await
    }

    async fn delete_range(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        let call = || self.inner.delete_range(queue, bucket, after, before, ts);
        bounded("delete_range", Resendable, self.timeout, call).await
    }

    async fn scan_index(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        let call = || self.inner.scan_index(queue, bucket, after, before, limit);
        bounded("scan_index", Resendable, self.timeout, call).await
    }

    async fn read_cursor(&self, queue: &str) -> Result<i64, StoreError> {
        let call = || self.inner.read_cursor(queue);
        bounded("read_cursor", Resendable, self.timeout, call).await
    }

    async fn advance_cursor(&self, queue: &str, pos: i64) -> Result<(), StoreError> {
        let call = || self.inner.advance_cursor(queue, pos);
        bounded("advance_cursor", Resendable, self.timeout, call).await
    }

    async fn put_bucket(
        &self,
        queue: &str,
        bucket: i64,
        ttl: Duration,
        ts: i64,
    ) -> Result<(), StoreError> {
        let call = || self.inner.put_bucket(queue, bucket, ttl, ts);
        bounded("put_bucket", Resendable, self.timeout, call).await
    }

    async fn list_buckets(
        &self,
        queue: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<i64>, StoreError> {
        let call = || self.inner.list_buckets(queue, after, limit);
        bounded("list_buckets", Resendable, self.timeout, call).await
    }

    async fn put_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        let call = || self.inner.put_dead(queue, id, ts);
        bounded("put_dead", Resendable, self.timeout, call).await
    }

    async fn delete_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        let call = || self.inner.delete_dead(queue, id, ts);
        bounded("delete_dead", Resendable, self.timeout, call).await
    }

    async fn list_dead(
        &self,
        queue: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<ItemId>, StoreError> {
        let call = || self.inner.list_dead(queue, after, limit);
        bounded("list_dead", Resendable, self.timeout, call).await
    }

    fn bakery_parts(&self) -> Option<crate::bakery::BakeryParts> {
        self.inner.bakery_parts()
    }

    fn claim_mode(&self) -> crate::ClaimMode {
        self.inner.claim_mode()
    }
}
