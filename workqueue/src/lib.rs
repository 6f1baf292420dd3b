//! A distributed work queue on Paxos lightweight transactions, after the Cassandra wiki's
//! work queue, with its open issues closed: workers hold a lease (not a lock) on an item, idle
//! workers back off, and a claim never scans from the start of time.
//!
//! # Layout
//!
//! - **Item rows**, one partition per item `(queue, id)`, written only with LWTs: enqueue
//!   (`IF NOT EXISTS`), claim (takes the next attempt number with a TTL'd claim cell),
//!   heartbeat, complete, reschedule. Paxos state is per partition, so items never contend
//!   with each other. Completion leaves a `done` marker (state `done` for `done_retention`;
//!   the row marker and attempt number stay), so a resent enqueue cannot bring a completed
//!   item back and an attempt number (the claim's fencing token) is never issued twice.
//! - **Order index**, partitions `(queue, bucket)` where `bucket = pos / bucket_width`,
//!   clustered by `"{pos:020}-{kind}-{id}"`, written only with plain writes carrying this
//!   process's monotonic client timestamps. A `run` entry says "claimable from `pos`"
//!   (immediate items are claimable as soon as seen, whatever their `pos`, which only orders
//!   them; delayed and retrying items sit at their `run_at`). A claimed item's `run` entry is
//!   replaced by a `check` entry at its claim's expiry: claimed items leave the hot path,
//!   and a lapsed claim is still found; a check entry found still held is pushed forward
//!   (heartbeats never touch the index).
//! - **Cursor**: one cell per queue, the low watermark below which every index entry is
//!   dead. Written with `USING TIMESTAMP = value`, so it never decreases. Scans start at the
//!   cursor (or at the process's own position past it), never at the start of time, so
//!   completed items' tombstones are not walked again and drained buckets are not read.
//! - **Dead letters**: discarded items move out of the index into a per-queue list
//!   ([`WorkQueue::dead_letters`], [`WorkQueue::requeue_dead`], [`WorkQueue::purge_dead`]).
//!
//! # Why no item becomes invisible
//!
//! 1. An item that is not done always has an index entry: entries are placed before the row
//!    is written (enqueue) and every change places the new entry before removing the old
//!    (or both at once, in one single-partition batch, when they share a bucket).
//!    A claimer that crashes between steps leaves the older entry, and whoever finds it
//!    repairs the item's entry from the row's state.
//! 2. The cursor never passes a live entry: a scanner moves it to at most the first live
//!    entry it saw, and at most to its own clock minus `cursor_lag` (`1 s + 2 x skew`).
//!    An entry whose write finished within `lag - 2 x skew` of its enqueuer's (correct within
//!    `max_clock_skew`) clock reading lies above every cursor value any scanner that missed it
//!    can write. An entry that landed later is placed again, at a fresh position, before the
//!    item's row is written, so a process dying at any later step leaves a findable entry.
//!    An enqueuer whose clock is behind by more than the skew re-reads the cursor after
//!    writing and re-places its entry ahead of it ([`WorkQueue::enqueue_item`]). Enqueues
//!    also never place below the cursor this process last saw, nor below their own clock.
//! 3. A process's own scan position can pass entries written behind it; it rescans from the
//!    cursor every `cursor_refresh` and whenever its own position finds nothing.
//! 4. Entries only move forward. An enqueuer whose clock is ahead of the *fleet clock* (the
//!    latest clock reading any scanner noted) places a copy of an immediate entry where
//!    scanners read and keeps the original: a scan already past the copy cannot lose it.
//! 5. Index upkeep deletes an item's last entry only once the row is sealed against writes
//!    still on their way ([`store::QueueStore::seal`]): a late enqueue or revival is refused rather
//!    than creating an item without an entry.
//!
//! - **Bucket directory**: an entry placed beyond the next bucket (a delayed item, a long
//!   back-off) also records its bucket, TTL'd until scans from the cursor reach it, so
//!   [`WorkQueue::stats`] counts items however far ahead without reading the empty buckets
//!   between.
//!
//! # Convoys
//!
//! Clones of a [`WorkQueue`] share one dispatcher: one index read fills a buffer of
//! candidates (several per local claimer) and each local claimer takes a different one, so
//! a process's workers never race each other. Across processes: every candidate's item is
//! read before its claim LWT, so an item another process already holds costs a plain read,
//! not a Paxos round; claims carry a per-process tag, so a process never mistakes its own
//! claims for another's; and processes share the head out by slots (a hash of the item id):
//! every slot belongs to one of the processes a process has met (rendezvous hashing over the
//! tags of the claims it ran into), and a process does not even read the items of others'
//! slots. When idle it takes ("steals") the entries it passed over that still wait
//! `500 ms` later, newest first, so no item depends on its slot's owner being alive; a
//! process not met for `3 x cursor_refresh` is forgotten and its slots come back.
//!
//! # Unique jobs
//!
//! A unique key's row is reused: while its job exists and for `done_retention` after it
//! completed, a new enqueue of the key is a duplicate; after that a new enqueue starts a new
//! job on the row (one more LWT, conditioned on the done marker having expired and on the
//! attempt and origin read), its attempt numbers continuing. A resent enqueue carries its
//! call's origin, so it is recognised as the same enqueue even after its job completed.
//!
//! Delivery is at least once: a worker can finish the work and die before `complete`. Fence
//! side effects with [`Job::token`] or make them idempotent.
//!
//! # Claim modes
//!
//! [`QueueConfig::claim_mode`] picks how claims are decided: [`ClaimMode::Lwt`] (above) or
//! [`ClaimMode::Bakery`], which sends no LWT at all (the Cassandra wiki's bakery numbering per item,
//! see [`bakery`]) for stores that have none. Same API, index and worker runtime.
//!
//! Backends implement [`store::QueueStore`]: `scylla::ScyllaQueueStore` (the `scylla`
//! feature, on by default; with `default-features = false` the driver is not built) and
//! [`memory::MemoryQueueStore`]. The crate root holds what users call; the [`store`] module
//! holds the storage interface and its row types, for backend writers.
//!
//! [`QueueConfig::default`] suits any cluster (claims on [`Timing::default`] with a 1 s retry
//! period, 5 attempts, back-off from 1 s doubling up to 1 h). [`QueueError`] is
//! `Clone + Send + Sync + 'static`: it crosses `tokio::spawn` and `?` converts it into
//! `Box<dyn Error + Send + Sync>`.

mod attempt;
pub mod bakery;
mod claim;
mod client;
pub mod clock;
mod config;
mod deadletter;
mod dispatch;
mod enqueue;
mod error;
mod index_walk;
mod item;
mod job;
pub mod memory;
mod metered;
mod new_item;
mod orphans;
pub mod periodic;
mod placement;
mod queue;
#[cfg(feature = "scylla")]
pub mod scylla;
mod slots;
mod stats;
pub mod store;
mod timed;
mod typed;
mod worker;

pub use client::{MAX_CLIENT_QUEUES, MAX_CONCURRENCY, QueueClient, QueueClientBuilder, StopReport};
pub use clock::WallClock;
pub use config::{ClaimMode, ClaimOrder, MAX_PAYLOAD_LEN, QueueConfig};
/// The timing type every primitive shares (re-exported from [`cql_lease`]).
pub use cql_lease::Timing;
pub use deadletter::DeadLetter;
pub use error::QueueError;
pub use index_walk::IndexRead;
pub use item::{ItemId, ItemKey, JobState, StoredItem};
pub use job::Job;
pub use new_item::{Enqueued, MAX_UNIQUE_KEY_LEN, NewItem};
pub use queue::WorkQueue;
pub use stats::QueueStats;
pub use typed::{JobError, TypedJob};

// `QueueError` crosses `tokio::spawn` and converts into `Box<dyn Error + Send + Sync>`.
const _: () = {
    const fn thread_safe_error<E: std::error::Error + Clone + Send + Sync + 'static>() {}
    thread_safe_error::<QueueError>();
};
pub use worker::{Drain, DrainReport, Worker};
