//! The narrow storage interface of the work queue.
//!
//! Each method is one round trip: an LWT for every write (all cells of the item table are
//! written through Paxos only), a plain read for `scan` (a hint: the claim's condition is what
//! decides), and a linearizable read for `read`, used to resolve lost answers.

use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};

use crate::item::{ItemKey, JobState, StoredItem};

/// A claim on one item.
#[derive(Debug, Clone, Copy)]
pub struct ItemClaim<'a> {
    /// The item.
    pub key: &'a ItemKey,
    /// The unique id of this claim attempt.
    pub claim_id: &'a str,
    /// The attempt number seen by the scan; the claim writes `seen_attempt + 1`.
    pub seen_attempt: i32,
    /// How long the store keeps the claim without a heartbeat (whole seconds).
    pub ttl: Duration,
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The item is this claim's, with attempt number `seen_attempt + 1`.
    Claimed,
    /// Someone else got there first, the item changed, or it is gone.
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
}

/// A work-queue backend. Object safe: use it as `Arc<dyn QueueStore>`.
#[async_trait]
pub trait QueueStore: Send + Sync + 'static {
    /// Writes a new available item unless its key exists. `NotApplied` means it existed.
    async fn enqueue(
        &self,
        key: &ItemKey,
        payload: &str,
        run_at: i64,
    ) -> Result<CasOutcome, StoreError>;

    /// Up to `limit` items of `partition` with ids above `after`, oldest first.
    async fn scan(
        &self,
        partition: &str,
        after: &str,
        limit: u32,
    ) -> Result<Vec<StoredItem>, StoreError>;

    /// Claims the item if nobody's claim is live, its attempt is still `seen_attempt` and it
    /// is not discarded: sets it running with the next attempt number and a TTL'd claim.
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError>;

    /// Rewrites the claim with a fresh TTL, only while `claim_id` holds the item.
    async fn heartbeat(
        &self,
        key: &ItemKey,
        claim_id: &str,
        ttl: Duration,
    ) -> Result<CasOutcome, StoreError>;

    /// Deletes the item, only while `claim_id` holds it.
    async fn complete(&self, key: &ItemKey, claim_id: &str) -> Result<CasOutcome, StoreError>;

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
    /// never used to fence anything, so the item loses no attempt and later claims still get
    /// numbers above every delivered one.
    async fn unclaim(
        &self,
        key: &ItemKey,
        claim_id: &str,
        state: JobState,
        attempt: i32,
    ) -> Result<CasOutcome, StoreError>;

    /// Linearizable read of one item.
    async fn read(&self, key: &ItemKey) -> Result<Option<StoredItem>, StoreError>;
}
