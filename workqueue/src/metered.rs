//! A store decorator recording every queue store round trip (see [`cql_lease::metrics`]):
//! the one place the queue's calls pass through, whichever backend is behind it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::metrics::timed;
use cql_lease::{CasOutcome, StoreError};

use crate::item::{IndexEntry, ItemId, ItemKey, JobState, StoredItem};
use crate::store::{ClaimOutcome, ItemClaim, NewRow, QueueStore, Reschedule, Seal};

/// Wraps a queue store; each call is recorded under `store="queue"` and its operation.
pub(crate) struct MeteredStore(Arc<dyn QueueStore>);

impl MeteredStore {
    pub(crate) fn wrap(inner: Arc<dyn QueueStore>) -> Arc<dyn QueueStore> {
        Arc::new(MeteredStore(inner))
    }
}

fn applied(outcome: &CasOutcome) -> bool {
    *outcome == CasOutcome::Applied
}

/// A read or plain write that was answered counts as applied.
fn answered<T>(_: &T) -> bool {
    true
}

const STORE: &str = "queue";

#[async_trait]
impl QueueStore for MeteredStore {
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        timed(STORE, "enqueue", self.0.enqueue(row), applied).await
    }

    async fn revive(
        &self,
        row: NewRow<'_>,
        seen_attempt: i32,
        seen_origin: &str,
    ) -> Result<CasOutcome, StoreError> {
        let call = self.0.revive(row, seen_attempt, seen_origin);
        timed(STORE, "revive", call, applied).await
    }

    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        let claimed = |o: &ClaimOutcome| *o == ClaimOutcome::Claimed;
        timed(STORE, "claim", self.0.claim(claim), claimed).await
    }

    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        let call = self.0.heartbeat(key, claim_id, ttl);
        timed(STORE, "heartbeat", call, applied).await
    }

    async fn complete(
        &self,
        key: &ItemKey,
        claim_id: &str,
        retention: Duration,
    ) -> Result<CasOutcome, StoreError> {
        let call = self.0.complete(key, claim_id, retention);
        timed(STORE, "complete", call, applied).await
    }

    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        let call = self.0.reschedule(key, claim_id, to);
        timed(STORE, "reschedule", call, applied).await
    }

    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let call = self.0.unclaim(key, claim_id, state, attempt);
        timed(STORE, "unclaim", call, applied).await
    }

    async fn requeue(
        &self,
        key: &ItemKey,
        run_at: i64,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let call = self.0.requeue(key, run_at, attempt);
        timed(STORE, "requeue", call, applied).await
    }

    async fn purge(
        &self,
        key: &ItemKey,
        retention: Duration,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        timed(
            STORE,
            "purge",
            self.0.purge(key, retention, attempt),
            applied,
        )
        .await
    }

    async fn seal(&self, key: &ItemKey, seen: Seal<'_>) -> Result<CasOutcome, StoreError> {
        timed(STORE, "seal", self.0.seal(key, seen), applied).await
    }

    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        timed(STORE, "read", self.0.read(key), answered).await
    }

    async fn peek(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        timed(STORE, "peek", self.0.peek(key), answered).await
    }

    async fn put_entry(&self, queue: &str, entry: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        let call = self.0.put_entry(queue, entry, ts);
        timed(STORE, "put_entry", call, answered).await
    }

    async fn move_entry(
        &self,
        queue: &str,
        new: &IndexEntry,
        old_seq: &str,
        ts: i64,
        delete_ts: i64,
    ) -> Result<bool, StoreError> {
        let call = self.0.move_entry(queue, new, old_seq, ts, delete_ts);
        timed(STORE, "move_entry", call, answered).await
    }

    async fn delete_entry(
        &self,
        queue: &str,
        bucket: i64,
        seq: &str,
        ts: i64,
    ) -> Result<(), StoreError> {
        let call = self.0.delete_entry(queue, bucket, seq, ts);
        timed(STORE, "delete_entry", call, answered).await
    }

    async fn delete_range(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        let call = self.0.delete_range(queue, bucket, after, before, ts);
        timed(STORE, "delete_range", call, answered).await
    }

    async fn scan_index(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        let call = self.0.scan_index(queue, bucket, after, before, limit);
        timed(STORE, "scan_index", call, answered).await
    }

    async fn read_cursor(&self, queue: &str) -> Result<i64, StoreError> {
        timed(STORE, "read_cursor", self.0.read_cursor(queue), answered).await
    }

    async fn advance_cursor(&self, queue: &str, pos: i64) -> Result<(), StoreError> {
        let call = self.0.advance_cursor(queue, pos);
        timed(STORE, "advance_cursor", call, answered).await
    }

    async fn put_bucket(
        &self,
        queue: &str,
        bucket: i64,
        ttl: Duration,
        ts: i64,
    ) -> Result<(), StoreError> {
        let call = self.0.put_bucket(queue, bucket, ttl, ts);
        timed(STORE, "put_bucket", call, answered).await
    }

    async fn list_buckets(
        &self,
        queue: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<i64>, StoreError> {
        let call = self.0.list_buckets(queue, after, limit);
        timed(STORE, "list_buckets", call, answered).await
    }

    async fn put_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        timed(STORE, "put_dead", self.0.put_dead(queue, id, ts), answered).await
    }

    async fn delete_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        let call = self.0.delete_dead(queue, id, ts);
        timed(STORE, "delete_dead", call, answered).await
    }

    async fn list_dead(
        &self,
        queue: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<ItemId>, StoreError> {
        let call = self.0.list_dead(queue, after, limit);
        timed(STORE, "list_dead", call, answered).await
    }

    fn bakery_parts(&self) -> Option<crate::bakery::BakeryParts> {
        self.0.bakery_parts()
    }

    fn claim_mode(&self) -> crate::ClaimMode {
        self.0.claim_mode()
    }
}
