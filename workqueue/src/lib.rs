//! A distributed work queue on Paxos lightweight transactions, after the Cassandra wiki's
//! work queue, with its open issues closed: workers hold a lease (not a lock) on an item, idle
//! workers back off, and a claim never scans from the start of time.
//!
//! - [`WorkQueue::enqueue`] stores an item in one of `shards` partitions under an id that
//!   sorts by enqueue time.
//! - [`WorkQueue::claim`] (or a [`Worker`] stream) takes the oldest claimable item with one
//!   LWT that also takes the item's next attempt number, the claim's fencing token.
//! - A [`Job`] keeps its claim alive and tells the worker to stop (token, watch) before the
//!   claim can lapse for others; [`Job::complete`] deletes the item, [`Job::fail`] schedules a
//!   retry with back-off or discards it after `max_attempts`.
//! - A worker that dies leaves its claim to expire; the item is then claimed again, with a
//!   higher attempt number.
//!
//! Delivery is at least once: a worker can finish the work and die before `complete`. Fence
//! side effects with [`Job::token`] or make them idempotent.
//!
//! Backends implement [`QueueStore`]: [`scylla::ScyllaQueueStore`] and
//! [`memory::MemoryQueueStore`].

mod claim;
pub mod clock;
mod config;
mod error;
mod item;
mod job;
pub mod memory;
mod queue;
pub mod scylla;
mod store;
mod worker;

pub use config::{MAX_PAYLOAD_LEN, QueueConfig};
pub use error::QueueError;
pub use item::{ItemId, ItemKey, JobState, StoredItem};
pub use job::Job;
pub use queue::WorkQueue;
pub use store::{ClaimOutcome, ItemClaim, QueueStore, Reschedule};
pub use worker::Worker;
