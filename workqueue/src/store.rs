//! The narrow storage interface of the work queue, for backend writers: what a
//! [`QueueStore`] implements and the rows it reads and writes.
//!
//! Two kinds of cells, never mixed: item rows (one partition per item) are written only with
//! LWTs; index entries, the cursor and dead-letter entries only with plain writes carrying
//! per-process monotonic client timestamps. Reads of item rows outside a decision
//! ([`QueueStore::peek`]) are hints; decisions are the LWTs' conditions.

use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};

pub use crate::item::{EntryKind, IndexEntry, StoredItem};
use crate::item::{ItemId, ItemKey, JobState};

/// What index upkeep saw of an item before deleting its last entry ([`QueueStore::seal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seal<'a> {
    /// No row: an enqueue may still be on its way.
    Absent,
    /// A unique key's done row: a revival (conditioned on both) may still be on its way.
    Done {
        /// The row's attempt number.
        attempt: i32,
        /// The row's origin (a revival changes it).
        origin: &'a str,
    },
    /// A discarded row: a requeue (conditioned on both) may still be on its way.
    Discarded {
        /// The row's attempt number.
        attempt: i32,
    },
}

/// The origin of a row written (or taken over) by index upkeep to refuse an enqueue or
/// revival still on its way ([`QueueStore::seal`]): no enqueue call has it.
pub const SWEPT: &str = "~swept";

/// The run_at stored for an item available at once (an immediate enqueue, a hand-back, a
/// requeue): never ahead of any clock, so no clock holds it back.
pub const AT_ONCE: i64 = 0;

/// A new item row.
#[derive(Debug, Clone, Copy)]
pub struct NewRow<'a> {
    /// Where it goes.
    pub key: &'a ItemKey,
    /// What to do.
    pub payload: &'a [u8],
    /// Not before (wall-clock micros).
    pub run_at: i64,
    /// The enqueue call's unique id.
    pub origin: &'a str,
}

/// A claim on one item.
#[derive(Debug, Clone, Copy)]
pub struct ItemClaim<'a> {
    /// The item.
    pub key: &'a ItemKey,
    /// The unique id of this claim attempt.
    pub claim_id: &'a str,
    /// The attempt number seen; the claim writes `seen_attempt + 1`.
    pub seen_attempt: i32,
    /// How long the store keeps the claim without a heartbeat (whole seconds).
    pub ttl: Duration,
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The item is this claim's, with attempt number `seen_attempt + 1`.
    Claimed,
    /// Someone else got there first, the item changed, or it does not exist.
    Lost,
}

/// How a claim ends without completing its item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reschedule<'a> {
    /// [`JobState::Retryable`], [`JobState::Available`] or [`JobState::Discarded`].
    pub state: JobState,
    /// Not before this wall-clock time (microseconds since the epoch).
    pub run_at: i64,
    /// Why.
    pub error: Option<&'a str>,
    /// `Some(n)`: the item's attempts count from `n` on (its `requeued_at`), so that a
    /// snooze gives the claim's attempt back; `None` leaves it.
    pub requeued_at: Option<i32>,
}

/// A work-queue backend. Object safe: use it as `Arc<dyn QueueStore>`.
#[async_trait]
pub trait QueueStore: Send + Sync + 'static {
    // ---- item rows: LWTs, one partition per item ----

    /// Writes a new available item unless its row exists (`IF NOT EXISTS`).
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError>;

    /// Starts a new job on the row of a completed unique item whose `done` marker has
    /// expired (its state cell is gone), if its attempt number is still `seen_attempt` and
    /// its origin `seen_origin`: the new payload, time and origin, state available, attempts
    /// counted again from `seen_attempt` (the number itself keeps growing).
    async fn revive(
        &self,
        row: NewRow<'_>,
        seen_attempt: i32,
        seen_origin: &str,
    ) -> Result<CasOutcome, StoreError>;

    /// Claims the item if nobody's claim is live, its attempt is still `seen_attempt` and it
    /// is claimable: sets it running with the next attempt number and a TTL'd claim.
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError>;

    /// Rewrites the claim with a fresh TTL, only while `claim_id` holds the item.
    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError>;

    /// Marks the item done (state `done` kept for `retention`, payload dropped, attempt
    /// kept), only while `claim_id` holds it.
    async fn complete(
        &self,
        key: &ItemKey,
        claim_id: &str,
        retention: Duration,
    ) -> Result<CasOutcome, StoreError>;

    /// Drops the claim and sets the state, time and error, only while `claim_id` holds it.
    async fn reschedule(
        &self,
        key: &ItemKey,
        claim_id: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError>;

    /// Undoes a claim that was never handed to a worker (its future was dropped, or it was
    /// answered after its deadline): drops the claim and restores the state and attempt
    /// number it had before, only while `claim_id` holds it. The attempt number it took was
    /// never used to fence anything, so later claims still get numbers above every
    /// delivered one.
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError>;

    /// A discarded item with attempt number `attempt` becomes available at `run_at`, its
    /// attempts counted again from `attempt` (the number itself is kept).
    async fn requeue(
        &self,
        key: &ItemKey,
        run_at: i64,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError>;

    /// A discarded item becomes done, only if discarded with attempt number `attempt` (the
    /// dead letter read, not a later one).
    async fn purge(
        &self,
        key: &ItemKey,
        retention: Duration,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError>;

    /// Fences off writes to an item still on their way, for index upkeep that is about to
    /// delete the item's last entry. [`Seal::Absent`]: writes an empty done row with origin
    /// [`SWEPT`] only if no row exists, so an enqueue arriving later is refused.
    /// [`Seal::Done`] and [`Seal::Discarded`]: raise the row's attempt number by one only if
    /// it is still as seen, so a revival or requeue conditioned on the attempt arriving
    /// later is refused (a fencing token is skipped, never reused; the origin stays, so a
    /// resent enqueue still knows its own row). `Applied` when the fence stands;
    /// `NotApplied` when the row is not as seen (the write arrived first: keep the entry).
    async fn seal(&self, key: &ItemKey, seen: Seal<'_>) -> Result<CasOutcome, StoreError>;

    /// Linearizable read of one item (SERIAL), to settle lost answers.
    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError>;

    /// Plain read of one item: a hint for a claimer looking at an index entry.
    async fn peek(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError>;

    // ---- the order index, the cursor and dead letters: plain writes only ----

    /// Writes an index entry with client timestamp `ts`.
    async fn put_entry(&self, queue: &str, entry: &IndexEntry, ts: i64) -> Result<(), StoreError>;

    /// Writes `new` (client timestamp `ts`) and deletes the entry `old_seq` of the same
    /// bucket (`delete_ts`) as one atomic write: both land or neither does (one partition,
    /// one batch). Returns `false`, having sent nothing, when this store cannot (the
    /// default). The queue itself no longer moves entries this way: a batch that lands late
    /// can put `new` under a range deletion ([`QueueStore::delete_range`]) and delete the old
    /// entry with it, so it places the new entry in time and then removes the old one.
    async fn move_entry(
        &self,
        queue: &str,
        new: &IndexEntry,
        old_seq: &str,
        ts: i64,
        delete_ts: i64,
    ) -> Result<bool, StoreError> {
        let _ = (queue, new, old_seq, ts, delete_ts);
        Ok(false)
    }

    /// Deletes an index entry with client timestamp `ts`.
    async fn delete_entry(
        &self,
        queue: &str,
        bucket: i64,
        seq: &str,
        ts: i64,
    ) -> Result<(), StoreError>;

    /// Deletes every entry of one bucket with `after < seq < before` (client timestamp
    /// `ts`) as one range deletion: a single tombstone that the rows under it merge into, so
    /// a later read of the range walks two markers instead of a tombstone per row. Returns
    /// `false`, having sent nothing, when this store cannot (the default): scans then walk
    /// the rows' own tombstones. Sent only for ranges a scan found without live entries and
    /// that no entry can land in any more (below its clock minus the cursor lag).
    async fn delete_range(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        let _ = (queue, bucket, after, before, ts);
        Ok(false)
    }

    /// Up to `limit` live entries of one bucket with `after < seq < before`, in order.
    async fn scan_index(
        &self,
        queue: &str,
        bucket: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError>;

    /// The queue's low-watermark cursor (0 when never written).
    async fn read_cursor(&self, queue: &str) -> Result<i64, StoreError>;

    /// Moves the cursor to `pos` if that is higher: written `USING TIMESTAMP pos`, so the
    /// stored value never decreases whatever order writes arrive in.
    async fn advance_cursor(&self, queue: &str, pos: i64) -> Result<(), StoreError>;

    /// Records that index bucket `bucket` holds entries, for `ttl` (whole seconds), so
    /// [`QueueStore::list_buckets`] finds buckets far ahead without reading the ones between.
    async fn put_bucket(
        &self,
        queue: &str,
        bucket: i64,
        ttl: Duration,
        ts: i64,
    ) -> Result<(), StoreError>;

    /// Up to `limit` recorded buckets above `after`, in order.
    async fn list_buckets(
        &self,
        queue: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<i64>, StoreError>;

    /// Records a dead letter.
    async fn put_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError>;

    /// Removes a dead letter.
    async fn delete_dead(&self, queue: &str, id: &ItemId, ts: i64) -> Result<(), StoreError>;

    /// Up to `limit` dead letters with ids above `after`.
    async fn list_dead(
        &self,
        queue: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<ItemId>, StoreError>;

    // ---- the bakery claim mode ----

    /// This backend's plain item rows and bakery cells for
    /// [`ClaimMode::Bakery`](crate::ClaimMode::Bakery), if it has them (`None`: the mode is
    /// refused).
    fn bakery_parts(&self) -> Option<crate::bakery::BakeryParts> {
        None
    }

    /// The claim mode this store decides claims in: a store made for one mode is refused
    /// by a queue in the other.
    fn claim_mode(&self) -> crate::ClaimMode {
        crate::ClaimMode::Lwt
    }
}
