//! The work queue's error type.

use cql_lease::{InvalidArgument, StoreError};

use crate::item::ItemId;

/// What can go wrong with a queue call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueueError {
    /// Bad input or settings; nothing was sent to the store.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// The store failed and nothing was changed by this call: from an enqueue, the item was
    /// not added.
    #[error("{operation} failed: {source}")]
    Store {
        /// What was attempted.
        operation: &'static str,
        /// The store's error.
        source: StoreError,
    },
    /// The answer was lost and a read-back could not settle it in time: the change may or
    /// may not have been made. From an enqueue, the item may exist (or its write may still
    /// land); look for `id` (for instance with [`WorkQueue::items`](crate::WorkQueue::items))
    /// before enqueueing it again, or enqueue it with a unique key so a second enqueue is a
    /// duplicate.
    #[error("{operation} on item {id}: outcome unknown: {source}")]
    OutcomeUnknown {
        /// What was attempted.
        operation: &'static str,
        /// The item.
        id: ItemId,
        /// The last store error.
        source: StoreError,
    },
    /// A payload could not be encoded or decoded as JSON.
    #[error("payload: {0}")]
    Payload(String),
    /// This worker's claim on the item is gone (it expired, or another worker took the item
    /// over): the item's fate is no longer this worker's to decide.
    #[error("the claim on item {id} was lost")]
    ClaimLost {
        /// The item.
        id: ItemId,
    },
}
