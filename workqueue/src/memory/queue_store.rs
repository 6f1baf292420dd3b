//! [`QueueStore`] for [`MemoryQueueStore`]: every store call, as the scylla backend's
//! statements would apply it to the in-memory tables, through the fault rules and counters.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use tracing::instrument;

use super::calls::count_lwt;
use super::tables::{Row, scan, write};
use super::{MemoryQueueStore, QueueOp};
use crate::item::{IndexEntry, ItemId, ItemKey, JobState, StoredItem};
use crate::store::{ClaimOutcome, ItemClaim, NewRow, QueueStore, Reschedule, Seal};

#[async_trait]
impl QueueStore for MemoryQueueStore {
    fn bakery_parts(&self) -> Option<crate::bakery::BakeryParts> {
        Some(crate::bakery::BakeryParts {
            items: Arc::clone(&self.plain) as _,
            cells: Arc::clone(&self.cells) as _,
        })
    }

    #[instrument(level = "debug", skip(self, row), fields(id = %row.key.id))]
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        self.call(QueueOp::Enqueue, |tables, counter, _| {
            count_lwt(counter, QueueOp::Enqueue, row.key);
            let slot = (row.key.partition.clone(), row.key.id.clone());
            if tables.items.contains_key(&slot) {
                return CasOutcome::NotApplied;
            }
            let item = StoredItem {
                key: row.key.clone(),
                payload: row.payload.to_vec(),
                state: JobState::Available,
                attempt: 0,
                claim: None,
                run_at: row.run_at,
                last_error: None,
                origin: row.origin.to_owned(),
                requeued_at: 0,
            };
            tables.items.insert(
                slot,
                Row {
                    item,
                    claim_expires_at: None,
                    done_expires_at: None,
                },
            );
            CasOutcome::Applied
        })
        .await
    }

    #[instrument(level = "debug", skip(self, row), fields(id = %row.key.id))]
    async fn revive(
        &self,
        row: NewRow<'_>,
        seen_attempt: i32,
        seen_origin: &str,
    ) -> Result<CasOutcome, StoreError> {
        self.lwt(
            QueueOp::Revive,
            row.key,
            |stored, now| {
                stored.state_expired(now)
                    && stored.item.attempt == seen_attempt
                    && stored.item.origin == seen_origin
            },
            |stored, _| {
                stored.done_expires_at = None;
                let item = &mut stored.item;
                item.state = JobState::Available;
                item.payload = row.payload.to_vec();
                item.run_at = row.run_at;
                item.origin = row.origin.to_owned();
                item.last_error = None;
                item.requeued_at = seen_attempt;
            },
        )
        .await
    }

    #[instrument(level = "debug", skip(self, claim), fields(id = %claim.key.id))]
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        let outcome = self
            .lwt(
                QueueOp::Claim,
                claim.key,
                |row, now| {
                    let item = row.current(now);
                    item.claim.is_none()
                        && item.attempt == claim.seen_attempt
                        && item.state.is_claimable()
                },
                |row, now| {
                    row.item.claim = Some(claim.claim_id.to_owned());
                    row.item.attempt = claim.seen_attempt + 1;
                    row.item.state = JobState::Running;
                    row.claim_expires_at = Some(now + claim.ttl);
                },
            )
            .await?;
        Ok(match outcome {
            CasOutcome::Applied => ClaimOutcome::Claimed,
            CasOutcome::NotApplied => ClaimOutcome::Lost,
        })
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError> {
        self.lwt(
            QueueOp::Heartbeat,
            key,
            |row, now| row.held_by(now, claim_id),
            |row, now| row.claim_expires_at = Some(now + ttl),
        )
        .await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn complete(
        &self,
        key: &ItemKey,
        claim_id: &str,
        retention: Duration,
    ) -> Result<CasOutcome, StoreError> {
        self.lwt(
            QueueOp::Complete,
            key,
            |row, now| row.held_by(now, claim_id),
            |row, now| Self::done(row, now, retention),
        )
        .await
    }

    #[instrument(level = "debug", skip(self, to), fields(id = %key.id, state = ?to.state))]
    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.lwt(
            QueueOp::Reschedule,
            key,
            |row, now| row.held_by(now, claim_id),
            |row, _| {
                row.item.claim = None;
                row.claim_expires_at = None;
                row.item.state = to.state;
                row.item.run_at = to.run_at;
                row.item.last_error = to.error.map(str::to_owned);
                if let Some(requeued_at) = to.requeued_at {
                    row.item.requeued_at = requeued_at;
                }
            },
        )
        .await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.lwt(
            QueueOp::Unclaim,
            key,
            |row, now| row.held_by(now, claim_id),
            |row, _| {
                row.item.claim = None;
                row.claim_expires_at = None;
                row.item.state = state;
                row.item.attempt = attempt;
            },
        )
        .await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn requeue(
        &self,
        key: &ItemKey,
        run_at: i64,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.lwt(
            QueueOp::Reschedule,
            key,
            |row, _| row.item.state == JobState::Discarded && row.item.attempt == attempt,
            |row, _| {
                row.item.state = JobState::Available;
                row.item.run_at = run_at;
                row.item.requeued_at = row.item.attempt;
            },
        )
        .await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn purge(
        &self,
        key: &ItemKey,
        retention: Duration,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.lwt(
            QueueOp::Reschedule,
            key,
            |row, _| row.item.state == JobState::Discarded && row.item.attempt == attempt,
            |row, now| Self::done(row, now, retention),
        )
        .await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn seal(&self, key: &ItemKey, seen: Seal<'_>) -> Result<CasOutcome, StoreError> {
        self.seal_row(key, seen).await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.call(QueueOp::Read, |tables, counter, now| {
            counter.counts.serial_reads += 1;
            tables.row(key).map(|row| row.current(now).clone())
        })
        .await
    }

    #[instrument(level = "debug", skip(self), fields(id = %key.id))]
    async fn peek(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.call(QueueOp::Read, |tables, counter, now| {
            counter.counts.peeks += 1;
            tables.row(key).map(|row| row.current(now).clone())
        })
        .await
    }

    #[instrument(level = "debug", skip(self, entry), fields(seq = %entry.seq))]
    async fn put_entry(&self, queue: &str, entry: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.plain_writes += 1;
            let bucket = tables
                .index
                .entry((queue.to_owned(), entry.bucket))
                .or_default();
            bucket.write(entry.seq.clone(), Some(entry.clone()), ts);
        })
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
        // One call: a fault hits both writes or neither, as on a single-partition batch.
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.plain_writes += 1;
            let bucket = tables
                .index
                .entry((queue.to_owned(), new.bucket))
                .or_default();
            bucket.write(new.seq.clone(), Some(new.clone()), ts);
            bucket.write(old_seq.to_owned(), None, delete_ts);
            true
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn delete_entry(
        &self,
        queue: &str,
        bucket: i64,
        seq: &str,
        ts: i64,
    ) -> Result<(), StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.plain_writes += 1;
            let bucket = tables.index.entry((queue.to_owned(), bucket)).or_default();
            bucket.write(seq.to_owned(), None, ts);
        })
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
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.plain_writes += 1;
            counter.counts.range_deletes += 1;
            let bucket = tables.index.entry((queue.to_owned(), bucket)).or_default();
            counter.counts.live_entries_range_deleted +=
                bucket.delete_range(after, before, ts).live;
            true
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn scan_index(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.index_scans += 1;
            let Some(rows) = tables.index.get(&(queue.to_owned(), bucket)) else {
                return Vec::new();
            };
            let (live, tombstones) = rows.scan(after, Some(before), limit as usize);
            counter.counts.tombstones_scanned += tombstones;
            counter.counts.max_tombstones_scanned =
                counter.counts.max_tombstones_scanned.max(tombstones);
            counter.counts.tombstone_warnings += u64::from(tombstones > 1_000);
            live
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn read_cursor(&self, queue: &str) -> Result<i64, StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.other_reads += 1;
            tables.cursors.get(queue).copied().unwrap_or(0)
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn advance_cursor(&self, queue: &str, pos: i64) -> Result<(), StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.plain_writes += 1;
            let cursor = tables.cursors.entry(queue.to_owned()).or_default();
            *cursor = (*cursor).max(pos);
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn put_bucket(
        &self,
        queue: &str,
        bucket: i64,
        ttl: Duration,
        _ts: i64,
    ) -> Result<(), StoreError> {
        self.call(QueueOp::Index, |tables, counter, now| {
            counter.counts.plain_writes += 1;
            let expires = tables.buckets.entry(queue.to_owned()).or_default();
            let at = expires.entry(bucket).or_insert(now);
            *at = (*at).max(now + ttl);
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn list_buckets(
        &self,
        queue: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<i64>, StoreError> {
        self.call(QueueOp::Index, |tables, counter, now| {
            counter.counts.other_reads += 1;
            tables.live_buckets(queue, after, limit as usize, now)
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn put_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.plain_writes += 1;
            let dead = tables.dead.entry(queue.to_owned()).or_default();
            write(dead, id.as_str().to_owned(), Some(id.clone()), ts);
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn delete_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.plain_writes += 1;
            let dead = tables.dead.entry(queue.to_owned()).or_default();
            write(dead, id.as_str().to_owned(), None, ts);
        })
        .await
    }

    #[instrument(level = "debug", skip(self))]
    async fn list_dead(
        &self,
        queue: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<ItemId>, StoreError> {
        self.call(QueueOp::Index, |tables, counter, _| {
            counter.counts.other_reads += 1;
            tables
                .dead
                .get(queue)
                .map(|rows| scan(rows, after, None, limit as usize).0)
                .unwrap_or_default()
        })
        .await
    }
}
