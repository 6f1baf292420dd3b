//! The queue handle: settings, clock, index upkeep, listing.

use std::sync::Arc;
use std::time::Duration;

use cql_lease::{InvalidArgument, MAX_NAME_LEN, check_text};
use tracing::{debug, warn};

use crate::bakery::BakeryStore;
use crate::clock::{self, WallClock};
use crate::config::{ClaimMode, QueueConfig, micros};
use crate::dispatch::Dispatcher;
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, ItemId, ItemKey};
use crate::store::QueueStore;
use crate::worker::Worker;

/// A named work queue on a [`QueueStore`]. Cheap to clone; clones share one candidate
/// dispatcher, so a process's workers never race each other for the same item. Share it
/// between tasks by cloning it (no `Arc` needed), and make one [`Worker`] per consumer with
/// [`WorkQueue::worker`].
///
/// Each item is its own partition (its LWTs contend with nobody else's); an index of plain
/// rows, bucketed by time, orders them, and a low-watermark cursor keeps scans off drained
/// buckets. See the crate docs for the layout and why no item can become invisible.
///
/// ```
/// use std::sync::Arc;
/// use cql_workqueue::{ClaimOrder, QueueConfig, WorkQueue, memory::MemoryQueueStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// // Strictly oldest first (the default, `ClaimOrder::Spread`, picks among the first few at
/// // random).
/// let config = QueueConfig { order: ClaimOrder::OldestFirst, ..QueueConfig::default() };
/// let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "emails", config)?;
/// queue.enqueue("send welcome to ada@example.com").await?;
/// queue.enqueue("send welcome to bob@example.com").await?;
///
/// let job = queue.claim("worker-1").await?.expect("an item");
/// assert_eq!(job.payload(), "send welcome to ada@example.com");
/// assert_eq!(job.attempt(), 1);
/// job.complete().await?;
/// assert_eq!(queue.items().await?.len(), 1);
/// # Ok::<(), cql_workqueue::QueueError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct WorkQueue {
    pub(crate) store: Arc<dyn QueueStore>,
    name: Arc<str>,
    pub(crate) config: QueueConfig,
    pub(crate) clock: WallClock,
    pub(crate) dispatcher: Arc<Dispatcher>,
}

impl std::fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl WorkQueue {
    /// A handle on the queue `name`, after checking the name and settings. Every call to
    /// `store` waits at most the claim timing's request timeout
    /// ([`Timing::effective_request_timeout`](cql_lease::Timing::effective_request_timeout)
    /// of `config.claim`): a read or a plain write cut by it is sent again at once, to
    /// another coordinator; an LWT cut by it has an unknown outcome, settled by reading back.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] for a bad name or settings, or for
    /// [`ClaimMode::Bakery`] on a store without [`QueueStore::bakery_parts`].
    pub fn new(
        store: Arc<dyn QueueStore>,
        name: &str,
        config: QueueConfig,
    ) -> Result<Self, QueueError> {
        check_text("queue name", name, MAX_NAME_LEN)?;
        config.validate()?;
        let timeout = config.timing.effective_request_timeout();
        // Every request bounded by the claim timing (the bakery's plain rows and cells bound
        // their own requests the same way).
        let timed = |store| -> Arc<dyn QueueStore> {
            Arc::new(crate::timed::TimedQueueStore::new(store, timeout))
        };
        let store = match (config.claim_mode, store.claim_mode()) {
            (ClaimMode::Lwt, ClaimMode::Lwt) => timed(store),
            (ClaimMode::Bakery, ClaimMode::Bakery) => store,
            (ClaimMode::Lwt, ClaimMode::Bakery) => {
                return Err(InvalidArgument::Invalid {
                    field: "claim_mode",
                    reason: "the store decides claims in the bakery mode; a queue is in one \
                             mode for its lifetime"
                        .into(),
                }
                .into());
            }
            (ClaimMode::Bakery, ClaimMode::Lwt) => {
                let parts = store.bakery_parts().ok_or(InvalidArgument::Invalid {
                    field: "claim_mode",
                    reason: "this store has no plain item table for the bakery mode".into(),
                })?;
                let bakery = BakeryStore::new(timed(store), parts, config.timing)
                    .map_err(|e| InvalidArgument::Timing(e.to_string()))?;
                Arc::new(bakery) as Arc<dyn QueueStore>
            }
        };
        Ok(WorkQueue {
            // Metered outside the timeout, so a round trip cut by it is recorded as cut.
            store: crate::metered::MeteredStore::wrap(store),
            name: name.into(),
            config,
            clock: WallClock::system(),
            dispatcher: Arc::default(),
        })
    }

    /// The same queue seen by a process whose wall clock reads `clock` (for drills and
    /// tests of skewed clocks). It gets its own dispatcher, like another process.
    pub fn with_clock(&self, clock: WallClock) -> Self {
        WorkQueue {
            clock,
            dispatcher: Arc::default(),
            ..self.clone()
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Counts one queue event (`metric` is one of [`cql_lease::metrics`]'s queue counters).
    pub(crate) fn count(&self, metric: &'static str) {
        cql_lease::metrics::queue_event(metric, &self.name);
    }

    /// Records how many candidates a successful claim tried.
    pub(crate) fn count_claim_attempts(&self, candidates: usize) {
        cql_lease::metrics::claim_attempts(&self.name, candidates);
    }

    /// Sets the depth gauges from freshly read stats.
    pub(crate) fn record_stats(&self, stats: &crate::QueueStats) {
        let by_state = [
            ("available", stats.available),
            ("scheduled", stats.scheduled),
            ("running", stats.running),
            ("dead", stats.dead),
        ];
        cql_lease::metrics::queue_depth(&self.name, by_state, stats.oldest_available_age);
    }

    /// Claims this handle's process has sent so far (shared by clones, not by
    /// [`WorkQueue::with_clock`] handles): claim LWTs in [`ClaimMode::Lwt`], bakery draws in
    /// [`ClaimMode::Bakery`]. For benchmarks: attempts per claimed item measure contention.
    pub fn claim_attempts(&self) -> u64 {
        self.dispatcher
            .claim_attempts
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store as this queue uses it: in [`ClaimMode::Bakery`], the LWT-free layer over
    /// the backend's plain rows and cells (for tools and tests that read items directly).
    pub fn store(&self) -> &Arc<dyn QueueStore> {
        &self.store
    }

    /// A worker that claims jobs from this queue as a stream. See [`Worker`].
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] for a bad worker id.
    pub fn worker(&self, worker: &str) -> Result<Worker, QueueError> {
        Worker::new(self.clone(), worker)
    }

    pub(crate) fn key(&self, id: ItemId) -> ItemKey {
        ItemKey {
            partition: self.name.to_string(),
            id,
        }
    }

    /// This handle's wall clock: fresh, and strictly increasing, so this process's entries
    /// never share a position.
    pub(crate) fn now(&self) -> i64 {
        self.clock.next_micros()
    }

    /// The cursor a scan starts from: the stored one, or `cold_start` ago if never written
    /// (then `cold` is true).
    pub(crate) async fn read_cursor_cold(&self) -> Result<(i64, bool), QueueError> {
        let stored =
            self.store
                .read_cursor(&self.name)
                .await
                .map_err(|source| QueueError::Store {
                    operation: "read cursor",
                    source,
                })?;
        if stored > 0 {
            self.dispatcher.saw_cursor(stored);
            Ok((stored, false))
        } else {
            Ok((self.now() - micros(self.config.cold_start), true))
        }
    }

    /// [`Self::read_cursor_cold`] without the flag.
    pub(crate) async fn read_cursor(&self) -> Result<i64, QueueError> {
        Ok(self.read_cursor_cold().await?.0)
    }

    pub(crate) fn entry(
        &self,
        id: &ItemId,
        pos: i64,
        kind: EntryKind,
        immediate: bool,
        attempt: i32,
    ) -> IndexEntry {
        IndexEntry::new(
            id.clone(),
            pos,
            kind,
            immediate,
            attempt,
            self.config.bucket_micros(),
        )
    }

    /// A check entry for an item just claimed (or seen held): at its claim's expiry.
    pub(crate) fn check_entry(&self, id: &ItemId, attempt: i32) -> IndexEntry {
        let pos = self.now() + micros(self.config.timing.store_ttl());
        // Ahead of every scan, and usually deleted before one reaches it: counted here, as
        // no read will count it (see `dispatch::ledger`).
        self.dispatcher.placed_at(pos);
        self.entry(id, pos, EntryKind::Check, false, attempt)
    }

    /// Writes an index entry (plain write, this process's next client timestamp). An entry
    /// beyond the next bucket also records its bucket in the bucket directory (once per
    /// process and bucket), so [`WorkQueue::stats`] finds it without reading every bucket
    /// in between.
    pub(crate) async fn place(&self, entry: &IndexEntry) -> Result<(), QueueError> {
        debug!(queue = %self.name, id = %entry.id, seq = %entry.seq, "index entry placed");
        let store_err = |operation| move |source| QueueError::Store { operation, source };
        self.store
            .put_entry(&self.name, entry, clock::next_micros())
            .await
            .map_err(store_err("place index entry"))?;
        let width = self.config.bucket_micros();
        let now = self.now();
        if entry.bucket > now / width + 1
            && self.dispatcher.note_far_bucket(entry.bucket, now / width)
        {
            // Kept until a bucket after it is current: by then scans from the cursor read it.
            // At most the longest TTL Cassandra takes (an item 20 years ahead, the most
            // `run_at` allows, loses its record two buckets early).
            let until = entry.bucket.saturating_add(2).saturating_mul(width);
            let ttl = Duration::from_micros(u64::try_from(until.saturating_sub(now)).unwrap_or(0))
                .min(cql_lease::MAX_DURATION);
            let result = self
                .store
                .put_bucket(&self.name, entry.bucket, ttl, clock::next_micros())
                .await;
            if let Err(source) = result {
                self.dispatcher.forget_far_bucket(entry.bucket);
                return Err(store_err("record index bucket")(source));
            }
        }
        Ok(())
    }

    /// Deletes an index entry. A failure leaves a stale entry that later scans clean up.
    pub(crate) async fn remove(&self, entry: &IndexEntry) {
        let result = self
            .store
            .delete_entry(&self.name, entry.bucket, &entry.seq, clock::next_micros())
            .await;
        match result {
            Ok(()) => debug!(queue = %self.name, seq = %entry.seq, "index entry removed"),
            Err(error) => {
                warn!(queue = %self.name, seq = %entry.seq, %error, "index delete failed")
            }
        }
    }

    /// Deletes an index entry in a spawned task (nobody waits for it: a failure leaves a
    /// stale entry that later scans clean up).
    pub(crate) fn remove_later(&self, entry: &IndexEntry) {
        let (queue, entry) = (self.clone(), entry.clone());
        tokio::spawn(async move { queue.remove(&entry).await });
    }

    /// Places `new` then removes `old`, so the item always has an entry: `new` in time for
    /// its position (placed again further on if its write landed late, see
    /// `placement`), and `old` only once it has. Returns the entry placed and when its write
    /// was sent. Never one batch: a batch landing late could put `new` under a range
    /// deletion of a scanner that saw `old` live (`dispatch::compact`), and delete `old`
    /// with it, leaving the item without an entry.
    pub(crate) async fn replace(
        &self,
        old: &IndexEntry,
        new: &IndexEntry,
    ) -> Result<(IndexEntry, tokio::time::Instant), QueueError> {
        let placed = self.place_in_time(new.clone()).await?;
        self.remove(old).await;
        Ok(placed)
    }
}
