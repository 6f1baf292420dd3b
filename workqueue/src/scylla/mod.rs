//! The ScyllaDB / Cassandra backend of the work queue, over the `scylla` driver.
//!
//! It shares [`cql_lease::scylla::ScyllaOptions`] (keyspace, consistency levels, timeouts)
//! with the lease store; its table defaults to `work_items` (plus `_index`, `_cursor` and
//! `_dead`). Statements and the table layout are in [`cql`].

pub mod cql;
mod plain;
mod prepare;
mod rows;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::scylla::{LwtRow, classify};
use cql_lease::{CasOutcome, StoreError};
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;
use tracing::instrument;

use crate::item::{IndexEntry, ItemId, ItemKey, JobState, StoredItem};
use crate::store::{ClaimOutcome, ItemClaim, NewRow, QueueStore, Reschedule, SWEPT, Seal};

/// The default table name.
pub const DEFAULT_TABLE: &str = "work_items";

/// Work-queue store on a `scylla` [`Session`]; statements are prepared once, in [`Self::new`].
///
/// ```no_run
/// use std::sync::Arc;
/// use cql_lease::scylla::ScyllaOptions;
/// use cql_workqueue::scylla::{DEFAULT_TABLE, ScyllaQueueStore};
/// use cql_workqueue::{QueueConfig, WorkQueue};
/// use scylla::client::session_builder::SessionBuilder;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let session = Arc::new(SessionBuilder::new().known_node("127.0.0.1:9042").build().await?);
/// let options = ScyllaOptions { table: DEFAULT_TABLE.into(), ..ScyllaOptions::default() };
/// ScyllaQueueStore::create_schema(&session, &options).await?;
/// let store = ScyllaQueueStore::new(session, options).await?;
/// let queue = WorkQueue::new(Arc::new(store), "emails", QueueConfig::default())?;
/// # let _ = queue;
/// # Ok(())
/// # }
/// ```
pub struct ScyllaQueueStore {
    session: Arc<Session>,
    s: prepare::Statements,
    /// The bakery mode's plain rows (`{table}_plain`) and cells (`{table}_cells`).
    bakery: crate::bakery::BakeryParts,
}

impl std::fmt::Debug for ScyllaQueueStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScyllaQueueStore").finish_non_exhaustive()
    }
}

impl ScyllaQueueStore {
    async fn cas(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
    ) -> Result<CasOutcome, StoreError> {
        let result = self
            .session
            .execute_unpaged(statement, values)
            .await
            .map_err(|e| classify(e, true))?;
        Ok(if LwtRow::parse(result)?.applied {
            CasOutcome::Applied
        } else {
            CasOutcome::NotApplied
        })
    }

    async fn write(
        &self,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
    ) -> Result<(), StoreError> {
        self.session
            .execute_unpaged(statement, values)
            .await
            .map_err(|e| classify(e, true))?;
        Ok(())
    }

    async fn item(
        &self,
        statement: &PreparedStatement,
        key: &ItemKey,
    ) -> Result<Option<StoredItem>, StoreError> {
        let result = self
            .session
            .execute_unpaged(statement, (row_key(key),))
            .await
            .map_err(|e| classify(e, false))?;
        rows::item(result, &key.partition)
    }
}

/// An item row's partition key: the queue, a slash, the id.
fn row_key(key: &ItemKey) -> String {
    format!("{}/{}", key.partition, key.id)
}

/// An index partition's key: the queue, a slash, the bucket.
fn index_part(queue: &str, bucket: i64) -> String {
    format!("{queue}/{bucket}")
}

fn ttl_secs(ttl: Duration) -> i32 {
    i32::try_from(ttl.as_secs()).unwrap_or(i32::MAX)
}

fn limit(limit: u32) -> i32 {
    i32::try_from(limit).unwrap_or(i32::MAX)
}

#[async_trait]
impl QueueStore for ScyllaQueueStore {
    fn bakery_parts(&self) -> Option<crate::bakery::BakeryParts> {
        Some(self.bakery.clone())
    }

    #[instrument(level = "debug", skip(self, row), fields(id = %row.key.id))]
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        let values = (row_key(row.key), row.payload, row.run_at, row.origin);
        self.cas(&self.s.enqueue, values).await
    }

    #[instrument(level = "debug", skip(self, row), fields(id = %row.key.id))]
    async fn revive(
        &self,
        row: NewRow<'_>,
        seen_attempt: i32,
        seen_origin: &str,
    ) -> Result<CasOutcome, StoreError> {
        let values = (
            row.payload,
            row.run_at,
            row.origin,
            seen_attempt,
            row_key(row.key),
            seen_attempt,
            seen_origin,
        );
        self.cas(&self.s.revive, values).await
    }

    #[instrument(level = "debug", skip(self, claim), fields(id = %claim.key.id))]
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        let key = row_key(claim.key);
        let values = (
            (
                ttl_secs(claim.ttl),
                claim.claim_id,
                &key,
                claim.seen_attempt,
            ),
            (claim.seen_attempt.saturating_add(1), &key),
        );
        let result = self
            .session
            .batch(&self.s.claim, values)
            .await
            .map_err(|e| classify(e, true))?;
        Ok(if LwtRow::parse(result)?.applied {
            ClaimOutcome::Claimed
        } else {
            ClaimOutcome::Lost
        })
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        let values = (ttl_secs(ttl), claim_id, &row_key(key), claim_id);
        self.cas(&self.s.heartbeat, values).await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn complete(
        &self,
        key: &ItemKey,
        claim_id: &str,
        retention: Duration,
    ) -> Result<CasOutcome, StoreError> {
        let values = (ttl_secs(retention), &row_key(key), claim_id);
        self.cas(&self.s.complete, values).await
    }

    #[instrument(level = "debug", skip(self, to), fields(id = %key.id, state = ?to.state))]
    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        let (state, key) = (to.state.as_str(), row_key(key));
        match to.requeued_at {
            None => {
                let values = (state, to.run_at, to.error, &key, claim_id);
                self.cas(&self.s.reschedule, values).await
            }
            Some(requeued_at) => {
                let values = (state, to.run_at, to.error, requeued_at, &key, claim_id);
                self.cas(&self.s.snooze, values).await
            }
        }
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let values = (state.as_str(), attempt, &row_key(key), claim_id);
        self.cas(&self.s.unclaim, values).await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn requeue(
        &self,
        key: &ItemKey,
        run_at: i64,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let values = (run_at, attempt, row_key(key), attempt);
        self.cas(&self.s.requeue, values).await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn purge(
        &self,
        key: &ItemKey,
        retention: Duration,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        let values = (ttl_secs(retention), row_key(key), attempt);
        self.cas(&self.s.purge, values).await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn seal(&self, key: &ItemKey, seen: Seal<'_>) -> Result<CasOutcome, StoreError> {
        match seen {
            Seal::Absent => {
                let values = (row_key(key), SWEPT);
                self.cas(&self.s.seal_absent, values).await
            }
            Seal::Done { attempt, origin } => {
                let values = (attempt.saturating_add(1), row_key(key), attempt, origin);
                self.cas(&self.s.seal_done, values).await
            }
            Seal::Discarded { attempt } => {
                let values = (attempt.saturating_add(1), row_key(key), attempt);
                self.cas(&self.s.seal_discarded, values).await
            }
        }
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.item(&self.s.read, key).await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn peek(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.item(&self.s.peek, key).await
    }

    #[instrument(level = "debug", skip(self, entry), fields(seq = %entry.seq))]
    async fn put_entry(&self, queue: &str, entry: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        let part = index_part(queue, entry.bucket);
        self.write(&self.s.put_entry, entry_values(&part, entry, ts))
            .await
    }

    #[instrument(level = "debug", skip(self, new), fields(seq = %new.seq))]
    async fn move_entry(
        &self,
        queue: &str,
        new: &IndexEntry,
        old_seq: &str,
        ts: i64,
        delete_ts: i64,
    ) -> Result<bool, StoreError> {
        let part = index_part(queue, new.bucket);
        let put = entry_values(&part, new, ts);
        self.session
            .batch(&self.s.move_entry, (put, (delete_ts, &part, old_seq)))
            .await
            .map_err(|e| classify(e, true))?;
        Ok(true)
    }

    #[instrument(level = "debug", skip(self))]
    async fn delete_entry(
        &self,
        queue: &str,
        bucket: i64,
        seq: &str,
        ts: i64,
    ) -> Result<(), StoreError> {
        self.write(&self.s.delete_entry, (ts, index_part(queue, bucket), seq))
            .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn delete_range(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        let values = (ts, index_part(queue, bucket), after, before);
        self.write(&self.s.delete_range, values).await?;
        Ok(true)
    }

    #[instrument(level = "debug", skip(self))]
    async fn scan_index(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        limit_rows: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        let values = (index_part(queue, bucket), after, before, limit(limit_rows));
        let result = self
            .session
            .execute_unpaged(&self.s.scan_index, values)
            .await
            .map_err(|e| classify(e, false))?;
        rows::entries(result, bucket)
    }

    #[instrument(level = "debug", skip(self))]
    async fn read_cursor(&self, queue: &str) -> Result<i64, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.s.read_cursor, (queue,))
            .await
            .map_err(|e| classify(e, false))?;
        rows::cursor(result)
    }

    #[instrument(level = "debug", skip(self))]
    async fn advance_cursor(&self, queue: &str, pos: i64) -> Result<(), StoreError> {
        self.write(&self.s.advance_cursor, (pos, pos, queue)).await
    }

    #[instrument(level = "debug", skip(self))]
    async fn put_bucket(
        &self,
        queue: &str,
        bucket: i64,
        ttl: Duration,
        ts: i64,
    ) -> Result<(), StoreError> {
        let values = (queue, bucket, ttl_secs(ttl).max(1), ts);
        self.write(&self.s.put_bucket, values).await
    }

    #[instrument(level = "debug", skip(self))]
    async fn list_buckets(
        &self,
        queue: &str,
        after: i64,
        limit_rows: u32,
    ) -> Result<Vec<i64>, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.s.list_buckets, (queue, after, limit(limit_rows)))
            .await
            .map_err(|e| classify(e, false))?;
        rows::buckets(result)
    }

    #[instrument(level = "debug", skip(self))]
    async fn put_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.write(&self.s.put_dead, (queue, id.as_str(), ts)).await
    }

    #[instrument(level = "debug", skip(self))]
    async fn delete_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.write(&self.s.delete_dead, (ts, queue, id.as_str()))
            .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn list_dead(
        &self,
        queue: &str,
        after: &str,
        limit_rows: u32,
    ) -> Result<Vec<ItemId>, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.s.list_dead, (queue, after, limit(limit_rows)))
            .await
            .map_err(|e| classify(e, false))?;
        rows::ids(result)
    }
}

/// The bound values of [`cql::PUT_ENTRY`] for `entry` in index partition `part`.
fn entry_values<'a>(
    part: &'a str,
    entry: &'a IndexEntry,
    ts: i64,
) -> (&'a str, &'a str, &'a str, &'static str, bool, i32, i64) {
    (
        part,
        &entry.seq,
        entry.id.as_str(),
        entry.kind.as_str(),
        entry.immediate,
        entry.attempt,
        ts,
    )
}
