//! `Tweaked`: a process's view of a queue store with a few quirks (late, slow or lost LWTs
//! and answers, slow index scans and writes, failing deletes, a seal before a requeue, timed
//! reads, wrapped plain item rows), every other call passed straight through. The one
//! forwarding wrapper the queue's fault tests build their stores from.

mod read_times;
mod store;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_workqueue::bakery::PlainItemStore;
use cql_workqueue::store::QueueStore;
use tokio::time::Instant;

pub use read_times::ReadTimes;

use crate::backend::Backend;
use crate::conformance::queue::queue_store;

/// Wraps the inner store's plain item rows (bakery mode): given them, returns what the
/// process sees instead.
pub type WrapItems = Box<dyn Fn(Arc<dyn PlainItemStore>) -> Arc<dyn PlainItemStore> + Send + Sync>;

/// A process's view of the store with one quirk, everything else passing straight through
/// (every quirk is off in [`Tweaked::new`]: a plain pass-through). Set the quirks wanted
/// with `Tweaked { quirk, ..Tweaked::over(&backend) }`.
pub struct Tweaked {
    /// The store every call is passed to.
    pub inner: Arc<dyn QueueStore>,
    /// Its index reads of buckets above this one take `delay` (under the request timeout),
    /// so a scan that walks several buckets is spread over time, as any multi-bucket scan is
    /// on a real cluster (one request per bucket).
    pub slow_above: Option<i64>,
    /// How long `slow_above`'s index reads take.
    pub delay: Duration,
    /// Its first revive LWT answers "unknown" at once and is applied that much later (a
    /// Paxos proposal accepted but committed only by a later round), its later ones fail
    /// before they are sent (the partition's replicas unreachable from it).
    pub late_revive: Option<Duration>,
    /// Its first revive LWT answers "unknown" at once and is applied that much later (its
    /// coordinator still retrying the Paxos round, the condition read then); later ones
    /// pass through.
    pub first_revive_late: Option<Duration>,
    /// Like `late_revive`, for the enqueue LWT.
    pub late_enqueue: Option<Duration>,
    /// Like `late_revive`, for the dead-letter requeue LWT.
    pub late_requeue: Option<Duration>,
    /// Its first claim LWT answers "unknown" at once and is applied that much later, its
    /// second is refused before it is sent, later ones pass through.
    pub late_claim: Option<Duration>,
    /// The plain item rows (bakery mode) seen through this wrapper.
    pub wrap_items: Option<WrapItems>,
    /// Its first enqueue LWT applies, and its answer is lost.
    pub lost_enqueue_answer: bool,
    /// Its index deletes fail (the index replicas unreachable from it).
    pub fail_deletes: bool,
    /// Its first requeue LWT arrives just after index upkeep sealed the dead letter.
    pub seal_before_requeue: bool,
    /// Each revive LWT reaches the store this much later (a slow coordinator).
    pub slow_revive: Option<Duration>,
    /// Each requeue LWT reaches the store this much later.
    pub slow_requeue: Option<Duration>,
    /// Requeue LWTs never reach a replica; their answers are "unknown".
    pub lost_requeues: bool,
    /// Purge LWTs apply, and their answers are lost (after a while, within the request
    /// timeout).
    pub lost_purge_answers: bool,
    /// Purge LWTs never reach a replica; their answers are "unknown" this much later
    /// (within the request timeout).
    pub purges_lost_after: Option<Duration>,
    /// Purge LWTs answer "unknown" at once, and their Paxos round applies this much later
    /// (a coordinator still retrying after the client gave up).
    pub late_purges: Option<Duration>,
    /// Its first requeue LWT applies, and its answer is lost this much later (within the
    /// request timeout); later ones pass through.
    pub first_requeue_answer_lost_after: Option<Duration>,
    /// Enqueue LWTs fail before they are sent (replicas unreachable) until this instant.
    pub enqueues_fail_until: Option<Instant>,
    /// The first index write of an entry naming an attempt above 0 lands this much later
    /// (within the request timeout).
    pub slow_first_revival_entry: Option<Duration>,
    /// Its reads (rows, index, cursor, buckets, dead letters) are timed here.
    pub time_reads: Option<ReadTimes>,
    /// Its placements of check entries (a claim's) reach the inner store and apply, and
    /// their answers are lost ("unknown") this much later (within the request timeout): a
    /// write whose coordinator timed out although it landed.
    pub check_answers_lost_after: Option<Duration>,
    /// Its unclaim LWTs (an undelivered claim given back) apply, and their answers are lost
    /// ("unknown"): a Paxos round committed whose coordinator timed out answering.
    pub unclaim_answers_lost: bool,
    /// Its reschedule LWTs (a finish, or a delivered claim handed back) apply, and their
    /// answers are lost ("unknown").
    pub reschedule_answers_lost: bool,
    /// Its first unclaim LWT answers "unknown" at once and is applied that much later (its
    /// coordinator still retrying the Paxos round); later ones pass through.
    pub first_unclaim_late: Option<Duration>,
    /// Its first reschedule LWT (a finish, or a delivered claim handed back) answers
    /// "unknown" at once and is applied that much later (its coordinator still retrying the
    /// Paxos round); later ones pass through.
    pub first_reschedule_late: Option<Duration>,
    /// When each revive LWT was sent.
    pub revives_sent: Mutex<Vec<Instant>>,
    /// What the quirks have counted so far.
    pub counters: Counters,
}

/// The calls the quirks have seen so far (each quirk's own state, private to it).
#[derive(Debug, Default)]
pub struct Counters {
    revives: AtomicUsize,
    enqueues: AtomicUsize,
    requeues: AtomicUsize,
    claims: AtomicUsize,
    unclaims: AtomicUsize,
    reschedules: AtomicUsize,
    slowed: AtomicBool,
}

impl Tweaked {
    /// No quirk, over `inner`.
    pub fn new(inner: Arc<dyn QueueStore>) -> Self {
        Tweaked {
            inner,
            slow_above: None,
            delay: Duration::ZERO,
            late_revive: None,
            first_revive_late: None,
            late_enqueue: None,
            late_requeue: None,
            late_claim: None,
            wrap_items: None,
            lost_enqueue_answer: false,
            fail_deletes: false,
            seal_before_requeue: false,
            slow_revive: None,
            slow_requeue: None,
            lost_requeues: false,
            lost_purge_answers: false,
            purges_lost_after: None,
            late_purges: None,
            first_requeue_answer_lost_after: None,
            enqueues_fail_until: None,
            slow_first_revival_entry: None,
            time_reads: None,
            check_answers_lost_after: None,
            unclaim_answers_lost: false,
            reschedule_answers_lost: false,
            first_unclaim_late: None,
            first_reschedule_late: None,
            revives_sent: Mutex::default(),
            counters: Counters::default(),
        }
    }

    /// No quirk, over the backend's queue store.
    pub fn over(b: &dyn Backend) -> Self {
        Self::new(queue_store(b))
    }
}
